"""``recnb``'s entry point: parse (:mod:`~recnotebooks.commands.parser`), resolve the arguments once
(:mod:`~recnotebooks.commands.settings`), run the command of their family, print its report
(:mod:`~recnotebooks.commands.report`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .parser import build_parser
from .report import Report, emit
from .settings import CLIError, Settings, resolve

__all__ = ["main", "run"]


def run(s: Settings) -> Report:
    """The report of the command ``s`` resolves (a bad setting is a :class:`CLIError`)."""
    from .settings import (
        CacheSimSettings,
        MeasureSettings,
        ModelSettings,
        TrainSettings,
    )

    if isinstance(s, TrainSettings):
        from . import distributed, train

        return distributed.run(s) if s.parallel else train.run(s)
    if isinstance(s, ModelSettings):
        from . import model

        return model.run(s)
    if isinstance(s, MeasureSettings):
        from . import measure

        return measure.run(s)
    if isinstance(s, CacheSimSettings):
        from . import cache

        return cache.run(s)
    from recnotebooks.doctor import doctor_report, print_doctor

    return Report(doctor_report(), print_doctor)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``recnb``; returns the exit status (2 for a user error, printed as one line; a
    :class:`CLIError`'s ``exit_code``)."""
    args = build_parser().parse_args(argv)
    try:
        settings = resolve(args)
        report = run(settings)
    except CLIError as e:
        print(f"recnb {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    return emit(report, settings.json)
