"""Printed reports in a notebook: every line broken at word boundaries within the notebook's width.

JupyterLab prints a cell's text output in its code font, 13 px monospace (DejaVu Sans Mono here,
Menlo on a Mac: 7.83 px a character), and breaks a line too long for the output area anywhere,
inside a number as well (its CSS says ``word-break: break-all``): "4.5⏎5 min". In the narrowest
window the course is checked in (``tests/test_browser.py``'s laptop layout: a 1280-px window with
the file browser open) the output area is 848 px wide, 840 px of it for text after its padding:
107 characters. :data:`REPORT_CHARS` is 100, which leaves room for a scroll bar or a slightly
narrower window.

:func:`say` prints like ``print``, with each line longer than that broken where
:func:`~recnotebooks.viz.tidy.wrap_line` breaks a chart's subtitle (after a "; ", a " · ", a
", " or a space, so that a clause stays whole where it can) and the lines after the first
indented, so a wrapped line still reads as one::

    >>> say("64 GPUs (8 nodes): " + "1.32 ms a step; " * 8, width=60)
    64 GPUs (8 nodes): 1.32 ms a step; 1.32 ms a step;
      1.32 ms a step; 1.32 ms a step; 1.32 ms a step;
      1.32 ms a step; 1.32 ms a step; 1.32 ms a step;

``tests/test_notebooks.py`` checks that the notebooks' printed lines keep within
:data:`REPORT_CHARS` when they run.
"""

from __future__ import annotations

from recnotebooks.checks import check_int
from recnotebooks.viz.tidy import wrap_line

__all__ = ["REPORT_CHARS", "say", "wrap_report"]

#: Characters a printed line may take: 100 of the 107 that fit the 840 px of text of a laptop's
#: output area at 7.83 px a character (module docstring).
REPORT_CHARS = 100
#: Put before the second and later lines of a wrapped line.
INDENT = "  "


def wrap_report(text: str, width: int = REPORT_CHARS) -> list[str]:
    """``text``'s lines, each longer than ``width`` characters broken at word boundaries
    (:func:`~recnotebooks.viz.tidy.wrap_line`); the lines after the first of a broken line start
    with its own indentation and :data:`INDENT`. A word longer than a line stays whole."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    width = check_int("width", width, lo=20, hi=10_000)
    out: list[str] = []
    for line in text.split("\n"):
        line = line.rstrip()
        first = wrap_line(line, width)[0]
        out.append(first)
        rest = line[len(first) :].strip()
        if rest:
            lead = line[: len(line) - len(line.lstrip())] + INDENT
            out += [lead + part for part in wrap_line(rest, width - len(lead))]
    return out


def say(*parts: object, sep: str = " ", width: int = REPORT_CHARS) -> None:
    """Print ``parts`` as ``print`` does (joined by ``sep``), every line within ``width`` characters
    (:func:`wrap_report`)."""
    print("\n".join(wrap_report(sep.join(str(p) for p in parts), width)))
