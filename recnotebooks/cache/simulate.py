"""Trace simulator: replay id streams through the cache policies, Belady's OPT and miss-ratio curves.

:func:`simulate` replays a trace through a :class:`~recnotebooks.cache.policies.CachePolicy`
(the very kernels the cached embedding collection runs, so a simulated hit rate is the one
training sees) or through Belady's OPT (Belady 1966, "A study of replacement algorithms for a
virtual-storage computer": on a miss, evict the cached row used farthest in the future; it
needs the future, so it lives here only). :func:`lru_mrc` gives LRU's miss ratio at *every*
capacity in one pass over the trace from stack distances (Mattson, Gecsei, Slutz and
Traiger 1970, "Evaluation techniques for storage hierarchies"), counted over access times
in a compacted counting tree; :func:`opt_mrc` gives OPT's curve at chosen sizes, from one pass of
OPT stack distances or a replay per size. The kernels are in :mod:`recnotebooks.cache._sim_kernels`
and :mod:`recnotebooks.cache._opt_kernels`. Results are tidy rows with ``source="simulated"``.

Counting conventions: ``misses`` include ``bypass`` (rows a policy would not keep: static
cold rows, a set-associative set full of protected rows); ``hits + misses == requests``.
With ``batch_size=k`` the trace is replayed as batches of ``k`` ids, each admitted the way
training admits a batch (a repeat inside a batch is a hit after its first occurrence).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from recnotebooks.cache import _opt_kernels as KO
from recnotebooks.cache import _sim_kernels as KS
from recnotebooks.cache.policies import POLICIES, CachePolicy, check_ids
from recnotebooks.checks import check_choice, check_float, check_int, check_steps, check_str, check_type, show
from recnotebooks.config import DLRMConfig
from recnotebooks.sparse import JaggedBatch

__all__ = [
    "SIM_POLICIES",
    "MissRatioCurve",
    "SimResult",
    "hot_rows_from_profile",
    "lru_mrc",
    "opt_mrc",
    "simulate",
    "trace_ids",
    "zipf_trace",
]

SIM_POLICIES = (*POLICIES, "opt")
_next_use = KS.next_use  # the next request time of each request (kept for callers of the old name)


# ---------------------------------------------------------------- traces


def _row_offsets(keys: Sequence[str], table_rows: object) -> dict[str, tuple[int, int]]:
    """``{key: (offset, rows)}`` in the global row space of the tables, in ``keys`` order."""
    if isinstance(table_rows, DLRMConfig):
        table_rows = {t.name: t.num_rows for t in table_rows.tables}
    if isinstance(table_rows, Mapping):
        missing = [k for k in keys if k not in table_rows]
        if missing:
            raise ValueError(f"table_rows has no entry for keys {missing}, got keys {list(table_rows)}")
        sizes = [check_int(f"table_rows[{k!r}]", table_rows[k], lo=1) for k in keys]
    else:
        if isinstance(table_rows, (str, bytes)) or not isinstance(table_rows, (Sequence, np.ndarray)):
            raise TypeError(
                f"table_rows must be a DLRMConfig, a dict or a sequence of ints, got {show(table_rows)}"
            )
        if len(table_rows) != len(keys):
            raise ValueError(f"table_rows must have one entry per key ({len(keys)}), got {len(table_rows)}")
        sizes = [check_int(f"table_rows[{i}]", r, lo=1) for i, r in enumerate(table_rows)]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return {k: (int(offsets[i]), sizes[i]) for i, k in enumerate(keys)}


def _jagged_ids(jb: JaggedBatch, table: str | None, table_rows: object) -> np.ndarray:
    values = jb.values.detach().cpu().numpy().astype(np.int64, copy=False)
    if table is not None:
        if table not in jb.keys:
            raise ValueError(f"table must be one of the batch keys {list(jb.keys)}, got {table!r}")
        return np.ascontiguousarray(jb[table][0].detach().cpu().numpy(), dtype=np.int64)
    if table_rows is None:
        if jb.num_keys > 1:
            raise ValueError(
                f"table_rows is needed to put the {jb.num_keys} tables {list(jb.keys)} in one row space "
                "(pass a DLRMConfig or the rows per table), or choose one with table='name'"
            )
        return np.ascontiguousarray(values)
    place = _row_offsets(jb.keys, table_rows)
    per_key = jb.length_per_key().cpu().numpy()
    shift = np.repeat([place[k][0] for k in jb.keys], per_key)
    limit = np.repeat([place[k][0] + place[k][1] for k in jb.keys], per_key)
    out = values + shift
    bad = np.flatnonzero(out >= limit)
    if bad.size:
        k = jb.keys[int(np.searchsorted(np.cumsum(per_key), bad[0], side="right"))]
        raise ValueError(f"ids of table {k!r} must be < {place[k][1]} rows, got {values[bad[0]]}")
    return out


def trace_ids(
    source: object,
    table: str | None = None,
    *,
    table_rows: DLRMConfig | Mapping[str, int] | Sequence[int] | None = None,
    batches: int | None = None,
) -> np.ndarray:
    """The int64 ids of ``source`` in request order, as a trace for :func:`simulate`.

    ``source``: a 1-D array / tensor / list of ids, a :class:`JaggedBatch`, a data ``Batch``
    (anything with a ``.sparse`` JaggedBatch), or an iterable of those (a ``SyntheticCriteo``
    or ``CriteoReader`` stream: the first ``batches`` batches, required for an endless stream).
    ``table=None`` puts all tables in one global row space (each table's ids shifted by the
    rows of the tables before it, from ``table_rows`` or the stream's own config);
    ``table="t3"`` keeps that table's ids only.
    """
    if table is not None:
        check_str("table", table)
    if isinstance(source, (np.ndarray, torch.Tensor, list, tuple)):
        if table is not None:
            raise ValueError(f"table={table!r} needs batches with keys; a plain array of ids has none")
        return check_ids("source", source)
    if table_rows is None:  # a stream that knows its tables: SyntheticCriteo (.config), CriteoReader
        cfg = getattr(source, "config", None)
        rows, keys = getattr(source, "table_rows", None), getattr(source, "keys", None)
        table_rows = (
            cfg
            if isinstance(cfg, DLRMConfig)
            else dict(zip(keys, rows, strict=True))
            if rows and keys
            else None
        )
    sparse = getattr(source, "sparse", source)
    if isinstance(sparse, JaggedBatch):
        return _jagged_ids(sparse, table, table_rows)
    source = check_type("source", source, Iterable, "ids, a JaggedBatch, a Batch or an iterable of them")
    if batches is None:
        try:
            len(source)  # type: ignore[arg-type]
        except TypeError:
            raise ValueError(
                f"batches must be given for a stream without a length ({type(source).__name__})"
            ) from None
    else:
        batches = check_steps("batches", batches, lo=1)
    parts = [trace_ids(b, table, table_rows=table_rows) for b in itertools.islice(source, batches)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def zipf_trace(
    num_rows: int, num_ids: int, alpha: float = 1.05, seed: int = 0, scatter: bool = True
) -> np.ndarray:
    """``num_ids`` ids drawn i.i.d. from a bounded Zipf law over ``num_rows`` rows:
    ``P(rank k) ∝ k^-alpha`` (exact inverse CDF, searched from a guide table); with ``scatter``
    ranks are mapped to rows by a seeded random permutation (hot rows spread over the table,
    as in real data). Deterministic per ``seed``."""
    num_rows = check_int("num_rows", num_rows, lo=1, hi=2**28)
    num_ids = check_int("num_ids", num_ids, lo=0, hi=2**32)
    alpha = check_float("alpha", alpha, lo=0.0, hi=10.0)
    rng = np.random.default_rng(check_int("seed", seed, lo=0))
    cdf = np.cumsum(np.arange(1, num_rows + 1, dtype=np.float64) ** -alpha)
    cdf /= cdf[-1]
    _warm_kernel("zipf")
    ranks = KS.zipf_ranks(cdf, rng.random(num_ids))
    return rng.permutation(num_rows)[ranks] if scatter else ranks.astype(np.int64)


def hot_rows_from_profile(profile: np.ndarray, count: int, num_rows: int) -> np.ndarray:
    """The ``count`` most frequent rows of a profile trace (ties: lower row id), as FAE picks hot rows."""
    freq = np.bincount(check_ids("profile", profile, num_rows), minlength=num_rows)
    order = np.argsort(-freq, kind="stable")[:count]
    return order[freq[order] > 0].astype(np.int64)


def _positions(num_rows: int) -> np.ndarray:
    """``num_rows`` entries of -1, int32 where positions fit (the kernels' per-row scratch)."""
    return np.full(num_rows, -1, np.int32 if num_rows < 2**31 else np.int64)


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class SimResult:
    """Counts of one simulated replay (``seconds``: the replay alone, compilation excluded)."""

    policy: str
    capacity: int
    num_rows: int
    requests: int
    hits: int
    misses: int
    evictions: int
    bypass: int
    seconds: float
    conflict_misses: int = 0  # setassoc: misses a fully associative LRU of the same capacity hit
    batch_size: int = 1
    ways: int = 0

    @property
    def hit_rate(self) -> float:
        """Hits per request (0 for an empty trace)."""
        return self.hits / self.requests if self.requests else 0.0

    @property
    def miss_ratio(self) -> float:
        """Misses (bypass included) per request."""
        return self.misses / self.requests if self.requests else 0.0

    @property
    def ids_per_s(self) -> float:
        """Requests replayed per second."""
        return self.requests / self.seconds if self.seconds > 0 else math.inf

    def rows(self) -> list[dict]:
        """One tidy row (``source="simulated"``)."""
        return [
            {
                "policy": self.policy,
                "capacity": self.capacity,
                "num_rows": self.num_rows,
                "cache_fraction": self.capacity / self.num_rows,
                "requests": self.requests,
                "hits": self.hits,
                "misses": self.misses,
                "hit_rate": self.hit_rate,
                "miss_ratio": self.miss_ratio,
                "evictions": self.evictions,
                "bypass": self.bypass,
                "conflict_misses": self.conflict_misses,
                "batch_size": self.batch_size,
                "ways": self.ways,
                "seconds": self.seconds,
                "ids_per_s": self.ids_per_s,
                "source": "simulated",
            }
        ]


@dataclass(frozen=True)
class MissRatioCurve:
    """Miss ratio against capacity: ``miss_ratio[i]`` at ``sizes[i]`` rows (sizes increasing)."""

    policy: str
    sizes: np.ndarray
    miss_ratio: np.ndarray
    requests: int
    num_rows: int
    seconds: float

    def at(self, capacity: int) -> float:
        """Miss ratio at ``capacity`` rows: the value at the largest size ``<= capacity`` (exact
        wherever a size was computed; LRU's curve has every size, and beyond its last size, the
        distinct rows of the trace, only cold misses remain). ``at(0)`` is 1."""
        capacity = check_int("capacity", capacity, lo=0)
        if capacity == 0:
            return 1.0
        i = int(np.searchsorted(self.sizes, capacity, side="right")) - 1
        if i < 0:
            raise ValueError(
                f"capacity must be >= {int(self.sizes[0])} (the smallest size of this curve), got {capacity}"
            )
        return float(self.miss_ratio[i])

    def rows(self, max_points: int = 200) -> list[dict]:
        """Tidy rows (``source="simulated"``), at most ``max_points`` log-spaced sizes."""
        max_points = check_int("max_points", max_points, lo=2)
        idx = np.arange(len(self.sizes))
        if len(idx) > max_points:
            idx = np.unique(np.geomspace(1, len(idx), max_points).astype(np.int64) - 1)
        return [
            {
                "policy": self.policy,
                "capacity": int(self.sizes[i]),
                "cache_fraction": float(self.sizes[i]) / self.num_rows,
                "miss_ratio": float(self.miss_ratio[i]),
                "hit_rate": 1.0 - float(self.miss_ratio[i]),
                "requests": self.requests,
                "source": "simulated",
            }
            for i in idx
        ]


# ---------------------------------------------------------------- entry points


def _trace_and_rows(trace: object, num_rows: int | None) -> tuple[np.ndarray, int]:
    ids = check_ids("trace", trace)
    if num_rows is None:
        return ids, int(ids.max()) + 1 if ids.size else 1
    num_rows = check_int("num_rows", num_rows, lo=1)
    return check_ids("trace", ids, num_rows), num_rows


def _capacity(capacity: object, num_rows: int, policy: str, ways: int) -> int:
    """Rows for ``capacity`` given as rows (int) or a fraction of the table (float in (0, 1])."""
    if isinstance(capacity, (float, np.floating)):
        frac = check_float("capacity", capacity, lo=0.0, hi=1.0, lo_open=True)
        rows = max(1, round(frac * num_rows))
        if policy == "setassoc":  # a whole number of sets
            rows = min(max(ways, round(rows / ways) * ways), num_rows // ways * ways)
            if rows < ways:
                raise ValueError(f"ways={ways} is more than the {num_rows} rows of the table")
        return rows
    return check_int("capacity", capacity, lo=1, hi=num_rows)


_WARM: set[str] = set()


def _warm_kernel(name: str) -> None:
    """Compile (or load from Numba's cache) one simulator kernel on a tiny input."""
    if name in _WARM:
        return
    tiny = np.array([0, 1, 0, 2, 1, 3], np.int64)
    if name == "zipf":
        KS.zipf_ranks(np.array([0.5, 1.0]), np.array([0.1, 0.7]))
    elif name == "opt":
        KS.opt_replay(tiny, KS.next_use(tiny, 4), _positions(4), 2, True, np.zeros(6, np.bool_))
        KO.opt_stack_distances(tiny, 4, 2)
    elif name == "mrc":
        KS.lru_stack_distances(tiny, _positions(4), _positions(8))
    _WARM.add(name)


def _warm(policy: str, batch_size: int) -> None:
    """Compile the kernels a replay needs on a tiny trace, so timings exclude Numba's compiler."""
    if policy == "opt":
        _warm_kernel("opt")
        return
    key = f"{policy}/{batch_size > 1}"
    if key in _WARM:
        return
    tiny = np.array([0, 1, 0, 2, 1, 3], np.int64)
    hot = np.array([0]) if policy == "static" else None
    CachePolicy(policy, 4, 2, ways=1, hot_rows=hot).replay(tiny, 1 if batch_size == 1 else 2)
    _WARM.add(key)


def simulate(
    trace: object,
    policy: str,
    capacity: int | float,
    *,
    num_rows: int | None = None,
    ways: int = 32,
    hot_rows: object = None,
    profile: object = None,
    batch_size: int = 1,
) -> SimResult:
    """Replay ``trace`` (int64 ids in ``[0, num_rows)``; default rows: the largest id + 1) through
    ``policy`` (``SIM_POLICIES``) with ``capacity`` rows (an int) or a fraction of the rows.

    ``static`` pins ``hot_rows``, or the ``capacity`` most frequent rows of ``profile`` (a
    trace), or of the trace itself when neither is given: the *oracle* static set, an upper
    bound for a static cache. ``setassoc`` also reports conflict misses (a shadow fully
    associative LRU of the same capacity replays the same trace). ``opt`` needs ``batch_size=1``.
    """
    policy = check_choice("policy", policy, SIM_POLICIES)
    ids, num_rows = _trace_and_rows(trace, num_rows)
    ways = check_int("ways", ways, lo=1) if policy == "setassoc" else 0
    cap = _capacity(capacity, num_rows, policy, ways)
    batch_size = check_int("batch_size", batch_size, lo=1, hi=2**63 - 1)  # int64 in the kernels
    if policy == "opt" and batch_size != 1:
        raise ValueError(
            f"batch_size must be 1 for policy 'opt' (Belady replays request by request), got {batch_size}"
        )
    if policy != "static" and (hot_rows is not None or profile is not None):
        raise ValueError(f"hot_rows and profile are only used by policy 'static', got policy {policy!r}")
    if policy == "static" and hot_rows is None:
        hot_rows = hot_rows_from_profile(ids if profile is None else profile, cap, num_rows)
    _warm(policy, batch_size)
    n, conflicts = len(ids), 0
    if policy == "opt":
        t0 = time.perf_counter()
        hits, ev = KS.opt_replay(
            ids, KS.next_use(ids, num_rows), _positions(num_rows), cap, False, np.zeros(0, np.bool_)
        )
        seconds = time.perf_counter() - t0
        return SimResult("opt", cap, num_rows, n, int(hits), n - int(hits), int(ev), 0, seconds)
    pol = CachePolicy(policy, num_rows, cap, ways=max(ways, 1), hot_rows=hot_rows)
    hit = np.zeros(n, np.bool_) if policy == "setassoc" else None
    t0 = time.perf_counter()
    c = pol.replay(ids, batch_size, hit_out=hit)
    seconds = time.perf_counter() - t0
    if hit is not None:
        _warm("lru", batch_size)
        shadow = np.zeros(n, np.bool_)
        CachePolicy("lru", num_rows, cap).replay(ids, batch_size, hit_out=shadow)
        conflicts = int(np.count_nonzero(shadow & ~hit))
    counts = (n, c.hits, c.misses, c.evictions, c.bypass)
    return SimResult(policy, cap, num_rows, *counts, seconds, conflicts, batch_size, ways)


def lru_mrc(trace: object, num_rows: int | None = None) -> MissRatioCurve:
    """LRU's exact miss ratio at every capacity ``1..distinct rows`` from one pass (stack distances)."""
    ids, num_rows = _trace_and_rows(trace, num_rows)
    _warm_kernel("mrc")
    t0 = time.perf_counter()
    window = 2 * min(num_rows, len(ids)) + 64  # > the distinct rows: compaction every >= half window
    hist, distinct = KS.lru_stack_distances(ids, _positions(num_rows), _positions(window))
    n = max(len(ids), 1)
    hits_at = np.cumsum(hist[1:])  # hits at capacity c = accesses with distance <= c
    seconds = time.perf_counter() - t0
    sizes = np.arange(1, max(distinct, 1) + 1, dtype=np.int64)
    miss = (len(ids) - hits_at) / n if distinct else np.ones(1)
    return MissRatioCurve("lru", sizes, miss.astype(np.float64), len(ids), num_rows, seconds)


def opt_mrc(
    trace: object, sizes: KO.Sizes, num_rows: int | None = None, *, method: str = "auto"
) -> MissRatioCurve:
    """Belady's OPT miss ratio at each of ``sizes`` (rows, each in ``[1, num_rows]``; ``None``: every
    size up to the distinct rows). ``method="stack"``: one pass of OPT stack distances up to the
    largest size (every size at once); ``"replay"``: one heap replay per size; ``"auto"``: the
    pass for many sizes (:data:`~recnotebooks.cache._opt_kernels.STACK_FROM_SIZES`) or
    ``sizes=None``, else replays."""
    ids, num_rows = _trace_and_rows(trace, num_rows)
    _warm_kernel("opt")
    t0 = time.perf_counter()
    grid, hits = KO.opt_hits(ids, num_rows, sizes, method)
    miss = (len(ids) - hits) / max(len(ids), 1)
    return MissRatioCurve("opt", grid, miss.astype(np.float64), len(ids), num_rows, time.perf_counter() - t0)
