"""2D sparse parallelism: tables sharded inside groups of ranks, groups replicated.

The seed list's "Two-dimensional Sparse Parallelism" (Zhang et al., *Two-dimensional Sparse
Parallelism for Large Scale Deep Learning Recommendation Model Training*, arXiv:2508.03854,
2025), which TorchRec ships as ``torchrec.distributed.model_parallel.DMPCollection``
(``sharding_group_size``: the ranks one copy of the tables is sharded over; the rest of the
world holds replicas). Here the ``world = G * M`` ranks form ``G`` groups of ``M`` consecutive
ranks (group ``g`` is ranks ``g M .. g M + M - 1``; DMPCollection strides its groups instead,
``[0, 2, 4, 6]`` and ``[1, 3, 5, 7]`` on 2 nodes of 4, so that replicas share a node and the
replica all-reduce runs over NVLink). Inside each group a :class:`~recnotebooks.plan.Plan`
over ``M`` ranks shards the tables (a :class:`~recnotebooks.distributed.ShardedEmbeddingBagCollection`
on the group's process group, ranks numbered inside the group), so every all-to-all stays
inside a group of ``M`` ranks instead of spanning the world; the groups are replicas.

**Gradient sync.** After backward, the shards held by in-group rank ``m`` in every group are
replicas: :meth:`TwoDShardedEmbeddingBagCollection.sync_replica_gradients` sums their dense
gradients over the **replica group** (the ranks ``m, M + m, 2M + m, ...``) in one all-reduce
(logged as the ``all_reduce`` component) and records the sum as each shard's pending
gradient, so the sparse optimizer applies the same update everywhere and the replicas stay
identical; the result equals the single-process model on the global batch of ``G M b``
samples. (DMPCollection's ``sync()`` instead averages the *weights* and the optimizer state
over the replica group, ``allreduce_coalesced`` with ``ReduceOp.AVG``, when the trainer calls
it, after each group's local updates: with plain SGD every step that matches the mean
gradient; the paper pairs it with a momentum-scaled row-wise AdaGrad. Summing gradients
keeps every optimizer exact, at one dense all-reduce of the shards per step.) Data-parallel tables
inside the plan are summed over their group first, then over the replicas.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..checks import check_int, check_type
from ..config import TableConfig
from ..plan import MAX_RANKS, Plan
from ..sparse import JaggedBatch
from .comm import CommLog, all_reduce
from .sharded import (
    LocalShard,
    ShardedEmbeddingBagCollection,
    ShardedSparseOptimizer,
    check_collection,
    plan_config,
)

__all__ = ["TwoDShardedEmbeddingBagCollection", "TwoDShardedSparseOptimizer", "two_d_groups"]


def two_d_groups(world_size: int, group_size: int) -> tuple[list[Any], list[Any]]:
    """Every sharding group (``world_size // group_size`` of ``group_size`` consecutive ranks) and
    every replica group (``group_size`` of them: the ranks with the same in-group rank), as
    ``torch.distributed`` subgroups. Every rank must call it, with the same arguments (each
    ``new_group`` is created by all ranks in the same order)."""
    world = check_int("world_size", world_size, lo=1, hi=MAX_RANKS)
    m = check_int("group_size", group_size, lo=1, hi=world)
    if world % m:
        raise ValueError(f"world_size={world} must be divisible by group_size, got group_size={m}")
    g = world // m
    sharding = [dist.new_group(list(range(k * m, (k + 1) * m))) for k in range(g)]
    replica = [dist.new_group([k * m + j for k in range(g)]) for j in range(m)]
    return sharding, replica


class TwoDShardedEmbeddingBagCollection(nn.Module):
    """This rank's part of an embedding collection under 2D sparse parallelism (module docstring).

    Args:
        tables, embedding_dim, pooling, seed: as
            :class:`~recnotebooks.distributed.ShardedEmbeddingBagCollection`.
        plan: a plan over ``group_size`` ranks: how each group shards the tables.
        rank, world_size: this process and the number of ranks (the default process group's).
        group_size: ranks per sharding group (``world_size`` must be a multiple of it; equal
            to it: plain sharding, one group; 1: every rank a full replica).
        log: where the collectives record calls and bytes (``None``: not recorded).

    ``ValueError`` for bad arguments or a plan that cannot be executed, before any collective
    (creating the subgroups is the first one). ``forward(batch)`` takes this rank's samples and
    returns pooled embeddings ``(batch.batch_size, num_tables, embedding_dim)``.
    """

    def __init__(
        self,
        tables: Sequence[TableConfig],
        embedding_dim: int,
        plan: Plan,
        rank: int,
        world_size: int,
        group_size: int,
        pooling: str = "sum",
        seed: int = 0,
        log: CommLog | None = None,
    ) -> None:
        super().__init__()
        tables, dim, rank, world, pooling, seed = check_collection(
            tables, embedding_dim, rank, world_size, pooling, seed, log
        )
        m = check_int("group_size", group_size, lo=1, hi=world)
        if world % m:
            raise ValueError(f"world_size={world} must be divisible by group_size, got group_size={m}")
        check_type("plan", plan, Plan, "a Plan")
        if plan.world_size != m:
            raise ValueError(
                f"plan.world_size must equal group_size={m} (a plan per group), got {plan.world_size}"
            )
        plan.validate(plan_config(tables, dim, pooling))
        cached = [s.table for s in plan.shards if s.placement == "cache"]
        if cached:  # the replicas sum dense gradients of every row, which a cache's slots are not
            raise ValueError(
                f"2D sparse parallelism keeps every shard in 'hbm': table {cached[0]!r} has placement "
                "'cache' (allowed here: 'hbm'; a cache runs with ShardedEmbeddingBagCollection)"
            )
        self.rank, self.world_size, self.group_size = rank, world, m
        #: this rank's sharding group and (in-group) rank; its replica group index
        self.group_index, self.group_rank = divmod(rank, m)
        self.num_groups = world // m
        self.log = log
        sharding, replica = two_d_groups(world, m)
        self.sharding_group, self.replica_group = sharding[self.group_index], replica[self.group_rank]
        #: the collection sharded inside this rank's group
        self.inner = ShardedEmbeddingBagCollection(
            tables,
            embedding_dim,
            plan,
            self.group_rank,
            m,
            pooling=pooling,
            seed=seed,
            log=log,
            group=self.sharding_group,
        )

    def forward(self, batch: JaggedBatch) -> torch.Tensor:
        """Pooled embeddings ``(batch.batch_size, num_tables, embedding_dim)`` of this rank's samples."""
        return self.inner(batch)

    @property
    def collections(self) -> nn.ModuleList:
        """The local collections holding this rank's shards (optimizers update these)."""
        return self.inner.collections

    @property
    def local_shards(self) -> tuple[LocalShard, ...]:
        """This rank's shards (plan indices: the plan over the group)."""
        return self.inner.local_shards

    def sync_replica_gradients(self) -> None:
        """Sum every local shard's dense gradient over the replica group (one all-reduce of all of
        them, logged ``all_reduce``) and record the sums as the pending gradients. Every rank
        must call it, after backward (and after the group's data-parallel sync); a no-op with one
        group."""
        if self.num_groups == 1 or not len(self.collections):
            return
        with torch.no_grad():
            grads = [c.dense_weight_gradient() for c in self.collections]
            flat = torch.cat([g.reshape(-1) for g in grads])
            total = all_reduce(flat, log=self.log, group=self.replica_group)
        at = 0
        for c, g in zip(self.collections, grads, strict=True):
            c.record_dense_gradient(total[at : at + g.numel()].view_as(g))  # type: ignore[operator,index]
            at += g.numel()

    def sync_gradients(self) -> None:
        """The group's data-parallel sync, then the replicas' (both collectives: every rank)."""
        self.inner.sync_data_parallel_gradients()
        self.sync_replica_gradients()

    def shard_weights(self) -> list[tuple[LocalShard, torch.Tensor]]:
        """This rank's shards and their weight blocks (views), in plan order."""
        return self.inner.shard_weights()


class TwoDShardedSparseOptimizer(ShardedSparseOptimizer):
    """A sparse optimizer (``"sgd"``, ``"rowwise_adagrad"`` or ``"adagrad"``) on each local collection;
    :meth:`step` first syncs the gradients in the group and over the replicas (collectives:
    call it on every rank)."""

    model_type = TwoDShardedEmbeddingBagCollection
