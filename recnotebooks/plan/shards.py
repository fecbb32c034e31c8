"""A sharding plan as plain data: which rank holds which part of which table, and where.

A :class:`Plan` is what the planner (:mod:`recnotebooks.perf.planner`) produces, the cost and
memory models read, and the sharding code (``recnotebooks.distributed``) executes. Each
:class:`TableShard` names a table, the rank that holds it, how the table is split (as TorchRec
names the schemes) and where its rows live:

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

Plans built by scheme and placement: :mod:`recnotebooks.plan.schemes`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from recnotebooks.checks import (
    check_choice,
    check_fraction,
    check_int,
)
from recnotebooks.config import CACHE_REPLACEMENT_POLICIES, DLRMConfig

__all__ = [
    "CACHE_POLICIES",
    "FRACTION_TOLERANCE",
    "MAX_RANKS",
    "PLACEMENTS",
    "SHARDINGS",
    "Plan",
    "ShardGeometry",
    "TableShard",
    "split_counts",
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
