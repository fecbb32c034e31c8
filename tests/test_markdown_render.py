"""Markdown renders as written in JupyterLab: no text of a notebook's markdown (or of the
notebooks' README, which JupyterLab's Markdown viewer renders the same way) is typeset as math.

JupyterLab renders a markdown cell in three steps (``renderMarkdown`` in
``@jupyterlab/rendermime``): ``removeMath`` lifts out what it takes for math, the rest goes through
the Markdown parser, then MathJax typesets the resulting HTML with ``$...$`` and ``\\(...\\)`` as
inline math and ``$$...$$``, ``\\[...\\]`` and ``\\begin{..}`` environments as display math
(``processEscapes``: ``\\$`` in the HTML is a literal dollar). Both the first and the last step can
eat text. The Markdown parser undoes a ``\\$`` escape, so "\\$9.2 on Big Basin, \\$2.9" reaches
MathJax as "$9.2 on Big Basin, $2.9", and "9.2 on Big Basin, " comes out as italic TeX.

:func:`remove_math` ports ``removeMath`` (the splitting of a cell into text and math: code spans
and fenced code protected first, then a split on ``$``, ``$$``, ``\\\\(`` ``\\\\)`` ``\\\\[`` ``\\\\]``,
``\\begin``/``\\end``, braces and paragraph breaks, math delimiters matched with braces balanced)
from ``packages/rendermime/src/latex.ts`` of jupyterlab/jupyterlab at tag v4.6.3 (the same
pattern ships in the 4.6.6 bundle this project installs; the MathJax delimiters above are those of
``packages/mathjax-extension/src/index.ts`` at that tag). :func:`typeset_as_math` adds the later
steps: code removed, Markdown's backslash escapes undone, then MathJax's delimiters searched in
each paragraph.

The course's markdown holds real math in a few places (notebook 01's cross layer, in TeX between
dollar signs): such a piece must be a formula (:func:`is_formula`: symbols, numbers, TeX commands and
one-letter names, no words of prose), and nothing else may be typeset. The project writes money one
way: "USD 9.2", never a dollar sign (notebooks/README.md, Conventions).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# ----- a port of removeMath (latex.ts, v4.6.3) ---------------------------------------------------
_INLINE = "$"
_MATHSPLIT = re.compile(
    r"(\$\$?|\\(?:begin|end)\{[a-z]*\*?\}|\\[{}$]|[{}]|(?:\n\s*)+|@@\d+@@|\\\\[()\[\]])", re.I
)
_FENCE = re.compile(r"^(?P<fence>`{3,}|(~T){3,})[^`\n]*\n([\s\S]*?)^(?P=fence)`*$", re.M)
_CODE_SPAN = re.compile(r"(^|[^\\])(`+)([^\n]*?[^`\n])\2(?!`)", re.M)


def _process_math(i: int, j: int, de_tilde, math: list[str], blocks: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Blocks ``i..j`` are one piece of math: store it, leave a ``@@n@@`` marker in block ``i``."""
    block = "".join(blocks[i : j + 1]).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for k in range(i + 1, j + 1):
        blocks[k] = ""
    blocks[i] = f"@@{len(math)}@@"
    math.append(de_tilde(block))


def remove_math(text: str) -> tuple[str, list[str]]:
    """JupyterLab's ``removeMath``: ``(text with @@n@@ markers, the math it lifted out)``."""
    math: list[str] = []
    start: int | None = None
    end: str | None = None
    last: int | None = None
    braces = 0
    if "`" in text or "~~~" in text:  # code spans and fences keep their dollars (~D) until the end
        text = text.replace("~", "~T")
        text = _FENCE.sub(lambda m: m.group(0).replace("$", "~D"), text)
        text = _CODE_SPAN.sub(lambda m: m.group(0).replace("$", "~D"), text)

        def de_tilde(s: str) -> str:
            return re.sub(r"~([TD])", lambda m: "~" if m.group(1) == "T" else _INLINE, s)
    else:

        def de_tilde(s: str) -> str:
            return s

    blocks = _MATHSPLIT.split(re.sub(r"\r\n?", "\n", text))
    i = 1
    while i < len(blocks):
        block = blocks[i]
        if block.startswith("@"):
            blocks[i] = f"@@{len(math)}@@"
            math.append(block)
        elif start is not None:
            if block == end:
                if braces:
                    last = i
                else:
                    _process_math(start, i, de_tilde, math, blocks)
                    start = end = last = None
            elif re.search(r"\n.*\n", block):
                if last is not None:
                    i = last
                    _process_math(start, i, de_tilde, math, blocks)
                start = end = last = None
                braces = 0
            elif block == "{":
                braces += 1
            elif block == "}" and braces:
                braces -= 1
        elif block in (_INLINE, "$$"):
            start, end, braces = i, block, 0
        elif block in ("\\\\(", "\\\\["):
            start, end, braces = i, "\\\\)" if block.endswith("(") else "\\\\]", 0
        elif block[1:6] == "begin":
            start, end, braces = i, "\\end" + block[6:], 0
        i += 2
    if start is not None and last is not None:
        _process_math(start, last, de_tilde, math, blocks)
    return de_tilde("".join(blocks)), math


