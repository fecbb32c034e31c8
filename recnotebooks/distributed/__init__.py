"""Distributed training over ``torch.distributed``: logged collectives and a local launcher.

* :mod:`recnotebooks.distributed.comm` — autograd-aware all-to-all (uneven splits), reduce-scatter,
  all-gather and all-reduce, sync or async, each recording calls, exact bytes and seconds into
  a per-rank :class:`CommLog` (tidy rows named as the cost model's components).
* :mod:`recnotebooks.distributed.launch` — :func:`launch` runs a module-level function on N ranks of
  this machine (gloo on CPU, NCCL on GPUs), rendezvous on 127.0.0.1, and gathers return values,
  comm logs and failures.
* :mod:`recnotebooks.distributed.sharded` — :class:`ShardedEmbeddingBagCollection` executes a
  :class:`~recnotebooks.plan.Plan` (table-, row-, column-wise, data-parallel, mixed) on the
  ranks: input all-to-all of ids, local fused lookups, output all-to-all of pooled vectors;
  :class:`ShardedSparseOptimizer` updates every shard (data-parallel replicas all-reduced);
  ``start(batch)`` issues the output all-to-all asynchronously (:class:`ShardedLookup`).
* :mod:`recnotebooks.distributed.plan_run` — :func:`run_plan` runs a plan on local ranks in one call,
  beside one process's collection (:class:`PlanRun`).
* :mod:`recnotebooks.distributed.hybrid` — :class:`HybridParallelDLRM`: sharded embeddings plus the MLPs
  in ``DistributedDataParallel``, the all-to-all overlapped with the bottom MLP.
* :mod:`recnotebooks.distributed.hstu` — :class:`HybridParallelHSTU`: HSTU's tables sharded (an event a
  bag of one id per table: the all-to-all of sequence embeddings), the HSTU stack data parallel,
  each rank a contiguous block of histories (:func:`history_blocks`).
* :mod:`recnotebooks.distributed.twod` — 2D sparse parallelism: the plan shards tables inside groups of
  ranks, groups replicate, embedding gradients are summed over replicas.
* :mod:`recnotebooks.distributed.training` — distributed training on local ranks (``train_local``) or
  under torchrun (``train_torchrun``; ``recnb train --world-size N`` / ``--distributed`` run it:
  :mod:`recnotebooks.commands.distributed`). Not imported here: it builds on ``train`` and ``data``.
"""

from __future__ import annotations

from .comm import CommHandle, CommLog, CommRecord, all_gather, all_reduce, all_to_all, reduce_scatter
from .hstu import HybridParallelHSTU, history_blocks
from .hybrid import HybridParallelDLRM, local_samples
from .launch import LaunchError, LaunchResult, RankContext, RankFailure, launch, max_world_size
from .plan_run import PlanRun, run_plan
from .sharded import LocalShard, ShardedEmbeddingBagCollection, ShardedLookup, ShardedSparseOptimizer
from .twod import TwoDShardedEmbeddingBagCollection, TwoDShardedSparseOptimizer, two_d_groups

__all__ = ["CommHandle", "CommLog", "CommRecord", "HybridParallelDLRM", "HybridParallelHSTU", "LaunchError",
           "LaunchResult", "LocalShard", "PlanRun", "RankContext", "RankFailure",
           "ShardedEmbeddingBagCollection", "ShardedLookup", "ShardedSparseOptimizer", "all_gather",
           "all_reduce", "all_to_all", "history_blocks", "launch", "local_samples", "max_world_size",
           "reduce_scatter", "run_plan",
           "TwoDShardedEmbeddingBagCollection", "TwoDShardedSparseOptimizer", "two_d_groups"]  # fmt: skip
