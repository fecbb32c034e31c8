"""recnotebooks.distributed.sharded on real gloo ranks: table-wise, row-wise, column-wise, data-parallel
and mixed plans give the single-process EmbeddingBagCollection's outputs and, after sparse
optimizer steps, its weights; the comm log records the bytes; bad plans are refused up front."""

from __future__ import annotations

from typing import Any

import _shard_workers as W
import pytest
import torch

from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.distributed import launch
from recnotebooks.distributed.sharded import ShardedEmbeddingBagCollection
from recnotebooks.nn import embedding as embedding_module
from recnotebooks.nn.embedding import EmbeddingBagCollection
from recnotebooks.nn.optim import make_sparse_optimizer
from recnotebooks.plan import Plan, TableShard, column_wise, combine, data_parallel, row_wise, table_wise
from recnotebooks.sparse import JaggedBatch

pytestmark = pytest.mark.filterwarnings(
    "error::DeprecationWarning", "error::FutureWarning", "error::UserWarning"
)

TABLES = (TableConfig("t0", 10), TableConfig("t1", 7), TableConfig("t2", 5), TableConfig("t3", 6))
DIM, BATCH, STEPS, SEED, LR = 4, 8, 3, 5, 0.5
#: what the plan geometry reads
CONFIG = DLRMConfig(num_dense=1, tables=TABLES, embedding_dim=DIM, bottom_mlp=(DIM,), top_mlp=(1,))


PLANS_2 = {
    "table_wise": table_wise(TABLES, 2, ranks=[0, 1, 1, 0]),
    "table_wise_one_rank": table_wise(TABLES, 2, ranks=0),  # rank 1 holds nothing
    "row_wise": row_wise(TABLES, 2),
    "column_wise": combine(column_wise(["t0"], 2, fractions=[0.75, 0.25]),
                           column_wise(["t1"], 2, ranks=[1, 0]),
                           column_wise(["t2", "t3"], 2, fractions=[0.75, 0.25])),
    "data_parallel": data_parallel(TABLES, 2),
    "mixed": combine(row_wise(["t0"], 2), column_wise(["t1"], 2), data_parallel(["t2"], 2),
                     table_wise(["t3"], 2, ranks=1)),
    # no column-wise table: row-wise Adagrad's accumulator is the mean over a row's columns, which
    # a column-wise shard takes over its own columns only (as in TorchRec), so it differs there
    "mixed_no_cw": combine(row_wise(["t0"], 2), table_wise(["t1"], 2, ranks=0), data_parallel(["t2"], 2),
                           table_wise(["t3"], 2, ranks=1)),
}  # fmt: skip
PLAN_4 = combine(row_wise(["t0"], 4), column_wise(["t1"], 4, ranks=[1, 3]), data_parallel(["t2"], 4),
                 table_wise(["t3"], 4, ranks=2))  # fmt: skip
#: (plan name, pooling, optimizer) of the 2-rank launch
CASES_2 = [(name, "sum", "sgd") for name in PLANS_2 if name != "mixed_no_cw"] + [
    ("mixed", "mean", "sgd"),
    ("mixed_no_cw", "mean", "rowwise_adagrad"),
    ("mixed", "mean", "adagrad"),  # exact Adagrad: an accumulator per element, column-wise shards exact
]


def case(plan: Plan, pooling: str, optimizer: str) -> dict[str, Any]:
    return {"tables": TABLES, "dim": DIM, "plan": plan, "batch_size": BATCH,
            "steps": STEPS, "seed": SEED, "lr": LR, "pooling": pooling, "optimizer": optimizer}  # fmt: skip


