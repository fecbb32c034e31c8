"""A *measured* training step of a generative recommender (HSTU) on this machine, by phase
(:func:`measure_hstu_step`), with the same load-robust machinery as a DLRM's
(:func:`recnotebooks.measure.measure_step`).

The step is a real one of :class:`~recnotebooks.nn.generative.HSTURanker`: the tables'
lookups (one id per event table per event, summed with the previous action's embedding), the
HSTU stack, the top MLP and the loss (binary cross-entropy on every event's ``listen_plus``
label), one backward pass, row-wise Adagrad on the rows looked up
(:func:`~recnotebooks.nn.optim.make_sparse_optimizer`) and Adam on everything else
(:func:`~recnotebooks.nn.optim.make_dense_optimizer`), as MLPerf's DLRMv4 sets them. The batch
is drawn by :class:`~recnotebooks.data.listening.SyntheticListening` once, before timing: either
``histories`` histories of its Yambda-shaped log-normal lengths, or histories of the ``lengths``
given. The tables are capped at ``max_rows`` rows (the ids folded into them), as for a DLRM.

As for a DLRM: untimed warm-up steps until the step time settles, timed steps for
``time_budget_s``, the **median** step, outliers re-measured, a ``deadline_s``, the thread
policy's threads, and :attr:`HSTUMeasurement.reliable` saying whether it can be trusted.

``padded=True`` measures the common way of the same model with the same weights: every history
padded to the batch's longest (:mod:`recnotebooks.nn.hstu_padded`), the padding looked up,
projected, attended and masked out of the loss; so a notebook can show jagged vs padded measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from recnotebooks.checks import check_bool, check_float, check_int, check_int_list, check_steps, check_type
from recnotebooks.config.hstu import HSTUConfig
from recnotebooks.data.listening import TABLES, ListeningConfig, SyntheticListening
from recnotebooks.data.sequences import SequenceBatch
from recnotebooks.kernels.allocator import keep_freed_memory
from recnotebooks.measure.cores import handoff_reading
from recnotebooks.measure.step import (
    DEFAULT_MEMORY_BUDGET,
    DEFAULT_TABLE_BYTES,
    DoesNotFitError,
    StepMeasurement,
    _Budget,
    _timed_steps,
    _timing,
    _warm_up,
)
from recnotebooks.nn.generative import HSTURanker
from recnotebooks.nn.hstu_padded import padded_stack, to_padded, valid_positions
from recnotebooks.nn.optim import make_dense_optimizer, make_sparse_optimizer
from recnotebooks.sparse import JaggedBatch
from recnotebooks.threads import choose_threads, load_monitor, use_threads
from recnotebooks.timing import PhaseTimer
from recnotebooks.train import resolve_device

__all__ = [
    "HSTUMeasurement",
    "HSTU_PHASES",
    "measure_hstu_step",
    "hstu_batch",
    "hstu_max_rows",
    "hstu_measurement_bytes",
    "capped_hstu",
    "HSTUStepper",
]

#: The phases of a measured HSTU step, in order.
HSTU_PHASES = ("embeddings", "hstu", "top_mlp", "backward", "sparse_optimizer", "dense_optimizer")
#: Learning rates of the measured step (their values do not change its time).
SPARSE_LR, DENSE_LR = 0.01, 1e-3


@dataclass
class HSTUMeasurement(StepMeasurement):
    """A measured HSTU step: a :class:`~recnotebooks.measure.StepMeasurement` whose ``batch_size``
    is the histories a step and whose ``phases`` are :data:`HSTU_PHASES`, with the tokens.

    ``tokens``: the events of the batch (the real ones); ``computed_tokens``: the positions the
    step computed (``tokens`` jagged; histories x longest padded); ``lengths``: each history's
    events; ``padded``: the common way was measured."""

    tokens: int = 0
    computed_tokens: int = 0
    lengths: tuple[int, ...] = ()
    padded: bool = False

    @property
    def tokens_per_s(self) -> float:
        """Real events a second (padding not counted)."""
        return self.tokens / self.seconds_per_step if self.seconds_per_step > 0 else 0.0

    @property
    def padding_share(self) -> float:
        """Share of the computed positions that are padding (0 for a jagged step)."""
        return 1.0 - self.tokens / self.computed_tokens if self.computed_tokens else 0.0


def capped_hstu(config: HSTUConfig, max_rows: int) -> HSTUConfig:
    """``config`` with every table capped at ``max_rows`` rows."""
    tables = tuple(t if t.num_rows <= max_rows else type(t)(t.name, max_rows) for t in config.tables)
    return config.replace(tables=tables)


def hstu_max_rows(config: HSTUConfig, table_bytes: int = DEFAULT_TABLE_BYTES) -> int:
    """Row cap so that all capped tables together hold about ``table_bytes`` of fp32 weights
    (as :func:`~recnotebooks.measure.step.default_max_rows` for a DLRM)."""
    per_row = len(config.tables) * config.dim * 4
    return max(1024, min(max(t.num_rows for t in config.tables), table_bytes // per_row))


def hstu_measurement_bytes(config: HSTUConfig, lengths: Sequence[int], max_rows: int, padded: bool) -> int:
    """Estimated peak bytes of measuring ``config`` (rows capped) on histories of ``lengths``:
    the tables and their state, the dense weights with Adam's two moments and gradients, and
    the activations kept for backward three times (forward, gradients, temporaries): per layer
    about 8 token vectors of ``dim``, the U, V, Q, K projection, and the attention weights
    (``heads x n^2`` a history, four copies: scores, bias, SiLU, masked)."""
    capped = capped_hstu(config, max_rows)
    rows = sum(t.num_rows for t in capped.tables)
    qk, v = config.head_dims
    h = config.heads
    run = [max(lengths)] * len(lengths) if padded else list(lengths)
    tokens = sum(run)
    per_layer = tokens * (8 * config.dim + 2 * h * (qk + v)) + 4 * h * sum(n * n for n in run)
    activations = config.num_layers * per_layer + tokens * (len(config.tables) + 2) * config.dim
    dense = config.dense_parameters * 4 * 4
    return int(rows * config.dim * 4 + rows * 4 + dense + 3 * 4 * activations)


def hstu_batch(config: HSTUConfig, lengths: Sequence[int], seed: int = 0) -> SequenceBatch:
    """A :class:`SyntheticListening` batch of histories of exactly ``lengths`` events, its ids
    keyed by ``config``'s tables: event table ``i`` takes the log's ``item``, ``album`` or
    ``artist`` id (in turn), folded into the table's rows (``id % num_rows``).

    The log draws every history at the longest length (a log-normal law of median = mean has no
    spread), and history ``b`` keeps its first ``lengths[b]`` events."""
    longest = max(1, max(lengths))
    full = _log(ListeningConfig(median_length=longest, mean_length=longest, max_length=longest, seed=seed),
                len(lengths)).batch(0)  # fmt: skip
    want = torch.tensor(list(lengths), dtype=torch.int64)
    history = torch.repeat_interleave(torch.arange(len(want)), full.lengths)
    keep = (torch.arange(full.num_tokens) - full.offsets[history]) < want[history]
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), want.cumsum(0)])
    ids = {t.name: full.ids[TABLES[i % len(TABLES)]][keep] % t.num_rows for i, t in enumerate(config.tables)}
    return SequenceBatch(full.users, offsets, ids, full.timestamps[keep], full.labels[keep])


_LOGS: dict[tuple[ListeningConfig, int], SyntheticListening] = {}


def _log(config: ListeningConfig, histories: int) -> SyntheticListening:
    """The synthetic log of ``config`` (its catalogue and teacher take a second or two to build:
    the last few are kept, so that measuring a setting again does not pay for them)."""
    key = (config, histories)
    if key not in _LOGS:
        if len(_LOGS) >= 4:
            _LOGS.pop(next(iter(_LOGS)))
        _LOGS[key] = SyntheticListening(config, histories)
    return _LOGS[key]


class HSTUStepper:
    """Training steps of ``model`` on one batch, phase by phase (:meth:`train_step`): the short
    step :func:`measure_hstu_step` times (forward, binary cross-entropy, backward, row-wise
    Adagrad on the tables, Adam on the rest). ``padded``: the common way on padded histories."""

    def __init__(self, model: HSTURanker, batch: SequenceBatch, padded: bool = False) -> None:
        self.model, self.padded = model, padded
        dev = model.actions.weight.device
        self.sparse_opt = make_sparse_optimizer("rowwise_adagrad", model.embeddings, SPARSE_LR)
        dense = [p for name, p in model.named_parameters() if not name.startswith("embeddings.")]
        self.dense_opt = make_dense_optimizer("adam", dense, DENSE_LR)
        self.offsets, self.lengths = batch.offsets.to(dev), batch.lengths.to(dev)
        self.timestamps = batch.timestamps.to(dev)
        self.actions, self.labels = batch.previous_actions().to(dev), batch.labels.to(dev)
        self.tokens = batch.tokens()
        if padded:  # every history at the longest length: ids, actions, timestamps, a mask
            n = max(1, int(batch.lengths.max()))
            self.n, self.valid = n, valid_positions(self.lengths, n)
            keys = self.tokens.keys
            ids = torch.cat([to_padded(batch.ids[k], batch.offsets, n).reshape(-1) for k in keys])
            count = len(self.lengths) * n
            self.tokens = JaggedBatch(keys, ids, torch.ones(len(keys) * count, dtype=torch.int64), count)
            self.actions = to_padded(self.actions, self.offsets, n).reshape(-1)
            self.timestamps = to_padded(self.timestamps, self.offsets, n)

    @property
    def computed_tokens(self) -> int:
        """Positions a step computes."""
        return len(self.lengths) * self.n if self.padded else int(self.offsets[-1])

    def logits(self, timer: PhaseTimer) -> torch.Tensor:
        """The forward pass, timed by phase: a logit per real event (``(L,)``, the jagged order)."""
        m = self.model
        with timer.phase("embeddings"):
            x = m.embeddings(self.tokens).sum(dim=1) + m.actions(self.actions)
        with timer.phase("hstu"):
            if self.padded:
                b = len(self.lengths)
                h = padded_stack(m.hstu, x.view(b, self.n, -1), self.lengths, self.timestamps)
            else:
                h = m.hstu(x, self.offsets, self.timestamps)
        with timer.phase("top_mlp"):
            out = m.top(h).squeeze(-1)
            return out[self.valid] if self.padded else out

    def train_step(self, timer: PhaseTimer) -> tuple[float, int]:
        """One step; returns the loss and the histories. The loss is timed with ``top_mlp``."""
        self.model.train()
        logits = self.logits(timer)
        with timer.phase("top_mlp"):
            loss = F.binary_cross_entropy_with_logits(logits, self.labels)
        with timer.phase("backward"):
            loss.backward()
        with timer.phase("sparse_optimizer"):
            self.sparse_opt.step(count_rows=False)
        with timer.phase("dense_optimizer"):
            self.dense_opt.step()
            self.dense_opt.zero_grad(set_to_none=True)
        timer.steps += 1
        return float(loss.detach()), len(self.lengths)


def _check_lengths(config: HSTUConfig, lengths: object, histories: object, seed: int) -> list[int]:
    """The histories' lengths: those given, or ``histories`` drawn by the synthetic log."""
    if lengths is None:
        b = check_int("histories", histories, lo=1, hi=100_000)
        return _log(ListeningConfig(max_length=config.max_len, seed=seed), b).batch(0).lengths.tolist()
    out = check_int_list("lengths", lengths, lo=0, hi=config.max_len, max_len=100_000)
    if not out or not sum(out):
        raise ValueError(f"lengths must hold at least one history with events, got {list(lengths)!r}")
    return out