# ----- what MathJax then finds in the rendered text ----------------------------------------------
_FENCED = re.compile(r"^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[`~]*$", re.M)
_SPAN = _CODE_SPAN  # what latex.ts takes for a code span (the parser's own rule, near enough)
#: CommonMark: a backslash before ASCII punctuation is an escape; the parser drops the backslash
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
#: MathJax's TeX delimiters as JupyterLab configures them (inline $ and \(, display $$, \[ and
#: environments), the opening one and what closes it
_OPENERS = re.compile(r"\$\$|\$|\\\(|\\\[|\\begin\{([a-z]*\*?)\}", re.I)


def rendered_text(source: str) -> str:
    """The text MathJax searches: ``remove_math``'s output with code blocks and spans left out
    (MathJax skips ``<pre>`` and ``<code>``) and Markdown's backslash escapes undone."""
    text, _ = remove_math(source)
    text = _FENCED.sub("", text)
    text = _SPAN.sub(lambda m: m.group(1), text)
    return _ESCAPE.sub(r"\1", text)


def typeset_as_math(source: str) -> list[str]:
    """Every piece of ``source`` JupyterLab would typeset as TeX: what ``removeMath`` lifts out, and
    what MathJax pairs in the rendered text of one paragraph (a ``$`` with the next ``$``, ``\\(``
    with ``\\)``...; a paragraph break ends the search, as it ends a ``<p>``)."""
    _, math = remove_math(source)
    found = list(math)
    for paragraph in re.split(r"\n\s*\n", rendered_text(source)):
        pos = 0
        while m := _OPENERS.search(paragraph, pos):
            opener = m.group(0)
            if opener.startswith("\\begin"):
                closer = "\\end{" + (m.group(1) or "") + "}"
            else:
                closer = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}[opener]
            stop = paragraph.find(closer, m.end())
            if stop < 0:  # no closing delimiter in this paragraph: MathJax leaves it as text
                pos = m.end()
                continue
            found.append(paragraph[m.start() : stop + len(closer)])
            pos = stop + len(closer)
    return found


#: a TeX command (``\\sum``, ``\\odot``) or a braced sub/superscript (``W_{ij}``): a formula's own words
_TEX_WORDS = re.compile(r"\\[A-Za-z]+|[_^]\{[^{}]*\}")


def is_formula(math: str) -> bool:
    """Whether a typeset piece is a formula someone meant: with its TeX commands and braced
    sub/superscripts left out, it has a letter and no word of two letters or more. Prose caught
    between two dollar amounts ("$9.2 on Big Basin, $") has words; two amounts alone ("$5, $")
    have no letter."""
    inner = _TEX_WORDS.sub(" ", math.strip("$"))
    return bool(re.search(r"[A-Za-z]", inner)) and not re.search(r"[A-Za-z]{2,}", inner)


def dollars(source: str) -> list[str]:
    """Each dollar sign in the rendered prose (code left out), with a little context: the course
    writes money as "USD 9.2" (notebooks/README.md), since one more "$" in the paragraph would
    pair with it."""
    text = rendered_text(source)
    return [text[max(0, m.start() - 20) : m.end() + 20] for m in re.finditer(r"\$", text)]


# ----- the port against JupyterLab's own behaviour ----------------------------------------------
#: 05 §4 as it stood: JupyterLab showed "cost 9.2onBigBasin,2.9 on Zion and 1.4(B200)to2.1 (H100)"
OLD_05 = (
    "A newer GPU costs more per hour but does more in it: a billion samples cost \\$9.2 on Big Basin, "
    "\\$2.9 on Zion and \\$1.4 (B200) to \\$2.1 (H100) on today's nodes (modeled, at list prices)."
)