def reference(pooling: str, optimizer: str) -> dict[str, Any]:
    """The single-process collection on the global batches, same loss and optimizer."""
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
def runs() -> dict[tuple[int, str, str, str], tuple[Plan, list[dict[str, Any]]]]:
    """One 2-rank launch for every 2-rank case, one 4-rank launch: per case, plan and rank values."""
    out = {}
    cases = [case(PLANS_2[n], p, o) for n, p, o in CASES_2]
    result = launch(W.train_cases, 2, cases, timeout_s=120)
    assert result.warnings == [[], []]
    for k, (key, c) in enumerate(zip(CASES_2, cases, strict=True)):
        out[(2, *key)] = (c["plan"], [result.values[r][k] for r in range(2)])
    c4 = case(PLAN_4, "sum", "sgd")
    result = launch(W.train_cases, 4, [c4], timeout_s=120)
    assert result.warnings == [[]] * 4
    out[(4, "mixed", "sum", "sgd")] = (c4["plan"], [v[0] for v in result.values])
    return out


ALL = [(2, *k) for k in CASES_2] + [(4, "mixed", "sum", "sgd")]


@pytest.mark.parametrize("key", ALL, ids=lambda k: "-".join(map(str, k)))
def test_outputs_and_updated_weights_equal_the_single_process_collection(runs: dict, key: tuple) -> None:
    world, _, pooling, optimizer = key
    plan, values = runs[key]
    ref = reference(pooling, optimizer)
    for step in range(STEPS):
        got = torch.cat([v["outputs"][step] for v in values])
        torch.testing.assert_close(got, ref["outputs"][step], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat([v["after"] for v in values]), ref["after"], atol=1e-5, rtol=1e-5)
    geometry = plan.geometry_table(CONFIG)
    for i, g in enumerate(geometry):
        r = g["rank"]
        block = ref["ebc"].table_weight(g["table"])[
            g["row_offset"] : g["row_offset"] + g["row_count"],
            g["col_offset"] : g["col_offset"] + g["col_count"],
        ]
        torch.testing.assert_close(values[r]["weights"][i], block, atol=1e-5, rtol=1e-5)
        if optimizer == "adagrad":  # exact Adagrad's accumulators: the block's elements, every shard
            k = ref["ebc"].keys.index(g["table"])
            first = int(ref["ebc"].row_offsets[k]) + g["row_offset"]
            state = ref["momentum"][
                first : first + g["row_count"], g["col_offset"] : g["col_offset"] + g["col_count"]
            ]
            torch.testing.assert_close(values[r]["momentum"][i], state, atol=1e-5, rtol=1e-5)
    # the weights did change (the comparison is not of two untouched inits)
    assert not torch.equal(ref["ebc"].weight, EmbeddingBagCollection(TABLES, DIM, seed=SEED).weight)


def bytes_of(rows: list[dict], collective: str, direction: str) -> tuple[int, int]:
    rs = [r for r in rows if r["collective"] == collective and r["direction"] == direction]
    return sum(r["bytes_sent"] for r in rs), sum(r["bytes_received"] for r in rs)


@pytest.mark.parametrize("key", ALL, ids=lambda k: "-".join(map(str, k)))
def test_comm_log_records_exact_bytes(runs: dict, key: tuple) -> None:
    world, name, _, _ = key
    plan, values = runs[key]
    b = BATCH // world
    geo = plan.geometry(CONFIG)
    mp = [(i, s) for i, s in enumerate(plan.shards) if s.sharding != "data_parallel"]
    widths = [sum(geo[i].col_count for i, s in mp if s.rank == j) for j in range(world)]
    dp_rows = sum(t.num_rows for t in TABLES if any(s.table == t.name and s.sharding == "data_parallel"
                                                    for s in plan.shards))  # fmt: skip
    for r, v in enumerate(values):
        rows = v["log"]
        # backward all-to-all: the gradients of this rank's samples go to every owner (float32)
        sent, received = bytes_of(rows, "all_to_all", "backward")
        others = sum(widths) - widths[r]
        assert (sent, received) == (STEPS * b * others * 4, STEPS * (world - 1) * b * widths[r] * 4)
        fwd_sent, _ = bytes_of(rows, "all_to_all", "forward")
        assert fwd_sent >= STEPS * (world - 1) * b * widths[r] * 4  # pooled vectors, plus ids and lengths
        if not any(widths):
            assert not [x for x in rows if x["collective"] == "all_to_all"]  # data parallel moves no ids
        # data-parallel gradient sync: a dense all-reduce of the replica per step
        n = dp_rows * DIM
        mine = n // world + (1 if r < n % world else 0)
        expected = STEPS * (n - mine + (world - 1) * mine) * 4
        assert bytes_of(rows, "all_reduce", "forward") == (expected, expected)
        assert all(x["component"] == x["collective"] for x in rows)


