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
"""

from __future__ import annotations

import math

from recnotebooks.checks import check_choice, check_fraction, check_int, check_type
from recnotebooks.config import DLRMConfig, state_floats_per_row
from recnotebooks.perf import components as C
from recnotebooks.perf.access import cache_rows_for_hit_rate
from recnotebooks.perf.components import PARAMETER_SERVER
from recnotebooks.perf.hardware import DTYPE_BYTES, Hardware, hardware
from recnotebooks.perf.memory import DDP_BUCKET_BYTES, memory_footprint
from recnotebooks.plan import MAX_RANKS, PLACEMENTS, Plan, TableShard

__all__ = ["STRATEGIES", "placement_seconds", "plan_tables", "table_bytes"]

STRATEGIES = ("naive", "greedy", "cost")
#: Share of device memory the planner leaves for MLPs, activations, buffers and the allocator.
RESERVE = 0.15
#: Hit rate assumed for a device cache the cost planner adds in front of a table that fits
#: nowhere in device memory, when the caller gives none.
DEFAULT_FALLBACK_HIT_RATE = 0.9


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


def _table_cost(
    config: DLRMConfig, hw: Hardware, batch_size: int, dtype: str, sparse_optimizer: str
) -> dict[str, float]:
    """Each table's modeled seconds per step in device memory (what the cost strategy balances)."""
    return {
        n: placement_seconds(config, hw, 1, TableShard(n, 0), batch_size, dtype, None, sparse_optimizer)
        for n in config.table_names
    }


def plan_tables(
    config: DLRMConfig,
    hw: Hardware | str,
    world_size: int,
    *,
    strategy: str = "cost",
    placement: str = "hbm",
    cache_hit_rate: float | None = None,
    batch_size: int = 8192,
    dtype: str = "fp32",
    sparse_optimizer: str = "rowwise_adagrad",
) -> Plan:
    """A :class:`Plan` for ``world_size`` devices of ``hw`` (see the module docstring).

    ``cache_hit_rate`` is required with ``placement="cache"``; the cost strategy also uses it
    for the device caches it puts in front of tables that fit nowhere in device memory
    (:data:`DEFAULT_FALLBACK_HIT_RATE` when not given). Tables are sized and priced with the
    state ``sparse_optimizer`` keeps (:func:`table_bytes`: exact Adagrad doubles an fp32 table).
    """
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    hw = (
        hardware(hw) if isinstance(hw, str) else check_type("hw", hw, Hardware, "a Hardware or a preset name")
    )
    check_choice("strategy", strategy, STRATEGIES)
    world_size = check_int("world_size", world_size, lo=1, hi=MAX_RANKS)
    check_choice("placement", placement, PLACEMENTS)
    batch_size = check_int("batch_size", batch_size, lo=1)
    check_choice("dtype", dtype, list(DTYPE_BYTES))
    state_floats_per_row(sparse_optimizer, config.embedding_dim)  # the name checked here
    if placement == "cache" and cache_hit_rate is None:
        raise ValueError("cache_hit_rate must be in [0, 1] with placement='cache', got None")
    if cache_hit_rate is not None:
        cache_hit_rate = check_fraction("cache_hit_rate", cache_hit_rate)
    hit = cache_hit_rate if placement == "cache" else None
    fallback_hit = DEFAULT_FALLBACK_HIT_RATE if cache_hit_rate is None else float(cache_hit_rate)
    names = list(config.table_names)
    if strategy in ("naive", "greedy") and world_size > len(names):
        raise ValueError(
            f"a table-wise plan needs at least as many tables as devices: {len(names)} tables, "
            f"world_size={world_size}; use strategy='cost' (recnb: --strategy cost), which splits rows, "
            "or fewer devices"
        )
    sizes = table_bytes(config, dtype, sparse_optimizer)
    notes: list[str] = []
    if strategy == "naive":
        base, extra = divmod(len(names), world_size)  # the dlrm repo's get_my_slice: first ranks get one more
        counts = [base + (r < extra) for r in range(world_size)]
        ranks = [r for r, c in enumerate(counts) for _ in range(c)]
        shards = [
            TableShard(n, r, "table_wise", placement, cache_hit_rate=hit)
            for n, r in zip(names, ranks, strict=True)
        ]
        notes.append("contiguous blocks of tables per rank, in config order: " + ", ".join(map(str, counts)))
        return Plan(world_size, tuple(shards), "naive", tuple(notes), placement)
    if strategy == "greedy":
        load = [0.0] * world_size
        shards = []
        for n in sorted(names, key=lambda n: -sizes[n]):
            r = min(range(world_size), key=lambda i: load[i])
            load[r] += sizes[n]
            shards.append(TableShard(n, r, "table_wise", placement, cache_hit_rate=hit))
        notes.append(
            "largest table first, each to the rank with the fewest bytes: "
            + ", ".join(f"rank {r} {b / 1e9:.2f} GB" for r, b in enumerate(load))
        )
        return Plan(world_size, tuple(shards), "greedy", tuple(notes), placement)
    return _cost_plan(
        config, hw, world_size, placement, hit, fallback_hit, batch_size, dtype, sizes, sparse_optimizer
    )


