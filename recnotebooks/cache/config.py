"""How a cached embedding collection is sized and run: :class:`CacheConfig`.

A software embedding cache keeps a fixed number of table rows ("slots") in device memory
over full tables in host memory (FBGEMM's UVM cache in ``split_table_batched_embeddings``,
ColossalAI's frequency-aware ``CachedEmbeddingBag``, FAE's hot-embedding replicas: Adnan et
al., "High-performance training by exploiting hot-embeddings in recommendation systems",
VLDB 2022). The config says which replacement policy decides what stays, how many slots
each table gets (rows, a fraction of the table, or one budget shared by all tables), the
associativity of a set-associative cache and how many batches are prefetched ahead.

:func:`hot_rows_from_counts` picks a static policy's pinned rows from a frequency profile
(FAE's hot set: the most frequently looked-up rows of a data sample).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from recnotebooks.cache.policies import POLICIES
from recnotebooks.checks import check_choice, check_float, check_int, check_type, show
from recnotebooks.config import TableConfig
from recnotebooks.sparse import JaggedBatch

__all__ = ["CacheConfig", "hot_rows_from_counts", "hot_sets", "DEFAULT_FRACTION", "MAX_PREFETCH_DEPTH"]

DEFAULT_FRACTION = 0.1  # slots per table when neither capacity nor shared_rows is given
MAX_PREFETCH_DEPTH = 8


def _check_capacity(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"capacity must be an int (slots per table) or a float in (0, 1] (a fraction of each "
            f"table), got {show(value)} ({type(value).__name__})"
        )
    if isinstance(value, (int, np.integer)):
        return check_int("capacity", value, lo=1)
    return check_float("capacity", value, lo=0.0, hi=1.0, lo_open=True)


@dataclass(frozen=True)
class CacheConfig:
    """Policy and size of an embedding cache; validated on construction.

    Args:
        policy: one of :data:`recnotebooks.cache.policies.POLICIES` (``"lru"``, ``"lfu"``,
            ``"lfu_cached"``, ``"static"``, ``"setassoc"``).
        capacity: slots per table: an ``int`` (the same number of rows for every table,
            at most the smallest table's rows) or a ``float`` in ``(0, 1]`` (that fraction of
            each table, at least one row). Default: ``0.1`` unless ``shared_rows`` is given.
        shared_rows: instead of ``capacity``, one budget of slots for all tables together,
            managed by one policy over the global row space (tables compete for slots).
        ways: slots per set of ``"setassoc"`` (FBGEMM's default is 32); must divide an
            ``int`` capacity or ``shared_rows``; fractional capacities are rounded down to a
            multiple of it.
        prefetch_depth: batches admitted ahead by :class:`~recnotebooks.cache.prefetch.PrefetchingIterator`
            (0: prefetch off).
        staging_rows: slots allocated up front for rows a policy does not keep (static cold
            rows, set overflow); they grow on demand.
        min_rows: with a fractional ``capacity``, every table gets at least
            ``min(its rows, min_rows)`` slots, so small tables (which TorchRec's planner would
            keep whole in HBM) still hold a batch's distinct rows; 0 (default) keeps the
            fraction as given.

    A ``"static"`` cache also needs its pinned rows, given to the collection as
    ``hot_rows=`` or chosen from ``profile=`` batches (see
    :class:`~recnotebooks.cache.cached.CachedEmbeddingBagCollection`).
    """

    policy: str = "lru"
    capacity: int | float | None = None
    shared_rows: int | None = None
    ways: int = 32
    prefetch_depth: int = 0
    staging_rows: int = 0
    min_rows: int = 0

    def __post_init__(self) -> None:
        check_choice("policy", self.policy, POLICIES)
        if self.shared_rows is not None and self.capacity is not None:
            raise ValueError(
                f"give capacity (slots per table) or shared_rows (one budget for all tables), not both: "
                f"got capacity={self.capacity!r} and shared_rows={self.shared_rows!r}"
            )
        if self.shared_rows is None:
            cap = DEFAULT_FRACTION if self.capacity is None else _check_capacity(self.capacity)
            object.__setattr__(self, "capacity", cap)
        else:
            object.__setattr__(self, "shared_rows", check_int("shared_rows", self.shared_rows, lo=1))
        ways = check_int("ways", self.ways, lo=1)
        object.__setattr__(self, "ways", ways)
        if self.policy == "setassoc":
            budget = self.shared_rows if self.shared_rows is not None else self.capacity
            if isinstance(budget, int) and budget % ways:
                name = "shared_rows" if self.shared_rows is not None else "capacity"
                raise ValueError(
                    f"ways must divide {name} for policy 'setassoc', got ways={ways} and {name}={budget} "
                    f"(use a multiple of {ways}, e.g. {max(ways, budget // ways * ways)})"
                )
        depth = check_int("prefetch_depth", self.prefetch_depth, lo=0, hi=MAX_PREFETCH_DEPTH)
        object.__setattr__(self, "prefetch_depth", depth)
        object.__setattr__(self, "staging_rows", check_int("staging_rows", self.staging_rows, lo=0))
        object.__setattr__(self, "min_rows", check_int("min_rows", self.min_rows, lo=0))
        if self.min_rows and not isinstance(self.capacity, float):
            raise ValueError(
                f"min_rows applies to a fractional capacity, got min_rows={self.min_rows} with "
                f"capacity={self.capacity!r} and shared_rows={self.shared_rows!r}"
            )

    @property
    def shared(self) -> bool:
        """True when one policy manages one budget over all tables."""
        return self.shared_rows is not None

    def capacities(self, tables: Sequence[TableConfig]) -> tuple[int, ...]:
        """Slots of each policy for these tables: one per table, or ``(shared_rows,)``.

        Raises ``ValueError`` when a capacity exceeds its table (or all tables together)
        or a set-associative table is smaller than one set.
        """
        tables = tuple(tables)
        if not tables or any(not isinstance(t, TableConfig) for t in tables):
            raise TypeError(f"tables must be a non-empty sequence of TableConfig, got {show(tables)}")
        if self.shared_rows is not None:
            total = sum(t.num_rows for t in tables)
            if self.shared_rows > total:
                raise ValueError(
                    f"shared_rows must be at most the rows of all tables ({total:,}), "
                    f"got {self.shared_rows:,}"
                )
            return (self.shared_rows,)
        caps = []
        for t in tables:
            if isinstance(self.capacity, int):
                if self.capacity > t.num_rows:
                    raise ValueError(
                        f"capacity must be at most the rows of every table, got capacity={self.capacity} "
                        f"but table {t.name!r} has {t.num_rows} rows (use a fraction such as 0.1 for "
                        "tables of different sizes)"
                    )
                caps.append(self.capacity)
                continue
            c = min(t.num_rows, max(1, self.min_rows, round(float(self.capacity) * t.num_rows)))  # type: ignore[arg-type]
            if self.policy == "setassoc":
                if self.ways > t.num_rows:
                    raise ValueError(
                        f"ways={self.ways} exceeds table {t.name!r} ({t.num_rows} rows): a set-associative "
                        f"cache needs at least one set of {self.ways} slots; use fewer ways"
                    )
                c = max(self.ways, c // self.ways * self.ways)
            caps.append(c)
        return tuple(caps)


def hot_rows_from_counts(counts: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` most frequent rows of a profile (``counts[r]`` lookups of row ``r``), most
    frequent first, ties to the lower row; rows never looked up are not chosen (FAE's hot set)."""
    counts = np.asarray(counts)
    k = check_int("k", k, lo=0)
    seen = np.flatnonzero(counts > 0)
    order = np.lexsort((seen, -counts[seen]))  # by count descending, then row ascending
    return seen[order[:k]].astype(np.int64)


def _profile_items(profile: object) -> Iterable[object]:
    if isinstance(profile, (JaggedBatch, torch.Tensor, np.ndarray)) or hasattr(profile, "sparse"):
        return [profile]
    if isinstance(profile, Iterable):
        return profile
    raise TypeError(
        f"profile must be batches (a JaggedBatch, a Batch or an iterable of them) or global row ids, "
        f"got {show(profile)}"
    )


def hot_sets(
    keys: tuple[str, ...],
    offsets: np.ndarray,
    caps: tuple[int, ...],
    shared: bool,
    hot_rows: Mapping[str, object] | None,
    profile: object,
    global_ids: Callable[[JaggedBatch], torch.Tensor],
) -> list[np.ndarray]:
    """The pinned rows of each static policy (one per table, or one shared over global rows),
    from ``hot_rows`` (``{table: local row ids}``) or the most frequent rows of ``profile``
    (batches whose ids ``global_ids`` maps and checks, or global row ids)."""
    if (hot_rows is None) == (profile is None):
        raise ValueError(
            "policy 'static' needs its hot set: pass exactly one of hot_rows={table: row ids} or "
            f"profile=<batches or ids to count> (got hot_rows={show(hot_rows)}, profile={show(profile)})"
        )
    total = int(offsets[-1])
    if profile is not None:
        counts = np.zeros(total, np.int64)
        for item in _profile_items(profile):
            item = getattr(item, "sparse", item)
            if isinstance(item, JaggedBatch):
                g = global_ids(item).cpu().numpy()
            else:
                g = np.asarray(item.cpu() if isinstance(item, torch.Tensor) else item)
                bad = g.ndim != 1 or not np.issubdtype(g.dtype, np.integer)
                if bad or (g.size and (g.min() < 0 or g.max() >= total)):
                    raise ValueError(
                        f"profile ids must be 1-D integer global rows in [0, {total}), got {show(item)}"
                    )
            counts += np.bincount(g.astype(np.int64), minlength=total)
        if shared:
            return [hot_rows_from_counts(counts, caps[0])]
        return [hot_rows_from_counts(counts[offsets[t] : offsets[t + 1]], c) for t, c in enumerate(caps)]
    hot_rows = check_type("hot_rows", hot_rows, Mapping, "a mapping {table name: row ids}")
    unknown = [k for k in hot_rows if k not in keys]
    if unknown:
        raise ValueError(f"hot_rows has unknown tables {unknown}; the tables are {list(keys)}")
    local = [np.asarray(torch.as_tensor(hot_rows.get(k, [])).cpu(), dtype=np.int64) for k in keys]
    if shared:
        return [np.concatenate([r + offsets[t] for t, r in enumerate(local)])]
    return local