def test_local_collections_group_shards_by_kind_and_width(runs: dict) -> None:
    _, values = runs[(2, "column_wise", "sum", "sgd")]
    assert [v["collections"] for v in values] == [2, 2]  # widths 3 and 2 on rank 0; 1 and 2 on rank 1
    _, values = runs[(2, "table_wise_one_rank", "sum", "sgd")]
    assert [v["collections"] for v in values] == [1, 0]


@pytest.mark.parametrize("name", ["mixed", "column_wise", "row_wise", "table_wise"])
def test_shards_equal_the_single_process_weights_drawn_chunk_by_chunk(monkeypatch, name: str) -> None:
    """Each rank copies its blocks out of the initial weight as it is drawn, never holding all of it:
    with chunks of 3 rows, cutting across tables and shards, the shards are still exactly the
    single-process collection's blocks."""
    monkeypatch.setattr(embedding_module, "INIT_CHUNK_ROWS", 3)
    full = EmbeddingBagCollection(TABLES, DIM, seed=SEED)
    seen = 0
    for rank in (0, 1):
        model = ShardedEmbeddingBagCollection(TABLES, DIM, PLANS_2[name], rank, 2, seed=SEED)
        for shard, weight in model.shard_weights():
            g = shard.geometry
            assert torch.equal(weight, full.table_weight(shard.table)[g.row_slice, g.col_slice])
            seen += weight.numel()
    assert seen >= sum(t.num_rows * DIM for t in TABLES)  # every weight is somewhere (replicas twice)


def test_bad_plans_and_inputs_are_refused_before_any_communication() -> None:
    good = PLANS_2["table_wise"]
    with pytest.raises(ValueError, match="t3.*not in the plan"):
        ShardedEmbeddingBagCollection(TABLES, DIM, table_wise(["t0", "t1", "t2"], 2, ranks=[0, 1, 0]), 0, 2)
    with pytest.raises(ValueError, match="must add up to 1"):
        bad = Plan(2, (TableShard("t0", 0, "row_wise"), TableShard("t0", 1, "row_wise", row_fraction=0.5),
                       *table_wise(["t1", "t2", "t3"], 2, ranks=0).shards))  # fmt: skip
        ShardedEmbeddingBagCollection(TABLES, DIM, bad, 0, 2)
    with pytest.raises(ValueError, match="world_size"):
        ShardedEmbeddingBagCollection(TABLES, DIM, good, 0, 4)
    with pytest.raises(ValueError, match="rank"):
        ShardedEmbeddingBagCollection(TABLES, DIM, good, 2, 2)
    with pytest.raises(ValueError, match="pooling"):
        ShardedEmbeddingBagCollection(TABLES, DIM, good, 0, 2, pooling="max")
    with pytest.raises(TypeError, match="plan"):
        ShardedEmbeddingBagCollection(TABLES, DIM, "table_wise", 0, 2)  # type: ignore[arg-type]
    model = ShardedEmbeddingBagCollection(TABLES, DIM, good, 0, 2)
    with pytest.raises(ValueError, match="batch.keys"):
        model(JaggedBatch.from_lists({"t0": [[1]], "t1": [[1]]}))
    with pytest.raises(ValueError, match="ids of table 't0' must be in 0..9"):
        model(JaggedBatch.from_lists({t.name: [[t.num_rows]] for t in TABLES}))
    weighted = JaggedBatch.from_lists(
        {t.name: [[0]] for t in TABLES}, weights={t.name: [[1.0]] for t in TABLES}
    )
    with pytest.raises(ValueError, match="batch.weights"):
        model(weighted)
    with pytest.raises(TypeError, match="batch"):
        model({"t0": [[1]]})  # type: ignore[arg-type]
