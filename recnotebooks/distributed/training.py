"""Distributed DLRM training: one entry for local ranks (:func:`train_local`) and for torchrun.

Every rank builds a :class:`~recnotebooks.distributed.hybrid.HybridParallelDLRM` and trains it on
synthetic data (:class:`~recnotebooks.data.SyntheticCriteo`): at step ``i`` every rank draws
the **global** batch ``i`` (``batch_size`` samples, exactly the batch the single-process
``recnb train`` draws) and keeps its contiguous slice (rank ``r``: samples ``r b .. (r+1) b - 1``,
``b = batch_size / world_size``). The dense and sparse optimizers are the
:class:`~recnotebooks.train.Trainer`'s (same names, same learning rates), so the losses equal
the single-process run's (up to rounding; row-wise Adagrad on column-wise tables keeps an
accumulator per shard, see :mod:`recnotebooks.distributed.sharded`).

With ``eval_batches`` the trained model is evaluated on the held-out batches the single-process
``recnb train`` evaluates (:class:`~recnotebooks.data.SyntheticCriteo` ``split="eval"``, batches
``0 .. eval_batches - 1`` of ``batch_size`` samples): every rank predicts its slice of each batch,
the predictions are all-gathered in rank (that is, sample) order, and every rank computes log
loss, AUC and NE (:func:`~recnotebooks.metrics.click_metrics`) over the whole of them, so they equal
the single-process run's up to the rounding of the training itself.

A rank trains a :class:`~recnotebooks.config.Workload` (the model, the global batch, the ids' skew,
the optimizers) with its :class:`RankSettings` (steps, seed, learning rates, overlap, eval
batches), and returns a :class:`RankResult`:

>>> from recnotebooks.config import Workload, preset
>>> settings = rank_call(Workload(preset("tiny"), 256), 10, (), {"seed": 1})[1]
>>> settings.steps, settings.seed, settings.sparse_lr, settings.data, settings.checkpoint, settings.resume
(10, 1, 0.05, None, None, None)

* :func:`run_rank` is the worker :func:`~recnotebooks.distributed.launch.launch` runs on each rank;
* :func:`train_local` launches it on N local CPU ranks (gloo) and returns a :class:`DistTrainResult`;
* :func:`train_torchrun` runs it in a process started by ``torchrun`` (``RANK``, ``WORLD_SIZE``,
  ``MASTER_ADDR``, ``MASTER_PORT``; NCCL when CUDA is present, else gloo).

**Real data** (``recnb train --data``): with ``data=CriteoFiles(paths, eval_fraction)`` the global
batches are the Criteo files' instead; every rank reads the same stream and keeps its slice of each
batch, so ``N`` ranks see exactly the samples one process sees
(:mod:`~recnotebooks.distributed.rank_data`, which says why the ranks do not split the files).

**Checkpoints** (``recnb train --checkpoint DIR``, ``--resume``): with ``checkpoint`` every rank
saves a sharded checkpoint every ``checkpoint_every`` steps and when training ends; ``resume`` loads
one saved on any number of ranks under any plan, or a single-process checkpoint file, and training
continues from its step (:mod:`~recnotebooks.distributed.resume`). A test hook makes a rank die for
the restart tests: ``RECNB_FAULT_AT_STEP=N`` (:func:`_fault`).

HSTU (:class:`~recnotebooks.nn.generative.HSTURanker`) trains the same way on the listening log,
in :mod:`recnotebooks.distributed.hstu_training` (its names, here until the next release, are
that module's).
"""

from __future__ import annotations

import functools
import itertools
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..checks import (
    check_bool,
    check_float,
    check_int,
    check_steps,
    check_type,
    parse_int,
)
from ..config import DEFAULT_ZIPF_EXPONENT, DLRMConfig, Workload
from ..config.workload import workload_from
from ..data.batch import Batch
from ..data.criteo import CriteoReader
from ..data.synthetic import SyntheticConfig
from ..metrics import click_metrics
from ..nn.optim import make_dense_optimizer
from ..plan import MAX_RANKS, Plan
from ..threads import choose_threads, usable_cores, use_threads
from ..timing import PhaseTimer, reliability, spread
from . import resume
from .comm import CommLog
from .hstu_training import (  # moved to their own module: re-exported for one release
    HSTUDistResult,
    HSTUTrainSettings,
    check_hstu_run,
    local_histories,
    run_hstu_rank,
    train_hstu_local,
)
from .hybrid import HybridParallelDLRM, local_samples
from .launch import MAX_TIMEOUT_S, RankContext, launch, max_world_size
from .peers import note_step, watch_peers
from .rank_data import (  # CriteoFiles moved to its own module: re-exported for one release
    CriteoFiles,
    data_state,
    eval_batches,
    pad_batch,
    train_batches,
)
from .sharded import check_placements

