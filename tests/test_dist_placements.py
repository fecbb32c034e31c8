"""Placements the sharded engine executes: a plan with tables behind device caches trains on 2 and
4 real gloo ranks exactly like one process with every row in memory (outputs, weights, row-wise
and exact Adagrad's accumulators), each rank reports what its caches did, and a placement the engine cannot
run here ("host", "remote", a cache it cannot size) is refused before any process starts."""

from __future__ import annotations

from typing import Any

import _shard_workers as W
import pytest
import torch

from recnotebooks import preset
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.distributed import launch, training
from recnotebooks.distributed.sharded import ShardedEmbeddingBagCollection, check_placements
from recnotebooks.nn.embedding import EmbeddingBagCollection
from recnotebooks.nn.optim import make_sparse_optimizer
from recnotebooks.plan import Plan, TableShard

pytestmark = pytest.mark.filterwarnings(
    "error::DeprecationWarning", "error::FutureWarning", "error::UserWarning"
)

TABLES = (TableConfig("t0", 80), TableConfig("t1", 40), TableConfig("t2", 30), TableConfig("t3", 20))
DIM, BATCH, STEPS, SEED, LR = 4, 8, 4, 3, 0.5
#: what the plan geometry reads
CONFIG = DLRMConfig(num_dense=1, tables=TABLES, embedding_dim=DIM, bottom_mlp=(DIM,), top_mlp=(1,))
#: at most 3 ids per bag: a step looks up at most this many distinct rows of a table (LRU, LFU
#: caches keep every row of the step resident, so they need at least this many slots)
STEP_ROWS = 3 * BATCH


def cached(table: str, rank: int, policy: str, rows: int, **kw: Any) -> TableShard:
    return TableShard(table, rank, placement="cache", cache_rows=rows, cache_policy=policy, **kw)


def rw_cached(table: str, ranks: list[int], policy: str, rows: int, ways: int = 32) -> list[TableShard]:
    return [cached(table, r, policy, rows, sharding="row_wise", row_fraction=1 / len(ranks), cache_ways=ways)
            for r in ranks]  # fmt: skip


PLANS = {
    # row-wise LRU, set-associative, static (profiled) caches and an HBM table; row-wise Adagrad
    "adagrad_2": Plan(2, (*rw_cached("t0", [0, 1], "lru", STEP_ROWS),
                          cached("t1", 1, "setassoc", 16, cache_ways=4), cached("t2", 0, "static", 8),
                          TableShard("t3", 1))),
    # column-wise LFU shards (SGD: Adagrad's accumulator is per column-wise shard, as in TorchRec)
    "sgd_cw_2": Plan(2, (*rw_cached("t0", [0, 1], "lru", STEP_ROWS),
                         cached("t1", 0, "lfu", STEP_ROWS, sharding="column_wise", col_fraction=0.5),
                         cached("t1", 1, "lfu", STEP_ROWS, sharding="column_wise", col_fraction=0.5),
                         *[TableShard("t2", r, "data_parallel") for r in range(2)],
                         cached("t3", 1, "setassoc", 8, cache_ways=4))),
    # the same with exact Adagrad: an accumulator per element, so column-wise shards are exact too
    "exact_cw_2": Plan(2, (*rw_cached("t0", [0, 1], "lru", STEP_ROWS),
                           cached("t1", 0, "lfu", STEP_ROWS, sharding="column_wise", col_fraction=0.5),
                           cached("t1", 1, "lfu", STEP_ROWS, sharding="column_wise", col_fraction=0.5),
                           *[TableShard("t2", r, "data_parallel") for r in range(2)],
                           cached("t3", 1, "setassoc", 8, cache_ways=4))),
    "adagrad_4": Plan(4, (*rw_cached("t0", [0, 1, 2, 3], "setassoc", 8, ways=4),
                          cached("t1", 2, "lru", STEP_ROWS), cached("t2", 3, "static", 8),
                          *[TableShard("t3", r, "data_parallel") for r in range(4)])),
}  # fmt: skip
CASES = {"adagrad_2": ("mean", "rowwise_adagrad"), "sgd_cw_2": ("sum", "sgd"),
         "exact_cw_2": ("mean", "adagrad"), "adagrad_4": ("sum", "rowwise_adagrad")}  # fmt: skip


