"""What a cache costs a training step on this machine: cached against uncached, measured.

:func:`measure_overhead` trains one table as a
:class:`~recnotebooks.cache.cached.CachedEmbeddingBagCollection` and as a plain
:class:`~recnotebooks.nn.EmbeddingBagCollection` on the same batches of a given id trace,
step by step side by side (forward, backward, row-wise Adagrad), and reports the median
milliseconds of each and the hit rate the cached one saw. Because the cache runs the same
policies as the trace simulator (:mod:`recnotebooks.cache.simulate`), that hit rate is the one
the simulator gives for the trace replayed in batches. Everything here is **measured**.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from recnotebooks.cache.policies import POLICIES, check_ids
from recnotebooks.checks import check_choice, check_device, check_int, check_steps
from recnotebooks.threads import choose_threads, load_monitor, usable_cores, use_threads
from recnotebooks.timing import reliability, spread

__all__ = ["measure_overhead"]


def _batches(ids: np.ndarray, n_steps: int, batch_size: int, pooling: int) -> list[object]:
    """``n_steps`` one-table batches of ``batch_size`` bags of ``pooling`` ids, cut from ``ids``."""
    import torch

    from recnotebooks.sparse import JaggedBatch

    per_step = batch_size * pooling
    flat = torch.from_numpy(np.array(ids[: per_step * n_steps], dtype=np.int64))  # a writable copy
    lengths = torch.full((batch_size,), pooling, dtype=torch.int64)
    return [JaggedBatch(("t0",), flat[i * per_step : (i + 1) * per_step], lengths, batch_size)
            for i in range(n_steps)]  # fmt: skip


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
) -> dict[str, Any]:
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
        ``uncached_ms`` and ``cached_ms`` (medians over the timed steps), ``hit_rate`` (of the
        timed steps: the simulator's convention), ``misses`` (over every step from a cold cache),
        ``rows``, ``capacity``, ``steps_total`` (fill + warm-up + timed), ``threads`` (the thread
        policy's: :func:`recnotebooks.threads.choose_threads`) and ``reliability`` (why the two
        timings cannot be trusted, ``""`` when they can: :func:`recnotebooks.timing.reliability`
        of the shakier of the two). Raises ``ValueError``
        when the trace is too short for that many steps or a step needs more slots than the cache has.
    """
    import torch

    from recnotebooks.cache.cached import CachedEmbeddingBagCollection
    from recnotebooks.cache.config import CacheConfig, hot_rows_from_counts
    from recnotebooks.config import TableConfig
    from recnotebooks.nn import EmbeddingBagCollection, RowWiseAdagrad

    num_rows = check_int("num_rows", num_rows, lo=1)
    trace = check_ids("trace", trace, num_rows)
    capacity = check_int("capacity", capacity, lo=1, hi=num_rows)
    policy = check_choice("policy", policy, POLICIES)
    ways = check_int("ways", ways, lo=1)
    steps, warmup = check_steps("steps", steps, lo=1), check_steps("warmup", warmup, lo=0)
    batch_size, pooling = check_int("batch_size", batch_size, lo=1), check_int("pooling", pooling, lo=1)
    dim = check_int("dim", dim, lo=1)
    dev = check_device("device", device)
    if policy == "static" and profile is None:
        raise ValueError("policy 'static' needs profile= (ids whose most frequent rows are pinned)")
    per_step = batch_size * pooling
    if fill is None:
        fill = max(0, min(max(1, 3 * capacity // per_step), len(trace) // per_step - warmup - steps))
    fill = check_int("fill", fill, lo=0)
    n_steps = fill + warmup + steps
    if len(trace) < per_step * n_steps:
        raise ValueError(f"trace must hold at least {per_step * n_steps:,} ids to measure this cache "
                         f"({n_steps} steps of {per_step:,}), got {len(trace):,}")  # fmt: skip
    extra: dict[str, object] = {}
    if policy == "static":  # FAE's hot set: the most frequent rows of the profile sample
        counts = np.bincount(check_ids("profile", profile, num_rows), minlength=num_rows)
        extra["hot_rows"] = {"t0": hot_rows_from_counts(counts, capacity)}
    tables = (TableConfig("t0", num_rows, pooling),)
    config = CacheConfig(policy=policy, capacity=capacity, ways=ways if policy == "setassoc" else 32)
    plain = EmbeddingBagCollection(tables, dim, device=dev)
    cached = CachedEmbeddingBagCollection(tables, dim, config, device=dev, **extra)  # type: ignore[arg-type]
    runs = {
        "uncached": (plain, RowWiseAdagrad(plain, lr=0.05)),
        "cached": (cached, RowWiseAdagrad(cached, lr=0.05)),
    }
    times: dict[str, list[float]] = {"uncached": [], "cached": []}
    batches = [b.to(dev) for b in _batches(trace, n_steps, batch_size, pooling)]
    threads = choose_threads().threads if dev.type == "cpu" else torch.get_num_threads()
    with use_threads(threads), torch.no_grad():
        for b in batches[:fill]:
            cached(b)
    warm = cached.stats.total()
    with use_threads(threads):
        load_monitor().mark()
        for i, b in enumerate(batches[fill:]):  # the two step by step, so a busy moment slows both alike
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
    load = load_monitor().since_mark()
    out: dict[str, Any] = {f"{k}_ms": float(np.median(v)) * 1e3 for k, v in times.items()}
    # the ratio is as trustworthy as the shakier of its two steps
    shakier = max(spread(times["uncached"]), spread(times["cached"]))
    out["reliability"] = reliability(steps, shakier, load.others, max(0, usable_cores() - threads))
    total = cached.stats.total()
    out["misses"] = float(total["misses"])  # over every step, from a cold cache
    timed = total["misses"] - warm["misses"], total["requested"] - warm["requested"]
    out["hit_rate"] = 1.0 - timed[0] / max(1, timed[1])
    out.update(rows=float(num_rows), capacity=float(capacity), steps_total=float(n_steps),
               threads=float(threads))  # fmt: skip
    return out
