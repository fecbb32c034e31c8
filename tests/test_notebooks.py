"""Notebook conventions (notebooks/README.md) and a headless smoke run of every notebook."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_there_are_notebooks() -> None:
    names = [p.name for p in PATHS]
    assert "00_start_here.ipynb" in names and "01_dlrm_anatomy.ipynb" in names


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_outputs_are_stripped(path: Path) -> None:
    for i, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], (
                f"{path.name} cell {i} has outputs; strip them before committing"
            )
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_notebook_conventions(path: Path) -> None:
    cells = _load(path)["cells"]
    first = "".join(cells[0]["source"])
    assert cells[0]["cell_type"] == "markdown" and "Learning goals" in first, "open with learning goals"
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    assert "smoke_mode()" in "".join(tagged[0]["source"])
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert any("check(" in c for c in code[-3:]), "end with exercises checked by recnotebooks.lab"
    for src in code:  # logic lives in the package: notebooks narrate and call it
        assert not re.search(r"^\s*(def|class)\s", src, re.M), (
            f"{path.name}: define functions in recnotebooks/"
        )
    assert any("from recnotebooks" in c for c in code)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_notebook_runs_headless_in_smoke_mode(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("RECNB_SMOKE", "1")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})  # fmt: skip
    client.execute()  # raises CellExecutionError on any error
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert os.environ["RECNB_SMOKE"] == "1"
    walls = [(i, len(t)) for i, c in enumerate(nb.cells) if c.cell_type == "code" for o in c.outputs
             if len(t := _shown_text(o)) > MAX_OUTPUT_CHARS]  # fmt: skip
    assert walls == [], (
        f"{path.name}: (cell, characters) of outputs too long to read; print what a learner needs"
    )
    assert _too_wide(nb) == [], f"{path.name}: printed lines wider than the notebook; print with say()"


#: The most characters one output may show as text: about a page (a printed Result, 9,400 characters
#: of nested rows, is a wall no learner reads).
MAX_OUTPUT_CHARS = 5000


def _shown_text(output: dict) -> str:
    """The text an output shows: a stream's, or a result's plain text when it has nothing richer."""
    if output.get("output_type") == "stream":
        return str(output.get("text", ""))
    data = output.get("data", {})
    return str(data.get("text/plain", "")) if set(data) <= {"text/plain"} else ""


def _too_wide(nb: object) -> list[tuple[int, int, str]]:
    """(cell, characters, line) of every line a cell shows as text (printed, or a result with nothing
    richer, such as ``exercises("04")``) longer than REPORT_CHARS: JupyterLab would break it anywhere,
    inside a number (recnotebooks.text). A line that is one unbreakable token (a bare URL), with at
    most its indentation before it, is allowed: it cannot be broken at a word boundary."""
    from recnotebooks.text import REPORT_CHARS

    return [(i, len(line), line[:60]) for i, c in enumerate(nb.cells) if c.cell_type == "code"  # type: ignore[attr-defined]
            for o in c.outputs for line in _shown_text(o).splitlines()
            if len(line) > REPORT_CHARS and len(line.split()) > 1]  # fmt: skip


def test_the_width_check_flags_a_wide_line_and_allows_a_bare_url() -> None:
    nbformat = pytest.importorskip("nbformat")
    v4 = nbformat.v4
    url = "https://example.org/" + "x" * 120
    wide = "64 GPUs (8 nodes) " + "1.32 ms a step; " * 7
    html = {"text/plain": wide, "text/html": "<b>"}  # a richer view: what the page shows is not this text
    nb = v4.new_notebook(cells=[
        v4.new_code_cell(outputs=[v4.new_output("stream", text=f"ok\n{wide}\n  {url}\n")]),
        v4.new_code_cell(outputs=[v4.new_output("execute_result", data={"text/plain": repr([wide])})]),
        v4.new_code_cell(outputs=[v4.new_output("display_data", data=html)]),
    ])  # fmt: skip
    assert [(i, n) for i, n, _ in _too_wide(nb)] == [(0, len(wide)), (1, len(repr([wide])))]
