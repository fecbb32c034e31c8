"""The cost model's operator counts of our sharded step equal what the step launches.

``perf.components.op_count`` prices a sharded step with constants fitted to counts of our own
HybridParallelDLRM step (benchmarks/our_step_ops.py). Here the counter runs again on one small
case per scheme (2 gloo ranks, 4 tables) and each modeled count must match it, so the
constants can be checked whenever the step changes.
"""

from __future__ import annotations

import pytest
from _train_workers import count_step_ops, single_step_ops

from recnotebooks.config import architecture_config, preset
from recnotebooks.distributed import launch
from recnotebooks.perf.components import A2A_CALLS_PER_STEP, op_count, sharded_op_terms
from recnotebooks.plan import Plan, named_plan, round_robin, table_wise

OURS = "recnotebooks"
SCHEMES = ("table_wise", "row_wise", "column_wise", "data_parallel", "mixed")
CONFIG = architecture_config(num_tables=4, rows_per_table=1000, embedding_dim=16, pooling=1, bottom_width=64,
                             bottom_depth=2, top_width=32, top_depth=2)  # fmt: skip


def _plan(scheme: str, world: int = 2) -> Plan:
    return named_plan(CONFIG, scheme, world)


def test_op_count_matches_the_counted_step_of_each_scheme() -> None:
    cases = [{"config": CONFIG, "plan": _plan(s), "batch_size": 128} for s in SCHEMES]
    counted = launch(count_step_ops, 2, cases, timeout_s=120).values[0]
    single = single_step_ops(CONFIG, 128)["ops"]
    for scheme, c in zip(SCHEMES, counted, strict=True):
        modeled = op_count(CONFIG, 2, plan=_plan(scheme), implementation=OURS) - op_count(CONFIG)
        assert modeled == pytest.approx(c["ops"] - single, rel=0.02, abs=4), scheme
        assert c["host_syncs"] > 0  # the splits' .tolist(): counted as operators


def test_op_count_without_a_plan_and_on_one_process() -> None:
    tw = table_wise(CONFIG, 2)
    dp = round_robin(CONFIG, 2, "data_parallel")
    for impl in ("recnotebooks", "torchrec"):
        assert op_count(CONFIG, 2, True, implementation=impl) == op_count(
            CONFIG, 2, plan=tw, implementation=impl
        )
        assert op_count(CONFIG, 2, implementation=impl) == op_count(CONFIG, 2, plan=dp, implementation=impl)
        assert op_count(CONFIG, 1, True, implementation=impl) == op_count(CONFIG)
    # ours: more shards, more operators (the slowest rank counts); TorchRec's: not per table
    rw2, rw4 = _plan("row_wise"), _plan("row_wise", 4)
    assert op_count(CONFIG, 4, plan=rw4, implementation=OURS) > op_count(
        CONFIG, 2, plan=rw2, implementation=OURS
    )
    assert (
        op_count(CONFIG, 2, plan=rw2)
        == op_count(CONFIG, 2, plan=tw)
        < op_count(CONFIG, 2, plan=tw, implementation=OURS)
    )
    terms = sharded_op_terms(CONFIG, _plan("mixed"), 0)
    assert terms["collection"] == 2 and terms["data_parallel_base"] == 1
    assert A2A_CALLS_PER_STEP == 4  # lengths, ids, pooled forward; pooled gradients backward


def test_op_count_rejects_a_plan_of_another_world_size_and_unknown_implementations() -> None:
    with pytest.raises(ValueError, match="plan is for 2 ranks but world_size=4"):
        op_count(preset("tiny"), 4, plan=round_robin(preset("tiny"), 2))
    with pytest.raises(ValueError, match="implementation"):
        op_count(preset("tiny"), 2, implementation="fbgemm")


@pytest.mark.parametrize(("layers", "rank"), [(1, 8), (3, 24)])
def test_op_count_of_the_cross_layers_matches_the_counted_step(layers: int, rank: int) -> None:
    """A DCN interaction's operators (the cross layers beyond the concatenation they start from),
    counted with the torch profiler as the modeled constants were: the step of a "dcn" model less the
    step of the same model with the "cat" interaction."""
    cat = CONFIG.replace(interaction="cat")
    dcn = CONFIG.replace(interaction="dcn", dcn_layers=layers, dcn_rank=rank)
    counted = single_step_ops(dcn, 128)["ops"] - single_step_ops(cat, 128)["ops"]
    assert op_count(dcn) - op_count(cat) == counted


def test_op_count_of_a_sharded_dcn_step_matches_the_counted_step() -> None:
    """Our sharded step of a DCN model: DDP's reducer also runs over each cross layer's V, W and b."""
    dcn = CONFIG.replace(interaction="dcn", dcn_layers=2, dcn_rank=16)
    plan = named_plan(dcn, "table_wise", 2)
    counted = launch(count_step_ops, 2, [{"config": dcn, "plan": plan, "batch_size": 128}], timeout_s=120)
    single = single_step_ops(dcn, 128)["ops"]
    modeled = op_count(dcn, 2, plan=plan, implementation=OURS) - op_count(dcn)
    assert modeled == pytest.approx(counted.values[0][0]["ops"] - single, rel=0.02, abs=4)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_op_count_of_each_dense_optimizer_matches_the_counted_step(optimizer: str) -> None:
    """The dense optimizer's operators, counted with the torch profiler: the step with SGD or Adam
    on the MLPs (and a DCN model's cross layers) less the same step with Adagrad."""
    for config in (CONFIG, CONFIG.replace(interaction="dcn", dcn_layers=2, dcn_rank=8)):
        counted = (
            single_step_ops(config, 128, dense_optimizer=optimizer)["ops"]
            - single_step_ops(config, 128)["ops"]
        )
        assert op_count(config, dense_optimizer=optimizer) - op_count(config) == counted, config.interaction
    with pytest.raises(ValueError, match="dense_optimizer"):
        op_count(CONFIG, dense_optimizer="rmsprop")
