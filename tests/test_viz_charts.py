"""Chart factories: labels, tooltips, data checks, offline export."""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import pytest
from _values import bad
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.viz import (
    SOURCES,
    hit_rate_curve,
    metric_bars,
    metric_lines,
    part_bars,
    rank_bars,
    ratio_bars,
    roofline,
    save_png,
    save_svg,
    source_label,
    time_breakdown,
    training_curves,
)
from recnotebooks.viz.charts import MAX_CHART_ROWS, chart_rows

PHASE_ROWS = [
    {"setting": s, "phase": p, "seconds_per_step": 0.001 * (i + 1) * (j + 1), "source": "measured"}
    for i, s in enumerate(["now", "-1"])
    for j, p in enumerate(["data", "embedding_forward", "bottom_mlp"])
]


def _marks(spec: object) -> list[dict]:
    """Every unit view (a dict with a 'mark') in a Vega-Lite spec."""
    out = []
    if isinstance(spec, dict):
        if "mark" in spec:
            out.append(spec)
        for v in spec.values():
            out += _marks(v)
    elif isinstance(spec, list):
        for v in spec:
            out += _marks(v)
    return out


def _all_charts() -> dict[str, alt.TopLevelMixin]:
    return {
        "time_breakdown": time_breakdown(PHASE_ROWS, highlight="now", detail="cpu"),
        "metric_lines": metric_lines(
            [{"p": p, "b": p * 10.0} for p in (1, 2, 5)],
            x="p",
            y="b",
            current=2,
            x_log=True,
            source="analytic",
        ),
        "metric_bars": metric_bars(
            [
                {"metric": m, "value": 1.0 + k, "setting": s, "display": "x"}
                for m in ("a", "b")
                for k, s in enumerate(["now", "-1"])
            ],
            source="analytic",
        ),
        "roofline": roofline(
            [{"label": "x", "arithmetic_intensity": 2.0, "flops_per_s": 1e11, "source": "modeled"}],
            peak_flops=1e13,
            peak_bandwidth=1e12,
        ),
        "rank_bars": rank_bars(
            [{"rank": r, "phase": "all_to_all", "seconds": 0.1 * r + 0.01} for r in range(4)],
            value="seconds",
            color="phase",
            source="modeled",
        ),
        "hit_rate_curve": hit_rate_curve(
            [{"cache_fraction": f, "hit_rate": f * 5, "policy": "lru"} for f in (0.01, 0.1)],
            source="measured",
        ),
        "training_curves": training_curves([{"step": 1, "loss": 0.6}, {"step": 2, "loss": 0.5, "auc": 0.7}]),
        "part_bars": part_bars(
            [
                {"setting": "now", "where": w, "gb": g, "display": f"{g} GB"}
                for w, g in (("HBM", 20.0), ("far", 9.0))
            ],
            value="gb",
            part="where",
            parts=["HBM", "near", "far"],
            colors=["#000001", "#000002", "#000003"],
            text="display",
            source="modeled",
        ),
    }


@pytest.mark.parametrize("name", list(_all_charts()))
def test_every_chart_is_labelled_and_has_tooltips(name: str) -> None:
    spec = _all_charts()[name].to_dict()
    subtitle = spec["title"]["subtitle"]
    assert any(s.startswith(tuple(SOURCES.values())) for s in subtitle), subtitle
    marks = _marks(spec)
    assert marks
    for m in marks:
        assert "tooltip" in m.get("encoding", {}), (name, m["mark"])


def test_source_label_names_measured_and_modeled() -> None:
    assert "MEASURED" in source_label("measured", "cpu") and "cpu" in source_label("measured", "cpu")
    assert "MODELED" in source_label("modeled")
    with pytest.raises(ValueError, match="source must be one of"):
        source_label("guessed")


def test_mixed_sources_are_distinguished() -> None:
    rows = [{"x": 1.0, "y": 2.0, "source": "measured"}, {"x": 2.0, "y": 3.0, "source": "modeled"}]
    spec = metric_lines(rows, x="x", y="y").to_dict()
    assert len(spec["title"]["subtitle"]) == 2
    assert any("strokeDash" in m.get("encoding", {}) for m in _marks(spec))


