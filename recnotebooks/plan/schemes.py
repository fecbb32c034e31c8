"""Sharding plans built by scheme and placement (the :class:`~recnotebooks.plan.shards.Plan` they
build: :mod:`recnotebooks.plan.shards`).

A plan can be written shard by shard, or built as TorchRec's ``sharding_plan`` builds one:
:func:`table_wise`, :func:`row_wise`, :func:`column_wise` and :func:`data_parallel` shard the
tables they are given one way over ``world_size`` ranks,
:func:`combine` joins plans of different tables into one mixed plan, :func:`round_robin` shards
every table one way (table-wise tables dealt out in turn), and :func:`named_plan` builds the
plans known by name (:data:`NAMED_PLANS`, :func:`mixed_plan` among them)::

    >>> plan = combine(row_wise(["users"], 2), table_wise(["items"], 2, ranks=1))
    >>> [(s.table, s.rank, s.sharding) for s in plan.shards]
    [('users', 0, 'row_wise'), ('users', 1, 'row_wise'), ('items', 1, 'table_wise')]

:func:`single_device_plan` places every table of a model on one device (in HBM, host DRAM,
behind a device cache or on a remote server) and :func:`behind_cache` puts tables of a plan
behind device caches.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from recnotebooks.checks import (
    check_choice,
    check_fraction,
    check_int,
    check_int_list,
    check_str,
    check_type,
    show,
)
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.plan.shards import FRACTION_TOLERANCE, MAX_RANKS, SHARDINGS, Plan, TableShard

__all__ = [
    "NAMED_PLANS",
    "behind_cache",
    "column_wise",
    "combine",
    "data_parallel",
    "mixed_plan",
    "named_plan",
    "round_robin",
    "row_wise",
    "single_device_plan",
    "table_wise",
]


def single_device_plan(
    config: DLRMConfig,
    placement: str | Sequence[str] = "hbm",
    cache_hit_rate: float | None = None,
    *,
    cache_rows: int | Mapping[str, int] | None = None,
    cache_policy: str = "static",
    cache_ways: int = 32,
) -> Plan:
    """Every table on rank 0 with one placement (or one per table). A ``"cache"`` table takes
    the typed-in ``cache_hit_rate``, or ``cache_rows`` device slots (one number for every cached
    table, capped at its rows, or one per table name) run by ``cache_policy``
    (:func:`behind_cache`)."""
    places = [placement] * config.num_tables if isinstance(placement, str) else list(placement)
    if len(places) != config.num_tables:
        raise ValueError(
            f"placement must be one value or one per table ({config.num_tables}), got {len(places)}"
        )
    shards = tuple(
        TableShard(
            t, 0, "table_wise", "hbm" if p == "cache" else p, cache_policy=cache_policy, cache_ways=cache_ways
        )
        for t, p in zip(config.table_names, places, strict=True)
    )
    asked = placement if isinstance(placement, str) else None
    plan = Plan(1, shards, "single_device", requested_placement=asked)
    cached = [t for t, p in zip(config.table_names, places, strict=True) if p == "cache"]
    return behind_cache(
        plan, config, cached, hit_rate=cache_hit_rate, rows=cache_rows, policy=cache_policy, ways=cache_ways
    )


def behind_cache(
    plan: Plan,
    config: DLRMConfig,
    tables: Sequence[str] | None = None,
    *,
    hit_rate: float | None = None,
    rows: int | Mapping[str, int] | None = None,
    fraction: float | None = None,
    policy: str | None = None,
    ways: int | None = None,
) -> Plan:
    """``plan`` with tables placed behind device caches: every shard of ``tables`` (``None``: the
    shards already in placement ``"cache"``) in placement ``"cache"``, with a typed-in
    ``hit_rate``, or device slots the model computes the hit rate of: ``rows`` (one number for
    every table, capped at its table's rows, or one per table name) or a ``fraction`` of each
    shard's rows (``max(1, round(fraction * rows))``, its rows as the plan's geometry gives them,
    exactly as the sharded engine holds them), run by ``policy`` (``ways`` per set for
    ``"setassoc"``; ``None``: each shard keeps its own). Shards of other tables are unchanged.
    The largest table of ``tiny`` split over two ranks, each half behind an LRU cache of 5% of
    its rows::

        >>> from recnotebooks.config import preset
        >>> config = preset("tiny")  # C8: 50,000 rows
        >>> plan = behind_cache(row_wise(config, 2), config, ["C8"], fraction=0.05, policy="lru")
        >>> [(s.rank, s.placement, s.cache_rows, s.cache_policy) for s in plan.shards if s.table == "C8"]
        [(0, 'cache', 1250, 'lru'), (1, 'cache', 1250, 'lru')]

    ``ValueError`` naming the parameter for a table the config lacks, both ``rows`` and
    ``fraction``, or a cached shard with neither a hit rate nor slots (or both)."""
    check_type("plan", plan, Plan, "a Plan")
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    tables = None if tables is None else _names_of(config, tables)
    if rows is not None and fraction is not None:
        raise ValueError(f"give rows or fraction, not both: got rows={rows!r}, fraction={fraction!r}")
    slots = _cache_rows_per_table(config, rows)
    if fraction is not None:
        fraction = check_fraction("fraction", fraction, lo_open=True)
    geometry = plan.geometry(config) if fraction is not None else None

    def cached(i: int, s: TableShard) -> TableShard:
        own = slots[s.table] if geometry is None else max(1, round(fraction * geometry[i].row_count))
        return dataclasses.replace(
            s,
            placement="cache",
            cache_hit_rate=hit_rate,
            cache_rows=own,
            cache_policy=s.cache_policy if policy is None else policy,
            cache_ways=s.cache_ways if ways is None else ways,
        )

    chosen = (lambda s: s.placement == "cache") if tables is None else (lambda s: s.table in tables)
    return dataclasses.replace(
        plan, shards=tuple(cached(i, s) if chosen(s) else s for i, s in enumerate(plan.shards))
    )


def _names_of(config: DLRMConfig, tables: object) -> list[str]:
    """``tables``, a sequence of names of ``config``'s tables, checked."""
    if isinstance(tables, str) or not isinstance(tables, Sequence):
        raise TypeError(f"tables must be a sequence of table names (or None), got {show(tables)}")
    names = [check_str(f"tables[{i}]", t) for i, t in enumerate(tables)]
    unknown = sorted(set(names) - set(config.table_names))
    if unknown:
        raise ValueError(
            f"tables must be tables of the config ({list(config.table_names)}), got unknown {unknown}"
        )
    return names