def case(name: str) -> dict[str, Any]:
    pooling, optimizer = CASES[name]
    return {"tables": TABLES, "dim": DIM, "plan": PLANS[name], "batch_size": BATCH, "steps": STEPS,
            "seed": SEED, "lr": LR, "pooling": pooling, "optimizer": optimizer,
            "profile_steps": 2}  # fmt: skip


def reference(pooling: str, optimizer: str) -> dict[str, Any]:
    """One process, no cache: every row in memory, the global batches, same loss and optimizer."""
    ebc = EmbeddingBagCollection(TABLES, DIM, pooling=pooling, seed=SEED)
    opt = make_sparse_optimizer(optimizer, ebc, LR)
    outputs = []
    for step in range(STEPS):
        out = ebc(W.global_batch(TABLES, BATCH, SEED, step))
        (out * W.loss_weights(BATCH, len(TABLES), DIM, SEED, step)).sum().backward()
        outputs.append(out.detach())
        opt.step()
    with torch.no_grad():
        after = ebc(W.global_batch(TABLES, BATCH, SEED, STEPS))
    return {"ebc": ebc, "outputs": outputs, "after": after, "momentum": getattr(opt, "momentum", None)}


@pytest.fixture(scope="module")
def runs() -> dict[str, list[dict[str, Any]]]:
    """One 2-rank launch (two plans), one 4-rank launch: per plan, every rank's values."""
    two = launch(W.train_cases, 2, [case("adagrad_2"), case("sgd_cw_2"), case("exact_cw_2")], timeout_s=180)
    four = launch(W.train_cases, 4, [case("adagrad_4")], timeout_s=180)
    assert two.warnings == [[]] * 2 and four.warnings == [[]] * 4
    return {"adagrad_2": [v[0] for v in two.values], "sgd_cw_2": [v[1] for v in two.values],
            "exact_cw_2": [v[2] for v in two.values], "adagrad_4": [v[0] for v in four.values]}  # fmt: skip


@pytest.mark.parametrize("name", list(PLANS))
def test_a_plan_with_caches_trains_like_one_process_without(runs: dict, name: str) -> None:
    values, plan = runs[name], PLANS[name]
    ref = reference(*CASES[name])
    for step in range(STEPS):
        got = torch.cat([v["outputs"][step] for v in values])
        torch.testing.assert_close(got, ref["outputs"][step], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat([v["after"] for v in values]), ref["after"], atol=1e-5, rtol=1e-5)
    for i, g in enumerate(plan.geometry_table(CONFIG)):
        rows = slice(g["row_offset"], g["row_offset"] + g["row_count"])
        cols = slice(g["col_offset"], g["col_offset"] + g["col_count"])
        got = runs[name][g["rank"]]
        torch.testing.assert_close(got["weights"][i], ref["ebc"].table_weight(g["table"])[rows, cols],
                                   atol=1e-5, rtol=1e-5)  # fmt: skip
        if ref["momentum"] is not None:  # the accumulator travelled with its row through the cache
            k = ref["ebc"].keys.index(g["table"])
            first = int(ref["ebc"].row_offsets[k])
            state = ref["momentum"][first + rows.start : first + rows.stop]
            if state.dim() == 2:  # exact Adagrad's: the shard's columns of it
                state = state[:, cols]
            torch.testing.assert_close(got["momentum"][i], state, atol=1e-5, rtol=1e-5)
    assert not torch.equal(ref["ebc"].weight, EmbeddingBagCollection(TABLES, DIM, seed=SEED).weight)


