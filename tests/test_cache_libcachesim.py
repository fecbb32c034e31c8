"""Cross-check against libCacheSim (the cache-research community's C simulator, PyPI ``libcachesim``).

The same trace goes through both: an oracleGeneral binary trace file (per request: uint32
timestamp, uint64 object id, uint32 size, int64 next access vtime, -1 if none) read by
libCacheSim's TraceReader, unit object sizes, cache size in objects. LRU and OPT (Belady)
miss counts must be identical. libCacheSim's LFU forgets a count on eviction and breaks ties
FIFO inside a frequency (the least recently accessed first): it equals our ``lfu_cached``
exactly; our ``lfu`` (FBGEMM's: counts kept for every row) differs, and the test shows by how much.
"""

from __future__ import annotations

import numpy as np
import pytest

from recnotebooks.cache.simulate import simulate, zipf_trace

lcs = pytest.importorskip("libcachesim")

ORACLE = np.dtype([("ts", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])


def write_oracle_trace(trace: np.ndarray, path) -> str:  # type: ignore[no-untyped-def]
    """``trace`` as an oracleGeneral file (next access filled in, as Belady needs)."""
    n = len(trace)
    nxt = np.full(n, -1, np.int64)
    last = np.full(int(trace.max()) + 1, -1, np.int64)
    for t in range(n - 1, -1, -1):
        nxt[t], last[trace[t]] = last[trace[t]], t
    rec = np.zeros(n, ORACLE)
    rec["ts"], rec["id"], rec["size"], rec["next"] = np.arange(n), trace + 1, 1, nxt
    rec.tofile(path)
    return str(path)


def lcs_misses(path: str, cls, cap: int, n: int) -> int:  # type: ignore[no-untyped-def]
    reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
    miss_ratio, _ = cls(cap).process_trace(reader)
    return round(miss_ratio * n)


@pytest.mark.parametrize("alpha", [0.8, 1.05])
def test_lru_opt_lfu_against_libcachesim(tmp_path, alpha):
    trace = zipf_trace(20_000, 200_000, alpha=alpha, seed=7)
    path = write_oracle_trace(trace, tmp_path / "trace.oracleGeneral")
    n = len(trace)
    report = []
    for cap in (16, 200, 2000, 10_000):
        assert simulate(trace, "lru", cap, num_rows=20_000).misses == lcs_misses(path, lcs.LRU, cap, n)
        assert simulate(trace, "opt", cap, num_rows=20_000).misses == lcs_misses(path, lcs.Belady, cap, n)
        theirs = lcs_misses(path, lcs.LFU, cap, n)
        assert simulate(trace, "lfu_cached", cap, num_rows=20_000).misses == theirs
        ours = simulate(trace, "lfu", cap, num_rows=20_000).misses
        report.append(f"cap {cap}: libCacheSim LFU {theirs} misses, FBGEMM-style lfu {ours}")
        # Counts that survive eviction remember which rows are hot, so a row evicted once comes
        # back with its history: on an i.i.d. Zipf trace that is never worse here.
        assert ours <= theirs, report
    print("\n".join(report))