def _cache_rows_per_table(config: DLRMConfig, cache_rows: object) -> dict[str, int | None]:
    """``cache_rows`` (None, one int, or a mapping of table name to int) as rows per table."""
    if cache_rows is None:
        return dict.fromkeys(config.table_names)
    rows = {t.name: t.num_rows for t in config.tables}
    if isinstance(cache_rows, Mapping):
        unknown = sorted(set(cache_rows) - set(rows))
        if unknown:
            raise ValueError(f"cache_rows names tables the config does not have: {unknown}")
        return {
            t: (
                None
                if t not in cache_rows
                else min(rows[t], check_int(f"cache_rows[{t!r}]", cache_rows[t], lo=0))
            )
            for t in rows
        }
    k = check_int("cache_rows", cache_rows, lo=0)
    return {t: min(n, k) for t, n in rows.items()}


# ----- plan constructors ---------------------------------------------------------------------
#: What the constructors take as ``tables``: a :class:`~recnotebooks.config.DLRMConfig` (its
#: tables; the plan is then also validated against it), or a sequence of
#: :class:`~recnotebooks.config.TableConfig` objects or table names.
Tables = DLRMConfig | Sequence[TableConfig | str]


@dataclass(frozen=True)
class _Tables:
    """``tables`` read once: the names, the rows and dimension when known, the config if given."""

    names: tuple[str, ...]
    rows: dict[str, int]
    dim: int | None
    config: DLRMConfig | None


