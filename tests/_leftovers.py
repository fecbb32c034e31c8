"""A pytest plugin (``tests/conftest.py`` loads it): every test module stops the processes it starts.

A rank, server, CLI run or busy loop left running loads the machine under the tests after it,
holds its ports and files, and writes into the log after the summary. Those a module leaves
running 5 s after its last test are killed, and the module errs at its end, naming them.
Linux only (read from /proc); elsewhere nothing is checked.
"""

from __future__ import annotations

import contextlib
import multiprocessing.resource_tracker
import os
import signal
import time
from collections.abc import Iterator

import _procs
import pytest

#: Seconds a module's processes get to finish exiting after its last test.
GRACE_S = 5.0


def _service_processes() -> set[int]:
    """Helpers that live as long as the test process by design: multiprocessing's resource
    tracker (started with the first spawned process)."""
    pid = getattr(multiprocessing.resource_tracker._resource_tracker, "_pid", None)
    return {pid} if pid else set()


def _started_since(before: set[int]) -> list[int]:
    return [p for p in _procs.children(os.getpid()) if p not in before and p not in _service_processes()]


@pytest.fixture(scope="module", autouse=True)
def _no_process_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """Kill and name the processes the module started and left running."""
    if not _procs.HAS_PROC:
        yield
        return
    before = set(_procs.children(os.getpid()))
    yield
    deadline, left = time.monotonic() + GRACE_S, _started_since(before)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _started_since(before)
    named = [f"  pid {p}: {_procs.command(p)[:200]}" for p in left]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if named:
        pytest.fail(
            f"{request.node.nodeid} left {len(named)} process(es) running (killed now):\n" + "\n".join(named)
        )
