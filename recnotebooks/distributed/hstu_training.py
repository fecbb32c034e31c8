"""Distributed training of a generative recommender (HSTU) on local ranks: its tables sharded by
the DLRM engine's plans, the stack data parallel (:class:`~recnotebooks.distributed.hstu.HybridParallelHSTU`),
each rank a contiguous block of every global batch's histories of the synthetic listening log.

* :class:`HSTUTrainSettings`: what a run trains (steps, histories a batch, the optimizers);
* :func:`train_hstu_local`: ``world_size`` local CPU ranks over gloo, the result
  (:class:`HSTUDistResult`: losses, events, timing, the collectives, optionally the weights and
  held-out metrics); it equals one process's run with the same optimizers;
* :func:`run_hstu_rank`: what each rank runs; :func:`check_hstu_run`: the checks made before any
  process starts; :func:`local_histories`: a rank's block of a batch.

DLRM's distributed training lives beside it, in :mod:`recnotebooks.distributed.training`.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from ..checks import check_bool, check_choice, check_float, check_int, check_steps, check_type
from ..config import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS
from ..config.hstu import HSTUConfig
from ..data.listening import USER_TABLE, ListeningConfig, SyntheticListening
from ..data.sequences import SequenceBatch
from ..metrics import click_metrics
from ..nn.optim import make_dense_optimizer
from ..plan import Plan
from .hstu import HybridParallelHSTU, history_blocks
from .launch import RankContext, launch, max_world_size
from .peers import note_step
from .sharded import check_placements, plan_config

__all__ = ["HSTUTrainSettings", "HSTUDistResult", "check_hstu_run", "local_histories", "run_hstu_rank",
           "train_hstu_local"]  # fmt: skip


@dataclass(frozen=True)
class HSTUTrainSettings:
    """What a distributed HSTU run trains (checked; ``TypeError``/``ValueError`` naming the field):
    ``steps`` global batches of ``batch_size`` histories of the listening log, from model seed
    ``seed``, with the single-process optimizers (MLPerf's DLRMv4 pairs row-wise Adagrad on the
    tables with Adam on the rest); ``keep_weights``: return the trained weights; ``eval_batches``:
    held-out batches (the log's ``"eval"`` split, of ``batch_size`` histories) scored after training;
    ``clip_grad_norm``: clip the dense gradients to this norm (after their all-reduce: the global
    batch's gradients, as :class:`~recnotebooks.train.Trainer` clips them), ``None``: no clipping."""

    steps: int
    batch_size: int = 32
    seed: int = 0
    sparse_optimizer: str = "rowwise_adagrad"
    sparse_lr: float = 0.05
    dense_optimizer: str = "adam"
    dense_lr: float = 2e-3
    keep_weights: bool = False
    eval_batches: int = 0
    clip_grad_norm: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", check_steps("steps", self.steps, lo=1))
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, lo=1, hi=1_000_000))
        object.__setattr__(self, "seed", check_int("seed", self.seed, lo=0))
        check_choice("sparse_optimizer", self.sparse_optimizer, SPARSE_OPTIMIZERS)
        check_choice("dense_optimizer", self.dense_optimizer, DENSE_OPTIMIZERS)
        object.__setattr__(self, "sparse_lr", check_float("sparse_lr", self.sparse_lr, lo=0, lo_open=True))
        object.__setattr__(self, "dense_lr", check_float("dense_lr", self.dense_lr, lo=0, lo_open=True))
        object.__setattr__(self, "keep_weights", check_bool("keep_weights", self.keep_weights))
        object.__setattr__(self, "eval_batches", check_int("eval_batches", self.eval_batches, lo=0))
        if self.clip_grad_norm is not None:
            clip = check_float("clip_grad_norm", self.clip_grad_norm, lo=0, lo_open=True)
            object.__setattr__(self, "clip_grad_norm", clip)


@dataclass
class HSTUDistResult:
    """What :func:`train_hstu_local` measured (timings: rank 0's, after the first step)."""

    world_size: int
    steps: int
    batch_size: int
    #: each step's loss, the mean over the global batch's events, before its update
    losses: list[float]
    #: each step's events (tokens) in the global batch, and every rank's share of them
    events: list[int]
    rank_events: list[list[int]]
    tokens_per_s: float
    seconds_per_step: float
    #: every rank's comm-log rows (the all-to-alls of sequence embeddings, the dense all-reduce)
    comm: list[dict[str, Any]] = field(default_factory=list)
    #: with ``keep_weights``: every table, whole (its shards put together), and the replicated
    #: parameters by their :class:`~recnotebooks.nn.generative.HSTURanker` names; else ``{}``
    tables: dict[str, torch.Tensor] = field(default_factory=dict)
    dense: dict[str, torch.Tensor] = field(default_factory=dict)
    #: held-out AUC, log loss and NE over every event of ``eval_batches`` batches (``None`` without)
    auc: float | None = None
    logloss: float | None = None
    ne: float | None = None
    source: str = "measured"