def _read_tables(tables: object) -> _Tables:
    if isinstance(tables, DLRMConfig):
        return _Tables(
            tables.table_names, {t.name: t.num_rows for t in tables.tables}, tables.embedding_dim, tables
        )
    if isinstance(tables, (str, bytes)) or not isinstance(tables, Sequence) or not tables:
        raise TypeError(
            "tables must be a DLRMConfig or a non-empty sequence of TableConfig objects or table names, "
            f"got {show(tables)} ({type(tables).__name__})"
        )
    names: list[str] = []
    rows: dict[str, int] = {}
    for i, t in enumerate(tables):
        if isinstance(t, TableConfig):
            names.append(t.name)
            rows[t.name] = t.num_rows
        elif isinstance(t, str):
            names.append(check_str(f"tables[{i}]", t))
        else:
            raise TypeError(
                f"tables[{i}] must be a TableConfig or a table name, got {show(t)} ({type(t).__name__})"
            )
    repeated = sorted(n for n, k in Counter(names).items() if k > 1)
    if repeated:
        raise ValueError(f"tables must name each table once, got {repeated} more than once")
    return _Tables(tuple(names), rows, None, None)


def _world(world_size: object) -> int:
    return check_int("world_size", world_size, lo=1, hi=MAX_RANKS)


def _ranks(ranks: object, world: int) -> list[int]:
    """``ranks`` (``None``: every rank) as distinct ranks of the world, in the order given."""
    if ranks is None:
        return list(range(world))
    out = check_int_list("ranks", ranks, lo=0, hi=world - 1, min_len=1)
    if len(set(out)) != len(out):
        raise ValueError(f"ranks must be distinct ranks of the world (0..{world - 1}), got {out}")
    return out


def _finish(shards: list[TableShard], world: int, strategy: str, t: _Tables) -> Plan:
    plan = Plan(world, tuple(shards), strategy)
    if t.config is not None:
        plan.validate(t.config)
    return plan


def table_wise(tables: Tables, world_size: int, ranks: int | Sequence[int] | None = None) -> Plan:
    """Each table whole on one rank (TorchRec's ``table_wise``).

    ``ranks``: ``None`` deals the tables out in turn (table ``k`` on rank ``k % world_size``), one
    rank puts every table there, a sequence gives each table its rank (one per table, in order).

    >>> table_wise(["t0", "t1", "t2"], 2).table()[2]["rank"]
    0
    >>> [s.rank for s in table_wise(["t0", "t1"], 4, ranks=[3, 1]).shards]
    [3, 1]
    """
    t, world = _read_tables(tables), _world(world_size)
    if ranks is None:
        where = [k % world for k in range(len(t.names))]
    elif isinstance(ranks, Sequence) and not isinstance(ranks, (str, bytes)):
        where = check_int_list("ranks", ranks, lo=0, hi=world - 1, min_len=len(t.names), max_len=len(t.names))
    else:
        where = [check_int("ranks", ranks, lo=0, hi=world - 1)] * len(t.names)
    return _finish([TableShard(n, r) for n, r in zip(t.names, where, strict=True)], world, "table_wise", t)


