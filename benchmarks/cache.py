"""Trace-simulator speed: ours against libCacheSim and a plain OrderedDict LRU, in one run.

A 10M-id Zipf(1.05) trace over 1M rows (ranks scattered over the rows), cache 10% (100k
rows). Timed (MEASURED here: median, min and max of 3 repeats, with the 1-minute load average
of the machine beside each figure; Numba compilation excluded by a warm-up on a small trace):

* ours: LRU, LFU (both count variants), 32-way set-associative LRU, static (the oracle hot
  set), OPT (Belady, next-use pass included), the LRU miss-ratio curve at every size (stack
  distances, one pass), the OPT miss-ratio curve at every size up to the cache (OPT stack
  distances, one pass, on the first ``--opt-mrc-ids`` ids) beside one OPT replay per size at
  12 sizes on the same ids (same counts checked), and drawing the Zipf trace itself;
* libCacheSim (when installed): LRU, LFU, Belady, reading an oracleGeneral trace file
  written beforehand; only ``process_trace`` is timed;
* ``collections.OrderedDict`` LRU: timed on the first 1M ids and scaled per id (said in the output).

Targets (issue 10): LRU >= 20M ids/s, >= 1.5x libCacheSim's LRU and >= 20x OrderedDict;
OPT and the full LRU miss-ratio curve >= 5M ids/s each. If ``benchmarks/cache_step.py``
exists, its ``main()`` (the cached training step) runs afterwards unless ``--no-step``. Usage::

    python benchmarks/cache.py [--ids N] [--rows R] [--repeats K] [--opt-mrc-ids M] [--no-step]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from recnotebooks.cache._sim_kernels import next_use
from recnotebooks.cache.simulate import lru_mrc, opt_mrc, simulate, zipf_trace

POLICIES = ("lru", "lfu", "lfu_cached", "setassoc", "static", "opt")


def median_time(fn: Callable[[], float], repeats: int) -> tuple[float, list[float]]:
    """``fn`` returns its own timed seconds; the median over ``repeats`` and all of them."""
    times = [fn() for _ in range(repeats)]
    return statistics.median(times), times


def rate(n: int, med: float, times: list[float]) -> str:
    """ids/s at the median (min-max over the repeats) and the machine's 1-minute load average."""
    return (f"{n / med / 1e6:7.1f}M ids/s ({n / max(times) / 1e6:.1f}-{n / min(times) / 1e6:.1f})  "
            f"load {os.getloadavg()[0]:.2f}")  # fmt: skip


def ordered_dict_lru(trace: np.ndarray, cap: int) -> float:
    t0 = time.perf_counter()
    d: OrderedDict[int, None] = OrderedDict()
    for x in trace.tolist():
        if x in d:
            d.move_to_end(x)
        else:
            if len(d) >= cap:
                d.popitem(last=False)
            d[x] = None
    return time.perf_counter() - t0


def write_oracle(trace: np.ndarray, path: Path) -> None:
    """oracleGeneral records: uint32 time, uint64 id, uint32 size, int64 next access (-1: none)."""
    nxt = next_use(trace, int(trace.max()) + 1)
    nxt[nxt >= len(trace)] = -1
    rec = np.zeros(len(trace), np.dtype([("t", "<u4"), ("id", "<u8"), ("s", "<u4"), ("n", "<i8")]))
    rec["t"], rec["id"], rec["s"], rec["n"] = np.arange(len(trace)), trace + 1, 1, nxt
    rec.tofile(path)


