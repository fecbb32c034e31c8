"""Worker functions for the sharded-collection tests (importable, so spawned ranks find them).

:func:`global_batch` and :func:`loss_weights` build the same data on every process from a seed,
so one process can compute the single-process reference of what the ranks compute together.
"""

from __future__ import annotations

from typing import Any

import torch

from ..config import TableConfig
from ..plan import Plan
from ..sparse import JaggedBatch
from .comm import CommLog
from .launch import RankContext
from .sharded import ShardedEmbeddingBagCollection, ShardedSparseOptimizer


def global_batch(tables: tuple[TableConfig, ...], batch_size: int, seed: int, step: int) -> JaggedBatch:
    """Step ``step``'s global batch: bags of 0..3 ids per sample and table (empty bags included)."""
    g = torch.Generator().manual_seed(10_000 * seed + step)
    features = {}
    for t in tables:
        sizes = torch.randint(0, 4, (batch_size,), generator=g).tolist()
        features[t.name] = [torch.randint(0, t.num_rows, (n,), generator=g).tolist() for n in sizes]
    return JaggedBatch.from_lists(features)


def loss_weights(batch_size: int, num_tables: int, dim: int, seed: int, step: int) -> torch.Tensor:
    """The loss of step ``step`` is ``(pooled * loss_weights).sum()`` over the global batch."""
    g = torch.Generator().manual_seed(10_000 * seed + step + 777)
    return torch.randn(batch_size, num_tables, dim, generator=g)


def samples(batch: JaggedBatch, lo: int, hi: int) -> JaggedBatch:
    """Samples ``lo .. hi - 1`` of ``batch``."""
    lists = batch.to_lists()
    return JaggedBatch.from_lists({k: v[lo:hi] for k, v in lists.items()})


def train_sharded(
    ctx: RankContext,
    tables: tuple[TableConfig, ...],
    dim: int,
    plan: Plan,
    batch_size: int,
    steps: int,
    seed: int,
    lr: float,
    pooling: str = "sum",
    optimizer: str = "sgd",
) -> dict[str, Any]:
    """``steps`` steps on this rank's share of each global batch (``batch_size`` samples in all).

    Returns the per-step outputs (forward, before the update), the final shard weights by plan
    index, and the comm log rows.
    """
    log = CommLog(ctx.rank)
    model = ShardedEmbeddingBagCollection(
        tables, dim, plan, ctx.rank, ctx.world_size, pooling=pooling, seed=seed, log=log
    )
    opt = ShardedSparseOptimizer(model, optimizer, lr)
    b = batch_size // ctx.world_size
    lo, hi = ctx.rank * b, (ctx.rank + 1) * b
    outputs = []
    for step in range(steps):
        batch = samples(global_batch(tables, batch_size, seed, step), lo, hi)
        out = model(batch)
        (out * loss_weights(batch_size, len(tables), dim, seed, step)[lo:hi]).sum().backward()
        outputs.append(out.detach())
        opt.step()
    with torch.no_grad():
        plain = model(samples(global_batch(tables, batch_size, seed, steps), lo, hi))
    return {
        "outputs": outputs,
        "after": plain,
        "weights": {s.index: w.clone() for s, w in model.shard_weights()},
        "log": log.rows(),
        "collections": len(model.collections),
    }


def train_cases(ctx: RankContext, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`train_sharded` for each case (keyword arguments), in one launch."""
    return [train_sharded(ctx, **case) for case in cases]
