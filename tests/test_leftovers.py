"""A test module that leaves a process running errs at its end, naming it, and the process is
killed (tests/_leftovers.py, which conftest loads for every module)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import _procs
import pytest

ROOT = Path(__file__).resolve().parent.parent

LEAKS = """
import subprocess, sys

def test_starts_a_process_and_leaves_it(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # left-behind-on-purpose"])
    (tmp_path.parent.parent / "pid").write_text(str(proc.pid))

def test_passes():
    pass
"""


def test_a_process_left_running_is_named_and_killed(tmp_path: Path) -> None:
    if not _procs.HAS_PROC:
        pytest.skip("reads processes from /proc")
    (tmp_path / "test_leaks.py").write_text(LEAKS)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "_leftovers", "-p", "no:cacheprovider",
           f"--basetemp={tmp_path / 'base'}", str(tmp_path / "test_leaks.py")]  # fmt: skip
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    pid = int((tmp_path / "pid").read_text())
    try:
        assert out.returncode == 1, out.stdout + out.stderr
        assert "ERROR at teardown of test_passes" in out.stdout
        assert "test_leaks.py left 1 process(es) running (killed now)" in out.stdout
        assert f"pid {pid}: " in out.stdout and "left-behind-on-purpose" in out.stdout
        deadline = time.monotonic() + 10
        while _procs.alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _procs.alive(pid)
    finally:
        if _procs.alive(pid):
            os.kill(pid, 9)


def test_a_socket_is_seen_and_a_vanishing_process_is_not_an_error() -> None:
    """``_procs.has_socket``: this process with a socket open holds one; a process that is gone,
    or a descriptor closed between the listing and its read, reads ``False`` or is skipped."""
    import socket

    if not _procs.HAS_PROC:
        pytest.skip("reads processes from /proc")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        assert _procs.has_socket(os.getpid())
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not _procs.has_socket(gone.pid)
