"""What :func:`recnotebooks.perf.cost.estimate` returns: :class:`CostResult`, one modeled
training step per rank by component, and the components' names (:data:`COMPONENTS`; the
compute and communication groups the overlapped step time uses).

A result also says **where the tables live** in the plan it modeled
(:meth:`CostResult.table_placement`): the bytes of the model's tables (weights and row-wise
optimizer state) in HBM, in host DRAM behind a device cache (with the cache's hit rate), in
host DRAM read over PCIe (UVM) and on parameter servers, counted from the plan's shards by
:func:`recnotebooks.perf.memory.memory_report`. A planner asked for ``placement="hbm"`` moves
what does not fit in device memory elsewhere; :meth:`CostResult.table_placement_text` says so
in words ("you chose hbm; the cost planner kept 21.6 GB (2.0%) in HBM and moved what does not fit
there: 1,032 GB (98%) to 5 parameter servers").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recnotebooks.perf.memory import MemoryReport
from recnotebooks.plan import Plan

__all__ = [
    "COMMUNICATION",
    "COMPONENTS",
    "COMPUTE",
    "TABLE_HOMES",
    "CostResult",
    "describe_table_placement",
    "overlapped_step",
]

#: Where a shard's rows live, for each placement (fastest first: the order of
#: :meth:`CostResult.table_placement` and of its charts).
TABLE_HOMES = {"hbm": "HBM", "cache": "host DRAM behind a device cache",
               "host": "host DRAM read over PCIe (UVM)", "remote": "parameter servers"}  # fmt: skip

#: The components of one step, in the order charts stack them.
COMPONENTS = ("data_loading", "host_to_device", "embedding_forward", "embedding_backward", "bottom_mlp",
              "interaction", "top_mlp", "dense_optimizer", "all_to_all", "all_reduce",
              "overhead")  # fmt: skip
COMPUTE = (
    "embedding_forward",
    "embedding_backward",
    "bottom_mlp",
    "interaction",
    "top_mlp",
    "dense_optimizer",
)
COMMUNICATION = ("host_to_device", "all_to_all", "all_reduce")


def overlapped_step(component: Mapping[str, float], exposed: float = 0.0, extra: float = 0.0) -> float:
    """One rank's step when communication overlaps compute (:attr:`CostResult.step_time_overlap`)
    from its ``component`` seconds: the longest of its compute with its launch overhead (plus
    ``extra`` seconds of it, to price another per-step constant), the communication it can hide,
    and its data loading; then the communication it waits for (``exposed``, a part of its
    communication: :attr:`CostResult.exposed_communication`)."""
    return (
        max(
            sum(component[k] for k in COMPUTE) + component["overhead"] + extra,
            sum(component[k] for k in COMMUNICATION) - exposed,
            component["data_loading"],
        )
        + exposed
    )


@dataclass
class CostResult:
    """Modeled cost of one training step; ``per_rank[r][component]`` in seconds."""

    config: str
    hardware: str
    world_size: int
    nodes: int
    batch_size: int
    dtype: str
    per_rank: list[dict[str, float]]
    step_time: float
    step_time_overlap: float
    throughput: float
    throughput_overlap: float
    busy_fraction: float
    flops_efficiency: float
    hbm_utilisation: float
    joules_per_million_samples: float
    memory: MemoryReport
    notes: list[str] = field(default_factory=list)
    source: str = "modeled"
    #: parameter-server nodes holding remote rows (their power is in the energy figures)
    parameter_servers: int = 0
    #: per rank, seconds of its communication that the overlapped step waits for rather than hides
    #: behind compute: what its collectives move over PCIe or the network where the implementation
    #: hides only NVLink traffic (:data:`~recnotebooks.perf.components.collectives.EXPOSED_COMMUNICATION`);
    #: empty or zeros otherwise
    exposed_communication: list[float] = field(default_factory=list)
    #: watts the step draws: devices, hosts and parameter servers
    power_w: float = 0.0
    #: the plan this result models (its notes say why each table is where it is)
    plan: Plan | None = None
    #: device-cache hit rate of each cached shard's table (typed in or modeled; the last
    #: shard's, for a table split over ranks)
    cache_hit_rates: dict[str, float] = field(default_factory=dict)
    #: share of the lookups of all ``"cache"`` shards that their device caches serve (the
    #: lookup-weighted mean of their hit rates); ``None`` when no shard is behind a cache
    device_cache_hit_rate: float | None = None
    #: per rank, how each of its collectives was priced: ``{"all_to_all": CollectivePrice,
    #: "all_reduce": ..., "hierarchical_all_to_all": ...}``
    #: (:class:`~recnotebooks.perf.components.collectives.CollectivePrice`: seconds, calls and, on
    #: GPUs NCCL's model covers, NCCL's choice of algorithm and protocol and why); empty on one rank
    collectives: list[dict[str, Any]] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def slowest_rank(self) -> int:
        return max(range(self.world_size), key=lambda r: sum(self.per_rank[r].values()))

    def breakdown(self) -> dict[str, float]:
        """Components of the slowest rank (what bounds the step)."""
        return dict(self.per_rank[self.slowest_rank])

    def collective_choices(self, rank: int | None = None) -> dict[str, dict[str, object]]:
        """How ``rank``'s collectives (the slowest rank's by default) were priced, as plain data:
        per collective ``how`` (``"nccl"`` or ``"alpha-beta"``), ``seconds``, ``calls`` and, where
        NCCL's model picked, ``algorithm``, ``protocol``, ``bytes`` (one call's) and ``reason``."""
        if not self.collectives:
            return {}
        r = self.slowest_rank if rank is None else rank
        out: dict[str, dict[str, object]] = {}
        for name, price in self.collectives[r].items():
            row: dict[str, object] = {"how": price.how, "seconds": price.seconds, "calls": price.calls}
            c = price.choice
            if c is not None:
                row.update(algorithm=c.algorithm, protocol=c.protocol, bytes=c.nbytes, reason=c.reason)
            out[name] = row
        return out

    def table(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows ``{rank, component, seconds, share, source="modeled", **extra}``."""
        rows = []
        for r, comp in enumerate(self.per_rank):
            tot = sum(comp.values()) or 1.0
            rows += [
                {
                    "rank": r,
                    "component": c,
                    "seconds": v,
                    "share": v / tot,
                    "source": self.source,
                    "hardware": self.hardware,
                    **extra,
                }
                for c, v in comp.items()
            ]
        return rows

    def table_placement(self) -> list[dict[str, object]]:
        """Where the model's tables live in the modeled plan: one row per placement of
        :data:`TABLE_HOMES` (in that order, zeros included), **modeled**.

        Each row: ``placement`` (the plan's name: ``hbm``, ``cache``, ``host``, ``remote``),
        ``where`` (in words), ``bytes`` and ``gb`` (weights and sparse optimizer state of the
        shards there, a data-parallel table counted once: :attr:`MemoryReport.table_bytes`),
        ``share`` of all table bytes, ``hit_rate`` (the ``cache`` row's
        :attr:`device_cache_hit_rate` when it holds bytes, else ``None``),
        ``device_cache_bytes`` (the ``cache`` row: device memory its caches take, a copy of hot
        rows besides the bytes in host DRAM), ``parameter_servers`` (the ``remote`` row: nodes
        its bytes need) and ``source="modeled"``. The rows' bytes add up to the model's table
        bytes (:attr:`MemoryReport.table_bytes` says when a column-wise split adds state)."""
        held = self.memory.table_bytes
        total = sum(held.values())
        rows = []
        for p, where in TABLE_HOMES.items():
            b = float(held.get(p, 0.0))
            rows.append(
                {
                    "placement": p,
                    "where": where,
                    "bytes": b,
                    "gb": b / 1e9,
                    "share": b / total if total else 0.0,
                    "hit_rate": self.device_cache_hit_rate if p == "cache" and b > 0 else None,
                    "device_cache_bytes": self.memory.device_cache_bytes if p == "cache" else 0.0,
                    "parameter_servers": self.memory.parameter_servers if p == "remote" else 0,
                    "source": self.source,
                }
            )
        return rows

    def table_placement_text(self) -> str:
        """:meth:`table_placement` in one sentence, against the placement the plan was asked for
        (:func:`describe_table_placement`)."""
        plan = self.plan
        return describe_table_placement(
            self.table_placement(),
            plan.requested_placement if plan is not None else None,
            plan.strategy if plan is not None else None,
        )

    def summary(self) -> dict[str, object]:
        """Headline numbers as plain data (JSON-ready)."""
        return {
            "config": self.config,
            "hardware": self.hardware,
            "world_size": self.world_size,
            "nodes": self.nodes,
            "batch_size": self.batch_size,
            "dtype": self.dtype,
            "source": self.source,
            "step_time_s": self.step_time,
            "step_time_overlap_s": self.step_time_overlap,
            "throughput": self.throughput,
            "throughput_overlap": self.throughput_overlap,
            "busy_fraction": self.busy_fraction,
            "flops_efficiency": self.flops_efficiency,
            "hbm_utilisation": self.hbm_utilisation,
            "joules_per_million_samples": self.joules_per_million_samples,
            "parameter_servers": self.parameter_servers,
            "power_w": self.power_w,
            "fits": self.fits,
            "reasons": list(self.memory.reasons),
            "breakdown_s": self.breakdown(),
            "collectives": self.collective_choices(),
            # the most any rank's overlapped step waits for communication it cannot hide
            "exposed_communication_s": max(self.exposed_communication, default=0.0),
            "memory_per_device_bytes": [d["total"] for d in self.memory.device],
            "notes": list(self.notes),
            "requested_placement": self.plan.requested_placement if self.plan is not None else None,
            "table_placement": self.table_placement(),
            "table_placement_note": self.table_placement_text(),
        }


