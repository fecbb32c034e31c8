"""HybridParallelDLRM on real gloo ranks: for table-, row-, column-wise, data-parallel and mixed
plans, the global-batch losses, dense parameters and embedding weights after SGD steps equal the
single-process DLRM's on the global batch; overlap on and off agree; the phase table gains the
collectives' rows."""

from __future__ import annotations

from typing import Any

import _train_workers as W
import pytest
import torch

from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.distributed import launch
from recnotebooks.distributed.hybrid import local_samples
from recnotebooks.nn import DLRM
from recnotebooks.nn.optim import make_sparse_optimizer
from recnotebooks.plan import Plan, column_wise, combine, data_parallel, row_wise, table_wise
from recnotebooks.sparse import JaggedBatch

pytestmark = pytest.mark.filterwarnings(
    "error::DeprecationWarning", "error::FutureWarning", "error::UserWarning"
)

TABLES = (TableConfig("t0", 10), TableConfig("t1", 7), TableConfig("t2", 5), TableConfig("t3", 6))
DIM, BATCH, STEPS, SEED, DENSE_LR, SPARSE_LR = 4, 8, 3, 3, 0.3, 0.5
CONFIG = DLRMConfig(num_dense=3, tables=TABLES, embedding_dim=DIM, bottom_mlp=(8, DIM), top_mlp=(8, 1))


PLANS_2 = {
    "table_wise": table_wise(TABLES, 2, ranks=[0, 1, 1, 0]),
    "row_wise": row_wise(TABLES, 2),
    "column_wise": column_wise(TABLES, 2),
    "data_parallel": data_parallel(TABLES, 2),
    "mixed": combine(row_wise(["t0"], 2), column_wise(["t1"], 2), data_parallel(["t2"], 2),
                     table_wise(["t3"], 2, ranks=1)),
}  # fmt: skip
PLAN_4 = combine(row_wise(["t0"], 4), column_wise(["t1"], 4, ranks=[1, 3]), data_parallel(["t2"], 4),
                 table_wise(["t3"], 4, ranks=2))  # fmt: skip


def case(plan: Plan, overlap: bool = True) -> dict[str, Any]:
    return {"config": CONFIG, "plan": plan, "batch_size": BATCH, "steps": STEPS,
            "seed": SEED, "dense_lr": DENSE_LR, "sparse_lr": SPARSE_LR, "overlap": overlap}  # fmt: skip


def reference() -> dict[str, Any]:
    """The single-process DLRM on the global batches: mean loss, SGD dense and sparse."""
    model = DLRM(CONFIG, seed=SEED)
    dense_opt = torch.optim.SGD(model.dense_parameters(), lr=DENSE_LR)
    sparse_opt = make_sparse_optimizer("sgd", model.embeddings, SPARSE_LR)
    losses = []
    for step in range(STEPS):
        dense, sparse, labels = W.global_step_data(CONFIG, BATCH, SEED, step)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(dense, sparse), labels)
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        dense_opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    tables = {t.name: model.embeddings.table_weight(t.name).detach().clone() for t in TABLES}
    return {
        "losses": losses,
        "dense": [p.detach().clone() for p in model.dense_parameters()],
        "tables": tables,
    }


def check_equal(plan: Plan, per_rank: list[dict[str, Any]], ref: dict[str, Any]) -> None:
    geometry = plan.geometry(CONFIG)
    for out in per_rank:
        assert out["losses"] == pytest.approx(ref["losses"], abs=1e-5)
        for got, want in zip(out["dense"], ref["dense"], strict=True):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    seen = set()
    for out in per_rank:
        for i, w in out["weights"].items():
            s, g = plan.shards[i], geometry[i]
            torch.testing.assert_close(w, ref["tables"][s.table][g.row_slice, g.col_slice], atol=1e-5, rtol=0)
            seen.add(s.table)
    assert seen == {t.name for t in TABLES}


