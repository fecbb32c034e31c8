"""Training and evaluation with per-phase timings (:class:`Trainer`): a DLRM on batches of
samples or a generative recommender (:class:`~recnotebooks.nn.generative.HSTURanker`) on batches of
histories, by one loop. The model gives its logits and labels for a batch (``batch_logits``); the
loss (binary cross-entropy over every label), the optimizers and the phases are the trainer's.
A DLRM step is timed in the seed paper's phases: data, embedding forward, bottom MLP, interaction,
top MLP, backward, sparse (embedding) optimizer and dense optimizer; an HSTU step in data,
embeddings, hstu, top_mlp, backward, sparse_optimizer and dense_optimizer. Throughput is steady
state (the first ``warmup_steps`` steps excluded), in samples (an HSTU's histories) and, for an
HSTU, tokens (its events; not its contextual tokens): a DLRM has no tokens, its ``tokens_per_s``
is ``None``. Every number here is *measured* on the device that ran it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from recnotebooks.checkpoint import (
    add_checksum,
    check_fields,
    check_writable,
    read_checkpoint,
)
from recnotebooks.checks import (
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_int,
    check_steps,
    check_type,
    show,
)
from recnotebooks.config import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS, DLRMConfig, HSTUConfig, TableConfig
from recnotebooks.data.batch import Batch
from recnotebooks.data.sequences import SequenceBatch
from recnotebooks.metrics import click_metrics
from recnotebooks.nn.dlrm import DLRM
from recnotebooks.nn.generative import HSTURanker
from recnotebooks.nn.optim import SparseOptimizer, make_dense_optimizer, make_sparse_optimizer
from recnotebooks.threads import LoadFollower
from recnotebooks.timing import PhaseTimer, phase_rows, reliability, spread

__all__ = ["TrainConfig", "TrainResult", "Trainer", "config_from_dict", "config_to_dict", "resolve_device"]

#: ``TrainConfig.dtype``: fp32, or bf16 autocast around the forward (fp32 master weights and
#: optimizer state; no loss scaling needed). fp16 is refused: it needs loss scaling.
TRAIN_DTYPES = ("fp32", "bf16", "fp16")
#: Seconds of training between two looks at the machine's load (the thread count follows it).
RECHECK_S = 2.0
#: What each model trains on: the batch type its ``batch_logits`` reads.
BATCH_TYPES: dict[type[nn.Module], type] = {DLRM: Batch, HSTURanker: SequenceBatch}
Model = DLRM | HSTURanker  # a model the trainer trains
#: The phases of an HSTU step, in order (a DLRM's: :data:`recnotebooks.timing.PHASES`).
HSTU_PHASES = ("data", "embeddings", "hstu", "top_mlp", "backward", "sparse_optimizer", "dense_optimizer")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None``/``"auto"`` -> CUDA when available, else CPU; otherwise checked and returned."""
    return check_device("device", device)


@dataclass
class TrainConfig:
    """Hyper-parameters and bookkeeping of a training run (validated)."""

    steps: int = 400
    warmup_steps: int = 5
    sparse_optimizer: str = "rowwise_adagrad"
    sparse_lr: float = 0.05
    dense_optimizer: str = "adagrad"
    dense_lr: float = 0.02
    eval_batches: int = 10
    eval_every: int = 0
    log_every: int = 10
    time_phases: bool = True
    progress: bool = True
    dtype: str = "fp32"  #: ``"bf16"``: ``torch.autocast`` around forward (and evaluation)
    #: CPU threads to train on; ``None``: the thread policy's, following the machine's load
    threads: int | None = None
    #: clip the dense gradients to this norm before their step (``None``: don't; MLPerf's DLRMv4: 1.0)
    clip_grad_norm: float | None = None

    def __post_init__(self) -> None:
        for name, lo in (
            ("steps", 1),
            ("warmup_steps", 0),
            ("eval_batches", 0),
            ("eval_every", 0),
            ("log_every", 1),
        ):
            setattr(self, name, check_steps(name, getattr(self, name), lo=lo))
        check_choice("sparse_optimizer", self.sparse_optimizer, SPARSE_OPTIMIZERS)
        check_choice("dense_optimizer", self.dense_optimizer, DENSE_OPTIMIZERS)
        check_choice("dtype", self.dtype, TRAIN_DTYPES)
        if self.eval_every and not self.eval_batches:
            raise ValueError(f"eval_every={self.eval_every} needs eval_batches >= 1, got {self.eval_batches}")
        for name in ("sparse_lr", "dense_lr"):
            setattr(self, name, check_float(name, getattr(self, name), lo=0, lo_open=True))
        for name in ("time_phases", "progress"):
            setattr(self, name, check_bool(name, getattr(self, name)))
        if self.threads is not None:
            self.threads = check_int("threads", self.threads, lo=1, hi=1024)
        if self.clip_grad_norm is not None:
            self.clip_grad_norm = check_float("clip_grad_norm", self.clip_grad_norm, lo=0, lo_open=True)


