"""Printed reports keep within the notebook's width (recnotebooks.text, and viz.report's say built on it):
lines are broken at word boundaries only, never inside a number, and nothing is lost or reordered; the
width and the wrap have one home."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks import text
from recnotebooks.text import wrap_paragraph
from recnotebooks.viz import report, tidy
from recnotebooks.viz.report import INDENT, REPORT_CHARS, say, wrap_report

PACKAGE = Path(text.__file__).parent

# what 06 §5 printed before: JupyterLab broke it inside "4.55" at 848 px
LONG = (
    "64 GPUs (8 nodes) batch  32,768:  1.32 ms/step, 24.8 M samples/s (MODELED) x 0.707 epochs (PUBLISHED) "
    "= 2.19 min to train (MODELED); fixed part of a step  59%"
)


def test_the_width_fits_a_laptops_output_area() -> None:
    # JupyterLab's stream text: 13 px DejaVu Sans Mono, 0.602 em a character (1233/2048 units), in the
    # 840 px of text of the laptop layout's 848-px output area (tests/test_browser.py, measured there)
    char_px = 13 * 1233 / 2048
    assert int(840 / char_px) == 107 and REPORT_CHARS <= 107


def test_a_long_report_line_breaks_between_words() -> None:
    lines = wrap_report(LONG)
    assert len(lines) == 2 and all(len(line) <= REPORT_CHARS for line in lines)
    assert lines[1].startswith(INDENT) and not lines[1].startswith(INDENT + " ")
    assert " ".join(line.strip() for line in lines).split() == LONG.split()  # every word, in order, whole


def test_a_short_line_and_its_indentation_stay_as_they_are() -> None:
    assert wrap_report("   12.4 M/s") == ["   12.4 M/s"]
    lines = wrap_report("    " + LONG)
    assert lines[0].startswith("    ") and lines[1].startswith("    " + INDENT)


def test_each_line_of_a_text_is_wrapped_on_its_own() -> None:
    assert wrap_report("a\n\nb") == ["a", "", "b"]


def test_a_word_longer_than_a_line_stays_whole() -> None:
    url = "https://example.org/" + "x" * 120
    assert wrap_report(f"source: {url} (read 2026)") == ["source:", f"{INDENT}{url}", f"{INDENT}(read 2026)"]


def test_say_prints_like_print(capsys: pytest.CaptureFixture[str]) -> None:
    say("refused:", ValueError("too big"), 3)
    assert capsys.readouterr().out == "refused: too big 3\n"
    say(LONG)
    assert capsys.readouterr().out == "\n".join(wrap_report(LONG)) + "\n"


@pytest.mark.parametrize("bad, error", [(("text", 5), ValueError), ((3,), TypeError)])
def test_bad_input_is_named(bad: tuple[object, ...], error: type[Exception]) -> None:
    with pytest.raises(error, match="width|text"):
        wrap_report(*bad)  # type: ignore[arg-type]


WORD = st.one_of(
    st.from_regex(r"[0-9]{1,3}(,[0-9]{3}){0,2}(\.[0-9]{1,3})?", fullmatch=True),  # numbers, as printed
    st.from_regex(r"[a-zA-Z()%/;:,.-]{1,14}", fullmatch=True),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(WORD, min_size=1, max_size=60), st.integers(30, 120))
def test_no_line_is_wider_than_asked_and_no_word_is_cut(words: list[str], width: int) -> None:
    text = " ".join(words)
    lines = wrap_report(text, width)
    assert all(len(line) <= width for line in lines)
    assert [w for line in lines for w in line.split()] == text.split()


def test_the_width_and_the_wrap_have_one_home() -> None:
    assert report.wrap_report is text.wrap_report and report.REPORT_CHARS == text.REPORT_CHARS == 100
    assert tidy.wrap_subtitle(LONG) == text.wrap_line(LONG, tidy.SUBTITLE_CHARS)  # subtitles: same wrap
    copies = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = path.read_text()
        if re.search(r"^\s*(import textwrap|from textwrap )", src, re.M):
            copies.append(f"{path.name}: textwrap")
        copies += [
            f"{path.name}: {m}"
            for m in re.findall(r"^\s*([A-Z_]*(?:PRINT|REPORT)_(?:WIDTH|CHARS)) *=", src, re.M)
        ]
    assert copies == ["text.py: REPORT_CHARS"], (
        "print with recnotebooks.text, not a copy of its width or wrap"
    )


def test_a_paragraph_wraps_flush() -> None:
    lines = wrap_paragraph(LONG, 60).split("\n")
    assert len(lines) > 1 and all(len(line) <= 60 and not line.startswith(" ") for line in lines)
    assert " ".join(lines).split() == LONG.split()
    assert wrap_paragraph("  x\n\ny") == "  x\n\ny"


def test_an_indent_that_is_not_spaces_is_refused() -> None:
    with pytest.raises(ValueError, match="indent"):
        text.wrap_report(LONG, indent="--")


def test_a_number_keeps_its_unit() -> None:
    line = "MEASURED step here 6.4 ms against 10.3 ms MODELED for the same processes (collectives 6.15 ms)"
    assert text.wrap_line(line, 92) == [line[: line.index(" 6.15")], "6.15 ms)"]  # not "...6.15", "ms)"
