"""Exercise checks: right answers pass, wrong ones get escalating hints, never the answer."""

from __future__ import annotations

import asyncio

import altair as alt
import pytest
from _values import bad
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks import lab
from recnotebooks.config import preset
from recnotebooks.viz.app import HistoryEntry
from recnotebooks.viz.architecture import architecture_config
from recnotebooks.viz.traffic import lookup_traffic_app


@pytest.fixture(autouse=True)
def _fresh() -> None:
    lab.reset()


def test_smoke_mode_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECNB_SMOKE", "1")
    assert lab.smoke_mode()
    monkeypatch.setenv("RECNB_SMOKE", "0")
    assert not lab.smoke_mode()
    monkeypatch.delenv("RECNB_SMOKE")
    assert not lab.smoke_mode()


def test_right_answers_pass() -> None:
    assert lab.check("01.parameters", preset("tiny").parameters)
    assert lab.check(
        "01.interaction", architecture_config(num_tables=8, embedding_dim=32).interaction_output_dim
    )
    import torch

    assert lab.check("00.threads", torch.get_num_threads())


@pytest.mark.parametrize("exercise_id", ["01.parameters", "01.interaction"])
def test_wrong_answers_get_escalating_hints_not_the_answer(exercise_id: str) -> None:
    expected = {
        "01.parameters": preset("tiny").parameters,
        "01.interaction": architecture_config(num_tables=8, embedding_dim=32).interaction_output_dim,
    }[exercise_id]
    hints = lab.EXERCISES[exercise_id].hints
    seen = []
    for k in range(len(hints) + 1):
        fb = lab.check(exercise_id, expected + 1)
        assert not fb and f"Hint {min(k + 1, len(hints))}/{len(hints)}" in fb.message
        for text in (fb.message, fb._repr_html_(), str(fb)):
            assert str(expected) not in text and f"{expected:,}" not in text
        seen.append(fb.message)
    assert len(set(seen)) == len(hints)  # every hint shown once, the last one repeats


def test_a_malformed_answer_is_feedback_not_an_exception() -> None:
    fb = lab.check("01.parameters", "many")
    assert not fb and "as a number" in fb.message


def test_an_unknown_exercise_is_feedback_naming_the_known_ones() -> None:
    fb = lab.check("99.nope", 1)
    assert isinstance(fb, lab.Feedback) and not fb
    assert "not an exercise" in fb.message and "01.parameters" in fb.message
    huge = lab.check("9" * 100_000, 1)  # a huge id is named, cut short
    assert not huge and len(huge.message) < 2_000 and len(huge.exercise) <= 40


@pytest.mark.parametrize("exercise_id", [3, None, 1.5, ("01", "x"), b"01.parameters", ["00.threads"]])
def test_an_id_that_is_not_a_string_is_feedback(exercise_id: object) -> None:
    fb = lab.check(bad(exercise_id), 1)
    assert isinstance(fb, lab.Feedback) and not fb
    assert "must be a string" in fb.message and type(exercise_id).__name__ in fb.message
    assert str(fb) and fb._repr_html_()


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (10**400, "far too large"),
        (-(10**400), "far too large"),
        (float("inf"), "finite"),
        (float("nan"), "finite"),
    ],  # fmt: skip
)
def test_huge_and_non_finite_numbers_are_feedback(answer: object, words: str) -> None:
    for exercise_id in ("01.parameters", "04.bytes", "05.outgrow", "06.largest"):
        fb = lab.check(exercise_id, answer)
        assert not fb and words in fb.message, (exercise_id, fb.message)
        assert len(fb.message) < 2_000  # a 400-digit number is not printed whole


class _Unreadable:
    """An app-like object whose result cannot be read (it raises, as a half-built app might)."""

    values = {"embedding_dim": 32}
    error = None

    @property
    def result(self) -> object:
        raise RuntimeError("still drawing")


class _WrongTables:
    """An app-like object whose tables are not the app's."""

    values = "not a dict"
    error = None
    result = type("R", (), {"tables": {k: "rows?" for k in ("traffic", "metrics", "phases")}})()


class _BadSettle:
    """An app-like object whose update fails in an unexpected way."""

    def settle(self) -> bool:
        raise ZeroDivisionError("no room")


def _odd_answers() -> list[object]:
    import numpy as np
    import torch

    return [10**400, float("inf"), float("nan"), 1e308, -1.0, "1e400", "", "x" * 100_000, [1, 2], {"a": 1},
            None, object(), b"\x00", np.array([1.0, 2.0]), np.float64("nan"), torch.tensor([1.0, 2.0]),
            (1, 2, 3), ("a", "b"), {"nodes": 99}, {"model": "nope"}, _Unreadable(), _WrongTables(),
            _BadSettle()]  # fmt: skip