@dataclass
class TrainResult:
    """What a run measured. ``phases`` holds mean seconds per step by phase."""

    steps: int
    batch_size: int
    samples_per_s: float
    seconds_per_step: float
    phases: dict[str, float]
    auc: float | None
    logloss: float | None
    ne: float | None
    device: str
    history: list[dict[str, float]] = field(default_factory=list)
    source: str = "measured"
    #: the loss of every step this :meth:`Trainer.fit` trained (its batch's mean, before the
    #: step's update), in order; a resumed run's start after the checkpoint's steps
    losses: list[float] = field(default_factory=list)
    #: CPU threads the timed steps ran on (the last count, if the load changed it)
    threads: int = 0
    #: why the thread policy lowered the threads, in words (``""``: it did not)
    busy: str = ""
    #: cores other programs kept busy while the timed steps ran, on average (``None``: unknown)
    other_load: float | None = None
    #: how much the timed steps varied (:func:`recnotebooks.timing.spread`)
    step_spread: float = 1.0
    #: why the numbers cannot be trusted (:func:`recnotebooks.timing.reliability`; ``""``: they can)
    reliability: str = ""
    #: tokens (an HSTU's events) per second of the timed steps, and a step; ``None`` for a DLRM
    tokens_per_s: float | None = None
    tokens_per_step: float | None = None

    @property
    def reliable(self) -> bool:
        """Whether the measured throughput and phases can be trusted."""
        return not self.reliability

    def phase_table(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows ``{phase, seconds_per_step, share, source, device, reliable, reliability,
        **extra}`` for charts."""
        return phase_rows(
            self.phases,
            self.source,
            device=self.device,
            reliable=self.reliable,
            reliability=self.reliability,
            **extra,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _TimedSteps:
    """The timed steps of a run: each step's seconds and the samples (and tokens) they trained."""

    seconds: list[float] = field(default_factory=list)
    samples: int = 0
    tokens: int | None = None

    def add(self, seconds: float, samples: int, tokens: int | None = None) -> None:
        self.seconds.append(seconds)
        self.samples += samples
        if tokens is not None:
            self.tokens = (self.tokens or 0) + tokens

    @property
    def steps(self) -> int:
        return len(self.seconds)

    @property
    def total_s(self) -> float:
        return sum(self.seconds, 0.0)


def config_to_dict(config: DLRMConfig | HSTUConfig) -> dict[str, Any]:
    """Plain-data form of a config (safe for ``weights_only`` checkpoints and JSON); an
    :class:`HSTUConfig`'s carries ``"kind": "hstu"`` (a DLRM's has no ``kind``, as before)."""
    d = dataclasses.asdict(config)
    if isinstance(config, HSTUConfig):
        return {"kind": "hstu", **d, "tables": list(d["tables"]), "context": list(config.context),
                "top_mlp": list(config.top_mlp)}  # fmt: skip
    d["bottom_mlp"], d["top_mlp"] = list(config.bottom_mlp), list(config.top_mlp)
    return d


def config_from_dict(d: dict[str, Any]) -> DLRMConfig | HSTUConfig:
    """The config :func:`config_to_dict` wrote (checked again on construction)."""
    d = dict(d)
    d["tables"] = tuple(TableConfig(**t) for t in d["tables"])
    return HSTUConfig(**d) if d.pop("kind", "dlrm") == "hstu" else DLRMConfig(**d)


def _kind(config: object) -> str:  # what a config describes, in words
    return "a generative recommender (HSTURanker)" if isinstance(config, HSTUConfig) else "a DLRM"


class Trainer:
    """Train a :class:`~recnotebooks.nn.DLRM` on an iterable of :class:`Batch`, or a
    :class:`~recnotebooks.nn.generative.HSTURanker` on an iterable of
    :class:`~recnotebooks.data.sequences.SequenceBatch` (:data:`BATCH_TYPES`).

    ``train_data`` may be any iterable of batches; if it has ``state_dict``/
    ``load_state_dict`` (as :class:`~recnotebooks.data.synthetic.SyntheticCriteo` does),
    checkpoints record and restore the data position exactly. ``callbacks`` are called as
    ``cb(record)`` with each history record (step, loss, and eval metrics when evaluated) —
    how notebooks draw live charts.
    """

    def __init__(
        self,
        model: Model,
        train_data: Iterable[Batch] | Iterable[SequenceBatch],
        eval_data: Iterable[Batch] | Iterable[SequenceBatch] | None = None,
        config: TrainConfig | None = None,
        device: str | torch.device | None = "auto",
        callbacks: Iterable[Callable[[dict[str, float]], None]] = (),
    ) -> None:
        check_type("model", model, (DLRM, HSTURanker), "a recnotebooks.nn.DLRM or HSTURanker")
        self.batch_type = BATCH_TYPES[type(model)]
        if config is not None:
            check_type("config", config, TrainConfig, "a TrainConfig")
        self.config = config or TrainConfig()
        self.device = resolve_device(device)
        if self.config.dtype == "fp16":
            why = (
                "CPU autocast is for bf16"
                if self.device.type == "cpu"
                else "fp16 needs loss scaling of both optimizers' gradients, which this trainer lacks"
            )
            raise ValueError(
                f"dtype='fp16' is refused on {self.device.type} ({why}); use dtype='bf16' "
                "(autocast, fp32 master weights) or 'fp32'"
            )
        self.model = model.to(self.device)
        for name, data in (("train_data", train_data), ("eval_data", eval_data)):
            if data is not None and not hasattr(data, "__iter__"):
                raise TypeError(
                    f"{name} must be an iterable of {self.batch_type.__name__} (or None), got {show(data)}"
                )
        self.train_data = train_data
        self.eval_data = eval_data
        self.callbacks = list(callbacks)
        for i, cb in enumerate(self.callbacks):
            if not callable(cb):
                raise TypeError(f"callbacks[{i}] must be callable as cb(record), got {show(cb)}")
        c = self.config
        self.sparse_opt: SparseOptimizer = make_sparse_optimizer(
            c.sparse_optimizer, model.embeddings, c.sparse_lr
        )
        self.dense_opt = make_dense_optimizer(c.dense_optimizer, model.dense_parameters(), c.dense_lr)
        self.loss_fn = nn.BCEWithLogitsLoss()
        self.step = 0
        self.history: list[dict[str, float]] = []
        self._iter: Iterator[Any] | None = None

    # ----- one step -------------------------------------------------------------------
    def _autocast(self) -> torch.autocast:
        """``torch.autocast`` to bf16 on this device when ``config.dtype == "bf16"`` (else a no-op)."""
        on = self.config.dtype == "bf16"
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=on)

    def _next_batch(self) -> Batch | SequenceBatch:
        if self._iter is None:
            self._iter = iter(self.train_data)
        try:
            batch = next(self._iter)
        except StopIteration:
            raise RuntimeError(
                f"train_data ran out after {self.step} steps; ask for fewer steps or more data"
            ) from None
        return self._checked(batch, "train_data").to(self.device, non_blocking=True)

    def _checked(self, batch: Any, data: str) -> Any:
        if not isinstance(batch, self.batch_type):
            model, kind = type(self.model).__name__, self.batch_type.__name__
            raise TypeError(f"{data} must yield {kind} objects for a {model}, got {type(batch).__name__}")
        return batch

    def train_step(self, timer: PhaseTimer) -> tuple[float, int, int | None]:
        """One optimisation step; returns the batch loss, the batch size (samples) and its
        tokens (an HSTU's events; ``None`` for a DLRM)."""
        with timer.phase("data"):
            batch = self._next_batch()
        self.model.train()
        with self._autocast():
            logits, labels = self.model.batch_logits(batch, timer)
            logits = logits.float()
        loss = self.loss_fn(logits, labels.to(logits.dtype))
        value = float(loss.detach())
        if not math.isfinite(value):  # before any update, so the model stays usable
            self.model.embeddings.clear_gradients()
            raise FloatingPointError(
                f"loss became {value} at step {self.step}: check the data (NaN/inf dense features?) "
                f"or lower the learning rates (sparse_lr={self.config.sparse_lr}, "
                f"dense_lr={self.config.dense_lr})"
            )
        with timer.phase("backward"):
            loss.backward()
        with timer.phase("sparse_optimizer"):
            self.sparse_opt.step(count_rows=False)  # the count would cost SGD a pass
        with timer.phase("dense_optimizer"):
            if self.config.clip_grad_norm is not None:  # the tables are not clipped, as the reference's
                torch.nn.utils.clip_grad_norm_(
                    self.dense_opt.param_groups[0]["params"], self.config.clip_grad_norm
                )
            self.dense_opt.step()
            self.dense_opt.zero_grad(set_to_none=True)
        self.step += 1
        timer.steps += 1
        return value, batch.batch_size, getattr(batch, "num_tokens", None)

    # ----- loops ----------------------------------------------------------------------
    def fit(
        self,
        steps: int | None = None,
        *,
        checkpoint: str | os.PathLike[str] | None = None,
        checkpoint_every: int = 0,
    ) -> TrainResult:
        """Train until ``steps`` total steps (default ``config.steps``) and evaluate.

        Throughput counts only the training steps after the first ``warmup_steps`` of this
        call (evaluation, callbacks and checkpoint saves are excluded). With ``checkpoint``,
        :meth:`save` writes it every ``checkpoint_every`` steps (0: only at the end) and
        once more when training ends. The steps run on the thread policy's threads, which
        follow the machine's load (:class:`~recnotebooks.threads.LoadFollower`).
        """
        target, every = self._check_fit(steps, checkpoint, checkpoint_every)
        c = self.config
        timer = PhaseTimer(self.device, enabled=c.time_phases)
        todo = target - self.step
        warm = min(c.warmup_steps, max(todo - 1, 0))
        from tqdm.auto import tqdm

        bar = tqdm(total=todo, disable=not c.progress, desc="train", leave=False)
        timed = _TimedSteps()
        losses: list[float] = []
        load = LoadFollower(c.threads, every_s=RECHECK_S)
        try:
            with load.running():
                for i in range(todo):
                    if i == warm:  # the timed steps start here
                        timer.reset()
                        timed = _TimedSteps()
                        load.restart()
                    t0 = time.perf_counter()
                    loss, batch_size, tokens = self.train_step(timer)
                    timed.add(time.perf_counter() - t0, batch_size, tokens)
                    losses.append(loss)
                    load.follow(t0)
                    bar.update(1)
                    self._log_step(loss, target, bar)
                    if checkpoint is not None and every and self.step % every == 0 and self.step < target:
                        self.save(checkpoint)
        finally:
            bar.close()
        metrics = self._eval_record() if self.eval_data is not None and c.eval_batches else {}
        if metrics:
            self._record({"step": float(self.step), **metrics})
        if checkpoint is not None:
            self.save(checkpoint)
        return self._result(timer, timed, losses, load, metrics)

    def _check_fit(
        self, steps: int | None, checkpoint: str | os.PathLike[str] | None, checkpoint_every: int
    ) -> tuple[int, int]:
        """:meth:`fit`'s arguments checked: the step to train to and the checkpoint interval."""
        target = check_steps("steps", self.config.steps if steps is None else steps, lo=self.step)
        every = check_int("checkpoint_every", checkpoint_every, lo=0)
        if every and checkpoint is None:
            raise ValueError(f"checkpoint_every={every} needs a checkpoint path, got checkpoint=None")
        if checkpoint is not None:
            check_writable(check_type("checkpoint", checkpoint, (str, os.PathLike), "a file path"))
        return target, every

    def _log_step(self, loss: float, target: int, bar: Any) -> None:
        """The step's history record: its loss every ``log_every`` steps (and at the last), with
        the evaluation's metrics every ``eval_every`` steps."""
        c = self.config
        rec: dict[str, float] = {}
        if self.step % c.log_every == 0 or self.step == target:
            rec = {"step": float(self.step), "loss": loss}
            bar.set_postfix(loss=f"{loss:.4f}")
        if c.eval_every and self.step % c.eval_every == 0 and self.eval_data is not None:
            rec = {"step": float(self.step), "loss": loss, **self._eval_record(stacklevel=4)}
        if rec:
            self._record(rec)

    def _result(
        self,
        timer: PhaseTimer,
        timed: _TimedSteps,
        losses: list[float],
        load: LoadFollower,
        metrics: dict[str, float],
    ) -> TrainResult:
        """What :meth:`fit` measured: the timed steps' throughput and phases, the threads they
        ran on and the load beside them, and the final evaluation's ``metrics``."""
        step_spread = spread(timed.seconds)
        return TrainResult(
            steps=self.step,
            batch_size=timed.samples // timed.steps if timed.steps else 0,
            samples_per_s=timed.samples / timed.total_s if timed.total_s > 0 else 0.0,
            seconds_per_step=timed.total_s / timed.steps if timed.steps else 0.0,
            phases=self._phases(timer),
            auc=metrics.get("auc"),
            logloss=metrics.get("logloss"),
            ne=metrics.get("ne"),
            device=str(self.device),
            history=list(self.history),
            threads=load.threads,
            busy=load.busy,
            other_load=load.other_load,
            step_spread=step_spread,
            reliability=reliability(timed.steps, step_spread, load.other_load, load.spare_cores),
            losses=losses,
            tokens_per_s=None if timed.tokens is None or timed.total_s <= 0 else timed.tokens / timed.total_s,
            tokens_per_step=None if timed.tokens is None or not timed.steps else timed.tokens / timed.steps,
        )

    def _phases(self, timer: PhaseTimer) -> dict[str, float]:
        """Mean seconds a step by phase: an HSTU's :data:`HSTU_PHASES`, a DLRM's as timed."""
        phases = timer.per_step()
        return {k: phases.get(k, 0.0) for k in HSTU_PHASES} if isinstance(self.model, HSTURanker) else phases

    def _record(self, rec: dict[str, float]) -> None:
        self.history.append(rec)
        for cb in self.callbacks:
            cb(rec)

    def _eval_record(self, stacklevel: int = 3) -> dict[str, float]:
        """The evaluation's metrics; none (and a warning at ``stacklevel``, :meth:`fit`'s caller)
        when the eval data cannot give them."""
        try:
            m = self.evaluate()
        except ValueError as e:  # e.g. an eval set with a single class: report, don't crash
            warnings.warn(f"evaluation skipped: {e}", RuntimeWarning, stacklevel=stacklevel)
            return {}
        return {"auc": m["auc"], "logloss": m["logloss"], "ne": m["ne"]}

    @torch.no_grad()
    def evaluate(self, batches: int | None = None) -> dict[str, float]:
        """Log loss, AUC and NE over the first ``batches`` eval batches (default config): over
        every label they hold (a DLRM's samples, an HSTU's events)."""
        if self.eval_data is None:
            raise ValueError("evaluate needs eval_data; pass it to Trainer(...)")
        n = check_steps("batches", self.config.eval_batches if batches is None else batches, lo=1)
        self.model.eval()
        probs, labels = [], []
        for i, batch in enumerate(self.eval_data):
            if i >= n:
                break
            with self._autocast():
                logits, y = self.model.batch_logits(self._checked(batch, "eval_data").to(self.device))
            probs.append(torch.sigmoid(logits.float()).cpu())
            labels.append(y.cpu())
        if not probs:
            raise ValueError("eval_data yielded no batches")
        return click_metrics(torch.cat(probs), torch.cat(labels))

    # ----- checkpoints ------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Save model, both optimizers, step, history and the data position, with a checksum.

        Written to a temporary file and renamed, so an interrupted save never leaves a
        half-written checkpoint at ``path``.
        """
        state = add_checksum(
            {
                "config": config_to_dict(self.model.config),
                "model": self.model.state_dict(),
                "dense_optimizer_kind": self.config.dense_optimizer,
                "dtype": self.config.dtype,
                "dense_optimizer": self.dense_opt.state_dict(),
                "sparse_optimizer": self.sparse_opt.state_dict(),
                "step": self.step,
                "history": self.history,
                "data": self.train_data.state_dict() if hasattr(self.train_data, "state_dict") else None,
            }
        )
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)
        return path

    def load(self, path: str | os.PathLike[str]) -> None:
        """Restore a checkpoint written by :meth:`save`, all or nothing.

        The file is read with ``weights_only=True`` and its checksum verified
        (:func:`recnotebooks.checkpoint.read_checkpoint`); every field is then checked
        against this trainer (config, tensor shapes and dtypes, both optimizers' kinds and
        states, step, history, data position) before anything is changed. Any problem is a
        ``ValueError`` naming the file, and leaves the trainer as it was.
        """
        self.load_state(read_checkpoint(path, self.device), str(path))

    def load_state(self, state: dict[str, Any], p: str) -> None:
        """Restore a checkpoint dict already read (:meth:`load`'s checks, from the config on; ``p``
        names it in errors): e.g. a sharded checkpoint read whole by
        :func:`recnotebooks.distributed.checkpoint.read_single`."""
        try:
            step, history = self._check_checkpoint(state, p)
        except TypeError as e:  # a field of the wrong type is a bad file, like any other bad field
            raise ValueError(str(e)) from None
        data = state["data"]
        restore = None
        if data is not None and hasattr(self.train_data, "load_state_dict"):
            restore = self.train_data.state_dict() if hasattr(self.train_data, "state_dict") else None
            try:
                self.train_data.load_state_dict(data)
            except (ValueError, TypeError, KeyError) as e:
                raise ValueError(
                    f"checkpoint {p!r}: its data position does not fit train_data: {e}"
                ) from None
        try:
            self.model.load_state_dict(state["model"])
            self.dense_opt.load_state_dict(state["dense_optimizer"])
            self.sparse_opt.load_state_dict(state["sparse_optimizer"])
        except Exception:
            if restore is not None:
                self.train_data.load_state_dict(restore)
            raise
        self.step, self.history = step, history
        if (data is None or not hasattr(self.train_data, "load_state_dict")) and self.step:
            warnings.warn(
                "train_data has no load_state_dict: training resumes from the start of the data, "
                "not where the checkpoint stopped",
                RuntimeWarning,
                stacklevel=2,
            )
        self._iter = None

    def _check_checkpoint(self, state: dict[str, Any], p: str) -> tuple[int, list[dict[str, float]]]:
        """Every field of ``state`` checked against this trainer; returns (step, history)."""
        try:
            saved_cfg = config_from_dict(state["config"])
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise ValueError(f"checkpoint {p!r}: its config is invalid: {e}") from None
        if type(saved_cfg) is not type(self.model.config):
            raise ValueError(
                f"checkpoint {p!r} was saved for {_kind(saved_cfg)} ({saved_cfg.name!r}), but this trainer "
                f"trains {_kind(self.model.config)} ({self.model.config.name!r})"
            )
        if saved_cfg != self.model.config:
            mine, theirs = config_to_dict(self.model.config), config_to_dict(saved_cfg)
            diff = [k for k in mine if mine[k] != theirs.get(k)]
            raise ValueError(
                f"checkpoint {p!r} was saved for another model: its config differs in {diff} "
                f"(checkpoint {saved_cfg.name!r}, this trainer {self.model.config.name!r})"
            )
        c = self.config
        saved = state.get("dtype", "fp32")  # checkpoints from before dtype was recorded are fp32
        if saved != c.dtype:
            raise ValueError(
                f"checkpoint {p!r} was trained with dtype={saved!r} but this trainer uses dtype={c.dtype!r}"
            )
        return check_fields(
            state,
            p,
            model=self.model,
            sparse_optimizer=self.sparse_opt,
            sparse_kind=c.sparse_optimizer,
            dense_optimizer=self.dense_opt,
            dense_kind=c.dense_optimizer,
        )
