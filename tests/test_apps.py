"""Every notebook app driven over its widgets' ranges from Python (no browser)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _values import control_values, num
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.nn import DLRM
from recnotebooks.timing import PHASES
from recnotebooks.viz.app import App, AppError
from recnotebooks.viz.architecture import (
    ARCHITECTURE_CONTROLS,
    architecture_config,
    architecture_explorer,
    explore_architecture,
)
from recnotebooks.viz.tidy import chart_rows
from recnotebooks.viz.traffic import BATCH_SIZES, DIMS, POOLINGS, lookup_traffic, lookup_traffic_app


@pytest.fixture(scope="module")
def explorer() -> App:
    return architecture_explorer(time_budget_s=0.0)


@pytest.mark.parametrize("name", list(ARCHITECTURE_CONTROLS))
def test_architecture_explorer_sweeps_each_control(explorer: App, name: str) -> None:
    defaults = {k: v["value"] for k, v in ARCHITECTURE_CONTROLS.items()}
    explorer.set(**defaults)
    for value in control_values(explorer.controls[name]):
        if value == explorer.values[name]:
            continue
        before = explorer.result.tables["metrics"]
        result = explorer.set(**{name: value})
        assert explorer.error is None
        # the analytic numbers must move (the chart always differs: its trail names the change)
        assert result.tables["metrics"] != before, f"{name}={value} did not change the computed sizes"
        phases = result.tables["phases"]
        assert [r["phase"] for r in phases] == list(PHASES)
        assert all(r["source"] == "measured" and num(r, "seconds_per_step") >= 0 for r in phases)
        assert sum(num(r, "seconds_per_step") for r in phases) > 0
        assert {r["source"] for r in result.tables["metrics"]} == {"analytic"}
    explorer.altair_chart.to_dict()  # the app skips schema validation for speed; the test does not
    explorer.set(**defaults)


def test_explorer_refuses_what_does_not_fit_and_keeps_the_chart(explorer: App) -> None:
    explorer.set(batch_size=512, num_tables=8, pooling=1, embedding_dim=32)
    before = explorer.chart_data()
    with pytest.raises(AppError, match="GB"):
        explorer.set(batch_size=8192, num_tables=64, pooling=120, embedding_dim=256)
    assert explorer.chart_data() == before
    assert "recnb-error" in explorer.message.value and "lower the batch size" in explorer.message.value


def test_explorer_refuses_what_would_take_seconds_to_measure(explorer: App) -> None:
    explorer.set(batch_size=512, num_tables=8, pooling=1, embedding_dim=32)
    before = explorer.chart_data()
    with pytest.raises(AppError, match="too long to measure"):
        explorer.set(batch_size=2048, bottom_width=4096, top_width=4096, num_dense=2560)
    assert explorer.chart_data() == before
    explorer.set(batch_size=512, bottom_width=256, top_width=256, num_dense=13)


def test_explorer_notes_say_when_the_full_model_would_not_fit() -> None:
    r = explore_architecture(measure=False, num_tables=64, rows_per_table=10**8, embedding_dim=256)
    assert any("would NOT fit" in n for n in r.notes)
    assert "phases" not in r.tables


def test_explorer_rejects_unknown_settings_and_values() -> None:
    with pytest.raises(KeyError, match="unknown setting"):
        architecture_explorer(measure=False, tabels=3)
    with pytest.raises(ValueError, match="pooling must be one of .*got 3"):
        architecture_explorer(measure=False, pooling=3)


@given(
    num_tables=st.integers(1, 12),
    dim=st.sampled_from([4, 8, 16]),
    bw=st.sampled_from([16, 64]),
    bd=st.integers(1, 3),
    tw=st.sampled_from([16, 64]),
    td=st.integers(1, 3),
    dense=st.sampled_from([1, 13, 64]),
    inter=st.sampled_from(["dot", "cat"]),
)
def test_computed_parameters_match_a_built_model(
    num_tables: int, dim: int, bw: int, bd: int, tw: int, td: int, dense: int, inter: str
) -> None:
    """The explorer's parameter count against an independent reference: the torch model's."""
    kw: dict[str, Any] = dict(num_dense=dense, num_tables=num_tables, rows_per_table=1000, embedding_dim=dim,
                              bottom_width=bw, bottom_depth=bd, top_width=tw, top_depth=td,
                              interaction=inter)  # fmt: skip
    metrics = {r["metric"]: r["value"] for r in explore_architecture(measure=False, **kw).tables["metrics"]}
    model = DLRM(architecture_config(**kw))
    assert metrics["parameters"] == sum(p.numel() for p in model.parameters())


def test_traffic_app_sweeps_every_control() -> None:
    app = lookup_traffic_app()
    for name, values in (("pooling", POOLINGS), ("batch_size", BATCH_SIZES), ("embedding_dim", DIMS)):
        for v in values:
            if v == app.values[name]:
                continue
            before = app.chart_data()
            app.set(**{name: v})
            assert app.error is None and app.chart_data() != before
            app.altair_chart.to_dict()  # validates against the Vega-Lite schema
    assert len(app.history) == 4


def test_traffic_matches_a_naive_count() -> None:
    rows = lookup_traffic(pooling=20, batch_size=100, embedding_dim=8, num_tables=3).tables["traffic"]
    cur = [r for r in rows if r["current"]]
    assert len(cur) == 1 and cur[0]["pooling"] == 20
    lookups = sum(1 for _ in range(100) for _ in range(3) for _ in range(20))
    assert cur[0]["lookups_per_step"] == lookups
    assert cur[0]["MB_per_step"] == pytest.approx(lookups * (8 * 4 + 8) / 1e6)
    with pytest.raises(ValueError, match="pooling must be one of"):
        lookup_traffic(pooling=3)


# ----- Efficiency Explorer (notebook 02) -----------------------------------------------------------
@pytest.fixture(scope="module")
def efficiency() -> App:
    from recnotebooks.viz.efficiency import efficiency_explorer

    return efficiency_explorer(measure=False)


def test_efficiency_explorer_measures_beside_the_model(quiet_machine: None) -> None:
    from recnotebooks.viz.efficiency import efficiency_explorer

    app = efficiency_explorer(time_budget_s=0.0, batch_size=1024)
    for kv in ({"pooling": 20}, {"gpus": 4}, {"hardware": "big_basin"}, {"gpus": 1, "batch_size": 131072}):
        before = app.chart_data()
        r = app.set(**kv)
        assert app.error is None and app.chart_data() != before
        assert {x["source"] for x in r.tables["modeled"]} == {"modeled"}
    # 131072 on one device is measured as a smaller copy (the per-device batch capped), and says so;
    # the same architecture at that batch was measured for the first setting, so it is reused
    said = "batch 1,024 of 131,072 per device: a smaller copy"
    assert any(said in n and "reused" in n for n in r.notes), r.notes
    assert {x["source"] for e in app.history[1:] for x in e.result.tables["measured"]} == {"measured"}
    app.altair_chart.to_dict()


def test_efficiency_explorer_sweeps_each_control(efficiency: App) -> None:
    from recnotebooks.viz.efficiency import EFFICIENCY_CONTROLS

    defaults = {k: v["value"] for k, v in EFFICIENCY_CONTROLS.items()}
    for name in EFFICIENCY_CONTROLS:
        efficiency.set(**defaults)
        for value in control_values(efficiency.controls[name]):
            if value == efficiency.values[name]:
                continue
            before = efficiency.result.tables
            result = efficiency.set(**{name: value})
            assert efficiency.error is None, (name, value, efficiency.error)
            if name == "cache_hit_rate" and efficiency.values["placement"] != "cache":
                assert result.tables == before  # the hit rate only matters with a cache
                continue
            assert result.tables != before, f"{name}={value} did not change the modeled numbers"
            assert {r["source"] for r in result.tables["modeled"]} == {"modeled"}
            assert all(num(r, "seconds_per_step") >= 0 for r in result.tables["modeled"])
        efficiency.altair_chart.to_dict()
    efficiency.set(**defaults)


def test_efficiency_explorer_says_when_it_does_not_fit() -> None:
    from recnotebooks.viz.efficiency import explore_efficiency

    r = explore_efficiency(hardware_name="big_basin", num_tables=64, rows_per_table=10**8, embedding_dim=256,
                           measure=False)  # fmt: skip
    assert any(n.startswith("DOES NOT FIT") for n in r.notes)
    assert all(
        isinstance(x["value"], float) and x["value"] == x["value"] for x in r.tables["metrics"]
    )  # no NaN


def test_explorer_works_when_free_memory_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    import recnotebooks.viz.architecture as arch

    monkeypatch.setattr(arch, "available_memory_bytes", lambda *a: None)
    r = explore_architecture(measure=False)
    assert r.notes and "available here" not in r.notes[0]


# ----- Server Design Explorer (notebook 05) --------------------------------------------------------
def test_server_explorer_sweeps_each_control() -> None:
    from recnotebooks.viz.servers import SERVER_CONTROLS, server_explorer

    app = server_explorer()
    defaults = {k: v["value"] for k, v in SERVER_CONTROLS.items()}
    starts = (defaults, {**defaults, "rows_scale": 30})  # rm2 at 30x puts Big Basin's tables behind a cache
    for start, name in ((st_, n) for st_ in starts for n in SERVER_CONTROLS):
        app.set(**start)
        for value in control_values(app.controls[name]):
            if value == app.values[name]:
                continue
            before = app.result.tables
            result = app.set(**{name: value})
            assert app.error is None, (name, value, app.error)
            cached = [
                any("cache" in str(r["placement"]) for r in t["throughput"]) for t in (before, result.tables)
            ]
            if name != "cache_hit_rate" or any(cached):
                assert result.tables != before, f"{name}={value} did not change the modeled numbers"
            else:
                assert result.tables == before  # no server uses a cache, before or after
            rows = result.tables["throughput"] + result.tables["per_joule"]
            assert {r["source"] for r in rows} == {"modeled"}
            assert all(num(r, "value") > 0 and r["value"] == r["value"] for r in rows)  # no NaN, no zero
    app.altair_chart.to_dict()


def test_server_explorer_agrees_with_the_cost_model_it_calls() -> None:
    from recnotebooks.config import preset
    from recnotebooks.perf import best_placement, hardware
    from recnotebooks.viz.servers import SERVERS, explore_servers, scaled_model

    r = explore_servers(model="mlperf_v1", rows_scale=10, batch_size=16384, cache_hit_rate=0.95)
    cfg = scaled_model("mlperf_v1", 10)
    assert [t.num_rows for t in cfg.tables] == [t.num_rows * 10 for t in preset("mlperf_v1").tables]
    for name, row in zip(SERVERS, r.tables["throughput"], strict=True):
        hw = hardware(name)
        place, ref = best_placement(cfg, hw, hw.devices, 16384, 0.95)
        assert row["metric"] == name and row["placement"] == place
        assert row["value"] == pytest.approx(ref.throughput)
        breakdown = r.tables["breakdown"]
        step = sum(num(p, "seconds_per_step") for p in breakdown if str(p["server"]).startswith(name + " "))
        assert step == pytest.approx(16384 / ref.throughput)
    # Growing the tables pushes them out of Big Basin's HBM (the seed paper's reason for Zion).
    small = explore_servers(model="mlperf_v1", rows_scale=0.1)
    assert small.tables["throughput"][1]["placement"] == "hbm"
    assert r.tables["throughput"][1]["placement"] != "hbm"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": "rm9"}, "rm9"),
        ({"rows_scale": 7}, "rows_scale"),
        ({"cache_hit_rate": 1.5}, "cache_hit_rate"),
        ({"rows_scale": True}, "rows_scale"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_server_explorer_rejects_bad_settings(kwargs: dict[str, Any], match: str) -> None:
    from recnotebooks.viz.servers import explore_servers, server_explorer

    with pytest.raises((ValueError, KeyError), match=match):
        explore_servers(**kwargs)
    with pytest.raises((ValueError, KeyError), match=match):
        server_explorer(**kwargs)
    with pytest.raises(KeyError, match="rows_scal"):
        server_explorer(rows_scal=10)


def test_integer_sliders_take_numpy_integers_and_refuse_floats_and_booleans() -> None:
    import numpy as np

    app = architecture_explorer(measure=False, num_tables=np.int64(16))
    assert app.values["num_tables"] == 16 and type(app.values["num_tables"]) is int
    for bad in (8.5, True):
        with pytest.raises(TypeError, match="num_tables must be an int in"):
            architecture_explorer(measure=False, num_tables=bad)


# ----- what the charts draw (review of the browser screenshots) ----------------------------------
def _panel_reach(spec: dict[str, object]) -> dict[str, float]:
    """Each bar panel's x-scale end, from the chart's own data (the invisible reach points)."""
    reach: dict[str, float] = {}
    for r in chart_rows(spec):
        reach.setdefault(str(r["metric"]), num(r, "_reach"))
        assert reach[str(r["metric"])] == num(r, "_reach")
    return reach


def _bars_spec(app: App) -> dict[str, object]:
    import altair as alt

    chart = app.altair_chart
    assert isinstance(chart, alt.VConcatChart)
    bars = next(c for c in chart.vconcat if isinstance(c, alt.FacetChart))  # the small multiples
    return bars.to_dict()


def test_advantage_panels_share_one_scale_and_draw_the_one_line() -> None:
    from recnotebooks.viz.advantage import advantage_explorer

    app = advantage_explorer()
    app.set(rows_scale=10)
    spec = _bars_spec(app)
    reach = _panel_reach(spec)
    assert len(reach) == 4 and len(set(reach.values())) == 1, reach  # explorer 1.4x no longer as long as 3.0x
    rows = chart_rows(spec)
    assert min(reach.values()) >= max(num(r, "value") for r in rows)
    text = json.dumps(spec)
    assert '"type": "rule"' in text and '"datum": 1.0' in text


def test_server_explorer_panels_share_a_scale_per_row() -> None:
    from recnotebooks.viz.servers import server_explorer

    app = server_explorer()
    app.set(rows_scale=30)
    reach = _panel_reach(_bars_spec(app))
    for unit in ("samples per second", "samples per joule"):
        row = {m: v for m, v in reach.items() if m.endswith(unit)}
        assert len(row) == 5 and len(set(row.values())) == 1, row
    assert len(set(reach.values())) == 2


@given(st.floats(min_value=1e-5, max_value=1.0))
def test_percent_labels_keep_two_significant_digits(fraction: float) -> None:
    from recnotebooks.viz.controls import percent

    shown = float(percent(fraction).rstrip("%")) / 100
    assert shown == pytest.approx(fraction, rel=0.051)  # "0.4%" for 0.36% and 0.41% is gone


def test_efficiency_notes_name_devices_of_one_node() -> None:
    from recnotebooks.viz.efficiency import explore_efficiency

    gpu = explore_efficiency(hardware_name="dgx_a100", gpus=8, measure=False).notes[0]
    cpu = explore_efficiency(hardware_name="cpu_cluster", measure=False).notes[0]
    assert gpu.startswith("MODELED on 8 GPUs (dgx_a100):"), gpu  # not "8 x dgx_a100": eight nodes?
    assert cpu.startswith("MODELED on 1 CPU node (cpu_cluster):") and "GPU" not in cpu, cpu
