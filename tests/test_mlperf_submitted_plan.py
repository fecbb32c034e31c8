"""HugeCTR's plan as MLPerf's DLRM-DCNv2 submissions ran it (issue 40): the settings each round's
``config_*.sh`` gives a system, the plan HugeCTR's ``sharding`` package makes with them, and the
exchange its ``train.py`` picks. The reference plans below are what NVIDIA's own ``sharding`` package
(mlcommons/training_results_v5.1 @ 441d65f4, ``NVIDIA/benchmarks/dlrm_dcnv2/implementations/hugectr/
sharding``) returned on ``train.py``'s ``TABLE_SIZE_ARRAY`` and ``MULTI_HOT_SIZES``, run on 2026-12-05
(its table ``i`` is the preset's ``C{i+1}``)."""

from __future__ import annotations

from collections import Counter

import pytest

from recnotebooks.config import preset
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.mlperf_plan import HugeCTRSharding, hugectr_plan, submitted_sharding

CFG = preset("mlperf_dcnv2")

#: (plan, nodes, GPUs a node, MEM_COMM_BW_RATIO, DP_SHARDING_THRESHOLD) -> (data-parallel tables,
#: {table: GPUs} of the model-parallel tables on more than one GPU), from HugeCTR's own planner.
HUGECTR = {
    ("auto", 16, 4, 9, 0.0): (0, {"C21": 32, "C22": 8, "C10": 2, "C12": 2, "C15": 2, "C20": 2, "C23": 2}),
    ("auto", 2, 4, 9, 0.008): (13, {"C21": 8, "C22": 2}),
    ("auto", 1, 8, 7, 0.008): (13, {"C21": 4}),
    ("auto", 1, 8, 11, 0.008): (13, {"C21": 8, "C22": 2}),
    ("auto", 1, 4, 7, 0.008): (13, {"C1": 4, "C21": 2, "C10": 2}),
    ("hier_auto", 8, 8, 67, 0.0125): (
        14,
        {**{f"C{i}": 8 for i in (1, 2, 3, 5, 10, 11, 12, 20, 22, 23, 24)}, "C21": 32},
    ),
    ("hier_auto", 16, 8, 67, 0.0125): (
        14,
        {**{f"C{i}": 8 for i in (1, 2, 3, 5, 10, 11, 12, 20, 23, 24)}, "C21": 32, "C22": 16},
    ),
    ("hier_auto", 8, 8, 160, 0.0125): (
        14,
        {**{f"C{i}": 8 for i in (1, 2, 3, 5, 10, 11, 12, 20, 22, 23, 24)}, "C21": 16},
    ),
}


@pytest.mark.parametrize("key", list(HUGECTR))
def test_the_plan_is_the_one_hugectr_makes(key: tuple[str, int, int, float, float]) -> None:
    kind, nodes, gpus, ratio, threshold = key
    plan = hugectr_plan(CFG, gpus, nodes, HugeCTRSharding(kind, ratio, threshold, False))
    dp, split = HUGECTR[key]
    plan.check(CFG)
    mp = [s for s in plan.shards if s.sharding != "data_parallel"]
    assert len({s.table for s in plan.shards if s.sharding == "data_parallel"}) == dp
    on = Counter(s.table for s in mp)
    assert {t: n for t, n in on.items() if n > 1} == split
    assert len(on) == 26 - dp and plan.strategy == f"hugectr_{kind}"
    if kind == "hier_auto":  # a node's tables over all of its GPUs
        assert all(n % gpus == 0 for n in on.values())


@pytest.mark.parametrize(
    "args,want",
    [
        (("gb200_nvl72", 4, 16, "v5.1"), ("auto", 9.0, 0.0, False, "config_GB200_16x4x2112.sh")),
        (("gb200_nvl72", 4, 2, "v5.0"), ("auto", 9.0, 0.008, False, "config_GB200_2x4x6912.sh")),
        (("dgx_h100", 8, 8, "v4.0"), ("hier_auto", 67.0, 0.0125, True, "config_DGXH100_8x8x2112.sh")),
        (("dgx_h100", 8, 16, "v3.0"), ("hier_auto", 67.0, 0.0, True, "config_DGXH100_16x8x1056.sh")),
        (("dgx_b200", 8, 8, "v5.1"), ("hier_auto", 160.0, 0.0125, True, "config_DGXB200_8x8x2112.sh")),
        (("dgx_h100", 4, 2, "v3.1"), ("auto", 7.0, 0.008, True, "")),  # Dell's 2x4: auto, v3.1's exchange
        (("dgx_b200", 8, 2, "v5.1"), ("auto", 9.0, 0.008, False, "")),  # Dell's 2x8 B200
        (("h200_node", 8, 1, "v4.1"), ("auto", 11.0, 0.008, False, "")),
        (("dgx_h100", 8, 1, "v3.0"), ("auto", 7.0, 0.0, False, "")),
    ],
)
def test_the_settings_each_round_gives_a_system(
    args: tuple[str, int, int, str], want: tuple[str, float, float, bool, str]
) -> None:
    s = submitted_sharding(*args)
    assert (s.plan, s.mem_comm_bw_ratio, s.dp_threshold, s.hierarchical) == want[:4]
    assert want[4] in s.source and "training_results_v" in s.source


def test_the_exchange_changes_the_step_and_flat_is_rank_to_rank() -> None:
    kw = {"batch_size": 135_168, "gpus": 8, "nodes": 8, "dtype": "amp_fp16", "implementation": "hugectr"}
    plan = hugectr_plan(CFG, 8, 8, submitted_sharding("dgx_h100", 8, 8, "v4.0"))
    hier = estimate(CFG, "dgx_h100", plan=plan, exchange="hierarchical", **kw)
    assert estimate(CFG, "dgx_h100", plan=plan, **kw).step_time == hier.step_time  # the default on 8 nodes
    flat = estimate(CFG, "dgx_h100", plan=plan, exchange="flat", **kw)
    assert flat.step_time != hier.step_time


@pytest.mark.parametrize(
    "call,needle",
    [
        (lambda: HugeCTRSharding("uniform", 9, 0, False), "plan must be one of"),
        (lambda: HugeCTRSharding("auto", 0, 0, False), "mem_comm_bw_ratio"),
        (lambda: HugeCTRSharding("auto", 9, -1, False), "dp_threshold"),
        (lambda: HugeCTRSharding("auto", 9, 0, "no"), "hierarchical"),
        (lambda: submitted_sharding("dgx_h100", 8, 1, "v6.0"), "round must be one of"),
        (lambda: hugectr_plan(CFG, 8, 1, HugeCTRSharding("hier_auto", 67, 0.0125, True)), "needs nodes > 1"),
        (
            lambda: hugectr_plan(CFG, 8, 1, HugeCTRSharding("auto", 7, 0.008, False), gpu_bytes=1e6),
            "cannot hold",
        ),
        (
            lambda: estimate(CFG, "dgx_h100", batch_size=1024, gpus=8, exchange="tree"),
            "exchange must be one of",
        ),
    ],
)
def test_bad_settings_name_what_is_allowed(call: object, needle: str) -> None:
    with pytest.raises((ValueError, TypeError), match=needle):
        call()  # type: ignore[operator]
