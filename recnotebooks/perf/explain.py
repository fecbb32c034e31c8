"""The planner explains its plan: per rank, what the modeled step costs it and what it holds, the
step's critical path, and per table why it went where it went (every number **modeled**).

:func:`explain_plan` prices a :class:`~recnotebooks.plan.Plan` with
:func:`~recnotebooks.perf.cost.estimate` and reads, for each rank (:class:`RankExplanation`):

* its **cost terms**: the seconds of every component of its step (they add up to its step; the
  slowest rank's sum is the modeled step), its lookups and the bytes of rows it gathers, the bytes
  its all-to-alls and all-reduces put on its link (:func:`recnotebooks.perf.traffic.collective_bytes`,
  each collective counted by the larger of what it sends and receives) and their seconds;
* the **storage it reserves** in device memory (:func:`recnotebooks.perf.memory.memory_report`):
  weights, optimizer state, cache, activations and communication buffers, which add up to its
  reservation, and the headroom left in the device's memory (negative: it does not fit).

Over the ranks: the **imbalance** (max over mean of the ranks' step times, and of their
reservations) and the **critical path** (:class:`CriticalPath`: the rank and the term that bound the
serial step, that rank's phases in the order a step runs them (:data:`PHASES`), and what bounds the
step when communication overlaps compute). Per table (:meth:`PlanExplanation.why`): the planner's
:class:`~recnotebooks.perf.planner.Decision` records, the candidates it compared and their costs
when it decided (``plan_tables``, ``mlperf_plan`` and ``hugectr_plan`` take ``decisions=[]``).

The idea follows TorchRec's planner stats (imbalance, critical path, storage reservation: its
issues #1257 and #3773, https://github.com/pytorch/torchrec/issues/3773); the code is this model's.

>>> from recnotebooks.config import Workload, preset
>>> from recnotebooks.perf.planner import plan_tables
>>> w = Workload(preset("tiny"), 4096)
>>> decisions = []
>>> plan = plan_tables(w, "dgx_a100", 2, strategy="greedy", decisions=decisions)
>>> e = explain_plan(w, "dgx_a100", plan, gpus=2, decisions=decisions)
>>> e.step_time == max(r.step for r in e.ranks)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recnotebooks.checks import check_choice, check_int, check_type, show
from recnotebooks.config import Workload
from recnotebooks.perf import components as C
from recnotebooks.perf import traffic as T
from recnotebooks.perf.cost import EXCHANGES, estimate
from recnotebooks.perf.hardware import Hardware, hardware
from recnotebooks.perf.planner import Decision
from recnotebooks.perf.result import COMMUNICATION, COMPONENTS, COMPUTE, CostResult, overlapped_step
from recnotebooks.plan import MAX_RANKS, Plan

__all__ = ["PHASES", "STORAGE", "CriticalPath", "PlanExplanation", "RankExplanation", "explain_plan"]

#: The phases of one step in the order a step runs them, each the components of
#: :data:`~recnotebooks.perf.result.COMPONENTS` it adds up (every component in exactly one). The
#: model adds a rank's components serially; ``embedding exchange`` holds all of its all-to-alls
#: (the ids and pooled embeddings forward, their gradients backward).
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("input", ("data_loading", "host_to_device")),
    ("embedding lookups", ("embedding_forward",)),
    ("embedding exchange", ("all_to_all",)),
    ("dense forward and backward", ("bottom_mlp", "interaction", "top_mlp")),
    ("embedding update", ("embedding_backward",)),
    ("gradient all-reduce", ("all_reduce",)),
    ("dense update", ("dense_optimizer",)),
    ("launch overhead", ("overhead",)),
)
#: The storage a rank reserves in device memory, each the kinds of
#: :func:`~recnotebooks.perf.memory.memory_report` it adds up (every kind in exactly one).
STORAGE: dict[str, tuple[str, ...]] = {
    "weights": ("embedding_weights", "dense_weights"),
    "optimizer_state": ("embedding_optimizer_state", "dense_optimizer_state"),
    "cache": ("cache",),
    "activations": ("activations",),
    "buffers": ("comm_buffers",),
}


@dataclass(frozen=True)
class RankExplanation:
    """One rank of an explained plan (every number **modeled**; seconds per step, bytes).

    ``seconds``: its step's components (:data:`~recnotebooks.perf.result.COMPONENTS`), which add up to
    ``step``; ``step_overlap``: its step when communication overlaps compute
    (:func:`~recnotebooks.perf.result.overlapped_step`), ``exposed`` seconds of it communication it
    waits for. ``lookups`` and ``bytes_gathered``: the rows its shards read a step and their bytes
    (forward). ``all_to_all_bytes`` / ``all_reduce_bytes``: what its collectives put on its link.
    ``storage``: device bytes by :data:`STORAGE` kind, adding up to ``reserved``; ``headroom``:
    ``capacity`` (the device's memory) less ``reserved``. ``tables``: the tables it holds a shard of."""

    rank: int
    seconds: dict[str, float]
    step: float
    step_overlap: float
    exposed: float
    lookups: float
    bytes_gathered: float
    all_to_all_bytes: float
    all_reduce_bytes: float
    storage: dict[str, float]
    reserved: float
    capacity: float
    tables: tuple[str, ...]

    @property
    def all_to_all_seconds(self) -> float:
        return self.seconds["all_to_all"]

    @property
    def all_reduce_seconds(self) -> float:
        return self.seconds["all_reduce"]

    @property
    def headroom(self) -> float:
        """Device bytes left after the reservation (negative: the rank does not fit)."""
        return self.capacity - self.reserved

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "rank": self.rank,
            "seconds": dict(self.seconds),
            "step_s": self.step,
            "step_overlap_s": self.step_overlap,
            "exposed_s": self.exposed,
            "lookups": self.lookups,
            "bytes_gathered": self.bytes_gathered,
            "all_to_all_bytes": self.all_to_all_bytes,
            "all_to_all_s": self.all_to_all_seconds,
            "all_reduce_bytes": self.all_reduce_bytes,
            "all_reduce_s": self.all_reduce_seconds,
            "storage_bytes": dict(self.storage),
            "reserved_bytes": self.reserved,
            "capacity_bytes": self.capacity,
            "headroom_bytes": self.headroom,
            "tables": list(self.tables),
        }


