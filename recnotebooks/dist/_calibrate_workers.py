"""The worker :func:`recnotebooks.perf.calibrate_comm` runs on every rank (importable by name).

``time_collectives`` times the logged collectives of :mod:`recnotebooks.dist.comm` (the ones the
sharded step uses) on float32 buffers of the given sizes and returns each repeat's seconds;
the caller takes, per repeat, the slowest rank (a collective ends when its last rank does).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from .comm import all_reduce, all_to_all
from .launch import RankContext

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
