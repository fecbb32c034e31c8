"""The worker :func:`recnotebooks.measure.calibrate_comm` runs on every rank (importable by name).

``time_collectives`` times the logged collectives of :mod:`recnotebooks.distributed.comm` (the ones the
sharded step uses) on float32 buffers of the given sizes and returns each repeat's seconds;
the caller takes, per repeat, the slowest rank (a collective ends when its last rank does).
``time_collectives_in_step`` times them as a training step issues them: each call after the
same burst of compute on every rank, each call's seconds returned.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from recnotebooks.distributed.comm import all_reduce, all_to_all
from recnotebooks.distributed.hybrid import HybridParallelDLRM
from recnotebooks.distributed.launch import RankContext
from recnotebooks.nn import DLRM, RowWiseAdagrad, make_dense_optimizer
from recnotebooks.sparse import JaggedBatch

#: The collectives :func:`time_collectives` can time.
TIMED = ("all_to_all", "all_reduce")
#: Buffers smaller than ``BATCH_BYTES`` are timed as a batch of back-to-back calls (at most
#: ``MAX_CALLS``), each repeat's time divided by the calls: the ranks leave a barrier at
#: slightly different moments, and that skew would otherwise dominate a small call.
BATCH_BYTES, MAX_CALLS = 1 << 20, 16


def time_collectives(
    ctx: RankContext, sizes: list[int], repeats: int, warmup: int, collectives: list[str]
) -> dict[str, list]:
    """``{"bytes": [buffer bytes per size], name: [[seconds of each repeat] per size], ...}``.

    Each size in ``sizes`` (bytes of each rank's float32 buffer) is rounded down to whole elements
    divisible by the world size (at least one per rank); ``"bytes"`` holds the sizes used.

    Every repeat starts right after a barrier, so the ranks start together (the barrier itself
    is not timed); small buffers repeat the call back to back (see ``BATCH_BYTES``) and report
    the time per call. ``all_to_all`` sends equal chunks of the buffer to every rank (the
    chunk for this rank stays); ``all_reduce`` sums the whole buffer.
    """
    world = ctx.world_size
    counts = [max(world, size // 4 // world * world) for size in sizes]
    out: dict[str, list] = {"bytes": [4 * n for n in counts]}
    for name in collectives:
        if name not in TIMED:
            raise ValueError(f"collectives must be among {list(TIMED)}, got {name!r}")
        per_size = []
        for n in counts:
            x = torch.ones(n, device=ctx.device)
            calls = max(1, min(MAX_CALLS, BATCH_BYTES // (4 * n)))  # small buffers: a batch of calls
            ts = []
            for i in range(warmup + repeats):
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(calls):
                    if name == "all_to_all":
                        all_to_all(x)
                    else:
                        all_reduce(x)
                if i >= warmup:
                    ts.append((time.perf_counter() - t0) / calls)
            per_size.append(ts)
        out[name] = per_size
    return out


#: The compute before each call of :func:`time_collectives_in_step`: ``BURST_GEMMS`` products of
#: two ``BURST_DIM`` x ``BURST_DIM`` float32 matrices (134 MFLOP; about 1.4 ms on one core
#: here), the order of the compute between two collectives of the sharded steps
#: ``recnb validate --distributed`` runs (1-2.5 ms, measured here).
BURST_DIM, BURST_GEMMS = 256, 4


def time_collectives_in_step(
    ctx: RankContext, sizes: list[int], calls: int, warmup: int, collectives: list[str]
) -> dict[str, list]:
    """``{"bytes": [...], name: [[seconds of each call] per size], ...}``, timed as a step issues them.

    Each call comes after the same burst of compute on every rank (:data:`BURST_GEMMS` GEMMs)
    and without a barrier, as in a training step: its time then includes what this machine adds
    to a collective between compute, the peers that finished their burst later (ranks that share
    cores are descheduled mid-burst) and the stalls of a rank woken from a blocking wait. Sizes
    are rounded as in :func:`time_collectives`; the first ``warmup`` calls are not returned.
    """
    world = ctx.world_size
    counts = [max(world, size // 4 // world * world) for size in sizes]
    gen = torch.Generator().manual_seed(ctx.rank)
    a = torch.randn(BURST_DIM, BURST_DIM, generator=gen)
    b = torch.randn(BURST_DIM, BURST_DIM, generator=gen)
    out: dict[str, list] = {"bytes": [4 * n for n in counts]}
    for name in collectives:
        if name not in TIMED:
            raise ValueError(f"collectives must be among {list(TIMED)}, got {name!r}")
        call = all_to_all if name == "all_to_all" else all_reduce
        per_size = []
        for n in counts:
            x = torch.ones(n, device=ctx.device)
            ts = []
            dist.barrier()
            for i in range(warmup + calls):
                for _ in range(BURST_GEMMS):
                    torch.mm(a, b)
                t0 = time.perf_counter()
                call(x)
                if i >= warmup:
                    ts.append(time.perf_counter() - t0)
            per_size.append(ts)
        out[name] = per_size
    return out


def _random_batch(
    config: Any, batch_size: int, gen: torch.Generator
) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """Dense features, a ``JaggedBatch`` (each bag ``round(pooling)`` ids, at least one) and labels."""
    values, lengths = [], []
    for t in config.tables:
        n = max(1, round(t.pooling_factor))
        values.append(torch.randint(0, t.num_rows, (batch_size * n,), generator=gen))
        lengths.append(torch.full((batch_size,), n, dtype=torch.int64))
    sparse = JaggedBatch(config.table_names, torch.cat(values), torch.cat(lengths), batch_size)
    dense = torch.randn(batch_size, config.num_dense, generator=gen)
    return dense, sparse, torch.randint(0, 2, (batch_size,), generator=gen).float()


def time_sharded_step(
    ctx: RankContext, config: Any, plan: Any, batch_size: int, steps: int, rounds: int, seed: int = 0
) -> dict[str, list[float]]:
    """Seconds per step of our sharded step (:class:`~recnotebooks.distributed.HybridParallelDLRM` of
    ``plan``) and of the single-process :class:`~recnotebooks.nn.DLRM`, on the same small batches
    (row-wise Adagrad tables, Adagrad MLPs), in ``rounds`` interleaved rounds of ``steps`` steps:
    ``{"single": [...], "sharded": [...], "collectives": [...]}``, one figure per round
    (``collectives``: the seconds per step the sharded step's logged collectives took, which the
    cost model charges separately). On one rank the two do the same arithmetic; the difference
    is the host work the sharded step adds."""
    gen = torch.Generator().manual_seed(seed)
    batches = [_random_batch(config, batch_size, gen) for _ in range(4)]
    loss_fn = torch.nn.BCEWithLogitsLoss()
    single = DLRM(config, seed=seed)
    single_opts = (
        RowWiseAdagrad(single.embeddings, 0.05),
        make_dense_optimizer("adagrad", single.dense_parameters(), 0.02),
    )
    sharded = HybridParallelDLRM(config, plan, ctx.rank, ctx.world_size, seed=seed, log=ctx.log)
    sharded_opts = (sharded.sparse_optimizer("rowwise_adagrad", 0.05),
                    make_dense_optimizer("adagrad", sharded.dense_parameters(), 0.02))  # fmt: skip

    def step_single(i: int) -> None:
        dense, sparse, labels = batches[i % len(batches)]
        loss_fn(single(dense, sparse), labels).backward()
        single_opts[0].step()
        single_opts[1].step()
        single_opts[1].zero_grad(set_to_none=True)

    def step_sharded(i: int) -> None:
        dense, sparse, labels = batches[i % len(batches)]
        sharded.backward(loss_fn(sharded(dense, sparse), labels))
        sharded_opts[0].step()
        sharded_opts[1].step()
        sharded_opts[1].zero_grad(set_to_none=True)

    out: dict[str, list[float]] = {"single": [], "sharded": [], "collectives": []}
    for i in range(3):  # warm-up: first calls compile kernels and allocate
        step_single(i)
        step_sharded(i)
    for _ in range(rounds):
        ctx.log.clear()
        for name, fn in (("single", step_single), ("sharded", step_sharded)):
            t0 = time.perf_counter()
            for i in range(steps):
                fn(i)
            out[name].append((time.perf_counter() - t0) / steps)
        out["collectives"].append(ctx.log.total("seconds") / steps)
    return out
