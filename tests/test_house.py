"""The house stays readable (issue 38's numbers): no function over 80 lines outside generated
data, at most 26 over 60, ``type: ignore`` in tests at most half of the 264 counted when the
issue was filed, and ARCHITECTURE.md within 250 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "recnotebooks"

#: Files written by a generator (their header says which); their length is data, not code.
GENERATED = {"published/mlperf_results.py"}
LONG, TOO_LONG, MAX_LONG = 60, 80, 26
MAX_TEST_IGNORES = 264 // 2
MAX_ARCHITECTURE_LINES = 250


def function_lengths() -> list[tuple[int, str]]:
    """``(lines, "path:line name")`` of every function and method of the package."""
    rows = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in GENERATED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                rows.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.lineno} {node.name}"))
    return sorted(rows, reverse=True)


def test_the_generated_files_say_so() -> None:
    for rel in GENERATED:
        assert "generated" in (PACKAGE / rel).read_text()[:2000].lower(), rel


def test_no_function_over_80_lines() -> None:
    assert [r for r in function_lengths() if r[0] > TOO_LONG] == []


def test_few_functions_over_60_lines() -> None:
    long = [r for r in function_lengths() if r[0] > LONG]
    assert len(long) <= MAX_LONG, long


def test_type_ignores_in_tests_halved() -> None:
    count = sum(p.read_text().count("type: ignore") for p in (ROOT / "tests").rglob("*.py"))
    count -= (ROOT / "tests" / "test_house.py").read_text().count("type: ignore")  # this file's own words
    assert count <= MAX_TEST_IGNORES, count


def test_architecture_md_fits_250_lines() -> None:
    lines = (ROOT / "ARCHITECTURE.md").read_text().splitlines()
    assert len(lines) <= MAX_ARCHITECTURE_LINES, len(lines)


def test_the_counter_sees_long_functions() -> None:
    """The counter itself can fail: a 90-line function is seen with its length."""
    source = "def f():\n" + "    x = 1\n" * 89
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef) and node.end_lineno == 90