def check_hstu_run(
    config: HSTUConfig, listening: ListeningConfig, plan: Plan, world: int, batch_size: int
) -> None:
    """Refuse, before any process starts, what a distributed HSTU run cannot train: ``ValueError``
    naming the parameter, its value and what is allowed."""
    check_type("config", config, HSTUConfig, "an HSTUConfig")
    check_type("listening", listening, ListeningConfig, "a ListeningConfig")
    check_type("plan", plan, Plan, "a Plan")
    rows = {"item": listening.items, "album": listening.albums, "artist": listening.artists}
    context = (USER_TABLE,) if listening.user_context else ()
    rows |= {USER_TABLE: listening.users} if context else {}
    if sorted(t.name for t in config.tables) != sorted(rows) or any(
        t.num_rows < rows[t.name] for t in config.tables
    ):
        raise ValueError(
            f"config.tables must be the listening log's {list(rows)} with at least {rows} rows, "
            f"got {[(t.name, t.num_rows) for t in config.tables]}"
        )
    if config.context != context:
        raise ValueError(
            f"config.context must be the log's context tables {context} (listening.user_context="
            f"{listening.user_context}), got {config.context}"
        )
    if config.max_len < listening.max_length:
        raise ValueError(
            f"config.max_len must be at least listening.max_length={listening.max_length} (the longest "
            f"history), got {config.max_len}"
        )
    if batch_size < world:
        raise ValueError(
            f"batch_size must be at least world_size={world} (each rank takes at least one whole history), "
            f"got {batch_size}"
        )
    if plan.world_size != world:
        raise ValueError(f"plan.world_size must equal world_size={world}, got {plan.world_size}")
    check_placements(plan, plan.geometry(plan_config(config.tables, config.dim)))


def local_histories(batch: SequenceBatch, lo: int, hi: int) -> SequenceBatch:
    """Histories ``lo .. hi - 1`` of ``batch`` (a rank's block), their events re-based to 0."""
    lo = check_int("lo", lo, lo=0, hi=len(batch.users) - 1)
    hi = check_int("hi", hi, lo=lo + 1, hi=len(batch.users))
    s, e = int(batch.offsets[lo]), int(batch.offsets[hi])
    return SequenceBatch(batch.users[lo:hi], batch.offsets[lo : hi + 1] - s,
                         {k: v[s:e] for k, v in batch.ids.items()}, batch.timestamps[s:e],
                         batch.labels[s:e], {k: v[lo:hi] for k, v in batch.context.items()})  # fmt: skip


def _hstu_logits(
    model: HybridParallelHSTU, batch: SequenceBatch
) -> tuple[torch.Tensor, SequenceBatch, list[int]]:
    """The logits of this rank's block of ``batch``, the block, and every rank's events."""
    off = batch.offsets.tolist()
    blocks = history_blocks(len(batch.users), model.world_size)
    events = [off[hi] - off[lo] for lo, hi in blocks]
    mine, dev = local_histories(batch, *blocks[model.rank]), model.device
    logits = model(
        mine.tokens(model.embeddings.keys).to(dev),
        mine.offsets,
        mine.previous_actions(),
        mine.timestamps.to(dev),
        events,
    )
    return logits, mine, events


def _hstu_step(
    model: HybridParallelHSTU, opts: tuple[Any, Any], batch: SequenceBatch, clip: float | None
) -> tuple[float, list[int]]:
    """One step on this rank's block of ``batch``: its share of the loss, every rank's events."""
    logits, mine, events = _hstu_logits(model, batch)
    loss = model.local_loss(logits, mine.labels.to(logits.device), batch.num_tokens)
    loss.backward()
    sparse_opt, dense_opt = opts
    sparse_opt.step(count_rows=False)
    if clip is not None:  # the gradients are the global batch's here (summed), equal on every rank
        torch.nn.utils.clip_grad_norm_(list(model.dense_parameters()), clip)
    dense_opt.step()
    dense_opt.zero_grad(set_to_none=True)
    return float(loss.detach()), events