@pytest.mark.parametrize("name", list(PLANS))
def test_every_rank_reports_what_its_caches_did(runs: dict, name: str) -> None:
    plan = PLANS[name]
    want = sorted((s.rank, i) for i, s in enumerate(plan.shards) if s.placement == "cache")
    rows = [r for v in runs[name] for r in v["cache"]]
    assert sorted((r["rank"], r["shard"]) for r in rows) == want
    geo = plan.geometry(CONFIG)
    for r in rows:
        s, g = plan.shards[r["shard"]], geo[r["shard"]]
        assert r["source"] == "measured" and r["table"] == s.table and r["policy"] == s.cache_policy
        assert r["hits"] + r["misses"] == r["unique"] > 0 and r["misses"] > 0
        assert 0 <= r["hit_rate"] <= 1 and r["slots"] <= min(s.cache_rows, g.row_count)  # type: ignore[type-var]
        state = {"sgd": 0, "rowwise_adagrad": 4, "adagrad": 4 * g.col_count}[CASES[name][1]]
        row_bytes = g.col_count * 4 + state  # the row and its accumulator(s)
        if s.cache_policy in ("lru", "lfu"):  # every miss is copied in once, every write-back out once
            assert r["bytes_h2d"] == r["misses"] * row_bytes
        assert r["bytes_d2h"] == r["writebacks"] * row_bytes
    # a cache smaller than its rows evicted (and wrote back) some of them
    small = [r for r in rows if r["policy"] == "setassoc"]
    assert small and any(r["evictions"] > 0 and r["writebacks"] > 0 for r in small)


# ----- refused before any process starts ---------------------------------------------------------
@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process was started")

    monkeypatch.setattr(training, "launch", refuse)


TINY = preset("tiny")


def tiny_plan(**placed: Any) -> Plan:
    """Every tiny table on rank 0 or 1 (table_wise, hbm), the first one with ``placed``."""
    names = TINY.table_names
    return Plan(
        2, (TableShard(names[0], 0, **placed), *[TableShard(t, k % 2) for k, t in enumerate(names)][1:])
    )


@pytest.mark.parametrize(
    ("placed", "words"),
    [({"placement": "remote"}, ["'remote'", "allowed: ['hbm', 'cache']"]),
     ({"placement": "host"}, ["'host'", "allowed: ['hbm', 'cache']", "UVM"]),
     ({"placement": "cache", "cache_hit_rate": 0.9}, ["cache_rows", "0.9"]),
     ({"placement": "cache", "cache_rows": 0}, ["cache_rows=0", "no slot"]),
     ({"placement": "cache", "cache_rows": 2, "cache_policy": "setassoc", "cache_ways": 4},
      ["whole sets", "cache_ways=4"])],
)  # fmt: skip
def test_a_placement_the_engine_cannot_run_is_refused_before_launch(
    no_launch: None, placed: dict, words: list[str]
) -> None:
    plan = tiny_plan(**placed)
    table = repr(TINY.table_names[0])
    for call in (lambda: training.train_local(TINY, plan, 2, 2, 64),
                 lambda: training.run_plans_local(TINY, [plan], 2, 2, 64)):  # fmt: skip
        with pytest.raises(ValueError, match="placement|cache_rows") as e:
            call()
        assert table in str(e.value) and all(w in str(e.value) for w in words), str(e.value)


def test_a_cached_replica_and_a_static_cache_without_profile_are_refused(no_launch: None) -> None:
    names = TINY.table_names
    dp = Plan(2, (*[TableShard(names[0], r, "data_parallel", "cache", cache_rows=4) for r in range(2)],
                  *[TableShard(t, 0) for t in names[1:]]))  # fmt: skip
    with pytest.raises(ValueError, match=f"{names[0]!r} is data_parallel with placement 'cache'"):
        training.train_local(TINY, dp, 2, 2, 64)
    static = Plan(1, tuple(TableShard(t, 0, placement="cache", cache_rows=4) for t in names))
    with pytest.raises(ValueError, match="profile"):
        ShardedEmbeddingBagCollection(TINY.tables, TINY.embedding_dim, static, 0, 1)


def test_every_placement_is_either_executed_or_refused() -> None:
    """No placement of plan.PLACEMENTS is silently trained as another."""
    from recnotebooks.plan import PLACEMENTS

    for p in PLACEMENTS:
        extra = {"cache_rows": 4, "cache_policy": "lru"} if p == "cache" else {}
        plan = Plan(1, tuple(TableShard(t, 0, placement=p, **extra) for t in TINY.table_names))
        if p in ("hbm", "cache"):
            check_placements(plan, plan.geometry(TINY))
        else:
            with pytest.raises(ValueError, match=repr(p)):
                check_placements(plan)
