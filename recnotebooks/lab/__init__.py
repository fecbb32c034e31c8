"""Notebook helpers: smoke mode, exercise checks that give hints (never answers), and the
instructor's answer key.

Each notebook ends with exercises. ``check("01.parameters", answer)`` says whether an
answer is right; when it is not, it gives the next hint for that exercise (hints get more
specific with each attempt) but never prints the expected value. ``exercises("01")`` lists
a notebook's exercises. :func:`smoke_mode` is true when ``RECNB_SMOKE=1``: notebooks then
use tiny sizes so CI can run every notebook top to bottom in seconds.

For instructors, ``answer_key("03.target")`` computes an exercise's answer from the package
(so it always agrees with the model the checker uses): a value to pass to ``check``, or an
:class:`AppSetting` (the app and the settings that pass). Learners can call it too; the
notebooks do not mention it.

The exercises live with their notebook: :mod:`.basics` (00, 01), :mod:`.efficiency` (02),
:mod:`.caches` (03), :mod:`.sharding` (04), :mod:`.servers` (05), :mod:`.capstone` (06),
:mod:`.generative` (07).
"""

from __future__ import annotations

from . import basics, caches, capstone, efficiency, generative, servers, sharding  # noqa: F401  (registers the exercises)
from .caches import EX03_BUDGET, EX03_ROW_BYTES, EX03_ROWS
from .core import (
    EXERCISES,
    AppSetting,
    CannotJudge,
    Exercise,
    Feedback,
    answer_key,
    check,
    exercises,
    reset,
    smoke_mode,
)
from .efficiency import EX02_START
from .servers import production_model

__all__ = ["EX02_START", "EX03_BUDGET", "EX03_ROWS", "EX03_ROW_BYTES", "EXERCISES", "AppSetting",
           "CannotJudge", "Exercise", "Feedback", "answer_key", "check", "exercises", "production_model",
           "reset", "smoke_mode"]  # fmt: skip