def run_hstu_rank(
    ctx: RankContext, config: HSTUConfig, listening: ListeningConfig, plan: Plan, settings: HSTUTrainSettings
) -> dict[str, Any]:
    """Train ``settings.steps`` steps of a :class:`HybridParallelHSTU` on this rank's block of every
    global batch of ``SyntheticListening(listening, settings.batch_size)`` (batch ``i`` drawn alike on
    every rank); every rank must call it. Returns this rank's ``losses`` (its shares), ``events``,
    ``seconds`` (after the first step), ``comm`` rows, and with ``keep_weights`` its ``shards``
    (plan index -> weight) and ``dense`` parameters."""
    model = HybridParallelHSTU(config, plan, ctx.rank, ctx.world_size, seed=settings.seed, log=ctx.log,
                               device=ctx.device)  # fmt: skip
    opts = (
        model.sparse_optimizer(settings.sparse_optimizer, settings.sparse_lr),
        make_dense_optimizer(settings.dense_optimizer, model.dense_parameters(), settings.dense_lr),
    )
    data = SyntheticListening(listening, settings.batch_size, "train")
    losses, events, seconds = [], [], 0.0
    for step in range(settings.steps):
        note_step(step, settings.steps)  # a lost peer's message names the step (distributed.peers)
        t0 = time.perf_counter()
        loss, n = _hstu_step(model, opts, data.batch(step), settings.clip_grad_norm)
        seconds += (time.perf_counter() - t0) if step else 0.0
        losses.append(loss)
        events.append(n)
    note_step(settings.steps, settings.steps)
    out: dict[str, Any] = {"losses": losses, "events": events, "seconds": seconds, "comm": ctx.log.rows()}
    if settings.eval_batches:  # this rank's scores of its block of every held-out batch
        held = SyntheticListening(listening, settings.batch_size, "eval")
        model.eval()
        with torch.no_grad():
            out["scores"] = [
                _hstu_logits(model, held.batch(i))[0].cpu() for i in range(settings.eval_batches)
            ]
    if settings.keep_weights:
        out["shards"] = {s.index: w.detach().cpu().clone() for s, w in model.embeddings.shard_weights()}
        out["dense"] = {k: v.detach().cpu().clone() for k, v in model.dense_state_dict().items()}
    return out


def _whole_tables(config: HSTUConfig, plan: Plan, values: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Every table, whole, from the ranks' shards (a data-parallel replica: any rank's copy)."""
    geometry = plan.geometry(plan_config(config.tables, config.dim))
    tables = {t.name: torch.zeros(t.num_rows, config.dim) for t in config.tables}
    for v in values:
        for i, w in v["shards"].items():
            g = geometry[i]
            tables[plan.shards[i].table][g.row_slice, g.col_slice] = w
    return tables


def train_hstu_local(
    config: HSTUConfig,
    listening: ListeningConfig,
    plan: Plan,
    world_size: int,
    settings: HSTUTrainSettings,
    timeout_s: float = 600.0,
) -> HSTUDistResult:
    """Train :class:`~recnotebooks.nn.generative.HSTURanker` ``config`` hybrid-parallel on
    ``world_size`` local CPU ranks (gloo): tables sharded by ``plan``, the rest data parallel, each
    rank a contiguous block of every global batch's histories (:mod:`recnotebooks.distributed.hstu`).
    The losses equal a single-process run's with the same optimizers (up to rounding; row-wise
    Adagrad on column-wise tables keeps an accumulator per shard). Bad input raises before any
    process starts (:func:`check_hstu_run`)."""
    world = check_int("world_size", world_size, lo=1, hi=max_world_size())
    check_type("settings", settings, HSTUTrainSettings, "an HSTUTrainSettings")
    check_hstu_run(config, listening, plan, world, settings.batch_size)
    values = launch(run_hstu_rank, world, config, listening, plan, settings, timeout_s=timeout_s).values
    losses = [sum(v["losses"][i] for v in values) for i in range(settings.steps)]  # shares add up
    first = values[0]
    rank_events = first["events"]  # every rank's events of each step (the same on every rank)
    events = [sum(e) for e in rank_events]
    timed = settings.steps - 1
    per_step = first["seconds"] / timed if timed else 0.0
    metrics: dict[str, float] = {}
    if settings.eval_batches:  # the ranks' scores in rank order are each batch's events in order
        held = SyntheticListening(listening, settings.batch_size, "eval")
        scores = torch.cat([v["scores"][i] for i in range(settings.eval_batches) for v in values])
        labels = torch.cat([held.batch(i).labels for i in range(settings.eval_batches)])
        try:
            m = click_metrics(torch.sigmoid(scores), labels)
            metrics = {k: m[k] for k in ("auc", "logloss", "ne")}
        except ValueError as e:  # e.g. one class only: as the single-process Trainer, a warning
            warnings.warn(f"evaluation skipped: {e}", RuntimeWarning, stacklevel=2)
    return HSTUDistResult(
        world, settings.steps, settings.batch_size, losses, events, rank_events,
        tokens_per_s=sum(events[1:]) / first["seconds"] if first["seconds"] > 0 else 0.0,
        seconds_per_step=per_step,
        comm=[row for v in values for row in v["comm"]],
        tables=_whole_tables(config, plan, values) if settings.keep_weights else {},
        dense=first.get("dense", {}), **metrics,
    )  # fmt: skip
