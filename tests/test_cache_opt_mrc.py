"""Belady's OPT miss-ratio curve in one pass (OPT stack distances): equal to a replay per size,
to Mattson's stack cascade, to a naive Belady and to libCacheSim's Belady; below LRU,
non-increasing; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.cache import _opt_kernels as KO
from recnotebooks.cache import _sim_kernels as KS
from recnotebooks.cache.simulate import lru_mrc, opt_mrc, zipf_trace

ROWS = 12


def naive_belady_misses(trace: list[int], cap: int) -> int:
    """Belady with demand admission in plain Python: on a miss with a full cache, evict a cached
    row whose next use is farthest (never = farthest)."""
    cached: set[int] = set()
    misses = 0
    for t, x in enumerate(trace):
        if x in cached:
            continue
        misses += 1
        if len(cached) >= cap:
            later = trace[t + 1 :]
            cached.remove(max(cached, key=lambda r: later.index(r) if r in later else len(trace)))
        cached.add(x)
    return misses


def replay_hits(trace: np.ndarray, cap: int, num_rows: int) -> int:
    pos = np.full(num_rows, -1, np.int32)
    return int(KS.opt_replay(trace, KS.next_use(trace, num_rows), pos, cap, False, np.zeros(0, np.bool_))[0])


traces = st.lists(st.integers(0, ROWS - 1), min_size=0, max_size=150).map(lambda v: np.array(v, np.int64))


@settings(max_examples=60, deadline=None)
@given(trace=traces, top=st.integers(1, ROWS))
def test_one_pass_equals_replay_and_naive_belady_at_every_size(trace, top):
    sizes = np.arange(1, top + 1)
    one = opt_mrc(trace, sizes, num_rows=ROWS, method="stack")
    per = opt_mrc(trace, sizes, num_rows=ROWS, method="replay")
    assert np.array_equal(one.sizes, sizes) and one.policy == "opt"
    n = len(trace)
    hits = np.rint((1 - one.miss_ratio) * n).astype(int) if n else np.zeros(top, int)
    for c in sizes:
        assert hits[c - 1] == replay_hits(trace, int(c), ROWS)
        assert n - hits[c - 1] == naive_belady_misses(trace.tolist(), int(c))
    assert np.array_equal(one.miss_ratio, per.miss_ratio)
    cascade = KO.opt_stack_distances_cascade(
        trace, KS.next_use(trace, ROWS), np.full(ROWS, -1, np.int32), top
    )
    assert np.array_equal(cascade, KO.opt_stack_distances(trace, ROWS, top))  # Mattson's stack, same counts
    assert np.all(np.diff(one.miss_ratio) <= 0)  # more rows never miss more (the stack property)
    lru = lru_mrc(trace, num_rows=ROWS)
    assert all(one.at(int(c)) <= lru.at(int(c)) for c in sizes)


@settings(max_examples=60, deadline=None)
@given(trace=traces, sizes=st.lists(st.integers(1, ROWS), min_size=1, max_size=6))
def test_chosen_sizes_and_every_size(trace, sizes):
    auto, one = opt_mrc(trace, sizes, num_rows=ROWS), opt_mrc(trace, sizes, num_rows=ROWS, method="stack")
    assert np.array_equal(auto.sizes, np.unique(sizes)) and np.array_equal(auto.miss_ratio, one.miss_ratio)
    every = opt_mrc(trace, None, num_rows=ROWS)
    assert len(every.sizes) == max(len(set(trace.tolist())), 1)
    for c in every.sizes:
        assert every.at(int(c)) == opt_mrc(trace, [int(c)], num_rows=ROWS, method="replay").at(int(c))


def test_many_rows_never_used_again_and_a_cut_stack():
    """Ties between dead rows (next use never) and rows pushed past the largest size asked."""
    rng = np.random.default_rng(5)
    trace = np.concatenate([rng.permutation(400), rng.integers(0, 60, 3000), rng.permutation(400)])
    sizes = [1, 2, 7, 30, 59, 60, 61, 200, 400]
    one = opt_mrc(trace, sizes, method="stack")
    assert np.array_equal(one.miss_ratio, opt_mrc(trace, sizes, method="replay").miss_ratio)
    assert one.at(400) == 400 / len(trace)  # everything fits: only first requests miss


def test_zipf_trace_one_pass_equals_replays():
    trace = zipf_trace(20_000, 100_000, alpha=0.9, seed=3)
    sizes = np.unique(np.geomspace(1, 2000, 15).astype(np.int64))
    one = opt_mrc(trace, sizes, num_rows=20_000, method="stack")
    assert np.array_equal(one.miss_ratio, opt_mrc(trace, sizes, num_rows=20_000, method="replay").miss_ratio)
    assert one.rows()[0]["source"] == "simulated"


def test_against_libcachesim_belady(tmp_path):
    lcs = pytest.importorskip("libcachesim")
    trace = zipf_trace(5000, 50_000, alpha=0.9, seed=11)
    n, nxt = len(trace), KS.next_use(trace, 5000)
    rec = np.zeros(n, np.dtype([("ts", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")]))
    rec["ts"], rec["id"], rec["size"], rec["next"] = np.arange(n), trace + 1, 1, np.where(nxt < n, nxt, -1)
    path = str(tmp_path / "trace.oracleGeneral")
    rec.tofile(path)
    sizes = [1, 10, 100, 1000, 3000]
    one = opt_mrc(trace, sizes, num_rows=5000, method="stack")
    for c in sizes:
        reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
        theirs, _ = lcs.Belady(c).process_trace(reader)
        assert round(one.at(c) * n) == round(theirs * n)


def test_bad_input():
    trace = np.array([0, 1, 0, 2], np.int64)
    with pytest.raises(ValueError, match=r"sizes must be a non-empty list of capacities in \[1, 3\]"):
        opt_mrc(trace, [])
    with pytest.raises(ValueError, match="sizes must be a non-empty list"):
        opt_mrc(trace, [0, 2])
    with pytest.raises(ValueError, match="sizes must be a non-empty list"):
        opt_mrc(trace, [4], num_rows=3)
    with pytest.raises(ValueError, match="sizes must hold ids >= 0"):
        opt_mrc(trace, [-1])
    with pytest.raises(TypeError, match="sizes must be an integer array"):
        opt_mrc(trace, [1.5])
    with pytest.raises(ValueError, match="method must be one of"):
        opt_mrc(trace, [1], method="fast")
    assert KO.STACK_FROM_SIZES > 1
