"""nccl-tests results that GPU vendors and cloud providers published, as data (nothing modeled).

Each :class:`PublishedNcclTest` is one ``all_reduce_perf`` sweep a source printed: the system it
ran on, how many GPUs, the NCCL version, the algorithm if the run forced one (``NCCL_ALGO``, or
named by the source), and the bus bandwidth (GB/s, as nccl-tests defines it: the algorithm
bandwidth times ``2(n-1)/n``) at each message size. Out-of-place figures where a source prints
both, in-place where it prints only those. The model priced against them is
:mod:`recnotebooks.perf.components.nccl`; the comparison, :mod:`recnotebooks.perf.nccl_tests`.

Searched and not found (2026-12-05): vendor nccl-tests figures for a GB200 NVL72 at 8, 16, 32 or
64 GPUs (CoreWeave publishes the full rack and 2 and 20 racks, Azure one 4-GPU tray), and
published all-gather, reduce-scatter or all-to-all sweeps of these systems. Searched: NVIDIA's
nccl and nccl-tests issues, the Azure AI-benchmarking-guide, CoreWeave's nccl-tests, NVIDIA's
documentation and blogs (through this project's search of stored public pages).
"""

from __future__ import annotations

from dataclasses import dataclass

from recnotebooks.checks import check_float, check_int, check_str

__all__ = ["NCCL_TESTS", "PublishedNcclTest"]

_AZURE = "https://github.com/Azure/AI-benchmarking-guide/blob"
_COREWEAVE = "https://github.com/coreweave/nccl-tests/blob"


@dataclass(frozen=True)
class PublishedNcclTest:
    """One published nccl-tests sweep: ``busbw`` (bytes -> GB/s) of ``collective`` on ``ranks``
    GPUs (``node_size`` per node, ``domain_size`` per NVLink domain) of ``system``."""

    key: str
    system: str
    source: str  #: the address, at the commit read
    date: str  #: when the source published it
    nccl: str  #: NCCL version of the run
    collective: str
    ranks: int
    node_size: int
    domain_size: int
    algorithm: str | None  #: the algorithm the run forced or the source names, else None
    busbw: tuple[tuple[int, float], ...]
    note: str = ""

    def __post_init__(self) -> None:
        for name in ("key", "system", "source", "date", "nccl", "collective"):
            check_str(name, getattr(self, name))
        check_int("ranks", self.ranks, lo=2)
        check_int("node_size", self.node_size, lo=1)
        check_int("domain_size", self.domain_size, lo=1)
        for size, bw in self.busbw:
            check_int("size", size, lo=1)
            check_float("busbw", bw, lo=0, lo_open=True)


_GIB = 1 << 30
_MIB = 1 << 20
_KIB = 1 << 10
# Azure prints sizes rounded down ("65K" is 65536 B, "33M" 33554432 B): powers of two from 1 KiB.
_POW2 = tuple(_KIB << i for i in range(24))

