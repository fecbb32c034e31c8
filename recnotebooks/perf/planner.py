"""Placement planner: assign tables to devices and placements under memory limits.

Three strategies, as the field does it:

* ``naive``: contiguous blocks of tables per rank, in config order (the dlrm repo's
  model-parallel split), everything in device memory;
* ``greedy``: tables by size, largest first, each to the rank with the fewest bytes so far
  (NVIDIA DLRM's size balancing);
* ``cost``: tables by *modeled time* (lookups x row bytes and distinct rows touched),
  longest first, each to the rank whose slowest-rank time grows least, subject to memory
  (device memory less what the MLPs, activations and buffers need): a table that fits on
  no single device (or every table, when there are fewer tables than devices) is split
  row-wise across all of them; one that fits nowhere in device memory goes to host DRAM
  behind a device cache placed where the cache fits (read over PCIe if no cache fits),
  and to a parameter server when host DRAM is full too.

Plans are plain data (:class:`~recnotebooks.plan.Plan`) with notes explaining each
decision and the placement they were asked for (``requested_placement``: a shard the cost
strategy moved out of device memory says where it went in its own ``placement``);
:mod:`recnotebooks.distributed` executes them.

**Decisions.** Given a list (``plan_tables(..., decisions=[])``), a strategy appends a
:class:`Decision` for each table it places, in the order it placed them: the rule it applied, the
candidates it compared with their costs at that moment (the ranks' bytes for ``greedy``, their
modeled seconds for ``cost``, the offload options' seconds) and what the table added. Recording
changes nothing in the plan; :mod:`recnotebooks.perf.explain` reads the decisions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from recnotebooks.checks import check_choice, check_fraction, check_int, check_type
from recnotebooks.config import DLRMConfig, Workload, state_floats_per_row
from recnotebooks.config.workload import workload_from
from recnotebooks.perf import components as C
from recnotebooks.perf.access import cache_rows_for_hit_rate
from recnotebooks.perf.components import PARAMETER_SERVER
from recnotebooks.perf.hardware import DTYPE_BYTES, Hardware, hardware
from recnotebooks.perf.memory import DDP_BUCKET_BYTES, memory_footprint
from recnotebooks.plan import MAX_RANKS, PLACEMENTS, Plan, TableShard

__all__ = ["STRATEGIES", "Decision", "placement_seconds", "plan_tables", "table_bytes"]

STRATEGIES = ("naive", "greedy", "cost")
#: Share of device memory the planner leaves for MLPs, activations, buffers and the allocator.
RESERVE = 0.15
#: Hit rate assumed for a device cache the cost planner adds in front of a table that fits
#: nowhere in device memory, when the caller gives none.
DEFAULT_FALLBACK_HIT_RATE = 0.9


@dataclass(frozen=True)
class Decision:
    """Why a planner put (a shard of) ``table`` where it did, recorded as it decided (**modeled**
    costs). ``rule``: the strategy's rule in words; ``ranks``: where it went, with ``sharding`` and
    ``placement``; ``compared``: each candidate it weighed (``"rank 3"``, ``"cache"``, a threshold)
    and its cost in ``unit`` at that moment, the chosen one ``chosen``; ``added``: what the table
    added to each rank it went to, in ``unit``; ``reason``: one sentence."""

    table: str
    rule: str
    ranks: tuple[int, ...]
    sharding: str
    placement: str
    unit: str = ""
    compared: Mapping[str, float] = field(default_factory=dict)
    chosen: str = ""
    added: float = 0.0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "table": self.table,
            "rule": self.rule,
            "ranks": list(self.ranks),
            "sharding": self.sharding,
            "placement": self.placement,
            "unit": self.unit,
            "compared": dict(self.compared),
            "chosen": self.chosen,
            "added": self.added,
            "reason": self.reason,
        }


def _log(decisions: list[Decision] | None, decision: Decision) -> None:
    """Append ``decision`` where the caller records them (``decisions`` a list), else nothing."""
    if decisions is not None:
        decisions.append(decision)


def table_bytes(
    config: DLRMConfig, dtype: str = "fp32", sparse_optimizer: str = "rowwise_adagrad"
) -> dict[str, float]:
    """Weights (``dtype``) plus the fp32 state ``sparse_optimizer`` keeps (row-wise Adagrad: one
    float per row; exact Adagrad: one per element) of every table."""
    eb = DTYPE_BYTES[dtype]
    state = 4 * state_floats_per_row(sparse_optimizer, config.embedding_dim)
    return {t.name: t.num_rows * (config.embedding_dim * eb + state) for t in config.tables}


def placement_seconds(
    config: DLRMConfig,
    hw: Hardware,
    world: int,
    shard: TableShard,
    batch_size: int,
    dtype: str,
    servers: float | None = None,
    sparse_optimizer: str = "rowwise_adagrad",
) -> float:
    """Modeled embedding seconds per step (forward + backward) of one shard at its placement,
    priced by the placement's function in :mod:`recnotebooks.perf.components` (the LLC is this
    shard's alone; a ``"remote"`` shard gets ``servers`` parameter servers, by default the ones
    its own rows need; each distinct row's ``sparse_optimizer`` state read and written)."""
    one = Plan(world, (shard,))
    (a,) = C.shard_access(config, hw, one, batch_size / world, batch_size, 1.05, dtype, sparse_optimizer)
    gpus = min(world, hw.devices)
    if servers is None:
        servers = max(1, C.parameter_servers(config, one, dtype, sparse_optimizer))
    e = C.embedding_shard(a, hw, C.nic_per_device(hw, gpus), gpus, servers)
    return e.forward + e.backward


