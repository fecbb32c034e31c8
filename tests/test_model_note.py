"""What an app says about the model of this machine it shows beside a step measured here: the
threads the saved calibration ran on (read back from its rounds) and the note
(:meth:`StepMeasurement.model_note`) when the model is uncalibrated or was fitted to more threads
than the step ran on. Both explorers that draw a measurement beside the model use it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import recnotebooks.viz.efficiency as eff
import recnotebooks.viz.hstu as hstu_app
from recnotebooks.measure.step import StepMeasurement
from recnotebooks.perf.calibration_file import calibration_threads
from recnotebooks.perf.hardware import CALIBRATED_BY, HARDWARE, save_calibration

CALIBRATED = HARDWARE["this_machine"].replace(description=f"this machine, {CALIBRATED_BY}")


def _rounds(*threads: object) -> list[dict[str, object]]:
    return [{"load": {"others": 0.1, "cores": 2.0, "threads": t}} for t in threads]


def _measured(threads: int, device: str = "cpu") -> StepMeasurement:
    return StepMeasurement("x", 16, device, 0, 3, {"forward": 0.01}, 0.01, threads=threads)


def test_calibration_threads_is_the_count_most_rounds_ran_on(tmp_path: Path) -> None:
    p = tmp_path / "cal.json"
    assert calibration_threads(p) is None  # no file
    save_calibration(CALIBRATED, path=p)
    assert calibration_threads(p) is None  # a file saved without its rounds
    save_calibration(CALIBRATED, path=p, rounds=_rounds(2.0, 1.0, 2.0))
    assert calibration_threads(p) == 2
    save_calibration(CALIBRATED, path=p, rounds=[{"gflops": 1.0}, *_rounds(4.0)])
    assert calibration_threads(p) == 4  # a round without a load counts for nothing


@pytest.mark.parametrize("bad", [True, 0, 2.5, "2", None, -1, 2048, math.inf])
def test_calibration_threads_ignores_a_count_that_is_not_one(tmp_path: Path, bad: object) -> None:
    p = tmp_path / "cal.json"
    p.write_text(json.dumps({"hardware": {}, "rounds": _rounds(bad)}))  # inf as JSON's Infinity
    assert calibration_threads(p) is None


def test_the_note_says_the_model_is_uncalibrated_or_fitted_to_more_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "cal.json"
    monkeypatch.setenv("RECNB_CALIBRATION", str(p))
    uncalibrated = _measured(1).model_note(HARDWARE["this_machine"])
    assert "uncalibrated defaults" in uncalibrated and "recnb calibrate" in uncalibrated
    assert _measured(1).model_note(CALIBRATED) == ""  # no rounds saved: nothing to compare
    save_calibration(CALIBRATED, path=p, rounds=_rounds(2.0, 2.0, 2.0))
    note = _measured(1).model_note(CALIBRATED)
    assert "calibrated on 2 threads, where this step ran on 1" in note and "slower" in note
    assert _measured(2).model_note(CALIBRATED) == ""  # the same threads
    assert _measured(4).model_note(CALIBRATED) == ""  # more threads than fitted: not slower for it
    assert _measured(0).model_note(CALIBRATED) == ""  # threads unknown
    assert _measured(1, "cuda:0").model_note(CALIBRATED) == ""  # a GPU step: no CPU threads
    with pytest.raises(TypeError, match="hw must be a Hardware"):
        _measured(1).model_note("this_machine")  # type: ignore[arg-type]


def test_both_explorers_put_the_note_after_the_models_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Notebook 02's Efficiency Explorer and 07's Generative Recommender Explorer measure on the
    thread policy's threads; a step on one thread beside a model calibrated on two says why it is
    slower."""
    p = tmp_path / "cal.json"
    monkeypatch.setenv("RECNB_CALIBRATION", str(p))
    save_calibration(CALIBRATED, path=p, rounds=_rounds(2.0))
    m = _measured(1)
    monkeypatch.setattr(eff, "measure_here", lambda *a, **k: (m, 1024))
    monkeypatch.setattr(hstu_app, "measure_hstu_step", lambda *a, **k: m)
    monkeypatch.setattr(hstu_app, "_MEASURED", {})
    for notes in (eff.explore_efficiency().notes, hstu_app.explore_hstu(lengths=0.5).notes):
        note = next(n for n in notes if n.startswith("MEASURED here"))
        assert "for this machine as calibrated on 2 threads, where this step ran on 1" in note, note
