"""Printed text within a notebook's width: the one home of the width and of the word-boundary wrap.

JupyterLab prints a cell's text output in its code font, 13 px monospace (DejaVu Sans Mono here,
Menlo on a Mac: 7.83 px a character), and breaks a line too long for the output area anywhere,
inside a number as well (its CSS says ``word-break: break-all``): "4.5⏎5 min". In the narrowest
window the course is checked in (``tests/test_browser.py``'s laptop layout: a 1280-px window with
the file browser open) the output area is 848 px wide, 840 px of it for text after its padding:
107 characters. :data:`REPORT_CHARS` is 100, which leaves room for a scroll bar or a slightly
narrower window.

:func:`wrap_line` breaks one line at word boundaries, after a "; ", a " · ", a ", " or a space,
so that a clause stays whole where it can (charts' subtitles use it too, at their own width).
:func:`wrap_report` breaks every line of a text that way and indents the lines after the first,
so a wrapped line still reads as one; :func:`wrap_paragraph` does the same for a paragraph of
prose, whose lines start flush. Every layer's printed reports (``measure``'s, ``nn.crosses``',
the notebooks' ``say``: :mod:`recnotebooks.viz.report`) wrap here::

    >>> print("\\n".join(wrap_report("64 GPUs (8 nodes): " + "1.32 ms a step; " * 8, width=60)))
    64 GPUs (8 nodes): 1.32 ms a step; 1.32 ms a step;
      1.32 ms a step; 1.32 ms a step; 1.32 ms a step;
      1.32 ms a step; 1.32 ms a step; 1.32 ms a step;
"""

from __future__ import annotations

from recnotebooks.checks import check_int

__all__ = ["INDENT", "REPORT_CHARS", "wrap_line", "wrap_paragraph", "wrap_report"]

#: Characters a printed line may take: 100 of the 107 that fit the 840 px of text of a laptop's
#: output area at 7.83 px a character (module docstring).
REPORT_CHARS = 100
#: Put before the second and later lines of a wrapped line.
INDENT = "  "


def wrap_line(line: str, limit: int = REPORT_CHARS) -> list[str]:
    """``line`` broken into lines of at most ``limit`` characters, after a "; ", a " · ", a ", "
    or a space, the first of these (in that order) found in the second half of the line's first
    ``limit`` characters, so that a clause stays whole where it can, and not at a space after a
    number where another will do, so that a number keeps its unit (a word longer than ``limit``
    stays whole, on a line of its own)."""
    out = []
    seps = ("; ", " · ", ", ", " ")
    while len(line) > limit:
        found = [(line.rfind(sep, 0, limit), sep) for sep in seps[:-1]] + [(_space(line, limit), " ")]
        cut, sep = next(((c, x) for c, x in found if c > limit // 2), max(found))
        if cut <= 0:  # a first word longer than the line: it stays whole, on a line of its own
            after = [(c, x) for c, x in ((line.find(sep, 1), sep) for sep in seps) if c > 0]
            if not after:
                break
            cut, sep = min(after)
        out.append(line[: cut + len(sep)].rstrip())
        line = line[cut + len(sep) :]
    return [*out, line]


def _space(line: str, limit: int) -> int:
    """The last space within ``line``'s first ``limit`` characters, one after a number skipped
    ("6.15 ms" stays on one line) where another is found in the second half of them."""
    last = cut = line.rfind(" ", 0, limit)
    while cut > limit // 2 and line[cut - 1].isdigit():
        cut = line.rfind(" ", 0, cut)
    return cut if cut > limit // 2 else last


def wrap_report(text: str, width: int = REPORT_CHARS, indent: str = INDENT) -> list[str]:
    """``text``'s lines, each longer than ``width`` characters broken at word boundaries
    (:func:`wrap_line`); the lines after the first of a broken line start with its own
    indentation and ``indent``. A word longer than a line stays whole."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    width = check_int("width", width, lo=20, hi=10_000)
    if not isinstance(indent, str) or indent.strip() or len(indent) > width // 2:
        raise ValueError(f"indent must be at most {width // 2} spaces, got {indent!r}")
    out: list[str] = []
    for line in text.split("\n"):
        line = line.rstrip()
        first = wrap_line(line, width)[0]
        out.append(first)
        rest = line[len(first) :].strip()
        if rest:
            lead = line[: len(line) - len(line.lstrip())] + indent
            out += [lead + part for part in wrap_line(rest, width - len(lead))]
    return out


def wrap_paragraph(text: str, width: int = REPORT_CHARS) -> str:
    """A paragraph of prose (each of ``text``'s lines) broken at word boundaries within ``width``
    characters, its lines flush (:func:`wrap_report` without the indent), joined by newlines."""
    return "\n".join(wrap_report(text, width, indent=""))
