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

* :func:`run_rank` is the worker :func:`~recnotebooks.distributed.launch.launch` runs on each rank;
* :func:`train_local` launches it on N local CPU ranks (gloo) and returns a :class:`DistTrainResult`;
* :func:`train_torchrun` runs it in a process started by ``torchrun`` (``RANK``, ``WORLD_SIZE``,
  ``MASTER_ADDR``, ``MASTER_PORT``; NCCL when CUDA is present, else gloo).
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..checks import check_choice, check_float, check_int, check_steps, check_type, parse_int
from ..config import DLRMConfig
from ..data.synthetic import SyntheticConfig, SyntheticCriteo
from ..metrics import click_metrics
from ..nn.optim import make_dense_optimizer
from ..plan import MAX_RANKS, Plan
from ..threads import choose_threads, usable_cores, use_threads
from ..timing import PhaseTimer, reliability, spread
from ..train import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS
from .comm import CommLog
from .hybrid import HybridParallelDLRM, local_samples
from .launch import MAX_TIMEOUT_S, RankContext, launch, max_world_size
from .sharded import check_placements

__all__ = [
    "DistTrainResult",
    "dense_optimizer_for",
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


def _check_run(
    config: DLRMConfig, plan: Plan, world: int, steps: int, batch_size: int, seed: int, opts: dict[str, Any]
) -> None:
    """:func:`_check` with the optimizers of ``opts`` (a run's options over :data:`DEFAULT_OPTIMIZERS`)."""
    _check(
        config,
        plan,
        world,
        steps,
        batch_size,
        seed,
        opts["sparse_optimizer"],
        opts["dense_optimizer"],
        opts["sparse_lr"],
        opts["dense_lr"],
    )


def _check(
    config: DLRMConfig,
    plan: Plan,
    world: int,
    steps: int,
    batch_size: int,
    seed: int,
    sparse_optimizer: str,
    dense_optimizer: str,
    sparse_lr: float,
    dense_lr: float,
) -> None:
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    check_type("plan", plan, Plan, "a Plan")
    check_steps("steps", steps, lo=1)
    check_int("seed", seed, lo=0)
    batch_size = check_int("batch_size", batch_size, lo=1)
    if batch_size % world:
        raise ValueError(
            f"batch_size must be divisible by world_size={world} (each rank takes an equal slice of "
            f"every global batch), got {batch_size}"
        )
    if plan.world_size != world:
        raise ValueError(f"plan.world_size must equal world_size={world}, got {plan.world_size}")
    check_placements(plan, plan.geometry(config))  # validates the plan; "host", "remote" refused
    check_choice("sparse_optimizer", sparse_optimizer, SPARSE_OPTIMIZERS)
    check_choice("dense_optimizer", dense_optimizer, DENSE_OPTIMIZERS)
    check_float("sparse_lr", sparse_lr, lo=0, lo_open=True)
    check_float("dense_lr", dense_lr, lo=0, lo_open=True)


def run_rank(
    ctx: RankContext,
    config: DLRMConfig,
    plan: Plan,
    steps: int,
    batch_size: int,
    seed: int = 0,
    sparse_optimizer: str = "rowwise_adagrad",
    sparse_lr: float = 0.05,
    dense_optimizer: str = "adagrad",
    dense_lr: float = 0.02,
    zipf: float | None = None,
    overlap: bool = True,
    eval_batches: int = 0,
) -> dict[str, Any]:
    """Train ``steps`` steps on this rank (see the module docstring); every rank must call it.

    Returns ``losses`` (global-batch mean of each step, before its update, the same on every
    rank), ``samples_per_s`` (global samples per second after the first warm-up steps),
    ``seconds_per_step``, ``phases`` (this rank's mean seconds per step, including
    ``all_to_all`` and ``all_reduce``), ``comm`` (this rank's comm-log rows of the training
    steps), ``threads`` (``torch.get_num_threads()``), ``cpu_seconds_per_step`` (this process's
    CPU time), ``timed_comm`` (the comm-log rows of the steps after the warm-up only),
    ``phase_cpu`` (this rank's main-thread CPU seconds per step in each phase),
    ``thread_cpu_seconds_per_step`` (the main thread's CPU per step, phases and the work between
    them) and ``metrics``: with ``eval_batches``, the held-out ``logloss``, ``auc`` and ``ne``
    of :func:`~recnotebooks.metrics.click_metrics` over the whole of each eval batch (the same on
    every rank; ``{"error": why}`` when they cannot be computed), else ``{}``. Evaluation runs
    after the timed steps; its collectives are in no phase and no comm row.
    """
    world, rank = ctx.world_size, ctx.rank
    _check(
        config, plan, world, steps, batch_size, seed, sparse_optimizer, dense_optimizer, sparse_lr, dense_lr
    )
    eval_batches = check_int("eval_batches", eval_batches, lo=0)
    device = ctx.device
    data_cfg = SyntheticConfig(zipf_exponent=zipf) if zipf else SyntheticConfig()
    data = SyntheticCriteo(config, batch_size, data_cfg, seed=seed, split="train")
    profile = None  # a static cache pins the hottest rows of the first global batches (every rank alike)
    if any(s.placement == "cache" and s.cache_policy == "static" for s in plan.shards):
        profile = [data.batch(i).sparse for i in range(min(steps, PROFILE_BATCHES))]
    model = HybridParallelDLRM(
        config, plan, rank, world, seed=seed, log=ctx.log, device=device, overlap=overlap, profile=profile
    )
    sparse_opt = model.sparse_optimizer(sparse_optimizer, sparse_lr)
    dense_opt = make_dense_optimizer(dense_optimizer, model.dense_parameters(), dense_lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    timer = PhaseTimer(device)
    b = batch_size // world
    lo, hi = rank * b, (rank + 1) * b
    warm = min(WARMUP_STEPS, steps - 1)
    local_losses, cpu, thread_cpu = [], 0.0, 0.0
    step_seconds: list[float] = []
    timed_from = ctx.log.snapshot()
    model.train()  # once: nothing in the loop switches it to eval (the call walks every module)
    for step in range(steps):
        if step == warm:
            timer.reset()
            cpu = thread_cpu = 0.0
            step_seconds = []
            timed_from = ctx.log.snapshot()
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        with timer.phase("data"):
            batch = data.batch(step)
            dense, sparse = batch.dense[lo:hi].to(device), local_samples(batch.sparse, lo, hi).to(device)
            labels = batch.labels[lo:hi].to(device)
        loss = loss_fn(model(dense, sparse, timer), labels.to(torch.float32))
        model.backward(loss, timer)
        with model.phase(timer, "sparse_optimizer"):
            sparse_opt.step(count_rows=False)
        with timer.phase("dense_optimizer"):
            dense_opt.step()
            dense_opt.zero_grad(set_to_none=True)
        timer.steps += 1
        local_losses.append(loss.detach())
        step_seconds.append(time.perf_counter() - t0)
        cpu += time.process_time() - c0
        thread_cpu += time.thread_time() - m0
    # the global-batch mean of every step's loss: one all-reduce at the end (not logged)
    losses = torch.stack(local_losses).to(torch.float64)
    dist.all_reduce(losses, group=None)
    measured, seconds = steps - warm, sum(step_seconds)
    comm = ctx.log.rows()  # the training steps' collectives (evaluation's are not theirs)
    metrics = {}
    if eval_batches:
        eval_data = SyntheticCriteo(config, batch_size, data_cfg, seed=seed, split="eval")
        metrics = _evaluate(model, eval_data, eval_batches, lo, hi, world, device)
    return {
        "losses": (losses / world).tolist(),
        "samples_per_s": measured * batch_size / seconds if seconds > 0 else 0.0,
        "seconds_per_step": seconds / measured,
        "phases": timer.per_step(),
        "comm": comm,
        "threads": torch.get_num_threads(),
        "cpu_seconds_per_step": cpu / measured,
        "timed_comm": ctx.log.since(timed_from).rows(),
        "phase_cpu": timer.per_step_cpu(),
        "thread_cpu_seconds_per_step": thread_cpu / measured,
        "metrics": metrics,
        "cache": model.embeddings.cache_stats(),
        # the other ranks are other programs to a load monitor here: the launch judged the load
        "step_spread": spread(step_seconds),
        "reliability": reliability(measured, spread(step_seconds), None),
    }


@torch.no_grad()
def _evaluate(
    model: HybridParallelDLRM,
    data: SyntheticCriteo,
    batches: int,
    lo: int,
    hi: int,
    world: int,
    device: torch.device,
) -> dict[str, Any]:
    """Held-out log loss, AUC and NE over eval batches ``0 .. batches - 1``, as the single-process
    :meth:`~recnotebooks.train.Trainer.evaluate` computes them: this rank predicts samples
    ``lo .. hi - 1`` of each batch, and an all-gather (rank order is sample order) gives every rank
    every prediction. ``{"error": why}`` when the metrics cannot be computed (one class only)."""
    model.eval()
    probs, labels = [], []
    try:
        for i in range(batches):
            batch = data.batch(i)
            dense, sparse = batch.dense[lo:hi].to(device), local_samples(batch.sparse, lo, hi).to(device)
            mine = torch.sigmoid(model(dense, sparse).float()).contiguous()
            parts = [torch.empty_like(mine) for _ in range(world)]
            dist.all_gather(parts, mine)
            probs.append(torch.cat(parts).cpu())
            labels.append(batch.labels.cpu())
    finally:
        model.train()
    try:
        m = click_metrics(torch.cat(probs), torch.cat(labels))
    except ValueError as e:  # e.g. a held-out set with one class only: reported, as Trainer does
        return {"error": str(e)}
    return {"logloss": m["logloss"], "auc": m["auc"], "ne": m["ne"]}


def _result(
    values: list[dict[str, Any]], world: int, backend: str, steps: int, batch: int, busy: str = ""
) -> DistTrainResult:
    first = values[0]
    comm = [row for v in values for row in v["comm"]]
    thread_cpu = first.get("thread_cpu_seconds_per_step", 0.0)
    metrics = first.get("metrics", {})
    if "error" in metrics:  # as the single-process Trainer does: a warning, and no metrics
        warnings.warn(f"evaluation skipped: {metrics['error']}", RuntimeWarning, stacklevel=3)
    return DistTrainResult(
        world,
        backend,
        steps,
        batch,
        first["losses"],
        first["samples_per_s"],
        first["seconds_per_step"],
        first["phases"],
        comm,
        threads=first.get("threads", 0),
        rank_samples_per_s=[v["samples_per_s"] for v in values],
        cpu_seconds_per_step=first.get("cpu_seconds_per_step", 0.0),
        timed_comm=first.get("timed_comm", []),
        phase_cpu=first.get("phase_cpu", {}),
        thread_cpu_seconds_per_step=thread_cpu,
        auc=metrics.get("auc"),
        logloss=metrics.get("logloss"),
        ne=metrics.get("ne"),
        busy=busy,
        step_spread=first.get("step_spread", 1.0),
        reliability=first.get("reliability", ""),
        cache=[row for v in values for row in v.get("cache", [])],
    )


def train_local(
    config: DLRMConfig,
    plan: Plan,
    world_size: int,
    steps: int,
    batch_size: int,
    seed: int = 0,
    *,
    timeout_s: float = 600.0,
    **options: Any,
) -> DistTrainResult:
    """Train on ``world_size`` local CPU ranks (gloo, via :func:`~recnotebooks.distributed.launch.launch`).

    ``options`` are :func:`run_rank`'s (optimizers, learning rates, ``zipf``, ``overlap``,
    ``eval_batches``: held-out batches to evaluate after training, 0 by default). Bad input (a
    world size over :func:`~recnotebooks.distributed.launch.max_world_size`, a batch not divisible by it,
    a plan for another world or that cannot be executed) raises before any process starts.
    """
    world = check_int("world_size", world_size, lo=1, hi=max_world_size())
    opts = {**DEFAULT_OPTIMIZERS, **options}
    _check_run(config, plan, world, steps, batch_size, seed, opts)
    check_int("eval_batches", opts.get("eval_batches", 0), lo=0)
    res = launch(run_rank, world, config, plan, steps, batch_size, seed, timeout_s=timeout_s, **opts)
    return _result(res.values, world, "gloo", steps, batch_size, res.busy)


def torchrun_env() -> tuple[int, int, int]:
    """``(RANK, WORLD_SIZE, LOCAL_RANK)`` as torchrun sets them, checked: ``WORLD_SIZE`` an int in
    ``[1, MAX_RANKS]`` (:data:`recnotebooks.plan.MAX_RANKS`), ``RANK`` and ``LOCAL_RANK`` (default 0)
    in ``[0, WORLD_SIZE - 1]``, all in ASCII digits; ``ValueError`` naming the variable otherwise."""
    world = parse_int("WORLD_SIZE", os.environ.get("WORLD_SIZE", ""), lo=1, hi=MAX_RANKS)
    rank = parse_int("RANK", os.environ.get("RANK", ""), lo=0, hi=world - 1)
    local = parse_int("LOCAL_RANK", os.environ.get("LOCAL_RANK", "0"), lo=0, hi=world - 1)
    return rank, world, local


def train_torchrun(
    config: DLRMConfig,
    plan: Plan,
    steps: int,
    batch_size: int,
    seed: int = 0,
    *,
    timeout_s: float = 600.0,
    **options: Any,
) -> DistTrainResult:
    """Train in a process started by ``torchrun`` (one rank of ``WORLD_SIZE``); every rank returns
    the same losses, and its own timings."""
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
    if missing:
        raise ValueError(f"--distributed runs under torchrun, which sets {missing}; they are not set here")
    rank, world, local = torchrun_env()
    timeout_s = check_float("timeout_s", timeout_s, lo=1.0, hi=MAX_TIMEOUT_S)
    _check_run(config, plan, world, steps, batch_size, seed, {**DEFAULT_OPTIMIZERS, **options})
    backend, device = "gloo", torch.device("cpu")
    if torch.cuda.is_available():
        backend, device = "nccl", torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
    kwargs = {"device_id": device} if backend == "nccl" else {}
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s), **kwargs)
    # torch's threads as set (OMP_NUM_THREADS, which torchrun sets with several ranks per node),
    # else the thread policy's share of this node's free cores for each of its ranks
    local_world = parse_int("LOCAL_WORLD_SIZE", os.environ.get("LOCAL_WORLD_SIZE", "1"), lo=1, hi=world)
    fixed = "OMP_NUM_THREADS" in os.environ or backend == "nccl"
    choice = choose_threads(
        torch.get_num_threads() if fixed else None, requested=max(1, usable_cores() // local_world)
    )
    try:
        ctx = RankContext(rank, world, backend, device, CommLog(rank))
        with use_threads(choice.threads):
            value = run_rank(ctx, config, plan, steps, batch_size, seed, **options)
    finally:
        dist.destroy_process_group()
    return _result([value], world, backend, steps, batch_size, choice.describe() if choice.busy else "")


def run_plans_local(
    config: DLRMConfig,
    plans: list[Plan],
    world_size: int,
    steps: int,
    batch_size: int,
    seed: int = 0,
    *,
    timeout_s: float = 600.0,
    **options: Any,
) -> list[list[dict[str, Any]]]:
    """:func:`run_plans` on ``world_size`` local CPU ranks (one launch): per plan, every rank's
    :func:`run_rank` result, in rank order. Every plan is checked first, as :func:`train_local`
    checks its one (a placement the engine cannot run, e.g. ``"remote"``, is refused naming its
    table), before any process starts."""
    world = check_int("world_size", world_size, lo=1, hi=max_world_size())
    opts = {**DEFAULT_OPTIMIZERS, **options}
    if not isinstance(plans, (list, tuple)) or not plans:
        raise ValueError(f"plans must be a non-empty list of Plan, got {plans!r}")
    for plan in plans:
        _check_run(config, plan, world, steps, batch_size, seed, opts)
    res = launch(run_plans, world, config, list(plans), steps, batch_size, seed, timeout_s=timeout_s, **opts)
    return [[res.values[r][k] for r in range(world)] for k in range(len(plans))]


def run_plans(
    ctx: RankContext,
    config: DLRMConfig,
    plans: list[Plan],
    steps: int,
    batch_size: int,
    seed: int = 0,
    **options: Any,
) -> list[dict[str, Any]]:
    """:func:`run_rank` for each plan in turn on this rank, in one launch (the comm log cleared
    between plans, so each result's ``comm`` rows are its own). ``options`` as :func:`run_rank`'s."""
    out = []
    for plan in plans:
        ctx.log.clear()
        out.append(run_rank(ctx, config, plan, steps, batch_size, seed, **options))
    return out