@dataclass(frozen=True)
class CriticalPath:
    """What bounds the modeled step. The serial step is the slowest rank's sum (``rank``, ``step``):
    its largest component ``term`` (``term_seconds``) and its :data:`PHASES` in order (``phases``:
    name and seconds). With communication overlapping compute, rank ``overlap_rank`` bounds the step
    (``overlap_step``) by its ``overlap_bound``: ``"compute"`` (with launch overhead),
    ``"communication"`` or ``"data loading"``, plus the ``exposed`` communication it waits for."""

    rank: int
    step: float
    term: str
    term_seconds: float
    phases: tuple[tuple[str, float], ...]
    overlap_rank: int
    overlap_step: float
    overlap_bound: str
    exposed: float

    def sentence(self) -> str:
        """The critical path in words."""
        order = ", ".join(f"{name} {s * 1e3:.3g}" for name, s in self.phases if s > 0)
        share = self.term_seconds / self.step if self.step > 0 else 0.0
        waits = f" plus {self.exposed * 1e3:.3g} ms of exposed communication" if self.exposed > 0 else ""
        return (
            f"rank {self.rank} bounds the step at {self.step * 1e3:.3g} ms (serial), its largest term "
            f"{self.term} ({self.term_seconds * 1e3:.3g} ms, {share:.0%}); its phases in order (ms): "
            f"{order}. "
            f"With compute/communication overlap rank {self.overlap_rank} bounds it at "
            f"{self.overlap_step * 1e3:.3g} ms, by its {self.overlap_bound}{waits}."
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready), with :meth:`sentence`."""
        return {
            "rank": self.rank,
            "step_s": self.step,
            "term": self.term,
            "term_s": self.term_seconds,
            "phases_s": [[n, s] for n, s in self.phases],
            "overlap_rank": self.overlap_rank,
            "overlap_step_s": self.overlap_step,
            "overlap_bound": self.overlap_bound,
            "exposed_s": self.exposed,
            "sentence": self.sentence(),
        }


@dataclass(frozen=True)
class PlanExplanation:
    """A plan explained (:func:`explain_plan`; every number **modeled**): the job, each rank
    (``ranks``), the modeled step with and without overlap, the imbalance (max over mean of the ranks'
    step times, ``time_imbalance``, and of their reserved device memory, ``memory_imbalance``), the
    critical path, the planner's decisions in the order it made them, whether the plan fits, the
    table bytes each node keeps in host DRAM, and the plan's notes."""

    config: str
    hardware: str
    world_size: int
    nodes: int
    batch_size: int
    dtype: str
    strategy: str
    implementation: str
    ranks: tuple[RankExplanation, ...]
    step_time: float
    step_time_overlap: float
    time_imbalance: float
    memory_imbalance: float
    critical_path: CriticalPath
    decisions: tuple[Decision, ...]
    plan: Plan
    fits: bool
    reasons: tuple[str, ...] = ()
    #: bytes of tables each node keeps in host DRAM (``host`` and ``cache`` placements)
    host_bytes: tuple[float, ...] = ()
    notes: tuple[str, ...] = ()
    source: str = "modeled"

    def why(self, table: str | None = None) -> list[dict[str, Any]]:
        """One row per table (or only ``table``), in the order the planner decided: the ranks it went
        to, its sharding and placement, the rule, the candidates compared (the chosen one's cost and
        the best other's, in ``unit``, and the range of all of them), how many decisions it took (a
        split table: one per shard) and the first one's reason. A table the planner recorded no
        decision for says so."""
        names = list(dict.fromkeys(s.table for s in self.plan.shards))
        if table is not None:
            names = [check_choice("table", table, names)]
        by_table: dict[str, list[Decision]] = {}
        for d in self.decisions:
            by_table.setdefault(d.table, []).append(d)
        order = [n for n in by_table if n in names] + [n for n in names if n not in by_table]
        return [_why_row(n, by_table.get(n, []), self.plan) for n in order]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "source": self.source,
            "config": self.config,
            "hardware": self.hardware,
            "world_size": self.world_size,
            "nodes": self.nodes,
            "batch_size": self.batch_size,
            "dtype": self.dtype,
            "strategy": self.strategy,
            "implementation": self.implementation,
            "step_time_s": self.step_time,
            "step_time_overlap_s": self.step_time_overlap,
            "time_imbalance": self.time_imbalance,
            "memory_imbalance": self.memory_imbalance,
            "critical_path": self.critical_path.to_dict(),
            "ranks": [r.to_dict() for r in self.ranks],
            "why": self.why(),
            "decisions": [d.to_dict() for d in self.decisions],
            "fits": self.fits,
            "reasons": list(self.reasons),
            "host_bytes": list(self.host_bytes),
            "notes": list(self.notes),
        }