@pytest.mark.parametrize("exercise_id", sorted(lab.EXERCISES))
def test_the_checker_never_raises_whatever_it_is_given(exercise_id: str) -> None:
    """Huge numbers, app-like objects it cannot read, wrong kinds: a Feedback that says what is
    wrong, never an exception (nor an answer that passes by accident)."""
    for answer in _odd_answers():
        fb = lab.check(exercise_id, answer)
        assert isinstance(fb, lab.Feedback) and not fb.passed, (exercise_id, answer)
        assert fb.message and len(fb.message) < 2_000, (exercise_id, fb.message[:200])
        assert str(fb) and fb._repr_html_()


@settings(max_examples=40, deadline=None)
@given(
    exercise_id=st.sampled_from(sorted(lab.EXERCISES)),
    answer=st.one_of(st.integers(), st.floats(), st.text(max_size=50), st.none(),
                     st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(),
                                                                          max_size=3)),
)  # fmt: skip
def test_any_plain_answer_gets_feedback(exercise_id: str, answer: object) -> None:
    fb = lab.check(exercise_id, answer)
    assert isinstance(fb, lab.Feedback) and fb.message


def test_feedback_shows_dollars_as_written_not_as_math() -> None:
    """JupyterLab typesets TeX in HTML outputs: "$50 > $30" would become math; the box carries the
    classes that tell MathJax to leave it alone."""
    html = lab.Feedback("06.fastest", False, "over budget: $50 > $30")._repr_html_()
    assert "mathjax_ignore" in html and "tex2jax_ignore" in html
    assert "$50 &gt; $30" in html
    app = lookup_traffic_app()
    assert "mathjax_ignore" in app.message.value  # the apps' notes too


def test_check_judges_the_app_as_its_widgets_set_it_not_a_stale_chart() -> None:
    """A slider moved a moment ago: the app's debounced update has not run yet when the check cell
    runs. check() brings the app up to date first, so it judges what the learner set."""

    async def scenario() -> None:
        app = lookup_traffic_app()  # 0.2 s debounce inside a running event loop, as in a notebook
        for name, value in {"embedding_dim": 32, "pooling": 80, "batch_size": 4096}.items():
            app.controls[name].value = value  # as a learner's sliders move
        assert app.pending and app.history[0].values["pooling"] == 1  # the chart shows the old setting
        fb = lab.check("00.traffic", app)  # 4096*26*80*(32*4+8) bytes = 1.16 GB: in range
        assert fb, fb.message
        assert not app.pending and app.history[0].values == app.values

    asyncio.run(scenario())


def test_an_app_whose_new_setting_fails_is_reported_not_judged_on_its_old_chart() -> None:
    import ipywidgets as W

    from recnotebooks.viz.app import App, Result, history_rows
    from recnotebooks.viz.charts import metric_bars

    def compute(embedding_dim: int, pooling: int) -> Result:
        if pooling > 5:
            raise ValueError(f"pooling {pooling} does not fit")
        return Result({"traffic": [{"metric": "MB", "value": 1500.0, "display": "1.5 GB", "current": True,
                                    "MB_per_step": 1500.0}]})  # fmt: skip

    def render(history: list[HistoryEntry]) -> alt.FacetChart:
        return metric_bars(history_rows(history, "traffic"), source="analytic")

    async def scenario() -> None:
        controls = {"embedding_dim": W.IntSlider(value=32, min=16, max=64), "pooling": W.IntSlider(1, 1, 10)}
        app = App("toy traffic", controls, compute, render, debounce_s=0.2)
        assert lab.check("00.traffic", app)  # 1.5 GB as shown
        lab.reset()
        app.controls["pooling"].value = 9  # this setting fails once the update runs
        fb = lab.check("00.traffic", app)
        assert not fb and "shows an error" in fb.message  # not judged on the chart it still shows

    asyncio.run(scenario())


def test_app_exercises_read_the_apps_current_result() -> None:
    app = lookup_traffic_app()
    assert "embedding dim to 32" in lab.check("00.traffic", app).message
    app.set(embedding_dim=32, batch_size=4096, pooling=80)  # 4096*26*80*(32*4+8) bytes = 1.16 GB
    assert lab.check("00.traffic", app)
    app.set(batch_size=8192)  # 2.3 GB
    assert not lab.check("00.traffic", app)


def test_exercises_are_listed_per_notebook() -> None:
    ids = [i for i, _ in lab.exercises("01")]
    assert ids and all(i.startswith("01.") for i in ids)


