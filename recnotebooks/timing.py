"""Per-phase wall-clock timing of training steps (:class:`PhaseTimer`).

Phases are named as the seed paper breaks a step down: data loading, embedding forward,
bottom MLP, interaction, top MLP, backward, sparse (embedding) optimizer, dense optimizer.
On CUDA the timer synchronises the device at phase boundaries so each phase's kernels are
charged to it (this costs a little overlap; it is what makes a breakdown meaningful).

:func:`reliability` is the one rule that says when a measured step time cannot be trusted:
too few steps to tell an outlier, steps that vary too much, or other programs busy while it
ran. Measured steps (:mod:`recnotebooks.measure`) and training runs
(:mod:`recnotebooks.train`) carry its verdict; charts show it and exercise checks refuse to
judge such a number.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from recnotebooks.threads import SLACK

__all__ = [
    "MIN_RELIABLE_STEPS",
    "PHASES",
    "SPREAD_LIMIT",
    "PhaseTimer",
    "phase_rows",
    "reliability",
    "spread",
]

PHASES = (
    "data",
    "embedding_forward",
    "bottom_mlp",
    "interaction",
    "top_mlp",
    "backward",
    "sparse_optimizer",
    "dense_optimizer",
)


#: Timed steps a measurement needs before it can tell an outlier from the others.
MIN_RELIABLE_STEPS = 3
#: Step times that differ by more than this ratio (:func:`spread`: the second slowest over the
#: fastest of a few timed steps; for a long run, the 90th percentile over the 10th) make a
#: measurement unreliable.
SPREAD_LIMIT = 2.0


def spread(step_seconds: list[float] | tuple[float, ...]) -> float:
    """How much step times vary: for up to 10 steps the second slowest over the fastest (one slow
    step is an outlier the median already rejects; two are not), the slowest for 2 steps; the
    90th percentile over the 10th for more (a long run's rare slow steps are not its spread);
    1.0 for fewer than 2."""
    s = sorted(t for t in step_seconds if t > 0)
    if len(s) < 2:
        return 1.0
    if len(s) <= 10:
        return s[-2 if len(s) > 2 else -1] / s[0]
    return s[int(0.9 * (len(s) - 1))] / s[int(0.1 * (len(s) - 1))]


def reliability(steps: int, step_spread: float, other_load: float | None, spare_cores: float = 0.0) -> str:
    """Why a measured step time cannot be trusted, in words (``""``: it can): fewer than
    :data:`MIN_RELIABLE_STEPS` timed steps, a :func:`spread` over :data:`SPREAD_LIMIT`, or other
    programs keeping busy (``other_load``, ``None``: unknown) more than the ``spare_cores`` its
    threads left free, by over :data:`~recnotebooks.threads.SLACK` core, while it ran (then its
    threads waited for cores). A measurement the thread policy moved to the free cores is
    reliable: it is this machine's step on those threads (the note says how many)."""
    why = []
    if steps < MIN_RELIABLE_STEPS:
        why.append(f"only {steps} timed step{'s' if steps != 1 else ''}, too few to tell an outlier")
    if step_spread > SPREAD_LIMIT:
        why.append(f"its steps varied {step_spread:.1f}-fold")
    if other_load is not None and other_load > spare_cores + SLACK:
        left = f", more than the {spare_cores:.0f} its threads left free" if spare_cores >= 1 else ""
        why.append(f"other programs kept {other_load:.1f} cores busy while it ran{left}")
    return "; ".join(why)


def phase_rows(
    phases: dict[str, float], source: str = "measured", **extra: object
) -> list[dict[str, object]]:
    """Tidy rows ``{phase, seconds_per_step, share, source, **extra}``: the contract
    between every per-phase timing and the charts."""
    total = sum(phases.values()) or 1.0
    return [
        {"phase": k, "seconds_per_step": v, "share": v / total, "source": source, **extra}
        for k, v in phases.items()
    ]


class PhaseTimer:
    """Accumulates seconds per phase; ``enabled=False`` makes :meth:`phase` free.

    :attr:`totals` holds wall seconds per phase; :attr:`cpu_totals` the CPU seconds of the
    calling thread in each phase (``time.thread_time``: what this thread computed, not the time
    it waited or other programs had the core; the other threads' work, e.g. a collective
    library's, is not in it)."""

    def __init__(self, device: torch.device | str = "cpu", enabled: bool = True) -> None:
        self.device = torch.device(device)
        self.enabled = enabled
        self.totals: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.cpu_totals: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.steps = 0

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        self._sync()
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self._sync()
            self.totals[name] = self.totals.get(name, 0.0) + time.perf_counter() - t0
            self.cpu_totals[name] = self.cpu_totals.get(name, 0.0) + time.thread_time() - c0

    def reset(self) -> None:
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.cpu_totals = dict.fromkeys(PHASES, 0.0)
        self.steps = 0

    def per_step(self) -> dict[str, float]:
        """Mean seconds per step for each phase."""
        n = max(self.steps, 1)
        return {k: v / n for k, v in self.totals.items()}

    def per_step_cpu(self) -> dict[str, float]:
        """Mean CPU seconds of the timing thread per step for each phase (see the class docstring)."""
        n = max(self.steps, 1)
        return {k: v / n for k, v in self.cpu_totals.items()}

    def table(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows ``{phase, seconds_per_step, share, source="measured", **extra}``."""
        return phase_rows(self.per_step(), "measured", **extra)


class _NullTimer(PhaseTimer):
    def __init__(self) -> None:
        super().__init__(enabled=False)


NULL_TIMER: PhaseTimer = _NullTimer()
