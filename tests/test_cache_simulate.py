"""The trace simulator: OPT against a naive Belady, the one-pass LRU miss-ratio curve against
replays, traces from batches and streams, tidy rows, bad input and ``recnb cache-sim``."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.cache.commands import add_cache_sim_parser, run_cache_sim
from recnotebooks.cache.simulate import (
    hot_rows_from_profile,
    lru_mrc,
    opt_mrc,
    simulate,
    trace_ids,
    zipf_trace,
)
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.sparse import JaggedBatch


def naive_opt_misses(trace, cap):
    """Belady with demand admission, O(n * C): evict the cached row whose next use is farthest."""
    cached: set[int] = set()
    misses = 0
    for t, x in enumerate(int(v) for v in trace):
        if x in cached:
            continue
        misses += 1
        if len(cached) >= cap:

            def next_use(r, t=t):
                later = np.flatnonzero(trace[t + 1 :] == r)
                return later[0] if later.size else len(trace)

            cached.remove(max(sorted(cached), key=next_use))
        cached.add(x)
    return misses


traces = st.lists(st.integers(0, 30), min_size=1, max_size=200).map(lambda v: np.array(v, np.int64))


@settings(max_examples=40, deadline=None)
@given(trace=traces, cap=st.integers(1, 31))
def test_opt_matches_naive_belady_and_bounds_every_policy(trace, cap):
    opt = simulate(trace, "opt", cap, num_rows=31)
    assert opt.misses == naive_opt_misses(trace, cap)
    for policy in ("lru", "lfu", "lfu_cached"):
        assert simulate(trace, policy, cap, num_rows=31).misses >= opt.misses
    assert opt_mrc(trace, [cap], num_rows=31).at(cap) == opt.miss_ratio


@settings(max_examples=40, deadline=None)
@given(trace=traces)
def test_lru_mrc_is_exact_at_every_size(trace):
    curve = lru_mrc(trace, num_rows=31)
    for c in range(1, 32):
        assert curve.at(c) == simulate(trace, "lru", c, num_rows=31).miss_ratio
    assert np.all(np.diff(curve.miss_ratio) <= 0)


def test_zipf_curves_and_rows():
    trace = zipf_trace(5000, 50_000, alpha=1.05, seed=3)
    assert trace.dtype == np.int64 and trace.min() >= 0 and trace.max() < 5000
    curve = lru_mrc(trace)
    for c in (1, 50, 500, 2500, 10_000):
        assert curve.at(c) == simulate(trace, "lru", min(c, 5000), num_rows=5000).miss_ratio or c > 5000
    sizes = [10, 100, 1000]
    opt = opt_mrc(trace, sizes)
    assert all(opt.at(c) <= curve.at(c) for c in sizes)
    rows = curve.rows(max_points=50)
    assert 2 <= len(rows) <= 50 and all(r["source"] == "simulated" for r in rows)
    r = simulate(trace, "lru", 0.1)
    assert r.capacity == round(0.1 * r.num_rows) and r.rows()[0]["source"] == "simulated"
    assert r.hits + r.misses == r.requests and 0 < r.hit_rate < 1


def test_setassoc_conflicts_static_oracle_and_batches():
    trace = zipf_trace(4096, 40_000, alpha=0.9, seed=1)
    sa = simulate(trace, "setassoc", 256, ways=8)
    lru = simulate(trace, "lru", 256)
    assert sa.conflict_misses > 0 and sa.misses - sa.conflict_misses <= lru.misses
    st_ = simulate(trace, "static", 256)  # oracle: the 256 most frequent rows of the trace itself
    hot = hot_rows_from_profile(trace, 256, 4096)
    assert st_.hits == np.isin(trace, hot).sum() and st_.bypass == st_.misses
    profiled = simulate(trace, "static", 256, profile=trace[:5000])
    assert profiled.hits <= st_.hits
    b = simulate(trace, "lru", 256, batch_size=128)
    assert b.batch_size == 128 and b.hits + b.misses == b.requests
    assert simulate(trace, "setassoc", 0.1, ways=32).capacity % 32 == 0


def test_trace_ids_from_batches_and_streams():
    jb = JaggedBatch.from_lists({"a": [[0, 1], [2]], "b": [[3], []]})
    assert trace_ids(jb, "b").tolist() == [3]
    assert trace_ids(jb, table_rows={"a": 5, "b": 10}).tolist() == [0, 1, 2, 8]
    with pytest.raises(ValueError, match="table_rows is needed"):
        trace_ids(jb)
    with pytest.raises(ValueError, match="ids of table 'b' must be < 2"):
        trace_ids(jb, table_rows=[5, 2])
    from recnotebooks.data.synthetic import SyntheticCriteo

    cfg = DLRMConfig(
        name="tiny", num_dense=4, tables=(TableConfig("t0", 100), TableConfig("t1", 50)), embedding_dim=8,
        bottom_mlp=(8,), top_mlp=(8, 1),
    )  # fmt: skip
    stream = SyntheticCriteo(cfg, batch_size=16, num_batches=3)
    ids = trace_ids(stream)
    assert ids.max() < 150 and len(ids) == sum(b.sparse.values.numel() for b in stream)
    with pytest.raises(ValueError, match="batches must be given"):
        trace_ids(SyntheticCriteo(cfg, batch_size=16))
    assert len(trace_ids(SyntheticCriteo(cfg, batch_size=16), "t1", batches=2)) > 0
    assert trace_ids(torch.tensor([3, 1])).tolist() == [3, 1]


def test_bad_input():
    trace = np.array([0, 1, 2, 1], np.int64)
    with pytest.raises(ValueError, match="policy must be one of"):
        simulate(trace, "mru", 2)
    with pytest.raises(ValueError, match=r"capacity must be an int in \[1, 3\], got 0"):
        simulate(trace, "lru", 0)
    with pytest.raises(ValueError, match=r"capacity must be an int in \[1, 3\], got 5"):
        simulate(trace, "lru", 5)
    with pytest.raises(ValueError, match=r"capacity must be a finite number in \(0, 1\]"):
        simulate(trace, "lru", 1.5)
    with pytest.raises(ValueError, match="ways must divide capacity"):
        simulate(trace, "setassoc", 3, ways=2)
    with pytest.raises(ValueError, match=">= 0"):
        simulate(np.array([-1, 2]), "lru", 1)
    with pytest.raises(TypeError, match="integer array"):
        simulate(np.array([0.5, 2.0]), "lru", 1)
    with pytest.raises(ValueError, match=r"ids in \[0, 2\)"):
        simulate(trace, "lru", 1, num_rows=2)
    with pytest.raises(ValueError, match="batch_size must be 1 for policy 'opt'"):
        simulate(trace, "opt", 1, batch_size=2)
    with pytest.raises(ValueError, match="only used by policy 'static'"):
        simulate(trace, "lru", 1, profile=trace)
    with pytest.raises(ValueError, match="smallest size"):
        opt_mrc(trace, [2]).at(1)


def _cli(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_cache_sim_parser(p.add_subparsers(dest="command"))
    return p.parse_args(["cache-sim", *argv])


def test_cli_json(capsys):
    args = _cli(
        "--rows", "2000", "--ids", "20000", "--policy", "lru", "--capacity", "0.1", "--json", "--curve"
    )
    assert run_cache_sim(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["capacity"] == 200 and out["source"] == "simulated" and 0 < out["hit_rate"] < 1
    assert out["bytes_host_to_device"] == out["misses"] * 64 * 4 and "write-backs" in out["bytes_note"]
    assert 8 <= len(out["curve"]) <= 12
    assert all(c["opt_miss_ratio"] <= c["lru_miss_ratio"] for c in out["curve"])
    assert run_cache_sim(_cli("--rows", "500", "--ids", "3000", "--policy", "setassoc", "--capacity", "64",
                              "--ways", "8")) == 0  # fmt: skip
    assert "conflict misses" in capsys.readouterr().out
    assert run_cache_sim(_cli("--rows", "100", "--capacity", "200")) == 2
    assert "--capacity must be at most --rows=100" in capsys.readouterr().err
    assert run_cache_sim(_cli("--policy", "lru", "--ways", "8", "--rows", "100", "--ids", "10")) == 2
    with pytest.raises(SystemExit):
        _cli("--capacity", "0")


@settings(max_examples=30, deadline=None)
@given(trace=traces, slack=st.integers(1, 40))
def test_stack_distances_survive_compaction(trace, slack):
    """A time window just above the distinct rows compacts often; the histogram is unchanged."""
    from recnotebooks.cache import _sim_kernels as KS

    def run(window):
        return KS.lru_stack_distances(trace, np.full(31, -1, np.int32), np.full(window, -1, np.int32))

    (h_small, d_small), (h_big, d_big) = run(len(np.unique(trace)) + slack), run(len(trace) + 1)
    assert d_small == d_big and (h_small == h_big).all()


def test_zipf_trace_is_the_exact_inverse_cdf():
    """The guide-table search draws the ranks ``searchsorted`` would, for the same uniforms."""
    for rows, alpha in ((1, 1.05), (7, 0.0), (1000, 1.05), (50_000, 1.3)):
        rng = np.random.default_rng(5)
        cdf = np.cumsum(np.arange(1, rows + 1, dtype=np.float64) ** -alpha)
        cdf /= cdf[-1]
        u = rng.random(20_000)
        want = np.minimum(np.searchsorted(cdf, u, side="right"), rows - 1)
        assert (zipf_trace(rows, 20_000, alpha, seed=5, scatter=False) == want).all()
    assert (zipf_trace(100, 50, seed=2) == zipf_trace(100, 50, seed=2)).all()