__all__ = [
    "HSTUDistResult",
    "HSTUTrainSettings",
    "check_hstu_run",
    "local_histories",
    "run_hstu_rank",
    "train_hstu_local",
    "CriteoFiles",
    "DistTrainResult",
    "RankResult",
    "RankSettings",
    "dense_optimizer_for",
    "rank_call",
    "run_plans",
    "run_plans_local",
    "run_rank",
    "train_local",
    "train_torchrun",
    "torchrun_env",
]

WARMUP_STEPS = 5
#: Global training batches a ``"static"`` cache's hot set is counted over (FAE profiles a sample).
PROFILE_BATCHES = 8


#: The :class:`~recnotebooks.train.Trainer`'s dense optimizer by name: kept here for one release;
#: its home is :func:`recnotebooks.nn.optim.make_dense_optimizer`.
dense_optimizer_for = make_dense_optimizer


@dataclass
class DistTrainResult:
    """What a distributed run measured (rank 0's timings; losses are global-batch means; the
    held-out metrics are over whole eval batches)."""

    world_size: int
    backend: str
    steps: int
    batch_size: int
    losses: list[float]
    samples_per_s: float
    seconds_per_step: float
    phases: dict[str, float]
    comm: list[dict[str, Any]] = field(default_factory=list)
    source: str = "measured"
    #: torch's intra-op threads on each rank (``torch.get_num_threads()`` inside the rank)
    threads: int = 0
    #: every rank's samples/s, in rank order (``samples_per_s`` is rank 0's)
    rank_samples_per_s: list[float] = field(default_factory=list)
    #: rank 0's process CPU seconds per measured step (all its threads; less sensitive than
    #: wall time to other processes sharing the cores)
    cpu_seconds_per_step: float = 0.0
    #: rank 0's comm-log rows over the measured steps only (``comm`` includes the warm-up steps)
    timed_comm: list[dict[str, Any]] = field(default_factory=list)
    #: rank 0's CPU seconds per step of its main thread in each phase (``PhaseTimer.per_step_cpu``;
    #: the collectives' time stays in the phase that issued them)
    phase_cpu: dict[str, float] = field(default_factory=dict)
    #: rank 0's main-thread CPU seconds per measured step (the phases' and the work between them)
    thread_cpu_seconds_per_step: float = 0.0
    #: held-out AUC, log loss and NE over ``eval_batches`` batches (the same on every rank; ``None``
    #: without evaluation, or when it was skipped: a warning says why)
    auc: float | None = None
    logloss: float | None = None
    ne: float | None = None
    #: why the thread policy lowered the ranks' threads, in words (``""``: it did not)
    busy: str = ""
    #: how much rank 0's timed steps varied (:func:`recnotebooks.timing.spread`)
    step_spread: float = 1.0
    #: why the timings cannot be trusted (:func:`recnotebooks.timing.reliability`; ``""``: they can)
    reliability: str = ""
    #: what each ``"cache"`` shard's device cache did over the whole run, one row per shard of every
    #: rank (:meth:`~recnotebooks.distributed.sharded.ShardedEmbeddingBagCollection.cache_stats`:
    #: hits, misses, hit rate, bytes moved; measured); ``[]`` when the plan has no cache
    cache: list[dict[str, Any]] = field(default_factory=list)
    #: rank 0's train reader's counts over ``--data`` files (:attr:`RankResult.data`; ``{}``: synthetic)
    data: dict[str, Any] = field(default_factory=dict)
    #: the step a resumed run started from (0: from the start); ``losses`` are the steps after it
    start_step: int = 0

    @property
    def reliable(self) -> bool:
        """Whether the measured throughput and phases can be trusted."""
        return not self.reliability

    def rows(self) -> list[dict[str, Any]]:
        """Tidy rows: one per step (``kind="loss"``), per phase (``kind="phase"``), per
        collective record of every rank (``kind="comm"``) and per cached shard (``kind="cache"``),
        all ``source="measured"``."""
        base = {"source": self.source, "world_size": self.world_size, "backend": self.backend}
        out: list[dict[str, Any]] = [
            {**base, "kind": "loss", "step": i + 1, "loss": v} for i, v in enumerate(self.losses)
        ]
        out += [{**base, "kind": "phase", "phase": k, "seconds_per_step": v} for k, v in self.phases.items()]
        out += [{**base, "kind": "comm", **r} for r in self.comm]
        out += [{**base, "kind": "cache", **r} for r in self.cache]
        return out


#: The optimizers a local run trains with unless told otherwise (as ``recnb train``'s defaults).
DEFAULT_OPTIMIZERS = {"sparse_optimizer": "rowwise_adagrad", "sparse_lr": 0.05, "dense_optimizer": "adagrad",
                      "dense_lr": 0.02}  # fmt: skip
#: What the old calls (a :class:`~recnotebooks.config.DLRMConfig` where the workload goes) passed
#: after ``steps``, in order: the workload's fields among the rank's settings.
LEGACY_ORDER = ("batch_size", "seed", "sparse_optimizer", "sparse_lr", "dense_optimizer", "dense_lr", "zipf",
                "overlap", "eval_batches")  # fmt: skip
