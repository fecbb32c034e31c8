"""Worker functions for :func:`recnotebooks.distributed.launch` (importable, so spawned ranks find them).

Used by the tests and as examples: each takes the :class:`~recnotebooks.distributed.launch.RankContext`
first. ``inputs`` builds any rank's inputs from a shared seed, so a single process can compute
the reference result of a collective from every rank's inputs.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import torch

from recnotebooks.distributed.comm import CommLog, all_gather, all_reduce, all_to_all, reduce_scatter
from recnotebooks.distributed.launch import RankContext

#: Columns of every tensor the collectives exercise moves.
DIM = 3
#: Rows of each rank's chunk in reduce-scatter / all-gather; elements of the all-reduce buffer
#: (not divisible by 2 or 4, so the all-reduce byte formula meets uneven chunks).
CHUNK, REDUCE_NUMEL = 2, 7


def echo(ctx: RankContext, value: Any = None) -> dict[str, Any]:
    """Who this rank is, and ``value`` back (checks the launcher's plumbing)."""
    return {"rank": ctx.rank, "world_size": ctx.world_size, "value": value, "pid": os.getpid(),
            "env_rank": os.environ.get("RANK"), "threads": torch.get_num_threads(),
            "env_threads": os.environ.get("RECNB_THREADS")}  # fmt: skip


def unpicklable(ctx: RankContext) -> object:
    """A return value that cannot be pickled: the launcher reports it as this rank's failure."""
    return lambda: ctx.rank


def fail_on(ctx: RankContext, rank: int, how: str) -> int:
    """Every rank all-reduces in a loop; rank ``rank`` fails after the first step, as ``how`` says:
    ``"raise"`` (a ValueError), ``"exit"`` (``os._exit(3)``), ``"kill"`` (SIGKILL) or ``"hang"``."""
    x = torch.ones(4)
    for step in range(1000):
        if ctx.rank == rank and step == 1:
            if how == "raise":
                raise ValueError(f"rank {rank} fails on purpose")
            if how == "exit":
                os._exit(3)
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(3600)
        all_reduce(x, log=ctx.log)
        time.sleep(0.01)
    return ctx.rank


def inputs(seed: int, rank: int, splits: list[list[int]]) -> dict[str, torch.Tensor]:
    """Rank ``rank``'s inputs and loss weights for :func:`exercise_collectives`, from ``seed``.

    ``splits[i][j]`` is the rows rank ``i`` sends rank ``j`` in the all-to-all.
    """
    world = len(splits)
    g = torch.Generator().manual_seed(1000 * seed + rank)
    received = sum(splits[j][rank] for j in range(world))

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return {"a2a_x": randn(sum(splits[rank]), DIM), "a2a_w": randn(received, DIM),
            "rs_x": randn(world * CHUNK, DIM), "rs_w": randn(CHUNK, DIM),
            "ag_x": randn(CHUNK, DIM), "ag_w": randn(world * CHUNK, DIM),
            "ar_x": randn(REDUCE_NUMEL), "ar_w": randn(REDUCE_NUMEL)}  # fmt: skip


def _forward_backward(call: Any, x: torch.Tensor, w: torch.Tensor, is_async: bool) -> tuple:
    x = x.clone().requires_grad_(True)
    y = call(x, True).wait() if is_async else call(x, False)
    (y * w).sum().backward()
    return y.detach(), x.grad


def exercise_collectives(ctx: RankContext, seed: int, splits: list[list[int]]) -> dict[str, Any]:
    """Each collective forward and backward, sync and async, on this rank's :func:`inputs`.

    Returns ``{name: (output, input gradient, log rows)}`` for names like ``"all_to_all/sync"``,
    plus ``"errors"``: the messages of bad calls (splits that do not sum, and so on).
    """
    rank, world = ctx.rank, ctx.world_size
    data = inputs(seed, rank, splits)
    outs = [splits[j][rank] for j in range(world)]
    calls = {
        "all_to_all": (lambda x, a, log: all_to_all(x, splits[rank], outs, log=log, async_op=a), "a2a"),
        "reduce_scatter": (lambda x, a, log: reduce_scatter(x, log=log, async_op=a), "rs"),
        "all_gather": (lambda x, a, log: all_gather(x, log=log, async_op=a, component="all_reduce"), "ag"),
        "all_reduce": (lambda x, a, log: all_reduce(x, log=log, async_op=a), "ar"),
        "all_reduce_mean": (lambda x, a, log: all_reduce(x, "mean", log=log, async_op=a), "ar"),
    }
    result: dict[str, Any] = {}
    for name, (call, key) in calls.items():
        for mode in ("sync", "async"):
            log = CommLog(rank)
            y, grad = _forward_backward(
                lambda x, a, call=call, log=log: call(x, a, log),
                data[f"{key}_x"],
                data[f"{key}_w"],
                mode == "async",
            )
            result[f"{name}/{mode}"] = (y, grad, log.rows())
    errors = []
    bad = [
        lambda: all_to_all(data["a2a_x"], [sum(splits[rank]) + 1] + [0] * (world - 1), outs),  # does not sum
        lambda: all_to_all(data["a2a_x"], splits[rank][:-1], outs),  # one entry short
        lambda: all_to_all(data["a2a_x"], splits[rank], [o + 1 for o in outs]),  # own chunk differs
        lambda: reduce_scatter(torch.ones(world * CHUNK + 1)),
        lambda: all_reduce(data["ar_x"], "max"),
        lambda: all_to_all(data["a2a_x"], [-1] + splits[rank][1:], outs),
    ]
    for call in bad:
        try:
            call()
        except (ValueError, TypeError) as e:
            errors.append(f"{type(e).__name__}: {e}")
        else:
            errors.append("no error")
    result["errors"] = errors
    return result
