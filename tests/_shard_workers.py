"""Worker functions for the sharded-collection tests (importable, so spawned ranks find them).

:func:`global_batch` and :func:`loss_weights` build the same data on every process from a seed,
so one process can compute the single-process reference of what the ranks compute together.
"""

from __future__ import annotations

from typing import Any

import torch

from recnotebooks.config import TableConfig
from recnotebooks.distributed.comm import CommLog
from recnotebooks.distributed.launch import RankContext
from recnotebooks.distributed.sharded import ShardedEmbeddingBagCollection, ShardedSparseOptimizer
from recnotebooks.distributed.twod import TwoDShardedEmbeddingBagCollection, TwoDShardedSparseOptimizer
from recnotebooks.plan import Plan
from recnotebooks.sparse import JaggedBatch


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
    profile_steps: int = 0,
) -> dict[str, Any]:
    """``steps`` steps on this rank's share of each global batch (``batch_size`` samples in all).

    Returns the per-step outputs (forward, before the update), the final shard weights and
    Adagrad accumulators (row-wise or exact) by plan index, the comm log rows and what each cache did.
    ``profile_steps``: the global batches a static cache's hot set is counted over.
    """
    log = CommLog(ctx.rank)
    profile = [global_batch(tables, batch_size, seed, step) for step in range(profile_steps)] or None
    model = ShardedEmbeddingBagCollection(
        tables, dim, plan, ctx.rank, ctx.world_size, pooling=pooling, seed=seed, log=log, profile=profile
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
        "momentum": {s.index: m for s, m in opt.shard_momentum()},
        "log": log.rows(),
        "collections": len(model.collections),
        "cache": model.cache_stats(),
    }


def train_cases(ctx: RankContext, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`train_sharded` for each case (keyword arguments), in one launch."""
    return [train_sharded(ctx, **case) for case in cases]


# ----- 2D sparse parallelism and byte counts (tests/test_dist_twod.py, tests/test_dist_bytes.py) -----
def fixed_batch(
    tables: tuple[TableConfig, ...], batch_size: int, pooling: int, seed: int, step: int
) -> JaggedBatch:
    """Every bag exactly ``pooling`` ids, the ``k``-th drawn from block ``k % pooling`` of the
    table's rows cut into ``pooling`` equal blocks: with ``pooling`` a multiple of the row-wise
    shards, each rank's ids fall evenly into equal row-wise shards (the model's expected count)."""
    g = torch.Generator().manual_seed(10_000 * seed + step + 333)
    features = {}
    for t in tables:
        block = t.num_rows // pooling
        features[t.name] = [
            [k * block + int(torch.randint(0, block, (1,), generator=g)) for k in range(pooling)]
            for _ in range(batch_size)
        ]
    return JaggedBatch.from_lists(features)


def _step_batch(
    tables: tuple[TableConfig, ...], batch_size: int, seed: int, step: int, pooling: int | None
) -> JaggedBatch:
    if pooling is None:
        return global_batch(tables, batch_size, seed, step)
    return fixed_batch(tables, batch_size, pooling, seed, step)


def _model(
    ctx: RankContext, tables: tuple[TableConfig, ...], dim: int, plan: Plan, group_size: int | None,
    pooling: str, seed: int, log: CommLog,
) -> tuple[Any, Any]:  # fmt: skip
    """The plain sharded collection (``group_size`` None) or the 2D one, and its optimizer class."""
    if group_size is None:
        model = ShardedEmbeddingBagCollection(
            tables, dim, plan, ctx.rank, ctx.world_size, pooling=pooling, seed=seed, log=log
        )
        return model, ShardedSparseOptimizer
    model = TwoDShardedEmbeddingBagCollection(
        tables, dim, plan, ctx.rank, ctx.world_size, group_size, pooling=pooling, seed=seed, log=log
    )
    return model, TwoDShardedSparseOptimizer


def train_twod(
    ctx: RankContext,
    tables: tuple[TableConfig, ...],
    dim: int,
    plan: Plan,
    group_size: int,
    batch_size: int,
    steps: int,
    seed: int,
    lr: float,
    pooling: str = "sum",
    optimizer: str = "sgd",
) -> dict[str, Any]:
    """:func:`train_sharded` under 2D sparse parallelism (groups of ``group_size`` ranks)."""
    log = CommLog(ctx.rank)
    model, opt_class = _model(ctx, tables, dim, plan, group_size, pooling, seed, log)
    opt = opt_class(model, optimizer, lr)
    b = batch_size // ctx.world_size
    lo, hi = ctx.rank * b, (ctx.rank + 1) * b
    outputs = []
    for step in range(steps):
        batch = samples(global_batch(tables, batch_size, seed, step), lo, hi)
        out = model(batch)
        (out * loss_weights(batch_size, len(tables), dim, seed, step)[lo:hi]).sum().backward()
        outputs.append(out.detach())
        opt.step()
    return {"outputs": outputs, "weights": {s.index: w.clone() for s, w in model.shard_weights()},
            "log": log.rows()}  # fmt: skip


def twod_cases(ctx: RankContext, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`train_twod` for each case (keyword arguments), in one launch."""
    return [train_twod(ctx, **case) for case in cases]


def measure_bytes(
    ctx: RankContext,
    tables: tuple[TableConfig, ...],
    dim: int,
    plan: Plan,
    batch_size: int,
    steps: int,
    seed: int,
    group_size: int | None = None,
    fixed_pooling: int | None = None,
) -> list[dict[str, Any]]:
    """The comm log rows of ``steps`` training steps (forward, backward, optimizer step; SGD)
    on this rank's share of each global batch (:func:`fixed_batch` with ``fixed_pooling``,
    else :func:`global_batch`); ``group_size``: 2D sparse parallelism."""
    log = CommLog(ctx.rank)
    model, opt_class = _model(ctx, tables, dim, plan, group_size, "sum", seed, log)
    opt = opt_class(model, "sgd", 0.1)
    b = batch_size // ctx.world_size
    lo, hi = ctx.rank * b, (ctx.rank + 1) * b
    for step in range(steps):
        batch = samples(_step_batch(tables, batch_size, seed, step, fixed_pooling), lo, hi)
        model(batch).sum().backward()
        opt.step()
    return log.rows()


def bytes_cases(ctx: RankContext, cases: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """:func:`measure_bytes` for each case (keyword arguments), in one launch."""
    return [measure_bytes(ctx, **case) for case in cases]
