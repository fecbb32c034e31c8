"""Capture the errors a rank sees when its peer is lost, on real gloo ranks: rank 1 dies (SIGKILL)
before or during a collective, or hangs past a group's timeout, and rank 0 returns the text of
what it caught. ``python tests/_peer_errors.py [SCENARIO...]`` prints them as JSON; tests/test_dist_peers.py
holds the texts captured so (torch 2.13.0+cpu, gloo); its real runs (a rank or a node killed
mid-run) check today's texts end to end."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from recnotebooks.distributed.launch import LaunchError, RankContext, launch  # noqa: E402

SCENARIOS = ("all_reduce_dead", "all_reduce_dies", "all_to_all_dies", "send_dead", "ddp_backward_dies",
             "barrier_dies", "recv_timeout")  # fmt: skip


def _chain(e: BaseException) -> list[str]:
    out, seen = [], set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__ or cur.__context__
    return out


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _ddp_steps(n: int) -> None:
    """``n`` forward and backward passes of a DDP model (its gradients all-reduced in backward)."""
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64))
    for _ in range(n):
        model(torch.ones(8, 64)).sum().backward()


def _op(ctx: RankContext, scenario: str) -> None:
    """Rank 0's side of ``scenario``: the collective that fails."""
    x = torch.ones(1 << 16)
    if scenario in ("all_reduce_dead", "all_reduce_dies"):
        dist.all_reduce(x)
    elif scenario == "all_to_all_dies":
        dist.all_to_all_single(torch.empty_like(x), x)
    elif scenario == "send_dead":
        for _ in range(50):
            dist.send(torch.ones(1 << 20), 1)
    elif scenario == "ddp_backward_dies":
        _ddp_steps(1_000_000)
    elif scenario == "barrier_dies":
        dist.barrier()
    elif scenario == "recv_timeout":
        group = dist.new_group([0, 1], timeout=timedelta(seconds=2))
        dist.all_reduce(x, group=group)


def capture(ctx: RankContext, scenario: str) -> list[str] | None:
    """Rank 1 dies (or hangs) as ``scenario`` says; rank 0 returns the chain of what it caught."""
    if ctx.rank == 1:
        if scenario == "recv_timeout":  # alive, but never joins rank 0's all-reduce
            dist.new_group([0, 1], timeout=timedelta(seconds=2))
            time.sleep(5)
            return None
        if scenario == "ddp_backward_dies":
            _ddp_steps(200)  # then dies between two backward passes of rank 0's
        if scenario in ("all_reduce_dies", "all_to_all_dies", "barrier_dies"):
            time.sleep(0.5)  # rank 0 is waiting in the collective (or in its loop) by now
        _die()
    try:
        _op(ctx, scenario)
    except Exception as e:  # noqa: BLE001 - what the survivor sees is the point
        return _chain(e)
    return None


def main() -> None:
    found = {}
    for scenario in sys.argv[1:] or SCENARIOS:
        try:
            result = launch(capture, 2, scenario, timeout_s=60)
            found[scenario] = result.values[0]
        except LaunchError as e:
            found[scenario] = e.result.values[0]
    print(json.dumps({"torch": torch.__version__, "errors": found}, indent=1))


if __name__ == "__main__":
    main()
