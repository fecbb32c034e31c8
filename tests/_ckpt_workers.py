"""Worker functions for the sharded-checkpoint tests (importable, so spawned ranks find them)."""

from __future__ import annotations

from typing import Any

from recnotebooks.config import Workload
from recnotebooks.distributed.launch import RankContext
from recnotebooks.distributed.training import RankResult, run_rank
from recnotebooks.plan import round_robin

#: One run of :func:`runs_in_turn`: its name, workload, sharding, steps and :func:`run_rank`'s
#: options (``{tmp}`` in a path: the test's folder).
Run = tuple[str, Workload, str, int, dict[str, Any]]


def runs_in_turn(ctx: RankContext, runs: list[Run], tmp: str, seed: int) -> dict[str, RankResult]:
    """``runs`` one after another on this rank, in one launch (the comm log cleared between them),
    each a :func:`~recnotebooks.distributed.training.run_rank` from ``seed``; their results by name."""
    out = {}
    for name, workload, sharding, steps, options in runs:
        ctx.log.clear()
        plan = round_robin(workload.config, ctx.world_size, sharding)
        kwargs = {k: v.format(tmp=tmp) if isinstance(v, str) else v for k, v in options.items()}
        out[name] = run_rank(ctx, workload, plan, steps, seed=seed, **kwargs)
    return out
