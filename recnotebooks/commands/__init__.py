"""The ``recnb`` command line (also ``python -m recnotebooks``), its one home.

Every command prints a readable report, or one JSON object with ``--json``. Bad arguments
exit with status 2 and a one-line message naming the option; options that would have no
effect are refused rather than ignored, and a run that cannot fit in memory is refused
before anything is allocated.

Read it in this order: :mod:`.dispatch` (parse, resolve, run, print), :mod:`.parser` (every
subcommand and option), :mod:`.settings` (the arguments resolved once into a frozen value per
command), one module per family of commands (:mod:`.train` and :mod:`.distributed`: ``recnb
train``; :mod:`.model`: ``cost`` and ``plan``; :mod:`.measure`: ``calibrate`` and ``validate``;
:mod:`.cache`: ``cache-sim``; ``doctor`` is :mod:`recnotebooks.doctor`'s), and :mod:`.report`, the
one printer of their results.
"""

from __future__ import annotations

from .dispatch import main
from .parser import build_parser
from .settings import TRAIN_DEFAULTS, CLIError, config_from_args, resolve, training_settings

__all__ = [
    "TRAIN_DEFAULTS",
    "CLIError",
    "build_parser",
    "config_from_args",
    "main",
    "resolve",
    "training_settings",
]
