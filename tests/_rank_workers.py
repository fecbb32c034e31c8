"""Worker functions for tests/test_rank_result.py (importable, so spawned ranks find them)."""

from __future__ import annotations

from typing import Any

from recnotebooks.config import DLRMConfig, Workload
from recnotebooks.distributed.launch import RankContext
from recnotebooks.distributed.training import RankResult, run_rank
from recnotebooks.plan import Plan


def both_forms(
    ctx: RankContext,
    config: DLRMConfig,
    plan: Plan,
    steps: int,
    batch_size: int,
    seed: int,
    old: dict[str, Any],
) -> list[RankResult]:
    """:func:`run_rank` on this rank three times, the comm log cleared between: with a
    :class:`Workload` built from ``old`` (the old keywords), with the old keywords themselves, and
    with the old form's defaults (so a setting that is not passed on shows)."""
    workload = Workload(
        config,
        batch_size,
        zipf_exponent=old["zipf"],
        sparse_optimizer=old["sparse_optimizer"],
        dense_optimizer=old["dense_optimizer"],
    )
    out = []
    for call in (
        lambda: run_rank(ctx, workload, plan, steps, seed=seed, sparse_lr=old["sparse_lr"]),
        lambda: run_rank(ctx, config, plan, steps, batch_size, seed, **old),
        lambda: run_rank(ctx, config, plan, steps, batch_size, seed),
    ):
        ctx.log.clear()
        out.append(call())
    return out