#: The old keywords a :class:`~recnotebooks.config.Workload` holds (``zipf`` is its ``zipf_exponent``).
WORKLOAD_KEYWORDS = ("batch_size", "sparse_optimizer", "dense_optimizer", "zipf")
#: The rank's own settings after ``steps``, in order, when a Workload is given.
_RANK_ORDER = tuple(k for k in LEGACY_ORDER if k not in WORKLOAD_KEYWORDS)


@dataclass(frozen=True)
class RankSettings:
    """What a rank's training adds to its :class:`~recnotebooks.config.Workload`: how long, from
    which seed, at which learning rates, whether the ids' all-to-all overlaps the bottom MLP, how
    many held-out batches to evaluate after, and on which data (checked; ``TypeError``/``ValueError``
    naming the field)."""

    steps: int
    seed: int = 0
    sparse_lr: float = 0.05
    dense_lr: float = 0.02
    overlap: bool = True
    eval_batches: int = 0
    #: the Criteo files to train on (:class:`CriteoFiles`); ``None``: synthetic data
    data: CriteoFiles | None = None
    #: the folder to save sharded checkpoints in (:mod:`~recnotebooks.distributed.checkpoint`);
    #: ``None``: none saved
    checkpoint: str | None = None
    #: save every this many steps (0: only once training ends)
    checkpoint_every: int = 0
    #: the checkpoint to resume from: a sharded checkpoint's folder (saved on any number of ranks,
    #: under any plan) or a single-process checkpoint file (``recnb train --checkpoint``)
    resume: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", check_steps("steps", self.steps, lo=1))
        object.__setattr__(self, "seed", check_int("seed", self.seed, lo=0))
        object.__setattr__(self, "sparse_lr", check_float("sparse_lr", self.sparse_lr, lo=0, lo_open=True))
        object.__setattr__(self, "dense_lr", check_float("dense_lr", self.dense_lr, lo=0, lo_open=True))
        object.__setattr__(self, "overlap", check_bool("overlap", self.overlap))
        object.__setattr__(self, "eval_batches", check_int("eval_batches", self.eval_batches, lo=0))
        if self.data is not None:
            check_type("data", self.data, CriteoFiles, "a CriteoFiles or None (synthetic data)")
        for name in ("checkpoint", "resume"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(
                    self, name, str(check_type(name, value, (str, os.PathLike), "a path or None"))
                )
        every = check_int("checkpoint_every", self.checkpoint_every, lo=0)
        object.__setattr__(self, "checkpoint_every", every)
        if every and self.checkpoint is None:
            raise ValueError(f"checkpoint_every={every} needs a checkpoint folder, got checkpoint=None")

    def options(self) -> dict[str, Any]:
        """The settings after ``steps``, as :func:`run_rank`'s keywords (``data``, ``checkpoint`` and
        ``resume`` only when set, ``checkpoint_every`` only when not 0)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "steps"}
        for name in ("data", "checkpoint", "resume", "checkpoint_every"):
            if not out[name]:
                del out[name]
        return out


def rank_call(
    workload: Workload | DLRMConfig, steps: int, args: tuple[Any, ...], options: dict[str, Any]
) -> tuple[Workload, RankSettings]:
    """The workload and the rank's settings of a call in either form: ``workload, steps`` and the
    settings (:class:`RankSettings`' fields after ``steps``), or, kept for one release, the old
    ``config, steps`` followed by :data:`LEGACY_ORDER` (``batch_size`` required; ``zipf`` ``None``
    or ``0``: :data:`~recnotebooks.config.DEFAULT_ZIPF_EXPONENT`). ``TypeError`` for a workload
    given with its fields again (set them on it: ``workload.replace(batch_size=...)``)."""
    if not isinstance(workload, Workload):
        check_type("config", workload, DLRMConfig, "a Workload or a DLRMConfig")
    if len(args) > len(LEGACY_ORDER):
        raise TypeError(f"at most {len(LEGACY_ORDER)} settings after steps ({LEGACY_ORDER}), got {len(args)}")
    named = dict(zip(LEGACY_ORDER if not isinstance(workload, Workload) else _RANK_ORDER, args, strict=False))
    twice = sorted(set(named) & set(options))
    if twice:
        raise TypeError(f"got multiple values for {twice}")
    named.update(options)
    older = {k: named.pop(k) for k in WORKLOAD_KEYWORDS if k in named}
    if "zipf" in older:  # the old spelling of zipf_exponent; None or 0 meant the default
        older["zipf_exponent"] = older.pop("zipf") or DEFAULT_ZIPF_EXPONENT
    return workload_from(workload, older, "run_rank"), RankSettings(steps, **named)


def _check(workload: Workload, plan: Plan, world: int, data: CriteoFiles | None = None) -> SyntheticConfig:
    """The plan checked against the workload on ``world`` ranks, and the files ``data`` (if any)
    against the workload; the synthetic data's settings."""
    check_type("plan", plan, Plan, "a Plan")
    if workload.dtype != "fp32":
        raise ValueError(f"workload.dtype must be 'fp32' (a rank trains in fp32), got {workload.dtype!r}")
    if workload.batch_size % world:
        raise ValueError(
            f"batch_size must be divisible by world_size={world} (each rank takes an equal slice of "
            f"every global batch), got {workload.batch_size}"
        )
    if plan.world_size != world:
        raise ValueError(f"plan.world_size must equal world_size={world}, got {plan.world_size}")
    check_placements(plan, plan.geometry(workload.config))  # validates the plan; "host", "remote" refused
    if data is not None:
        data.check(workload)
    return SyntheticConfig(zipf_exponent=workload.zipf_exponent)


def _check_checkpoints(workload: Workload, plan: Plan, settings: RankSettings, verify: bool = False) -> None:
    """:func:`~recnotebooks.distributed.resume.check_before_start` for this run's settings."""
    resume.check_before_start(
        workload,
        plan,
        settings.checkpoint,
        settings.resume,
        settings.steps,
        _data_at(workload, settings),
        verify,
    )


def _data_at(workload: Workload, settings: RankSettings) -> Callable[[int], dict[str, Any]]:
    """The training stream's state after a step (:func:`~recnotebooks.distributed.rank_data.data_state`)."""
    return functools.partial(data_state, workload, settings.data, settings.seed)


@dataclass(frozen=True)
class RankResult:
    """What :func:`run_rank` measured on one rank (picklable: it travels back to the launcher).

    ``result["losses"]`` and the other old dict keys still read the fields (:meth:`to_dict`,
    :meth:`keys`, :meth:`get`), for one release.
    """

    #: global-batch mean of each step's loss, before its update (the same on every rank)
    losses: list[float]
    #: global samples per second over the steps after the warm-up (:data:`WARMUP_STEPS`)
    samples_per_s: float
    seconds_per_step: float
    #: this rank's mean seconds per step in each phase (``all_to_all`` and ``all_reduce`` among them)
    phases: dict[str, float]
    #: this rank's comm-log rows of the training steps (the warm-up's too)
    comm: list[dict[str, Any]]
    #: ``torch.get_num_threads()`` on this rank
    threads: int
    #: this process's CPU seconds per measured step (all its threads)
    cpu_seconds_per_step: float
    #: the comm-log rows of the steps after the warm-up only
    timed_comm: list[dict[str, Any]]
    #: this rank's main-thread CPU seconds per step in each phase
    phase_cpu: dict[str, float]
    #: the main thread's CPU per step: the phases and the work between them
    thread_cpu_seconds_per_step: float
    #: held-out ``logloss``, ``auc`` and ``ne`` (the same on every rank), ``{"error": why}`` when they
    #: cannot be computed, ``{}`` without ``eval_batches``
    metrics: dict[str, Any]
    #: every ``"cache"`` shard's device cache statistics on this rank (``[]`` without one)
    cache: list[dict[str, Any]]
    #: how much the timed steps varied (:func:`recnotebooks.timing.spread`)
    step_spread: float
    #: why the timings cannot be trusted (:func:`recnotebooks.timing.reliability`; ``""``: they can)
    reliability: str
    #: the train reader's counts of its current pass over ``--data`` files (``lines_read``,
    #: ``lines_skipped``, ``first_skips``: the same on every rank, as one process counts them);
    #: ``{}`` on synthetic data
    data: dict[str, Any] = field(default_factory=dict)
    #: the step this run resumed from (0: from the start); ``losses`` are the steps after it
    start_step: int = 0

    def keys(self) -> list[str]:
        """The field names, the old dict's keys."""
        return [f.name for f in fields(self)]

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, ``default`` when there is none (as the old dict's ``get``)."""
        return getattr(self, key) if key in self.keys() else default

    def to_dict(self) -> dict[str, Any]:
        """The result as plain data (JSON-compatible), one key per field."""
        return asdict(self)


@dataclass
class _RankTrainer:
    """One rank's model, optimizers and global training batches (and the reader of ``--data`` files,
    ``None`` on synthetic data), and its slice ``lo .. hi - 1`` of every global batch."""

    model: HybridParallelDLRM
    sparse_opt: Any
    dense_opt: torch.optim.Optimizer
    batches: Iterator[Batch]
    reader: CriteoReader | None
    lo: int
    hi: int
    device: torch.device
    loss_fn: torch.nn.Module = field(default_factory=torch.nn.BCEWithLogitsLoss)

    @classmethod
    def build(
        cls,
        ctx: RankContext,
        workload: Workload,
        plan: Plan,
        settings: RankSettings,
        data_cfg: SyntheticConfig,
    ) -> _RankTrainer:
        """The rank's sharded model (a static cache pins the hottest rows of the first global
        batches, every rank alike), the Trainer's optimizers and the training stream."""
        config, batch_size, steps, seed = workload.config, workload.batch_size, settings.steps, settings.seed
        batches, reader = train_batches(workload, settings.data, seed, data_cfg)
        profile = None
        if any(s.placement == "cache" and s.cache_policy == "static" for s in plan.shards):
            first = itertools.islice(
                train_batches(workload, settings.data, seed, data_cfg)[0], min(steps, PROFILE_BATCHES)
            )
            profile = [b.sparse for b in first]
        model = HybridParallelDLRM(
            config, plan, ctx.rank, ctx.world_size, seed=seed, log=ctx.log, device=ctx.device,
            overlap=settings.overlap, profile=profile,
        )  # fmt: skip
        sparse_opt = model.sparse_optimizer(workload.sparse_optimizer, settings.sparse_lr)
        dense_opt = make_dense_optimizer(
            workload.dense_optimizer, model.dense_parameters(), settings.dense_lr
        )
        b = batch_size // ctx.world_size
        return cls(
            model, sparse_opt, dense_opt, batches, reader, ctx.rank * b, (ctx.rank + 1) * b, ctx.device
        )

    def step(self, step: int, timer: PhaseTimer) -> torch.Tensor:
        """Train on this rank's slice of global batch ``step``; its (local) loss."""
        model, lo, hi = self.model, self.lo, self.hi
        with timer.phase("data"):
            batch = next(self.batches)  # global batch ``step``: the steps run in order from 0
            dense, sparse = (
                batch.dense[lo:hi].to(self.device),
                local_samples(batch.sparse, lo, hi).to(self.device),
            )
            labels = batch.labels[lo:hi].to(self.device)
        loss = self.loss_fn(model(dense, sparse, timer), labels.to(torch.float32))
        model.backward(loss, timer)
        with model.phase(timer, "sparse_optimizer"):
            self.sparse_opt.step(count_rows=False)
        with timer.phase("dense_optimizer"):
            self.dense_opt.step()
            self.dense_opt.zero_grad(set_to_none=True)
        timer.steps += 1
        return loss.detach()


@dataclass
class _Clocks:
    """The timed steps' clocks: phases, each step's wall seconds, the process's and the main
    thread's CPU seconds, and where the comm log stood when timing began."""

    timer: PhaseTimer
    timed_from: Any
    step_seconds: list[float] = field(default_factory=list)
    cpu: float = 0.0
    thread_cpu: float = 0.0


def _train(
    trainer: _RankTrainer,
    log: CommLog,
    steps: int,
    start: int = 0,
    after: Callable[[int, list[torch.Tensor]], None] | None = None,
) -> tuple[list[torch.Tensor], _Clocks, int]:
    """Steps ``start + 1 .. steps``; the local losses, the clocks of the steps after the warm-up, and
    their count. ``after(step, losses)`` runs after each step (outside the clocks): the saves."""
    todo = steps - start
    warm = min(WARMUP_STEPS, max(todo - 1, 0))
    clocks = _Clocks(PhaseTimer(trainer.device), log.snapshot())
    local_losses: list[torch.Tensor] = []
    trainer.model.train()  # once: nothing in the loop switches it to eval (the call walks every module)
    for i in range(todo):
        note_step(start + i, steps)  # a lost peer's message names the step (distributed.peers)
        if i == warm:
            clocks.timer.reset()
            clocks = _Clocks(clocks.timer, log.snapshot())
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        local_losses.append(trainer.step(start + i, clocks.timer))
        clocks.step_seconds.append(time.perf_counter() - t0)
        clocks.cpu += time.process_time() - c0
        clocks.thread_cpu += time.thread_time() - m0
        if after is not None:
            after(start + i + 1, local_losses)
        _fault(start + i + 1, log.rank)
    return local_losses, clocks, todo - warm


#: The test hook that makes a rank die (:func:`_fault`): the step after which it exits.
FAULT_AT_STEP = "RECNB_FAULT_AT_STEP"
#: Which rank dies (default: the last one).
FAULT_RANK = "RECNB_FAULT_RANK"
#: The exit code of a rank the hook ends.
FAULT_EXIT_CODE = 17


def _fault(step: int, rank: int) -> None:
    """A test hook for restarts (``torchrun --max-restarts``): with ``RECNB_FAULT_AT_STEP=N`` in its
    environment, rank ``RECNB_FAULT_RANK`` (default: the last) ends its process with exit code
    :data:`FAULT_EXIT_CODE` right after step ``N`` (after that step's save), as a crash would: no
    cleanup, no message to its peers. Only on torchrun's first attempt (``TORCHELASTIC_RESTART_COUNT``
    unset or 0), so the restarted job runs through."""
    at = os.environ.get(FAULT_AT_STEP)
    if at is None or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return
    world = dist.get_world_size() if dist.is_initialized() else 1
    who = parse_int(FAULT_RANK, os.environ.get(FAULT_RANK, str(world - 1)), lo=0, hi=world - 1)
    if step == parse_int(FAULT_AT_STEP, at, lo=1) and rank == who:
        os._exit(FAULT_EXIT_CODE)


def run_rank(
    ctx: RankContext, workload: Workload | DLRMConfig, plan: Plan, steps: int, *args: Any, **options: Any
) -> RankResult:
    """Train ``steps`` steps of ``workload`` on this rank (see the module docstring); every rank
    must call it.

    ``options``: :class:`RankSettings`' ``seed``, ``sparse_lr``, ``dense_lr``, ``overlap`` and
    ``eval_batches`` (held-out batches evaluated after the timed steps; their collectives are in
    no phase and no comm row). The old form, ``run_rank(ctx, config, plan, steps, batch_size,
    seed, sparse_optimizer, sparse_lr, dense_optimizer, dense_lr, zipf, overlap, eval_batches)``,
    still works for one release (:func:`rank_call`). Returns a :class:`RankResult`.
    """
    workload, settings = rank_call(workload, steps, args, options)
    world = ctx.world_size
    data_cfg = _check(workload, plan, world)
    trainer = _RankTrainer.build(ctx, workload, plan, settings, data_cfg)
    start, save = _checkpoints(trainer, workload, settings, data_cfg)
    local_losses, clocks, measured = _train(trainer, ctx.log, settings.steps, start, save)
    note_step(settings.steps, settings.steps)
    if save is not None:
        save(settings.steps, local_losses, True)
    losses = _global_losses(local_losses)  # one all-reduce at the end (not logged)
    seconds = sum(clocks.step_seconds)
    measured = max(measured, 1) if local_losses else 1  # a run resumed at its last step trains none
    comm = ctx.log.rows()  # the training steps' collectives (evaluation's are not theirs)
    metrics = {}
    if settings.eval_batches:
        batches = eval_batches(workload, settings.data, settings.seed, data_cfg, settings.eval_batches)
        metrics = _evaluate(trainer.model, batches, ctx.rank, world, ctx.device)
    st = trainer.reader.stats if trainer.reader is not None else None
    data = {} if st is None else {"lines_read": st.lines_read, "lines_skipped": st.skipped,
                                  "first_skips": list(st.first_skips)}  # fmt: skip
    return RankResult(
        losses=(losses / world).tolist(),
        samples_per_s=measured * workload.batch_size / seconds if seconds > 0 else 0.0,
        seconds_per_step=seconds / measured,
        phases=clocks.timer.per_step(),
        comm=comm,
        threads=torch.get_num_threads(),
        cpu_seconds_per_step=clocks.cpu / measured,
        timed_comm=ctx.log.since(clocks.timed_from).rows(),
        phase_cpu=clocks.timer.per_step_cpu(),
        thread_cpu_seconds_per_step=clocks.thread_cpu / measured,
        metrics=metrics,
        cache=trainer.model.embeddings.cache_stats(),
        # the other ranks are other programs to a load monitor here: the launch judged the load
        step_spread=spread(clocks.step_seconds),
        reliability=reliability(measured, spread(clocks.step_seconds), None),
        data=data,
        start_step=start,
    )


def _global_losses(local_losses: list[torch.Tensor]) -> torch.Tensor:
    """The global-batch sum over ranks of each step's local loss (float64; divide by the world)."""
    if not local_losses:
        return torch.zeros(0, dtype=torch.float64)
    losses = torch.stack(local_losses).to(torch.float64)
    dist.all_reduce(losses, group=None)
    return losses


def _checkpoints(
    trainer: _RankTrainer, workload: Workload, settings: RankSettings, data_cfg: SyntheticConfig
) -> tuple[int, Callable[..., None] | None]:
    """Resume (``settings.resume``, :mod:`~recnotebooks.distributed.resume`) and set the training
    stream at the step resumed; the step, and the saver :func:`_train` calls after each step
    (``None`` without ``settings.checkpoint``)."""
    start, prior, parts = 0, [], (trainer.model, trainer.sparse_opt, trainer.dense_opt)
    data_at = _data_at(workload, settings)
    if settings.resume is not None:
        start, prior = resume.load(settings.resume, parts, workload, settings.steps, data_at)
        trainer.batches, trainer.reader = train_batches(
            workload, settings.data, settings.seed, data_cfg, start
        )
    if settings.checkpoint is None:
        return start, None
    every, world, folder = settings.checkpoint_every, dist.get_world_size(), settings.checkpoint

    def save(step: int, local_losses: list[torch.Tensor], last: bool = False) -> None:
        if not last and (not every or step % every or step == settings.steps):
            return
        losses = prior + (_global_losses(local_losses) / world).tolist()
        resume.save(folder, parts, workload, step, losses, data_at(step), settings.sparse_lr)

    return start, save


@torch.no_grad()
def _evaluate(
    model: HybridParallelDLRM, batches: Iterable[Batch], rank: int, world: int, device: torch.device
) -> dict[str, Any]:
    """Held-out log loss, AUC and NE over the eval ``batches``, as the single-process
    :meth:`~recnotebooks.train.Trainer.evaluate` computes them: this rank predicts its contiguous
    slice of each batch (a partial last batch padded to a multiple of ``world``,
    :func:`~recnotebooks.distributed.rank_data.pad_batch`), and an
    all-gather (rank order is sample order) gives every rank every prediction. ``{"error": why}``
    when the metrics cannot be computed (one class only, no batch)."""
    model.eval()
    probs, labels = [], []
    try:
        for batch in batches:
            n = batch.batch_size
            m = -(-n // world)  # this rank's samples: m of the batch padded to m * world
            padded = pad_batch(batch, m * world)
            lo, hi = rank * m, (rank + 1) * m
            dense, sparse = padded.dense[lo:hi].to(device), local_samples(padded.sparse, lo, hi).to(device)
            mine = torch.sigmoid(model(dense, sparse).float()).contiguous()
            parts = [torch.empty_like(mine) for _ in range(world)]
            dist.all_gather(parts, mine)
            probs.append(torch.cat(parts).cpu()[:n])
            labels.append(batch.labels.cpu())
    finally:
        model.train()
    if not probs:
        return {"error": "the eval data yielded no batches"}
    try:
        m = click_metrics(torch.cat(probs), torch.cat(labels))
    except ValueError as e:  # e.g. a held-out set with one class only: reported, as Trainer does
        return {"error": str(e)}
    return {"logloss": m["logloss"], "auc": m["auc"], "ne": m["ne"]}


def _result(
    values: list[RankResult], world: int, backend: str, steps: int, batch: int, busy: str = ""
) -> DistTrainResult:
    first = values[0]
    metrics = first.metrics
    if "error" in metrics:  # as the single-process Trainer does: a warning, and no metrics
        warnings.warn(f"evaluation skipped: {metrics['error']}", RuntimeWarning, stacklevel=3)
    return DistTrainResult(
        world,
        backend,
        steps,
        batch,
        first.losses,
        first.samples_per_s,
        first.seconds_per_step,
        first.phases,
        [row for v in values for row in v.comm],
        threads=first.threads,
        rank_samples_per_s=[v.samples_per_s for v in values],
        cpu_seconds_per_step=first.cpu_seconds_per_step,
        timed_comm=first.timed_comm,
        phase_cpu=first.phase_cpu,
        thread_cpu_seconds_per_step=first.thread_cpu_seconds_per_step,
        auc=metrics.get("auc"),
        logloss=metrics.get("logloss"),
        ne=metrics.get("ne"),
        busy=busy,
        step_spread=first.step_spread,
        reliability=first.reliability,
        cache=[row for v in values for row in v.cache],
        data=first.data,
        start_step=first.start_step,
    )


def train_local(
    workload: Workload | DLRMConfig,
    plan: Plan,
    world_size: int,
    steps: int,
    *args: Any,
    timeout_s: float = 600.0,
    **options: Any,
) -> DistTrainResult:
    """Train ``workload`` on ``world_size`` local CPU ranks (gloo, via
    :func:`~recnotebooks.distributed.launch.launch`).

    ``args``/``options`` are :func:`run_rank`'s after ``steps`` (the seed, the learning rates,
    ``overlap``, ``eval_batches``: held-out batches to evaluate after training, 0 by default;
    ``data``: a :class:`CriteoFiles` to train on the files, ``None`` for synthetic data; or the old
    form's, after a ``DLRMConfig``: ``batch_size, seed``, the optimizers, ``zipf``...). Bad input (a
    world size over :func:`~recnotebooks.distributed.launch.max_world_size`, a batch not divisible
    by it, a plan for another world or that cannot be executed, files that are missing, not Criteo
    or hold less than one train batch) raises before any process starts.
    """
    world = check_int("world_size", world_size, lo=1, hi=max_world_size())
    workload, settings = rank_call(workload, steps, args, options)
    _check(workload, plan, world, settings.data)
    _check_checkpoints(workload, plan, settings, verify=True)
    res = launch(run_rank, world, workload, plan, settings.steps, timeout_s=timeout_s, **settings.options())
    return _result(res.values, world, "gloo", settings.steps, workload.batch_size, res.busy)


def torchrun_env() -> tuple[int, int, int]:
    """``(RANK, WORLD_SIZE, LOCAL_RANK)`` as torchrun sets them, checked: ``WORLD_SIZE`` an int in
    ``[1, MAX_RANKS]`` (:data:`recnotebooks.plan.MAX_RANKS`), ``RANK`` and ``LOCAL_RANK`` (default 0)
    in ``[0, WORLD_SIZE - 1]``, all in ASCII digits; ``ValueError`` naming the variable otherwise."""
    world = parse_int("WORLD_SIZE", os.environ.get("WORLD_SIZE", ""), lo=1, hi=MAX_RANKS)
    rank = parse_int("RANK", os.environ.get("RANK", ""), lo=0, hi=world - 1)
    local = parse_int("LOCAL_RANK", os.environ.get("LOCAL_RANK", "0"), lo=0, hi=world - 1)
    return rank, world, local


def _init_torchrun_group(backend: str, timeout: timedelta, **kwargs: Any) -> None:
    """The process group of a rank torchrun started, its keys under torchrun's attempt
    (``TORCHELASTIC_RESTART_COUNT``): the agent keeps one store across restarts, so without the
    prefix a restarted rank can read the address a rank of the failed attempt published and fail to
    connect to it (seen here: gloo's "connectFullMesh failed ... Connection refused" on a restart)."""
    attempt = parse_int("TORCHELASTIC_RESTART_COUNT", os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"), lo=0)
    store, rank, world = next(dist.rendezvous("env://", timeout=timeout))
    prefixed = dist.PrefixStore(f"recnotebooks/attempt_{attempt}", store)
    dist.init_process_group(backend, store=prefixed, rank=rank, world_size=world, timeout=timeout, **kwargs)


def train_torchrun(
    workload: Workload | DLRMConfig,
    plan: Plan,
    steps: int,
    *args: Any,
    timeout_s: float = 600.0,
    **options: Any,
) -> DistTrainResult:
    """Train in a process started by ``torchrun`` (one rank of ``WORLD_SIZE``); every rank returns
    the same losses, and its own timings. ``args``/``options`` as :func:`train_local`'s."""
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
    if missing:
        raise ValueError(f"--distributed runs under torchrun, which sets {missing}; they are not set here")
    rank, world, local = torchrun_env()
    timeout_s = check_float("timeout_s", timeout_s, lo=1.0, hi=MAX_TIMEOUT_S)
    workload, settings = rank_call(workload, steps, args, options)
    _check(workload, plan, world, settings.data)
    _check_checkpoints(workload, plan, settings)
    backend, device = "gloo", torch.device("cpu")
    if torch.cuda.is_available():
        backend, device = "nccl", torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
    kwargs = {"device_id": device} if backend == "nccl" else {}
    _init_torchrun_group(backend, timedelta(seconds=timeout_s), **kwargs)
    # torch's threads as set (OMP_NUM_THREADS, which torchrun sets with several ranks per node),
    # else the thread policy's share of this node's free cores for each of its ranks
    local_world = parse_int("LOCAL_WORLD_SIZE", os.environ.get("LOCAL_WORLD_SIZE", "1"), lo=1, hi=world)
    fixed = "OMP_NUM_THREADS" in os.environ or backend == "nccl"
    choice = choose_threads(
        torch.get_num_threads() if fixed else None, requested=max(1, usable_cores() // local_world)
    )
    try:
        ctx = RankContext(rank, world, backend, device, CommLog(rank))
        with use_threads(choice.threads), watch_peers(rank, world):  # a lost peer: PeerLostError
            value = run_rank(ctx, workload, plan, settings.steps, **settings.options())
    finally:
        dist.destroy_process_group()
    busy = choice.describe() if choice.busy else ""
    return _result([value], world, backend, settings.steps, workload.batch_size, busy)


def run_plans_local(
    workload: Workload | DLRMConfig,
    plans: list[Plan],
    world_size: int,
    steps: int,
    *args: Any,
    timeout_s: float = 600.0,
    **options: Any,
) -> list[list[RankResult]]:
    """:func:`run_plans` on ``world_size`` local CPU ranks (one launch): per plan, every rank's
    :func:`run_rank` result, in rank order. Every plan is checked first, as :func:`train_local`
    checks its one (a placement the engine cannot run, e.g. ``"remote"``, is refused naming its
    table), before any process starts. ``args``/``options`` as :func:`train_local`'s."""
    world = check_int("world_size", world_size, lo=1, hi=max_world_size())
    workload, settings = rank_call(workload, steps, args, options)
    if not isinstance(plans, (list, tuple)) or not plans:
        raise ValueError(f"plans must be a non-empty list of Plan, got {plans!r}")
    for plan in plans:
        _check(workload, plan, world, settings.data)
        _check_checkpoints(workload, plan, settings, verify=True)
    res = launch(
        run_plans, world, workload, list(plans), settings.steps, timeout_s=timeout_s, **settings.options()
    )
    return [[res.values[r][k] for r in range(world)] for k in range(len(plans))]


def run_plans(
    ctx: RankContext,
    workload: Workload | DLRMConfig,
    plans: list[Plan],
    steps: int,
    *args: Any,
    **options: Any,
) -> list[RankResult]:
    """:func:`run_rank` for each plan in turn on this rank, in one launch (the comm log cleared
    between plans, so each result's ``comm`` rows are its own). ``args``/``options`` as
    :func:`run_rank`'s."""
    out = []
    for plan in plans:
        ctx.log.clear()
        out.append(run_rank(ctx, workload, plan, steps, *args, **options))
    return out