NCCL_TESTS: tuple[PublishedNcclTest, ...] = (
    PublishedNcclTest(
        key="azure_nd_h100_v5",
        system="Azure ND H100 v5: 8x H100 SXM on NVSwitch (one node)",
        source=f"{_AZURE}/ae0b6a7/Azure_Results/ND_H100_v5_results.md (section NCCL Bandwidth)",
        date="2024-09-24",
        nccl="2.18.5",
        collective="all_reduce",
        ranks=8,
        node_size=8,
        domain_size=8,
        algorithm="nvls",
        busbw=tuple(
            zip(
                _POW2,
                (
                    0.07,
                    0.14,
                    0.27,
                    0.53,
                    0.95,
                    1.71,
                    2.72,
                    5.40,
                    10.86,
                    21.35,
                    43.70,
                    81.93,
                    128.73,
                    172.13,
                    234.45,
                    295.53,
                    361.78,
                    400.61,
                    423.38,
                    438.46,
                    466.35,
                    472.36,
                    475.54,
                    478.87,
                ),
                strict=True,
            )
        ),  # fmt: skip
        note="in-place; the source: 'NCCL AllReduce (NVLS algorithm)'",
    ),
    PublishedNcclTest(
        key="coreweave_h100_64",
        system="CoreWeave HGX H100: 8 nodes x 8 H100, 8x 400 Gb/s InfiniBand NDR per node, SHARP",
        source=f"{_COREWEAVE}/fb4787c/README.md (its job: "
        "mpi-operator/nccl-test-distributed-h100-64-sharp-las1-mpijob.yaml)",
        date="2023-06-15",
        nccl="2.18.1",
        collective="all_reduce",
        ranks=64,
        node_size=8,
        domain_size=8,
        algorithm="collnet_chain",
        busbw=(
            (512 * _MIB, 356.01),
            (_GIB, 365.90),
            (2 * _GIB, 380.73),
            (4 * _GIB, 383.23),
            (8 * _GIB, 386.56),
        ),
        note="out-of-place; the job sets NCCL_ALGO=COLLNETCHAIN and NCCL_COLLNET_ENABLE=1",
    ),
    PublishedNcclTest(
        key="azure_nd_gb200_v6",
        system="Azure ND GB200 v6: one 4-GPU GB200 tray of an NVL72 rack",
        source=f"{_AZURE}/2a370be6de9586d365feed77e014a73f25198f4d/Azure_Results/ND_GB200_v6_results.md",
        date="2025-03 (cited by Azure/AI-benchmarking-guide issue 7, 2025-03-31)",
        nccl="2.25.1",
        collective="all_reduce",
        ranks=4,
        node_size=4,
        domain_size=72,
        algorithm="ring",
        busbw=tuple(
            zip(
                _POW2,
                (
                    0.10,
                    0.19,
                    0.38,
                    0.76,
                    1.46,
                    2.88,
                    5.71,
                    11.29,
                    22.41,
                    44.07,
                    80.48,
                    110.43,
                    146.27,
                    253.46,
                    331.09,
                    422.62,
                    550.73,
                    574.19,
                    593.53,
                    618.74,
                    646.87,
                    666.63,
                    673.06,
                    679.61,
                ),
                strict=True,
            )
        ),  # fmt: skip
        note="in-place; the source: 'NCCL AllReduce (Ring algorithm)'",
    ),
    PublishedNcclTest(
        key="coreweave_gb200_nvl72",
        system="CoreWeave GB200 NVL72: one rack, 18 trays x 4 GPUs, multi-node NVLink",
        source=f"{_COREWEAVE}/bee97e7/README.md (section GB200, Single Rack; pull request 43)",
        date="2025-05-05",
        nccl="2.26.2",
        collective="all_reduce",
        ranks=72,
        node_size=4,
        domain_size=72,
        algorithm=None,
        busbw=(
            (512 * _MIB, 586.06),
            (_GIB, 681.17),
            (2 * _GIB, 757.78),
            (4 * _GIB, 839.16),
            (8 * _GIB, 834.57),
        ),
        note="out-of-place; NCCL's default choice (NCCL_MNNVL_ENABLE=1)",
    ),
    PublishedNcclTest(
        key="coreweave_gb200_2racks",
        system="CoreWeave GB200 NVL72: two racks (144 GPUs), InfiniBand between the racks",
        source=f"{_COREWEAVE}/bee97e7/README.md (section GB200, 2 Racks)",
        date="2025-05-05",
        nccl="2.26.2",
        collective="all_reduce",
        ranks=144,
        node_size=4,
        domain_size=72,
        algorithm=None,
        busbw=(
            (512 * _MIB, 493.94),
            (_GIB, 596.10),
            (2 * _GIB, 680.30),
            (4 * _GIB, 743.09),
            (8 * _GIB, 793.06),
            (16 * _GIB, 810.41),
        ),  # fmt: skip
        note="out-of-place; NCCL's default choice. The same README's 20-rack run (1440 GPUs) is left out: "
        "the network between 20 racks is not described",
    ),
)
