"""Hardware presets for the efficiency model (:class:`Hardware`), each number with its source.

A preset describes one *node* type: how many devices it has (GPUs, or one CPU trainer) and,
per device, peak FLOP/s by dtype, memory capacity and bandwidth, links (PCIe to the host,
NVLink between devices, the node's NICs), latencies and power. Sources are in
``Hardware.sources``: the public documents of :mod:`recnotebooks.perf.sources` (vendor
datasheets and whitepapers, the talks and papers that describe Big Basin, Zion and ZionEX),
*measured* where a number was measured, or marked *approximate* / *modeling assumption*
where no spec gives the number (efficiency curves, per-op overheads). ``this_machine`` is
filled by :mod:`recnotebooks.measure.calibrate`.

Copy and edit a preset in a notebook with ``hardware("dgx_a100").replace(hbm_bytes=80e9)``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recnotebooks.checks import (
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_str,
    check_type,
    check_writable_file,
    show,
)
from recnotebooks.perf.precision import PRECISIONS
from recnotebooks.perf.sources import cite
from recnotebooks.plan import MAX_RANKS

__all__ = ["Hardware", "HARDWARE", "hardware", "hardware_names", "GB", "DTYPE_BYTES", "FIELD_RANGES",
           "calibration_path", "check_calibration_path", "save_calibration", "load_calibration",
           "load_probe"]  # fmt: skip

GB = 1e9
TB = 1e12
#: Bytes per stored element (tables, pooled embeddings, gradients on the wire) of each ``dtype``
#: name the model takes: the ``storage`` column of :data:`recnotebooks.perf.precision.PRECISIONS`.
DTYPE_BYTES = {name: p.storage for name, p in PRECISIONS.items()}
#: The range each number of a :class:`Hardware` may take, ``field: (lo, hi, lo_open)``: what a
#: real machine can be, generous on both sides (every preset sits far inside; tests model an
#: "ideal" link at 1e30 B/s). Beyond it the model's results overflow or vanish: a bandwidth of
#: 1e-300 B/s makes a step last 1e308 s and its energy infinite. Rates (FLOP/s, bytes/s, pairs/s)
#: are at least 1e3 (a kilobyte or kiloFLOP per second) and at most 1e30; memory sizes at least
#: 1 kB; latencies and per-step costs at most an hour; power at most 1 GW; prices at most $1e9/h.
RATE = (1e3, 1e30, False)
FIELD_RANGES: dict[str, tuple[float, float, bool]] = {
    "peak_flops": RATE, "hbm_bw": RATE, "host_mem_bw": RATE, "host_link_bw": RATE, "intra_node_bw": RATE,
    "nic_bw": RATE, "sort_rate": RATE,
    "hbm_bytes": (1e3, 1e30, False), "host_mem_bytes": (1e3, 1e30, False), "llc_bytes": (0.0, 1e30, False),
    "collective_latency_s": (0.0, 3600.0, False), "op_overhead_s": (0.0, 3600.0, False),
    "step_overhead_s": (0.0, 3600.0, False), "sharded_op_overhead_s": (0.0, 3600.0, False),
    "power_w": (0.0, 1e9, True), "host_power_w": (0.0, 1e9, False), "price_per_hour": (0.0, 1e9, False),
    "gemm_max_efficiency": (1e-6, 1.0, False), "gemm_half_dim": (0.0, 1e9, True),
    "gather_efficiency": (1e-6, 4.0, False), "gather_half_row_bytes": (0.0, 1e12, True),
    "llc_speedup": (1.0, 100.0, False), "bag_seconds_per_byte": (0.0, 1.0, False),
}  # fmt: skip
#: Most devices in one node: the most ranks a plan may have (:data:`recnotebooks.plan.MAX_RANKS`).
MAX_DEVICES = MAX_RANKS


@dataclass(frozen=True)
class Hardware:
    """One node type. Bandwidths are bytes/s per direction; sizes in bytes; per device
    unless the name says host/node.

    Memory bandwidths (``hbm_bw``, ``host_mem_bw``) count bytes read plus bytes written, as
    the spec sheets do; link bandwidths are per direction.

    Args:
        name: preset name. kind: ``"gpu"`` (devices are GPUs with HBM) or ``"cpu"`` (the
            device is the host itself; ``hbm_*`` then describe its DRAM).
        devices: devices per node (GPUs; 1 for a CPU trainer).
        peak_flops: dense peak FLOP/s of one device by dtype (``fp32``, ``tf32``, ``bf16``...).
        hbm_bytes / hbm_bw: device memory capacity and bandwidth.
        host_mem_bytes / host_mem_bw: the node's host DRAM capacity and bandwidth.
        host_link_bw: device↔host link (PCIe) per device, per direction.
        intra_node_bw: device↔device bandwidth per device per direction (NVLink), used by
            collectives inside a node.
        nic_bw: the node's network bandwidth per direction (all NICs together).
        collective_latency_s: latency per step of a ring/pairwise collective (α).
        op_overhead_s: host-side cost of launching one operator (framework dispatch + launch).
        step_overhead_s: fixed cost per training step outside operators (loop, sync).
        gemm_max_efficiency / gemm_half_dim: GEMM efficiency model
            ``max_eff * Π d/(d + half_dim)`` over the GEMM's m, n, k (skinny GEMMs waste a GPU).
        gather_efficiency / gather_half_row_bytes: random embedding-row gather achieves
            ``hbm_bw * gather_efficiency * r/(r + half)`` for rows of ``r`` bytes (above 1
            only on a CPU whose caches hold the tables, as a calibration may find).
        power_w: power of one device at load; host_power_w: the rest of the node.
        sort_rate: (key, value) pairs per second one device sorts (grouping lookups by row).
        llc_bytes / llc_speedup: last-level cache (GPU L2, CPU L3) of one device; the hottest
            rows of Zipf-skewed tables stay there and are gathered ``llc_speedup`` times
            faster than from memory (0 / 1: no cache effect).
        bag_seconds_per_byte: what one device's forward lookup spends per bag (per pooled
            vector: one per sample and table) beyond its rows, per byte of the vector (a bag
            of ``r``-byte rows costs ``r`` times this): on a CPU, short bags gather several
            times slower per row than long ones (bags of 1 of 256 B rows: ~100 ns each more
            than in bags of 128, measured here in 2026-12). 0 for GPUs, whose warps pool bags
            in parallel (what is left of that cost is in ``gather_efficiency``); calibrated
            on a CPU.
        host_pools_embeddings: the host's CPUs serve lookups of tables in host DRAM
            themselves (pooling rows at ``host_mem_bw`` and sending pooled vectors to the
            devices over PCIe), as Zion is built to; otherwise devices read host rows via UVM.
        sharded_op_overhead_s: host cost of one operator of recnotebooks.distributed's sharded step
            beyond the single-process step (its Python loops over shards and host syncs cost
            more than an MLP's operator); ``None``: ``op_overhead_s``. Calibrated by
            ``recnb calibrate --collectives`` on this machine.
        price_per_hour: US dollars per device-hour (a GPU, or one CPU trainer node), from public
            cloud list prices (on-demand, instance price / devices); edit it for your own
            prices: ``hardware("dgx_h100", price_per_hour=2.5)``.
        sources: where each number comes from.

    Each number must lie in its range of :data:`FIELD_RANGES` (so that every modeled figure is
    finite) and each field have its type; anything else raises ``ValueError``/``TypeError``
    naming the field, the value and what is allowed (``devices``: an int in ``[1, 4096]``).
    """

    name: str
    kind: str
    devices: int
    peak_flops: dict[str, float]
    hbm_bytes: float
    hbm_bw: float
    host_mem_bytes: float
    host_mem_bw: float
    host_link_bw: float
    intra_node_bw: float
    nic_bw: float
    collective_latency_s: float
    op_overhead_s: float
    step_overhead_s: float
    gemm_max_efficiency: float
    gemm_half_dim: float
    gather_efficiency: float
    gather_half_row_bytes: float
    power_w: float
    host_power_w: float
    sort_rate: float = 3e9
    llc_bytes: float = 0.0
    llc_speedup: float = 1.0
    bag_seconds_per_byte: float = 0.0
    host_pools_embeddings: bool = False
    description: str = ""
    price_per_hour: float = 0.0
    sharded_op_overhead_s: float | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        check_str("Hardware.name", self.name)
        where = f"Hardware({self.name})"
        check_choice(f"{where}.kind", check_str(f"{where}.kind", self.kind), ("gpu", "cpu"))
        check_int(f"{where}.devices", self.devices, lo=1, hi=MAX_DEVICES)
        check_type(f"{where}.peak_flops", self.peak_flops, Mapping, "a dict {dtype name: FLOP/s}")
        if not self.peak_flops:
            raise ValueError(f"{where}.peak_flops must name at least one dtype, got {{}}")
        for dt, v in self.peak_flops.items():
            if not isinstance(dt, str) or dt not in DTYPE_BYTES:
                raise ValueError(f"{where}.peak_flops: dtype must be one of {list(DTYPE_BYTES)}, got {dt!r}")
            _check(where, f"peak_flops[{dt!r}]", v, FIELD_RANGES["peak_flops"])
        for f, rng in FIELD_RANGES.items():
            v = getattr(self, f)
            if f != "peak_flops" and not (f == "sharded_op_overhead_s" and v is None):
                _check(where, f, v, rng)
        check_bool(f"{where}.host_pools_embeddings", self.host_pools_embeddings)
        check_str(f"{where}.description", self.description, nonempty=False)
        check_type(f"{where}.sources", self.sources, Mapping, "a dict {field: source text}")
        for k, v in self.sources.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"{where}.sources must map field names to source text, got {k!r}: {show(v)}")

    @property
    def sharded_op_cost_s(self) -> float:
        """Seconds per operator of the sharded step's own work (``sharded_op_overhead_s``, or
        ``op_overhead_s`` when not calibrated)."""
        return self.op_overhead_s if self.sharded_op_overhead_s is None else self.sharded_op_overhead_s

    def replace(self, **changes: object) -> Hardware:
        """A validated copy with fields changed (keeps the sources; note your own)."""
        return dataclasses.replace(self, **changes)

    def flops(self, dtype: str) -> float:
        """Peak FLOP/s of one device for ``dtype`` (``tf32`` falls back to ``fp32``; an AMP name
        means the rate of its GEMMs' half type)."""
        dtype = PRECISIONS[dtype].gemm if dtype in PRECISIONS else dtype
        if dtype in self.peak_flops:
            return self.peak_flops[dtype]
        if dtype == "tf32" and "fp32" in self.peak_flops:
            return self.peak_flops["fp32"]
        raise ValueError(f"dtype={dtype!r} has no peak on {self.name}; it has {sorted(self.peak_flops)}")

    def summary(self) -> dict[str, object]:
        """Plain data for tables and JSON."""
        d = dataclasses.asdict(self)
        d.pop("sources")
        return d


def _check(where: str, field_name: str, v: object, rng: tuple[float, float, bool]) -> None:
    lo, hi, lo_open = rng
    check_float(f"{where}.{field_name}", v, lo=lo, hi=hi, lo_open=lo_open)


# ----- sources (titles and addresses in recnotebooks.perf.sources) --------------------------
_APPROX = "approximate"
_GEMM = (
    "modeling assumption (approximate): large GEMMs reach ~80-85% of dense peak, and a "
    "dimension of half_dim halves efficiency; calibrate on the device to replace"
)
_GATHER = (
    "modeling assumption (approximate): random row gathers reach about half of HBM bandwidth for "
    "rows >= 256 B, less for small rows (32 B sectors, latency)"
)
_OP = (
    "approximate: eager PyTorch spends ~10 us of host time per operator (dispatch + kernel launch), "
    "so small kernels are overhead-bound"
)
_ALPHA = "approximate: NCCL small-message latency is on the order of 10 us per step inside a node"
_SORT = "approximate: GPU radix sort of 64-bit key-value pairs runs at a few billion pairs/s"
_L2X = "approximate: GPU L2 serves gathers ~3x faster than HBM (L2 bandwidth is several times HBM's)"
_NIC = "NIC line rate / 8 bits per byte: 100 Gb/s = 12.5 GB/s, 200 Gb/s = 25 GB/s, 400 Gb/s = 50 GB/s"
_DDR4 = "6 DDR4-2666 channels x 8 B = ~128 GB/s theoretical per socket, " + cite("xeon6138")
_PRICE = "approximate, on-demand list price, changes often; edit price_per_hour for yours: "
_AWS_C5 = (
    "https://docs.amazonaws.cn/en_us/autoscaling/ec2/userguide/weights-spot-price-per-unit-hour-example"
    ".html (AWS's example on-demand prices: c5.2xlarge $0.34/h, c5.18xlarge $3.06/h; "
    "read 2026-12-01)"
)
_AWS_P4D = (
    "AWS p4d.24xlarge (8x A100 40 GB) on-demand $32.77/h in us-east-1 / 8 GPUs = $4.10 per GPU-hour, "
    "https://www.xither.com/compare/gpu-compute-costs-on-prem-vs-cloud-vs-spot-instances (Q2 2024) "
    "and https://www.usage.ai/blogs/finops/ai-ml-cost/gpu-instance-cost-optimization/ (2026); "
    "read 2026-12-01"
)
_AWS_P5 = (
    "AWS p5.48xlarge (8x H100 80 GB) on-demand $98.32/h in us-east-1 / 8 GPUs = $12.29 per GPU-hour, "
    "https://computespec.pages.dev/learn/pricing/cost-per-gpu-hour (Q1 2026) and "
    "https://deploybase.ai/articles/aws-vs-google-cloud (March 2026); read 2026-12-01"
)
_AWS_P3 = (
    "AWS p3.16xlarge (8x V100 16 GB) $24.48/h and p3dn.24xlarge (8x V100 32 GB) $31.212/h "
    "on-demand in us-east-1, https://aws.amazon.com/ec2/instance-types/p3/ (list prices 2018-2024, "
    "not re-read for this: approximate; 2026-12-01)"
)
_AWS_BLOCKS = (
    "https://aws.amazon.com/ec2/capacityblocks/pricing/ (EC2 Capacity Blocks accelerator rates, "
    "valid to 2025-01-01, read from a mirror of that page on 2026-12-01)"
)
_DEV = "measured on the 2-core development machine (uncalibrated default; `recnb calibrate` measures yours): "


def _gpu_sources(datasheet: str, l2_source: str, **extra: str) -> dict[str, str]:
    """The sources every GPU preset shares, from its datasheet, plus ``extra``."""
    return {
        "peak_flops": datasheet + " (dense)",
        "hbm_bytes": datasheet,
        "hbm_bw": datasheet,
        "power_w": datasheet + " (TDP)",
        "intra_node_bw": datasheet + " (NVLink total per GPU, both directions; halved per direction)",
        "host_link_bw": datasheet + " (PCIe x16, both directions; halved per direction)",
        "gemm_max_efficiency": _GEMM,
        "gemm_half_dim": _GEMM,
        "gather_efficiency": _GATHER,
        "gather_half_row_bytes": _GATHER,
        "op_overhead_s": _OP,
        "collective_latency_s": _ALPHA,
        "step_overhead_s": _APPROX + ": ~0.5 ms per step of Python loop, optimizer bookkeeping and syncs",
        "nic_bw": _NIC,
        "sort_rate": _SORT,
        "llc_bytes": l2_source,
        "llc_speedup": _L2X,
        "host_power_w": _APPROX,
        **extra,
    }


def _gpu(
    name: str,
    desc: str,
    *,
    fp32: float,
    tensor: dict[str, float],
    hbm: float,
    hbm_bw: float,
    nvlink: float,
    pcie: float,
    host_mem: float,
    host_bw: float,
    nic: float,
    power: float,
    host_power: float,
    l2: float,
    sources: dict[str, str],
) -> Hardware:
    return Hardware(
        name=name,
        kind="gpu",
        devices=8,
        peak_flops={"fp32": fp32, **tensor},
        hbm_bytes=hbm,
        hbm_bw=hbm_bw,
        host_mem_bytes=host_mem,
        host_mem_bw=host_bw,
        host_link_bw=pcie,
        intra_node_bw=nvlink / 2,
        nic_bw=nic,
        collective_latency_s=10e-6,
        op_overhead_s=10e-6,
        step_overhead_s=0.5e-3,
        gemm_max_efficiency=0.85,
        gemm_half_dim=64.0,
        gather_efficiency=0.5,
        gather_half_row_bytes=64.0,
        power_w=power,
        host_power_w=host_power,
        llc_bytes=l2,
        llc_speedup=3.0,
        description=desc,
        sources=sources,
    )


_CPU_CLUSTER_SOURCES = {
    "peak_flops": "computed (approximate): 2 sockets x 20 cores x 64 fp32 FLOP/cycle (AVX-512, 2 FMA units) "
    "x an assumed 1.6 GHz AVX-512 clock, " + cite("xeon6138"),
    "hbm_bw": "2 sockets x " + _DDR4,
    "hbm_bytes": _APPROX + ": 256 GB per trainer", "host_mem_bytes": _APPROX, "host_power_w": _APPROX,
    "nic_bw": _APPROX + ": 25 Gb/s Ethernet, the low end of 25-100 Gb/s, for the CPU trainers and parameter "
    "servers that GPU training replaced in " + cite("seed"),
    "power_w": "TDP 125 W x 2 sockets, " + cite("xeon6138"),
    "gemm_max_efficiency": _GEMM, "gemm_half_dim": _GEMM + " (CPUs saturate at smaller shapes)",
    "gather_efficiency": _GATHER, "op_overhead_s": _OP,
    "collective_latency_s": _APPROX + ": TCP/Ethernet round trip",
    "sort_rate": _APPROX + ": ~10 M pairs/s per core x 40 cores",
    "llc_bytes": "27.5 MB L3 per socket, 2 sockets, " + cite("xeon6138"),
    "llc_speedup": _APPROX + ": an L3 hit costs ~1/4 of a DRAM access for random rows",
    "price_per_hour": _PRICE + "a 36-core Skylake c5.18xlarge at $3.06 per node-hour, " + _AWS_C5,
}  # fmt: skip
_BIG_BASIN_SOURCES = _gpu_sources(
    cite("v100"),
    "6 MB L2, " + cite("volta"),
    host_mem_bytes=_APPROX + ": 256 GB head node, little host memory next to the GPUs, " + cite("big_basin"),
    host_mem_bw="2 Skylake-SP sockets x " + _DDR4,
    nic_bw=_APPROX + ": one 100 Gb/s NIC; " + _NIC,
    price_per_hour=_PRICE + "$24.48 / 8 = $3.06 per V100 16 GB-hour, " + _AWS_P3,
)
_ZION_SOURCES = _gpu_sources(
    cite("v100"),
    "as V100: 6 MB L2, " + cite("volta"),
    peak_flops=_APPROX + ": Zion's accelerators modeled as V100 SXM2 32 GB, " + cite("v100"),
    host_mem_bytes=_APPROX + ": 'terabytes of DDR' for the tables, 2 TB, " + cite("zion"),
    host_mem_bw="8 sockets x " + _DDR4,
    nic_bw=_APPROX + ": several 100 Gb/s NICs, 4, " + cite("zion") + "; " + _NIC,
    host_power_w=_APPROX + ": 150 W per socket",
    price_per_hour=_PRICE + "as a V100 32 GB of p3dn.24xlarge, $31.212 / 8 = $3.90 per GPU-hour "
    "(Zion's terabytes of DRAM not priced separately), " + _AWS_P3,
    host_pools_embeddings=(
        f"the tables live in the CPU sockets' large DRAM and need no remote parameter servers, "
        f"{cite('seed')}; modeled as the CPUs pooling rows and sending pooled vectors to the accelerators"
    ),
)
_DGX_A100_SOURCES = _gpu_sources(
    cite("a100"),
    "40 MB L2, " + cite("ampere"),
    host_mem_bytes="1 TB system memory, " + cite("dgx_a100"),
    host_mem_bw=_APPROX + ": 2 sockets x 8 DDR4-3200 channels",
    nic_bw="one 200 Gb/s NIC per GPU, " + cite("dgx_a100") + ", as in ZionEX, " + cite("neo") + "; " + _NIC,
    price_per_hour=_PRICE + _AWS_P4D,
)
_DGX_H100_SOURCES = _gpu_sources(
    cite("h100"),
    "50 MB L2, " + cite("hopper"),
    host_mem_bytes="2 TB system memory, " + cite("dgx_h100"),
    host_mem_bw=_APPROX + ": 2 sockets x 8 DDR5-4800 channels",
    nic_bw="one 400 Gb/s NIC per GPU, " + cite("dgx_h100") + "; " + _NIC,
    price_per_hour=_PRICE + _AWS_P5,
)
_H200_SOURCES = _gpu_sources(
    cite("h200"),
    _APPROX + ": the H100 die's 50 MB L2, " + cite("hopper"),
    host_mem_bytes=_APPROX + ": 2 TB, as the DGX H100",
    host_mem_bw=_APPROX + ": 2 sockets x 8 DDR5-4800 channels",
    nic_bw=_APPROX + ": one 400 Gb/s NIC per GPU, as the DGX H100; " + _NIC,
    gemm_max_efficiency="measured (PyTorch, 2026, one H200): an 8192^3 BF16 matmul ran at 770-800 of the "
    "989 TFLOP/s of " + cite("h200") + ", ~0.8",
    price_per_hour=_PRICE + "the H100's $12.29 x 1.10 = $13.52 per GPU-hour: 1.10 is the ratio of AWS's "
    "accelerator rates for H200 (p5e, $5.408/h) and H100 (p5, $4.916/h), " + _AWS_BLOCKS,
)
_THIS_MACHINE_SOURCES = {
    "peak_flops": _DEV + "~200 GFLOP/s fp32 matmul",
    "hbm_bw": _DEV + "~90 GB/s streaming copy (bytes read + written)",
    "gather_efficiency": _DEV + "random embedding-bag gather ~23 GB/s of 90",
    "power_w": _APPROX + ": 2 cores of a server CPU",
    "op_overhead_s": _OP,
    "collective_latency_s": _DEV + "gloo all-to-all and all-reduce among 2-4 local processes, each call "
    "after a burst of compute as in a step, ~1 ms a step (recnb calibrate --collectives, 2026-12-01; "
    "back to back 350-530 us)",
    "intra_node_bw": _DEV + "gloo between local processes over 127.0.0.1, 1.1-1.4 GB/s (recnb calibrate "
    "--collectives, 2026-12-01)",
    "price_per_hour": _PRICE + "2 vCPUs at c5.2xlarge's $0.34/h for 8 = $0.085 per hour, " + _AWS_C5,
}


def _make_presets() -> dict[str, Hardware]:
    p: dict[str, Hardware] = {}
    # Dual-socket Skylake-SP trainer (Xeon Gold 6138: 20 cores, AVX-512 with 2 FMA units = 64 fp32 FLOP/cycle
    # per core at ~1.6 GHz AVX-512 clock): 2 x 20 x 64 x 1.6e9 = 4.1 TFLOP/s; 6 x DDR4-2666 per socket.
    p["cpu_cluster"] = Hardware(
        name="cpu_cluster", kind="cpu", devices=1, peak_flops={"fp32": 4.1e12}, hbm_bytes=256 * GB,
        hbm_bw=2 * 128 * GB, host_mem_bytes=256 * GB, host_mem_bw=2 * 128 * GB, host_link_bw=2 * 128 * GB,
        intra_node_bw=2 * 128 * GB, nic_bw=25e9 / 8, collective_latency_s=50e-6, op_overhead_s=10e-6,
        step_overhead_s=0.5e-3, gemm_max_efficiency=0.7, gemm_half_dim=16.0, gather_efficiency=0.35,
        gather_half_row_bytes=64.0, power_w=2 * 125.0, host_power_w=150.0, sort_rate=0.4e9,
        llc_bytes=2 * 27.5e6, llc_speedup=4.0, price_per_hour=3.06, sources=_CPU_CLUSTER_SOURCES,
        description="CPU training cluster: dual-socket Skylake-SP trainers; tables on sparse parameter "
                    "servers and MLP weights on dense parameter servers over 25 Gb/s Ethernet",
    )  # fmt: skip
    p["big_basin"] = _gpu(
        "big_basin", "Big Basin (OCP 2017): 8x V100 SXM2 16 GB, NVLink hybrid cube-mesh, PCIe to a "
        "dual-socket Xeon head node; tables that do not fit go to remote CPU parameter servers",
        fp32=15.7e12, tensor={"fp16": 125e12}, hbm=16 * GB, hbm_bw=0.90 * TB, nvlink=300 * GB, pcie=16 * GB,
        host_mem=256 * GB, host_bw=2 * 128 * GB, nic=12.5 * GB, power=300.0, host_power=800.0, l2=6e6,
        sources=_BIG_BASIN_SOURCES,
    ).replace(price_per_hour=3.06)  # fmt: skip
    p["zion"] = _gpu(
        "zion", "Zion-like (OCP/Hot Chips 2019): 8 CPU sockets with terabytes of DDR for embedding tables "
        "plus 8 accelerators (modeled as V100-class) on their own fabric; PCIe switches between them",
        fp32=15.7e12, tensor={"fp16": 125e12}, hbm=32 * GB, hbm_bw=0.90 * TB, nvlink=300 * GB, pcie=16 * GB,
        host_mem=2000 * GB, host_bw=8 * 128 * GB, nic=4 * 12.5 * GB, power=300.0, host_power=8 * 150.0,
        l2=6e6, sources=_ZION_SOURCES,
    ).replace(host_pools_embeddings=True, price_per_hour=3.90)  # fmt: skip
    p["dgx_a100"] = _gpu(
        "dgx_a100", "DGX A100: 8x A100 SXM4 40 GB, NVLink 3 through NVSwitch, PCIe Gen4, 8x 200 Gb/s NICs",
        fp32=19.5e12, tensor={"tf32": 156e12, "bf16": 312e12, "fp16": 312e12}, hbm=40 * GB,
        hbm_bw=1.555 * TB, nvlink=600 * GB, pcie=32 * GB, host_mem=1000 * GB, host_bw=2 * 204.8 * GB,
        nic=8 * 25 * GB, power=400.0, host_power=1500.0, l2=40e6, sources=_DGX_A100_SOURCES,
    ).replace(price_per_hour=4.10)  # fmt: skip
    p["dgx_h100"] = _gpu(
        "dgx_h100", "DGX H100: 8x H100 SXM5 80 GB, NVLink 4 through NVSwitch, PCIe Gen5, 8x 400 Gb/s NICs",
        fp32=67e12, tensor={"tf32": 495e12, "bf16": 989e12, "fp16": 989e12}, hbm=80 * GB, hbm_bw=3.35 * TB,
        nvlink=900 * GB, pcie=64 * GB, host_mem=2000 * GB, host_bw=2 * 307 * GB, nic=8 * 50 * GB,
        power=700.0, host_power=2000.0, l2=50e6, sources=_DGX_H100_SOURCES,
    ).replace(price_per_hour=12.29)  # fmt: skip
    p["h200_node"] = _gpu(
        "h200_node", "HGX H200 node: 8x H200 SXM 141 GB, NVLink 4, PCIe Gen5, 8x 400 Gb/s NICs",
        fp32=67e12, tensor={"bf16": 989e12, "fp16": 989e12}, hbm=141 * GB, hbm_bw=4.8 * TB, nvlink=900 * GB,
        pcie=64 * GB, host_mem=2000 * GB, host_bw=2 * 307 * GB, nic=8 * 50 * GB, power=700.0,
        host_power=2000.0, l2=50e6, sources=_H200_SOURCES,
    ).replace(gemm_max_efficiency=0.8, price_per_hour=13.52)  # fmt: skip
    # This development machine before calibration (measured on it in 2026); `recnb calibrate` replaces it.
    p["this_machine"] = Hardware(
        name="this_machine", kind="cpu", devices=1, peak_flops={"fp32": 250e9}, hbm_bytes=24 * GB,
        hbm_bw=90 * GB, host_mem_bytes=24 * GB, host_mem_bw=90 * GB, host_link_bw=90 * GB,
        intra_node_bw=1.2 * GB, nic_bw=1 * GB, collective_latency_s=1e-3, op_overhead_s=8e-6,
        step_overhead_s=0.1e-3, gemm_max_efficiency=0.8, gemm_half_dim=16.0, gather_efficiency=0.25,
        gather_half_row_bytes=64.0, power_w=30.0, host_power_w=0.0, sort_rate=50e6, price_per_hour=0.085,
        sources=_THIS_MACHINE_SOURCES,
        description="the machine this runs on (uncalibrated defaults: run `recnb calibrate`)",
    )  # fmt: skip
    return p


HARDWARE: dict[str, Hardware] = _make_presets()


def hardware_names() -> list[str]:
    return list(HARDWARE)


def hardware(name: str | Hardware, **overrides: object) -> Hardware:
    """A hardware preset by name (``this_machine`` includes the saved calibration, if any)."""
    if isinstance(name, Hardware):
        return name.replace(**overrides) if overrides else name
    check_type("hardware", name, str, "a Hardware or a preset name")
    if name not in HARDWARE:
        raise ValueError(f"hardware must be one of {hardware_names()}, got {name!r}")
    hw = HARDWARE[name]
    if name == "this_machine":
        hw = load_calibration() or hw
    return hw.replace(**overrides) if overrides else hw


# ----- the saved calibration of this machine (written by recnotebooks.measure.calibrate) -----
#: The fields ``recnb calibrate --collectives`` fits (a plain calibration keeps a saved fit of
#: them), and how each one's source begins once it has measured them here.
COLLECTIVE_FIELDS = ("collective_latency_s", "intra_node_bw", "sharded_op_overhead_s")
COLLECTIVES_SOURCE = "calibrated here by recnb calibrate --collectives"


def calibration_path(kind: str = "cpu") -> Path:
    """Where the calibration of this machine's CPU (``kind="cpu"``) or GPU (``"gpu"``) is
    stored; ``$RECNB_CALIBRATION`` overrides the CPU one's path (a GPU one sits beside it)."""
    if kind not in ("cpu", "gpu"):
        raise ValueError(f"kind must be 'cpu' or 'gpu', got {kind!r}")
    env = os.environ.get("RECNB_CALIBRATION")
    cpu = Path(env) if env else Path.home() / ".cache" / "recnotebooks" / "this_machine.json"
    return cpu if kind == "cpu" else cpu.with_name(cpu.stem + "_gpu" + cpu.suffix)


def _path_name(path: str | Path | None) -> str:
    """How an error names the calibration file: ``path`` when given, else the environment variable."""
    return (
        "path"
        if path
        else ("RECNB_CALIBRATION" if os.environ.get("RECNB_CALIBRATION") else "calibration path")
    )


def check_calibration_path(path: str | Path | None = None, kind: str = "cpu") -> Path:
    """The file :func:`save_calibration` would write (``path``, else :func:`calibration_path`),
    once a file can be written there: ``ValueError`` naming ``path`` (or ``RECNB_CALIBRATION``),
    its value and why when it is a directory, sits under a file, or cannot be created. The
    ``recnb calibrate`` and ``recnb validate`` commands check it before minutes of measuring."""
    p = Path(path) if path else calibration_path(kind)
    return check_writable_file(_path_name(path), p, example="this_machine.json")


def save_calibration(
    hw: Hardware, probe: dict[str, float] | None = None, path: str | Path | None = None
) -> Path:
    """Store ``hw`` (and the speed probe taken with it) for ``hardware("this_machine")``;
    ``ValueError`` (nothing written) when ``path`` cannot be written (:func:`check_calibration_path`)."""
    check_type("hw", hw, Hardware, "a Hardware")
    p = check_calibration_path(path, hw.kind)
    text = json.dumps({"hardware": dataclasses.asdict(hw), "probe": probe}, indent=1)
    try:
        p.write_text(text)
    except OSError as e:
        raise ValueError(f"{_path_name(path)} {str(p)!r} cannot be written: {e.strerror or e}") from None
    return p


def _load(path: str | Path | None, kind: str = "cpu") -> dict:
    """The saved file as a dict: ``{}`` when there is none, and a warning naming the file when
    it cannot be read (the uncalibrated defaults are used then)."""
    p = Path(path) if path else calibration_path(kind)
    if not p.exists():
        blocker = next((f for f in p.parents if f.exists()), None)
        if blocker is not None and not blocker.is_dir():  # it can never exist: say so once
            _ignored(p, f"{str(blocker)!r} is a file, not a folder", stacklevel=4)
        return {}
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        d = f"not readable JSON ({type(e).__name__}: {e})"
    if not isinstance(d, dict):
        _ignored(p, d if isinstance(d, str) else f"not a JSON object ({type(d).__name__})", stacklevel=4)
        return {}
    return d | {"_path": p}


def _ignored(path: Path, why: str, stacklevel: int = 3) -> None:
    why = why if len(why) <= 160 else why[:159] + "…"
    warnings.warn(
        f"ignoring the saved calibration {path}: {why}; using the uncalibrated defaults "
        "(run `recnb calibrate` to write a new one)",
        stacklevel=stacklevel,
    )


def load_calibration(path: str | Path | None = None, kind: str = "cpu") -> Hardware | None:
    """The saved calibration of this machine's CPU (or, ``kind="gpu"``, its GPU), or None when
    there is none (or, with a warning, when it is not valid). ``hardware("this_machine")`` is
    the CPU one."""
    d = _load(path, kind)
    if not d:
        return None
    try:
        saved = dict(d["hardware"])
        if kind == "cpu" and "price_per_hour" not in saved:  # saved before presets had prices
            saved["price_per_hour"] = HARDWARE["this_machine"].price_per_hour
        return Hardware(**saved)
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        _ignored(d["_path"], f"{type(e).__name__}: {e}")
        return None


def load_probe(path: str | Path | None = None, kind: str = "cpu") -> dict[str, float] | None:
    """The speed probe saved with the calibration (see :func:`recnotebooks.measure.calibrate.probe`),
    or None when there is none or its speeds are not finite positive numbers."""
    p = _load(path, kind).get("probe")
    speeds = [p.get("gflops"), p.get("copy_bw")] if isinstance(p, dict) else [None]
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf for v in speeds)
    return p if ok else None  # type: ignore[return-value]
