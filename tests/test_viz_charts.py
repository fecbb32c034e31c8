"""Chart factories: labels, tooltips, data checks, offline export."""

from __future__ import annotations

import math

import altair as alt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.viz import (
    SOURCES,
    hit_rate_curve,
    metric_bars,
    metric_lines,
    rank_bars,
    roofline,
    save_png,
    save_svg,
    source_label,
    time_breakdown,
    training_curves,
)
from recnotebooks.viz.charts import MAX_ROWS, chart_rows

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
        ),  # fmt: skip
        "metric_bars": metric_bars(
            [
                {"metric": m, "value": 1.0 + k, "setting": s, "display": "x"}
                for m in ("a", "b")
                for k, s in enumerate(["now", "-1"])
            ],
            source="analytic",
        ),  # fmt: skip
        "roofline": roofline(
            [{"label": "x", "arithmetic_intensity": 2.0, "flops_per_s": 1e11, "source": "modeled"}],
            peak_flops=1e13,
            peak_bandwidth=1e12,
        ),  # fmt: skip
        "rank_bars": rank_bars(
            [{"rank": r, "phase": "all_to_all", "seconds": 0.1 * r + 0.01} for r in range(4)],
            value="seconds",
            color="phase",
            source="modeled",
        ),  # fmt: skip
        "hit_rate_curve": hit_rate_curve(
            [{"cache_fraction": f, "hit_rate": f * 5, "policy": "lru"} for f in (0.01, 0.1)],
            source="measured",
        ),  # fmt: skip
        "training_curves": training_curves([{"step": 1, "loss": 0.6}, {"step": 2, "loss": 0.5, "auc": 0.7}]),
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
    spec = roofline([{"label": "p", "arithmetic_intensity": ai, "flops_per_s": 1.0}], peak_flops=peak,
                    peak_bandwidth=bw).to_dict()  # fmt: skip
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
        ([{"setting": "a", "phase": "x", "seconds_per_step": 1.0}] * (MAX_ROWS + 1), "aggregate"),
    ],
)
def test_bad_rows_give_clear_errors(rows: object, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        time_breakdown(rows)  # type: ignore[arg-type]


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
