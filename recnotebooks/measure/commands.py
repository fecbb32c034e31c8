"""``recnb calibrate`` and ``recnb validate`` moved to :mod:`recnotebooks.commands.measure` (the
command line's one home); their names stay usable from here for one release. ``run`` keeps its
old signature: the parsed arguments and the exception a bad setting raises."""

from __future__ import annotations

import argparse

from recnotebooks.commands.measure import print_validation
from recnotebooks.commands.parser import add_measure_parsers as add_parsers
from recnotebooks.commands.report import Report
from recnotebooks.commands.settings import CLIError, MeasureSettings, as_given

__all__ = ["add_parsers", "print_validation", "run"]


def run(args: argparse.Namespace, error: type[Exception]) -> Report:
    """``recnb calibrate`` or ``recnb validate`` from their parsed arguments: the result and its
    printer; a bad setting raises ``error``."""
    from recnotebooks.commands import measure

    try:
        return measure.run(as_given(MeasureSettings, args))
    except CLIError as e:
        raise error(str(e)) from None