def row_wise(tables: Tables, world_size: int, ranks: Sequence[int] | None = None) -> Plan:
    """Each table's rows split in equal parts over ``ranks`` (``None``: every rank, in order;
    TorchRec's ``row_wise``). A table whose rows are known (a ``TableConfig`` or a config) and
    fewer than the ranks is split over its first ``num_rows`` ranks only, so no shard is empty.

    >>> plan = row_wise(["t0"], 3)
    >>> [(s.rank, round(s.row_fraction, 3)) for s in plan.shards]
    [(0, 0.333), (1, 0.333), (2, 0.333)]
    >>> config = DLRMConfig(num_dense=1, tables=(TableConfig("t0", 10),), embedding_dim=8,
    ...                     bottom_mlp=(8,), top_mlp=(1,))
    >>> [(g.row_offset, g.row_count) for g in plan.geometry(config).values()]
    [(0, 3), (3, 4), (7, 3)]
    """
    t, world = _read_tables(tables), _world(world_size)
    where = _ranks(ranks, world)
    shards = []
    for n in t.names:
        parts = where[: t.rows[n]] if n in t.rows else where
        shards += [TableShard(n, r, "row_wise", row_fraction=1 / len(parts)) for r in parts]
    return _finish(shards, world, "row_wise", t)


def column_wise(
    tables: Tables,
    world_size: int,
    ranks: Sequence[int] | None = None,
    fractions: Sequence[float] | None = None,
) -> Plan:
    """Each table's embedding columns split over ``ranks`` (``None``: every rank, in order;
    TorchRec's ``column_wise``): ``fractions`` of the columns (one per rank, adding up to 1;
    ``None``: equal parts). With a config and equal parts, a dimension smaller than the ranks is
    split over its first ``embedding_dim`` ranks only, so no shard is empty.

    >>> plan = column_wise(["t0"], 2, ranks=[1, 0], fractions=[0.75, 0.25])
    >>> [(s.rank, s.col_fraction) for s in plan.shards]
    [(1, 0.75), (0, 0.25)]
    """
    t, world = _read_tables(tables), _world(world_size)
    where = _ranks(ranks, world)
    if fractions is None:
        if t.dim is not None:
            where = where[: t.dim]
        fracs = [1 / len(where)] * len(where)
    else:
        if isinstance(fractions, (str, bytes)) or not isinstance(fractions, Sequence):
            raise TypeError(f"fractions must be a sequence of numbers or None, got {show(fractions)}")
        if len(fractions) != len(where):
            raise ValueError(
                f"fractions must give one fraction per rank ({len(where)}: {where}), got {len(fractions)}: "
                f"{show(list(fractions))}"
            )
        fracs = [check_fraction(f"fractions[{i}]", f, lo_open=True) for i, f in enumerate(fractions)]
        if abs(math.fsum(fracs) - 1.0) > FRACTION_TOLERANCE:
            raise ValueError(
                f"fractions must add up to 1, got {show(list(fractions))} (sum {math.fsum(fracs):.6g})"
            )
    shards = [
        TableShard(n, r, "column_wise", col_fraction=f)
        for n in t.names
        for r, f in zip(where, fracs, strict=True)
    ]
    return _finish(shards, world, "column_wise", t)


def data_parallel(tables: Tables, world_size: int) -> Plan:
    """A full replica of each table on every rank (TorchRec's ``data_parallel``): no all-to-all,
    an all-reduce of the replicas' gradients instead.

    >>> [(s.table, s.rank) for s in data_parallel(["t0", "t1"], 2).shards]
    [('t0', 0), ('t0', 1), ('t1', 0), ('t1', 1)]
    """
    t, world = _read_tables(tables), _world(world_size)
    return _finish(
        [TableShard(n, r, "data_parallel") for n in t.names for r in range(world)], world, "data_parallel", t
    )