def _non_table_bytes(config: DLRMConfig, world: int, batch_size: int, dtype: str) -> float:
    """Device bytes besides tables (as memory_report counts them): MLP weights and state,
    activations at the local batch, all-to-all buffers and DDP buckets."""
    eb = DTYPE_BYTES[dtype]
    local = max(1, batch_size // world)
    fp = memory_footprint(config, batch_size=local, dtype_bytes=eb)
    comm = 2 * batch_size * config.num_tables * config.embedding_dim * eb / world + 2 * DDP_BUCKET_BYTES
    return (
        fp["dense_weights"] + fp["dense_weights"] * 4 / eb + fp["activations"] + (comm if world > 1 else 0.0)
    )


def _offload(
    config: DLRMConfig,
    hw: Hardware,
    world: int,
    name: str,
    size: float,
    mem: list[float],
    time: list[float],
    cap: float,
    host_left: float,
    hit: float,
    batch_size: int,
    dtype: str,
    remote: tuple[float, set[int]] = (0.0, set()),
    sparse_optimizer: str = "rowwise_adagrad",
) -> tuple[TableShard, str]:
    """Where a table that fits in no device memory goes: of host DRAM behind a device cache of
    hit rate ``hit`` (if host DRAM has room and some rank the cache), host DRAM read over PCIe
    (if host DRAM has room) and remote parameter servers, the one of least modeled time
    (:func:`placement_seconds`), on the rank with the least time so far; and a note saying why.
    ``remote``: bytes already on parameter servers and the ranks using them: the servers the
    plan needs are shared by those ranks, so a remote table is priced at this rank's share."""
    rows = {t.name: t.num_rows for t in config.tables}[name]
    cache = cache_rows_for_hit_rate(hit, rows) * (config.embedding_dim * DTYPE_BYTES[dtype] + 8)
    room = [r for r in range(world) if mem[r] + cache <= cap]
    least = min(range(world), key=lambda i: time[i])
    options: list[TableShard] = []
    if size <= host_left:
        if room:
            options.append(
                TableShard(name, min(room, key=lambda i: time[i]), placement="cache", cache_hit_rate=hit)
            )
        options.append(TableShard(name, least, placement="host"))
    options.append(TableShard(name, least, placement="remote"))
    ps_bytes = PARAMETER_SERVER.host_mem_bytes
    share = max(1, math.ceil((remote[0] + size) / ps_bytes)) / len(remote[1] | {least})
    cost = {
        o.placement: placement_seconds(
            config,
            hw,
            world,
            o,
            batch_size,
            dtype,
            share if o.placement == "remote" else None,
            sparse_optimizer,
        )
        for o in options
    }
    best = min(options, key=lambda o: cost[o.placement])
    where = {
        "cache": f"host DRAM behind a {cache / 1e9:.2f} GB device cache (hit rate {hit:.0%})",
        "host": "host DRAM read over PCIe (UVM)",
        "remote": f"remote parameter servers ({math.ceil(size / PARAMETER_SERVER.host_mem_bytes):,} "
        f"{PARAMETER_SERVER.name} node(s) of {PARAMETER_SERVER.host_mem_bytes / 1e9:.0f} GB DRAM)",
    }
    others = ", ".join(f"{p} {c * 1e3:.2f} ms" for p, c in cost.items() if p != best.placement)
    lacking = [] if size <= host_left else ["host DRAM is full"]
    if size <= host_left and not room:
        lacking.append("no device has room for a cache")
    why = f"{best.placement} chosen: {cost[best.placement] * 1e3:.2f} ms/step" + (
        f" vs {others}" if others else ""
    )
    note = (
        f"{name} ({size / 1e9:.1f} GB) does not fit in device memory even split {world} ways"
        + (f" ({'; '.join(lacking)})" if lacking else "")
        + f": {where[best.placement]} on rank {best.rank}; {why}"
    )
    return best, note


def _cost_plan(
    config: DLRMConfig,
    hw: Hardware,
    world: int,
    placement: str,
    hit: float | None,
    fallback_hit: float,
    batch_size: int,
    dtype: str,
    sizes: dict[str, float],
    sparse_optimizer: str,
) -> Plan:
    eb = DTYPE_BYTES[dtype]
    cap = hw.hbm_bytes * (1 - RESERVE) - _non_table_bytes(config, world, batch_size, dtype)
    if placement != "hbm":
        cap = float("inf")
    cost = _table_cost(config, hw, batch_size, dtype, sparse_optimizer)
    rows = {t.name: t.num_rows for t in config.tables}
    mem = [0.0] * world
    time = [0.0] * world
    shards: list[TableShard] = []
    notes: list[str] = []
    split_all = config.num_tables < world  # too few tables to keep every device busy table-wise
    host_left = hw.host_mem_bytes * -(-world // hw.devices) if hw.kind == "gpu" else 0.0
    remote_bytes, remote_ranks = 0.0, set()
    for n in sorted(config.table_names, key=lambda n: -cost[n]):
        b, c = sizes[n], cost[n]
        fits = [] if split_all else [r for r in range(world) if mem[r] + b <= cap]
        if fits:
            r = min(fits, key=lambda i: (time[i] + c, mem[i]))
            mem[r] += b
            time[r] += c
            shards.append(TableShard(n, r, "table_wise", placement, cache_hit_rate=hit))
            continue
        k = min(world, rows[n])  # no empty shard: at most one rank per row
        ranks = sorted(range(world), key=lambda i: (time[i], mem[i]))[:k]
        if all(mem[r] + b / k <= cap for r in ranks):
            for r in sorted(ranks):
                mem[r] += b / k
                time[r] += c / k
                shards.append(TableShard(n, r, "row_wise", placement, row_fraction=1 / k, cache_hit_rate=hit))
            why = "fewer tables than devices" if split_all else "fits on no single device"
            notes.append(f"{n} ({b / 1e9:.1f} GB): {why}: split row-wise over {k}")
            continue
        offload, note = _offload(
            config,
            hw,
            world,
            n,
            b,
            mem,
            time,
            cap,
            host_left,
            fallback_hit,
            batch_size,
            dtype,
            (remote_bytes, remote_ranks),
            sparse_optimizer,
        )
        time[offload.rank] += placement_seconds(
            config, hw, world, offload, batch_size, dtype, None, sparse_optimizer
        )
        if offload.placement in ("host", "cache"):
            host_left -= b
        if offload.placement == "remote":
            remote_bytes += b
            remote_ranks.add(offload.rank)
        if offload.placement == "cache":
            mem[offload.rank] += cache_rows_for_hit_rate(fallback_hit, rows[n]) * (
                config.embedding_dim * eb + 8
            )
        shards.append(offload)
        notes.append(note)
    if world <= 16:
        per_rank = ", ".join(f"rank {r} {t * 1e3:.2f} ms" for r, t in enumerate(time))
    else:
        per_rank = f"{min(time) * 1e3:.2f} to {max(time) * 1e3:.2f} ms per rank over {world} ranks"
    notes.append("longest modeled table first, each to the rank whose time grows least: " + per_rank)
    return Plan(world, tuple(shards), "cost", tuple(notes), placement)
