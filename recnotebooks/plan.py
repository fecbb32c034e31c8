"""Sharding plans as plain data: which rank holds which part of which table, and where.

A :class:`Plan` is what the planner (:mod:`recnotebooks.perf.planner`) produces, the cost and
memory models read, and the sharding code (``recnotebooks.distributed``) executes. It lives here, in
a module of its own, so that ``distributed`` can execute plans without importing the cost
model. Each :class:`TableShard` names a
table, the rank that holds it, how the table is split (as TorchRec names the schemes) and
where its rows live:

* sharding: ``table_wise`` (whole table on one rank), ``row_wise`` (rows split across
  ranks; ``row_fraction`` of them here), ``column_wise`` (embedding columns split;
  ``col_fraction`` here), ``data_parallel`` (a full replica on every rank).
* placement: ``hbm`` (device memory), ``host`` (host DRAM read over PCIe, as UVM does),
  ``cache`` (host DRAM behind a device-side software cache: either a typed-in
  ``cache_hit_rate``, or ``cache_rows`` slots run by ``cache_policy`` (one of
  :data:`CACHE_POLICIES`, ``cache_ways`` per set for ``"setassoc"``), whose hit rate the
  model computes from the table's skew), ``remote`` (a parameter server across the network).

**Exact geometry.** The cost model reads fractions; code that moves real rows needs whole
rows and columns. :meth:`Plan.geometry` gives every shard a :class:`ShardGeometry` (row
offset and count, column offset and count: TorchRec's ``ShardMetadata.shard_offsets`` and
``shard_sizes``), derived deterministically from the fractions by :func:`split_counts`. The
shards of one table, in rank order (then plan order), get consecutive ranges; the counts
are the fractions times the rows (or columns) by **cumulative rounding**: the ``k``-th
boundary is ``floor(n * F_k / F + 1/2)``, where ``F_k`` is the exact sum of the first ``k``
fractions and ``F`` the sum of all of them. The counts therefore sum to ``n`` exactly, each
is within one row of ``n`` times its fraction, and the arithmetic is exact (rationals of
the floats given), so every process derives the same geometry. Two examples, a table of 10
rows and dimension 8:

.. code-block:: text

    row_wise over ranks 0, 1, 2 (1/3 each)       column_wise: rank 0 0.75, rank 1 0.25
    boundaries floor(10/3 + 1/2) = 3,            boundaries floor(6 + 1/2) = 6,
               floor(20/3 + 1/2) = 7, then 10               then 8

           columns 0 .. 7                                columns 0 .. 5   6 .. 7
          +-----------------+                           +---------------+--------+
    row 0 | rank 0          |                     row 0 | rank 0        | rank 1 |
        1 | offsets (0, 0)  |                         1 | offsets (0,0) | (0, 6) |
        2 | sizes   (3, 8)  |                         2 | sizes (10, 6) | (10, 2)|
          +-----------------+                         3 |               |        |
        3 | rank 1          |                         4 |               |        |
        4 | offsets (3, 0)  |                         5 |               |        |
        5 | sizes   (4, 8)  |                         6 |               |        |
        6 |                 |                         7 |               |        |
          +-----------------+                         8 |               |        |
        7 | rank 2          |                         9 |               |        |
        8 | offsets (7, 0)  |                           +---------------+--------+
        9 | sizes   (3, 8)  |
          +-----------------+

``table_wise`` and ``data_parallel`` shards cover the whole table. :meth:`Plan.validate`
refuses, before anything runs, a plan that cannot be executed: a table missing from the plan
or the config, a rank outside the world, mixed shardings in one table, a ``table_wise``
table on several ranks, a ``data_parallel`` table not replicated once on every rank,
fractions that do not add up to 1 (the ranges would overlap or leave rows uncovered), a
fraction given for a dimension the sharding does not split, and a shard left empty by the
rounding. (:meth:`Plan.check`, which the cost model calls, asks less: a modeled plan may
split a 3-row table 8 ways.)

**Constructors.** A plan can be written shard by shard, or built as TorchRec's
``sharding_plan`` builds one: :func:`table_wise`, :func:`row_wise`, :func:`column_wise` and
:func:`data_parallel` shard the tables they are given one way over ``world_size`` ranks,
:func:`combine` joins plans of different tables into one mixed plan, :func:`round_robin` shards
every table one way (table-wise tables dealt out in turn), and :func:`named_plan` builds the
plans known by name (:data:`NAMED_PLANS`, :func:`mixed_plan` among them)::

    >>> plan = combine(row_wise(["users"], 2), table_wise(["items"], 2, ranks=1))
    >>> [(s.table, s.rank, s.sharding) for s in plan.shards]
    [('users', 0, 'row_wise'), ('users', 1, 'row_wise'), ('items', 1, 'table_wise')]
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
from recnotebooks.config import CACHE_REPLACEMENT_POLICIES, DLRMConfig, TableConfig

__all__ = [
    "CACHE_POLICIES",
    "MAX_RANKS",
    "SHARDINGS",
    "PLACEMENTS",
    "ShardGeometry",
    "TableShard",
    "Plan",
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
    "split_counts",
    "table_wise",
]

SHARDINGS = ("table_wise", "row_wise", "column_wise", "data_parallel")
PLACEMENTS = ("hbm", "host", "cache", "remote")
#: Replacement policies the hit-rate model knows: all of
#: :data:`~recnotebooks.config.CACHE_REPLACEMENT_POLICIES` but ``"lfu_cached"`` (the trace
#: simulator has those and OPT).
CACHE_POLICIES = tuple(p for p in CACHE_REPLACEMENT_POLICIES if p != "lfu_cached")
#: Most ranks a plan may have: 4096 (512 eight-GPU nodes, 32 times the 128 GPUs on 16 ZionEX
#: nodes that trained a 12-trillion-parameter DLRM in Mudigere et al., ISCA 2022). The cost model
#: evaluates a step rank by rank (4096 ranks take about 8 s here) and the planner keeps a list
#: per rank, so a world size of 2**70 is refused rather than run until memory runs out.
MAX_RANKS = 4096
#: How far the fractions of a split table may add up from 1 (they are floats, often ``1 / world``).
FRACTION_TOLERANCE = 1e-6


@dataclass(frozen=True)
class ShardGeometry:
    """The exact block of a table one shard holds: rows ``[row_offset, row_offset + row_count)``
    and columns ``[col_offset, col_offset + col_count)`` (TorchRec's ``ShardMetadata``)."""

    row_offset: int
    row_count: int
    col_offset: int
    col_count: int

    def __post_init__(self) -> None:
        for name in ("row_offset", "col_offset"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), lo=0))
        for name in ("row_count", "col_count"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), lo=1))

    @property
    def shard_sizes(self) -> tuple[int, int]:
        """``(rows, columns)``, as TorchRec's ``ShardMetadata.shard_sizes``."""
        return (self.row_count, self.col_count)

    @property
    def shard_offsets(self) -> tuple[int, int]:
        """``(first row, first column)``, as TorchRec's ``ShardMetadata.shard_offsets``."""
        return (self.row_offset, self.col_offset)

    @property
    def row_end(self) -> int:
        """One past the last row."""
        return self.row_offset + self.row_count

    @property
    def col_end(self) -> int:
        """One past the last column."""
        return self.col_offset + self.col_count

    @property
    def row_slice(self) -> slice:
        """The rows as a slice (``weight[g.row_slice, g.col_slice]`` is the shard)."""
        return slice(self.row_offset, self.row_end)

    @property
    def col_slice(self) -> slice:
        """The columns as a slice."""
        return slice(self.col_offset, self.col_end)

    @property
    def numel(self) -> int:
        """Elements of the block."""
        return self.row_count * self.col_count