def _size(b: float) -> str:
    """``1.032e12 -> '1,032 GB'``, ``2.11e10 -> '21.1 GB'``, ``6.0e6 -> '6.0 MB'``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            v = b / scale
            return f"{v:,.0f} {unit}" if v >= 100 else f"{v:.1f} {unit}"
    return f"{b:,.0f} B"


def _percent(fraction: float) -> str:
    """``0.0036 -> '0.36%'``, ``0.041 -> '4.1%'``, ``0.9 -> '90%'``: two significant digits below
    10%, whole percent above (the charts' labels, :func:`recnotebooks.viz.controls.percent`; perf
    never imports viz, so the rule is written out here too)."""
    pct = fraction * 100
    if pct == 0 or abs(pct) >= 9.95:
        return f"{pct:.0f}%"
    return f"{pct:#.2g}%"


def _home(r: Mapping[str, object], to: bool) -> str:
    """Where row ``r`` of :meth:`CostResult.table_placement` lives: "in HBM" (``to``: "to HBM")."""
    p = r["placement"]
    if p == "hbm":
        return "to HBM" if to else "in HBM"
    if p == "remote":
        n = int(r["parameter_servers"] or 0)  # type: ignore[call-overload]
        return f"{'to' if to else 'on'} {n:,} parameter server{'s' if n != 1 else ''}"
    place = f"{'to' if to else 'in'} host DRAM"
    if p == "host":
        return place + " read over PCIe (UVM)"
    hit = r["hit_rate"]
    rate = "" if hit is None else f", hit rate {float(hit):.0%}"  # type: ignore[arg-type]
    return place + f" behind a device cache ({_size(float(r['device_cache_bytes']))} of HBM{rate})"  # type: ignore[arg-type]


def _and(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def describe_table_placement(
    rows: Sequence[Mapping[str, object]], requested: str | None = None, strategy: str | None = None
) -> str:
    """One sentence of where the tables live, from :meth:`CostResult.table_placement` rows (a JSON
    report's ``table_placement`` too): "all 105 GB of tables (weights and optimizer state) live in
    HBM"; when a planner (``strategy``) asked for ``requested`` put bytes elsewhere, "you chose hbm;
    the cost planner kept 21.6 GB (2.0%) in HBM and moved what does not fit there: 1,032 GB (98%) to 5
    parameter servers" (shares as the charts print them)."""
    total = sum(float(r["bytes"]) for r in rows)  # type: ignore[arg-type,misc]
    held = [r for r in rows if float(r["bytes"]) > 0]  # type: ignore[arg-type]
    what = "of tables (weights and optimizer state)"
    if not held:
        return "the plan holds no table bytes"
    amount = {id(r): f"{_size(float(r['bytes']))} ({_percent(float(r['share']))})" for r in held}  # type: ignore[arg-type]
    if requested is None or all(r["placement"] == requested for r in held):
        if len(held) == 1:
            return f"all {_size(total)} {what} live {_home(held[0], False)}"
        return f"the {_size(total)} {what} live " + _and([f"{amount[id(r)]} {_home(r, False)}" for r in held])
    who = f"the {strategy} planner" if strategy and strategy != "manual" else "the plan"
    kept = [r for r in held if r["placement"] == requested]
    moved = _and([f"{amount[id(r)]} {_home(r, True)}" for r in held if r["placement"] != requested])
    if not kept:
        return f"you chose {requested}; {who} moved all {_size(total)} {what}: {moved}"
    keep = f"{amount[id(kept[0])]} {_home(kept[0], False)}"
    return f"you chose {requested}; {who} kept {keep} and moved what does not fit there: {moved}"
