"""What a command hands back, and the one place that prints it: the text a command's lines make,
or one JSON object with ``--json``.

Every command returns a :class:`Report`: its result (a dict: what ``--json`` prints) and the
printer of its text (a command with lines to say builds it with :func:`printer`). :func:`emit`
prints either, and leaves quietly when the reader of the output has gone (``recnb plan | head``).
The text is printed as the commands have always printed it: lines are not rewrapped (some,
such as a plan's notes, are longer than :data:`recnotebooks.text.REPORT_CHARS`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

__all__ = ["Printer", "Report", "emit", "print_lines", "printer"]

#: Prints a command's result as text.
Printer = Callable[[dict[str, Any]], None]


class Report(NamedTuple):
    """A command's result (what ``--json`` prints) and the printer of its text."""

    result: dict[str, Any]
    printer: Printer


def print_lines(lines: Iterable[str]) -> None:
    """Print ``lines``, one a line."""
    for line in lines:
        print(line)


def printer(lines: Callable[[dict[str, Any]], Iterable[str]]) -> Printer:
    """The printer of a command whose text is ``lines(result)``."""

    def show(result: dict[str, Any]) -> None:
        print_lines(lines(result))

    return show


def emit(report: Report, as_json: bool) -> int:
    """Print ``report``: one JSON object (``as_json``) or its text. Returns the exit status: 0, or
    1 when the reader of the output left before the end (the rest is dropped quietly)."""
    try:
        if as_json:
            print(json.dumps(report.result, indent=2, default=str))
        else:
            report.printer(report.result)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `recnb plan | head`: the reader left; stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0
