"""A DLRM training step with the embedding cache against the same step without it (MEASURED).

The DLRM of ``benchmarks/train_throughput.py`` (bottom 13-512-256-64, top 512-512-256-1, dot
interaction, batch 2048, pooling 1, sparse SGD) over 8 tables of 200k rows (dim 64), trained
on a ``SyntheticCriteo`` stream. Two scenarios, each with its own uncached baseline on the
same stream:

* **~90% lookup hit rate**: Zipf 1.05 ids, an LRU cache sized for 90%;
* **~50%**: Zipf 0.8 ids (at Zipf 1.05 a cache that holds a few batches' distinct rows
  already hits about 70% of lookups), an LRU cache sized for 50%.

Capacities come from the simulator: the stream's ids replayed batch by batch through the same
``CachePolicy`` the collection runs (``admit`` per batch, as ``lookup_ids`` does), warm-up
included, so the simulated hit rate is the one the timed steps should see; the measured one
is printed beside it. Both the per-lookup hit rate and the distinct-row hit rate (FBGEMM's
unique-miss view: one miss per distinct row of a batch) are reported. Each cache is warmed by
no-grad forwards over the warm-up batches (cheap; the same admissions a training step makes).

Prefetch on: the threaded ``emb.prefetching(data)`` (``PrefetchingIterator``, depth 1), so
the next batch's admission overlaps the running step. Rounds interleave the variants (their
order rotated each round); in a round each variant runs one untimed step (the pipeline
fills) and ``--block`` timed consecutive steps, each from the request of its batch to the
end of its optimizer step (waiting for a prefetch counts). Figures: the median step.

Run: ``python benchmarks/cache_step.py`` (``--quick`` smoke run, ``--threads``, ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Iterable

import numpy as np
import torch
from torch import nn

from recnotebooks.cache.cached import CachedEmbeddingBagCollection
from recnotebooks.cache.config import CacheConfig
from recnotebooks.cache.policies import CachePolicy
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.data.batch import Batch
from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo
from recnotebooks.nn import DLRM, SparseSGD

SCENARIOS = ((0.9, 1.05), (0.5, 0.8))  # (target per-lookup hit rate, Zipf exponent of the stream)


def simulate(ids: list[np.ndarray], rows: int, capacity: int, warm: int) -> np.ndarray:
    """LRU ``[lookup hits, lookups, distinct-row hits, distinct rows]`` over ``ids[warm:]`` (one
    table's batches), each batch admitted as the collection admits it (sorted distinct rows,
    protected)."""
    pol = CachePolicy("lru", rows, capacity)
    hits = lookups = dhits = distinct = 0
    for epoch, x in enumerate(ids):
        uniq, inv = np.unique(x, return_inverse=True)
        hit = pol.admit(uniq, epoch, epoch).hit
        if epoch >= warm:
            hits, lookups = hits + int(hit[inv].sum()), lookups + len(x)
            dhits, distinct = dhits + int(hit.sum()), distinct + len(uniq)
    return np.array([hits, lookups, dhits, distinct])


def capacity_for(ids: list[np.ndarray], rows: int, warm: int, target: float, lo: int) -> int:
    """Smallest LRU capacity (at least ``lo``; bisection on a log scale) whose simulated
    per-lookup hit rate over ``ids[warm:]`` reaches ``target``."""

    def rate(cap: int) -> float:
        c = simulate(ids, rows, cap, warm)
        return c[0] / c[1]

    if rate(lo) >= target:
        return lo
    hi = rows
    while hi - lo > max(1, lo // 100):
        mid = int(np.sqrt(lo * hi))
        lo, hi = (mid, hi) if rate(mid) < target else (lo, mid)
    return hi


class Variant:
    """One model being timed: its optimizers, its step times, how it iterates a block."""

    def __init__(self, name: str, cfg: DLRMConfig, emb: CachedEmbeddingBagCollection | None, prefetch: bool):
        self.name, self.prefetch = name, prefetch
        self.model = DLRM(cfg, seed=0, embeddings=emb)
        self.sparse_opt = SparseSGD(self.model.embeddings, 0.01)
        self.dense_opt = torch.optim.SGD(self.model.dense_parameters(), lr=0.01)
        self.times: list[float] = []
        self.info: dict[str, float] = {}  # capacity and simulated hit rates
        self.figures: dict[str, float] = {}  # what the run measured

    def block(self, batches: list[Batch]) -> Iterable[Batch]:
        return self.model.embeddings.prefetching(batches, depth=1) if self.prefetch else batches

    def run_block(self, batches: list[Batch], loss_fn: nn.Module) -> None:
        """One untimed step, then one timed step per remaining batch."""
        it = iter(self.block(batches))
        for i in range(len(batches)):
            t0 = time.perf_counter()
            b = next(it)
            loss_fn(self.model(b.dense, b.sparse), b.labels).backward()
            self.sparse_opt.step()
            self.dense_opt.step()
            self.dense_opt.zero_grad(set_to_none=True)
            if i:
                self.times.append(time.perf_counter() - t0)
        for _ in it:  # let the prefetch thread finish
            pass


def scenario(cfg: DLRMConfig, target: float, alpha: float, batch_size: int, warm: int, steps: int,
             report: Callable[[str], None]) -> tuple[list[Variant], list[Batch]]:  # fmt: skip
    """The uncached model and the cached models (prefetch off, on) of one scenario, their
    caches sized by simulation and warmed; returns them and the batches to time them on."""
    data = SyntheticCriteo(cfg, batch_size, SyntheticConfig(zipf_exponent=alpha), seed=0)
    batches = [data.batch(i) for i in range(warm + steps)]
    rows = cfg.tables[0].num_rows
    per_table = [[b.sparse[t.name][0].numpy().astype(np.int64) for b in batches] for t in cfg.tables]
    most = max(len(np.unique(x)) for x in per_table[0])
    lo = min(rows, 4 * most)  # room for the running batch and the prefetched ones
    cap = capacity_for(per_table[0], rows, warm, target, lo)
    c = sum(simulate(ids, rows, cap, warm) for ids in per_table)  # all tables, as the stats count
    sim_lookup, sim_distinct = c[0] / c[1], c[2] / c[3]
    tag = f"{round(100 * target)}"
    out = [Variant(f"uncached@{tag}", cfg, None, False)]
    for pre in (False, True):
        emb = CachedEmbeddingBagCollection.for_model(cfg, CacheConfig("lru", capacity=cap), seed=0)
        with torch.no_grad():
            for b in batches[:warm]:
                emb(b.sparse)
        emb.stats.reset()
        v = Variant(f"lru{tag}{'+prefetch' if pre else ''}", cfg, emb, pre)
        v.info = {"capacity": cap, "sim_lookup_hit_rate": sim_lookup, "sim_distinct_hit_rate": sim_distinct}
        out.append(v)
    report(f"  Zipf {alpha:g}: LRU capacity {cap:,}/table ({cap / rows:.1%}) for {target:.0%} lookup "
           f"hits (simulated on the timed batches: {sim_lookup:.3f} per lookup, {sim_distinct:.3f} "
           "distinct)")  # fmt: skip
    return out, batches[warm:]


def measured(v: Variant) -> dict[str, float]:
    """Hit rates the cache measured over the rounds (prefetched rows are critical-path hits;
    ``cache_distinct_hit_rate`` counts them as the misses they were)."""
    t = v.model.embeddings.stats.total()
    return {
        "lookup_hit_rate": t["lookup_hits"] / t["requested"],
        "distinct_hit_rate": t["hits"] / t["unique"],
        "cache_distinct_hit_rate": (t["hits"] - t["prefetched_misses"]) / t["unique"],
        "prefetched_fraction": t["prefetched_misses"] / max(1, t["misses"] + t["prefetched_misses"]),
    }


def run(report: Callable[[str], None] = print, quick: bool = False, rows: int = 200_000,
        batch_size: int = 2048, rounds: int = 9, block: int = 3, warm: int = 300,
        threads: int | None = None) -> dict[str, object]:  # fmt: skip
    """Build, warm and time every variant; ``report`` each line; returns the figures."""
    if quick:
        rows, batch_size, rounds, block, warm = 20_000, 256, 3, 2, 30
    if threads:
        torch.set_num_threads(threads)
    tables = tuple(TableConfig(f"T{i + 1}", rows, 1.0) for i in range(8))
    cfg = DLRMConfig(13, tables, 64, (512, 256, 64), (512, 512, 256, 1), name="cache_step")
    steps = rounds * (block + 1)
    report(f"8 tables x {rows:,} rows x dim 64, batch {batch_size}, pooling 1, SGD; "
           f"{torch.get_num_threads()} threads; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} "
           "cores; MEASURED")  # fmt: skip
    groups = [scenario(cfg, t, a, batch_size, warm, steps, report) for t, a in SCENARIOS]
    variants = [v for vs, _ in groups for v in vs]
    loss_fn = nn.BCEWithLogitsLoss()
    for r in range(rounds):  # interleaved, order rotated: machine noise hits every variant alike
        lo = r * (block + 1)
        for k in range(len(variants)):
            v = variants[(k + r) % len(variants)]
            batches = next(bs for vs, bs in groups if v in vs)
            v.run_block(batches[lo : lo + block + 1], loss_fn)
    report(f"median of {rounds} rounds x {block} timed steps each; load average now {os.getloadavg()[0]:.2f}")
    figures = {v.name: v for v in variants}
    for vs, _ in groups:
        summarise(vs, report)
    return {
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0],
        "variants": {n: v.figures for n, v in figures.items()},
    }


def summarise(vs: list[Variant], report: Callable[[str], None]) -> None:
    """Median step of each variant of one scenario against its uncached baseline (first)."""
    base = statistics.median(vs[0].times)
    vs[0].figures = {"ms": 1e3 * base}
    report(f"  {vs[0].name:18s} {1e3 * base:7.1f} ms/step")
    for v in vs[1:]:
        med = statistics.median(v.times)
        m = measured(v)
        v.figures = {**v.info, **m, "ms": 1e3 * med, "ratio": med / base}
        line = (f"  {v.name:18s} {1e3 * med:7.1f} ms/step {med / base:5.2f}x uncached; hit rate per lookup "
                f"{m['lookup_hit_rate']:.3f} measured / {v.info['sim_lookup_hit_rate']:.3f} simulated, "
                f"distinct {m['distinct_hit_rate']:.3f} / {v.info['sim_distinct_hit_rate']:.3f}")  # fmt: skip
        if v.prefetch:
            line += (f" (cache {m['cache_distinct_hit_rate']:.3f}: {m['prefetched_fraction']:.0%} of the "
                     "misses prefetched)")  # fmt: skip
        report(line)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--batch-size", type=int, default=2048)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--block", type=int, default=3, help="timed consecutive steps per variant and round")
    p.add_argument("--warm", type=int, default=300, help="warm-up batches (no-grad forwards)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    rep = print if not a.json else (lambda _: None)
    res = run(rep, a.quick, a.rows, a.batch_size, a.rounds, a.block, a.warm, a.threads)
    if a.json:
        print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
