"""The app pattern: pure function, in-place chart, history trail, debounce, in-app errors."""

from __future__ import annotations

import asyncio

import altair as alt
import ipywidgets as W
import pytest

from recnotebooks.viz.app import App, AppError, HistoryEntry, Result, history_rows
from recnotebooks.viz.charts import metric_bars


def _toy(history: int = 3, debounce_s: float = 0.0) -> tuple[App, list[dict]]:
    calls: list[dict] = []

    def compute(a: int, b: int) -> Result:
        calls.append({"a": a, "b": b})
        if a * b > 50:
            raise ValueError(f"a*b={a * b} does not fit (limit 50)")
        return Result(
            {"m": [{"metric": "product", "value": float(a * b), "display": str(a * b)}]}, [f"a={a}"]
        )

    def render(hist: list[HistoryEntry]) -> alt.FacetChart:
        return metric_bars(history_rows(hist, "m"), highlight=hist[0].label, source="analytic")

    controls = {"a": W.IntSlider(value=1, min=1, max=10), "b": W.IntSlider(value=2, min=1, max=10)}
    return App("toy", controls, compute, render, history=history, debounce_s=debounce_s), calls


def _values(app: App) -> list[float]:
    return [r["value"] for d in app.chart_data() for r in d]


def test_chart_is_updated_in_place_with_a_history_trail() -> None:
    app, calls = _toy(history=3)
    widget = app.chart
    assert _values(app) == [2.0]
    app.set(a=2)
    app.set(b=3)
    app.set(a=3)
    assert app.chart is widget  # same widget, new chart
    assert isinstance(app.altair_chart, alt.TopLevelMixin)
    assert app.chart.spec == app.altair_chart.to_dict()  # what the browser holds is the valid chart
    assert _values(app) == [9.0, 6.0, 4.0]  # newest first, trail capped at 3
    labels = [e.label for e in app.history]
    assert labels[0].startswith("now") and labels[1].startswith("-1") and "a 2→3" in labels[0]
    assert calls[-1] == {"a": 3, "b": 3} and app.updates == 3
    assert "a=3" in app.message.value


def test_same_setting_does_not_recompute() -> None:
    app, calls = _toy()
    n = len(calls)
    app.set(a=1)
    assert len(calls) == n


def test_error_is_shown_in_the_app_and_last_chart_kept() -> None:
    app, _ = _toy()
    app.set(a=5)
    before = app.chart_data()
    with pytest.raises(AppError, match="does not fit"):
        app.set(a=10, b=10)
    assert app.chart_data() == before
    assert "recnb-error" in app.message.value and "does not fit" in app.message.value
    assert "Traceback" not in app.message.value
    app.set(b=1)  # recovers
    assert app.error is None and "recnb-error" not in app.message.value
    assert _values(app)[0] == 10.0


def test_widget_change_without_event_loop_updates_at_once() -> None:
    app, _ = _toy(debounce_s=0.5)
    app.controls["a"].value = 4  # as a slider would
    assert _values(app)[0] == 8.0


def test_widget_changes_are_debounced_in_an_event_loop() -> None:
    app, calls = _toy(debounce_s=0.05)

    async def drag() -> None:
        for v in range(2, 8):
            app.controls["a"].value = v
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.2)

    n = len(calls)
    asyncio.run(drag())
    assert len(calls) == n + 1  # one recompute for the whole drag, at the last value
    assert calls[-1]["a"] == 7 and app.updates == 1


def _never_drawn(history: list[HistoryEntry]) -> alt.TopLevelMixin:
    """The render of an app that is refused before it draws anything."""
    raise AssertionError("an app refused at construction drew a chart")


def test_bad_driving_input_is_rejected_clearly() -> None:
    app, _ = _toy()
    with pytest.raises(KeyError, match="unknown control"):
        app.set(c=1)
    with pytest.raises(ValueError, match="history must be"):
        App("x", {}, lambda: Result({}), _never_drawn, history=0)