def _seconds(w: Workload, hw: Hardware, world: int, shard: TableShard, servers: float | None = None) -> float:
    """:func:`placement_seconds` of ``shard`` in ``w``'s step (at Criteo's skew, as the planner prices every
    table: :data:`~recnotebooks.config.DEFAULT_ZIPF_EXPONENT`)."""
    return placement_seconds(w.config, hw, world, shard, w.batch_size, w.dtype, servers, w.sparse_optimizer)


def _table_cost(w: Workload, hw: Hardware) -> dict[str, float]:
    """Each table's modeled seconds per step in device memory (what the cost strategy balances)."""
    return {n: _seconds(w, hw, 1, TableShard(n, 0)) for n in w.config.table_names}


def plan_tables(
    workload: Workload | DLRMConfig,
    hw: Hardware | str,
    world_size: int,
    *,
    strategy: str = "cost",
    placement: str = "hbm",
    cache_hit_rate: float | None = None,
    decisions: list[Decision] | None = None,
    **older: Any,
) -> Plan:
    """A :class:`Plan` for ``world_size`` devices of ``hw`` for ``workload``'s step (see the module
    docstring): its model, global batch, precision and sparse optimizer (the planner prices every
    table at Criteo's skew, whatever the workload's, and leaves room for Adagrad's dense state).

    ``cache_hit_rate`` is required with ``placement="cache"``; the cost strategy also uses it
    for the device caches it puts in front of tables that fit nowhere in device memory
    (:data:`DEFAULT_FALLBACK_HIT_RATE` when not given). Tables are sized and priced with the
    state the sparse optimizer keeps (:func:`table_bytes`: exact Adagrad doubles an fp32 table).
    The older form, ``plan_tables(config, hw, world_size, batch_size=8192, dtype="fp32",
    sparse_optimizer="rowwise_adagrad", ...)``, still works
    (:func:`~recnotebooks.config.workload.workload_from`).

    ``decisions``: a list to which the strategy appends a :class:`Decision` for each table it places
    (the plan is the same with or without it).
    """
    w = workload_from(workload, older, "plan_tables", {"batch_size": 8192})
    if decisions is not None:
        check_type("decisions", decisions, list, "a list (the planner appends its Decisions)")
    hw = (
        hardware(hw) if isinstance(hw, str) else check_type("hw", hw, Hardware, "a Hardware or a preset name")
    )
    check_choice("strategy", strategy, STRATEGIES)
    world_size = check_int("world_size", world_size, lo=1, hi=MAX_RANKS)
    check_choice("placement", placement, PLACEMENTS)
    if placement == "cache" and cache_hit_rate is None:
        raise ValueError("cache_hit_rate must be in [0, 1] with placement='cache', got None")
    if cache_hit_rate is not None:
        cache_hit_rate = check_fraction("cache_hit_rate", cache_hit_rate)
    hit = cache_hit_rate if placement == "cache" else None
    if strategy == "cost":
        fallback_hit = DEFAULT_FALLBACK_HIT_RATE if cache_hit_rate is None else float(cache_hit_rate)
        return _cost_plan(w, hw, world_size, placement, hit, fallback_hit, decisions)
    names = list(w.config.table_names)
    if world_size > len(names):
        raise ValueError(
            f"a table-wise plan needs at least as many tables as devices: {len(names)} tables, "
            f"world_size={world_size}; use strategy='cost' (recnb: --strategy cost), which splits rows, "
            "or fewer devices"
        )
    if strategy == "naive":
        return _naive_plan(names, world_size, placement, hit, decisions)
    sizes = table_bytes(w.config, w.dtype, w.sparse_optimizer)
    return _greedy_plan(sizes, world_size, placement, hit, decisions)


