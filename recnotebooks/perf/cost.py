"""Per-iteration cost model: a DLRM on some hardware, placement and parallelism → time per rank.

:func:`estimate` breaks one training step down per rank into the components the seed
paper reasons with (every number here is **modeled**):

* ``data_loading`` (host reads the batch), ``host_to_device`` (PCIe copy of the inputs);
* ``embedding_forward`` (row gathers + pooling) and ``embedding_backward`` (pooled
  gradients, grouping lookups by row, and the fused optimizer's read-modify-write of each
  *distinct* row and its state) — traffic counts dimension, dtype, pooling and the unique
  ids a Zipf-skewed batch touches, at the bandwidth of where the rows live (device memory,
  host DRAM over PCIe as UVM does, a device cache with a hit rate, or a parameter server
  across the network);
* ``bottom_mlp``, ``interaction``, ``top_mlp`` (forward and backward GEMMs; GEMM time
  uses an efficiency curve over the GEMM's shape, so small, skinny GEMMs waste a GPU) and
  ``dense_optimizer``;
* ``all_to_all`` (model-parallel pooled embeddings and their gradients, plus the ids) and
  ``all_reduce`` (data-parallel gradients), over NVLink inside an NVLink domain (a node, or the
  trays of an NVL72 rack: ``Hardware.nvlink_domain``) and the NICs beyond it: as NCCL prices and
  picks them on the GPUs its model covers (ring, tree, NVLS...; ``CostResult.collectives`` and
  :meth:`~recnotebooks.perf.result.CostResult.collective_choices` say which and why), else
  ring/pairwise α-β formulas (a CPU node's gloo: :mod:`recnotebooks.perf.components.collectives`);
* ``overhead``: operators launched x per-operator host cost (a sharded step launches more:
  distribution of ids and pooled embeddings, DDP's reducer), plus a fixed per-step cost.

Each component is one small function of :mod:`recnotebooks.perf.components` (one per
placement for the embeddings); :func:`estimate` checks its inputs, adds them up per rank and
derives: step time with and without compute/communication overlap, throughput, device busy
fraction, achieved FLOP/s over peak, device-memory bandwidth utilisation, and energy per
million samples (the devices, each node's host, and the parameter servers remote rows need).
Memory per device comes from :mod:`recnotebooks.perf.memory`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recnotebooks.checks import check_choice, check_fraction, check_int, show
from recnotebooks.config import DLRMConfig, Workload
from recnotebooks.config.workload import workload_from
from recnotebooks.perf import components as C
from recnotebooks.perf import traffic as T
from recnotebooks.perf.access import CACHE_POLICIES
from recnotebooks.perf.components import A2A_CALLS_PER_STEP, UVM_EFFICIENCY, gemm_time, op_count
from recnotebooks.perf.hardware import Hardware, hardware
from recnotebooks.perf.memory import MemoryReport, memory_report
from recnotebooks.perf.planner import RESERVE, plan_tables, table_bytes
from recnotebooks.perf.precision import precision
from recnotebooks.perf.result import COMMUNICATION, COMPONENTS, COMPUTE, CostResult, overlapped_step
from recnotebooks.plan import MAX_RANKS, PLACEMENTS, Plan, single_device_plan

__all__ = ["A2A_CALLS_PER_STEP", "COMPONENTS", "COMPUTE", "COMMUNICATION", "CostResult", "estimate",
           "gemm_time", "op_count", "UVM_EFFICIENCY"]  # fmt: skip

#: How HugeCTR's pooled embeddings may cross nodes (:func:`estimate`'s ``exchange``).
EXCHANGES = ("hierarchical", "flat")
#: Largest global batch the model is asked about: 2^40 samples a step (the command line's bound;
#: a trillion samples, far beyond any published run), so every modeled figure stays finite.
MAX_BATCH = 2**40


def estimate(
    workload: Workload | DLRMConfig,
    hw: Hardware | str = "this_machine",
    *,
    gpus: int = 1,
    nodes: int = 1,
    plan: Plan | None = None,
    placement: str = "hbm",
    cache_hit_rate: float | None = None,
    cache_rows: int | Mapping[str, int] | None = None,
    cache_policy: str = "static",
    cache_ways: int = 32,
    implementation: str = "torchrec",
    exchange: str | None = None,
    **older: Any,
) -> CostResult:
    """Model one training step of ``workload`` (the model, its global batch, precision, skew and
    optimizers: a :class:`~recnotebooks.config.Workload`) on ``gpus`` x ``nodes`` devices of ``hw``.

    The older form, ``estimate(config, hw, batch_size=..., dtype=..., zipf_exponent=...,
    sparse_optimizer=..., dense_optimizer=..., ...)``, still works: a DLRMConfig first and the
    workload's other fields as keywords (:func:`~recnotebooks.config.workload.workload_from`;
    a Workload *and* those keywords is a ``TypeError`` naming them).

    Without ``plan``, one device holds every table at ``placement``; for ``"cache"`` either
    a typed-in ``cache_hit_rate``, or ``cache_rows`` device slots per table (one number, or
    one per table name) run by ``cache_policy`` (``"static"``, ``"lfu"``, ``"lru"`` or
    ``"setassoc"`` with ``cache_ways``), whose hit rate the model computes from the skew
    (:func:`recnotebooks.perf.access.hit_rate`). A plan's shards carry the same fields.
    Several devices get the planner's greedy table-wise plan when it fits, else its
    cost-based plan (which splits rows, and moves what fits nowhere behind a cache). Raises
    ``ValueError`` naming the bad argument; a plan that does not fit in memory still returns
    numbers, with ``fits=False`` and the reasons.

    ``implementation`` is whose sharded step is priced on several ranks (its operators and
    all-to-all calls, :func:`~recnotebooks.perf.components.op_count`): ``"torchrec"``
    (DistributedModelParallel with fused kernels, what the published runs and the paper's
    clusters ran) or ``"recnotebooks"`` (our :class:`recnotebooks.distributed.HybridParallelDLRM`, what
    ``recnb train --world-size``/``--distributed`` runs and ``recnb validate --distributed``
    measures), or ``"hugectr"`` (NVIDIA's HugeCTR as MLPerf's submissions ran it,
    :data:`~recnotebooks.perf.components.ops.HUGECTR`: one CUDA-graph replay a step, fused elementwise
    work, grouped all-to-alls; in one of :data:`~recnotebooks.perf.components.ops.HUGECTR_DTYPES` and
    with every table in HBM, else ``ValueError``). One process runs our single-process step either way.

    ``exchange``: how HugeCTR's pooled embeddings cross nodes, ``"hierarchical"`` (node by node) or
    ``"flat"`` (rank to rank), as a submission's ``train.py`` picks it
    (:class:`~recnotebooks.perf.mlperf_plan.HugeCTRSharding`); ``None``: hierarchical on several nodes
    (:data:`~recnotebooks.perf.components.collectives.HIERARCHICAL`).
    """
    check_choice("implementation", implementation, C.IMPLEMENTATIONS)
    if exchange is not None:
        check_choice("exchange", exchange, EXCHANGES)
    w = _workload(workload, older)
    where = _Where(placement, cache_hit_rate, cache_rows, cache_policy, cache_ways)
    hw = _check_request(w, hw, gpus, nodes, where, plan, implementation)
    plan = _plan_for(w, hw, gpus * nodes, where, plan)
    _check_plan(w, plan, gpus * nodes, implementation)
    step = Step(w, hw, plan, gpus, nodes, implementation, exchange != "flat")
    accesses = C.shard_access(
        w.config, hw, plan, step.local_batch, w.batch_size, w.zipf_exponent, w.dtype, w.sparse_optimizer
    )
    return _result(step, accesses, _per_rank(step, accesses), memory_report(w, hw, plan, gpus=gpus))


@dataclass(frozen=True)
class _Where:
    """Where :func:`estimate` puts the tables when it builds the plan itself (its arguments)."""

    placement: str
    cache_hit_rate: float | None
    cache_rows: int | Mapping[str, int] | None
    cache_policy: str
    cache_ways: int


def _workload(first: object, older: Mapping[str, object]) -> Workload:
    """The workload :func:`estimate` models (:func:`workload_from`), its batch within :data:`MAX_BATCH`
    (checked first in the older form, as estimate always checked it)."""
    if isinstance(first, DLRMConfig) and "batch_size" in older:
        check_int("batch_size", older["batch_size"], lo=1, hi=MAX_BATCH)
    w = workload_from(first, older, "estimate")
    check_int("batch_size", w.batch_size, lo=1, hi=MAX_BATCH)
    return w


@dataclass(frozen=True)
class Step:
    """What every component of one modeled step needs to know, checked by :func:`estimate`: the
    workload (model, global batch, precision, skew and optimizers: the sparse optimizer's state per
    row each shard's access carries, :attr:`~recnotebooks.perf.components.ShardAccess.state_bytes`),
    the hardware, the plan, the ``gpus`` x ``nodes`` devices and whose sharded step is priced
    (``implementation``)."""

    workload: Workload
    hw: Hardware
    plan: Plan
    gpus: int
    nodes: int
    implementation: str
    hierarchical: bool = True  #: HugeCTR's exchange node by node on several nodes (else flat)

    @property
    def world(self) -> int:
        return self.gpus * self.nodes

    @property
    def domain(self) -> int:
        """Ranks in one NVLink domain (:func:`~recnotebooks.perf.components.collectives.domain_ranks`)."""
        return C.domain_ranks(self.hw, self.gpus, self.nodes)

    @property
    def local_batch(self) -> float:
        return self.workload.batch_size / self.world


def _check_request(
    w: Workload,
    hw: Hardware | str,
    gpus: int,
    nodes: int,
    where: _Where,
    plan: Plan | None,
    implementation: str,
) -> Hardware:
    """The hardware preset, after checking the devices asked for, where the tables go and whether
    ``implementation`` can run ``w``'s precision (HugeCTR has no bf16 mode)."""
    if implementation == "hugectr" and w.dtype not in C.HUGECTR_DTYPES:
        raise ValueError(
            f"dtype with implementation='hugectr' must be one of {list(C.HUGECTR_DTYPES)} (HugeCTR trains in "
            f"fp32, with TF32 GEMMs or in fp16 mixed precision), got {w.dtype!r}"
        )
    hw = _check_devices(w, hw, gpus, nodes)
    _check_where(where)
    world = gpus * nodes
    if w.batch_size < world:
        raise ValueError(f"batch_size must be >= the number of devices ({world}), got {w.batch_size}")
    check_choice("cache_policy", where.cache_policy, CACHE_POLICIES)
    check_int("cache_ways", where.cache_ways, lo=1)
    if where.cache_rows is not None and (plan is not None or world > 1):
        raise ValueError(
            "cache_rows applies to the single-device plan estimate builds; for a plan (or several devices) "
            "give each cache shard its cache_rows (TableShard(..., placement='cache', cache_rows=...))"
        )
    return hw


def _check_devices(w: Workload, hw: Hardware | str, gpus: int, nodes: int) -> Hardware:
    """The hardware preset, after checking ``gpus`` x ``nodes`` of it and its peak for ``w``'s GEMMs."""
    hw = hardware(hw) if isinstance(hw, str) else hw
    if not isinstance(hw, Hardware):
        raise TypeError(f"hw must be a Hardware or a preset name, got {type(hw).__name__}")
    check_int("gpus", gpus, lo=1)
    check_int("nodes", nodes, lo=1)
    if gpus > hw.devices:
        raise ValueError(
            f"gpus must be <= {hw.devices} (devices per {hw.name} node{_trays(hw, gpus)}), got {gpus}"
        )
    if gpus * nodes > MAX_RANKS:
        raise ValueError(
            f"nodes must keep gpus x nodes <= {MAX_RANKS} devices (recnotebooks.plan.MAX_RANKS), got "
            f"gpus={gpus} x nodes={show(nodes)}"
        )
    gemm = precision(w.dtype).gemm
    try:
        hw.flops(gemm)
    except ValueError:
        raise ValueError(
            f"dtype={w.dtype!r} runs its GEMMs in {gemm}, which {hw.name} has no peak for "
            f"(it has {sorted(hw.peak_flops)}); choose another dtype"
        ) from None
    return hw


def _trays(hw: Hardware, gpus: int) -> str:
    """Where ``hw``'s NVLink domain spans several nodes (the trays of an NVL72 rack), how to ask for
    ``gpus`` of it: whole nodes of ``hw.devices``."""
    if hw.nodes_per_domain <= 1:
        return ""
    nodes = -(-gpus // hw.devices)
    return (
        f"; a tray of its {hw.domain_size}-GPU NVLink domain: {gpus} GPUs are gpus={hw.devices}, "
        f"nodes={nodes}, over NVLink up to {hw.nodes_per_domain} nodes"
    )


def _check_where(where: _Where) -> None:
    """The placement :func:`estimate` builds its plan at, and its cache: a typed-in hit rate or rows."""
    placement, hit, rows = where.placement, where.cache_hit_rate, where.cache_rows
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {list(PLACEMENTS)}, got {placement!r}")
    if rows is not None and placement != "cache":
        raise ValueError(f"cache_rows applies to placement='cache', got placement={placement!r}")
    if rows is not None and hit is not None:
        raise ValueError(
            "give cache_hit_rate (typed in) or cache_rows (the model computes the hit rate), not both: "
            f"got cache_hit_rate={hit!r}, cache_rows={rows!r}"
        )
    if placement == "cache" and rows is None:
        if hit is None:
            raise ValueError(
                "cache_hit_rate must be in [0, 1] with placement='cache' (or give cache_rows and "
                "cache_policy for a modeled hit rate), got None"
            )
        check_fraction("cache_hit_rate", hit)


def _plan_for(w: Workload, hw: Hardware, world: int, where: _Where, plan: Plan | None) -> Plan:
    """``plan``, or the one :func:`estimate` builds: every table on one device at ``where``, or on
    several the planner's greedy table-wise plan when it fits in device memory, else its cost plan."""
    if plan is not None:
        return plan
    if world == 1:
        return single_device_plan(
            w.config,
            where.placement,
            where.cache_hit_rate,
            cache_rows=where.cache_rows,
            cache_policy=where.cache_policy,
            cache_ways=where.cache_ways,
        )
    hit = where.cache_hit_rate
    if w.config.num_tables >= world:
        greedy = plan_tables(w, hw, world, strategy="greedy", placement=where.placement, cache_hit_rate=hit)
        sizes = table_bytes(w.config, w.dtype, w.sparse_optimizer)
        load = [sum(sizes[s.table] for s in greedy.on_rank(r)) for r in range(world)]
        if where.placement != "hbm" or max(load) <= hw.hbm_bytes * (1 - RESERVE):
            return greedy
    return plan_tables(w, hw, world, strategy="cost", placement=where.placement, cache_hit_rate=hit)


def _check_plan(w: Workload, plan: Plan, world: int, implementation: str) -> None:
    """``plan`` is for ``world`` ranks and ``w``'s tables, and in HBM where ``implementation`` needs it."""
    if plan.world_size != world:
        raise ValueError(f"plan is for {plan.world_size} ranks but gpus x nodes = {world}")
    plan.check(w.config)
    outside = sorted({s.placement for s in plan.shards} - {"hbm"})
    if implementation == "hugectr" and outside:  # its embedding collection keeps every table in HBM
        raise ValueError(
            f"implementation='hugectr' keeps every table in device memory (HBM), but the plan places tables "
            f"in {outside}; use more devices, or implementation='torchrec' (FBGEMM's caches and host memory)"
        )


@dataclass(frozen=True)
class _RankTerms:
    """What :func:`_per_rank` models of each rank: seconds by component, device bytes moved and
    communication seconds compute does not hide; and the parameter servers the plan's remote rows need."""

    per_rank: list[dict[str, float]]
    device_bytes: list[float]
    parameter_servers: int
    exposed: list[float]
    collectives: list[dict[str, C.CollectivePrice]]


def _per_rank(step: Step, accesses: list[C.ShardAccess]) -> _RankTerms:
    """Seconds by component and device bytes moved on each rank, the parameter servers the
    plan's remote rows need, and each rank's communication seconds that compute does not hide
    (:func:`_exposed`)."""
    world = step.world
    dense = _dense_components(step)
    w = step.workload
    servers = C.parameter_servers(w.config, step.plan, w.dtype, w.sparse_optimizer)
    users = len({a.shard.rank for a in accesses if a.shard.placement == "remote"}) or 1
    traffic_rows = T.collective_bytes(w.config, step.plan, step.local_batch, world, w.dtype)
    hier = _hierarchical(step)
    pooled = ("pooled_all_to_all", "gradient_all_to_all")  # priced by `hier` where it is hierarchical
    volumes = T.volumes([r for r in traffic_rows if not (hier and r["collective"] in pooled)], world)
    if hier:
        volumes["hierarchical"] = hier  # type: ignore[assignment]
    # our step: one all-reduce per DDP bucket and per data-parallel (2D: replica) sync; TorchRec's
    # is priced as one call
    ours = step.implementation == "recnotebooks"
    ar_calls = T.all_reduce_calls(traffic_rows, world) if ours else [1] * world
    nic = C.nic_per_device(step.hw, step.gpus)
    by_rank: list[list[C.ShardAccess]] = [[] for _ in range(world)]
    for a in accesses:
        by_rank[a.shard.rank].append(a)
    per_rank, device_bytes, exposed, collectives = [], [], [], []
    for r in range(world):
        comp, moved = _rank_components(
            step, r, by_rank[r], dense, nic, volumes, max(1, servers) / users, ar_calls[r]
        )
        per_rank.append(comp)
        device_bytes.append(moved)
        exposed.append(_exposed(step, comp, volumes, r, ar_calls[r]))
        if world > 1:
            collectives.append(_collective_prices(step, r, nic, volumes, ar_calls[r]))
    return _RankTerms(per_rank, device_bytes, servers, exposed, collectives)


def _exposed(
    step: Step,
    comp: Mapping[str, float],
    volumes: Mapping[str, list[float]],
    rank: int,
    ar_calls: int,
) -> float:
    """Seconds of ``rank``'s collectives that its step waits for, however it overlaps the rest,
    where the implementation hides only what its GPUs move over NVLink
    (:data:`~recnotebooks.perf.components.collectives.EXPOSED_COMMUNICATION`): on a node whose
    GPUs reach each other over PCIe (:func:`~recnotebooks.perf.components.collectives.peers_over_pcie`),
    all of its all-to-alls and all-reduce; on several NVLink domains, the network's share of them:
    their seconds (``comp``) less what they would take over a network of unlimited bandwidth (the
    NVLink phases and the latencies stay hideable). Otherwise 0."""
    if step.implementation not in C.EXPOSED_COMMUNICATION or step.world <= 1:
        return 0.0
    if C.peers_over_pcie(step.hw):
        return comp["all_to_all"] + comp["all_reduce"]
    if step.domain >= step.world:  # one NVLink domain: nothing crosses the network
        return 0.0
    unlimited = dict(_collective_seconds(step, rank, math.inf, volumes, ar_calls))
    return max(0.0, sum(comp[k] - unlimited[k] for k in unlimited))


def _collective_seconds(
    step: Step, rank: int, nic: float, volumes: Mapping[str, list[float]], ar_calls: int
) -> list[tuple[str, float]]:
    """``rank``'s all-to-all and all-reduce seconds over a NIC share of ``nic`` bytes/s."""
    prices = _collective_prices(step, rank, nic, volumes, ar_calls)
    all_to_all = prices["all_to_all"].seconds
    if "hierarchical_all_to_all" in prices:
        all_to_all += prices["hierarchical_all_to_all"].seconds
    return [("all_to_all", all_to_all), ("all_reduce", prices["all_reduce"].seconds)]


def _collective_prices(
    step: Step, rank: int, nic: float, volumes: Mapping[str, list[float]], ar_calls: int
) -> dict[str, C.CollectivePrice]:
    """How ``rank``'s collectives are priced over a NIC share of ``nic`` bytes/s: as NCCL prices and
    picks them on the GPUs its model covers, else by the α-β formula
    (:func:`~recnotebooks.perf.components.collectives.nccl_fabric`); the pooled embeddings'
    hierarchical exchange apart where HugeCTR runs it node by node."""
    hw, world = step.hw, step.world
    a2a, ar = volumes["all_to_all"][rank], volumes["all_reduce"][rank]
    calls = C.A2A_CALLS[step.implementation]
    grouped = step.implementation == "hugectr"
    prices = {"all_to_all": C.all_to_all_priced(a2a, world, step.domain, hw, nic, calls, grouped)}
    if "hierarchical" in volumes:  # the pooled embeddings, node by node (HugeCTR on several nodes)
        nvlink, network = volumes["hierarchical"][rank]  # type: ignore[misc]
        prices["hierarchical_all_to_all"] = C.hierarchical_all_to_all_priced(
            nvlink, network, step.nodes, hw, nic, calls, domain_nodes=hw.nodes_per_domain
        )
    prices["all_reduce"] = C.all_reduce_priced(ar, world, step.domain, hw, nic, ar_calls)
    return prices


def _hierarchical(step: Step) -> list[tuple[float, float]]:
    """Per rank, ``(nvlink, network)`` bytes each way of the pooled embeddings' hierarchical
    exchange (:func:`recnotebooks.perf.traffic.hierarchical_bytes`) where ``step``'s implementation
    crosses nodes hierarchically (:data:`~recnotebooks.perf.components.collectives.HIERARCHICAL`)
    on more than one node; otherwise none (``[]``)."""
    if step.nodes <= 1 or step.implementation not in C.HIERARCHICAL or step.plan.world_size != step.world:
        return []
    if not step.hierarchical:  # the submission's train.py exchanges flat (HugeCTRSharding.hierarchical)
        return []
    rows = T.hierarchical_bytes(
        step.workload.config, step.plan, step.local_batch, step.gpus, step.workload.dtype
    )
    return [
        (max(r["nvlink_sent"], r["nvlink_received"]), max(r["network_sent"], r["network_received"]))
        for r in rows
    ]


def _cache_figures(result: CostResult, accesses: list[C.ShardAccess]) -> None:
    """Each cached table's modeled hit rate, and the lookup-weighted hit rate of every device
    cache (the plain mean where there are no lookups), on ``result``."""
    result.cache_hit_rates = {
        a.shard.table: a.cache_hit_rate for a in accesses if a.shard.placement == "cache"
    }
    cached = [a for a in accesses if a.shard.placement == "cache" and not a.update_only]
    looked = sum(a.lookups for a in cached)
    if cached:
        result.device_cache_hit_rate = (
            sum(a.lookups * a.cache_hit_rate for a in cached) / looked
            if looked > 0
            else sum(a.cache_hit_rate for a in cached) / len(cached)
        )


def _dense_components(step: Step) -> dict[str, C.Work]:
    """The components every rank runs the same way, with the device bytes each moves."""
    config, dtype, optimizer = step.workload.config, step.workload.dtype, step.workload.dense_optimizer
    hw, b, plan = step.hw, step.local_batch, step.plan
    sharded = step.world > 1 and any(sh.sharding != "data_parallel" for sh in plan.shards)
    fused = step.implementation == "hugectr"  # elementwise work in the GEMMs' epilogues
    return {
        "data_loading": C.Work(C.data_loading(config, hw, b), 0.0),
        "host_to_device": C.Work(C.host_to_device(config, hw, b), 0.0),
        "bottom_mlp": C.mlp(config, hw, "bottom", b, dtype, fused),
        "interaction": C.interaction(config, hw, b, dtype, fused),
        "top_mlp": C.mlp(config, hw, "top", b, dtype, fused),
        "dense_optimizer": C.dense_optimizer(config, hw, dtype, optimizer),
        "overhead": C.Work(
            C.overhead(config, hw, step.world, sharded, plan, step.implementation, optimizer), 0.0
        ),
    }


def _rank_components(
    step: Step,
    rank: int,
    accesses: list[C.ShardAccess],
    dense: dict[str, C.Work],
    nic: float,
    volumes: Mapping[str, list[float]],
    server_share: float = 1.0,
    ar_calls: int = 1,
) -> tuple[dict[str, float], float]:
    """One rank's seconds by component, and the device-memory bytes it moves (``nic``: its share
    of the node's NICs; ``volumes``: per component, per rank, the bytes of
    :func:`recnotebooks.perf.traffic.volumes`; ``server_share``: the parameter servers per rank
    that uses them; ``ar_calls``: its all-reduces per step)."""
    hw, world = step.hw, step.world
    mine = [a for a in accesses if a.shard.rank == rank]
    parts = [C.embedding_shard(a, hw, nic, step.gpus, server_share) for a in mine]
    comp = dict.fromkeys(COMPONENTS, 0.0)
    comp.update({k: w.seconds for k, w in dense.items()})
    comp["embedding_forward"] = sum(e.forward for e in parts)
    comp["embedding_backward"] = sum(e.backward for e in parts)
    if any(e.remote for e in parts):
        comp["overhead"] += C.overhead_of_remote_rows(hw)
    if world > 1:  # bytes from perf.traffic.collective_bytes (the estimate reads them per rank)
        comp.update(_collective_seconds(step, rank, nic, volumes, ar_calls))
    moved = sum(w.device_bytes for w in dense.values()) + sum(e.device_bytes for e in parts)
    return comp, moved


def _result(step: Step, accesses: list[C.ShardAccess], terms: _RankTerms, mem: MemoryReport) -> CostResult:
    """The modeled step from each rank's terms: step time with and without overlap, busy fraction,
    FLOP/s efficiency, device-memory bandwidth use and energy (:func:`_figures`), memory, notes,
    the plan and its caches' hit rates (:func:`_cache_figures`)."""
    w, per_rank, servers = step.workload, terms.per_rank, terms.parameter_servers
    exposed = list(terms.exposed) or [0.0] * len(per_rank)
    step_s = _checked_step(step, max(sum(c.values()) for c in per_rank))
    step_o = _checked_step(step, max(overlapped_step(c, e) for c, e in zip(per_rank, exposed, strict=True)))
    power = _power(step, servers)
    figures = _figures(step, terms, step_s, step_o, power)
    result = CostResult(
        config=w.config.name, hardware=step.hw.name, world_size=step.world, nodes=step.nodes,
        batch_size=w.batch_size, dtype=w.dtype, per_rank=per_rank, step_time=step_s, step_time_overlap=step_o,
        **figures, memory=mem, notes=_notes(mem, servers, power[1]), parameter_servers=servers,
        exposed_communication=exposed, power_w=power[0], plan=step.plan, collectives=terms.collectives,
    )  # fmt: skip
    _cache_figures(result, accesses)
    return result


def _checked_step(step: Step, seconds: float) -> float:
    """``seconds``, a step time the model produced, refused unless finite and positive."""
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(
            f"the model produced a step time of {seconds!r} for {step.workload.config.name} on "
            f"{step.hw.name}; check the hardware numbers (recnotebooks.perf.hardware.FIELD_RANGES)"
        )
    return seconds


def _power(step: Step, parameter_servers: int) -> tuple[float, float]:
    """Watts the step draws (the devices, each node's host and the parameter servers that hold
    remote rows, each a :data:`~recnotebooks.perf.components.PARAMETER_SERVER` node), and the
    servers' share."""
    ps = C.PARAMETER_SERVER
    server_power = parameter_servers * (ps.power_w + ps.host_power_w)
    return step.world * step.hw.power_w + step.nodes * step.hw.host_power_w + server_power, server_power


def _notes(mem: MemoryReport, parameter_servers: int, server_power: float) -> list[str]:
    """Why the plan does not fit, and the parameter servers its remote rows need."""
    notes = [] if mem.fits else ["does not fit: " + "; ".join(mem.reasons)]
    if parameter_servers:
        ps = C.PARAMETER_SERVER
        notes.append(
            f"remote rows need {parameter_servers} parameter server(s) ({ps.name} nodes of "
            f"{ps.host_mem_bytes / 1e9:.0f} GB); their {server_power:,.0f} W count in the energy"
        )
    return notes


def _figures(
    step: Step, terms: _RankTerms, step_s: float, step_o: float, power: tuple[float, float]
) -> dict[str, float]:
    """Throughput with and without overlap, busy fraction, FLOP/s over peak, device-memory bandwidth
    use and energy per million samples, each refused unless finite."""
    config, hw, batch_size, world = step.workload.config, step.hw, step.workload.batch_size, step.world
    busy = sum(sum(c[k] for k in COMPUTE) for c in terms.per_rank) / (world * step_s)
    flops = config.total_flops_per_sample() * batch_size
    figures = {
        "throughput": batch_size / step_s,
        "throughput_overlap": batch_size / step_o,
        "busy_fraction": busy,
        "flops_efficiency": flops / step_s / (world * hw.flops(precision(step.workload.dtype).gemm)),
        "hbm_utilisation": max(terms.device_bytes) / step_s / hw.hbm_bw,
        "joules_per_million_samples": power[0] * step_s / batch_size * 1e6,
    }
    for k, v in figures.items():  # the hardware ranges keep these finite; never hand on inf or NaN
        if not math.isfinite(v):
            raise ValueError(
                f"the model's {k} came out as {v!r} for {config.name} on {hw.name} at batch_size="
                f"{batch_size}; check the hardware numbers (recnotebooks.perf.hardware.FIELD_RANGES)"
            )
    return figures