def _why_row(table: str, decisions: list[Decision], plan: Plan) -> dict[str, Any]:
    """:meth:`PlanExplanation.why`'s row for ``table`` from its ``decisions`` (none: read off ``plan``)."""
    shards = [s for s in plan.shards if s.table == table]
    ranks = sorted({s.rank for s in shards})
    row: dict[str, Any] = {
        "table": table,
        "ranks": ranks,
        "sharding": shards[0].sharding,
        "placement": shards[0].placement,
        "decisions": len(decisions),
    }
    if not decisions:
        one = plan.world_size == 1
        rule = "the only device" if one else f"as the {plan.strategy} plan gives it"
        return {
            **row,
            "rule": rule,
            "unit": "",
            "chosen": "",
            "chosen_cost": None,
            "other": "",
            "other_cost": None,
            "compared_range": None,
            "reason": "one device holds every table" if one else "no decision recorded for it",
        }
    first = decisions[0]
    others = {k: v for k, v in first.compared.items() if k != first.chosen} if first.chosen else {}
    other = min(others, key=lambda k: others[k]) if others else ""
    values = list(first.compared.values())
    return {
        **row,
        "rule": first.rule,
        "unit": first.unit,
        "chosen": first.chosen,
        "chosen_cost": first.compared.get(first.chosen) if first.chosen else None,
        "other": other,
        "other_cost": others.get(other),
        "compared_range": [min(values), max(values)] if values else None,
        "reason": first.reason,
    }