def opt_mrc_figures(trace: np.ndarray, rows: int, cap: int, repeats: int, speed: dict[str, float]) -> None:
    """OPT's miss-ratio curve at every size ``1..cap`` in one pass against a replay per size at 12
    log-spaced sizes, on the same ids; the two must give the same miss ratios."""
    n, every = len(trace), np.arange(1, cap + 1)
    sizes = np.unique(np.geomspace(1, cap, 12).round().astype(np.int64))
    opt_mrc(trace[:1000], every[: min(cap, 64)], rows, method="stack")  # warm-up: compile outside the timings
    one: list = []

    def one_pass() -> float:
        one.append(opt_mrc(trace, every, rows, method="stack"))
        return one[-1].seconds

    med, all_t = median_time(one_pass, repeats)
    speed["ours_opt_mrc"] = n / med
    rep = opt_mrc(trace, sizes, rows, method="replay")
    same = all(one[-1].at(int(c)) == rep.at(int(c)) for c in sizes)
    per_size = rep.seconds / len(sizes)
    print(f"  ours OPT MRC      {rate(n, med, all_t)}  (all {cap:,} sizes in one pass, {n:,} ids)")
    print(f"  ours OPT replay   {n / per_size / 1e6:7.1f}M ids/s per size ({len(sizes)} sizes in "
          f"{rep.seconds:.2f} s); one pass = {med / per_size:.0f} replays, same curve: {same}")  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", type=int, default=10_000_000)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--opt-mrc-ids", type=int, default=1_000_000, help="ids of the OPT-MRC figure")
    ap.add_argument("--no-step", action="store_true", help="skip benchmarks/cache_step.py")
    args = ap.parse_args(argv)
    n, rows, cap = args.ids, args.rows, args.rows // 10
    zipf_trace(rows, 10, alpha=1.05, seed=0)  # warm-up: compile outside the timings
    print(f"MEASURED: {n:,}-id Zipf(1.05) trace over {rows:,} rows, cache {cap:,} rows (10%), "
          f"median of {args.repeats} (min-max), {os.cpu_count()} CPUs")  # fmt: skip

    def draw() -> float:
        t0 = time.perf_counter()
        zipf_trace(rows, n, alpha=1.05, seed=0)
        return time.perf_counter() - t0

    med, all_t = median_time(draw, args.repeats)
    print(f"  zipf_trace        {rate(n, med, all_t)}")
    trace = zipf_trace(rows, n, alpha=1.05, seed=0)
    small = trace[:10_000]
    for p in POLICIES:  # warm-up: compile outside the timings
        simulate(small, p, 320, num_rows=rows)
    lru_mrc(small, rows)
    speed: dict[str, float] = {}

    def ours(policy: str) -> Callable[[], float]:
        def run() -> float:
            r = simulate(trace, policy, cap, num_rows=rows)
            ours.hit[policy] = r.hit_rate  # type: ignore[attr-defined]
            return r.seconds

        return run

    ours.hit = {}  # type: ignore[attr-defined]
    for policy in POLICIES:
        med, all_t = median_time(ours(policy), args.repeats)
        speed[f"ours_{policy}"] = n / med
        hr = ours.hit[policy]  # type: ignore[attr-defined]
        print(f"  ours {policy:<11}  {rate(n, med, all_t)}  hit rate {hr:.4f}")
    med, all_t = median_time(lambda: lru_mrc(trace, rows).seconds, args.repeats)
    speed["ours_lru_mrc"] = n / med
    print(f"  ours LRU MRC      {rate(n, med, all_t)}  (all {rows:,} sizes in one pass)")
    opt_mrc_figures(trace[: min(n, args.opt_mrc_ids)], rows, cap, args.repeats, speed)
    m = min(n, 1_000_000)
    med, all_t = median_time(lambda: ordered_dict_lru(trace[:m], cap), args.repeats)
    speed["ordered_dict_lru"] = m / med
    print(f"  OrderedDict LRU   {rate(m, med, all_t)}  (timed on the first {m:,} ids, scaled per id)")
    try:
        import libcachesim as lcs
    except ImportError:
        lcs = None
        print("  libCacheSim: not installed (make peers), skipped")
    if lcs is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.oracleGeneral"
            write_oracle(trace, path)
            for name, cls in (("LRU", lcs.LRU), ("LFU", lcs.LFU), ("Belady", lcs.Belady)):

                def run(cls=cls) -> float:  # type: ignore[no-untyped-def]
                    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
                    cache = cls(cap)
                    t0 = time.perf_counter()
                    mr, _ = cache.process_trace(reader)
                    run.mr = mr  # type: ignore[attr-defined]
                    return time.perf_counter() - t0

                med, all_t = median_time(run, args.repeats)
                speed[f"libcachesim_{name.lower()}"] = n / med
                print(f"  libCacheSim {name:<6}{rate(n, med, all_t)}  hit rate {1 - run.mr:.4f}")  # type: ignore[attr-defined]
    lru = speed["ours_lru"]
    print("ratios (targets: LRU >= 20M ids/s, >= 1.5x libCacheSim LRU, >= 20x OrderedDict; OPT and the LRU")
    print("  miss-ratio curve >= 5M ids/s; the one-pass OPT curve has no target):")
    print(f"  ours LRU / OrderedDict   {lru / speed['ordered_dict_lru']:6.1f}x")
    if "libcachesim_lru" in speed:
        print(f"  ours LRU / libCacheSim   {lru / speed['libcachesim_lru']:6.2f}x")
        print(f"  ours OPT / libCacheSim Belady {speed['ours_opt'] / speed['libcachesim_belady']:6.2f}x")
        print(
            f"  ours lfu_cached / libCacheSim LFU {speed['ours_lfu_cached'] / speed['libcachesim_lfu']:6.2f}x"
        )
    step = Path(__file__).with_name("cache_step.py")
    if step.exists() and not args.no_step:
        spec = importlib.util.spec_from_file_location("cache_step", step)
        if spec is not None and spec.loader is not None:
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            if hasattr(mod, "main"):  # it parses sys.argv itself: give it none of ours
                saved, sys.argv = sys.argv, [str(step)]
                try:
                    mod.main()
                finally:
                    sys.argv = saved
    return speed


if __name__ == "__main__":
    main(sys.argv[1:])
