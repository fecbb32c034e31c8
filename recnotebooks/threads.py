"""How many CPU threads a measurement may use: the one thread policy of every measured number.

A training step split over ``T`` threads waits, at every parallel operation, for its slowest
thread. When another program keeps one of two cores busy, one of our two threads is always
waiting for a core, and each parallel operation waits for it: steps measured here ran 10-40x
slower and erratic on 2 threads, but steady on 1 (``benchmarks/busy_machine.py``). So every
number recnotebooks *measures* — :meth:`~recnotebooks.train.Trainer.fit` (``recnb train``),
:func:`~recnotebooks.measure.measure_step` (the apps), the ranks of a distributed run — is
taken on the threads :func:`choose_threads` allows: the cores that other work leaves free.

How busy the other work is comes from the kernel's CPU counters (``/proc/stat``, the cores this
process may run on), less this process's own CPU time, over the time since the last look
(:class:`LoadMonitor`)::

    cores 2, other programs busy 1.0 core    -> 1 thread   (``busy``: the note says so)
    cores 2, other programs busy 0.1 core    -> 2 threads  (a browser redrawing is ignored)
    cores 16, other programs busy 3.2 cores  -> 12 threads

A load of up to :data:`SLACK` cores is ignored. Where the counters do not exist (not Linux) the
1-minute load average stands in. ``RECNB_THREADS=N`` fixes the count (for experiments); an
explicit thread count given to the trainer or to ``measure_step`` is used as given.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from recnotebooks.checks import check_int

__all__ = [
    "SLACK",
    "CpuLoad",
    "LoadFollower",
    "LoadMonitor",
    "ThreadChoice",
    "choose_threads",
    "load_monitor",
    "rank_threads",
    "threads_for",
    "usable_cores",
    "use_threads",
]

#: Cores of other work that are ignored: a notebook's browser redrawing or a clock ticking must
#: not halve the threads of a two-core laptop.
SLACK = 0.3
#: A look at the counters older than this is too old to describe the load now: a fresh
#: :data:`PROBE_S` window is measured instead.
MAX_AGE_S = 5.0
#: The shortest window measured when there is no recent look (seconds slept).
PROBE_S = 0.15
#: The shortest window :meth:`LoadMonitor.since_mark` reports a load for.
MIN_WINDOW_S = 0.05
#: Environment variable that fixes the thread count of every measurement.
THREADS_ENV = "RECNB_THREADS"


def usable_cores() -> int:
    """The CPU cores this process may run on: its affinity set, capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    try:  # cgroup v2: "max 100000" or "<quota> <period>"
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


@dataclass(frozen=True)
class CpuLoad:
    """Cores kept busy by *other* work over a window of ``window_s`` seconds (``others``,
    ``None`` where it cannot be measured), out of the ``cores`` this process may use."""

    cores: int
    others: float | None
    window_s: float


@dataclass(frozen=True)
class _Sample:
    at: float  # time.monotonic()
    busy: float  # seconds of CPU time spent on the cores we may use, by everyone
    own: float  # seconds of CPU time spent by this process (all its threads)


