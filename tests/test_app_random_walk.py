"""No control combination raises: random walks over every app's controls.

For every explorer app of the notebooks (embedding traffic 00, Architecture 01, Efficiency and GPU
Advantage 02, Cache 03, Sharding 04, Server 05, Training Job Planner 06,
Generative Recommender 07), hypothesis draws
sequences of moves, each a control and a value from that control's own options or range (read
from the app's widgets, not copied here), and drives them through ``app.set``. After every move
the app shows either a result or a message naming what is wrong:

* a result: no NaN or infinity in its tables, its notes or the chart's data; the chart is the
  current setting's (the trail's newest entry holds the widgets' values and the chart's data is
  the one the current trail draws);
* an :class:`~recnotebooks.viz.app.AppError`: a sentence, never a bare exception name
  (``AssertionError:``, ``KeyError: 'x'``) — and the app recovers on the next setting that
  works (its start).

Measured apps run with their measurement off (``measure=False``): the walk is about the controls,
and a measurement takes a second per move.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable

import ipywidgets as W
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recnotebooks.viz.advantage import advantage_explorer
from recnotebooks.viz.app import App, AppError, _datasets
from recnotebooks.viz.architecture import architecture_explorer
from recnotebooks.viz.cache import cache_explorer
from recnotebooks.viz.efficiency import efficiency_explorer
from recnotebooks.viz.hstu import hstu_explorer
from recnotebooks.viz.planner import job_planner
from recnotebooks.viz.servers import server_explorer
from recnotebooks.viz.sharding import sharding_explorer
from recnotebooks.viz.traffic import lookup_traffic_app

#: Every app of the notebooks, by name, built as a walk needs it (nothing measured).
APPS: dict[str, Callable[[], App]] = {
    "traffic": lambda: lookup_traffic_app(history=3),
    "architecture": lambda: architecture_explorer(measure=False, history=3),
    "efficiency": lambda: efficiency_explorer(measure=False, history=3),
    "advantage": lambda: advantage_explorer(history=3),
    "cache": lambda: cache_explorer(measure=False, num_ids=20_000, history=3),
    "sharding": lambda: sharding_explorer(history=3),
    "servers": lambda: server_explorer(history=3),
    "planner": lambda: job_planner(history=3),
    "hstu": lambda: hstu_explorer(measure=False, history=3),
}
#: Moves per walk and walks per app (the planner's search makes its moves the slowest): the whole
#: file runs in about two minutes on two busy cores. ``RECNB_WALKS=10`` walks ten times as many (a
#: deeper search, by hand; CI runs the same walks every time).
STEPS = {"planner": 7}
_SCALE = int(os.environ.get("RECNB_WALKS", "1"))
EXAMPLES = {name: n * _SCALE for name, n in {"planner": 12, "cache": 8}.items()}
DEFAULT_EXAMPLES = 15 * _SCALE

#: An exception's class name where a sentence should be: "AssertionError: ...", "KeyError: 'x'"
EXCEPTION_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|Traceback|\bassert\b")
NOT_A_NUMBER = re.compile(r"\b(nan|inf|-inf|infinity)\b", re.IGNORECASE)


def control_values(widget: W.ValueWidget) -> list[object] | tuple[float, float]:
    """What a control allows, read off the widget: its options' values, or its slider's range."""
    options = getattr(widget, "options", None)
    if options is not None:
        return [o[1] if isinstance(o, tuple) else o for o in options]
    if isinstance(widget, W.IntSlider | W.FloatSlider):
        return (widget.min, widget.max)
    raise TypeError(f"no values known for a {type(widget).__name__}")  # a new kind of control


def value_strategy(widget: W.ValueWidget) -> st.SearchStrategy[object]:
    allowed = control_values(widget)
    if isinstance(allowed, tuple):
        lo, hi = allowed
        if isinstance(widget, W.IntSlider):
            return st.integers(int(lo), int(hi))
        return st.floats(float(lo), float(hi), allow_nan=False)
    return st.sampled_from(allowed)


def _numbers(obj: object) -> list[float]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [float(obj)]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _numbers(v)]
    if isinstance(obj, list | tuple):
        return [x for v in obj for x in _numbers(v)]
    return []


def _strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _strings(v)]
    if isinstance(obj, list | tuple):
        return [x for v in obj for x in _strings(v)]
    return []


def check_message(message: str) -> None:
    """An in-app error is a sentence naming what is wrong, never an exception's class name."""
    assert message.strip(), "an empty message"
    assert not EXCEPTION_NAME.search(message), f"an exception name, not a sentence: {message!r}"
    assert len(message.split()) >= 4 and not message.rstrip().endswith(":"), f"a bare message: {message!r}"


