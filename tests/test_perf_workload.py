"""The cost model takes a typed workload (config.Workload) and, in the older form, a config with
the step's settings as keywords: both forms model the same step, to the float, and refuse the
same bad input; mixing them is refused by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.config import DTYPES, SPARSE_OPTIMIZERS, Workload, preset
from recnotebooks.config.model import DENSE_OPTIMIZERS
from recnotebooks.config.workload import OLDER_KEYWORDS, workload_from
from recnotebooks.perf import best_placement, compare_servers, estimate, memory_footprint, memory_report
from recnotebooks.perf.hardware import DTYPE_BYTES, hardware
from recnotebooks.perf.planner import plan_tables
from recnotebooks.perf.result import CostResult
from recnotebooks.plan import single_device_plan

PRESETS = ("tiny", "criteo_kaggle", "mlperf_dcnv2")


def _outcome(make: Callable[[], object]) -> tuple[str, object]:
    """What ``make`` gives: its value (a result as every number it holds), or its error and message."""
    try:
        value = make()
    except (TypeError, ValueError) as e:
        return type(e).__name__, str(e)
    if isinstance(value, CostResult):
        return "result", (value.summary(), value.per_rank, value.memory, value.plan, value.cache_hit_rates)
    return "value", value


workloads = st.builds(
    Workload,
    config=st.sampled_from(PRESETS).map(preset),
    batch_size=st.sampled_from([64, 4096, 65536]),
    dtype=st.sampled_from(DTYPES),
    zipf_exponent=st.sampled_from([0.0, 0.8, 1.05, 1.3]),
    sparse_optimizer=st.sampled_from(SPARSE_OPTIMIZERS),
    dense_optimizer=st.sampled_from(DENSE_OPTIMIZERS),
)


def _keywords(w: Workload, *names: str) -> dict[str, Any]:
    """The older form's keywords for ``w`` (``names``: only those)."""
    return {k: getattr(w, k) for k in names or OLDER_KEYWORDS}


@settings(max_examples=12, deadline=None)
@given(
    w=workloads,
    hw=st.sampled_from(["dgx_a100", "dgx_h100", "big_basin", "cpu_cluster"]),
    layout=st.sampled_from([(1, 1), (2, 1), (8, 1), (8, 2)]),
    placement=st.sampled_from(["hbm", "host", "cache", "remote"]),
    implementation=st.sampled_from(["torchrec", "recnotebooks", "hugectr"]),
)
def test_estimate_of_a_workload_is_estimate_of_its_keywords(
    w: Workload, hw: str, layout: tuple[int, int], placement: str, implementation: str
) -> None:
    gpus, nodes = layout
    where: dict[str, Any] = {
        "gpus": gpus,
        "nodes": nodes,
        "placement": placement,
        "implementation": implementation,
    }
    if placement == "cache":
        where["cache_hit_rate"] = 0.8
    older = _outcome(lambda: estimate(w.config, hw, **where, **_keywords(w)))
    assert _outcome(lambda: estimate(w, hw, **where)) == older


@settings(max_examples=12, deadline=None)
@given(w=workloads, world=st.sampled_from([1, 4, 16]))
def test_memory_report_of_a_workload_is_memory_report_of_its_keywords(w: Workload, world: int) -> None:
    hw = hardware("dgx_a100")
    plan = single_device_plan(w.config) if world == 1 else plan_tables(w, hw, world)
    assert world == 1 or plan == plan_tables(
        w.config, hw, world, **_keywords(w, "batch_size", "dtype", "sparse_optimizer")
    )
    keywords = _keywords(w, "dtype", "zipf_exponent", "sparse_optimizer", "dense_optimizer")
    older = memory_report(w.config, hw, plan, w.batch_size, gpus=min(world, 8), **keywords)
    assert memory_report(w, hw, plan, gpus=min(world, 8)) == older


def test_memory_footprint_of_a_workload_counts_its_dtypes_bytes() -> None:
    config = preset("criteo_kaggle")
    for dtype in DTYPES:
        w = Workload(config, 512, dtype=dtype, sparse_optimizer="adagrad", dense_optimizer="adam")
        by_hand = memory_footprint(config, "adagrad", "adam", DTYPE_BYTES[dtype], 512)
        assert memory_footprint(w) == by_hand
        assert memory_footprint(w, dtype_bytes=2) == memory_footprint(config, "adagrad", "adam", 2, 512)


def test_the_workloads_fields_reach_the_model() -> None:
    """Each field of the Workload changes what is modeled (none is dropped on the way)."""
    w = Workload(preset("criteo_kaggle"), 8192)
    base = estimate(w, "dgx_a100", placement="cache", cache_rows=10_000)
    for change in ({"batch_size": 16384}, {"dtype": "bf16"}, {"zipf_exponent": 0.5},
                   {"sparse_optimizer": "adagrad"}, {"dense_optimizer": "adam"}):  # fmt: skip
        other = estimate(w.replace(**change), "dgx_a100", placement="cache", cache_rows=10_000)
        assert other.per_rank != base.per_rank, change


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda w: estimate(w, "dgx_a100", batch_size=64), "batch_size"),
        (lambda w: estimate(w, "dgx_a100", dtype="bf16", zipf_exponent=1.0), "zipf_exponent"),
        (lambda w: memory_report(w, hardware("dgx_a100"), single_device_plan(w.config), 64), "batch_size"),
        (
            lambda w: memory_report(w, hardware("dgx_a100"), single_device_plan(w.config), dtype="bf16"),
            "dtype",
        ),
        (lambda w: memory_footprint(w, "adagrad"), "sparse_optimizer"),
        (lambda w: memory_footprint(w, dense_optimizer="adam"), "dense_optimizer"),
        (lambda w: plan_tables(w, "dgx_a100", 2, sparse_optimizer="sgd"), "sparse_optimizer"),
        (lambda w: best_placement(w, hardware("dgx_a100"), 1, 64), "batch_size"),
        (lambda w: compare_servers(w, ("dgx_a100",), dense_optimizer="sgd"), "dense_optimizer"),
    ],
)
def test_a_workload_and_the_older_keywords_together_are_refused_by_name(
    make: Callable[[Workload], object], named: str
) -> None:
    w = Workload(preset("tiny"), 256)
    with pytest.raises(
        TypeError, match=rf"takes a Workload, or a DLRMConfig .* not both: got a Workload and .*'{named}'"
    ):
        make(w)


def test_the_older_form_names_what_it_lacks_or_does_not_know() -> None:
    with pytest.raises(TypeError, match=r"estimate\(\) with a DLRMConfig needs batch_size="):
        estimate(preset("tiny"), "dgx_a100")
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['batch'\]"):
        estimate(preset("tiny"), "dgx_a100", batch=64)
    with pytest.raises(TypeError, match="config must be a DLRMConfig"):
        workload_from("tiny", {"batch_size": 8}, "estimate")
    assert workload_from(preset("tiny"), {"batch_size": 8}, "x") == Workload(preset("tiny"), 8)
    assert set(OLDER_KEYWORDS) == set(Workload.__dataclass_fields__) - {"config"}


def test_the_older_form_keeps_estimates_bounds_and_messages() -> None:
    with pytest.raises(ValueError, match=r"batch_size must be an int in \[1, 1099511627776\], got 0"):
        estimate(preset("tiny"), "dgx_a100", batch_size=0)
    with pytest.raises(
        ValueError, match=r"batch_size must be an int in \[1, 1099511627776\], got 2199023255552"
    ):
        estimate(Workload(preset("tiny"), 2**41), "dgx_a100")