def _naive_plan(
    names: list[str], world: int, placement: str, hit: float | None, decisions: list[Decision] | None = None
) -> Plan:
    """Contiguous blocks of tables per rank, in config order (the dlrm repo's get_my_slice: the first
    ranks get one more)."""
    base, extra = divmod(len(names), world)
    counts = [base + (r < extra) for r in range(world)]
    ranks = [r for r, c in enumerate(counts) for _ in range(c)]
    for i, (n, r) in enumerate(zip(names, ranks, strict=True)):
        reason = f"table {i + 1} of {len(names)} in config order falls in rank {r}'s block of {counts[r]}"
        _log(
            decisions,
            Decision(
                n,
                rule="contiguous block in config order",
                ranks=(r,),
                sharding="table_wise",
                placement=placement,
                unit="tables",
                compared={f"rank {r}": float(counts[r])},
                chosen=f"rank {r}",
                added=1.0,
                reason=reason,
            ),
        )
    shards = [
        TableShard(n, r, "table_wise", placement, cache_hit_rate=hit)
        for n, r in zip(names, ranks, strict=True)
    ]
    note = "contiguous blocks of tables per rank, in config order: " + ", ".join(map(str, counts))
    return Plan(world, tuple(shards), "naive", (note,), placement)


def _greedy_plan(
    sizes: dict[str, float],
    world: int,
    placement: str,
    hit: float | None,
    decisions: list[Decision] | None = None,
) -> Plan:
    """Largest table first (``sizes``: bytes by name, in config order), each to the rank with the
    fewest bytes so far (NVIDIA DLRM's size balancing)."""
    load = [0.0] * world
    shards = []
    for n in sorted(sizes, key=lambda n: -sizes[n]):
        r = min(range(world), key=lambda i: load[i])
        reason = f"rank {r} held the fewest table bytes ({load[r] / 1e9:.3g} GB) when {n} came up"
        _log(
            decisions,
            Decision(
                n,
                rule="largest table first, to the rank with the fewest bytes",
                ranks=(r,),
                sharding="table_wise",
                placement=placement,
                unit="bytes",
                compared={f"rank {i}": load[i] for i in range(world)},
                chosen=f"rank {r}",
                added=sizes[n],
                reason=reason,
            ),
        )
        load[r] += sizes[n]
        shards.append(TableShard(n, r, "table_wise", placement, cache_hit_rate=hit))
    note = "largest table first, each to the rank with the fewest bytes: " + ", ".join(
        f"rank {r} {b / 1e9:.2f} GB" for r, b in enumerate(load)
    )
    return Plan(world, tuple(shards), "greedy", (note,), placement)


