"""Quick *measured* step-time breakdowns of a DLRM on this machine (:func:`measure_step`).

Notebook apps and the efficiency model's validation need "how long does one training
step of this architecture take here, by phase?" in about a second. :func:`measure_step`
answers it by training a copy of the model whose tables are capped at ``max_rows`` rows
(so any architecture fits in memory and builds fast) on synthetic batches, for a warm-up
steps (until the step time settles) and then as many steps as fit in ``time_budget_s``, cycling over a few batches generated
beforehand (so the ``data`` phase is the hand-over to the device, not the generator). Capping rows keeps the work per
step (lookups, pooling, MLPs, optimizer rows touched) but makes tables cache-friendlier
than the full model's; the result says which cap it used.

:func:`measurement_bytes` estimates the working set first, so a setting that cannot be
measured here fails fast with :class:`DoesNotFitError` instead of swapping or crashing.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import torch

from recnotebooks.config import DLRMConfig
from recnotebooks.data.batch import Batch
from recnotebooks.data.synthetic import SyntheticCriteo
from recnotebooks.nn.dlrm import DLRM
from recnotebooks.timing import NULL_TIMER, PhaseTimer, phase_rows
from recnotebooks.train import TrainConfig, Trainer, resolve_device

__all__ = [
    "DoesNotFitError",
    "StepMeasurement",
    "measure_step",
    "measurement_bytes",
    "check_fits",
    "DEFAULT_MEMORY_BUDGET",
]

#: Largest working set :func:`measure_step` will allocate by default (bytes).
DEFAULT_MEMORY_BUDGET = 2 * 1024**3
#: Default cap on the bytes of all capped tables together (weights), which sets ``max_rows``.
DEFAULT_TABLE_BYTES = 64 * 1024**2


class DoesNotFitError(ValueError):
    """A setting whose measurement would not fit in the memory allowed for it."""


@dataclass
class StepMeasurement:
    """Mean seconds per training step, by phase, measured on ``device``.

    ``max_rows`` is the row cap of the measured copy; ``steps`` how many steps were
    averaged (after one warm-up step).
    """

    config_name: str
    batch_size: int
    device: str
    max_rows: int
    steps: int
    phases: dict[str, float]
    seconds_per_step: float
    source: str = "measured"
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def samples_per_s(self) -> float:
        return self.batch_size / self.seconds_per_step if self.seconds_per_step > 0 else 0.0

    def table(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows ``{phase, seconds_per_step, share, source, device, **extra}``."""
        return phase_rows(self.phases, self.source, device=self.device, **extra)


