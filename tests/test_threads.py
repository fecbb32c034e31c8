"""The one thread policy (recnotebooks.threads) and what measures with it: the trainer, measure_step.

The load is read from a fake ``/proc/stat`` (the counters as numbers we choose), from a fake
monitor (the load as we choose it) and, once, from a real CPU-bound process beside the test.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import recnotebooks.threads as threads
from recnotebooks.config import preset
from recnotebooks.data import SyntheticCriteo
from recnotebooks.nn import DLRM
from recnotebooks.threads import (
    SLACK,
    CpuLoad,
    LoadFollower,
    LoadMonitor,
    choose_threads,
    rank_threads,
    threads_for,
    use_threads,
)
from recnotebooks.timing import MIN_RELIABLE_STEPS, SPREAD_LIMIT, reliability, spread
from recnotebooks.train import TrainConfig, Trainer


# ----- the rule ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cores", "others", "requested", "expected"),
    [(2, 0.0, 2, 2), (2, 0.1, 2, 2), (2, SLACK, 2, 2), (2, 0.5, 2, 1), (2, 1.0, 2, 1), (2, 2.0, 2, 1),
     (16, 3.2, 16, 13), (16, 3.2, 4, 4), (2, None, 2, 2), (4, 1.0, 8, 3), (1, 0.9, 1, 1)],
)  # fmt: skip
def test_threads_leave_the_cores_other_work_uses(cores: int, others: float | None, requested: int,
                                                 expected: int) -> None:  # fmt: skip
    assert threads_for(cores, others, requested) == expected


@given(st.integers(1, 64), st.floats(0, 64), st.integers(1, 64))
def test_threads_never_oversubscribe(cores: int, others: float, requested: int) -> None:
    n = threads_for(cores, others, requested)
    assert 1 <= n <= requested
    assert n == 1 or n + others <= cores + SLACK  # ours and theirs fit on the cores (up to the slack)


def _stat(cpu_busy: list[tuple[int, int]]) -> str:
    """A /proc/stat text: per CPU (busy jiffies in user, idle jiffies)."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0" for i, (busy, idle) in enumerate(cpu_busy)]
    return "\n".join([*lines, "intr 1 2 3", "ctxt 5"]) + "\n"