def test_a_detail_shared_by_several_sources_is_said_once() -> None:
    """The Sharding Explorer's bytes chart (modeled and measured) printed its detail after each
    source's line: twice."""
    rows = [{"x": 1.0, "y": 2.0, "source": "measured"}, {"x": 2.0, "y": 3.0, "source": "modeled"}]
    subtitle = metric_lines(rows, x="x", y="y", detail="modeled: perf.traffic").to_dict()["title"]["subtitle"]
    assert subtitle == [SOURCES["measured"], SOURCES["modeled"], "modeled: perf.traffic"]
    one = metric_lines(rows[:1], x="x", y="y", detail="cpu").to_dict()["title"]["subtitle"]
    assert one == [f"{SOURCES['measured']} · cpu"]


def test_each_source_of_two_says_its_own_detail_on_its_own_line() -> None:
    """The Sharding Explorer's bytes chart: "measured" from the ranks' logs, "modeled" by perf.traffic;
    bars of one source only say that source's detail."""
    own = {"measured": "the ranks' comm logs", "modeled": "perf.traffic"}
    rows = [
        {"metric": "sent", "value": v, "setting": f"{s} · rank 0", "display": "x", "source": s}
        for s, v in (("modeled", 2.0), ("measured", 3.0))
    ]
    both = metric_bars(rows, source_detail=own).to_dict()["title"]["subtitle"]
    assert both == [f"{SOURCES['measured']} · the ranks' comm logs", f"{SOURCES['modeled']} · perf.traffic"]
    modeled = metric_bars(rows[:1], source_detail=own, detail="unused").to_dict()["title"]["subtitle"]
    assert modeled == [f"{SOURCES['modeled']} · perf.traffic"]
    shared = metric_bars(rows, source_detail={"modeled": "perf.traffic"}, detail="d").to_dict()
    assert shared["title"]["subtitle"] == [SOURCES["measured"], f"{SOURCES['modeled']} · perf.traffic", "d"]


