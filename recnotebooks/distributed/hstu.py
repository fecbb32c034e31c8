"""Hybrid-parallel HSTU: sharded tables, data-parallel HSTU stack (:class:`HybridParallelHSTU`).

The generative ranker :class:`~recnotebooks.nn.generative.HSTURanker` trained on several ranks
as :class:`~recnotebooks.distributed.hybrid.HybridParallelDLRM` trains a DLRM:

* **Tables, model parallel.** The ranker's tables are a
  :class:`~recnotebooks.distributed.sharded.ShardedEmbeddingBagCollection` executing a
  :class:`~recnotebooks.plan.Plan` (table-, row-, column-wise, data-parallel). An *event* is a
  sample of the engine: a bag of one id per table. A rank's events go through the engine's input
  all-to-all of ids, its owners' lookups and the output all-to-all that brings every event's
  vectors back: the all-to-all of **sequence embeddings**, ``events x tables x dim`` floats.
* **The rest, data parallel.** The action embedding, the HSTU stack and the top MLP are
  replicated in ``DistributedDataParallel`` (a gradient hook through the logged
  :func:`~recnotebooks.distributed.comm.all_reduce`).

**The split.** A global batch of ``B`` histories is cut into contiguous blocks of histories
(:func:`history_blocks`: ``B // W`` each, the first ``B % W`` ranks one more). Attention never
crosses a history, so a rank runs the HSTU stack on its whole histories alone. Ranks then hold
different numbers of events (histories are jagged): the engine is told every rank's event count
(``batch_sizes`` of :meth:`ShardedEmbeddingBagCollection.start`), which every rank knows from
the global batch's offsets, so nothing more is sent.

**The loss.** The single-process loss is the mean over the global batch's ``N`` events. Rank
``r``'s loss (:meth:`HybridParallelHSTU.local_loss`) is the **sum** over its own events divided
by ``N``, so the ranks' losses add up to the global mean (a rank with few events weighs little,
as its events do). Their gradients are summed: DDP's hook all-reduces the dense gradients by
sum (not mean), and the reverse all-to-all already sums an embedding row's gradient over the
ranks whose events read it. So every gradient equals the single-process model's on the global
batch, and with the same optimizers, so does every step.

**Initialisation.** The dense modules are those of ``HSTURanker(config, seed=seed)`` (its tables
are drawn apart from them, so a ranker with one row per table gives them without drawing the
tables), and the shards are copied out of the same seed's tables (as the engine does): every
rank starts equal to the single-process ranker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import check_int, check_jagged_offsets, check_module_device, check_type, show
from ..config.hstu import ACTIONS, HSTUConfig
from ..nn.generative import HSTURanker
from ..plan import MAX_RANKS, Plan
from ..sparse import JaggedBatch
from .comm import CommLog, all_reduce
from .sharded import ShardedEmbeddingBagCollection, ShardedSparseOptimizer

__all__ = ["HybridParallelHSTU", "history_blocks"]


def history_blocks(num_histories: int, world_size: int) -> list[tuple[int, int]]:
    """Each rank's contiguous block ``(lo, hi)`` of a global batch's ``num_histories`` histories:
    ``num_histories // world_size`` each, the first ``num_histories % world_size`` ranks one more
    (as ``numpy.array_split``). ``ValueError`` when a rank would hold no history."""
    world = check_int("world_size", world_size, lo=1, hi=MAX_RANKS)
    n = check_int("num_histories", num_histories, lo=1)
    if n < world:
        raise ValueError(
            f"num_histories must be at least world_size={world} (every rank takes at least one whole "
            f"history: attention runs within a history), got {n}"
        )
    q, extra = divmod(n, world)
    bounds = [r * q + min(r, extra) for r in range(world + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _sum_hook(state, bucket):  # noqa: ANN001, ANN202
    """DDP's gradient all-reduce by **sum** over ranks (each rank's loss is already its share of
    the global mean), through the logged collective (DDP refuses hooks whose annotations are not
    its own classes, and this module's annotations are strings)."""
    out = all_reduce(bucket.buffer(), "sum", log=state.log, group=state.group)
    future = torch.futures.Future()
    future.set_result(out)
    return future


class _DenseHSTU(nn.Module):
    """The replicated part of :class:`HSTURanker`: the ranker without its tables (action
    embedding, HSTU stack, top MLP, contextual maps), run from the looked-up rows."""

    def __init__(self, config: HSTUConfig, seed: int, device: torch.device) -> None:
        super().__init__()
        # HSTURanker draws its tables apart from the rest (its docstring's contract): one row a
        # table gives the same dense weights without drawing (or holding) the tables
        tiny = tuple(dataclasses.replace(t, num_rows=1) for t in config.tables)
        self.ranker = HSTURanker(config.replace(tables=tiny), device=device, seed=seed)
        del self.ranker.embeddings  # the sharded collection holds the tables

    def forward(
        self,
        pooled: torch.Tensor,
        offsets: torch.Tensor,
        actions: torch.Tensor,
        timestamps: torch.Tensor | None,
    ) -> torch.Tensor:
        return self.ranker.from_pooled(pooled, offsets, actions, timestamps)


class HybridParallelHSTU(nn.Module):
    """This rank's part of an :class:`~recnotebooks.nn.generative.HSTURanker` trained
    hybrid-parallel (see the module docstring).

    Args:
        config: the model (as for :class:`HSTURanker`; a ``context`` table is looked up by the
            engine as the ranker looks it up: a bag of one id on a history's first event).
        plan: how the tables are sharded (``plan.world_size == world_size``).
        rank, world_size: this process and the number of ranks (the process group's).
        seed: the single-process ranker's seed (every rank starts equal to ``HSTURanker(config, seed)``).
        log: where the collectives record calls, bytes and seconds (``None``: a fresh :class:`CommLog`).
        group: the ``torch.distributed`` process group (``None``: the default one).
        device: where the dense part and the batches live (``None``: CPU).

    ``forward(tokens, offsets, actions, timestamps, events)`` takes this rank's histories (as
    :meth:`HSTURanker.forward` does) and ``events``, every rank's event count, and returns the
    logits of this rank's events; :meth:`local_loss` is this rank's share of the global loss.
    """

    def __init__(
        self,
        config: HSTUConfig,
        plan: Plan,
        rank: int,
        world_size: int,
        seed: int = 0,
        log: CommLog | None = None,
        group: Any = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        check_type("config", config, HSTUConfig, "an HSTUConfig")
        world = check_int("world_size", world_size, lo=1, hi=MAX_RANKS)
        rank = check_int("rank", rank, lo=0, hi=world - 1)
        if log is not None:
            check_type("log", log, CommLog, "a CommLog or None")
        checked = check_module_device("device", device)
        self.device = torch.device("cpu") if checked is None else checked
        self.config, self.rank, self.world_size = config, rank, world
        self.log = log if log is not None else CommLog(rank)
        self.group = group
        dense = _DenseHSTU(config, seed, self.device)  # refuses a config HSTURanker refuses
        #: this rank's table shards (an event: a bag of one id per table)
        self.embeddings = ShardedEmbeddingBagCollection(
            config.tables, config.dim, plan, rank, world, pooling="sum", seed=seed, log=self.log, group=group
        ).to(self.device)
        ids = [self.device.index or 0] if self.device.type == "cuda" else None
        # an empty parameter (the contextual maps of a config without context) gets no gradient
        # and has nothing to all-reduce: DDP leaves it out (else it waits for its gradient)
        empty = [name for name, p in dense.named_parameters() if not p.numel()]
        nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(dense, empty)
        # no buffer sync each forward: the dense part's buffers are constants, equal by construction
        #: the action embedding, HSTU stack and top MLP, replicated by DistributedDataParallel
        self.dense = nn.parallel.DistributedDataParallel(
            dense, device_ids=ids, process_group=group, forward_sync_buffers=False
        )
        self.dense.register_comm_hook(self, _sum_hook)

    def dense_parameters(self) -> Iterator[nn.Parameter]:
        """The replicated parameters (in the single-process ranker's order, its tables left out)."""
        return self.dense.module.parameters()

    def dense_state_dict(self) -> dict[str, torch.Tensor]:
        """The replicated parameters by their :class:`HSTURanker` names (``"hstu.layers.0..."``)."""
        return self.dense.module.ranker.state_dict()

    def sparse_optimizer(self, name: str, lr: float) -> ShardedSparseOptimizer:
        """A sparse optimizer (``"sgd"``, ``"rowwise_adagrad"``, ``"adagrad"``) on every local shard."""
        return ShardedSparseOptimizer(self.embeddings, name, lr)

    def forward(
        self,
        tokens: JaggedBatch,
        offsets: torch.Tensor,
        actions: torch.Tensor,
        timestamps: torch.Tensor | None,
        events: Sequence[int],
    ) -> torch.Tensor:
        """Logits ``(n,)`` of this rank's ``n`` events: ``tokens`` one id per table per event
        (``batch_size = n``), ``offsets`` its histories, ``actions`` ``(n,)`` the action before each
        event, ``timestamps`` ``(n,)`` or ``None``; ``events``: every rank's ``n``, in rank order
        (the same list on every rank)."""
        check_type("tokens", tokens, JaggedBatch, "a JaggedBatch")
        n = tokens.batch_size
        check_jagged_offsets("offsets", offsets, n)
        if not isinstance(actions, torch.Tensor) or actions.shape != (n,) or actions.is_floating_point():
            raise ValueError(f"actions must be a ({n},) integer tensor, one per event, got {show(actions)}")
        if n and (int(actions.min()) < 0 or int(actions.max()) >= len(ACTIONS)):
            raise ValueError(
                f"actions must index {list(ACTIONS)} (0 .. {len(ACTIONS) - 1}), got {show(actions)}"
            )
        pooled = self.embeddings.start(tokens, events).wait()  # (n, tables, dim), all-to-all'd
        times = None if timestamps is None else timestamps.to(self.device)
        return self.dense(pooled, offsets.to(self.device), actions.to(self.device), times)

    def local_loss(self, logits: torch.Tensor, labels: torch.Tensor, total_events: int) -> torch.Tensor:
        """This rank's share of the global batch's mean log loss: the sum of its events' binary
        cross-entropy over ``total_events`` (the global batch's events). Summed over the ranks,
        the single-process loss."""
        total = check_int("total_events", total_events, lo=max(1, logits.numel()))
        if labels.shape != logits.shape:
            raise ValueError(
                f"labels must have the logits' shape {tuple(logits.shape)}, got {tuple(labels.shape)}"
            )
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits), reduction="sum") / total