def default_max_rows(config: DLRMConfig, table_bytes: int = DEFAULT_TABLE_BYTES) -> int:
    """Row cap so that all capped tables together hold about ``table_bytes`` of fp32 weights."""
    per_row = config.num_tables * config.embedding_dim * 4
    return max(1024, min(max(t.num_rows for t in config.tables), table_bytes // per_row))


def measurement_bytes(config: DLRMConfig, batch_size: int, max_rows: int) -> int:
    """Estimated peak bytes of measuring ``config`` at ``batch_size`` with rows capped.

    Counts the capped tables with their optimizer state, the ids of a batch (a few int64
    copies: values, offsets, the row grouping of the sparse update), one embedding row per
    lookup twice (the gathered rows and their gradients in the update) and the activations
    kept for backward three times (forward, gradients, optimizer temporaries).
    """
    capped = config.with_max_rows(max_rows)
    lookups = batch_size * config.lookups_per_sample
    mem = capped.memory_footprint(batch_size=batch_size)
    tables = mem["embedding_weights"] + mem["embedding_optimizer_state"]
    dense = mem["dense_weights"] * 3
    ids = lookups * 8 * 4
    rows = lookups * config.embedding_dim * 4 * 2
    return int(tables + dense + ids + rows + 3 * mem["activations"])


def check_fits(
    config: DLRMConfig, batch_size: int, max_rows: int, memory_budget: int = DEFAULT_MEMORY_BUDGET
) -> None:
    """Raise :class:`DoesNotFitError` when measuring would need more than ``memory_budget``."""
    need = measurement_bytes(config, batch_size, max_rows)
    if need > memory_budget:
        raise DoesNotFitError(
            f"measuring batch_size={batch_size} with {config.num_tables} tables x pooling "
            f"{config.lookups_per_sample / config.num_tables:g} x dim {config.embedding_dim} needs about "
            f"{need / 1e9:.1f} GB here, over the {memory_budget / 1e9:.1f} GB allowed; lower the batch size, "
            "pooling, number of tables or embedding dim"
        )


_MODEL_CACHE: dict[tuple[object, ...], tuple[DLRM, Trainer]] = {}
_BATCH_CACHE: dict[tuple[object, ...], list[Batch]] = {}
#: Batches generated per measured setting; steps cycle through them, so the "data" phase
#: times the host-to-device hand-over, not the synthetic generator.
PREGENERATED_BATCHES = 2


def _trainer(config: DLRMConfig, device: torch.device, seed: int) -> Trainer:
    key = (config, str(device), seed)
    hit = _MODEL_CACHE.get(key)
    if hit is None:
        _MODEL_CACHE.clear()  # keep one model: apps measure one setting after another
        model = DLRM(config, device=device, seed=seed)
        tc = TrainConfig(steps=1, warmup_steps=0, eval_batches=0, progress=False)
        hit = (model, Trainer(model, [], config=tc, device=device))
        _MODEL_CACHE[key] = hit
    return hit[1]


def _batches(config: DLRMConfig, batch_size: int, seed: int) -> list[Batch]:
    key = (config, batch_size, seed)
    hit = _BATCH_CACHE.get(key)
    if hit is None:
        if len(_BATCH_CACHE) >= 4:
            _BATCH_CACHE.pop(next(iter(_BATCH_CACHE)))
        data = SyntheticCriteo(config, batch_size, seed=seed, device="cpu")
        hit = _BATCH_CACHE[key] = [data.batch(i) for i in range(PREGENERATED_BATCHES)]
    return hit


def _warm_up(trainer: Trainer, budget_s: float, max_steps: int = 6) -> None:
    """Untimed steps until the step time settles: a fresh process's first steps pay for page
    faults, allocator growth and kernel selection (2 at least; stop once a step is no more
    than 20% slower than the one before, after ``max_steps``, or once ``budget_s`` is spent)."""
    last, start = float("inf"), time.perf_counter()
    for i in range(max_steps):
        t0 = time.perf_counter()
        trainer.train_step(NULL_TIMER)
        dt = time.perf_counter() - t0
        if dt > budget_s or (i >= 1 and (dt <= 1.2 * last or time.perf_counter() - start > budget_s)):
            return  # a step longer than the budget: its one-time costs are small beside it
        last = dt


def measure_step(
    config: DLRMConfig,
    batch_size: int,
    *,
    max_rows: int | None = None,
    time_budget_s: float = 0.5,
    min_steps: int = 1,
    max_steps: int = 20,
    device: str | torch.device | None = "cpu",
    seed: int = 0,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> StepMeasurement:
    """Train a row-capped copy of ``config`` for a moment and return its phase breakdown.

    Args:
        config: the architecture (its tables are capped at ``max_rows`` for the measurement).
        batch_size: samples per step.
        max_rows: row cap; default :func:`default_max_rows` (about 64 MB of tables).
        time_budget_s: measure steps (after one warm-up) until this much time has passed.
        min_steps / max_steps: bounds on the measured steps.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        seed: seed of the weights and of the synthetic batches.
        memory_budget: refuse (:class:`DoesNotFitError`) settings whose estimated working
            set (:func:`measurement_bytes`) is larger.
    """
    if not isinstance(config, DLRMConfig):
        raise TypeError(f"config must be a DLRMConfig, got {type(config).__name__}")
    for name, v, lo in (("batch_size", batch_size, 1), ("min_steps", min_steps, 1), ("max_steps", max_steps, 1),
                        ("memory_budget", memory_budget, 1)):  # fmt: skip
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if max_steps < min_steps:
        raise ValueError(f"max_steps must be >= min_steps ({min_steps}), got {max_steps}")
    if (
        isinstance(time_budget_s, bool)
        or not isinstance(time_budget_s, (int, float))
        or not time_budget_s >= 0
    ):
        raise ValueError(f"time_budget_s must be a number >= 0, got {time_budget_s!r}")
    cap = default_max_rows(config) if max_rows is None else max_rows
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"max_rows must be an int >= 1, got {max_rows!r}")
    check_fits(config, batch_size, cap, memory_budget)
    dev = resolve_device(device)
    capped = config.with_max_rows(cap)
    trainer = _trainer(capped, dev, seed)
    trainer.train_data, trainer._iter = itertools.cycle(_batches(capped, batch_size, seed)), None
    _warm_up(trainer, max(time_budget_s, 0.05))
    timer = PhaseTimer(dev)
    t0 = time.perf_counter()
    while timer.steps < max_steps and (timer.steps < min_steps or time.perf_counter() - t0 < time_budget_s):
        trainer.train_step(timer)
    phases = timer.per_step()
    return StepMeasurement(
        config_name=config.name,
        batch_size=batch_size,
        device=str(dev),
        max_rows=cap,
        steps=timer.steps,
        phases=phases,
        seconds_per_step=sum(phases.values()),
    )