class LoadMonitor:
    """Cores busy with other work, from the kernel's per-CPU counters less this process's
    CPU time, over the window since the previous look (or a short fresh one).

    ``stat_path`` is the counters file (``/proc/stat``; tests pass a fake one) and ``cpus`` the
    CPU numbers to count (default: this process's affinity set).
    """

    def __init__(
        self, stat_path: str | os.PathLike[str] = "/proc/stat", cpus: set[int] | None = None
    ) -> None:
        self.stat_path = Path(stat_path)
        try:
            self.cpus = cpus if cpus is not None else set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self.cpus = set()
        self._last: _Sample | None = None
        try:
            self._tick = float(os.sysconf("SC_CLK_TCK"))
        except (AttributeError, OSError, ValueError):
            self._tick = 100.0

    def _read(self) -> _Sample | None:
        try:
            text = self.stat_path.read_text()
        except OSError:
            return None
        busy, seen = 0, False
        for line in text.splitlines():
            name, _, rest = line.partition(" ")
            if not name.startswith("cpu") or name == "cpu" or not name[3:].isdigit():
                continue
            if self.cpus and int(name[3:]) not in self.cpus:
                continue
            f = [int(x) for x in rest.split()]
            # user nice system idle iowait irq softirq steal (guest time is inside user)
            busy += f[0] + f[1] + f[2] + sum(f[5:8])
            seen = True
        if not seen:
            return None
        return _Sample(time.monotonic(), busy / self._tick, time.process_time())

    def load(self, *, probe_s: float = PROBE_S, max_age_s: float = MAX_AGE_S) -> CpuLoad:
        """Other work's busy cores since the last look; with no look in the last ``max_age_s``
        seconds (or one under ``probe_s`` ago), over a fresh ``probe_s`` window (this sleeps)."""
        cores = usable_cores()
        first = self._last
        now = self._read()
        if now is None:
            return CpuLoad(cores, _load_average_others(), 0.0)
        if first is None or not probe_s <= now.at - first.at <= max_age_s:
            time.sleep(probe_s)
            first, now = now, self._read()
            if now is None:
                return CpuLoad(cores, _load_average_others(), 0.0)
        self._last = now
        window = max(now.at - first.at, 1e-9)
        others = max(0.0, (now.busy - first.busy) - (now.own - first.own)) / window
        return CpuLoad(cores, min(others, float(cores)), window)

    def mark(self) -> None:
        """Start a window now (the next :meth:`load` or :meth:`since_mark` measures from here)."""
        self._last = self._read()

    def since_mark(self) -> CpuLoad:
        """Other work's busy cores since the last look, without sleeping (``others`` is ``None``
        when there was no look, or the window is under :data:`MIN_WINDOW_S`: too short for
        the counters' 10 ms ticks)."""
        cores = usable_cores()
        first, now = self._last, self._read()
        if now is None:
            return CpuLoad(cores, _load_average_others(), 0.0)
        self._last = now
        if first is None or now.at - first.at < MIN_WINDOW_S:
            return CpuLoad(cores, None, 0.0 if first is None else now.at - first.at)
        window = now.at - first.at
        others = max(0.0, (now.busy - first.busy) - (now.own - first.own)) / window
        return CpuLoad(cores, min(others, float(cores)), window)