def combine(*plans: Plan, strategy: str = "mixed") -> Plan:
    """One plan from plans of the same world over different tables (a mixed plan: each table
    sharded its own way, as TorchRec's ``construct_module_sharding_plan`` takes one sharding per
    table). The shards keep their order, plan by plan.

    >>> plan = combine(row_wise(["t0"], 2), table_wise(["t1"], 2, ranks=1), data_parallel(["t2"], 2))
    >>> [(s.table, s.rank, s.sharding) for s in plan.shards]  # doctest: +NORMALIZE_WHITESPACE
    [('t0', 0, 'row_wise'), ('t0', 1, 'row_wise'), ('t1', 1, 'table_wise'),
     ('t2', 0, 'data_parallel'), ('t2', 1, 'data_parallel')]
    """
    if not plans:
        raise ValueError("combine needs at least one plan, got none")
    for i, p in enumerate(plans):
        if not isinstance(p, Plan):
            raise TypeError(f"plans[{i}] must be a Plan, got {show(p)} ({type(p).__name__})")
    worlds = sorted({p.world_size for p in plans})
    if len(worlds) > 1:
        raise ValueError(f"plans must share one world_size to be combined, got world sizes {worlds}")
    seen: dict[str, int] = {}
    for i, p in enumerate(plans):
        for name in dict.fromkeys(s.table for s in p.shards):
            if name in seen:
                raise ValueError(
                    f"table {name!r} is in plans[{seen[name]}] and plans[{i}]: give each table one plan"
                )
            seen[name] = i
    return Plan(worlds[0], tuple(s for p in plans for s in p.shards), check_str("strategy", strategy))


def round_robin(tables: Tables, world_size: int, sharding: str = "table_wise") -> Plan:
    """Every table sharded the same way: ``table_wise`` deals the tables out in turn (table ``k``
    on rank ``k % world_size``, the dlrm repo's placement), ``row_wise`` and ``column_wise``
    split each over every rank, ``data_parallel`` replicates each.

    >>> [s.rank for s in round_robin(["a", "b", "c"], 2).shards]
    [0, 1, 0]
    >>> round_robin(["a", "b"], 2, "data_parallel").strategy
    'round_robin_data_parallel'
    """
    check_choice("sharding", sharding, SHARDINGS)
    build = {
        "table_wise": table_wise,
        "row_wise": row_wise,
        "column_wise": column_wise,
        "data_parallel": data_parallel,
    }[sharding]
    plan = build(tables, world_size)
    return Plan(plan.world_size, plan.shards, f"round_robin_{sharding}")


def mixed_plan(config: DLRMConfig, world_size: int) -> Plan:
    """One plan mixing every scheme: table ``k`` is row-wise (``k % 4 == 1``), column-wise
    (``k % 4 == 2``; when the dimension splits evenly over the ranks), data-parallel
    (``k % 4 == 3``) or table-wise on rank ``k % world_size``.

    >>> from recnotebooks.config import preset
    >>> [s.sharding for s in mixed_plan(preset("tiny"), 1).shards][:4]
    ['table_wise', 'row_wise', 'column_wise', 'data_parallel']
    """
    if not isinstance(config, DLRMConfig):
        raise TypeError(f"config must be a DLRMConfig, got {show(config)} ({type(config).__name__})")
    world = _world(world_size)
    parts = []
    for k, t in enumerate(config.tables):
        kind = k % 4
        if kind == 1:
            parts.append(row_wise([t.name], world))
        elif kind == 2 and config.embedding_dim % world == 0:
            parts.append(column_wise([t.name], world))
        elif kind == 3:
            parts.append(data_parallel([t.name], world))
        else:
            parts.append(table_wise([t.name], world, ranks=k % world))
    plan = combine(*parts)
    plan.validate(config)
    return plan


#: Plans known by name (:func:`named_plan`): every table one way (:func:`round_robin`), or
#: :func:`mixed_plan`.
NAMED_PLANS = ("table_wise", "row_wise", "column_wise", "data_parallel", "mixed")


def named_plan(config: DLRMConfig, name: str, world_size: int) -> Plan:
    """Plan ``name`` of :data:`NAMED_PLANS` for ``config`` on ``world_size`` ranks.

    >>> from recnotebooks.config import preset
    >>> named_plan(preset("tiny"), "row_wise", 2).strategy
    'round_robin_row_wise'
    """
    check_choice("plan", name, NAMED_PLANS)
    if not isinstance(config, DLRMConfig):
        raise TypeError(f"config must be a DLRMConfig, got {show(config)} ({type(config).__name__})")
    return mixed_plan(config, world_size) if name == "mixed" else round_robin(config, world_size, name)