def measure_hstu_step(
    config: HSTUConfig,
    lengths: Sequence[int] | None = None,
    *,
    histories: int = 32,
    padded: bool = False,
    max_rows: int | None = None,
    time_budget_s: float = 0.5,
    min_steps: int = 1,
    max_steps: int = 20,
    device: str | torch.device | None = "cpu",
    seed: int = 0,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    deadline_s: float | None = None,
    threads: int | None = None,
) -> HSTUMeasurement:
    """Train a row-capped copy of ``config`` for a moment and return its median step by phase.

    Returns an :class:`HSTUMeasurement`: ``phases`` (seconds per step of each of
    :data:`HSTU_PHASES`), ``seconds_per_step`` (their sum, the median step), ``batch_size`` (the
    histories), ``tokens`` (real events a step) and ``computed_tokens`` (positions computed),
    ``lengths``, ``padded``, the row cap ``max_rows``, and the measurement's ``steps``,
    ``step_seconds``, ``remeasured``, ``cut_short``, ``threads``, ``other_load`` and
    :attr:`~HSTUMeasurement.reliable` as :func:`~recnotebooks.measure.measure_step` gives them.

    Args:
        config: the model (``HSTURanker``'s: no contextual tables); its tables capped at ``max_rows``.
        lengths: the events of each history of the batch (0 .. ``config.max_len``); ``None``:
            ``histories`` histories of :class:`SyntheticListening`'s Yambda-shaped lengths
            (median 54, mean 96), capped at ``config.max_len``.
        histories: the histories a step when ``lengths`` is ``None``.
        padded: measure the common way, every history padded to the longest.
        max_rows: row cap; default :func:`hstu_max_rows` (about 64 MB of tables).
        time_budget_s, min_steps, max_steps, device, seed, memory_budget, deadline_s, threads:
            as for :func:`~recnotebooks.measure.measure_step` (``memory_budget`` against
            :func:`hstu_measurement_bytes`).
    """
    config = check_type("config", config, HSTUConfig, "an HSTUConfig")
    if config.context:  # the measured step looks up event tables only (its cost model prices context)
        raise ValueError(
            f"config.context must be empty to measure a step here (the measured step has no contextual "
            f"tokens), got {config.context}; measure config.replace(context=())"
        )
    seed = check_int("seed", seed, lo=0)
    run = _check_lengths(config, lengths, histories, seed)
    padded = check_bool("padded", padded)
    cap = hstu_max_rows(config) if max_rows is None else check_int("max_rows", max_rows, lo=1)
    lo = check_steps("min_steps", min_steps, lo=1)
    hi = check_steps("max_steps", max_steps, lo=lo)
    budget_s = check_float("time_budget_s", time_budget_s, lo=0)
    deadline = None if deadline_s is None else check_float("deadline_s", deadline_s, lo=0, lo_open=True)
    threads = None if threads is None else check_int("threads", threads, lo=1, hi=1024)
    need = hstu_measurement_bytes(config, run, cap, padded)
    if need > check_int("memory_budget", memory_budget, lo=1):
        raise DoesNotFitError(
            f"measuring {len(run)} histories of up to {max(run)} events ({sum(run):,} tokens, "
            f"{'padded' if padded else 'jagged'}) needs about {need / 1e9:.1f} GB here, over the "
            f"{memory_budget / 1e9:.1f} GB allowed; "
            "use fewer or shorter histories, fewer layers or a smaller dim"
        )
    budget = _Budget.starting_now(budget_s, lo, hi, deadline)
    return _measure(capped_hstu(config, cap), cap, run, padded, resolve_device(device), seed, budget, threads)