def test_a_bad_initial_setting_raises_at_construction() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        controls = {"a": W.IntSlider(value=10, max=10), "b": W.IntSlider(value=10, max=10)}

        def compute(a: int, b: int) -> Result:
            raise ValueError("a*b does not fit")

        App("bad", controls, compute, _never_drawn)


def test_apps_render_offline_with_no_cdn() -> None:
    app, _ = _toy()
    esm = app.chart._esm  # the ESM module the widget sends to the browser
    assert (
        "esm.sh" not in esm and "import " not in esm[:200] and len(esm) > 100_000
    )  # the bundle, not a CDN import
    assert app.chart.embed_options == {"renderer": "svg", "actions": False}


def test_set_checks_every_value_before_changing_any_widget() -> None:
    app, _ = _toy()
    with pytest.raises(ValueError, match=r"b must be an int in \[1, 10\], got 11"):
        app.set(a=3, b=11)  # an IntSlider would clamp 11 to 10 silently
    assert app.values == {"a": 1, "b": 2} and app.error is None


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (2.5, TypeError, r"a must be an int in \[1, 10\], got 2.5 \(float\)"),  # a slider would round it
        (True, TypeError, r"a must be an int in \[1, 10\], got True \(bool\)"),  # a slider would take it as 1
        (3.0, TypeError, r"got 3.0 \(float\)"),
        ("3", TypeError, r"got '3' \(str\)"),
        (0, ValueError, r"a must be an int in \[1, 10\], got 0"),
    ],
)
def test_integer_sliders_refuse_floats_bools_and_strings(value: object, error: type, message: str) -> None:
    app, calls = _toy()
    n = len(calls)
    with pytest.raises(error, match=message):
        app.set(a=value, b=3)
    assert app.values == {"a": 1, "b": 2} and len(calls) == n  # nothing moved, nothing recomputed


def _float_app() -> App:
    def compute(x: float, mode: str) -> Result:
        return Result({"m": [{"metric": mode, "value": x, "display": f"{x:g}"}]})

    controls = {"x": W.FloatSlider(value=0.5, min=0.0, max=1.0), "mode": W.ToggleButtons(options=["a", "b"])}
    return App("floats", controls, compute, lambda h: metric_bars(history_rows(h, "m"), source="analytic"))


@pytest.mark.parametrize(
    ("values", "error", "message"),
    [
        ({"x": True}, TypeError, r"x must be a finite number in \[0, 1\], got True \(bool\)"),
        ({"x": float("nan")}, ValueError, r"x must be a finite number in \[0, 1\], got nan"),
        ({"x": 1.5}, ValueError, r"x must be a finite number in \[0, 1\], got 1.5"),
        ({"mode": "c"}, ValueError, r"mode must be one of \['a', 'b'\], got 'c'"),
    ],
)
def test_float_sliders_and_options_refuse_bad_values(values: dict, error: type, message: str) -> None:
    app = _float_app()
    with pytest.raises(error, match=message):
        app.set(**values)
    assert app.values == {"x": 0.5, "mode": "a"}


def test_numpy_scalars_reach_the_widgets_as_python_numbers() -> None:
    import numpy as np

    app, _ = _toy()
    app.set(a=np.int64(4))
    assert type(app.values["a"]) is int and _values(app)[0] == 8.0
    f = _float_app()
    f.set(x=np.float32(0.25))
    assert type(f.values["x"]) is float and f.values["x"] == 0.25


def test_history_labels_keep_the_whole_change() -> None:
    controls = {k: W.IntSlider(value=1, min=1, max=100) for k in ("num_tables", "pooling", "batch_size")}

    def compute(**kw: int) -> Result:
        return Result({"m": [{"metric": "sum", "value": float(sum(kw.values())), "display": "x"}]})

    app = App("long", controls, compute, lambda h: metric_bars(history_rows(h, "m"), source="analytic"))
    app.set(num_tables=16, pooling=20, batch_size=64)
    app.set(num_tables=8, pooling=40)
    assert [e.label for e in app.history] == [
        "now: num_tables 16→8, pooling 20→40",
        "-1: num_tables 1→16, pooling 1→20, batch_size 1→64",
        "-2: start",
    ]
    shown = {r["setting"] for d in app.chart_data() for r in d}
    assert "-1: num_tables 1→16, pooling 1→20, batch_size 1→64" in shown  # what the chart draws, uncut


