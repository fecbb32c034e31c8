"""The library behind the model of record's sections (01 §6, 05 §4, 06 §5): each function against a
reference computed by hand, its charts valid, its bad input named."""

from __future__ import annotations

import altair as alt
import pytest
from _values import num, whole

from recnotebooks.config import preset
from recnotebooks.perf.components import PARAMETER_SERVER
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.servers import compare_servers, model_of_record_servers
from recnotebooks.viz.architecture import MODEL_PARTS, model_parts, model_parts_chart, model_summary
from recnotebooks.viz.servers import COST_METRIC, SERVER_METRICS, server_bars


def test_model_parts_add_up_to_the_model_and_count_the_cross_layers_by_hand() -> None:
    rows = model_parts(["mlperf_v1", "mlperf_dcnv2", preset("tiny")])
    for name in ("mlperf_v1", "mlperf_dcnv2", "tiny"):
        cfg, mine = preset(name), [r for r in rows if r["model"] == name]
        assert [r["part"] for r in mine] == list(MODEL_PARTS.values())
        assert sum(num(r, "parameters") for r in mine) == cfg.parameters
        assert sum(num(r, "flops_per_sample") for r in mine) == pytest.approx(cfg.total_flops_per_sample())
        assert sum(num(r, "flops_share") for r in mine) == pytest.approx(1.0)
    cross = next(r for r in rows if r["model"] == "mlperf_dcnv2" and r["part"] == MODEL_PARTS["interaction"])
    width, rank = 128 + 26 * 128, 512  # the concatenation, the rank: V (width x rank), W (rank x width), b
    assert cross["parameters"] == 3 * (width * rank + rank * width + width)
    # forward: per layer two GEMMs (2 x width x rank FLOPs each), 3 elementwise ops on width; backward: twice
    assert cross["flops_per_sample"] == 3 * 3 * (2 * (2 * width * rank) + 3 * width)
    dot = next(r for r in rows if r["model"] == "mlperf_v1" and r["part"] == MODEL_PARTS["interaction"])
    assert dot["parameters"] == 0 and dot["flops_per_sample"] == 3 * 2 * 27 * 27 * 128  # X X^T of 27 vectors
    s = model_summary("mlperf_dcnv2")
    assert s["embedding_bytes_per_sample"] == 214 * 128 * 4 + 214 * 8 + 26 * 128 * 4 + 2 * 214 * 128 * 4


def test_model_parts_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="models must be a non-empty sequence"):
        model_parts("mlperf_dcnv2")
    with pytest.raises(ValueError, match="models must be a non-empty sequence"):
        model_parts([])
    with pytest.raises(ValueError, match="rm9"):
        model_parts(["rm9"])


def test_model_parts_chart_is_valid() -> None:
    chart = model_parts_chart(model_parts())
    assert isinstance(chart, alt.TopLevelMixin)
    spec = chart.to_dict()
    assert len(spec["vconcat"]) == 2


def test_a_billion_samples_priced_by_hand() -> None:
    rows, _ = compare_servers(preset("rm2").with_rows_scale(30), ("big_basin", "dgx_h100"), batch_size=8192)
    for r in rows:
        hw = hardware(str(r["server"]))
        hours = 1e9 / num(r, "throughput") / 3600
        by_hand = hours * (
            hw.devices * hw.price_per_hour + whole(r, "parameter_servers") * PARAMETER_SERVER.price_per_hour
        )
        assert num(r, "usd_per_billion_samples") == pytest.approx(by_hand, rel=1e-4)


def test_the_model_of_record_trains_as_mlperf_trains_it() -> None:
    from recnotebooks.perf import estimate
    from recnotebooks.perf.job import job_cost
    from recnotebooks.perf.mlperf_plan import mlperf_plan
    from recnotebooks.perf.mlperf_setup import MLPERF_SETUP

    rows, parts = model_of_record_servers(("big_basin", "dgx_h100"))
    cfg = preset("mlperf_dcnv2")
    assert {r["model"] for r in rows} == {"mlperf_dcnv2"}
    assert num(rows[0], "tables_gb") == pytest.approx(2 * cfg.sparse_parameters * 4 / 1e9)
    # where MLPerf's plan fits, the row is MLPerf's step: notebook 02's, communication overlapped
    h100 = estimate(
        cfg, "dgx_h100", batch_size=55_296, gpus=8, plan=mlperf_plan(cfg, 8, 1, 80e9), **MLPERF_SETUP
    )
    assert rows[1]["plan"] == "MLPerf's" and rows[1]["throughput"] == pytest.approx(
        55_296 / h100.step_time_overlap
    )
    by_hand = job_cost(samples=1e9, batch_size=55_296, step_time_s=h100.step_time_overlap, devices=8,
                       price_per_hour=hardware("dgx_h100").price_per_hour, power_w=h100.power_w)  # fmt: skip
    assert rows[1]["usd_per_billion_samples"] == pytest.approx(by_hand.cost_usd)
    assert by_hand.cost_usd == pytest.approx(
        8 * 12.29 * 1e9 / (55_296 / h100.step_time_overlap) / 3600, rel=1e-4
    )
    # where it does not fit (Big Basin's 16 GB GPUs), the fastest placement that does
    whole = estimate(
        cfg, "big_basin", batch_size=55_296, gpus=8, plan=mlperf_plan(cfg, 8, 1, 16e9), **MLPERF_SETUP
    )
    assert not whole.fits and rows[0]["plan"] == "the planner's" and rows[0]["fits"]
    assert {str(p["server"]).split(" ")[0] for p in parts} == {"big_basin", "dgx_h100"}
    bars = server_bars(rows, ["mlperf_dcnv2"], {**SERVER_METRICS, **COST_METRIC})
    money = [b for b in bars if str(b["metric"]).endswith("USD per billion samples")]
    assert len(money) == 2 and all(str(b["display"]).startswith("USD ") for b in money)


def test_best_placement_prices_the_precision_and_implementation_asked_for() -> None:
    from recnotebooks.perf.servers import best_placement

    cfg = preset("mlperf_dcnv2")
    fp32 = best_placement(cfg, hardware("dgx_h100"), 8, 55_296, sparse_optimizer="adagrad")[1]
    amp = best_placement(cfg, hardware("dgx_h100"), 8, 55_296, sparse_optimizer="adagrad", dtype="amp_fp16",
                         implementation="hugectr")[1]  # fmt: skip
    assert (fp32.dtype, amp.dtype) == ("fp32", "amp_fp16") and amp.step_time < fp32.step_time
    with pytest.raises(ValueError, match="implementation"):
        best_placement(cfg, hardware("dgx_h100"), 8, 55_296, implementation="jax")
    # HugeCTR keeps every table in HBM: on Big Basin (8 x 16 GB) its only candidate does not fit, and a
    # plan that puts tables elsewhere is refused by the model, naming the way out
    label, r = best_placement(cfg, hardware("big_basin"), 8, 55_296, sparse_optimizer="adagrad",
                              dtype="amp_fp16", implementation="hugectr")  # fmt: skip
    assert label == "hbm" and not r.fits
    from recnotebooks.perf import estimate

    with pytest.raises(ValueError, match="implementation='torchrec'"):
        estimate(cfg, hardware("big_basin"), batch_size=55_296, gpus=8, placement="host",
                 implementation="hugectr", dtype="amp_fp16")  # fmt: skip
