"""Per-phase wall-clock timing of training steps (:class:`PhaseTimer`).

Phases are named as the seed paper breaks a step down: data loading, embedding forward,
bottom MLP, interaction, top MLP, backward, sparse (embedding) optimizer, dense optimizer.
On CUDA the timer synchronises the device at phase boundaries so each phase's kernels are
charged to it (this costs a little overlap; it is what makes a breakdown meaningful).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["PHASES", "PhaseTimer", "phase_rows"]

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


def phase_rows(
    phases: dict[str, float], source: str = "measured", **extra: object
) -> list[dict[str, object]]:
    """Tidy rows ``{phase, seconds_per_step, share, source, **extra}``: the contract
    between every per-phase timing and the charts."""
    total = sum(phases.values()) or 1.0
    return [{"phase": k, "seconds_per_step": v, "share": v / total, "source": source, **extra}
            for k, v in phases.items()]  # fmt: skip


class PhaseTimer:
    """Accumulates seconds per phase; ``enabled=False`` makes :meth:`phase` free."""

    def __init__(self, device: torch.device | str = "cpu", enabled: bool = True) -> None:
        self.device = torch.device(device)
        self.enabled = enabled
        self.totals: dict[str, float] = dict.fromkeys(PHASES, 0.0)
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
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.totals[name] = self.totals.get(name, 0.0) + time.perf_counter() - t0

    def reset(self) -> None:
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.steps = 0

    def per_step(self) -> dict[str, float]:
        """Mean seconds per step for each phase."""
        n = max(self.steps, 1)
        return {k: v / n for k, v in self.totals.items()}

    def table(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows ``{phase, seconds_per_step, share, source="measured", **extra}``."""
        return phase_rows(self.per_step(), "measured", **extra)


class _NullTimer(PhaseTimer):
    def __init__(self) -> None:
        super().__init__(enabled=False)


NULL_TIMER: PhaseTimer = _NullTimer()