def test_metric_lines_and_bars_draw_the_one_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both build their channels with :func:`~recnotebooks.viz.charts.encoding`: the axes, colour,
    dash by source and tooltips their marks carry are the ones it returned."""
    from recnotebooks.viz import charts

    built: list[charts.Encoding] = []
    real = charts.encoding

    def spy(*args: Any, **kw: Any) -> charts.Encoding:  # hands on what it is given
        built.append(real(*args, **kw))
        return built[-1]

    monkeypatch.setattr(charts, "encoding", spy)
    mixed = [{"p": p, "b": 2.0 * p, "s": s, "source": s} for p in (1, 2) for s in ("measured", "modeled")]
    lines = charts.metric_lines(mixed, x="p", y="b", color="s")
    bars = charts.metric_bars(
        [
            {**r, "metric": "m", "value": r["b"], "setting": f"{r['p']} {r['s']}", "display": "x"}
            for r in mixed
        ]
    )
    assert len(built) == 2
    for chart, enc in zip((lines, bars), built, strict=True):
        want = {k: v.to_dict() for k, v in enc.channels().items() if k != "tooltip"}
        tips = [t.to_dict() for t in enc.tooltip]
        for mark in _marks(chart.to_dict()):
            if mark["mark"]["type"] == "rule":
                continue
            got = mark["encoding"]
            assert got["tooltip"] == tips and got["y"] == want["y"]
            assert got.get("color") == want.get("color") and got.get("strokeDash") == want.get("strokeDash")
    # one order of tooltips: colour, labels, key, value, source (the rows mix two sources)
    assert [t.to_dict()["field"] for t in built[0].tooltip] == ["s", "p", "b", "source"] and built[
        0
    ].stroke_dash
    assert [t.to_dict()["field"] for t in built[1].tooltip] == ["metric", "setting", "display", "source"]
    assert built[1].stroke_dash is None  # a bar has no line to dash


def test_time_breakdown_converts_to_ms_and_keeps_phase_colours() -> None:
    spec = time_breakdown(PHASE_ROWS).to_dict()
    values = chart_rows(spec)
    assert [round(v["ms"], 6) for v in values] == [round(r["seconds_per_step"] * 1e3, 6) for r in PHASE_ROWS]
    now_total = sum(r["seconds_per_step"] for r in PHASE_ROWS if r["setting"] == "now") * 1e3
    assert math.isclose(values[0]["step_ms"], now_total)
    color = spec["encoding"]["color"]["scale"]
    assert color["domain"] == ["data", "embedding_forward", "bottom_mlp"]
    assert color["range"][1] == "#f58518"


@given(st.floats(1e-3, 1e4), st.floats(1e9, 1e16), st.floats(1e9, 1e13))
def test_roofline_ceiling_is_min_of_compute_and_bandwidth(ai: float, peak: float, bw: float) -> None:
    spec = roofline(
        [{"label": "p", "arithmetic_intensity": ai, "flops_per_s": 1.0}], peak_flops=peak, peak_bandwidth=bw
    ).to_dict()
    ceiling = spec["layer"][0]["data"]["values"]
    for r in ceiling:
        assert math.isclose(r["ceiling"], min(peak, bw * r["ai"]), rel_tol=1e-12)
    xs = [r["ai"] for r in ceiling]
    assert xs == sorted(xs) and xs[0] <= min(ai, peak / bw) and xs[-1] >= max(ai, peak / bw)


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([], "empty"),
        ({"a": 1}, "list of dicts"),
        ([{"setting": "a", "phase": "x"}], "no column 'seconds_per_step'"),
        ([{"setting": "a", "phase": "x", "seconds_per_step": float("nan")}], "finite number"),
        ([{"setting": "a", "phase": "x", "seconds_per_step": "1"}], "finite number"),
        ([{"setting": "a", "phase": "x", "seconds_per_step": 1.0}] * (MAX_CHART_ROWS + 1), "aggregate"),
    ],
)
def test_bad_rows_give_clear_errors(rows: object, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        time_breakdown(bad(rows))


def test_log_axes_reject_non_positive_and_hit_rate_is_bounded() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        metric_lines([{"x": 0.0, "y": 1.0}], x="x", y="y", x_log=True)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        hit_rate_curve([{"cache_fraction": 0.1, "hit_rate": 1.5}])
    with pytest.raises(ValueError, match="peak_bandwidth"):
        roofline(
            [{"label": "a", "arithmetic_intensity": 1.0, "flops_per_s": 1.0}],
            peak_flops=1.0,
            peak_bandwidth=0,
        )


def test_factories_compose() -> None:
    c = _all_charts()
    both = alt.hconcat(c["time_breakdown"], c["rank_bars"]) & c["metric_lines"]
    assert "vconcat" in both.to_dict()


def test_save_png_and_svg_offline(tmp_path) -> None:
    chart = _all_charts()["time_breakdown"]
    png = save_png(chart, tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = save_svg(chart, tmp_path / "c.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "MEASURED on this machine" in svg
    with pytest.raises(TypeError, match="Altair chart"):
        save_png(object(), tmp_path / "x.png")


# ----- what the browser draws: whole trail labels, fitting widths, uncrowded ticks, ratios ---------------
def _svg_texts(chart: alt.TopLevelMixin) -> list[str]:
    import re

    import vl_convert as vlc

    return re.findall(r">([^<>]+)</t(?:ext|span)>", vlc.vegalite_to_svg(chart.to_dict()))


TRAIL = ["now: num_tables 16→8, pooling 20→40, batch_size 512→4096", "-1: embedding_dim 32→64", "-2: start"]


def test_trail_labels_are_drawn_whole_one_change_per_line() -> None:
    rows = [{"setting": s, "phase": "data", "seconds_per_step": 0.01 * (i + 1)} for i, s in enumerate(TRAIL)]
    bars = [{"metric": "m", "value": 1.0 + i, "setting": s, "display": f"{i}"} for i, s in enumerate(TRAIL)]
    for chart in (time_breakdown(rows), metric_bars(bars)):
        texts = _svg_texts(chart)  # what Vega itself draws (vl-convert), not what we asked for
        for line in (
            "now: num_tables 16→8",
            "pooling 20→40",
            "batch_size 512→4096",
            "-1: embedding_dim 32→64",
        ):
            assert line in texts, (line, texts)
        assert not any("…" in t for t in texts)
    step = time_breakdown(rows).to_dict()["height"]["step"]
    assert step >= 3 * 14  # three lines of 14 px fit in the band of the first bar


@given(columns=st.integers(1, 6), label_chars=st.integers(3, 40), budget=st.integers(500, 1200))
def test_metric_bars_fit_their_width_budget(columns: int, label_chars: int, budget: int) -> None:
    import re

    import vl_convert as vlc
    from hypothesis import assume

    assume(
        (budget - min(280, label_chars * 7.6 + 8) - 20 * (columns - 1)) / columns >= 70
    )  # above the 60 px floor
    rows = [
        {"metric": f"metric {k}", "value": 10.0**k, "setting": "x" * label_chars, "display": f"{10.0**k:g} u"}
        for k in range(columns)
    ]
    spec = metric_bars(rows, columns=columns, total_width=budget).to_dict()
    svg = vlc.vegalite_to_svg(spec)
    width = re.search(r'<svg[^>]* width="([\d.]+)"', svg)
    assert width is not None, svg[:200]
    drawn = float(width.group(1))
    assert drawn <= budget + 40  # Vega's padding and rounding; the old fixed widths overflowed by 100s of px


def test_part_bars_stack_the_parts_in_order_with_their_colours_and_fit_850_px() -> None:
    import re

    import vl_convert as vlc

    parts = ["HBM", "host DRAM behind a device cache", "host DRAM read over PCIe (UVM)", "parameter servers"]
    colors = ["#4c78a8", "#f58518", "#e45756", "#9d755d"]
    rows = [{"setting": s, "where": w, "gb": 100.0 * (k + 1), "display": "x"}
            for s in TRAIL[:2] for k, w in enumerate(parts) if k != 1]  # fmt: skip
    spec = part_bars(rows, value="gb", part="where", parts=parts, colors=colors, text="display").to_dict()
    color = spec["encoding"]["color"]
    assert color["scale"] == {
        "domain": parts,
        "range": colors,
    }  # every part in the legend, a part with no row too
    assert [r["_order"] for r in chart_rows(spec)] == [0, 2, 3, 0, 2, 3]
    assert spec["encoding"]["x"]["stack"] == "zero"
    svg = vlc.vegalite_to_svg(spec)
    width = re.search(r'<svg[^>]* width="([\d.]+)"', svg)
    assert width is not None, svg[:200]
    drawn = float(width.group(1))
    assert drawn <= 850
    texts = _svg_texts(part_bars(rows, value="gb", part="where", parts=parts, colors=colors))
    assert all(p in texts for p in parts) and "now: num_tables 16→8" in texts
    with pytest.raises(ValueError, match="one colour per part"):
        part_bars(rows, value="gb", part="where", parts=parts, colors=colors[:2])
    with pytest.raises(ValueError, match="gb"):
        part_bars([{**rows[0], "gb": float("nan")}], value="gb", part="where")


def test_metric_lines_put_few_x_ticks_on_the_data_and_none_crowd() -> None:
    import re

    import vl_convert as vlc

    pooling = [1, 2, 5, 10, 20, 40, 80, 120]
    chart = metric_lines([{"p": p, "b": p * 10.0} for p in pooling], x="p", y="b", x_log=True)
    svg = vlc.vegalite_to_svg(chart.properties(width=260, height=160).to_dict())
    group = re.findall(r'role-axis-label"[^>]*>(.*?)</g>', svg)[0]  # the x axis
    ticks = re.findall(r"translate\(([\d.]+),[\d.]+\)[^>]*>([^<]+)</text>", group)
    assert [t for _, t in ticks] == [str(p) for p in pooling]
    xs = [float(x) for x, _ in ticks]
    half = [len(t) * 12 * 0.6 / 2 for _, t in ticks]  # half a label's width at 12 px
    assert all(xs[i + 1] - xs[i] >= half[i] + half[i + 1] for i in range(len(xs) - 1))


def test_ratio_bars_draw_agreement_and_a_band() -> None:
    rows = [{"run": "a", "ratio": 0.59, "note": "n"}, {"run": "b", "ratio": 9.57, "note": "n"}]
    spec = ratio_bars(rows, value_title="modeled ÷ published", source="modeled").to_dict()
    layers = spec["layer"]
    band = [m for m in layers if m["mark"]["type"] == "rect"][0]
    assert band["data"]["values"][0]["lo"] == 0.5 and band["data"]["values"][0]["hi"] == 2.0
    rule = [m for m in layers if m["mark"]["type"] == "rule" and "transform" in m][0]
    assert rule["transform"][0]["calculate"] == "1.0"
    texts = _svg_texts(ratio_bars(rows))
    assert "0.59x" in texts and "9.57x" in texts
    assert all("tooltip" in m["encoding"] for m in layers)
    with pytest.raises(ValueError, match="must be > 0"):
        ratio_bars([{"run": "a", "ratio": 0.0}])
    with pytest.raises(ValueError, match="band must hold the reference"):
        ratio_bars(rows, band=(2.0, 4.0))


def test_chart_widgets_get_page_unique_svg_ids() -> None:
    from recnotebooks.viz.theme import ChartWidget, enable_offline, unique_id_bundle

    enable_offline()
    w = ChartWidget(time_breakdown(PHASE_ROWS))
    assert ChartWidget._ids_unique and w.embed_options == {"renderer": "svg", "actions": False}
    esm = w._esm
    # each copy of the Vega module numbers itself page-wide, and every clip path and gradient id carries it
    assert esm.startswith("const __recnbIds=") and "globalThis.__recnbViews" in esm.splitlines()[0]
    assert esm.count('clip_id="clip"+__recnbIds+') == 1 and esm.count('id="gradient_"+__recnbIds+') == 1
    assert unique_id_bundle("export default {}") is None  # a Vega that changed: not patched (canvas instead)
    assert alt.renderers.active == "recnotebooks"  # static charts are ChartWidgets too
    bundle = time_breakdown(PHASE_ROWS)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in (bundle[0] if isinstance(bundle, tuple) else bundle)


def test_factories_take_human_axis_titles() -> None:
    lines = metric_lines(
        [{"p": 1, "b": 2.0}, {"p": 2, "b": 3.0}],
        x="p",
        y="b",
        x_title="pooling factor",
        y_title="samples per joule",
    )
    bars = metric_bars(
        [{"metric": "zion: samples per joule", "value": 3.0, "setting": "now", "display": "3"}],
        value_title="samples per joule",
    )
    texts = _svg_texts(lines) + _svg_texts(bars)
    assert "pooling factor" in texts and texts.count("samples per joule") >= 2  # axis titles, header line
    assert "zion" in texts  # the header "zion: samples per joule" on two lines


def test_stack_draws_what_altair_composition_draws() -> None:
    """:func:`stack` skips Altair's copies; its spec is that of ``(a & b).resolve_scale(...)``."""
    from recnotebooks.viz.charts import metric_bars, time_breakdown
    from recnotebooks.viz.tidy import stack

    steps = time_breakdown([{"setting": "now", "phase": p, "seconds_per_step": 0.01} for p in ("fwd", "bwd")])
    bars = metric_bars([{"metric": "m", "value": 2.0, "setting": "now", "display": "2"}], shared_scale=True)
    altair_way = (steps.properties(width=400) & bars).resolve_scale(color="independent")
    assert stack(steps.properties(width=400), bars).to_dict() == altair_way.to_dict()  # validated too
    shared = alt.Chart(alt.Data(values=[{"a": 1}])).mark_point().encode(x="a:Q")
    with pytest.raises(ValueError, match="alt.vconcat"):
        stack(shared, shared)  # one data object: Altair lifts it, stack does not


