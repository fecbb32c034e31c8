"""RECNB_SHUFFLE=<seed> runs the tests in an order drawn from the seed (tests/_shuffle.py): every
test once, modules kept together, the same order for the same seed, the seed printed; without
it, the collected order."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODULE = """
import pytest

@pytest.mark.parametrize("i", range(6))
def test_case(i):
    print(f"RAN {__name__.split('.')[-1]} {i}")
"""


def _order(tmp_path: Path, seed: str | None) -> tuple[list[str], str]:
    for name in ("test_a.py", "test_b.py", "test_c.py"):
        (tmp_path / name).write_text(MODULE)
    env = {k: v for k, v in os.environ.items() if k != "RECNB_SHUFFLE"}
    env["PYTHONPATH"] = str(ROOT / "tests")
    if seed is not None:
        env["RECNB_SHUFFLE"] = seed
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
           str(tmp_path), "-p", "_shuffle", "-p", "no:cacheprovider", str(tmp_path)]  # fmt: skip
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return re.findall(r"RAN (test_\w) (\d)", out.stdout), out.stdout


def test_a_seed_gives_one_random_order_of_every_test_with_modules_together(tmp_path: Path) -> None:
    collected, text = _order(tmp_path, None)
    assert collected == [(m, str(i)) for m in ("test_a", "test_b", "test_c") for i in range(6)]
    assert "RECNB_SHUFFLE" not in text
    first, text = _order(tmp_path, "1234")
    assert sorted(first) == sorted(collected) and first != collected
    assert [m for i, (m, _) in enumerate(first) if i == 0 or first[i - 1][0] != m] == sorted(
        {m for m, _ in first}, key=[m for m, _ in first].index
    )  # each module's tests run together
    assert text.count("RECNB_SHUFFLE=1234") == 2  # at the start (-q prints no header) and at the end
    again, _ = _order(tmp_path, "1234")
    other, _ = _order(tmp_path, "99")
    assert again == first and other != first


def test_a_seed_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="RECNB_SHUFFLE must be a whole number"):
        _order(tmp_path, "abc")
