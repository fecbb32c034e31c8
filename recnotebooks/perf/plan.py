"""Sharding plans as plain data: which rank holds which part of which table, and where.

A :class:`Plan` is what the planner produces, the cost and memory models read, and the
sharding code executes. Each :class:`TableShard` names a table, the rank that holds it,
how the table is split (as TorchRec names the schemes) and where its rows live:

* sharding: ``table_wise`` (whole table on one rank), ``row_wise`` (rows split across
  ranks; ``row_fraction`` of them here), ``column_wise`` (embedding columns split;
  ``col_fraction`` here), ``data_parallel`` (a full replica on every rank).
* placement: ``hbm`` (device memory), ``host`` (host DRAM read over PCIe, as UVM does),
  ``cache`` (host DRAM behind a device-side software cache: either a typed-in
  ``cache_hit_rate``, or ``cache_rows`` slots run by ``cache_policy`` (one of
  :data:`~recnotebooks.perf.access.CACHE_POLICIES`, ``cache_ways`` per set for
  ``"setassoc"``), whose hit rate the model computes from the table's skew),
  ``remote`` (a parameter server across the network).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from recnotebooks.checks import check_choice, check_fraction, check_int
from recnotebooks.config import DLRMConfig
from recnotebooks.perf.access import CACHE_POLICIES

__all__ = ["SHARDINGS", "PLACEMENTS", "TableShard", "Plan", "single_device_plan"]

SHARDINGS = ("table_wise", "row_wise", "column_wise", "data_parallel")
PLACEMENTS = ("hbm", "host", "cache", "remote")


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

    def __post_init__(self) -> None:
        check_int("world_size", self.world_size, lo=1)
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
        """Raise ``ValueError`` unless every table of ``config`` is covered exactly once."""
        names = set(config.table_names)
        for s in self.shards:
            if s.table not in names:
                raise ValueError(f"plan names table {s.table!r}, which the config does not have")
        for t in config.table_names:
            parts = [s for s in self.shards if s.table == t]
            if not parts:
                raise ValueError(f"table {t!r} is not in the plan")
            kinds = {s.sharding for s in parts}
            if len(kinds) > 1:
                raise ValueError(f"table {t!r} mixes shardings {sorted(kinds)}")
            kind = kinds.pop()
            if kind == "data_parallel" and sorted(s.rank for s in parts) != list(range(self.world_size)):
                raise ValueError(f"data_parallel table {t!r} needs one replica on every rank")
            if kind in ("row_wise", "column_wise"):
                frac = sum(s.row_fraction if kind == "row_wise" else s.col_fraction for s in parts)
                if abs(frac - 1.0) > 1e-6:
                    raise ValueError(f"{kind} shards of table {t!r} must add up to 1, got {frac:.4f}")
            if kind == "table_wise" and len(parts) != 1:
                raise ValueError(f"table_wise table {t!r} must be on exactly one rank, got {len(parts)}")

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
        return [{"table": s.table, "rank": s.rank, "sharding": s.sharding, "placement": s.placement,
                 "rows": s.row_fraction, "columns": s.col_fraction, "cache_hit_rate": s.cache_hit_rate,
                 "cache_rows": s.cache_rows,
                 "cache_policy": s.cache_policy if s.placement == "cache" else None}
                for s in self.shards]  # fmt: skip


def single_device_plan(config: DLRMConfig, placement: str | Sequence[str] = "hbm",
                       cache_hit_rate: float | None = None, *,
                       cache_rows: int | Mapping[str, int] | None = None,
                       cache_policy: str = "static", cache_ways: int = 32) -> Plan:  # fmt: skip
    """Every table on rank 0 with one placement (or one per table). A ``"cache"`` table takes
    the typed-in ``cache_hit_rate``, or ``cache_rows`` device slots (one number for every cached
    table, capped at its rows, or one per table name) run by ``cache_policy``."""
    places = [placement] * config.num_tables if isinstance(placement, str) else list(placement)
    if len(places) != config.num_tables:
        raise ValueError(
            f"placement must be one value or one per table ({config.num_tables}), got {len(places)}"
        )
    slots = _cache_rows_per_table(config, cache_rows)
    shards = tuple(TableShard(t, 0, "table_wise", p, cache_hit_rate=cache_hit_rate if p == "cache" else None,
                              cache_rows=slots[t] if p == "cache" else None, cache_policy=cache_policy,
                              cache_ways=cache_ways)
                   for t, p in zip(config.table_names, places, strict=True))  # fmt: skip
    return Plan(1, shards, "single_device")


def _cache_rows_per_table(config: DLRMConfig, cache_rows: object) -> dict[str, int | None]:
    """``cache_rows`` (None, one int, or a mapping of table name to int) as rows per table."""
    if cache_rows is None:
        return dict.fromkeys(config.table_names)
    rows = {t.name: t.num_rows for t in config.tables}
    if isinstance(cache_rows, Mapping):
        unknown = sorted(set(cache_rows) - set(rows))
        if unknown:
            raise ValueError(f"cache_rows names tables the config does not have: {unknown}")
        return {t: (None if t not in cache_rows else min(rows[t], check_int(f"cache_rows[{t!r}]",
                    cache_rows[t], lo=0))) for t in rows}  # fmt: skip
    k = check_int("cache_rows", cache_rows, lo=0)
    return {t: min(n, k) for t, n in rows.items()}