def test_an_unreliable_measured_bar_is_drawn_pale_and_says_so() -> None:
    """A bar whose rows say ``reliable: False`` is pale, carries "⚠ NOT RELIABLE" on it and its
    fastest..slowest whisker; the subtitle gives the reason. A reliable chart is plain bars."""
    import json

    why = "its steps varied 3.1-fold"

    def rows(reliable: bool) -> list[dict[str, object]]:
        return [{"setting": s, "phase": p, "seconds_per_step": v, "source": "measured",
                 "reliable": reliable or s == "-1", "reliability": "" if reliable or s == "-1" else why,
                 "step_min": 0.004, "step_max": 0.0124}
                for s in ("now", "-1") for p, v in (("top_mlp", 0.003), ("embedding_forward", 0.002))
                ]  # fmt: skip

    plain = time_breakdown(rows(True), source="measured").to_dict()
    assert plain["mark"]["type"] == "bar" and "layer" not in plain
    shaky = time_breakdown(rows(False), source="measured").to_dict()
    marks = [layer["mark"]["type"] for layer in shaky["layer"]]
    assert marks == ["bar", "text", "rule"]
    assert any("NOT RELIABLE" in line and why in line for line in shaky["title"]["subtitle"])
    data = json.loads(shaky["data"]["values"])
    pale = {r["setting"]: r["_opacity"] for r in data}
    assert pale["now"] < 0.5 and pale["-1"] == 1.0  # the reliable bar keeps its full colour
    warned = [r for r in data if r.get("_warn")]
    assert [r["setting"] for r in warned] == ["now"] and warned[0]["max_ms"] == pytest.approx(12.4)


