"""The library behind the model of record's sections (01 §6, 05 §4, 06 §5): each function against a
reference computed by hand, its charts valid, its bad input named."""

from __future__ import annotations

import pytest

from recnotebooks.config import preset
from recnotebooks.perf.components import PARAMETER_SERVER
from recnotebooks.perf.explore import compare_servers, model_of_record_servers
from recnotebooks.perf.hardware import hardware
from recnotebooks.viz.architecture import MODEL_PARTS, model_parts, model_parts_chart, model_summary
from recnotebooks.viz.servers import COST_METRIC, SERVER_METRICS, server_bars


def test_model_parts_add_up_to_the_model_and_count_the_cross_layers_by_hand() -> None:
    rows = model_parts(["mlperf_v1", "mlperf_dcnv2", preset("tiny")])
    for name in ("mlperf_v1", "mlperf_dcnv2", "tiny"):
        cfg, mine = preset(name), [r for r in rows if r["model"] == name]
        assert [r["part"] for r in mine] == list(MODEL_PARTS.values())
        assert sum(float(r["parameters"]) for r in mine) == cfg.parameters  # type: ignore[arg-type]
        assert sum(float(r["flops_per_sample"]) for r in mine) == pytest.approx(cfg.total_flops_per_sample())  # type: ignore[arg-type]
        assert sum(float(r["flops_share"]) for r in mine) == pytest.approx(1.0)  # type: ignore[arg-type]
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
        model_parts("mlperf_dcnv2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="models must be a non-empty sequence"):
        model_parts([])
    with pytest.raises(ValueError, match="rm9"):
        model_parts(["rm9"])


def test_model_parts_chart_is_valid() -> None:
    spec = model_parts_chart(model_parts()).to_dict()  # type: ignore[attr-defined]
    assert len(spec["vconcat"]) == 2


def test_a_billion_samples_priced_by_hand() -> None:
    rows, _ = compare_servers(preset("rm2").with_rows_scale(30), ("big_basin", "dgx_h100"), batch_size=8192)
    for r in rows:
        hw = hardware(str(r["server"]))
        hours = 1e9 / float(r["throughput"]) / 3600  # type: ignore[arg-type]
        by_hand = hours * (
            hw.devices * hw.price_per_hour + int(r["parameter_servers"]) * PARAMETER_SERVER.price_per_hour
        )  # type: ignore[call-overload]
        assert float(r["usd_per_billion_samples"]) == pytest.approx(by_hand, rel=1e-4)  # type: ignore[arg-type]


def test_the_model_of_record_trains_as_mlperf_trains_it() -> None:
    rows, parts = model_of_record_servers(("zion", "dgx_h100"))
    cfg = preset("mlperf_dcnv2")
    weights = cfg.sparse_parameters * 4
    assert {r["model"] for r in rows} == {"mlperf_dcnv2"}
    assert float(rows[0]["tables_gb"]) == pytest.approx(
        2 * weights / 1e9
    )  # exact Adagrad: one state per weight  # type: ignore[arg-type]
    rowwise, _ = compare_servers(cfg, ("zion", "dgx_h100"), batch_size=55_296)
    # the same node with row-wise Adagrad's state (a float per row): Zion keeps every table in HBM
    assert rowwise[0]["placement"] == "hbm" and rows[0]["placement"] == "hbm+host"
    assert {p["server"] for p in parts} == {"zion", "dgx_h100"}
    bars = server_bars(rows, ["mlperf_dcnv2"], {**SERVER_METRICS, **COST_METRIC})
    money = [b for b in bars if str(b["metric"]).endswith("USD per billion samples")]
    assert len(money) == 2 and all(str(b["display"]).startswith("$") for b in money)
