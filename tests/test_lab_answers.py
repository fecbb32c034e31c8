"""The instructor's answer key: every exercise has one, and it passes its own checker (so the
key, the checker and the model can never drift apart)."""

from __future__ import annotations

import re

import pytest

from recnotebooks import lab
from recnotebooks.lab import EXERCISES, AppSetting, answer_key, check


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_the_answer_key_passes_the_checker(exercise_id: str) -> None:
    key = answer_key(exercise_id)
    answer = key.app() if isinstance(key, AppSetting) else key
    feedback = check(exercise_id, answer)
    if not feedback.judged:
        # A key judged on a measured step (01.embedding_bound) is judged only when the step can
        # be trusted. Forcing trust on a busy machine judged a step whose phases other programs
        # had stretched (the embedding share read 20% where an idle machine reads 85%). The
        # judged path is tested with scripted rows in test_lab.py; here the checker must say why.
        assert feedback.message and not feedback.passed, str(feedback)
        pytest.skip(f"{exercise_id}'s key rests on a step measured on a busy machine: {feedback.message}")
    assert feedback.passed, str(feedback)
    assert explains(feedback.message), f"{exercise_id} passes with {feedback.message!r}: say why it is right"


def explains(message: str) -> bool:
    """A success message says why the answer is right: more than "Right." (some words after it)."""
    rest = re.sub(r"^\W*(right|correct|yes|pass(ed)?)\b\W*", "", message.strip(), flags=re.I)
    return len(re.findall(r"\w+", rest)) >= 3


@pytest.mark.parametrize("message", ["Right.", "", "Right!", "correct", "Right: yes."])
def test_a_bare_right_does_not_explain(message: str) -> None:
    assert not explains(message)
    assert explains("Right: big_basin does 224 samples per joule.")


def test_every_notebook_with_exercises_is_keyed() -> None:
    assert {e.split(".")[0] for e in EXERCISES} >= {"00", "01", "02", "03", "04", "05", "06"}
    assert all(e.answer is not None for e in EXERCISES.values())


def test_unknown_exercise_is_named() -> None:
    with pytest.raises(KeyError, match="99.nope"):
        answer_key("99.nope")
    assert lab.exercises("03") and all(i.startswith("03.") for i, _ in lab.exercises("03"))