def _non_table_bytes(w: Workload, world: int) -> float:
    """Device bytes besides tables (as memory_report counts them): MLP weights and state,
    activations at the local batch, all-to-all buffers and DDP buckets."""
    config, batch_size = w.config, w.batch_size
    eb = DTYPE_BYTES[w.dtype]
    local = max(1, batch_size // world)
    fp = memory_footprint(config, batch_size=local, dtype_bytes=eb)
    comm = 2 * batch_size * config.num_tables * config.embedding_dim * eb / world + 2 * DDP_BUCKET_BYTES
    return (
        fp["dense_weights"] + fp["dense_weights"] * 4 / eb + fp["activations"] + (comm if world > 1 else 0.0)
    )


@dataclass
class _Ranks:
    """The cost strategy's running totals: each rank's table bytes in device memory (``mem``, under
    ``cap`` each) and modeled seconds (``time``), the host DRAM left, and the bytes on parameter
    servers and the ranks that use them."""

    mem: list[float]
    time: list[float]
    cap: float
    host_left: float
    remote_bytes: float = 0.0
    remote_ranks: set[int] = field(default_factory=set)

    @property
    def world(self) -> int:
        return len(self.mem)


def _cost_plan(
    w: Workload,
    hw: Hardware,
    world: int,
    placement: str,
    hit: float | None,
    fallback_hit: float,
    decisions: list[Decision] | None = None,
) -> Plan:
    """Tables by modeled time, longest first, each placed table-wise where the slowest rank grows
    least, else split row-wise, else moved out of device memory (:func:`_offload`); each decision
    appended to ``decisions`` where given."""
    cap = hw.hbm_bytes * (1 - RESERVE) - _non_table_bytes(w, world) if placement == "hbm" else math.inf
    host = hw.host_mem_bytes * -(-world // hw.devices) if hw.kind == "gpu" else 0.0
    ranks = _Ranks([0.0] * world, [0.0] * world, cap, host)
    cost = _table_cost(w, hw)
    sizes = table_bytes(w.config, w.dtype, w.sparse_optimizer)
    rows = {t.name: t.num_rows for t in w.config.tables}
    split_all = w.config.num_tables < world  # too few tables to keep every device busy table-wise
    shards: list[TableShard] = []
    notes: list[str] = []
    for n in sorted(w.config.table_names, key=lambda n: -cost[n]):
        b, c = sizes[n], cost[n]
        placed = [] if split_all else _table_wise(ranks, n, b, c, placement, hit, decisions)
        if not placed:
            why = "fewer tables than devices" if split_all else "fits on no single device"
            placed = _row_wise(ranks, n, rows[n], b, c, placement, hit, decisions, why)
            if placed:
                notes.append(f"{n} ({b / 1e9:.1f} GB): {why}: split row-wise over {len(placed)}")
        if not placed:
            offload, note = _offload(w, hw, ranks, n, b, fallback_hit, decisions)
            placed = [offload]
            notes.append(note)
        shards += placed
    notes.append(
        "longest modeled table first, each to the rank whose time grows least: " + _times(ranks.time)
    )
    return Plan(world, tuple(shards), "cost", tuple(notes), placement)


def _times(time: list[float]) -> str:
    """Each rank's modeled seconds in words (a range over more than 16 ranks)."""
    if len(time) <= 16:
        return ", ".join(f"rank {r} {t * 1e3:.2f} ms" for r, t in enumerate(time))
    return f"{min(time) * 1e3:.2f} to {max(time) * 1e3:.2f} ms per rank over {len(time)} ranks"


def _table_wise(
    ranks: _Ranks,
    name: str,
    size: float,
    cost: float,
    placement: str,
    hit: float | None,
    decisions: list[Decision] | None = None,
) -> list[TableShard]:
    """Table ``name`` whole on the rank whose time grows least, among those with room; none if none has."""
    fits = [r for r in range(ranks.world) if ranks.mem[r] + size <= ranks.cap]
    if not fits:
        return []
    r = min(fits, key=lambda i: (ranks.time[i] + cost, ranks.mem[i]))
    room = "every rank" if len(fits) == ranks.world else f"{len(fits)} of {ranks.world} ranks"
    reason = (
        f"rank {r}'s modeled time grows least with {name} ({ranks.time[r] * 1e3:.3g} + {cost * 1e3:.3g} ms) "
        f"among the ranks with room for its {size / 1e9:.3g} GB ({room})"
    )
    _log(
        decisions,
        Decision(
            name,
            rule="longest modeled table first, to the rank whose time grows least",
            ranks=(r,),
            sharding="table_wise",
            placement=placement,
            unit="seconds",
            compared={f"rank {i}": ranks.time[i] + cost for i in fits},
            chosen=f"rank {r}",
            added=cost,
            reason=reason,
        ),
    )
    ranks.mem[r] += size
    ranks.time[r] += cost
    return [TableShard(name, r, "table_wise", placement, cache_hit_rate=hit)]


def _row_wise(
    ranks: _Ranks,
    name: str,
    rows: int,
    size: float,
    cost: float,
    placement: str,
    hit: float | None,
    decisions: list[Decision] | None = None,
    why: str = "",
) -> list[TableShard]:
    """Table ``name`` split row-wise over the least loaded ranks (at most one per row), if each
    share fits; else none (``why``: the reason it is split, for its :class:`Decision`)."""
    k = min(ranks.world, rows)  # no empty shard: at most one rank per row
    chosen = sorted(range(ranks.world), key=lambda i: (ranks.time[i], ranks.mem[i]))[:k]
    if not all(ranks.mem[r] + size / k <= ranks.cap for r in chosen):
        return []
    reason = f"{why}: each of the {k} least loaded ranks takes 1/{k} of its rows and {cost / k * 1e3:.3g} ms"
    _log(
        decisions,
        Decision(
            name,
            rule=f"split row-wise over the {k} least loaded ranks",
            ranks=tuple(sorted(chosen)),
            sharding="row_wise",
            placement=placement,
            unit="seconds",
            compared={f"rank {i}": ranks.time[i] for i in chosen},
            chosen="",
            added=cost / k,
            reason=reason,
        ),
    )
    shards = []
    for r in sorted(chosen):
        ranks.mem[r] += size / k
        ranks.time[r] += cost / k
        shards.append(TableShard(name, r, "row_wise", placement, row_fraction=1 / k, cache_hit_rate=hit))
    return shards


def _offload(
    w: Workload,
    hw: Hardware,
    ranks: _Ranks,
    name: str,
    size: float,
    hit: float,
    decisions: list[Decision] | None = None,
) -> tuple[TableShard, str]:
    """Where a table that fits in no device memory goes: of host DRAM behind a device cache of
    hit rate ``hit`` (if host DRAM has room and some rank the cache), host DRAM read over PCIe
    (if host DRAM has room) and remote parameter servers, the one of least modeled time
    (:func:`placement_seconds`), on the rank with the least time so far; and a note saying why.
    The parameter servers the plan needs are shared by the ranks that use them, so a remote table
    is priced at this rank's share. ``ranks`` takes the chosen shard's time, host DRAM, remote
    bytes and cache."""
    rows = {t.name: t.num_rows for t in w.config.tables}[name]
    cache = cache_rows_for_hit_rate(hit, rows) * (w.config.embedding_dim * DTYPE_BYTES[w.dtype] + 8)
    options = _offload_options(ranks, name, size, cache, hit)
    least = options[-1].rank  # the remote option, on the rank with the least time
    servers = max(1, math.ceil((ranks.remote_bytes + size) / PARAMETER_SERVER.host_mem_bytes))
    share = servers / len(ranks.remote_ranks | {least})
    cost = {
        o.placement: _seconds(w, hw, ranks.world, o, share if o.placement == "remote" else None)
        for o in options
    }
    best = min(options, key=lambda o: cost[o.placement])
    added = _seconds(w, hw, ranks.world, best)
    ranks.time[best.rank] += added
    if best.placement in ("host", "cache"):
        ranks.host_left -= size
    if best.placement == "remote":
        ranks.remote_bytes += size
        ranks.remote_ranks.add(best.rank)
    if best.placement == "cache":
        ranks.mem[best.rank] += cache
    note = _offload_note(name, size, ranks.world, best, cost, cache, hit, options)
    _log(
        decisions,
        Decision(
            name,
            rule="out of device memory: the place of least modeled time",
            ranks=(best.rank,),
            sharding=best.sharding,
            placement=best.placement,
            unit="seconds",
            compared=dict(cost),
            chosen=best.placement,
            added=added,
            reason=note,
        ),
    )
    return best, note


def _offload_options(ranks: _Ranks, name: str, size: float, cache: float, hit: float) -> list[TableShard]:
    """The places a table that fits in no device memory can go: host DRAM behind a device cache of
    ``cache`` bytes on the least loaded rank with room for it, host DRAM, parameter servers (last)."""
    room = [r for r in range(ranks.world) if ranks.mem[r] + cache <= ranks.cap]
    least = min(range(ranks.world), key=lambda i: ranks.time[i])
    options: list[TableShard] = []
    if size <= ranks.host_left:
        if room:
            options.append(
                TableShard(
                    name, min(room, key=lambda i: ranks.time[i]), placement="cache", cache_hit_rate=hit
                )
            )
        options.append(TableShard(name, least, placement="host"))
    return [*options, TableShard(name, least, placement="remote")]


def _offload_note(
    name: str,
    size: float,
    world: int,
    best: TableShard,
    cost: dict[str, float],
    cache: float,
    hit: float,
    options: list[TableShard],
) -> str:
    """Why table ``name`` went where :func:`_offload` put it (``best``), against the ``options`` it
    had and their modeled seconds (``cost``); what it lacked when some were missing."""
    ps = PARAMETER_SERVER
    where = {
        "cache": f"host DRAM behind a {cache / 1e9:.2f} GB device cache (hit rate {hit:.0%})",
        "host": "host DRAM read over PCIe (UVM)",
        "remote": f"remote parameter servers ({math.ceil(size / ps.host_mem_bytes):,} "
        f"{ps.name} node(s) of {ps.host_mem_bytes / 1e9:.0f} GB DRAM)",
    }
    others = ", ".join(f"{p} {c * 1e3:.2f} ms" for p, c in cost.items() if p != best.placement)
    offered = {o.placement for o in options}
    lacking = (
        ["host DRAM is full"] if "host" not in offered
        else ["no device has room for a cache"] if "cache" not in offered else []
    )  # fmt: skip
    why = f"{best.placement} chosen: {cost[best.placement] * 1e3:.2f} ms/step" + (
        f" vs {others}" if others else ""
    )
    return (
        f"{name} ({size / 1e9:.1f} GB) does not fit in device memory even split {world} ways"
        + (f" ({'; '.join(lacking)})" if lacking else "")
        + f": {where[best.placement]} on rank {best.rank}; {why}"
    )