def test_the_monitor_subtracts_this_process_from_the_counters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two looks 1 s apart: the two CPUs were busy for 1.5 s together (150 ticks at 100 Hz) and
    this process for 0.4 s of it, so other work kept 1.1 cores busy."""
    stat = tmp_path / "stat"
    clock, own = [100.0], [7.0]
    monkeypatch.setattr(threads.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(threads.time, "process_time", lambda: own[0])
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    mon = LoadMonitor(stat, cpus={0, 1})
    mon._tick = 100.0
    stat.write_text(_stat([(1000, 5000), (2000, 5000), (9999, 0)]))  # cpu2 is not ours: ignored
    mon.mark()
    clock[0], own[0] = 101.0, 7.4
    stat.write_text(_stat([(1100, 5050), (2050, 5100), (99999, 0)]))
    load = mon.load()
    assert load == CpuLoad(2, pytest.approx(1.1), pytest.approx(1.0))
    clock[0] += 0.01  # a window under MIN_WINDOW_S says nothing
    assert mon.since_mark().others is None


def test_without_counters_the_load_average_stands_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert LoadMonitor(tmp_path / "no-such-file").load().others == pytest.approx(1.0)


def test_a_real_busy_process_is_seen() -> None:
    """A CPU-bound process beside us (an independent source of load) shows as other work."""
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat on this system")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # it is running
        mon = LoadMonitor()
        mon.mark()
        time.sleep(0.6)
        load = mon.since_mark()
    finally:
        busy.kill()
        busy.wait()
    assert load.others is not None and load.others >= 0.5, load


class FakeMonitor:
    """A load monitor whose load follows a script (one value per look; the last one repeats)."""

    def __init__(self, *others: float | None, cores: int = 2) -> None:
        self.script, self.cores, self.looks = list(others), cores, 0

    def _next(self) -> CpuLoad:
        value = self.script[min(self.looks, len(self.script) - 1)]
        self.looks += 1
        return CpuLoad(self.cores, value, 0.5)

    def load(self, **_: object) -> CpuLoad:
        return self._next()

    def since_mark(self) -> CpuLoad:
        return self._next()

    def mark(self) -> None:
        pass


#: Installs a scripted load (the others' busy cores, one value per look) and returns its monitor.
Machine = Callable[..., FakeMonitor]


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Machine]:
    """Make the policy see a 2-core machine (torch asked for 2 threads) under a scripted load."""

    def install(*others: float | None) -> FakeMonitor:
        fake = FakeMonitor(*others)
        monkeypatch.setattr(threads, "_MONITOR", fake)
        monkeypatch.setattr(threads, "usable_cores", lambda: 2)
        monkeypatch.delenv(threads.THREADS_ENV, raising=False)
        return fake

    old = torch.get_num_threads()
    torch.set_num_threads(2)
    yield install
    torch.set_num_threads(old)


def test_choose_threads_follows_the_load_and_says_why(machine: Machine) -> None:
    machine(1.0)
    c = choose_threads()
    assert (c.threads, c.requested, c.busy) == (1, 2, True)
    assert "1.0 of 2 cores busy" in c.describe() and "1 thread" in c.describe()
    machine(0.05)
    c = choose_threads()
    assert (c.threads, c.busy, c.describe()) == (2, False, "")
    assert choose_threads(3).threads == 3 and choose_threads(3).fixed  # a given count is used as given
    assert rank_threads(2).threads == 1  # two ranks share the two free cores
    machine(1.0)
    assert rank_threads(2).threads == 1 and rank_threads(1).threads == 1


def test_the_environment_fixes_the_count(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> None:
    machine(1.9)
    monkeypatch.setenv(threads.THREADS_ENV, "2")
    assert choose_threads().threads == 2 and choose_threads().fixed
    # the run's count, shared out among its local ranks: two ranks of 2 threads each on 2 cores
    # waited for a core at every parallel operation on a busy machine
    assert [rank_threads(w).threads for w in (1, 2, 4)] == [2, 1, 1] and rank_threads(2).fixed
    for bad in ("0", "two", "٢", "2000"):  # ٢: an Arabic-Indic digit, not ASCII
        monkeypatch.setenv(threads.THREADS_ENV, bad)
        with pytest.raises(ValueError, match="RECNB_THREADS must be a whole number"):
            choose_threads()


def test_use_threads_restores_torch() -> None:
    old = torch.get_num_threads()
    with use_threads(1) as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == old
    with pytest.raises(ValueError, match="threads must be"), use_threads(0):
        pass


# ----- the verdict --------------------------------------------------------------------------------
def test_reliability_names_each_reason() -> None:
    assert reliability(5, 1.1, 0.0) == "" and reliability(5, 1.1, None) == ""
    assert "only 2 timed steps" in reliability(2, 1.0, 0.0) and MIN_RELIABLE_STEPS == 3
    assert "varied 3.0-fold" in reliability(5, 3.0, 0.0) and SPREAD_LIMIT < 3.0
    assert reliability(5, SPREAD_LIMIT, 0.0) == ""
    assert "1.2 cores busy" in reliability(5, 1.0, 1.2)
    # on threads the policy moved to the free cores, other programs on the rest take nothing from it
    assert reliability(5, 1.0, 1.2, spare_cores=1.0) == ""
    said = "1.9 cores busy while it ran, more than the 1 its threads left free"
    assert said in reliability(5, 1.0, 1.9, 1.0)


def test_spread_ignores_a_long_runs_rare_slow_steps() -> None:
    assert spread([1.0]) == 1.0 and spread([1.0, 2.5]) == 2.5
    assert spread([1.0, 9.0, 1.5]) == 1.5  # one slow step: an outlier the median rejects
    assert spread([1.0, 9.0, 2.5, 1.1]) == 2.5  # two are not
    assert spread([1.0] * 95 + [9.0] * 5) == pytest.approx(1.0)  # 5% slow steps: p90/p10 = 1
    assert spread([1.0] * 50 + [3.0] * 50) == pytest.approx(3.0)


def test_the_load_follower_moves_with_the_load_and_averages_the_timed_windows(
    machine: Callable[..., FakeMonitor],
) -> None:
    fake = machine(1.0, 0.4, 0.0, 0.0)  # the start's look, the warm-up's look, then two more
    follower = LoadFollower(None, every_s=0.0)
    assert follower.threads == 1 and "1.0 of 2 cores busy" in follower.busy
    with follower.running():
        assert torch.get_num_threads() == 1
        follower.follow(time.perf_counter())  # a warm-up step's look: 0.4 busy, still one thread
        assert follower.threads == 1 and follower.other_load == pytest.approx(0.4)
        follower.restart()  # the timed steps start: the warm-up's window is forgotten
        follower.follow(time.perf_counter())  # the other program ended
        assert follower.threads == 2 and torch.get_num_threads() == 2
    assert fake.looks == 4 and torch.get_num_threads() == 2
    assert follower.other_load == 0.0 and follower.spare_cores == 0
    assert "0.4 of 2 cores busy" in follower.busy  # the last reason it ran on fewer threads
    slow = LoadFollower(None, every_s=3600.0)
    with slow.running():
        slow.follow(time.perf_counter())  # too soon for another look
    assert fake.looks == 6 and slow.threads == 2  # its first look, and the window at its end
    fixed = LoadFollower(1, every_s=0.0)
    with fixed.running():
        fixed.follow(time.perf_counter())
    assert fixed.threads == 1 and fixed.other_load is None and fixed.busy == ""


# ----- what measures with it ----------------------------------------------------------------------
def _trainer(steps: int, **tc: Any) -> Trainer:
    cfg = preset("tiny")
    data = SyntheticCriteo(cfg, batch_size=64, seed=0)
    config = TrainConfig(steps=steps, warmup_steps=1, eval_batches=0, progress=False, **tc)
    return Trainer(DLRM(cfg, seed=0), data, None, config, device="cpu")


def test_the_trainer_trains_on_the_free_cores_and_says_so(machine: Machine) -> None:
    machine(1.0)
    seen = []
    trainer = _trainer(6)
    trainer.callbacks.append(lambda rec: seen.append(torch.get_num_threads()))
    res = trainer.fit()
    assert res.threads == 1 and set(seen) == {1} and torch.get_num_threads() == 2  # restored after
    assert "1.0 of 2 cores busy" in res.busy and res.other_load == pytest.approx(1.0)
    # its one thread had its core: the other program does not make the numbers unreliable
    assert "cores busy" not in res.reliability
    machine(1.9)  # busier than the one core left: even one thread waits for a core
    res = _trainer(6).fit()
    assert res.threads == 1 and not res.reliable and "1.9 cores busy" in res.reliability
    assert all(r["reliable"] is False for r in res.phase_table())


def test_the_trainer_follows_the_load_as_it_changes(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import recnotebooks.train as train

    monkeypatch.setattr(train, "RECHECK_S", 0.0)  # look at the load before every step
    machine(1.0, 1.0, 0.0)  # busy at the start, then the other program ends
    seen: list[int] = []
    trainer = _trainer(8, log_every=1)
    trainer.callbacks.append(lambda rec: seen.append(torch.get_num_threads()))
    res = trainer.fit()
    assert seen[0] == 1 and seen[-1] == 2 and res.threads == 2


def test_an_explicit_thread_count_is_kept(machine: Machine) -> None:
    machine(1.9)
    res = _trainer(4, threads=2).fit()
    assert res.threads == 2 and res.other_load is None and res.busy == ""
    with pytest.raises(ValueError, match="threads must be"):
        TrainConfig(threads=0)


def test_an_idle_trainer_run_is_reliable(machine: Machine) -> None:
    machine(0.0)
    res = _trainer(12).fit()
    assert res.threads == 2 and res.other_load == 0.0
    assert res.reliable or "varied" in res.reliability  # only the machine's own noise can spoil it


def test_measure_step_uses_the_policy(machine: Machine) -> None:
    from recnotebooks.measure import measure_step

    machine(1.0)
    m = measure_step(preset("tiny"), 64, time_budget_s=0.0, min_steps=3, max_steps=3)
    assert m.threads == 1 and torch.get_num_threads() == 2 and m.spare_cores == 1.0
    assert "cores busy" not in m.reliability()  # on the free core: this machine's step on 1 thread
    machine(1.9)
    m = measure_step(preset("tiny"), 64, time_budget_s=0.0, min_steps=3, max_steps=3)
    assert not m.reliable and "cores busy" in m.reliability() and "NOT RELIABLE" in m.describe()
    assert all(r["reliable"] is False and r["step_min"] <= r["step_max"] for r in m.table())
    machine(0.0)
    m = measure_step(preset("tiny"), 64, time_budget_s=0.0, min_steps=3, max_steps=3)
    assert m.threads == 2 and m.other_load == 0.0 and "cores busy" not in m.reliability()
