"""recnotebooks.distributed.twod on real gloo ranks: 2D sparse parallelism (tables sharded inside groups,
groups replicated, gradients summed over the replicas) gives the single-process collection's
outputs and, after SGD steps, its weights on every replica; bad arguments are refused up front."""

from __future__ import annotations

from typing import Any

import _shard_workers as W
import pytest
import torch

from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.distributed import launch
from recnotebooks.distributed.twod import TwoDShardedEmbeddingBagCollection
from recnotebooks.nn.embedding import EmbeddingBagCollection
from recnotebooks.nn.optim import make_sparse_optimizer
from recnotebooks.plan import Plan, column_wise, combine, data_parallel, row_wise, table_wise

pytestmark = pytest.mark.filterwarnings(
    "error::DeprecationWarning", "error::FutureWarning", "error::UserWarning"
)

TABLES = (TableConfig("t0", 10), TableConfig("t1", 7), TableConfig("t2", 5), TableConfig("t3", 6))
DIM, BATCH, STEPS, SEED, LR = 4, 8, 3, 7, 0.5
CONFIG = DLRMConfig(num_dense=1, tables=TABLES, embedding_dim=DIM, bottom_mlp=(DIM,), top_mlp=(1,))

#: plans over one group (of plan.world_size ranks)
PLANS = {
    "table_wise": table_wise(TABLES, 2, ranks=[0, 1, 1, 0]),
    "row_wise": row_wise(TABLES, 2),
    "mixed": combine(row_wise(["t0"], 2), column_wise(["t1"], 2), data_parallel(["t2"], 2),
                     table_wise(["t3"], 2, ranks=1)),
    "one_rank_groups": table_wise(TABLES, 1),
}  # fmt: skip
#: (plan, world)
CASES = [("table_wise", 4), ("row_wise", 4), ("mixed", 4), ("one_rank_groups", 2)]


def case(name: str) -> dict[str, Any]:
    plan = PLANS[name]
    return {"tables": TABLES, "dim": DIM, "plan": plan, "group_size": plan.world_size,
            "batch_size": BATCH, "steps": STEPS, "seed": SEED, "lr": LR}  # fmt: skip


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, int], list[dict[str, Any]]]:
    """One launch per world size: per case, every rank's values."""
    out = {}
    for world in sorted({w for _, w in CASES}):
        names = [n for n, w in CASES if w == world]
        result = launch(W.twod_cases, world, [case(n) for n in names], timeout_s=120)
        assert result.warnings == [[]] * world
        for k, n in enumerate(names):
            out[(n, world)] = [result.values[r][k] for r in range(world)]
    return out


def reference() -> dict[str, Any]:
    ebc = EmbeddingBagCollection(TABLES, DIM, seed=SEED)
    opt = make_sparse_optimizer("sgd", ebc, LR)
    outputs = []
    for step in range(STEPS):
        out = ebc(W.global_batch(TABLES, BATCH, SEED, step))
        (out * W.loss_weights(BATCH, len(TABLES), DIM, SEED, step)).sum().backward()
        outputs.append(out.detach())
        opt.step()
    return {"ebc": ebc, "outputs": outputs}


@pytest.mark.parametrize(("name", "world"), CASES)
def test_every_replica_equals_the_single_process_collection(runs: dict, name: str, world: int) -> None:
    values = runs[(name, world)]
    ref = reference()
    for step in range(STEPS):
        got = torch.cat([v["outputs"][step] for v in values])  # ranks in order: the global batch
        torch.testing.assert_close(got, ref["outputs"][step], atol=1e-5, rtol=1e-5)
    plan = PLANS[name]
    m = plan.world_size
    for r, v in enumerate(values):  # rank g*M + m holds in-group rank m's shards, updated by all samples
        for i, g in enumerate(plan.geometry_table(CONFIG)):
            if g["rank"] != r % m:
                continue
            block = ref["ebc"].table_weight(g["table"])[
                g["row_offset"] : g["row_offset"] + g["row_count"],
                g["col_offset"] : g["col_offset"] + g["col_count"],
            ]
            torch.testing.assert_close(v["weights"][i], block, atol=1e-5, rtol=1e-5)
    assert not torch.equal(ref["ebc"].weight, EmbeddingBagCollection(TABLES, DIM, seed=SEED).weight)


@pytest.mark.parametrize(("name", "world"), CASES)
def test_replica_sync_is_logged_as_all_reduce(runs: dict, name: str, world: int) -> None:
    for v in runs[(name, world)]:
        rows = [x for x in v["log"] if x["collective"] == "all_reduce"]
        assert rows and all(x["component"] == "all_reduce" for x in rows)
        # one replica all-reduce per step, plus the group's data-parallel one where the plan has it
        assert sum(x["calls"] for x in rows) == STEPS * (2 if name == "mixed" else 1)


def test_bad_arguments_are_refused_before_any_collective() -> None:
    plan = PLANS["table_wise"]
    with pytest.raises(ValueError, match="world_size=3 must be divisible by group_size"):
        TwoDShardedEmbeddingBagCollection(TABLES, DIM, plan, 0, 3, 2)
    with pytest.raises(ValueError, match="plan.world_size must equal group_size=4"):
        TwoDShardedEmbeddingBagCollection(TABLES, DIM, plan, 0, 4, 4)
    with pytest.raises(ValueError, match="group_size"):
        TwoDShardedEmbeddingBagCollection(TABLES, DIM, plan, 0, 4, 0)
    with pytest.raises(ValueError, match="rank"):
        TwoDShardedEmbeddingBagCollection(TABLES, DIM, plan, 4, 4, 2)
    with pytest.raises(ValueError, match="t3.*not in the plan"):
        TwoDShardedEmbeddingBagCollection(TABLES, DIM, Plan(2, plan.shards[:3]), 0, 4, 2)
    with pytest.raises(ValueError, match="pooling"):
        TwoDShardedEmbeddingBagCollection(TABLES, DIM, plan, 0, 4, 2, pooling="max")
    with pytest.raises(TypeError, match="plan"):
        TwoDShardedEmbeddingBagCollection(TABLES, DIM, "table_wise", 0, 4, 2)  # type: ignore[arg-type]
