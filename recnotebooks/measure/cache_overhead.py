"""What a cache costs a training step on this machine: cached against uncached, measured.

:func:`measure_overhead` trains one table as a
:class:`~recnotebooks.cache.cached.CachedEmbeddingBagCollection` and as a plain
:class:`~recnotebooks.nn.EmbeddingBagCollection` on the same batches of a given id trace,
step by step side by side (forward, backward, row-wise Adagrad), and reports the median
milliseconds of each and the hit rate the cached one saw. Because the cache runs the same
policies as the trace simulator (:mod:`recnotebooks.cache.simulate`), that hit rate is the one
the simulator gives for the trace replayed in batches. Everything here is **measured**; the
result is an :class:`OverheadResult`. :func:`measure_cache_overhead` measures it on the Cache
Explorer's trace (:func:`recnotebooks.cache.curves.cache_trace`), once per setting.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from recnotebooks.cache.cached import CachedEmbeddingBagCollection
from recnotebooks.cache.config import CacheConfig, hot_rows_from_counts
from recnotebooks.cache.curves import POOLING, TRACE_IDS, cache_capacity, cache_profile, cache_trace
from recnotebooks.cache.policies import POLICIES, check_ids
from recnotebooks.checks import check_choice, check_device, check_int, check_steps
from recnotebooks.config import TableConfig
from recnotebooks.nn import EmbeddingBagCollection, RowWiseAdagrad
from recnotebooks.sparse import JaggedBatch
from recnotebooks.threads import choose_threads, load_monitor, usable_cores, use_threads
from recnotebooks.timing import reliability, spread

__all__ = [
    "MEASURED_BATCH",
    "MEASURED_DIM",
    "MEASURED_POOLING",
    "MEASURED_ROWS_CAP",
    "MEASURED_WARMUP",
    "OverheadResult",
    "measure_cache_overhead",
    "measure_overhead",
]


@dataclass(frozen=True)
class OverheadResult:
    """What :func:`measure_overhead` measured: a cached step against the same step uncached."""

    #: medians over the timed steps (milliseconds)
    uncached_ms: float
    cached_ms: float
    #: why the two timings cannot be trusted, ``""`` when they can
    #: (:func:`recnotebooks.timing.reliability` of the shakier of the two)
    reliability: str
    #: the cache's misses over every step, from a cold cache
    misses: int
    #: hit rate of the timed steps (the simulator's convention)
    hit_rate: float
    rows: int
    capacity: int
    #: fill + warm-up + timed steps
    steps_total: int
    #: the thread policy's threads (:func:`recnotebooks.threads.choose_threads`)
    threads: int

    @property
    def ratio(self) -> float:
        """Cached over uncached step time."""
        return self.cached_ms / self.uncached_ms

    def to_dict(self) -> dict[str, float | str]:
        """Plain data: every field, numbers as floats."""
        return {k: float(v) if isinstance(v, int) else v for k, v in asdict(self).items()}


def _batches(ids: np.ndarray, n_steps: int, batch_size: int, pooling: int) -> list[JaggedBatch]:
    """``n_steps`` one-table batches of ``batch_size`` bags of ``pooling`` ids, cut from ``ids``."""
    per_step = batch_size * pooling
    flat = torch.from_numpy(np.array(ids[: per_step * n_steps], dtype=np.int64))  # a writable copy
    lengths = torch.full((batch_size,), pooling, dtype=torch.int64)
    return [
        JaggedBatch(("t0",), flat[i * per_step : (i + 1) * per_step], lengths, batch_size)
        for i in range(n_steps)
    ]


def measure_overhead(
    trace: np.ndarray,
    num_rows: int,
    capacity: int,
    policy: str = "lru",
    *,
    ways: int = 32,
    profile: np.ndarray | None = None,
    steps: int = 9,
    warmup: int = 4,
    batch_size: int = 512,
    pooling: int = 5,
    dim: int = 32,
    fill: int | None = None,
    device: str = "cpu",
) -> OverheadResult:
    """A training step (forward, backward, row-wise Adagrad) of a one-table cached collection
    against the same step uncached, on consecutive batches of ``trace``, on this machine.

    Args:
        trace: ids in ``[0, num_rows)``; batch ``i`` is its ``i``-th run of ``batch_size * pooling`` ids.
        num_rows: rows of the table.
        capacity: the cache's slots (a multiple of ``ways`` for ``"setassoc"``).
        policy: one of :data:`~recnotebooks.cache.policies.POLICIES`.
        ways: slots per set (``"setassoc"`` only).
        profile: ids of a profile sample; ``"static"`` pins its ``capacity`` most frequent rows
            (FAE's hot set). Required for ``"static"``.
        steps: timed steps; ``warmup``: untimed training steps before them (kernels compiled, this
            machine's caches warm).
        batch_size, pooling, dim: the table's batch, lookups per bag and embedding dimension.
        fill: forwards without gradients that fill the cache first (cheap: nothing to write back);
            default: about three times its slots of ids, so the timed steps see its steady hit rate.
        device: where the uncached table and the cache's slots live (``"cpu"`` or ``"cuda[:N]"``;
            the cached table's full rows stay in host memory, pinned under CUDA).

    Returns:
        An :class:`OverheadResult` (``to_dict()`` for plain data). Raises ``ValueError`` when the
        trace is too short for that many steps or a step needs more slots than the cache has.
    """
    num_rows = check_int("num_rows", num_rows, lo=1)
    trace = check_ids("trace", trace, num_rows)
    capacity = check_int("capacity", capacity, lo=1, hi=num_rows)
    policy = check_choice("policy", policy, POLICIES)
    ways = check_int("ways", ways, lo=1)
    steps, warmup = check_steps("steps", steps, lo=1), check_steps("warmup", warmup, lo=0)
    batch_size, pooling = check_int("batch_size", batch_size, lo=1), check_int("pooling", pooling, lo=1)
    dim = check_int("dim", dim, lo=1)
    dev = check_device("device", device)
    hot = _hot_rows(policy, profile, num_rows, capacity)
    fill = _fill(len(trace), capacity, batch_size * pooling, warmup, steps, fill)
    plain, cached = _one_table_pair(num_rows, capacity, policy, ways, hot, pooling, dim, dev)
    batches = [b.to(dev) for b in _batches(trace, fill + warmup + steps, batch_size, pooling)]
    threads = choose_threads().threads if dev.type == "cpu" else torch.get_num_threads()
    with use_threads(threads), torch.no_grad():
        for b in batches[:fill]:  # forwards only: the cache fills, nothing to write back
            cached(b)
    with use_threads(threads):
        times, warm, others = _time_side_by_side(plain, cached, batches[fill:], warmup, dev)
    return _result(times, warm, others, cached, steps, num_rows, capacity, len(batches), threads)


def _one_table_pair(
    num_rows: int,
    capacity: int,
    policy: str,
    ways: int,
    hot: dict[str, object],
    pooling: int,
    dim: int,
    dev: torch.device,
) -> tuple[EmbeddingBagCollection, CachedEmbeddingBagCollection]:
    """One table of ``num_rows`` rows as a plain collection and behind a cache of ``capacity`` slots."""
    tables = (TableConfig("t0", num_rows, pooling),)
    config = CacheConfig(policy=policy, capacity=capacity, ways=ways if policy == "setassoc" else 32)
    plain = EmbeddingBagCollection(tables, dim, device=dev)
    cached = CachedEmbeddingBagCollection(tables, dim, config, device=dev, **hot)  # type: ignore[arg-type]
    return plain, cached


def _result(
    times: dict[str, list[float]],
    warm: dict[str, int],
    others: float | None,
    cached: CachedEmbeddingBagCollection,
    steps: int,
    num_rows: int,
    capacity: int,
    n_steps: int,
    threads: int,
) -> OverheadResult:
    """The medians of the timed steps, as trustworthy as the shakier of the two, and the hit rate
    of the timed steps (the cache's counters since ``warm``)."""
    total = cached.stats.total()
    shakier = max(spread(times["uncached"]), spread(times["cached"]))
    timed_misses, timed_requested = total["misses"] - warm["misses"], total["requested"] - warm["requested"]
    return OverheadResult(
        uncached_ms=float(np.median(times["uncached"])) * 1e3,
        cached_ms=float(np.median(times["cached"])) * 1e3,
        reliability=reliability(steps, shakier, others, max(0, usable_cores() - threads)),
        misses=int(total["misses"]),
        hit_rate=1.0 - timed_misses / max(1, timed_requested),
        rows=num_rows,
        capacity=capacity,
        steps_total=n_steps,
        threads=threads,
    )


def _fill(n_ids: int, capacity: int, per_step: int, warmup: int, steps: int, fill: int | None) -> int:
    """The fill forwards (default: about three times the cache's slots of ids, as many as the trace
    leaves room for), checked against the trace's length."""
    if fill is None:
        fill = max(0, min(max(1, 3 * capacity // per_step), n_ids // per_step - warmup - steps))
    fill = check_int("fill", fill, lo=0)
    n_steps = fill + warmup + steps
    if n_ids < per_step * n_steps:
        raise ValueError(
            f"trace must hold at least {per_step * n_steps:,} ids to measure this cache "
            f"({n_steps} steps of {per_step:,}), got {n_ids:,}"
        )
    return fill


def _hot_rows(policy: str, profile: np.ndarray | None, num_rows: int, capacity: int) -> dict[str, object]:
    """``"static"``: FAE's hot set, the ``capacity`` most frequent rows of the profile sample."""
    if policy != "static":
        return {}
    if profile is None:
        raise ValueError("policy 'static' needs profile= (ids whose most frequent rows are pinned)")
    counts = np.bincount(check_ids("profile", profile, num_rows), minlength=num_rows)
    return {"hot_rows": {"t0": hot_rows_from_counts(counts, capacity)}}


def _time_side_by_side(
    plain: EmbeddingBagCollection,
    cached: CachedEmbeddingBagCollection,
    batches: list[JaggedBatch],
    warmup: int,
    dev: torch.device,
) -> tuple[dict[str, list[float]], dict[str, int], float | None]:
    """Train both on each batch in turn (so a busy moment slows both alike), timing the steps after
    ``warmup``; the seconds of each, the cache's counters when timing began and the other
    programs' load meanwhile."""
    runs = {
        "uncached": (plain, RowWiseAdagrad(plain, lr=0.05)),
        "cached": (cached, RowWiseAdagrad(cached, lr=0.05)),
    }
    times: dict[str, list[float]] = {"uncached": [], "cached": []}
    warm = cached.stats.total()
    load_monitor().mark()
    for i, b in enumerate(batches):
        if i == warmup:
            warm = cached.stats.total()
        for name, (ebc, opt) in runs.items():
            t0 = time.perf_counter()
            ebc(b).sum().backward()
            opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times, warm, load_monitor().since_mark().others


_MEASURED: dict[tuple[object, ...], dict[str, float | str]] = {}
MEASURED_ROWS_CAP = 100_000  #: the measured collection's table is capped at this many rows
#: The measured table's batch, lookups per bag (the trace's :data:`~recnotebooks.cache.curves.POOLING`)
#: and embedding dimension.
MEASURED_BATCH, MEASURED_POOLING, MEASURED_DIM = 512, POOLING, 32
MEASURED_WARMUP = 4  #: untimed training steps first (kernels compiled, caches of this machine warm)


def measure_cache_overhead(
    num_rows: int,
    alpha: float,
    policy: str,
    capacity_fraction: float,
    ways: int = 32,
    steps: int = 9,
    num_ids: int = TRACE_IDS,
) -> dict[str, Any]:
    """:func:`measure_overhead` on the Cache Explorer's trace
    (:func:`~recnotebooks.cache.curves.cache_trace`; ``"static"``: hot rows from
    :func:`~recnotebooks.cache.curves.cache_profile`): a one-table cached training step against the
    same step uncached, the median ms of each over ``steps`` steps after :data:`MEASURED_WARMUP`
    untimed ones, and the hit rate training saw. **Measured** once per setting, then reused
    (``reused`` is 1.0) unless it was not reliable (``reliability`` says why: then it is measured
    again). Tables above :data:`MEASURED_ROWS_CAP` rows are measured on a capped copy (ids folded
    into its rows)."""

    key = (num_rows, alpha, policy, capacity_fraction, ways, steps, num_ids)
    if key in _MEASURED and not _MEASURED[key].get("reliability"):  # an unreliable one is taken again
        return {**_MEASURED[key], "reused": 1.0}
    rows = min(check_int("num_rows", num_rows, lo=1), MEASURED_ROWS_CAP)
    profile = cache_profile(num_rows, alpha, num_ids) % rows if policy == "static" else None
    out = measure_overhead(
        cache_trace(num_rows, alpha, num_ids) % rows,
        rows,
        cache_capacity(capacity_fraction, rows, policy, ways),
        policy,
        ways=ways,
        profile=profile,
        steps=steps,
        warmup=MEASURED_WARMUP,
        batch_size=MEASURED_BATCH,
        pooling=MEASURED_POOLING,
        dim=MEASURED_DIM,
    ).to_dict()
    out["reused"] = 0.0
    _MEASURED[key] = out
    return dict(out)