def _load_average_others() -> float | None:
    """Other work's cores from the 1-minute load average, where there are no CPU counters: the
    runnable threads beyond this process's own (``None`` where there is no load average)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    return max(0.0, load - torch.get_num_threads())


def threads_for(cores: int, others: float | None, requested: int) -> int:
    """Threads that do not oversubscribe the cores other work uses: ``requested``, at most the
    cores left free (other work's load up to :data:`SLACK` ignored), at least 1."""
    cores = check_int("cores", cores, lo=1)
    requested = check_int("requested", requested, lo=1)
    if others is None:
        return requested
    free = cores - max(0.0, float(others))
    return max(1, min(requested, math.floor(free + SLACK)))


@dataclass(frozen=True)
class ThreadChoice:
    """The threads a measurement uses and why: ``cores`` this process may use, other work's
    busy cores ``others`` (``None``: unknown), the ``requested`` count, and ``fixed`` when the
    count was given (an argument or ``RECNB_THREADS``) rather than chosen by load."""

    threads: int
    cores: int
    others: float | None
    requested: int
    fixed: bool = False
    #: the seconds over which ``others`` was measured
    window_s: float = 0.0

    @property
    def busy(self) -> bool:
        """Whether other work kept more than :data:`SLACK` cores busy."""
        return self.others is not None and self.others > SLACK

    def describe(self) -> str:
        """The choice in words, for a note ("" on an idle machine at the requested count)."""
        if self.fixed:
            return f"{self.threads} thread(s), as asked"
        if not self.busy:
            return ""
        return (
            f"other programs kept {self.others:.1f} of {self.cores} cores busy: measured on "
            f"{self.threads} thread(s) so that no step waits for a core"
        )


_MONITOR = LoadMonitor()


def load_monitor() -> LoadMonitor:
    """The process-wide :class:`LoadMonitor` that :func:`choose_threads` reads by default."""
    return _MONITOR


def choose_threads(
    threads: int | None = None, *, requested: int | None = None, monitor: LoadMonitor | None = None
) -> ThreadChoice:
    """The threads to measure with now (see the module docstring).

    ``threads``: a count to use as given (no load check). ``None``: ``RECNB_THREADS`` if set,
    else ``requested`` (default: torch's thread setting) lowered to the cores other work leaves
    free. A loop that re-checks the load passes its first ``requested``, so that the count can
    rise again when the other work ends.
    """
    cores = usable_cores()
    if threads is not None:
        n = check_int("threads", threads, lo=1, hi=1024)
        return ThreadChoice(n, cores, None, n, fixed=True)
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        if not env.isascii() or not env.isdigit() or not 1 <= int(env) <= 1024:
            raise ValueError(f"{THREADS_ENV} must be a whole number of threads from 1 to 1024, got {env!r}")
        return ThreadChoice(int(env), cores, None, int(env), fixed=True)
    requested = (
        max(1, torch.get_num_threads()) if requested is None else check_int("requested", requested, lo=1)
    )
    load = (monitor or _MONITOR).load()
    return ThreadChoice(
        threads_for(cores, load.others, requested), cores, load.others, requested, window_s=load.window_s
    )


def rank_threads(world_size: int, *, monitor: LoadMonitor | None = None) -> ThreadChoice:
    """Threads for each of ``world_size`` local ranks: the free cores shared out evenly (at least
    one each), chosen once in the process that starts them. A count fixed by ``RECNB_THREADS`` is
    the run's, shared out the same way: each of two ranks given all of it ran twice the threads the
    count allows, and on a busy machine every parallel operation waited for a core (a 2-rank
    collective timing took 100-110 s instead of 17-30 s beside other work)."""
    world = check_int("world_size", world_size, lo=1)
    choice = choose_threads(monitor=monitor)
    if choice.fixed:
        return ThreadChoice(max(1, choice.threads // world), choice.cores, None, choice.threads, fixed=True)
    free = threads_for(choice.cores, choice.others, choice.cores)
    n = max(1, free // world)
    return ThreadChoice(
        n, choice.cores, choice.others, max(1, choice.cores // world), window_s=choice.window_s
    )


@contextmanager
def use_threads(threads: int) -> Iterator[int]:
    """Run the block with torch (and so the fused kernels) on ``threads`` intra-op threads;
    torch's setting is restored after."""
    n = check_int("threads", threads, lo=1, hi=1024)
    old = torch.get_num_threads()
    if n != old:
        torch.set_num_threads(n)
    try:
        yield n
    finally:
        if torch.get_num_threads() != old:
            torch.set_num_threads(old)


class LoadFollower:
    """The thread policy followed through a run: a training loop calls :meth:`follow` once a step.

    It starts on :func:`choose_threads`'s count (``threads``: a count to keep as given) and, while
    the loop runs (:meth:`running`), looks at the load again every ``every_s`` seconds and moves
    torch to the count the load allows now, up again when the other work ends. Each look's window
    is kept, so that :attr:`other_load` is the cores other programs kept busy on average while
    the timed steps ran; :meth:`restart` forgets the windows of the warm-up steps::

        follower = LoadFollower(None, every_s=2.0)
        with follower.running():
            for step in range(steps):
                t0 = time.perf_counter()
                train_step()
                follower.follow(t0)
        follower.threads, follower.busy, follower.other_load
    """

    def __init__(self, threads: int | None, *, every_s: float) -> None:
        choice = choose_threads(threads)
        self.follows = threads is None  #: whether the count may change with the load
        self.fixed = choice.fixed  #: a count given as an argument or by ``RECNB_THREADS``
        self.requested = choice.requested
        self.threads = choice.threads  #: the count now
        self.busy = choice.describe() if choice.busy else ""  #: why the policy lowered it
        self.every_s = every_s
        self._loads: list[tuple[float, float]] = []  # (seconds, other programs' busy cores) of each look
        self._checked = 0.0

    @contextmanager
    def running(self) -> Iterator[LoadFollower]:
        """Run the block on :attr:`threads` (torch's setting restored after); when it ends
        normally, the window since the last look is kept too."""
        with use_threads(self.threads):
            self.restart()
            self._checked = time.perf_counter()
            yield self
            self._keep(load_monitor().since_mark())

    def restart(self) -> None:
        """Forget the windows so far and start a new one now (the timed steps start here)."""
        self._loads = []
        load_monitor().mark()

    def follow(self, step_started: float) -> None:
        """After a step that started at ``step_started`` (``time.perf_counter()``): if the last
        look is over :attr:`every_s` seconds older, look again and move to the policy's count."""
        if not self.follows or step_started - self._checked <= self.every_s:
            return
        choice = choose_threads(requested=self.requested)
        self._keep(CpuLoad(choice.cores, choice.others, choice.window_s))
        if choice.threads != self.threads:
            torch.set_num_threads(choice.threads)
        self.threads = choice.threads
        self.busy = choice.describe() if choice.busy else self.busy
        self._checked = time.perf_counter()

    def _keep(self, load: CpuLoad) -> None:
        if load.others is not None:
            self._loads.append((load.window_s, load.others))

    @property
    def other_load(self) -> float | None:
        """Cores other programs kept busy on average over the windows kept (``None``: unknown,
        or a fixed count, which does not look)."""
        seconds = sum(w for w, _ in self._loads)
        if seconds <= 0 or self.fixed:
            return None
        return sum(w * o for w, o in self._loads) / seconds

    @property
    def spare_cores(self) -> int:
        """Cores the run's threads leave free."""
        return max(0, usable_cores() - self.threads)
