"""The test run ends with what failed and the first lines of each failure (tests/_summary.py,
pyproject's addopts), however long the test ids, in a log 80 columns wide, on CI or not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FAILING = """
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("the fixture breaks on purpose")

@pytest.mark.parametrize("case", ["a_parameter_long_enough_to_fill_an_eighty_column_line_" + "x" * 30])
def test_fails_on_purpose(case):
    assert 1 == 2, "first line of the failure\\nits second line\\n" + "x" * 5000

def test_errs_on_purpose(broken):
    pass

def test_passes():
    pass
"""


@pytest.mark.parametrize("ci", ["", "true"])
def test_the_run_ends_with_the_failing_ids_and_their_first_lines(tmp_path: Path, ci: str) -> None:
    (tmp_path / "test_on_purpose.py").write_text(FAILING)
    env = {**os.environ, "COLUMNS": "80", "CI": ci, "PYTHONPATH": str(ROOT / "tests")}
    test = tmp_path / "test_on_purpose.py"
    cmd = [sys.executable, "-m", "pytest", "-q", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
           str(tmp_path), "-p", "_summary", "-p", "no:cacheprovider", str(test)]  # fmt: skip
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    tail = out.stdout[out.stdout.index("what failed, first lines") :].splitlines()
    failed = next(
        i for i, line in enumerate(tail) if line.startswith("FAILED test_on_purpose.py::test_fails")
    )
    assert "test_on_purpose.py:10)" in tail[failed]  # where it failed
    assert tail[failed + 1 : failed + 3] == [
        "    AssertionError: first line of the failure",
        "      its second line",
    ]
    assert len(tail[failed + 3]) < 220  # a line of the message, cut
    errored = next(
        i for i, line in enumerate(tail) if line.startswith("ERROR at setup test_on_purpose.py::test_errs")
    )
    assert tail[errored + 1] == "    RuntimeError: the fixture breaks on purpose"
    assert tail[-1].startswith("1 failed, 1 passed, 1 error")  # the counts end it, pytest's ids just above
    ids = tail[next(i for i, line in enumerate(tail) if "short test summary info" in line) :]
    assert any(line.startswith("FAILED test_on_purpose.py::test_fails") for line in ids)