@pytest.mark.parametrize("notebook", ["00", "01", "02", "03", "04", "05", "06"])
def test_a_notebook_shows_its_exercises_one_a_line_within_its_width(notebook: str) -> None:
    from IPython.lib.pretty import pretty

    from recnotebooks.text import REPORT_CHARS

    listed = lab.exercises(notebook)
    shown = pretty(listed)  # what a cell ending in exercises("NN") shows as text
    assert shown == str(listed) and all(len(line) <= REPORT_CHARS for line in shown.splitlines())
    starts = [line.split(": ", 1)[0] for line in shown.splitlines() if not line.startswith(" ")]
    assert starts == [i for i, _ in listed]  # one exercise a line (its wrapped rest indented)
    assert " ".join(shown.split()) == " ".join(f"{i}: {t}" for i, t in listed)  # every word, whole
    assert dict(listed) and isinstance(listed, list)  # still the list of (id, title) pairs


def test_numpy_and_torch_scalars_are_numbers() -> None:
    import numpy as np
    import torch

    assert lab.check("01.parameters", np.int64(preset("tiny").parameters))
    assert lab.check("01.parameters", torch.tensor(preset("tiny").parameters))


def test_server_explorer_exercise_matches_the_memory_model() -> None:
    from recnotebooks.perf import estimate, hardware, plan_tables
    from recnotebooks.perf.planner import RESERVE
    from recnotebooks.viz.controls import option_values
    from recnotebooks.viz.servers import SERVER_CONTROLS, scaled_model

    scales = option_values(SERVER_CONTROLS["rows_scale"])

    def fits_in_hbm(
        scale: object,
    ) -> bool:  # a size-balanced plan, every table in HBM, the planner's reserve kept
        assert isinstance(scale, (int, float)), scale  # the slider's values are numbers
        cfg = scaled_model("rm2", scale)
        plan = plan_tables(cfg, "big_basin", 8, strategy="greedy", placement="hbm", batch_size=8192)
        used = max(
            d["total"] for d in estimate(cfg, "big_basin", batch_size=8192, gpus=8, plan=plan).memory.device
        )
        return used <= hardware("big_basin").hbm_bytes * (1 - RESERVE)

    first = next(s for s in scales if not fits_in_hbm(s))
    assert lab.check("05.outgrow", first)
    assert scales.index(first) > 0  # some settings fit, so there is a wrong answer below it
    wrong = lab.check("05.outgrow", scales[scales.index(first) - 1])
    assert not wrong and "Hint 1/3" in wrong.message
    assert "slider" in lab.check("05.outgrow", 7).message
    import numpy as np

    assert lab.check("05.outgrow", np.float64(first))  # NumPy scalars are numbers too


def _phases_app(reliable: bool) -> object:
    import ipywidgets as W

    from recnotebooks.viz.app import App, Result, history_rows
    from recnotebooks.viz.charts import time_breakdown

    why = "" if reliable else "other programs kept 1.0 cores busy while it ran"

    def compute(pooling: int) -> Result:  # embedding work 30% of the step: not embedding-bound
        parts = {"embedding_forward": 0.002, "sparse_optimizer": 0.001, "bottom_mlp": 0.004, "top_mlp": 0.003}
        base = {"source": "measured", "setting": "now", "reliable": reliable, "reliability": why}
        return Result({"phases": [{**base, "phase": k, "seconds_per_step": v} for k, v in parts.items()]})

    def render(history: list[HistoryEntry]) -> alt.TopLevelMixin:
        return time_breakdown(history_rows(history, "phases"), source="measured")

    return App("toy explorer", {"pooling": W.IntSlider(value=20, min=1, max=40)}, compute, render)


def test_a_measurement_that_cannot_be_trusted_is_neither_passed_nor_failed() -> None:
    """01.embedding_bound judges a measured step; one taken on a busy machine is not judged (no hint
    used up, the reason said), the same numbers taken reliably are judged."""
    lab.reset()
    fb = lab.check("01.embedding_bound", _phases_app(reliable=False))
    assert not fb and not fb.judged, fb
    assert "cannot judge" in fb.message and "1.0 cores busy" in fb.message and "Hint" not in fb.message
    assert str(fb).startswith("CANNOT JUDGE") and "?" in fb._repr_html_()
    fb = lab.check("01.embedding_bound", _phases_app(reliable=True))
    assert not fb and fb.judged and "30%" in fb.message and "Hint 1/3" in fb.message  # the first hint


@pytest.mark.parametrize("given", ["overhead", "embedding_forward", "top_mlp"])
def test_02_bound_hints_never_name_back_the_answer_just_given(given: str) -> None:
    """Issue 37: 02.bound's last hint listed the wrong answer just given among the candidates."""
    from recnotebooks.lab.efficiency import BOUND_CANDIDATES

    key = lab.answer_key("02.bound")
    assert key in BOUND_CANDIDATES and given != key
    for _ in range(len(lab.EXERCISES["02.bound"].hints) + 1):
        fb = lab.check("02.bound", given)
        hint = fb.message.split("Hint", 1)[1]
        assert not fb and given not in hint, fb.message
    assert key in hint and "compare their seconds" in hint  # the last hint still narrows it down
