"""Where a measurement's threads ran (recnotebooks.measure.cores): the reading every measured step
takes after its timed steps on two or more threads (``StepMeasurement.handoff``), the rule that
reads it (``cores_apart``) and what a measured step's note and notebook 07's Explorer say when the
cores shared no cache. The real reading is checked for what it can be on any machine (one thread:
none; more: finite, positive); the words on measurements given a reading."""

from __future__ import annotations

import math

import pytest
import torch

import recnotebooks.measure.calibrate as calibrate
import recnotebooks.measure.hstu as measure_hstu
import recnotebooks.measure.verdict as verdict
from recnotebooks.config import preset
from recnotebooks.config.hstu import hstu_preset
from recnotebooks.measure import measure_hstu_step, measure_step
from recnotebooks.measure.cores import APART_HANDOFF, apart_words, cores_apart, handoff, handoff_reading
from recnotebooks.measure.step import StepMeasurement
from recnotebooks.viz import hstu as hstu_app


def _m(reading: float | None, threads: int = 2) -> StepMeasurement:
    return StepMeasurement("x", 64, "cpu", 1024, 9, {"data": 0.01}, 0.01, step_seconds=(0.01,) * 9,
                           threads=threads, handoff=reading)  # fmt: skip


def test_one_reading_and_one_rule_for_the_calibration_the_validation_and_a_step() -> None:
    assert calibrate.handoff is handoff and verdict.APART_HANDOFF == APART_HANDOFF
    assert not cores_apart(None) and not cores_apart(1.0) and not cores_apart(APART_HANDOFF * 0.99)
    assert cores_apart(APART_HANDOFF) and cores_apart(12.0)
    assert verdict.apart({"handoff": APART_HANDOFF}) == APART_HANDOFF
    assert verdict.apart({"handoff": APART_HANDOFF * 0.99}) is None
    # nothing to read on one thread or off the CPU
    assert handoff_reading(torch.device("cpu"), 1) is None
    assert handoff_reading(torch.device("meta"), 2) is None


def test_a_step_says_when_its_threads_ran_on_cores_that_shared_no_cache() -> None:
    note = _m(10.4).describe()
    assert "its 2 threads ran on cores that shared no cache" in note and "10.4x" in note
    assert "does not price it" in note and note.startswith("median of 9 steps")
    for reading in (None, 1.3, APART_HANDOFF * 0.99):
        assert "shared no cache" not in _m(reading).describe()
    # where the cores were is the machine's state, not a doubt about the number
    assert _m(10.4).reliable and apart_words(10.4, 2) in _m(10.4).describe()
    assert apart_words(1.3, 2) == apart_words(None, 1) == ""


@pytest.mark.parametrize("threads", [1, 2])
def test_a_measured_step_reads_its_cores_on_two_threads_and_not_on_one(threads: int) -> None:
    m = measure_step(preset("tiny"), 64, time_budget_s=0.05, max_steps=3, threads=threads)
    h = measure_hstu_step(hstu_preset("hstu_small"), [5, 9, 17], time_budget_s=0.05, max_steps=3,
                          threads=threads)  # fmt: skip
    for reading in (m.handoff, h.handoff):
        if threads == 1:
            assert reading is None
        else:
            assert reading is not None and math.isfinite(reading) and reading > 0


def test_the_explorer_says_its_measured_step_ran_on_cores_that_shared_no_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(measure_hstu, "handoff_reading", lambda dev, threads: 11.0)
    monkeypatch.setattr(hstu_app, "_MEASURED", {})
    r = hstu_app.explore_hstu(layers=1, heads=1, lengths=1 / 8, batch=8, time_budget_s=0.05)
    note = next(n for n in r.notes if n.startswith("MEASURED here"))
    assert "ran on cores that shared no cache" in note and "11.0x" in note