def test_a_faded_line_under_another_is_drawn_once_and_said() -> None:
    """The traffic app's trail: -1, -2 and -3 all at batch 2048 draw one curve against pooling;
    drawn three times, faded, their colours would mix into one no legend entry has. The chart
    keeps the newest of equal lines, and its subtitle names the others."""
    import json

    from recnotebooks.viz.traffic import lookup_traffic

    settings = {
        "now: pooling 20→40": dict(pooling=40, batch_size=8192),
        "-1: batch_size 2048→8192": dict(pooling=20, batch_size=8192),
        "-2: pooling 1→20": dict(pooling=20, batch_size=2048),
        "-3: start": dict(pooling=1, batch_size=2048),
    }
    rows = [
        {**r, "setting": name}
        for name, kw in settings.items()
        for r in lookup_traffic(**kw).tables["traffic"]
    ]
    chart = metric_lines(rows, x="pooling", y="MB_per_step", color="setting", highlight="now: pooling 20→40")
    spec = chart.to_dict()
    drawn = {r["setting"] for r in chart_rows(spec)}
    # -1 moved the batch back to 8192 but not the pooling: its line is the highlighted one's
    assert drawn == {"now: pooling 20→40", "-2: pooling 1→20"}
    subtitle = json.dumps(spec["title"], ensure_ascii=False)
    assert "-1: the same line as now" in subtitle and "-3: the same line as -2" in subtitle
    # different lines all stay; without a highlight nothing is faded, so nothing is dropped
    plain = metric_lines(rows, x="pooling", y="MB_per_step", color="setting")
    assert {r["setting"] for r in chart_rows(plain.to_dict())} == set(settings)