def explain_plan(
    workload: Workload,
    hw: Hardware | str,
    plan: Plan,
    *,
    gpus: int | None = None,
    nodes: int = 1,
    decisions: Sequence[Decision] = (),
    implementation: str = "torchrec",
    exchange: str | None = None,
) -> PlanExplanation:
    """Explain ``plan`` for ``workload``'s step on ``gpus`` x ``nodes`` devices of ``hw`` (``gpus``:
    ``plan.world_size // nodes`` unless given), as ``implementation`` runs it (``exchange``: HugeCTR's
    across nodes, :func:`~recnotebooks.perf.cost.estimate`'s), with the planner's ``decisions``
    (recorded by ``plan_tables(..., decisions=[])`` and its kin). Raises ``ValueError``/``TypeError``
    naming a bad argument: a decision for a table or rank the plan lacks, ranks <= 0, a plan for
    another number of ranks."""
    check_type("workload", workload, Workload, "a Workload (recnotebooks.config.Workload)")
    hw = (
        hardware(hw) if isinstance(hw, str) else check_type("hw", hw, Hardware, "a Hardware or a preset name")
    )
    check_type("plan", plan, Plan, "a Plan")
    nodes = check_int("nodes", nodes, lo=1, hi=MAX_RANKS)
    if gpus is None:
        if plan.world_size % nodes:
            raise ValueError(f"nodes must divide plan.world_size={plan.world_size}, got {nodes}")
        gpus = plan.world_size // nodes
    gpus = check_int("gpus", gpus, lo=1, hi=MAX_RANKS)
    if exchange is not None:
        check_choice("exchange", exchange, EXCHANGES)
    checked = _checked_decisions(decisions, plan)
    result = estimate(
        workload, hw, gpus=gpus, nodes=nodes, plan=plan, implementation=implementation, exchange=exchange
    )
    ranks = _ranks(workload, hw, plan, result, _hierarchical(implementation, nodes, exchange), gpus)
    steps, reserved = [r.step for r in ranks], [r.reserved for r in ranks]
    return PlanExplanation(
        config=workload.config.name,
        hardware=hw.name,
        world_size=plan.world_size,
        nodes=nodes,
        batch_size=workload.batch_size,
        dtype=workload.dtype,
        strategy=plan.strategy,
        implementation=implementation,
        ranks=tuple(ranks),
        step_time=result.step_time,
        step_time_overlap=result.step_time_overlap,
        time_imbalance=_max_over_mean(steps),
        memory_imbalance=_max_over_mean(reserved),
        critical_path=_critical_path(ranks),
        decisions=checked,
        plan=plan,
        fits=result.fits,
        reasons=tuple(result.memory.reasons),
        host_bytes=tuple(float(h["total"]) for h in result.memory.host),
        notes=(*plan.notes, *result.memory.notes),
    )


def _checked_decisions(decisions: Sequence[Decision], plan: Plan) -> tuple[Decision, ...]:
    """``decisions`` as a tuple, each a :class:`Decision` for a table of ``plan`` on its ranks."""
    if isinstance(decisions, (str, bytes)) or not isinstance(decisions, Sequence):
        raise TypeError(f"decisions must be a sequence of Decision, got {type(decisions).__name__}")
    tables = list(dict.fromkeys(s.table for s in plan.shards))
    for i, d in enumerate(decisions):
        check_type(f"decisions[{i}]", d, Decision, "a Decision (recnotebooks.perf.planner.Decision)")
        if d.table not in tables:
            raise ValueError(
                f"decisions[{i}].table must be one of the plan's tables {show(tables)}, got {d.table!r}"
            )
        outside = [r for r in d.ranks if not 0 <= r < plan.world_size]
        if outside:
            raise ValueError(
                f"decisions[{i}].ranks must be in [0, {plan.world_size - 1}] (the plan's ranks), "
                f"got {outside}"
            )
    return tuple(decisions)


def _hierarchical(implementation: str, nodes: int, exchange: str | None) -> bool:
    """Whether the pooled embeddings cross nodes hierarchically, as ``estimate`` prices them."""
    return nodes > 1 and implementation in C.HIERARCHICAL and exchange != "flat"


