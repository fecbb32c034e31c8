"""The hardware the efficiency model prices: :class:`Hardware`, one node type, every number checked.

A :class:`Hardware` describes one *node* type: how many devices it has (GPUs, or one CPU
trainer), how many GPUs share its NVLink domain (``nvlink_domain``: a rack of several nodes in an
NVL72; the node itself elsewhere) and, per device, peak FLOP/s by dtype, memory capacity and
bandwidth, links (PCIe to the host, NVLink between devices, the node's NICs), latencies and power;
``sources`` says where each number comes from. :data:`FIELD_RANGES` bounds what each number may
be. The cited presets are in :mod:`recnotebooks.perf.hardware_presets`; pick one with
:func:`recnotebooks.perf.hardware.hardware`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from recnotebooks.checks import check_bool, check_choice, check_float, check_int, check_str, check_type, show
from recnotebooks.perf.precision import PRECISIONS
from recnotebooks.plan import MAX_RANKS

__all__ = ["DTYPE_BYTES", "FIELD_RANGES", "GB", "MAX_DEVICES", "OPTIONAL_FIELDS", "TB", "Hardware"]

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
    "update_efficiency": (1e-3, 4.0, False), "update_llc_speedup": (1.0, 100.0, False),
    "silu_seconds": (0.0, 1.0, False), "hstu_op_overhead_s": (0.0, 3600.0, False),
    "rab_seconds": (0.0, 1.0, False), "rab_index_seconds": (0.0, 1.0, False),
    "rab_padded_seconds": (0.0, 1.0, False),
}  # fmt: skip
#: Fields that may be ``None`` (then another field stands in: see :class:`Hardware`).
OPTIONAL_FIELDS = ("sharded_op_overhead_s", "update_llc_speedup", "nvlink_domain", "hstu_op_overhead_s",
                   "rab_seconds", "rab_index_seconds", "rab_padded_seconds")  # fmt: skip
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
        devices: devices per node (GPUs; 1 for a CPU trainer). A node is what has its own host
            and NICs: a DGX box, or a compute tray of an NVL72 rack (4 GPUs).
        nvlink_domain: GPUs that reach each other over NVLink, whole nodes of them: 72 for an
            NVL72 rack (18 trays of 4 joined by NVLink switch trays), so that traffic between
            the trays of one domain travels over NVLink (``intra_node_bw``) and only traffic
            beyond the domain over the NICs (``nic_bw``). ``None`` (the default): the node is
            the domain, as in an 8-GPU NVSwitch box; a PCIe box (its GPUs reach each other
            over PCIe, ``intra_node_bw`` = its PCIe link's) and a CPU node leave it ``None``
            too: ``intra_node_bw`` prices what moves inside the node either way. At least
            ``devices`` and a multiple of it (:attr:`domain_size`).
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
        sort_rate: (key, value) pairs per second one device sorts (grouping lookups by row);
            calibrated here, the lookups per second our fused update groups by row and sums
            the gradients of (all but its rows' read-modify-writes, ``update_efficiency``).
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
        update_efficiency: the sparse optimizer's update of a step's distinct rows (each row
            and its optimizer state read and written: random read-modify-writes) runs at this
            share of :func:`~recnotebooks.perf.components.embeddings.gather_bandwidth` for
            those bytes. 1 (as fast as a gather of the same bytes) unless calibrated:
            ``recnb calibrate`` times our fused update, and on the 2-core development machine
            it read 0.56 (a row's update costs 1.8x the gather of its bytes; 2026-12-03).
        update_llc_speedup: how much faster that update runs on rows held in the last-level
            cache (a shard's ``llc_hit_rate`` of its lookups); ``None``: ``llc_speedup``, as
            the gathers (assumed: the update reads and writes the rows the step's forward just
            gathered). Calibrated on a CPU by ``recnb calibrate``: on the 2-core development
            machine a row's update took 36-50 ns from L3 and 29-42 ns from DRAM (2026-12-03),
            so it read 1: no cache benefit.
        silu_seconds: seconds one device takes per element of a SiLU pass (the forward, or its
            backward) over a tensor larger than its caches, its memory traffic included: a
            CPU evaluates the exponential slower than it moves the element's bytes. 0 (the
            default, and every GPU preset's): such a pass is priced by its bytes at ``hbm_bw``
            alone, as GPU elementwise kernels are memory-bound. Calibrated on a CPU by
            ``recnb calibrate`` (the median over a few MB of ``silu`` and ``silu_backward``);
            the model prices the SiLU passes of HSTU's attention weights by it
            (:mod:`recnotebooks.perf.hstu`). A calibration saved before it existed reads 0.
        host_pools_embeddings: the host's CPUs serve lookups of tables in host DRAM
            themselves (pooling rows at ``host_mem_bw`` and sending pooled vectors to the
            devices over PCIe), as Zion is built to; otherwise devices read host rows via UVM.
        sharded_op_overhead_s: host cost of one operator of recnotebooks.distributed's sharded step
            beyond the single-process step (its Python loops over shards and host syncs cost
            more than an MLP's operator); ``None``: ``op_overhead_s``. Calibrated by
            ``recnb calibrate --collectives`` on this machine.
        hstu_op_overhead_s: host cost of one operator of this package's HSTU step (the bucketed
            attention's autograd Function, its per-bucket views and lookups), measured as
            ``op_overhead_s`` is, from two small stacks of 1 and 3 layers; ``None``:
            ``op_overhead_s`` (every preset: a GPU's kernels queue behind the work). Calibrated
            by ``recnb calibrate`` on a CPU, where it read 1.2-1.8x ``op_overhead_s`` (2026-12-05).
        rab_seconds: seconds per query-key pair of one layer's relative attention bias as the
            bucketed kernel computes it: the lookup of each pair's bias from the table forward,
            the gradient added back into the table (``index_add``) backward. ``None`` (every
            preset): priced by its bytes at ``hbm_bw``. Calibrated by ``recnb calibrate`` on a
            CPU, whose scatter-add into a small table is slower than its bytes.
        rab_index_seconds: seconds per query-key pair of building the bias's index once a step
            (each pair's position and log2 time-gap bucket); ``None``: priced by its bytes.
            Calibrated with ``rab_seconds``.
        rab_padded_seconds: seconds per query-key pair of one layer's relative attention bias
            as a padded stack computes it (:mod:`recnotebooks.nn.hstu_padded`, the common way):
            each layer builds every pair's log2 time-gap bucket again (in float64), looks the
            bias up, and scatters its gradient back into the position and time weights.
            ``None`` (every preset): priced by its bytes. Calibrated with ``rab_seconds``.
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
    update_efficiency: float = 1.0
    update_llc_speedup: float | None = None
    silu_seconds: float = 0.0
    host_pools_embeddings: bool = False
    description: str = ""
    price_per_hour: float = 0.0
    sharded_op_overhead_s: float | None = None
    nvlink_domain: int | None = None
    hstu_op_overhead_s: float | None = None
    rab_seconds: float | None = None
    rab_index_seconds: float | None = None
    rab_padded_seconds: float | None = None
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
            if f != "peak_flops" and not (f in OPTIONAL_FIELDS and v is None):
                _check(where, f, v, rng)
        _check_domain(where, self.devices, self.nvlink_domain)
        check_bool(f"{where}.host_pools_embeddings", self.host_pools_embeddings)
        check_str(f"{where}.description", self.description, nonempty=False)
        check_type(f"{where}.sources", self.sources, Mapping, "a dict {field: source text}")
        for k, v in self.sources.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"{where}.sources must map field names to source text, got {k!r}: {show(v)}")

    @property
    def domain_size(self) -> int:
        """GPUs in one NVLink domain: ``nvlink_domain``, or the node's ``devices`` when it is not set."""
        return self.devices if self.nvlink_domain is None else self.nvlink_domain

    @property
    def nodes_per_domain(self) -> int:
        """Nodes in one NVLink domain (18 trays of an NVL72 rack; 1 where the node is the domain)."""
        return self.domain_size // self.devices

    @property
    def sharded_op_cost_s(self) -> float:
        """Seconds per operator of the sharded step's own work (``sharded_op_overhead_s``, or
        ``op_overhead_s`` when not calibrated)."""
        return self.op_overhead_s if self.sharded_op_overhead_s is None else self.sharded_op_overhead_s

    @property
    def hstu_op_cost_s(self) -> float:
        """Seconds per operator of an HSTU step (``hstu_op_overhead_s``, or ``op_overhead_s``
        when not calibrated)."""
        return self.op_overhead_s if self.hstu_op_overhead_s is None else self.hstu_op_overhead_s

    @property
    def update_cache_speedup(self) -> float:
        """How much faster the sparse optimizer updates rows held in the last-level cache
        (``update_llc_speedup``, or ``llc_speedup`` when not calibrated)."""
        return self.llc_speedup if self.update_llc_speedup is None else self.update_llc_speedup

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


def _check_domain(where: str, devices: int, domain: object) -> None:
    """``nvlink_domain``: ``None``, or an int of whole nodes: a multiple of ``devices``, at least one node."""
    if domain is None:
        return
    check_int(f"{where}.nvlink_domain", domain, lo=1, hi=MAX_DEVICES)
    if domain < devices or domain % devices:  # type: ignore[operator]
        raise ValueError(
            f"{where}.nvlink_domain must be a multiple of devices ({devices}: whole nodes, at least one) "
            f"up to {MAX_DEVICES}, or None (the node is the domain), got {show(domain)}"
        )


def _check(where: str, field_name: str, v: object, rng: tuple[float, float, bool]) -> None:
    lo, hi, lo_open = rng
    check_float(f"{where}.{field_name}", v, lo=lo, hi=hi, lo_open=lo_open)
