"""The exercise registry: checks that give hints, never answers; the instructor's answer key.

Each notebook ends with exercises. ``check("01.parameters", answer)`` says whether an
answer is right; when it is not, it gives the next hint for that exercise (hints get more
specific with each attempt) but never prints the expected value. ``exercises("01")`` lists
a notebook's exercises. :func:`smoke_mode` is true when ``RECNB_SMOKE=1``: notebooks then
use tiny sizes so CI can run every notebook top to bottom in seconds.
"""

from __future__ import annotations

import html
import numbers
import os
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["AppSetting", "EXERCISES", "Exercise", "Feedback", "answer_key", "check", "exercises", "reset",
           "smoke_mode"]  # fmt: skip


def smoke_mode() -> bool:
    """True when the environment variable ``RECNB_SMOKE`` is ``1``/``true``/``yes``."""
    return os.environ.get("RECNB_SMOKE", "").strip().lower() in ("1", "true", "yes")


@dataclass
class Feedback:
    """Outcome of :func:`check`; shows as a coloured box in a notebook."""

    exercise: str
    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def _repr_html_(self) -> str:
        color, mark = ("#1e7e34", "✔") if self.passed else ("#9a6700", "✘")
        return (
            f"<div style='border-left:4px solid {color};padding:4px 10px'><b style='color:{color}'>{mark} "
            f"{html.escape(self.exercise)}</b> {html.escape(self.message)}</div>"
        )

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'NOT YET'} {self.exercise}: {self.message}"


@dataclass(frozen=True)
class AppSetting:
    """The answer to an exercise done in an app: build ``factory`` (``"module:function"``), move
    it to ``settings`` and pass the app to :func:`check`."""

    factory: str
    settings: dict[str, object]

    def app(self) -> object:
        """The app, built and set (it measures or models what the exercise checks)."""
        import importlib

        module, name = self.factory.split(":")
        app = getattr(importlib.import_module(module), name)()
        app.set(**self.settings)
        return app


@dataclass
class Exercise:
    """An exercise: ``checker(answer)`` returns ``(passed, feedback)``; ``hints`` escalate;
    ``answer()`` computes the expected answer (a value, or an :class:`AppSetting`)."""

    id: str
    title: str
    checker: Callable[[object], tuple[bool, str]]
    hints: tuple[str, ...]
    answer: Callable[[], object] | None = None


EXERCISES: dict[str, Exercise] = {}
_ATTEMPTS: dict[str, int] = {}


def register(
    id: str, title: str, *hints: str, answer: Callable[[], object] | None = None
) -> Callable[[Callable[[object], tuple[bool, str]]], None]:
    """Decorator: register the checker of exercise ``id`` (its ``answer`` computes the key)."""

    def deco(fn: Callable[[object], tuple[bool, str]]) -> None:
        EXERCISES[id] = Exercise(id, title, fn, hints, answer)

    return deco


def exercises(notebook: str = "") -> list[tuple[str, str]]:
    """``(id, title)`` of the exercises whose id starts with ``notebook`` (e.g. ``"01"``)."""
    return [(e.id, e.title) for e in EXERCISES.values() if e.id.startswith(notebook)]


def reset(exercise_id: str | None = None) -> None:
    """Forget attempts (all, or one exercise's), so hints start again from the first."""
    if exercise_id is None:
        _ATTEMPTS.clear()
    else:
        _ATTEMPTS.pop(exercise_id, None)


def check(exercise_id: str, answer: object) -> Feedback:
    """Check ``answer`` for ``exercise_id``; a wrong answer gets the next hint, not the answer."""
    if exercise_id not in EXERCISES:
        raise KeyError(f"exercise_id {exercise_id!r} is not an exercise; known: {sorted(EXERCISES)}")
    ex = EXERCISES[exercise_id]
    try:
        passed, feedback = ex.checker(answer)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        passed, feedback = False, f"could not check this answer ({e})."
    if passed:
        _ATTEMPTS.pop(exercise_id, None)
        return Feedback(exercise_id, True, feedback or "Right.")
    n = _ATTEMPTS[exercise_id] = _ATTEMPTS.get(exercise_id, 0) + 1
    hint = ex.hints[min(n, len(ex.hints)) - 1] if ex.hints else ""
    return Feedback(
        exercise_id, False, f"{feedback} Hint {min(n, len(ex.hints))}/{len(ex.hints)}: {hint}".strip()
    )


def answer_key(exercise_id: str) -> object:
    """**Instructors only**: the answer of ``exercise_id``, computed now from the package (so it
    follows the model), as a value to pass to :func:`check` or an :class:`AppSetting`."""
    if exercise_id not in EXERCISES:
        raise KeyError(f"exercise_id {exercise_id!r} is not an exercise; known: {sorted(EXERCISES)}")
    ex = EXERCISES[exercise_id]
    if ex.answer is None:
        raise KeyError(f"exercise {exercise_id!r} has no answer key")
    return ex.answer()


# ----- helpers for checkers ------------------------------------------------------------
def number(answer: object, what: str) -> float:
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):  # NumPy and torch scalars are fine
        item = getattr(answer, "item", None)
        if not callable(item) or getattr(answer, "ndim", 1) != 0:
            raise TypeError(f"pass {what} as a number, got {type(answer).__name__}")
        answer = item()
    return float(answer)  # type: ignore[arg-type]


def app_result(answer: object, table: str) -> list[dict[str, object]]:
    result = getattr(answer, "result", None)
    tables = getattr(result, "tables", None)
    if not isinstance(tables, dict) or table not in tables:
        raise TypeError(f"pass the app itself (the object you displayed), which must show {table!r}")
    if getattr(answer, "error", None):
        raise ValueError("the app shows an error; move it back to a setting that works")
    return tables[table]


def phase_share(rows: list[dict[str, object]], phases: tuple[str, ...]) -> float:
    total = sum(float(r["seconds_per_step"]) for r in rows) or 1.0  # type: ignore[arg-type]
    return sum(float(r["seconds_per_step"]) for r in rows if r["phase"] in phases) / total  # type: ignore[arg-type]