def _link_bytes(w: Workload, plan: Plan, gpus: int, hierarchical: bool) -> tuple[list[float], list[float]]:
    """Per rank, the bytes its all-to-alls and its all-reduces put on its link (each collective
    counted by the larger of what it sends and receives): :func:`~recnotebooks.perf.traffic.collective_bytes`;
    where the pooled embeddings cross nodes hierarchically, their NVLink and network phases
    (:func:`~recnotebooks.perf.traffic.hierarchical_bytes`), forward and backward, in place of the
    flat exchange."""
    world = plan.world_size
    if world <= 1:
        return [0.0], [0.0]
    local = w.batch_size / world
    rows = T.collective_bytes(w.config, plan, local, world, w.dtype)
    pooled = ("pooled_all_to_all", "gradient_all_to_all")
    volumes = T.volumes([r for r in rows if not (hierarchical and r["collective"] in pooled)], world)
    a2a = list(volumes["all_to_all"])
    if hierarchical:
        for r, row in enumerate(T.hierarchical_bytes(w.config, plan, local, gpus, w.dtype)):
            nvlink = max(row["nvlink_sent"], row["nvlink_received"])
            network = max(row["network_sent"], row["network_received"])
            a2a[r] += 2 * (nvlink + network)
    return a2a, list(volumes["all_reduce"])


def _ranks(
    w: Workload, hw: Hardware, plan: Plan, result: CostResult, hierarchical: bool, gpus: int
) -> list[RankExplanation]:
    """Each rank's :class:`RankExplanation` from ``result`` (its components, memory and exposed
    communication), the shards' lookups and the collectives' bytes."""
    world = plan.world_size
    accesses = C.shard_access(
        w.config, hw, plan, w.batch_size / world, w.batch_size, w.zipf_exponent, w.dtype, w.sparse_optimizer
    )
    lookups, gathered = [0.0] * world, [0.0] * world
    for a in accesses:
        if not a.update_only:
            lookups[a.shard.rank] += a.lookups
            gathered[a.shard.rank] += a.lookups * a.row_bytes
    a2a, ar = _link_bytes(w, plan, gpus, hierarchical)
    exposed = list(result.exposed_communication) or [0.0] * world
    out = []
    for r in range(world):
        comp = dict(result.per_rank[r])  # its components, in the order estimate adds them
        device = result.memory.device[r]
        storage = {kind: float(sum(device.get(k, 0.0) for k in keys)) for kind, keys in STORAGE.items()}
        out.append(
            RankExplanation(
                rank=r,
                seconds=comp,
                step=sum(comp.values()),
                step_overlap=overlapped_step(comp, exposed[r]),
                exposed=exposed[r],
                lookups=lookups[r],
                bytes_gathered=gathered[r],
                all_to_all_bytes=a2a[r],
                all_reduce_bytes=ar[r],
                storage=storage,
                reserved=sum(storage.values()),
                capacity=hw.hbm_bytes,
                tables=tuple(dict.fromkeys(s.table for s in plan.on_rank(r))),
            )
        )
    return out


def _max_over_mean(values: Sequence[float]) -> float:
    """``max / mean`` of ``values`` (1 where they are all zero)."""
    mean = sum(values) / len(values)
    return max(values) / mean if mean > 0 else 1.0


def _critical_path(ranks: Sequence[RankExplanation]) -> CriticalPath:
    """The rank and term that bound the serial step, its phases in order, and what bounds the
    overlapped step (:func:`~recnotebooks.perf.result.overlapped_step`'s terms)."""
    slow = max(ranks, key=lambda r: r.step)
    term = max(COMPONENTS, key=lambda k: slow.seconds[k])
    phases = tuple((name, sum(slow.seconds[k] for k in keys)) for name, keys in PHASES)
    lap = max(ranks, key=lambda r: r.step_overlap)
    c = lap.seconds
    bounds = {
        "compute": sum(c[k] for k in COMPUTE) + c["overhead"],
        "communication": sum(c[k] for k in COMMUNICATION) - lap.exposed,
        "data loading": c["data_loading"],
    }
    return CriticalPath(
        slow.rank,
        slow.step,
        term,
        slow.seconds[term],
        phases,
        lap.rank,
        lap.step_overlap,
        max(bounds, key=lambda k: bounds[k]),
        lap.exposed,
    )