def check_shown(app: App) -> None:
    """The app shows its widgets' setting: finite numbers, the current trail drawn."""
    assert app.error is None and not app.pending
    assert app.history[0].values == app.values, "the chart's newest entry is not the widgets' setting"
    result = app.result
    for name, rows in result.tables.items():
        bad = [x for x in _numbers(rows) if not math.isfinite(x)]
        assert not bad, f"table {name!r} holds {bad[:3]}"
    for note in result.notes:
        assert not NOT_A_NUMBER.search(note), f"a note with a non-number: {note!r}"
        assert not EXCEPTION_NAME.search(note), f"a note naming an exception: {note!r}"
    data = app.chart_data()
    assert data, "a chart with no data"
    bad = [x for x in _numbers(data) if not math.isfinite(x)]
    assert not bad, f"the chart's data holds {bad[:3]}"
    for text in _strings(data):
        assert not NOT_A_NUMBER.search(text), f"a label with a non-number in the chart: {text!r}"
    # not stale: what the chart shows is what the current trail draws
    assert data == _datasets(app.render(app.history).to_dict(validate=False))


def walk(app: App, moves: list[tuple[str, object]]) -> None:
    """Drive ``moves`` through ``app.set``; after each: a result (checked) or a clear message."""
    start = dict(app.values)
    failed = False
    for name, value in moves:
        try:
            app.set(**{name: value})
        except AppError as e:
            check_message(str(e))
            assert app.error == str(e)
            failed = True
            continue
        check_shown(app)
    if failed:  # the app recovers: its start setting shows again
        app.set(**start)
        check_shown(app)


def moves_of(app: App, steps: int) -> st.SearchStrategy[list[tuple[str, object]]]:
    names = sorted(app.controls)
    move = st.sampled_from(names).flatmap(
        lambda n: st.tuples(st.just(n), value_strategy(app.controls[n]))  # the control's own values
    )
    return st.lists(move, min_size=1, max_size=steps)


_BUILT: dict[str, App] = {}
_STARTS: dict[str, dict[str, object]] = {}


def _app(name: str) -> App:
    """One app per kind, set back to its start before each walk (building one is the slow part)."""
    if name not in _BUILT:
        _BUILT[name] = APPS[name]()
        _STARTS[name] = dict(_BUILT[name].values)
    app = _BUILT[name]
    app.set(**_STARTS[name])
    check_shown(app)
    return app


def _walks(examples: int) -> settings:
    """Deterministic walks (CI sees the same ones each run), with no deadline per walk."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.mark.parametrize("name", sorted(set(APPS) - {"planner"}))
def test_every_control_combination_shows_a_result_or_says_why(name: str) -> None:
    @_walks(EXAMPLES.get(name, DEFAULT_EXAMPLES))
    @given(moves=st.deferred(lambda: moves_of(_app(name), STEPS.get(name, 8))))
    def run(moves: list[tuple[str, object]]) -> None:
        walk(_app(name), moves)

    run()


#: The walk of issue 37 in notebook 06 §2 that ended on a bare "AssertionError:" (a plan breaking
#: several rules with no feasible setting within two changes), and the moves after it.
PLANNER_WALK: list[tuple[str, object]] = [
    ("model", "tiny"),
    ("hardware", "big_basin"),
    ("nodes", 2),
    ("gpus", 2),
    ("strategy", "greedy"),
    ("placement", "cache"),
    ("cache_policy", "lfu"),
    ("batch_size", 131072),
    ("dtype", "amp_bf16"),
    ("software", "hugectr"),
    ("nodes", 4),
    ("batch_size", 65536),
    ("gpus", 1),
    ("cache_fraction", 0.1),
]


@_walks(EXAMPLES["planner"])
@given(moves=st.deferred(lambda: moves_of(_app("planner"), STEPS["planner"])))
@example(moves=PLANNER_WALK)
def test_every_planner_setting_shows_a_result_or_says_why(moves: list[tuple[str, object]]) -> None:
    walk(_app("planner"), moves)


def test_the_planner_walk_of_issue_37_is_a_verdict_at_every_step() -> None:
    """Each step of the walk shows a plan: an impossible one is a verdict with its reasons and the
    setting shown instead, never an error."""
    app = job_planner(history=3)
    for name, value in PLANNER_WALK:
        r = app.set(**{name: value})
        assert r.tables["verdict"] and r.tables["totals"], (name, value)
    assert r.tables["verdict"][0]["verdict"] == "impossible"
