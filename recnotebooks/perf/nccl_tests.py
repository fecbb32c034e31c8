"""The NCCL model beside published nccl-tests figures: modeled vs published bus bandwidth.

For each sweep of :data:`recnotebooks.published.nccl_tests.NCCL_TESTS`, :func:`nccl_tests_table`
sets up the fabric from the hardware presets' datasheet figures (:mod:`recnotebooks.perf.hardware`:
NVLink per GPU, a 400 Gb/s NIC per GPU), picks the algorithm with
:func:`recnotebooks.perf.components.nccl.choose` (the run's where it forced one, NCCL's choice
otherwise), prices the call as NCCL's kernels run it
(:func:`~recnotebooks.perf.components.nccl.run_time`, with the NVLS channels of the NCCL release
the run used) and reports each size's modeled and published bus bandwidth and their error.
Nothing is fitted: every constant is NCCL's (:data:`~recnotebooks.perf.components.nccl.TUNING_CC`)
or a datasheet's. ``python benchmarks/nccl_table.py`` prints the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from recnotebooks.checks import check_float
from recnotebooks.perf.components.collectives import GRACE_HOSTS
from recnotebooks.perf.components.nccl import Fabric, bus_bandwidth, choose, run_time
from recnotebooks.perf.hardware import hardware
from recnotebooks.published.nccl_tests import NCCL_TESTS, PublishedNcclTest

__all__ = ["NCCL_TEST_SYSTEMS", "NcclTestRow", "fabric_of", "nccl_tests_table"]

#: Per published sweep: the hardware preset its GPUs and NICs are read from, the GPU generation,
#: whether its NVSwitches reduce (NVLink SHARP: Hopper's third-generation NVSwitch and the NVL72's
#: NVLink switch, https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper and
#: https://www.nvidia.com/en-us/data-center/gb200-nvl72/) and whether the network's do (SHARP:
#: CoreWeave's job enables CollNet).
NCCL_TEST_SYSTEMS: dict[str, tuple[str, str, bool, bool]] = {
    "azure_nd_h100_v5": ("dgx_h100", "hopper", True, False),
    "coreweave_h100_64": ("dgx_h100", "hopper", True, True),
    "azure_nd_gb200_v6": ("gb200_nvl72", "blackwell", True, False),
    "coreweave_gb200_nvl72": ("gb200_nvl72", "blackwell", True, False),
    "coreweave_gb200_2racks": ("gb200_nvl72", "blackwell", True, False),
}


@dataclass(frozen=True)
class NcclTestRow:
    """One message size of one sweep: the algorithm/protocol the model ran and the two bus
    bandwidths (GB/s); ``error`` is modeled / published - 1."""

    key: str
    system: str
    ranks: int
    nbytes: int
    algorithm: str
    protocol: str
    forced: bool
    modeled_busbw: float
    published_busbw: float

    @property
    def error(self) -> float:
        return self.modeled_busbw / self.published_busbw - 1

    @property
    def published_seconds(self) -> float:
        """The published call's time, from its bus bandwidth (the small sizes' latency)."""
        return self.nbytes / (self.published_busbw * 1e9) * _factor(self.ranks)

    @property
    def modeled_seconds(self) -> float:
        return self.nbytes / (self.modeled_busbw * 1e9) * _factor(self.ranks)


def _factor(ranks: int) -> float:
    """nccl-tests' bus-to-algorithm factor of an all-reduce, the only collective published here."""
    return 2 * (ranks - 1) / ranks


def fabric_of(test: PublishedNcclTest) -> Fabric:
    """The :class:`Fabric` of a published sweep (:data:`NCCL_TEST_SYSTEMS`)."""
    preset, arch, nvls, collnet = NCCL_TEST_SYSTEMS[test.key]
    host = "arm" if preset in GRACE_HOSTS else "x86"
    return Fabric.from_hardware(
        hardware(preset), test.ranks, node_size=test.node_size, domain_size=test.domain_size,
        arch=arch, nvls=nvls, collnet=collnet, host=host,
    )  # fmt: skip


def nccl_tests_table(min_bytes: float = 1.0) -> list[NcclTestRow]:
    """Every published size of at least ``min_bytes``, modeled beside published."""
    min_bytes = check_float("min_bytes", min_bytes, lo=0)
    rows = []
    for test in NCCL_TESTS:
        fabric = fabric_of(test)
        for nbytes, published in test.busbw:
            if nbytes < min_bytes:
                continue
            c = choose(test.collective, nbytes, fabric, test.algorithm)
            forced = test.algorithm is not None
            # as the run's kernels ran it: its release's NVLS channels, the pipeline's fill
            t = run_time(test.collective, c.algorithm, c.protocol, nbytes, fabric, test.nccl)
            busbw = bus_bandwidth(test.collective, nbytes, c.seconds if t is None else t, test.ranks)
            row = NcclTestRow(test.key, test.system, test.ranks, nbytes, c.algorithm, c.protocol, forced,
                              busbw / 1e9, published)  # fmt: skip
            rows.append(row)
    return rows