@pytest.mark.parametrize(
    ("source", "math"),
    [
        ("a $x^2$ term and $$\\sum_i x_i$$", ["$x^2$", "$$\\sum_i x_i$$"]),  # what it is for
        ("costs $5 and $6 here", ["$5 and $"]),  # two amounts pair up
        ("`$foo` and `$bar` are variables", []),  # code spans are protected (latex.ts' own example)
        ("```python\nprint(f'${x}')\ny = '$'\n```\nthen text", []),  # so are fenced blocks
        ("one $5 here\n\nand $6 in the next paragraph", []),  # math does not cross a paragraph
        ("${a}$ and ${b", ["${a}$"]),  # braces must balance inside math
        ("\\\\(a+b\\\\) and \\\\[c\\\\]", ["\\\\(a+b\\\\)", "\\\\[c\\\\]"]),  # \\( in the source
        ("\\begin{align}x\\end{align}", ["\\begin{align}x\\end{align}"]),
    ],
)
def test_remove_math_splits_as_jupyterlab_does(source: str, math: list[str]) -> None:
    assert remove_math(source)[1] == math


def test_an_escaped_dollar_survives_remove_math_but_not_the_markdown_parser() -> None:
    """``\\$`` is not a delimiter to removeMath, but the parser drops the backslash and MathJax
    then pairs the dollars: what 05 §4 showed."""
    assert remove_math(OLD_05)[1] == []
    assert typeset_as_math(OLD_05) == ["$9.2 on Big Basin, $", "$1.4 (B200) to $"]
    assert len(dollars(OLD_05)) == 4


@pytest.mark.parametrize(
    "source",
    [
        "a billion samples cost USD 9.2 on Big Basin and USD 2.1 on an H100 node",
        "the price is in `usd_per_billion_samples`, printed as `f'USD {x:.1f}'`; a `$` in code is code",
        "a sample of *n* lookups is all-hot with about the hit rate to the power *n*",
        "rows 0–5 on rank 0, [a link](https://example.com/a_b?c=1) and {braces} in prose",
    ],
)
def test_text_written_to_the_convention_renders_as_written(source: str) -> None:
    assert typeset_as_math(source) == [] and dollars(source) == []


# ----- every markdown cell of the course ----------------------------------------------------------
def _markdown() -> list[tuple[str, str]]:
    """``(where, source)`` of every notebook's markdown cells and of notebooks/README.md."""
    cells = [("notebooks/README.md", (ROOT / "notebooks" / "README.md").read_text())]
    for path in NOTEBOOKS:
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "markdown":
                cells.append((f"{path.stem} cell {i}", "".join(cell["source"])))
    return cells


def _of(where: str, notebook: str) -> bool:
    return where.split(" cell ")[0] == notebook


@pytest.mark.parametrize("notebook", [p.stem for p in NOTEBOOKS] + ["notebooks/README.md"])
def test_no_markdown_is_typeset_as_math(notebook: str) -> None:
    """No text of the course is eaten by MathJax, and no dollar sign waits for a second one."""
    mine = [(where, source) for where, source in _markdown() if _of(where, notebook)]
    assert mine or notebook.endswith("README.md")
    bad = [
        f"{where}: typeset as math {math!r}"
        for where, source in mine
        for math in typeset_as_math(source)
        if not is_formula(math)
    ]
    bad += [
        f"{where}: a dollar sign in prose (write money as 'USD 9.2'): ...{near!r}..."
        for where, source in mine
        for near in dollars(source)
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("math", "meant"),
    [
        ("$y = x \\odot (W x + b) + x$", True),
        ("$$y_i = \\sum_j W_{ij}\\, x_i\\, x_j + (b_i + 1)\\, x_i ,$$", True),
        ("$l + 1$", True),
        ("$9.2 on Big Basin, $", False),  # 05 §4 as it stood
        ("$1.4 (B200) to $", False),
        ("$5, $", False),  # two amounts, no formula
    ],
)
def test_a_formula_is_told_from_prose_caught_between_dollars(math: str, meant: bool) -> None:
    assert is_formula(math) is meant


def test_the_currency_convention_is_stated() -> None:
    readme = (ROOT / "notebooks" / "README.md").read_text()
    assert "USD 9.2" in readme and "MathJax" in readme
