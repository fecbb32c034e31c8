"""The documents a newcomer reads first: README's first screen (what it is, the model, the
notebooks, how to start, an example that runs), BENCHMARKS.md's headline table (every figure
one the benchmark log records) and links between the documents that arrive somewhere."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BENCHMARKS = (ROOT / "BENCHMARKS.md").read_text()
LOG = (ROOT / "docs" / "benchmarks-log.md").read_text()
HEADLINE_COLUMNS = ["what", "ours", "baseline", "ratio", "target", "machine", "command"]
#: A recorded figure: a decimal (``1.07``) or a number with thousands separators (``30,661``).
FIGURE = re.compile(r"\d[\d,]*\.\d+|\d{1,3}(?:,\d{3})+")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def first_screen(text: str) -> str:
    """Everything before the first second-level heading."""
    return text.split("\n## ", 1)[0]


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def table_rows(text: str) -> list[list[str]]:
    """The first Markdown table of ``text``, as rows of stripped cells (separator row left out)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


# ----- README --------------------------------------------------------------------------------
def test_readme_first_screen_has_what_a_newcomer_needs() -> None:
    screen = first_screen(README)
    assert len(screen.splitlines()) <= 70, "README's first screen has grown past one screen"
    drawing = code_blocks(screen, "")[0]
    for part in ("dense features", "bottom MLP", "sparse features", "embedding tables", "interaction",
                 "top MLP", "click probability"):  # fmt: skip
        assert part in drawing, f"the DLRM drawing lacks {part!r}"
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    listed = [row[0] for row in table_rows(screen)[1:]]
    assert listed == notebooks, "the first screen's notebook table must list every notebook, in order"
    assert all(len(row) == 3 and row[2] for row in table_rows(screen)[1:]), "each notebook names its app"
    shell = "\n".join(code_blocks(screen, "bash"))
    assert "make lab" in shell and "make test" in shell


def test_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line for line in ci.splitlines() if line and not line.startswith(("#", " ", "\t", "fi"))]
    assert commands[-1] == "make test"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test:", makefile, flags=re.M) and re.search(r"^lab:", makefile, flags=re.M)


def test_readme_example_runs_and_learns() -> None:
    (example,) = code_blocks(first_screen(README), "python")
    assert len(example.strip().splitlines()) <= 7, "the first example is meant to be six lines"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    said = re.search(r"AUC (\d\.\d+)", out.getvalue())
    assert said is not None, out.getvalue()
    auc = float(said.group(1))
    assert 0.65 < auc <= 1.0, f"the README's example should learn (chance is 0.5), got AUC {auc}"


# ----- BENCHMARKS.md -------------------------------------------------------------------------
def test_benchmarks_opens_with_one_headline_table() -> None:
    head = first_screen(BENCHMARKS)
    rows = table_rows(head)
    assert rows[0] == HEADLINE_COLUMNS
    assert len(rows) > 10
    for row in rows[1:]:
        assert len(row) == len(HEADLINE_COLUMNS) and all(row), row
        assert "`" in row[-1] or "notebook" in row[-1], f"{row[0]}: no command"
    assert "**Method.**" in head and "docs/benchmarks-log.md" in head


def test_every_headline_figure_is_one_the_log_records() -> None:
    missing = [
        (row[0], figure)
        for row in table_rows(BENCHMARKS)[1:]
        for cell in row[1:5]
        for figure in FIGURE.findall(cell)
        if figure not in LOG
    ]
    assert missing == []


def test_the_figure_check_can_fail() -> None:
    assert FIGURE.findall("ours 46,073 samples/s, 1.50x, ≤ 1.3x, 3 of 3") == ["46,073", "1.50", "1.3"]
    assert "46,074" not in LOG


# ----- links between the documents ----------------------------------------------------------
DOCS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
DOCUMENTS = ["README.md", "BENCHMARKS.md", "notebooks/README.md", *DOCS]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_links_arrive_at_a_file_and_a_heading(name: str) -> None:
    source = ROOT / name
    broken = []
    for target in LINK.findall(source.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = (source.parent / path).resolve() if path else source
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", file.read_text(), flags=re.M)
            if anchor not in {slug(h) for h in headings}:
                broken.append(target)
    assert broken == []


# ----- ARCHITECTURE.md's reading path ------------------------------------------------------
ARCHITECTURE = (ROOT / "ARCHITECTURE.md").read_text()
#: What the speed machinery looks like in code: none of it belongs on the reading path.
MACHINERY = re.compile(r"\bnumba\b|\bnjit\b|\bprange\b|\bcfunc\b|GOMP|omp_get|openmp", re.I)


def reading_path() -> list[tuple[str, int]]:
    """``(file, lines)`` of ARCHITECTURE.md's "Read it in this order" table, in order."""
    section = ARCHITECTURE.split("## Read it in this order", 1)[1].split("\n## ", 1)[0]
    return [(row[1].strip("`"), int(row[2])) for row in table_rows(section)[1:]]


def code_of(source: str) -> str:
    """``source`` without its docstrings and comments (what runs)."""
    import ast
    import tokenize

    tree = ast.parse(source)
    lines = source.splitlines()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                for i in range(body[0].lineno - 1, body[0].end_lineno):
                    lines[i] = ""
    text = "\n".join(lines)
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    comments = {(t.start[0], t.start[1]) for t in tokens if t.type == tokenize.COMMENT}
    out = text.splitlines()
    for row, col in comments:
        out[row - 1] = out[row - 1][:col]
    return "\n".join(out)


def test_the_reading_path_starts_at_config_and_ends_at_train() -> None:
    files = [f for f, _ in reading_path()]
    core = ["config/model.py", "sparse.py", "nn/embedding.py", "nn/dlrm.py", "nn/optim.py", "train.py"]
    positions = [next(i for i, f in enumerate(files) if f.endswith("recnotebooks/" + c)) for c in core]
    assert positions == sorted(positions), files


@pytest.mark.parametrize(("name", "lines"), reading_path())
def test_the_reading_path_counts_its_lines_and_holds_no_speed_machinery(name: str, lines: int) -> None:
    source = (ROOT / name).read_text()
    actual = len(source.splitlines())
    assert abs(actual - lines) <= 0.1 * actual, f"{name}: ARCHITECTURE.md says {lines} lines, it has {actual}"
    found = MACHINERY.findall(code_of(source))
    assert not found, f"{name} holds speed machinery: {found}"


def test_the_machinery_check_can_fail() -> None:
    assert MACHINERY.findall(code_of("from numba import njit\n\n@njit\ndef f(): pass\n"))
    assert not MACHINERY.findall(code_of('"""Numba kernels live elsewhere."""\nx = 1  # numba\n'))
