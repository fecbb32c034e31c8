"""Printed reports in a notebook: every line broken at word boundaries within the notebook's width.

The width and the wrap have one home, :mod:`recnotebooks.text` (why 100 characters: its
docstring), which every layer's printed reports use; this module is the notebooks' print helper
built on it. :func:`say` prints like ``print``, with each line longer than
:data:`~recnotebooks.text.REPORT_CHARS` broken where :func:`~recnotebooks.text.wrap_line` breaks
it (after a "; ", a " · ", a ", " or a space, so that a clause stays whole where it can) and the
lines after the first indented, so a wrapped line still reads as one::

    >>> say("64 GPUs (8 nodes): " + "1.32 ms a step; " * 8, width=60)
    64 GPUs (8 nodes): 1.32 ms a step; 1.32 ms a step;
      1.32 ms a step; 1.32 ms a step; 1.32 ms a step;
      1.32 ms a step; 1.32 ms a step; 1.32 ms a step;

``tests/test_notebooks.py`` checks that the notebooks' printed lines keep within
:data:`REPORT_CHARS` when they run.
"""

from __future__ import annotations

from recnotebooks.text import INDENT, REPORT_CHARS, wrap_report

__all__ = ["INDENT", "REPORT_CHARS", "say", "wrap_report"]


def say(*parts: object, sep: str = " ", width: int = REPORT_CHARS) -> None:
    """Print ``parts`` as ``print`` does (joined by ``sep``), every line within ``width`` characters
    (:func:`~recnotebooks.text.wrap_report`)."""
    print("\n".join(wrap_report(sep.join(str(p) for p in parts), width)))
