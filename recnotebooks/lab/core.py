"""The exercise registry: checks that give hints, never answers; the instructor's answer key.

Each notebook ends with exercises. ``check("01.parameters", answer)`` says whether an
answer is right; when it is not, it gives the next hint for that exercise (hints get more
specific with each attempt) but never prints the expected value. ``exercises("01")`` lists
a notebook's exercises. :func:`smoke_mode` is true when ``RECNB_SMOKE=1``: notebooks then
use tiny sizes so CI can run every notebook top to bottom in seconds.

A notebook's module declares each exercise with :func:`exercise` (its words as one text: the
question, then one hint a paragraph; its answer key; its checker below) or, for an answer that is
one number equal to its key, :func:`number_exercise`.
"""

from __future__ import annotations

import html
import inspect
import math
import numbers
import os
from collections.abc import Callable
from dataclasses import dataclass

from recnotebooks.checks import show
from recnotebooks.text import wrap_report
from recnotebooks.viz.theme import NO_MATH

__all__ = ["AppSetting", "CannotJudge", "EXERCISES", "Exercise", "ExerciseList", "Feedback", "answer_key",
           "check", "exercises", "reset", "smoke_mode"]  # fmt: skip


def smoke_mode() -> bool:
    """True when the environment variable ``RECNB_SMOKE`` is ``1``/``true``/``yes``."""
    return os.environ.get("RECNB_SMOKE", "").strip().lower() in ("1", "true", "yes")


class CannotJudge(Exception):
    """Raised by a checker that is handed a measured quantity it cannot trust (taken on a busy
    machine, or from steps too erratic): :func:`check` says so instead of failing the learner."""


@dataclass
class Feedback:
    """Outcome of :func:`check`; shows as a coloured box in a notebook. ``judged`` is False when
    the answer rests on a measurement that cannot be trusted: neither passed nor failed, and no
    hint used up."""

    exercise: str
    passed: bool
    message: str
    judged: bool = True

    def __bool__(self) -> bool:
        return self.passed

    def _repr_html_(self) -> str:
        # NO_MATH: JupyterLab typesets TeX in HTML, so "$50 > $30" stays as written
        if not self.judged:
            color, mark = "#57606a", "?"
        else:
            color, mark = ("#1e7e34", "✔") if self.passed else ("#9a6700", "✘")
        box = f"class='recnb-feedback {NO_MATH}' style='border-left:4px solid {color};padding:4px 10px'"
        return (
            f"<div {box}><b style='color:{color}'>{mark} {html.escape(self.exercise)}</b> "
            f"{html.escape(self.message)}</div>"
        )

    def __str__(self) -> str:
        verdict = "CANNOT JUDGE" if not self.judged else "PASS" if self.passed else "NOT YET"
        return f"{verdict} {self.exercise}: {self.message}"


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


#: A hint: its text, or a function of the answer given that returns it.
Hint = str | Callable[[object], str]


@dataclass
class Exercise:
    """An exercise: ``checker(answer)`` returns ``(passed, feedback)``; ``hints`` escalate (a
    hint is a string, or a function of the answer given that returns one: a hint that narrows
    the choices leaves out the one just tried); ``answer()`` computes the expected answer (a
    value, or an :class:`AppSetting`)."""

    id: str
    title: str
    checker: Callable[[object], tuple[bool, str]]
    hints: tuple[Hint, ...]
    answer: Callable[[], object] | None = None


EXERCISES: dict[str, Exercise] = {}
_ATTEMPTS: dict[str, int] = {}


def register(
    id: str, title: str, *hints: Hint, answer: Callable[[], object] | None = None
) -> Callable[[Callable[[object], tuple[bool, str]]], None]:
    """Decorator: register the checker of exercise ``id`` (its ``answer`` computes the key)."""

    def deco(fn: Callable[[object], tuple[bool, str]]) -> None:
        EXERCISES[id] = Exercise(id, title, fn, hints, answer)

    return deco