def split_counts(total: int, fractions: Sequence[float]) -> tuple[int, ...]:
    """``total`` split in proportion to ``fractions`` by cumulative rounding (see the module
    docstring): non-negative counts that sum to ``total`` exactly, each within one of its
    share. Deterministic: exact rational arithmetic on the floats given."""
    total = check_int("total", total, lo=0)
    if not fractions:
        raise ValueError("fractions must be a non-empty sequence of positive numbers, got []")
    exact = []
    for i, f in enumerate(fractions):
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
            raise ValueError(f"fractions[{i}] must be a positive finite number, got {f!r}")
        exact.append(f.as_integer_ratio())
    # floats are dyadic rationals: on the largest denominator (a power of two) every fraction is
    # an exact integer numerator, so the rounding below is exact integer arithmetic
    den = max(d for _, d in exact)
    nums = [n * (den // d) for n, d in exact]
    whole = sum(nums)
    bounds, prefix = [0], 0
    for n in nums:
        prefix += n
        bounds.append((2 * total * prefix + whole) // (2 * whole))  # floor(total * prefix / whole + 1/2)
    return tuple(b - a for a, b in zip(bounds, bounds[1:], strict=False))


@dataclass(frozen=True)
class TableShard:
    """One piece of one table on one rank."""

    table: str
    rank: int
    sharding: str = "table_wise"
    placement: str = "hbm"
    row_fraction: float = 1.0
    col_fraction: float = 1.0
    cache_hit_rate: float | None = None
    #: device cache slots (rows) of a ``"cache"`` shard, when the model computes its hit rate
    cache_rows: int | None = None
    cache_policy: str = "static"
    cache_ways: int = 32

    def __post_init__(self) -> None:
        if self.sharding not in SHARDINGS:
            raise ValueError(f"sharding must be one of {list(SHARDINGS)}, got {self.sharding!r}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {list(PLACEMENTS)}, got {self.placement!r}")
        check_int("rank", self.rank, lo=0)
        for name in ("row_fraction", "col_fraction"):
            check_fraction(name, getattr(self, name), lo_open=True)
        check_choice("cache_policy", self.cache_policy, CACHE_POLICIES)
        check_int("cache_ways", self.cache_ways, lo=1)
        if self.cache_rows is not None:
            check_int("cache_rows", self.cache_rows, lo=0)
            if self.placement != "cache":
                raise ValueError(f"cache_rows applies to placement='cache', got placement={self.placement!r}")
            if self.cache_hit_rate is not None:
                raise ValueError(
                    "give cache_hit_rate (typed in) or cache_rows (the model computes the hit rate), "
                    "not both: "
                    f"got cache_hit_rate={self.cache_hit_rate!r}, cache_rows={self.cache_rows!r}"
                )
        elif self.placement == "cache":
            if self.cache_hit_rate is None:
                raise ValueError(
                    f"table {self.table!r}: placement='cache' needs cache_hit_rate (typed in, in [0, 1]) or "
                    "cache_rows (device slots; the model computes the hit rate under cache_policy), "
                    "got neither"
                )
            check_fraction("cache_hit_rate (placement='cache')", self.cache_hit_rate)


@dataclass(frozen=True)
class Plan:
    """A complete assignment of every table to ranks (``world_size`` ranks in all)."""

    world_size: int
    shards: tuple[TableShard, ...]
    strategy: str = "manual"
    notes: tuple[str, ...] = ()
    #: the placement the plan was asked for (one of :data:`PLACEMENTS`; ``None`` for a plan made
    #: by hand). A planner may move tables it cannot fit there elsewhere: each shard's own
    #: ``placement`` says where its rows live (the cost model's ``CostResult.table_placement``
    #: counts the bytes in each place)
    requested_placement: str | None = None

    def __post_init__(self) -> None:
        check_int("world_size", self.world_size, lo=1, hi=MAX_RANKS)
        if self.requested_placement is not None:
            check_choice("requested_placement", self.requested_placement, PLACEMENTS)
        object.__setattr__(self, "shards", tuple(self.shards))
        object.__setattr__(self, "notes", tuple(self.notes))
        for s in self.shards:
            if not isinstance(s, TableShard):
                raise TypeError(f"shards must be TableShard objects, got {type(s).__name__}")
            if s.rank >= self.world_size:
                raise ValueError(
                    f"table {s.table!r} is on rank {s.rank}, but world_size is {self.world_size}"
                )

    def check(self, config: DLRMConfig) -> None:
        """Raise ``ValueError`` unless every table of ``config`` is covered exactly once (in
        fractions: what the cost model needs; :meth:`validate` also asks for whole rows)."""
        self._parts(config)

    def validate(self, config: DLRMConfig) -> None:
        """Raise ``ValueError`` naming the problem unless the plan can be executed on
        ``config`` (see the module docstring for what is refused)."""
        self.geometry(config)

    def geometry(self, config: DLRMConfig) -> dict[int, ShardGeometry]:
        """Each shard's exact block, by its index in :attr:`shards` (after :meth:`validate`'s
        checks: ``ValueError`` for a plan that cannot be executed)."""
        dims = config.embedding_dim
        rows = {t.name: t.num_rows for t in config.tables}
        out: dict[int, ShardGeometry] = {}
        for t, (kind, parts) in self._parts(config).items():
            for i in parts:
                s = self.shards[i]
                for name, split in (("row_fraction", "row_wise"), ("col_fraction", "column_wise")):
                    if getattr(s, name) != 1.0 and kind != split:
                        raise ValueError(
                            f"table {t!r}: {name} applies to {split} shards only, got {name}="
                            f"{getattr(s, name)!r} on a {kind} shard (rank {s.rank})"
                        )
            if kind not in ("row_wise", "column_wise"):
                out.update({i: ShardGeometry(0, rows[t], 0, dims) for i in parts})
                continue
            order = sorted(parts, key=lambda i: (self.shards[i].rank, i))
            along, n = ("rows", rows[t]) if kind == "row_wise" else ("columns", dims)
            fracs = [
                self.shards[i].row_fraction if kind == "row_wise" else self.shards[i].col_fraction
                for i in order
            ]
            counts = split_counts(n, fracs)
            offset = 0
            for i, f, c in zip(order, fracs, counts, strict=True):
                if c == 0:
                    raise ValueError(
                        f"{kind} shard of table {t!r} on rank {self.shards[i].rank} would be empty: "
                        f"fraction {f:.6g} of {n} {along} rounds to 0 (give it a larger fraction, or "
                        f"split the table over at most {n} shards)"
                    )
                if kind == "row_wise":
                    out[i] = ShardGeometry(offset, c, 0, dims)
                else:
                    out[i] = ShardGeometry(0, rows[t], offset, c)
                offset += c
        return dict(sorted(out.items()))

    def geometry_table(self, config: DLRMConfig) -> list[dict[str, object]]:
        """Tidy rows, one per shard (in plan order): its table, rank, sharding and exact block."""
        geo = self.geometry(config)
        return [
            {
                "table": s.table,
                "rank": s.rank,
                "sharding": s.sharding,
                "row_offset": g.row_offset,
                "row_count": g.row_count,
                "col_offset": g.col_offset,
                "col_count": g.col_count,
            }
            for s, g in ((self.shards[i], geo[i]) for i in range(len(self.shards)))
        ]

    def _parts(self, config: DLRMConfig) -> dict[str, tuple[str, list[int]]]:
        """Each table's sharding and shard indices, after the checks :meth:`check` makes."""
        names = set(config.table_names)
        by_table: dict[str, list[int]] = {}
        for i, s in enumerate(self.shards):
            if s.table not in names:
                raise ValueError(f"plan names table {s.table!r}, which the config does not have")
            if s.rank >= self.world_size:  # refused by __post_init__ too: kept for objects built around it
                raise ValueError(f"table {s.table!r} is on rank {s.rank}; world_size is {self.world_size}")
            by_table.setdefault(s.table, []).append(i)
        out: dict[str, tuple[str, list[int]]] = {}
        for t in config.table_names:
            idx = by_table.get(t, [])
            parts = [self.shards[i] for i in idx]
            if not parts:
                raise ValueError(f"table {t!r} is not in the plan")
            kinds = {s.sharding for s in parts}
            if len(kinds) > 1:
                raise ValueError(f"table {t!r} mixes shardings {sorted(kinds)}")
            kind = kinds.pop()
            if kind == "data_parallel" and sorted(s.rank for s in parts) != list(range(self.world_size)):
                raise ValueError(
                    f"data_parallel table {t!r} needs one replica on every rank (0..{self.world_size - 1}), "
                    f"got ranks {sorted(s.rank for s in parts)}"
                )
            if kind in ("row_wise", "column_wise"):
                frac = math.fsum(s.row_fraction if kind == "row_wise" else s.col_fraction for s in parts)
                if abs(frac - 1.0) > FRACTION_TOLERANCE:
                    n = next(c.num_rows for c in config.tables if c.name == t)
                    n, along = (n, "rows") if kind == "row_wise" else (config.embedding_dim, "columns")
                    what = "leave some uncovered" if frac < 1 else "overlap"
                    raise ValueError(
                        f"{kind} shards of table {t!r} must add up to 1, got {frac:.4f}: their ranges "
                        f"would {what} (about {round(frac * n)} of its {n} {along})"
                    )
            if kind == "table_wise" and len(parts) != 1:
                raise ValueError(f"table_wise table {t!r} must be on exactly one rank, got {len(parts)}")
            out[t] = (kind, idx)
        return out

    def on_rank(self, rank: int) -> list[TableShard]:
        """The shards on ``rank`` (indexed once: memory reports ask for every rank)."""
        by_rank = self.__dict__.get("_by_rank")
        if by_rank is None:
            by_rank = {}
            for s in self.shards:
                by_rank.setdefault(s.rank, []).append(s)
            object.__setattr__(self, "_by_rank", by_rank)
        return list(by_rank.get(rank, ()))

    def table(self) -> list[dict[str, object]]:
        """Tidy rows, one per shard: how the plan explains itself."""
        return [
            {
                "table": s.table,
                "rank": s.rank,
                "sharding": s.sharding,
                "placement": s.placement,
                "rows": s.row_fraction,
                "columns": s.col_fraction,
                "cache_hit_rate": s.cache_hit_rate,
                "cache_rows": s.cache_rows,
                "cache_policy": s.cache_policy if s.placement == "cache" else None,
            }
            for s in self.shards
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