def test_two_ranks_every_plan_equals_single_process_and_overlap_changes_nothing() -> None:
    ref = reference()
    cases = [case(plan) for plan in PLANS_2.values()] + [case(PLANS_2["mixed"], overlap=False)]
    res = launch(W.train_hybrid_cases, 2, cases, timeout_s=120)
    assert res.warnings == [[], []]  # no deprecation or other warning on the ranks
    for k, c in enumerate(cases):
        check_equal(c["plan"], [v[k] for v in res.values], ref)
    # overlap on and off: identical numbers
    on, off = res.values[0][4], res.values[0][5]
    assert on["losses"] == off["losses"]
    # DDP's gradient all-reduce goes through the logged collective; the mixed plan also all-to-alls
    components = {r["component"] for r in res.values[0][4]["log"]}
    assert components == {"all_to_all", "all_reduce"}


def test_four_ranks_mixed_plan_equals_single_process() -> None:
    ref = reference()
    c = case(PLAN_4)
    res = launch(W.train_hybrid_cases, 4, [c], timeout_s=120)
    check_equal(c["plan"], [v[0] for v in res.values], ref)


def test_local_samples_slices_every_key() -> None:
    batch = JaggedBatch.from_lists({"a": [[1], [], [2, 3], [4]], "b": [[5, 6], [7], [], [8]]})
    part = local_samples(batch, 1, 3)
    assert part.to_lists() == {"a": [[], [2, 3]], "b": [[7], []]}
    with pytest.raises(ValueError, match="hi"):
        local_samples(batch, 2, 5)


def test_the_model_counts_the_all_reduce_calls_ddp_and_the_replicas_make() -> None:
    """Real DDP on 2 ranks: once DDP has rebuilt its buckets after the first step, each step logs
    one all-reduce per gradient bucket (MLPs of 1, 2 and 3 buckets under DDP's 1 MiB first and
    25 MiB later caps; a DCN's cross layers in 2) plus one for the data-parallel tables: what
    ``perf.traffic`` counts (``calls`` of its rows) and the cost model charges. (The first step
    sends one bucket.)"""
    from recnotebooks.perf.traffic import all_reduce_calls, collective_bytes, ddp_buckets

    small = TABLES[:2]
    configs = [
        DLRMConfig(num_dense=3, tables=small, embedding_dim=DIM, bottom_mlp=(8, DIM), top_mlp=(8, 1)),
        DLRMConfig(num_dense=3, tables=small, embedding_dim=DIM, bottom_mlp=(512, 512, DIM), top_mlp=(8, 1)),
        DLRMConfig(num_dense=3, tables=small, embedding_dim=DIM, bottom_mlp=(2048, 3200, 3200, DIM),
                   top_mlp=(8, 1)),
        # DCN: 3 MiB of cross layers (one bucket without them) between the towers
        DLRMConfig(num_dense=3, tables=small, embedding_dim=DIM, bottom_mlp=(1024,), top_mlp=(8, 1),
                   interaction="dcn", dcn_layers=3, dcn_rank=128),
    ]  # fmt: skip
    plans = [table_wise(["t0", "t1"], 2), combine(table_wise(["t0"], 2), data_parallel(["t1"], 2))]
    cases = [case(p) | {"config": cfg, "plan": p, "steps": n}
             for cfg in configs for p in plans for n in (1, 3)]  # fmt: skip
    assert [ddp_buckets(c["config"]) for c in cases[::4]] == [1, 2, 3, 2]
    assert ddp_buckets(configs[3].replace(interaction="cat", dcn_rank=512)) == 1
    res = launch(W.train_hybrid_cases, 2, cases, timeout_s=120)
    for k in range(0, len(cases), 2):
        c = cases[k]
        modeled = all_reduce_calls(collective_bytes(c["config"], c["plan"], BATCH / 2), 2)
        dp = int(any(s.sharding == "data_parallel" for s in c["plan"].shards))
        for r in range(2):
            one, three = (sum(x["calls"] for x in res.values[r][j]["log"] if x["component"] == "all_reduce")
                          for j in (k, k + 1))  # fmt: skip
            assert three - one == 2 * modeled[r] == 2 * (ddp_buckets(c["config"]) + dp), (k, r)