def exercise(
    id: str, text: str, *more_hints: Hint, answer: Callable[[], object] | None = None
) -> Callable[[Callable[[object], tuple[bool, str]]], None]:
    """Decorator: register the checker of exercise ``id`` from its ``text``, the words a learner
    reads: the question, then one hint a paragraph (paragraphs apart by a blank line; a paragraph's
    lines are joined by spaces). ``more_hints`` follow them: hints that are functions of the answer
    given. Each exercise states only its words, its key and its checker."""
    title, *hints = (" ".join(p.split()) for p in inspect.cleandoc(text).split("\n\n"))
    return register(id, title, *hints, *more_hints, answer=answer)


def number_exercise(
    id: str, text: str, *, key: Callable[[], float], what: str, right: str, wrong: str
) -> None:
    """Register exercise ``id`` (its ``text`` as in :func:`exercise`) whose answer is one number that
    must equal ``key()`` (a count, a width): ``what`` names the number when the answer is not one;
    ``right`` and ``wrong`` are the feedback."""

    def checker(answer: object) -> tuple[bool, str]:
        ok = number(answer, what) == key()
        return ok, right if ok else wrong

    exercise(id, text, answer=key)(checker)


class ExerciseList(list[tuple[str, str]]):
    """A list of ``(id, title)`` pairs that a notebook shows one exercise per line, each line
    broken at word boundaries within the notebook's width (:func:`recnotebooks.text.wrap_report`),
    not as a list's one long repr."""

    def __str__(self) -> str:
        return "\n".join(wrap_report("\n".join(f"{i}: {title}" for i, title in self))) or "(no exercises)"

    def _repr_pretty_(self, p: object, cycle: bool) -> None:  # IPython's plain-text display
        p.text(str(self))  # type: ignore[attr-defined]


def exercises(notebook: str = "") -> ExerciseList:
    """``(id, title)`` of the exercises whose id starts with ``notebook`` (e.g. ``"01"``), as a list
    that a notebook shows one exercise per line, wrapped at words (:class:`ExerciseList`)."""
    return ExerciseList((e.id, e.title) for e in EXERCISES.values() if e.id.startswith(notebook))


def reset(exercise_id: str | None = None) -> None:
    """Forget attempts (all, or one exercise's), so hints start again from the first."""
    if exercise_id is None:
        _ATTEMPTS.clear()
    else:
        _ATTEMPTS.pop(exercise_id, None)


def check(exercise_id: str, answer: object) -> Feedback:
    """Check ``answer`` for ``exercise_id``; a wrong answer gets the next hint, not the answer.

    Never raises: an id that is not an exercise (or not a string), and an answer the checker
    cannot read (a huge or non-finite number, an object that is not the app asked for, an app
    showing an error) get a :class:`Feedback` that says what is wrong. An app is judged as it is
    on screen: an update still due (a slider just moved) is run first (:meth:`App.settle`). A
    measured quantity that cannot be trusted (:class:`CannotJudge`: a busy machine, erratic steps)
    is neither passed nor failed: the feedback says why (``judged=False``), and no hint is used up.
    """
    if not isinstance(exercise_id, str):
        said = f"{type(exercise_id).__name__} {show(exercise_id, 40)}"
        why = f"exercise_id must be a string such as '01.parameters', got {said}; exercises() lists them."
        return Feedback(show(exercise_id, 40), False, why)
    if exercise_id not in EXERCISES:
        why = f"{show(exercise_id, 40)} is not an exercise; known: {', '.join(sorted(EXERCISES))}."
        return Feedback(exercise_id[:40], False, why)
    ex = EXERCISES[exercise_id]
    try:
        passed, feedback = ex.checker(answer)
    except CannotJudge as e:
        why = (
            f"cannot judge this measurement: {_words(e)}. It does not count against you. Measure "
            "again (move a slider away and back: a measurement that cannot be trusted is taken "
            "again), with other programs closed, then check again."
        )
        return Feedback(exercise_id, False, why, judged=False)
    except (TypeError, ValueError, KeyError) as e:  # the checkers' own words for an unusable answer
        passed, feedback = False, f"could not check this answer ({_words(e)})."
    except Exception as e:  # anything else an odd answer provokes: said, never raised
        passed, feedback = False, f"could not check this answer ({type(e).__name__}: {_words(e)})."
    if passed:
        _ATTEMPTS.pop(exercise_id, None)
        return Feedback(exercise_id, True, feedback or "Right.")
    n = _ATTEMPTS[exercise_id] = _ATTEMPTS.get(exercise_id, 0) + 1
    hint = ex.hints[min(n, len(ex.hints)) - 1] if ex.hints else ""
    if callable(hint):  # a hint that depends on the answer given (it never names it back)
        try:
            hint = hint(answer)
        except Exception:  # an answer the hint cannot read: the checker's feedback already says why
            hint = ""
    return Feedback(
        exercise_id, False, f"{feedback} Hint {min(n, len(ex.hints))}/{len(ex.hints)}: {hint}".strip()
    )