def test_settle_runs_an_update_that_is_due_and_pending_says_so() -> None:
    """A widget moved inside a running event loop is debounced; ``settle`` runs that update now (what
    the exercise checker calls before it judges an app), and says False when the setting fails."""

    async def scenario() -> None:
        app, calls = _toy(debounce_s=5.0)  # long enough that only settle() can run it in this test
        assert not app.pending and app.settle()
        app.controls["a"].value = 4  # as a slider would: an update is scheduled, not run
        assert app.pending and _values(app)[0] == 2.0
        assert app.settle() and not app.pending and _values(app)[0] == 8.0
        n = len(calls)
        assert app.settle() and len(calls) == n  # nothing due: nothing recomputed
        app.controls["b"].value = 10  # a*b = 40 fits; then one that does not
        app.controls["a"].value = 6
        assert app.pending and not app.settle() and app.error and app.pending  # the chart keeps 4*2
        assert _values(app)[0] == 8.0

    asyncio.run(scenario())


def test_controls_sit_in_a_grid_of_cells_as_wide_as_the_widest_control() -> None:
    """Every control gets a cell wide enough for its whole label, its options and a slider's track;
    the grid reflows (auto-fill) instead of cutting a row of fixed-width widgets."""
    from recnotebooks.viz.app import controls_grid
    from recnotebooks.viz.controls import SLIDER_TRACK_PX, UI_CHAR_PX, control_width

    short = W.IntSlider(value=1, min=1, max=10, description="a")
    long = W.IntSlider(value=1, min=1, max=10, description="a much longer label for this slider")
    toggles = W.ToggleButtons(options=["lru", "lfu", "static", "setassoc"], description="policy")
    assert control_width(long) - control_width(short) == pytest.approx(
        (len(long.description) - 1) * UI_CHAR_PX, abs=1
    )
    assert control_width(short) >= SLIDER_TRACK_PX + 70  # a track and a readout besides the label
    assert (
        control_width(toggles) > sum(len(o) for o in toggles.options) * UI_CHAR_PX + 4 * 20
    )  # words + padding
    grid = controls_grid([short, long, toggles])
    cell = max(control_width(w) for w in (short, long, toggles))
    assert grid.layout.grid_template_columns == f"repeat(auto-fill, minmax(min({cell}px, 100%), 1fr))"
    assert all(w.layout.width == "auto" for w in (short, long, toggles))


def test_history_labels_show_a_value_as_its_control_does() -> None:
    """Issue 37: the trail said "rows 1000000→10000000" where the slider shows 1M; a number reads
    as its option's label, else as the readout shows it; a label holding ", " (the trail's line
    break) is not used; a name stays a name."""
    controls = {
        "rows": W.SelectionSlider(options=[("1M", 10**6), ("10M", 10**7)], value=10**6),
        "batch": W.SelectionSlider(options=[4096, 131072], value=4096),
        "size": W.Dropdown(options=[("small, 1 GB", 1), ("big, 9 GB", 9)], value=1),
        "kind": W.Dropdown(options=[("the dot one", "dot"), ("cat", "cat")], value="dot"),
    }

    def compute(**kw: object) -> Result:
        return Result({"m": [{"metric": "x", "value": 1.0, "display": "1"}]})

    app = App("labels", controls, compute, lambda h: metric_bars(history_rows(h, "m"), source="analytic"))
    app.set(rows=10**7, batch=131072, size=9, kind="cat")
    assert app.history[0].label == "now: rows 1M→10M, batch 4096→131072, size 1→9, kind dot→cat"
