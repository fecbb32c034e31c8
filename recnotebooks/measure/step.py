"""Quick *measured* step-time breakdowns of a DLRM on this machine (:func:`measure_step`).

Notebook apps and the efficiency model's validation need "how long does one training
step of this architecture take here, by phase?" in about a second. :func:`measure_step`
answers it by training a copy of the model whose tables are capped at ``max_rows`` rows
(so any architecture fits in memory and builds fast) on synthetic batches: warm-up steps
until the step time settles, then as many timed steps as fit in ``time_budget_s``, cycling
over a few batches generated beforehand (so the ``data`` phase is the hand-over to the
device, not the generator). Capping rows keeps the work per step (lookups, pooling, MLPs,
optimizer rows touched) but makes tables cache-friendlier than the full model's; the
result says which cap it used.

A shared or busy machine makes single steps slow now and then (another process takes the
core, the allocator grows). So the result is the **median** step, not the mean; a step
more than :data:`OUTLIER_FACTOR` times the median of the others is **re-measured**; and a
``deadline_s`` bounds the whole call, so an app never makes a learner wait (the result
says when the deadline cut the measurement short). The threads come from the one thread
policy, :func:`recnotebooks.threads.choose_threads`: no more than the cores that other work
leaves free. A measurement says whether it can be trusted (:attr:`StepMeasurement.reliable`):
too few timed steps, steps that vary too much, or other programs busy while it ran make it
unreliable (:func:`recnotebooks.timing.reliability`), and charts and exercise checks show or
refuse it as such. :func:`measure_step_cached` reuses a reliable
measurement of the same setting (measured copy, batch, device), for apps whose other inputs
are modeled only; an unreliable one is measured again.

:func:`measurement_bytes` estimates the working set first, so a setting that cannot be
measured here fails fast with :class:`DoesNotFitError` instead of swapping or crashing.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from recnotebooks.checks import check_float, check_int, check_steps, check_type
from recnotebooks.config import DLRMConfig
from recnotebooks.data.batch import Batch
from recnotebooks.data.synthetic import SyntheticCriteo
from recnotebooks.kernels.allocator import keep_freed_memory
from recnotebooks.measure.cores import apart_words, handoff_reading
from recnotebooks.nn.dlrm import DLRM
from recnotebooks.perf.calibration_file import calibration_threads
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import Hardware, is_calibrated
from recnotebooks.perf.memory import memory_footprint
from recnotebooks.text import wrap_report
from recnotebooks.threads import SLACK, CpuLoad, ThreadChoice, choose_threads, load_monitor, use_threads
from recnotebooks.timing import MIN_RELIABLE_STEPS, NULL_TIMER, PhaseTimer, phase_rows, reliability, spread
from recnotebooks.train import TrainConfig, Trainer, resolve_device

__all__ = [
    "DoesNotFitError",
    "StepMeasurement",
    "measure_step",
    "measure_step_cached",
    "measurement_bytes",
    "check_fits",
    "DEFAULT_MEMORY_BUDGET",
    "OUTLIER_FACTOR",
    "clear_measurements",
    "median_step",
    "outlier_steps",
    "PHASE_WORK",
    "StepReading",
    "read_step",
    "MAX_MEASURED_STEP_S",
    "MEASURE_DEADLINE_S",
    "MEASURED_STEPS",
    "check_measurable",
    "measure_here",
]

#: Largest working set :func:`measure_step` will allocate by default (bytes).
DEFAULT_MEMORY_BUDGET = 2 * 1024**3
#: Default cap on the bytes of all capped tables together (weights), which sets ``max_rows``.
DEFAULT_TABLE_BYTES = 64 * 1024**2
#: A measured step slower than this many times the median of the other steps is an outlier
#: (the machine was busy during it) and is measured again.
OUTLIER_FACTOR = 2.0
#: Two measurements of one setting further apart than this ratio disagree (see
#: :func:`measure_step_cached` with ``fresh=True``).
DISAGREE_RATIO = 1.5
#: Measurements kept by :func:`measure_step_cached` (least recently used dropped first).
CACHE_SIZE = 64


class DoesNotFitError(ValueError):
    """A setting whose measurement would not fit in the memory allowed for it."""


@dataclass
class StepMeasurement:
    """The median seconds per training step, by phase, measured on ``device``.

    ``max_rows`` is the row cap of the measured copy; ``steps`` how many timed steps (after
    warm-up) the median is over and ``step_seconds`` their totals, in order; ``remeasured``
    counts outlier steps timed again; ``cut_short`` is true when ``deadline_s`` stopped the
    measurement before ``min_steps``; ``reused`` when :func:`measure_step_cached` returned
    an earlier measurement of the same setting. ``threads`` is the number of CPU threads used
    and ``busy`` why the thread policy lowered it (``""``: it did not); ``other_load`` the cores
    other programs kept busy while it ran (``None``: unknown). :attr:`reliable` says whether
    the number can be trusted, :meth:`reliability` why not.
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
    step_seconds: tuple[float, ...] = ()
    remeasured: int = 0
    cut_short: bool = False
    reused: bool = False
    threads: int = 0
    busy: str = ""
    other_load: float | None = None
    #: cores this process could use that the measurement's threads left free
    spare_cores: float = 0.0
    #: where its threads ran: :func:`~recnotebooks.measure.cores.handoff` read after the timed
    #: steps (``None``: one thread, or a GPU); from
    #: :data:`~recnotebooks.measure.cores.APART_HANDOFF` up their cores shared no cache
    handoff: float | None = None

    @property
    def samples_per_s(self) -> float:
        return self.batch_size / self.seconds_per_step if self.seconds_per_step > 0 else 0.0

    @property
    def spread(self) -> float:
        """How much the timed steps varied (:func:`~recnotebooks.timing.spread`)."""
        return spread(self.step_seconds)

    def reliability(self) -> str:
        """Why this measurement cannot be trusted, in words (``""``: it can; the rule is
        :func:`recnotebooks.timing.reliability`)."""
        return reliability(self.steps, self.spread, self.other_load, self.spare_cores)

    @property
    def reliable(self) -> bool:
        """Whether the number can be trusted (see :meth:`reliability`)."""
        return not self.reliability()

    def table(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows ``{phase, seconds_per_step, share, source, device, reliable, reliability,
        step_min, step_max, **extra}`` (``step_min``/``step_max``: the fastest and slowest timed
        step, seconds)."""
        steps = self.step_seconds or (self.seconds_per_step,)
        return phase_rows(
            self.phases,
            self.source,
            device=self.device,
            reliable=self.reliable,
            reliability=self.reliability(),
            step_min=min(steps),
            step_max=max(steps),
            **extra,
        )

    def model_note(self, hw: Hardware) -> str:
        """What an app's note says after "the model predicts ... for this machine" when ``hw``
        (``this_machine``'s model) is shown beside this measurement: that the model holds
        uncalibrated defaults, or that the calibration fitted it on more CPU threads than this
        step ran on (so the step is slower than it); ``""`` when neither holds. The threads are
        the saved calibration's (:func:`~recnotebooks.perf.calibration_file.calibration_threads`),
        the file ``hardware("this_machine")`` reads ``hw`` from."""
        check_type("hw", hw, Hardware, "a Hardware")
        if not is_calibrated(hw):
            return " from uncalibrated defaults (run recnb calibrate to fit it here)"
        fitted = calibration_threads() if self.device == "cpu" else None
        if fitted is not None and 0 < self.threads < fitted:
            return (
                f" as calibrated on {fitted} threads, where this step ran on {self.threads}: expect "
                "the step slower than the model"
            )
        return ""

    def describe(self) -> str:
        """How the number was obtained, in words, for an app's note."""
        words = [f"median of {self.steps} step{'s' if self.steps != 1 else ''} after warm-up"]
        if self.remeasured:
            words.append(
                f"{self.remeasured} outlier step(s) (over {OUTLIER_FACTOR:g}x the others' median) "
                "measured again"
            )
        if self.cut_short:
            words.append(
                "fewer steps than asked: the time allowed for one update ran out (is the machine busy?)"
            )
        if self.busy:
            words.append(self.busy)
            if self.reliable and self.other_load is not None:  # the load the flag judges, said beside it
                words.append(
                    f"while it ran they kept {self.other_load:.2f} cores busy, not more than the "
                    f"{self.spare_cores:.0f} its threads left free (give or take {SLACK:g} core): reliable"
                )
        elif self.threads:
            words.append(f"{self.threads} thread(s)")
        if apart := apart_words(self.handoff, self.threads):
            words.append(apart)
        if self.reused:
            words.append("reused: measured earlier for the same setting")
        if not self.reliable:
            words.append(f"NOT RELIABLE: {self.reliability()}")
        return "; ".join(words)


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
    mem = memory_footprint(capped, batch_size=batch_size)
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
_MEASURED: OrderedDict[tuple[object, ...], StepMeasurement] = OrderedDict()
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


def _warm_up(trainer: Trainer, budget_s: float, stop_at: float, max_steps: int = 6) -> None:
    """Untimed steps until the step time settles: a fresh process's first steps pay for page
    faults, allocator growth and kernel selection. One step always; stop once a step is no
    more than 20% slower than the one before, after ``max_steps``, once ``budget_s`` is
    spent, or when the next step would end after ``stop_at`` (a ``perf_counter`` time)."""
    last, start = float("inf"), time.perf_counter()
    for _ in range(max_steps):
        t0 = time.perf_counter()
        trainer.train_step(NULL_TIMER)
        now = time.perf_counter()
        dt = now - t0
        if dt > budget_s or dt <= 1.2 * last or now - start > budget_s or now + dt > stop_at:
            return
        last = dt


def _timed_step(trainer: Trainer, device: torch.device) -> dict[str, float]:
    """Seconds per phase of one training step."""
    timer = PhaseTimer(device)
    trainer.train_step(timer)
    return dict(timer.totals)


def outlier_steps(totals: list[float], factor: float = OUTLIER_FACTOR) -> list[int]:
    """Indices of the steps slower than ``factor`` times the median of the other steps."""
    if len(totals) < 2:
        return []
    return [i for i, t in enumerate(totals) if t > factor * statistics.median(totals[:i] + totals[i + 1 :])]


def median_step(steps: list[dict[str, float]]) -> dict[str, float]:
    """The median step, phase by phase: the middle step by total time (for an even count,
    the mean of the two middle ones), so its phases add up to the median total."""
    order = sorted(steps, key=lambda s: sum(s.values()))
    middle = order[(len(order) - 1) // 2 : len(order) // 2 + 1]
    return {k: sum(s[k] for s in middle) / len(middle) for k in middle[0]}


def _check_args(
    config: object,
    batch_size: object,
    max_rows: object,
    time_budget_s: object,
    min_steps: object,
    max_steps: object,
    memory_budget: object,
    deadline_s: object,
) -> tuple[int, int, int, float, float | None]:
    config = check_type("config", config, DLRMConfig, "a DLRMConfig")
    check_int("batch_size", batch_size, lo=1)
    check_int("memory_budget", memory_budget, lo=1)
    lo = check_steps("min_steps", min_steps, lo=1)
    hi = check_steps("max_steps", max_steps, lo=lo)
    budget = check_float("time_budget_s", time_budget_s, lo=0)
    deadline = None if deadline_s is None else check_float("deadline_s", deadline_s, lo=0, lo_open=True)
    cap = default_max_rows(config) if max_rows is None else check_int("max_rows", max_rows, lo=1)
    return cap, lo, hi, budget, deadline


@dataclass(frozen=True)
class _Budget:
    """How long a measurement times steps: ``seconds`` of timed steps (between ``min_steps`` and
    ``max_steps``), no step starting that would end after ``stop_at`` (``time.perf_counter``),
    except to reach :data:`~recnotebooks.timing.MIN_RELIABLE_STEPS` before ``hard_stop_at``."""

    seconds: float
    min_steps: int
    max_steps: int
    stop_at: float = float("inf")
    hard_stop_at: float = float("inf")

    @classmethod
    def starting_now(
        cls, seconds: float, min_steps: int, max_steps: int, deadline_s: float | None
    ) -> _Budget:
        """The budget of a call allowed ``deadline_s`` from now (``None``: no limit; the hard
        stop at twice it)."""
        if deadline_s is None:
            return cls(seconds, min_steps, max_steps)
        start = time.perf_counter()
        return cls(seconds, min_steps, max_steps, start + deadline_s, start + 2 * deadline_s)


def _timed_steps(
    trainer: Trainer, device: torch.device, budget: _Budget
) -> tuple[list[dict[str, float]], int]:
    """Timed steps (at least one) with outliers measured again once each; returns the steps and
    how many were re-measured, within ``budget``."""
    steps: list[dict[str, float]] = []
    t0 = time.perf_counter()
    min_steps, max_steps, stop_at = budget.min_steps, budget.max_steps, budget.stop_at
    needed = min(min_steps, MIN_RELIABLE_STEPS)
    while len(steps) < max_steps and (len(steps) < min_steps or time.perf_counter() - t0 < budget.seconds):
        end = time.perf_counter() + statistics.median(sum(s.values()) for s in steps) if steps else 0.0
        if steps and end > (budget.hard_stop_at if len(steps) < needed else stop_at):
            break
        steps.append(_timed_step(trainer, device))
    remeasured = 0
    for i in outlier_steps([sum(s.values()) for s in steps]):
        if time.perf_counter() + statistics.median(sum(s.values()) for s in steps) > stop_at:
            break
        steps[i] = _timed_step(trainer, device)
        remeasured += 1
    return steps, remeasured


def _measure(
    config: DLRMConfig,
    cap: int,
    batch_size: int,
    dev: torch.device,
    seed: int,
    budget: _Budget,
    threads: int | None,
) -> StepMeasurement:
    """:func:`measure_step` of its checked settings: the row-capped copy warmed up and timed on
    the threads the thread policy chose, with the load of other programs during the timed steps."""
    capped = config.with_max_rows(cap)
    choice = choose_threads(threads)
    keep_freed_memory()  # every measured step under one allocator (kernels/allocator.py)
    with use_threads(choice.threads) as used:
        trainer = _trainer(capped, dev, seed)
        trainer.train_data, trainer._iter = itertools.cycle(_batches(capped, batch_size, seed)), None
        _warm_up(trainer, max(budget.seconds, 0.05), budget.stop_at)
        load_monitor().mark()
        steps, remeasured = _timed_steps(trainer, dev, budget)
        during = load_monitor().since_mark()
        placed = handoff_reading(dev, used)
    return StepMeasurement(
        config_name=config.name,
        batch_size=batch_size,
        device=str(dev),
        max_rows=cap,
        **_timing(steps, remeasured, budget, choice, used, during, placed),
    )


def _timing(
    steps: list[dict[str, float]],
    remeasured: int,
    budget: _Budget,
    choice: ThreadChoice,
    used: int,
    during: CpuLoad,
    placed: float | None,
) -> dict[str, object]:
    """The :class:`StepMeasurement` fields of timed ``steps`` (the median step by phase, every
    step's total, whether the budget cut them short) and of the threads they ran on (``choice``
    of the thread policy, ``used``, the load of other programs ``during`` them, where their cores
    were: ``placed``, :func:`~recnotebooks.measure.cores.handoff_reading`): what every measured
    step reports, a DLRM's or an HSTU's."""
    phases = median_step(steps)
    return {
        "steps": len(steps),
        "phases": phases,
        "seconds_per_step": sum(phases.values()),
        "step_seconds": tuple(sum(s.values()) for s in steps),
        "remeasured": remeasured,
        "cut_short": len(steps) < budget.min_steps,
        "threads": used,
        "busy": choice.describe() if choice.busy else "",
        "other_load": None if choice.fixed else during.others,
        "spare_cores": float(max(0, choice.cores - used)),
        "handoff": placed,
    }


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
    deadline_s: float | None = None,
    threads: int | None = None,
) -> StepMeasurement:
    """Train a row-capped copy of ``config`` for a moment and return its median step by phase.

    Args:
        config: the architecture (its tables are capped at ``max_rows`` for the measurement).
        batch_size: samples per step.
        max_rows: row cap; default :func:`default_max_rows` (about 64 MB of tables).
        time_budget_s: time steps (after warm-up) until this much time has passed.
        min_steps / max_steps: bounds on the timed steps.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        seed: seed of the weights and of the synthetic batches.
        memory_budget: refuse (:class:`DoesNotFitError`) settings whose estimated working
            set (:func:`measurement_bytes`) is larger.
        deadline_s: wall-clock seconds allowed for the whole call (building the copy,
            warm-up, timing, re-measuring outliers); no step starts that would end after it,
            except the first warm-up step and the timed steps needed to reach
            :data:`~recnotebooks.timing.MIN_RELIABLE_STEPS` (of ``min_steps``), which may take
            the call up to twice ``deadline_s``. ``None``: no limit.
        threads: CPU threads for the measurement (torch's setting is restored after);
            ``None``: :func:`~recnotebooks.threads.choose_threads` picks them (torch's
            setting, lowered to the cores other programs leave free).
    """
    cap, min_steps, max_steps, time_budget_s, deadline_s = _check_args(
        config, batch_size, max_rows, time_budget_s, min_steps, max_steps, memory_budget, deadline_s
    )
    threads = None if threads is None else check_int("threads", threads, lo=1, hi=1024)
    check_fits(config, batch_size, cap, memory_budget)
    budget = _Budget.starting_now(time_budget_s, min_steps, max_steps, deadline_s)
    return _measure(config, cap, batch_size, resolve_device(device), seed, budget, threads)


def measure_step_cached(
    config: DLRMConfig, batch_size: int, *, fresh: bool = False, **kwargs: object
) -> StepMeasurement:
    """:func:`measure_step`, remembering the last :data:`CACHE_SIZE` measurements.

    A reliable measurement of the same setting — the measured copy (``config`` with its rows
    capped), batch size, device and seed, whatever the threads it ran on — is returned again
    (``reused=True``) instead of measured anew: an app whose other inputs (hardware preset,
    placement, row counts beyond the cap) are modeled only shows the same measured step for
    them. An unreliable one (:attr:`StepMeasurement.reliable`) is measured again, and the
    new one kept. With ``fresh=True`` the setting is measured again; if the new step and the
    remembered one differ by more than :data:`DISAGREE_RATIO`, it is measured a third time and
    the median of the three kept.
    """
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    cap = kwargs.get("max_rows")
    cap = default_max_rows(config) if cap is None else cap
    dev = str(resolve_device(kwargs.get("device", "cpu")))  # type: ignore[arg-type]
    capped = config.with_max_rows(check_int("max_rows", cap, lo=1))
    key = (capped, batch_size, dev, kwargs.get("seed", 0))
    old = _MEASURED.get(key)
    if old is not None and not fresh and old.reliable:
        _MEASURED.move_to_end(key)
        return dataclasses.replace(old, reused=True)
    new = measure_step(config, batch_size, **kwargs)  # type: ignore[arg-type]
    if old is not None and old.reliable:
        ratio = new.seconds_per_step / max(old.seconds_per_step, 1e-12)
        if not 1 / DISAGREE_RATIO <= ratio <= DISAGREE_RATIO:
            third = measure_step(config, batch_size, **kwargs)  # type: ignore[arg-type]
            new = sorted((old, new, third), key=lambda m: m.seconds_per_step)[1]
            new = dataclasses.replace(new, reused=False)
    _MEASURED[key] = new
    _MEASURED.move_to_end(key)
    while len(_MEASURED) > CACHE_SIZE:
        _MEASURED.popitem(last=False)
    return new


def clear_measurements() -> None:
    """Forget the measurements :func:`measure_step_cached` remembers."""
    _MEASURED.clear()


# ----- a step measured while a learner waits: the explorers of notebooks 01 and 02 ---------------
#: Settings whose measured copy the model expects to take longer per step than this (on
#: ``this_machine``) are not measured: a slider must not freeze the notebook for seconds.
#: A measured update needs at least two such steps (a warm-up and a timed one) and the
#: copy's build, inside :data:`MEASURE_DEADLINE_S`.
MAX_MEASURED_STEP_S = 0.3
#: Wall-clock seconds one measured update may spend measuring (building the copy, warm-up,
#: timing, re-measuring outliers); with drawing, an update stays under about 1.5 s.
MEASURE_DEADLINE_S = 1.0
#: Timed steps a measured update asks for (fewer when the deadline runs out; the note says so).
MEASURED_STEPS = 3


def check_measurable(
    config: DLRMConfig, batch_size: int, max_rows: int, max_step_s: float = MAX_MEASURED_STEP_S
) -> None:
    """Raise :class:`DoesNotFitError` if measuring ``config`` capped at ``max_rows`` would not fit
    in memory, or if one step is modeled to take over ``max_step_s`` (default
    :data:`MAX_MEASURED_STEP_S`) on ``this_machine``."""

    check_fits(config, batch_size, max_rows)
    capped = config.with_max_rows(max_rows)
    pred = estimate(capped, "this_machine", batch_size=batch_size).step_time
    if pred > max_step_s:
        raise DoesNotFitError(
            f"one training step of this setting would take about {pred:.2f} s here (modeled), too long to "
            f"measure while you move sliders (at most {max_step_s:g} s); lower the batch size, pooling, "
            "number of tables, embedding dim or MLP width"
        )


def measure_here(
    config: DLRMConfig,
    batch_size: int,
    time_budget_s: float,
    device: str = "cpu",
    max_step_s: float = MAX_MEASURED_STEP_S,
    deadline_s: float = MEASURE_DEADLINE_S,
) -> tuple[StepMeasurement, int]:
    """A training step of ``config``'s row-capped copy measured on ``device`` while an app waits
    (and the row cap), after :func:`check_measurable` (raises :class:`DoesNotFitError`).

    The median of :data:`MEASURED_STEPS` timed steps, within ``deadline_s``; a setting
    measured before in this session (same capped copy, batch and device) is reused
    (:func:`measure_step_cached`), so changing only modeled inputs shows the same measured step
    (``m.reused``). The threads are the thread policy's
    (:func:`~recnotebooks.threads.choose_threads`: fewer on a busy machine, ``m.busy`` says so),
    and ``m.reliable`` says whether the step can be trusted. See
    :meth:`StepMeasurement.describe` for the app's note.
    """
    cap = default_max_rows(config)
    if device == "cpu":  # the same limit whatever the load, so what is measurable does not depend on it
        check_measurable(config, batch_size, cap, max_step_s)
    m = measure_step_cached(
        config,
        batch_size,
        max_rows=cap,
        time_budget_s=time_budget_s,
        device=device,
        min_steps=MEASURED_STEPS,
        deadline_s=deadline_s,
    )
    return m, cap


# ----- reading a measured step phase by phase (notebook 01 §6) ------------------------------------
#: What each phase of a CPU training step does (the trainer's phases, :data:`~recnotebooks.timing.PHASES`).
PHASE_WORK: dict[str, str] = {
    "data": "making the batch on the CPU: ids drawn, hashed and labelled",
    "embedding_forward": "looking up and pooling every bag's rows",
    "bottom_mlp": "the bottom MLP on the dense features",
    "interaction": "the interaction (dot products, or the cross layers)",
    "top_mlp": "the top MLP",
    "backward": "the gradients of every part, one autograd pass",
    "sparse_optimizer": "updating the table rows looked up",
    "dense_optimizer": "updating the MLP and cross-layer weights",
}


@dataclass(frozen=True)
class StepReading:
    """A measured step read phase by phase (:func:`read_step`): ``phases`` in seconds per step,
    ``batch_size`` samples per step."""

    phases: dict[str, float]
    batch_size: int

    @property
    def seconds(self) -> float:
        """The whole step."""
        return sum(self.phases.values())

    @property
    def shares(self) -> dict[str, float]:
        """Each phase's share of the step, largest first."""
        total = self.seconds or 1.0
        return {k: v / total for k, v in sorted(self.phases.items(), key=lambda kv: -kv[1])}

    @property
    def largest(self) -> str:
        """The phase that took longest."""
        return next(iter(self.shares))

    @property
    def without_data(self) -> float:
        """The step without its ``data`` phase: what it would take if ready batches were handed
        over, as a production loader does while the previous step runs."""
        return self.seconds - self.phases.get("data", 0.0)

    @property
    def samples_per_s(self) -> float:
        return self.batch_size / self.seconds if self.seconds > 0 else 0.0

    @property
    def samples_per_s_without_data(self) -> float:
        return self.batch_size / self.without_data if self.without_data > 0 else 0.0

    def rows(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows ``{phase, seconds_per_step, share, rank, work, source="measured", **extra}``,
        largest first."""
        return [
            {"phase": k, "seconds_per_step": self.phases[k], "share": share, "rank": i + 1,
             "work": PHASE_WORK.get(k, k), "source": "measured", **extra}
            for i, (k, share) in enumerate(self.shares.items())
        ]  # fmt: skip

    def describe(self, name: str, reliability: str = "") -> str:
        """The reading in words: one line per phase (ms, share, what it does), which phase is
        largest, and the step without the data phase; ``reliability`` (a measurement's verdict,
        :func:`recnotebooks.timing.reliability`) is printed as NOT RELIABLE when not empty."""
        lines = [
            f"{name}: one training step of batch {self.batch_size}, {self.seconds * 1e3:.1f} ms (MEASURED)"
        ]
        for k, share in self.shares.items():
            lines.append(f"  {k:<17} {self.phases[k] * 1e3:6.1f} ms {share:4.0%}  {PHASE_WORK.get(k, '')}")
        first, second = list(self.shares)[:2]
        data = self.shares.get("data", 0.0)
        summary = (
            f"Largest: {first} ({self.shares[first]:.0%}), then {second} ({self.shares[second]:.0%}). "
            f"Without the data phase ({data:.0%}) the step would take {self.without_data * 1e3:.1f} ms: "
            f"{self.seconds / self.without_data if self.without_data > 0 else 0:.1f}x the samples per second "
            f"({self.samples_per_s_without_data:,.0f} instead of {self.samples_per_s:,.0f})."
        )
        lines += wrap_report(summary, indent="")
        if reliability:
            lines += wrap_report(f"NOT RELIABLE: {reliability}", indent="")
        return "\n".join(lines)


def read_step(phases: Mapping[str, float], batch_size: int) -> StepReading:
    """A measured step (a :class:`~recnotebooks.train.TrainResult`'s or a :class:`StepMeasurement`'s
    ``phases``: seconds per step by phase) read phase by phase: shares, the largest phase, the step
    without its data phase (:class:`StepReading`). Phases must be finite seconds >= 0, at least
    one of them > 0."""
    if not isinstance(phases, Mapping) or not phases:
        raise TypeError(f"phases must be a non-empty dict of phase -> seconds, got {type(phases).__name__}")
    secs = {str(k): check_float(f"phases[{k!r}]", v, lo=0.0) for k, v in phases.items()}
    if not sum(secs.values()) > 0:
        raise ValueError(f"phases must add up to more than 0 seconds, got {secs}")
    return StepReading(secs, check_int("batch_size", batch_size, lo=1))