def _words(e: BaseException) -> str:
    """An exception's message for a learner (a KeyError's without its quotes), at most 300 characters."""
    text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return text if len(text) <= 300 else text[:299] + "…"


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
    """``answer`` as a finite float (NumPy and torch scalars too); a ``TypeError``/``ValueError``
    in a learner's words otherwise (a string, an array, a huge integer, inf or NaN)."""
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):  # NumPy and torch scalars are fine
        item = getattr(answer, "item", None)
        if not callable(item) or getattr(answer, "ndim", 1) != 0:
            raise TypeError(f"pass {what} as a number, got {type(answer).__name__}")
        answer = item()
    try:
        x = float(answer)  # type: ignore[arg-type]
    except OverflowError:
        raise ValueError(f"{what} {show(answer, 30)} is far too large to be right") from None
    if not math.isfinite(x):
        raise ValueError(f"pass {what} as a finite number, got {x}")
    return x


def amount(x: float) -> str:
    """A number for feedback: ``12,345`` (whole, with separators), or ``1.23e+20`` when huge."""
    return f"{x:,.0f}" if abs(x) < 1e15 else f"{x:.3g}"


def settled(answer: object) -> object:
    """``answer``, an app brought up to the setting its widgets hold (an update still due after a
    slider moved is run now), so a checker judges what the learner sees; anything else as is."""
    settle = getattr(answer, "settle", None)
    if callable(settle):
        settle()
    return answer


def app_result(answer: object, table: str) -> list[dict[str, object]]:
    """The rows of ``table`` the app ``answer`` shows now (brought up to date first); a
    ``TypeError`` for something that is not such an app, a ``ValueError`` if it shows an error."""
    settled(answer)
    result = getattr(answer, "result", None)
    tables = getattr(result, "tables", None)
    if not isinstance(tables, dict) or table not in tables:
        raise TypeError(f"pass the app itself (the object you displayed), which must show {table!r}")
    if getattr(answer, "error", None):
        raise ValueError("the app shows an error; move it back to a setting that works")
    rows = tables[table]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TypeError(f"pass the app itself: its {table!r} table is not the app's")
    return rows


def reliable_rows(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """``rows`` of a measurement, if it can be trusted; :class:`CannotJudge` naming why not when
    any row says ``reliable: False`` (its ``reliability`` gives the reason)."""
    for r in rows:
        if r.get("reliable", True) is False:
            raise CannotJudge(str(r.get("reliability") or "the measurement is marked not reliable"))
    return rows


def phase_share(rows: list[dict[str, object]], phases: tuple[str, ...]) -> float:
    total = sum(float(r["seconds_per_step"]) for r in rows) or 1.0  # type: ignore[arg-type,misc]
    return sum(float(r["seconds_per_step"]) for r in rows if r["phase"] in phases) / total  # type: ignore[arg-type,misc]
