"""Worker functions for the hybrid-parallel DLRM tests (importable, so spawned ranks find them).

:func:`global_step_data` builds step ``step``'s global batch on every process from a seed, so
one process can compute the single-process reference of what the ranks compute together.
"""

from __future__ import annotations

from typing import Any

import torch
from _shard_workers import global_batch

from recnotebooks.config import DLRMConfig
from recnotebooks.distributed.comm import CommLog
from recnotebooks.distributed.hybrid import HybridParallelDLRM, local_samples
from recnotebooks.distributed.launch import RankContext
from recnotebooks.plan import Plan
from recnotebooks.sparse import JaggedBatch


def global_step_data(
    config: DLRMConfig, batch_size: int, seed: int, step: int
) -> tuple[torch.Tensor, JaggedBatch, torch.Tensor]:
    """(dense, sparse, labels) of step ``step``'s global batch of ``batch_size`` samples."""
    sparse = global_batch(config.tables, batch_size, seed, step)
    g = torch.Generator().manual_seed(10_000 * seed + step + 555)
    dense = torch.randn(batch_size, config.num_dense, generator=g)
    labels = (torch.rand(batch_size, generator=g) < 0.5).float()
    return dense, sparse, labels


def train_hybrid(ctx: RankContext, config: DLRMConfig, plan: Plan, batch_size: int, steps: int, seed: int,
                 dense_lr: float, sparse_lr: float, overlap: bool = True,
                 sparse_optimizer: str = "sgd") -> dict[str, Any]:  # fmt: skip
    """``steps`` SGD steps of :class:`HybridParallelDLRM` on this rank's share of each global batch.

    Returns the global-mean loss of each step (before its update), the final dense parameters
    and shard weights (by plan index) and the comm log rows.
    """
    model = HybridParallelDLRM(config, plan, ctx.rank, ctx.world_size, seed=seed, log=CommLog(ctx.rank),
                               overlap=overlap)  # fmt: skip
    dense_opt = torch.optim.SGD(model.dense_parameters(), lr=dense_lr)
    sparse_opt = model.sparse_optimizer(sparse_optimizer, sparse_lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    b = batch_size // ctx.world_size
    lo, hi = ctx.rank * b, (ctx.rank + 1) * b
    losses = []
    for step in range(steps):
        dense, sparse, labels = global_step_data(config, batch_size, seed, step)
        loss = loss_fn(model(dense[lo:hi], local_samples(sparse, lo, hi)), labels[lo:hi])
        model.backward(loss)
        sparse_opt.step(count_rows=False)
        dense_opt.step()
        dense_opt.zero_grad(set_to_none=True)
        total = loss.detach().clone()
        torch.distributed.all_reduce(total)
        losses.append(float(total) / ctx.world_size)
    return {
        "losses": losses,
        "dense": [p.detach().clone() for p in model.dense_parameters()],
        "weights": {s.index: w.detach().clone() for s, w in model.embeddings.shard_weights()},
        "log": model.log.rows(),
    }


def train_hybrid_cases(ctx: RankContext, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`train_hybrid` for each case (keyword arguments), in one launch."""
    return [train_hybrid(ctx, **case) for case in cases]


# ----- operator counts of our step (benchmarks/our_step_ops.py, tests/test_op_count.py) ------------
#: Operator namespaces counted; a "top-level" operator has no counted operator among its
#: profiler ancestors (benchmarks/sharded_step_ops.py counts TorchRec's step the same way).
_OP_PREFIXES = ("aten::", "c10d::", "_c10d_functional::")


def _top_level_ops(prof: Any) -> list[str]:
    """Names of the top-level operators a ``torch.profiler`` run recorded."""
    out = []
    for e in prof.events():
        if not e.name.startswith(_OP_PREFIXES):
            continue
        p = e.cpu_parent
        while p is not None and not p.name.startswith(_OP_PREFIXES):
            p = p.cpu_parent
        if p is None:
            out.append(e.name)
    return out


def _profile_steps(step: Any, warmup: int = 2, profiled: int = 2) -> dict[str, float]:
    """Top-level operators per call of ``step`` (mean over ``profiled`` calls after ``warmup``)."""
    from torch.profiler import ProfilerActivity, profile

    for i in range(warmup):
        step(i)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(warmup, warmup + profiled):
            step(i)
    names = _top_level_ops(prof)
    return {"ops": len(names) / profiled, "host_syncs": names.count("aten::item") / profiled}


def single_step_ops(
    config: DLRMConfig, batch_size: int, seed: int = 0, dense_optimizer: str = "adagrad"
) -> dict[str, float]:
    """Top-level operators of one single-process training step of ``recnotebooks.nn.DLRM`` (row-wise
    Adagrad on the tables, ``torch.optim``'s ``dense_optimizer`` on the MLPs: Adagrad as
    :func:`count_step_ops` trains; batches of :func:`global_step_data`)."""
    from recnotebooks.nn.dlrm import DLRM
    from recnotebooks.nn.optim import make_sparse_optimizer

    model = DLRM(config, seed=seed)
    sparse_opt = make_sparse_optimizer("rowwise_adagrad", model.embeddings, 0.05)
    kind = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad, "adam": torch.optim.Adam}[dense_optimizer]
    dense_opt = kind(list(model.dense_parameters()), lr=0.02)
    batches = [global_step_data(config, batch_size, seed, i) for i in range(4)]
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def step(i: int) -> None:
        dense, sparse, labels = batches[i]
        loss_fn(model(dense, sparse), labels).backward()
        sparse_opt.step()
        dense_opt.step()
        dense_opt.zero_grad(set_to_none=True)

    return _profile_steps(step)


def _hybrid_step_ops(ctx: RankContext, config: DLRMConfig, plan: Plan, batch_size: int,
                     seed: int) -> dict[str, float]:  # fmt: skip
    """:func:`_profile_steps` of one :class:`HybridParallelDLRM` training step on this rank."""
    world, rank = ctx.world_size, ctx.rank
    model = HybridParallelDLRM(config, plan, rank, world, seed=seed, log=CommLog(rank))
    sparse_opt = model.sparse_optimizer("rowwise_adagrad", 0.05)
    dense_opt = torch.optim.Adagrad(list(model.dense_parameters()), lr=0.02)
    b = batch_size // world
    lo, hi = rank * b, (rank + 1) * b
    batches = [global_step_data(config, batch_size, seed, i) for i in range(4)]
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def step(i: int) -> None:
        dense, sparse, labels = batches[i]
        model.backward(loss_fn(model(dense[lo:hi], local_samples(sparse, lo, hi)), labels[lo:hi]))
        sparse_opt.step()
        dense_opt.step()
        dense_opt.zero_grad(set_to_none=True)

    torch.distributed.barrier()
    return _profile_steps(step)


def count_step_ops(ctx: RankContext, cases: list[dict[str, Any]], seed: int = 0) -> list[dict[str, float]]:
    """Worker (every rank): per case (``{"config", "plan", "batch_size"}``, global batch) the
    top-level operators (``ops``) and ``aten::item`` host syncs (``host_syncs``) of one training
    step of :class:`HybridParallelDLRM` on this rank, trained as
    :func:`recnotebooks.distributed.training.run_rank` does (row-wise Adagrad, dense Adagrad)."""
    return [_hybrid_step_ops(ctx, c["config"], c["plan"], c["batch_size"], seed) for c in cases]