def _measure(
    capped: HSTUConfig,
    cap: int,
    lengths: list[int],
    padded: bool,
    dev: torch.device,
    seed: int,
    budget: _Budget,
    threads: int | None,
) -> HSTUMeasurement:
    """:func:`measure_hstu_step` of its checked settings (as :func:`measure_step`'s ``_measure``)."""
    batch = hstu_batch(capped, lengths, seed)
    choice = choose_threads(threads)
    keep_freed_memory()  # every measured step under one allocator (kernels/allocator.py)
    with use_threads(choice.threads) as used:
        stepper = HSTUStepper(HSTURanker(capped, device=dev, seed=seed), batch, padded)
        _warm_up(stepper, max(budget.seconds, 0.05), budget.stop_at)  # type: ignore[arg-type]
        load_monitor().mark()
        steps, remeasured = _timed_steps(stepper, dev, budget)  # type: ignore[arg-type]
        during = load_monitor().since_mark()
        placed = handoff_reading(dev, used)
    steps = [{k: s.get(k, 0.0) for k in HSTU_PHASES} for s in steps]
    return HSTUMeasurement(
        config_name=capped.name,
        batch_size=len(lengths),
        device=str(dev),
        max_rows=cap,
        **_timing(steps, remeasured, budget, choice, used, during, placed),
        tokens=sum(lengths),
        computed_tokens=stepper.computed_tokens,
        lengths=tuple(lengths),
        padded=padded,
    )
