"""Hybrid-parallel DLRM: model-parallel embeddings, data-parallel MLPs (:class:`HybridParallelDLRM`).

Each rank holds its shards of the embedding tables (a :class:`ShardedEmbeddingBagCollection`
executing a :class:`~recnotebooks.plan.Plan`) and a full replica of the dense part (bottom
MLP, interaction, top MLP) wrapped in ``torch.nn.parallel.DistributedDataParallel``. A step:

1. ``embedding_forward``: the ids' input all-to-all and the local lookups; the output
   all-to-all of the pooled vectors is **issued asynchronously**;
2. ``bottom_mlp`` runs while the pooled vectors travel (``overlap=True``; ``overlap=False``
   waits for them first);
3. ``all_to_all``: the exposed wait; then ``interaction`` and ``top_mlp``;
4. backward: the pooled gradients go back to the owners by the reverse all-to-all, DDP
   all-reduces the dense gradients (a communication hook that calls
   :func:`~recnotebooks.distributed.comm.all_reduce`, so the bytes are logged as ``all_reduce``).

**Initialisation.** Every rank builds the single-process ``recnotebooks.nn.DLRM(config,
seed=seed)``'s dense modules (:func:`~recnotebooks.nn.dlrm.dense_modules`: the same modules and
weights, without its tables); the sharded collection copies its shards out of the same seed's
tables. So every rank starts equal to the single-process model, and the union of the shards
equals its embedding weights.

**Loss scaling.** Each rank's loss is the mean over its ``b`` samples of the global batch of
``B = world_size * b``. DDP averages the dense gradients over ranks: ``(1/W) sum_r (1/b) sum
= (1/B) sum``, the global-mean gradient. An embedding row's gradient arrives through the
reverse all-to-all as the **sum** over ranks of the local-mean gradients, ``W`` times the
global-mean one; so the pooled embeddings pass through an identity whose backward multiplies by
``1/world_size`` (data-parallel tables too: their replicas' gradients are summed over ranks by
:meth:`ShardedEmbeddingBagCollection.sync_data_parallel_gradients`). Gradients then equal the
single-process model's on the global batch with the mean loss.

**Phases.** With a :class:`~recnotebooks.timing.PhaseTimer`, the step's table gains
``all_to_all`` and ``all_reduce`` rows: the seconds the logged collectives blocked this
process inside any phase (input distribution in ``embedding_forward``, the reverse all-to-all
and DDP's all-reduce in ``backward``, the data-parallel tables' all-reduce in
``sparse_optimizer``) are moved out of that phase into the collective's row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from ..checks import check_bool, check_int, check_module_device, check_type
from ..config import DLRMConfig
from ..nn.dlrm import dense_modules
from ..plan import MAX_RANKS, Plan
from ..sparse import JaggedBatch
from ..timing import NULL_TIMER, PhaseTimer
from .comm import COMPONENTS, CommLog, all_reduce
from .sharded import ShardedEmbeddingBagCollection, ShardedSparseOptimizer

__all__ = ["HybridParallelDLRM", "local_samples"]

Phase = Callable[[str], Any]


def local_samples(batch: JaggedBatch, lo: int, hi: int) -> JaggedBatch:
    """Samples ``lo .. hi - 1`` of ``batch`` (a rank's contiguous slice of a global batch)."""
    check_type("batch", batch, JaggedBatch, "a JaggedBatch")
    lo = check_int("lo", lo, lo=0, hi=batch.batch_size - 1)
    hi = check_int("hi", hi, lo=lo + 1, hi=batch.batch_size)
    b, off = batch.batch_size, batch.offsets().tolist()
    ranges = [(off[k * b + lo], off[k * b + hi]) for k in range(batch.num_keys)]
    values = torch.cat([batch.values[s:e] for s, e in ranges])
    lengths = batch.lengths.view(batch.num_keys, b)[:, lo:hi].reshape(-1)
    weights = None if batch.weights is None else torch.cat([batch.weights[s:e] for s, e in ranges])
    return JaggedBatch(batch.keys, values, lengths, hi - lo, weights)


class _ScaleGrad(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by ``scale``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.scale, None


def _all_reduce_hook(state, bucket):  # noqa: ANN001, ANN202
    """DDP's gradient all-reduce (mean over ranks), through the logged collective (DDP refuses
    hooks whose annotations are not its own classes, and this module's annotations are strings)."""
    out = all_reduce(bucket.buffer(), "mean", log=state.log, group=state.group)
    future = torch.futures.Future()
    future.set_result(out)
    return future


class _DenseArch(nn.Module):
    """Bottom MLP, interaction and top MLP of a DLRM (the modules DDP replicates)."""

    def __init__(self, config: DLRMConfig, seed: int) -> None:
        super().__init__()
        self.bottom_mlp, self.interaction, self.top_mlp = dense_modules(config, seed=seed)

    def forward(self, dense: torch.Tensor, pooled: Callable[[], torch.Tensor], phase: Phase) -> torch.Tensor:
        with phase("bottom_mlp"):
            x = self.bottom_mlp(dense)
        with phase("all_to_all"):
            emb = pooled()
        with phase("interaction"):
            z = self.interaction(x, emb)
        with phase("top_mlp"):
            out = self.top_mlp(z)
        return out.squeeze(1)


class HybridParallelDLRM(nn.Module):
    """This rank's part of a DLRM trained hybrid-parallel (see the module docstring).

    Args:
        config: the model (as for :class:`~recnotebooks.nn.DLRM`).
        plan: how the embedding tables are sharded (``plan.world_size == world_size``).
        rank, world_size: this process and the number of ranks (the process group's).
        seed: the single-process model's seed (every rank starts equal to ``DLRM(config, seed)``).
        log: where the collectives record calls, bytes and seconds (``None``: a fresh
            :class:`CommLog`, in :attr:`log`).
        group: the ``torch.distributed`` process group (``None``: the default one).
        device: where the dense part and the batches live (``None``: CPU).
        overlap: run the bottom MLP while the pooled embeddings' all-to-all is in flight.
        profile: global batches whose hottest rows a ``"static"`` cache of the plan pins
            (:class:`ShardedEmbeddingBagCollection`'s ``profile``).

    ``forward(dense, sparse, timer)`` takes this rank's samples and returns their logits
    ``(b,)``. Use :meth:`backward` for the loss (it moves the collectives' time into their
    phases), :meth:`sparse_optimizer` for the embedding shards' optimizer and
    :meth:`dense_parameters` for a ``torch.optim`` optimizer.
    """

    def __init__(
        self,
        config: DLRMConfig,
        plan: Plan,
        rank: int,
        world_size: int,
        seed: int = 0,
        log: CommLog | None = None,
        group: Any = None,
        device: torch.device | str | None = None,
        overlap: bool = True,
        profile: Sequence[JaggedBatch] | None = None,
    ) -> None:
        super().__init__()
        check_type("config", config, DLRMConfig, "a DLRMConfig")
        world = check_int("world_size", world_size, lo=1, hi=MAX_RANKS)
        rank = check_int("rank", rank, lo=0, hi=world - 1)
        if log is not None:
            check_type("log", log, CommLog, "a CommLog or None")
        self.config, self.rank, self.world_size = config, rank, world
        self.overlap = check_bool("overlap", overlap)
        checked = check_module_device("device", device)
        self.device = torch.device("cpu") if checked is None else checked
        self.log = log if log is not None else CommLog(rank)
        self.group = group
        #: this rank's embedding shards
        self.embeddings = ShardedEmbeddingBagCollection(
            config.tables,
            config.embedding_dim,
            plan,
            rank,
            world,
            pooling=config.pooling,
            seed=seed,
            log=self.log,
            group=group,
            profile=profile,
        ).to(self.device)
        dense = _DenseArch(config, seed).to(self.device)
        ids = (
            [self.device.index if self.device.index is not None else 0]
            if self.device.type == "cuda"
            else None
        )
        # no buffer sync each forward (only at init): the dense part's only buffers are constants
        # (the interaction's pair indices), equal on every rank by construction
        #: the dense part, replicated by DistributedDataParallel
        self.dense = nn.parallel.DistributedDataParallel(
            dense, device_ids=ids, process_group=group, forward_sync_buffers=False
        )
        self.dense.register_comm_hook(self, _all_reduce_hook)
        self._timer: PhaseTimer = NULL_TIMER

    # ----- communication bookkeeping --------------------------------------------------------
    def _comm_seconds(self) -> dict[str, float]:
        return {c: float(self.log.total("seconds", c)) for c in COMPONENTS}

    @contextmanager
    def phase(self, timer: PhaseTimer, name: str) -> Iterator[None]:
        """``timer.phase(name)``, with the seconds the logged collectives blocked inside it moved
        to their own phases (``all_to_all``, ``all_reduce``)."""
        if not timer.enabled:
            yield
            return
        before = self._comm_seconds()
        with timer.phase(name):
            yield
        for component, seconds in self._comm_seconds().items():
            moved = seconds - before[component]
            if moved:
                timer.totals[name] -= moved
                timer.totals[component] = timer.totals.get(component, 0.0) + moved

    # ----- training -------------------------------------------------------------------------
    def dense_parameters(self) -> Iterator[nn.Parameter]:
        """The replicated MLP parameters (in the single-process DLRM's order)."""
        return self.dense.module.parameters()

    def sparse_optimizer(self, name: str, lr: float) -> ShardedSparseOptimizer:
        """A sparse optimizer (``"sgd"``, ``"rowwise_adagrad"``, ``"adagrad"``) on every local shard."""
        return ShardedSparseOptimizer(self.embeddings, name, lr)

    def forward(
        self, dense: torch.Tensor, sparse: JaggedBatch, timer: PhaseTimer = NULL_TIMER
    ) -> torch.Tensor:
        """Logits ``(b,)`` of this rank's ``b`` samples (``dense`` ``(b, num_dense)``, ``sparse``)."""
        check_type("dense", dense, torch.Tensor, "a torch.Tensor")
        check_type("sparse", sparse, JaggedBatch, "a JaggedBatch")
        check_type("timer", timer, PhaseTimer, "a PhaseTimer")
        if dense.dim() != 2 or dense.shape[1] != self.config.num_dense:
            raise ValueError(
                f"dense must have shape (batch, num_dense={self.config.num_dense}), got {tuple(dense.shape)}"
            )
        if dense.shape[0] != sparse.batch_size:
            raise ValueError(f"dense has {dense.shape[0]} rows but sparse.batch_size is {sparse.batch_size}")

        def phase(name: str) -> Any:
            return self.phase(timer, name)

        with phase("embedding_forward"):
            lookup = self.embeddings.start(sparse)
        scale = 1.0 / self.world_size

        def pooled() -> torch.Tensor:
            return _ScaleGrad.apply(lookup.wait(), scale)

        if not self.overlap:
            with phase("all_to_all"):
                ready = pooled()

            def pooled() -> torch.Tensor:  # noqa: F811 - already arrived
                return ready

        return self.dense(dense, pooled, phase)

    def backward(self, loss: torch.Tensor, timer: PhaseTimer = NULL_TIMER) -> None:
        """``loss.backward()`` in the ``backward`` phase (its collectives in their own rows)."""
        with self.phase(timer, "backward"):
            loss.backward()
