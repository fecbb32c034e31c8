"""Every benchmark script imports: a module it names moved or renamed breaks here, not in the
next benchmark run. (What the scripts measure is recorded in BENCHMARKS.md, not asserted.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))


def test_every_benchmark_script_imports() -> None:
    code = (
        "import importlib, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "sys.argv = ['import-check']\n"
        f"for name in {SCRIPTS!r}:\n"
        "    importlib.import_module(name)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


def test_the_scripts_are_found() -> None:
    assert {"train_throughput", "cache", "busy_machine", "step_bound"} <= set(SCRIPTS)
