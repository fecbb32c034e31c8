"""CachePolicy against plain-Python references: LRU (OrderedDict), LFU (both count variants),
set-associative LRU, static; admit vs replay; protection; state_dict; bad input."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.cache.policies import POLICIES, CachePolicy, set_of_rows


def ref_lru(trace, cap):
    d: OrderedDict[int, None] = OrderedDict()
    hits = []
    for x in trace:
        x = int(x)
        hits.append(x in d)
        if x in d:
            d.move_to_end(x)
        else:
            if len(d) >= cap:
                d.popitem(last=False)
            d[x] = None
    return np.array(hits)


def ref_lfu(trace, cap, keep_counts):
    """Evict the minimum (count, last access); keep_counts: counts survive eviction (FBGEMM)."""
    cached: dict[int, int] = {}  # row -> last access
    count: dict[int, int] = {}
    hits = []
    for t, x in enumerate(int(v) for v in trace):
        hit = x in cached
        hits.append(hit)
        if not hit and not keep_counts:
            count[x] = 0
        count[x] = count.get(x, 0) + 1
        if not hit and len(cached) >= cap:
            victim = min(cached, key=lambda r: (count[r], cached[r]))
            del cached[victim]
        cached[x] = t
    return np.array(hits)


def ref_setassoc(trace, cap, ways):
    sets = cap // ways
    where = set_of_rows(np.asarray(trace), sets)
    content: list[dict[int, int]] = [{} for _ in range(sets)]
    hits = []
    for t, x in enumerate(int(v) for v in trace):
        s = content[where[t]]
        hits.append(x in s)
        if x not in s and len(s) >= ways:
            del s[min(s, key=s.get)]
        s[x] = t
    return np.array(hits)


traces = st.lists(st.integers(0, 40), min_size=1, max_size=300).map(lambda v: np.array(v, np.int64))


@settings(max_examples=60, deadline=None)
@given(trace=traces, cap=st.integers(1, 41))
def test_lru_and_lfu_match_references(trace, cap):
    for policy, ref in (
        ("lru", ref_lru(trace, cap)),
        ("lfu", ref_lfu(trace, cap, True)),
        ("lfu_cached", ref_lfu(trace, cap, False)),
    ):
        hit = np.zeros(len(trace), np.bool_)
        c = CachePolicy(policy, 41, cap).replay(trace, hit_out=hit)
        assert (hit == ref).all(), policy
        assert c.hits == ref.sum() and c.hits + c.misses == len(trace)


@settings(max_examples=40, deadline=None)
@given(trace=traces, sets=st.integers(1, 5), ways=st.integers(1, 8))
def test_setassoc_matches_reference(trace, sets, ways):
    cap = min(sets * ways, 41 // ways * ways)
    hit = np.zeros(len(trace), np.bool_)
    CachePolicy("setassoc", 41, cap, ways=ways).replay(trace, hit_out=hit)
    assert (hit == ref_setassoc(trace, cap, ways)).all()


@settings(max_examples=30, deadline=None)
@given(trace=traces, cap=st.integers(8, 40), policy=st.sampled_from(POLICIES))
def test_admit_one_by_one_equals_replay(trace, cap, policy):
    """The request-by-request fast paths and the batch kernel are the same policy."""
    kw = {"hot_rows": np.arange(0, 40, 5)} if policy == "static" else {"ways": 4}
    cap = cap // 4 * 4
    a, b = CachePolicy(policy, 41, cap, **kw), CachePolicy(policy, 41, cap, **kw)
    hit = np.zeros(len(trace), np.bool_)
    a.replay(trace, hit_out=hit)
    for t, x in enumerate(trace):
        adm = b.admit(np.array([x]), t, t)
        assert adm.hit[0] == hit[t]
    assert (a.slot_of == b.slot_of).all() and (a.row_of == b.row_of).all()


@settings(max_examples=30, deadline=None)
@given(trace=traces, k=st.integers(1, 8), policy=st.sampled_from(("lru", "lfu", "lfu_cached", "setassoc")))
def test_batches_protect_their_rows_and_count_repeats_as_hits(trace, k, policy):
    p = CachePolicy(policy, 41, 8, ways=2)
    for epoch, lo in enumerate(range(0, len(trace), k)):
        chunk = trace[lo : lo + k]
        rows = np.unique(chunk)  # ascending, as replay and the cached collection admit a batch
        before = p.slot_of[rows].copy()
        adm = p.admit(rows, epoch, epoch)
        assert (adm.hit == (before >= 0)).all()
        kept = np.setdiff1d(np.arange(len(rows)), adm.bypass_idx)
        assert (p.slot_of[rows[kept]] == adm.slots[kept]).all()  # every admitted row is resident
        assert (p.row_of[adm.slots[kept]] == rows[kept]).all()
        assert not np.isin(adm.victims, rows).any()  # no row of the batch was evicted
    q = CachePolicy(policy, 41, 8, ways=2)
    c = q.replay(trace, batch_size=k)
    assert (q.row_of == p.row_of).all()
    distinct = sum(len(np.unique(trace[lo : lo + k])) for lo in range(0, len(trace), k))
    assert c.misses <= distinct and c.hits + c.misses == len(trace)


def test_lru_batch_semantics_by_hand():
    p = CachePolicy("lru", 10, 3)
    p.admit(np.array([1, 2, 3]), 0, 0)
    adm = p.admit(np.array([3, 4]), 1, 1)  # 3 hits and is stamped first, so 1 (oldest) goes
    assert adm.hit.tolist() == [True, False] and adm.victims.tolist() == [1]
    assert p.replay(np.array([5, 5, 6, 5], np.int64), batch_size=4).hits == 2  # repeats hit


def test_protection_keeps_the_previous_batch():
    """protect_from = epoch - 1: the batch still training (epoch - 1) is never a victim."""
    for policy in ("lru", "lfu", "lfu_cached"):
        p = CachePolicy(policy, 100, 4)
        p.admit(np.array([0, 1]), 0, 0)
        p.admit(np.array([2, 3]), 1, 0)
        adm = p.admit(np.array([4, 5]), 2, 1)  # 0 and 1 (epoch 0) may go, 2 and 3 may not
        assert sorted(adm.victims.tolist()) == [0, 1], policy
        with pytest.raises(ValueError, match=r"capacity >= 5"):
            p.admit(np.array([6]), 3, 1)  # 2..5 protected (epochs 1, 2) + 1 new row = 5 slots
        assert sorted(p.row_of.tolist()) == [2, 3, 4, 5]  # nothing changed by the refused call
        with pytest.raises(ValueError, match=r"capacity >= 6"):
            p.admit(np.arange(6, 12), 3, 3)
    s = CachePolicy("setassoc", 100, 2, ways=2)
    s.admit(np.array([0, 1]), 0, 0)
    adm = s.admit(np.array([2]), 1, 0)  # the only set is full of protected rows: bypass
    assert adm.bypass_idx.tolist() == [0] and adm.slots.tolist() == [-1]


def test_static_pins_hot_rows():
    p = CachePolicy("static", 50, 4, hot_rows=np.array([7, 3]))
    adm = p.admit(np.array([3, 8, 7]), 0, 0)
    assert adm.hit.tolist() == [True, False, True] and adm.bypass_idx.tolist() == [1]
    assert p.replay(np.array([8, 8, 3], np.int64)).bypass == 2 and p.slot_of[8] == -1


@pytest.mark.parametrize("policy", POLICIES)
def test_state_dict_round_trip(policy, tmp_path):
    kw = {"hot_rows": np.arange(8)} if policy == "static" else {"ways": 4}
    trace = np.random.default_rng(0).integers(0, 64, 500)
    a = CachePolicy(policy, 64, 16, **kw)
    a.replay(trace[:250])
    torch.save(a.state_dict(), tmp_path / "p.pt")
    b = CachePolicy(policy, 64, 16, **kw)
    b.load_state_dict(torch.load(tmp_path / "p.pt", weights_only=True))
    ha, hb = np.zeros(250, np.bool_), np.zeros(250, np.bool_)
    a.replay(trace[250:], hit_out=ha)
    b.replay(trace[250:], hit_out=hb)
    assert (ha == hb).all()
    with pytest.raises(ValueError, match="capacity"):
        CachePolicy(policy, 64, 32, **kw).load_state_dict(a.state_dict())


def test_bad_input():
    with pytest.raises(ValueError, match="policy must be one of"):
        CachePolicy("fifo", 10, 2)
    with pytest.raises(ValueError, match=r"capacity must be an int in \[1, 10\], got 0"):
        CachePolicy("lru", 10, 0)
    with pytest.raises(ValueError, match=r"capacity must be an int in \[1, 10\], got 11"):
        CachePolicy("lru", 10, 11)
    with pytest.raises(ValueError, match="ways must divide capacity"):
        CachePolicy("setassoc", 100, 10, ways=4)
    with pytest.raises(ValueError, match="hot_rows is required"):
        CachePolicy("static", 10, 2)
    with pytest.raises(ValueError, match="at most capacity"):
        CachePolicy("static", 10, 2, hot_rows=np.arange(3))
    p = CachePolicy("lru", 10, 4)
    with pytest.raises(ValueError, match=r"ids in \[0, 10\), got 12"):
        p.admit(np.array([1, 12]), 0, 0)
    with pytest.raises(ValueError, match=">= 0"):
        p.replay(np.array([-1, 2]))
    with pytest.raises(TypeError, match="integer array"):
        p.replay(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="distinct"):
        p.admit(np.array([1, 2, 1]), 0, 0)
    assert p.resident == 0  # the refused batch changed nothing
    p.admit(np.array([1]), 5, 5)
    with pytest.raises(ValueError, match="epoch must be an int >= 5"):
        p.admit(np.array([2]), 4, 4)
    with pytest.raises(ValueError, match="protect_from must be an int <= 6"):
        p.admit(np.array([2]), 6, 7)


@settings(max_examples=30, deadline=None)
@given(trace=traces, cut=st.integers(0, 300), policy=st.sampled_from(POLICIES))
def test_replay_then_admit_continues_the_same_policy(trace, cut, policy):
    """A replay leaves the state a batch-by-batch run leaves (LRU: the list rebuilt from its
    queue; LFU: the buckets), so admitting after a replay continues the same policy."""
    kw = {"hot_rows": np.arange(0, 40, 4)} if policy == "static" else {"ways": 4}
    a, b = CachePolicy(policy, 41, 12, **kw), CachePolicy(policy, 41, 12, **kw)
    cut = min(cut, len(trace))
    hit_a, hit_b = np.zeros(len(trace), np.bool_), np.zeros(cut, np.bool_)
    a.replay(trace, hit_out=hit_a)
    b.replay(trace[:cut], hit_out=hit_b)
    after = [b.admit(np.array([x]), cut + t, cut + t).hit[0] for t, x in enumerate(trace[cut:])]
    assert (np.concatenate([hit_b, np.array(after, np.bool_)]) == hit_a).all()
    assert (a.slot_of == b.slot_of).all() and (a.row_of == b.row_of).all()
