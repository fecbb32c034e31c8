"""PhaseTimer: wall seconds and the timing thread's CPU seconds per phase."""

from __future__ import annotations

import time

from recnotebooks.timing import PHASES, PhaseTimer


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_cpu_seconds_count_work_not_waiting() -> None:
    timer = PhaseTimer()
    with timer.phase("data"):
        time.sleep(0.05)  # waiting: wall time, (almost) no CPU
    with timer.phase("backward"):
        _spin(0.05)  # computing: CPU time accrues while it runs
    timer.steps = 2
    wall, cpu = timer.per_step(), timer.per_step_cpu()
    assert set(wall) == set(cpu) == set(PHASES)
    assert wall["data"] >= 0.025 and cpu["data"] < 0.5 * wall["data"]
    assert 0 < cpu["backward"] <= wall["backward"] + 0.01
    timer.reset()
    assert timer.per_step_cpu() == dict.fromkeys(PHASES, 0.0) and timer.steps == 0


def test_disabled_timer_records_nothing() -> None:
    timer = PhaseTimer(enabled=False)
    with timer.phase("data"):
        _spin(0.001)
    assert timer.totals == timer.cpu_totals == dict.fromkeys(PHASES, 0.0)