def _layers(spec: object) -> list[dict]:
    found: list[dict] = []
    if isinstance(spec, dict):
        if "mark" in spec:
            found.append(spec)
        for v in spec.values():
            found += _layers(v)
    elif isinstance(spec, list):
        for v in spec:
            found += _layers(v)
    return found


def test_metric_lines_draw_no_empty_layer_and_no_dash_on_text() -> None:
    """Issue 37's console warnings: Vega's "Infinite extent" (a layer whose filter keeps no row: the
    ring of the current point when none is current) and Vega-Lite's "strokeDash dropped as it is
    incompatible with text" (the source's dash on the current point's label)."""
    rows = [
        {"x": i, "y": 2.0 * i, "source": s, "line": s} for i in (1, 2, 3) for s in ("measured", "modeled")
    ]
    none_current = metric_lines(rows, x="x", y="y", color="line").to_dict()
    assert not any("filter" in str(layer.get("transform", "")) for layer in _layers(none_current))
    ringed = metric_lines(rows, x="x", y="y", color="line", current=2).to_dict()
    marks = [
        layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]
        for layer in _layers(ringed)
    ]
    assert marks.count("point") == 2 and "text" in marks
    for layer in _layers(ringed):
        dash = layer.get("encoding", {}).get("strokeDash")
        kind = layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]
        if kind == "text":
            assert dash is None or "field" not in dash, dash
        else:
            assert dash is not None and dash.get("field") == "source"


def test_a_band_axis_title_sits_above_its_labels() -> None:
    """Issue 37: beside two-line trail labels Vega placed the title "setting" by the first line's
    width and it ran over a longer second line; above the labels it cannot."""
    rows = [{"setting": "now: a 1→2, rows_per_table 1M→10M", "phase": "data", "seconds_per_step": 0.01},
            {"setting": "-1: start", "phase": "data", "seconds_per_step": 0.02}]  # fmt: skip
    axis = time_breakdown(rows).to_dict()["encoding"]["y"]["axis"]
    assert axis["title"] == "setting" and axis["titleAngle"] == 0 and axis["titleY"] < 0
    assert axis["titleX"] <= -axis["labelLimit"]  # at the labels' left edge, not over them
