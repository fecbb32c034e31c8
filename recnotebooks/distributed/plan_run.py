"""A plan run on local ranks in one call, beside one process's collection (**measured**).

:func:`run_plan` starts ``plan.world_size`` processes on this machine
(:func:`~recnotebooks.distributed.launch`, gloo on 127.0.0.1), sends one batch of random bags,
split evenly over the ranks, forward and backward through each rank's
:class:`~recnotebooks.distributed.sharded.ShardedEmbeddingBagCollection` (:func:`run_plan_rank`),
and returns a :class:`PlanRun`: each rank's output shape, the bytes its collectives moved (its
comm log) and whether the outputs equal one process's
:class:`~recnotebooks.nn.EmbeddingBagCollection` on the whole batch. It is a teaching run, sized
by :data:`MAX_RUN_PLAN_BATCH` and :data:`MAX_RUN_PLAN_ELEMENTS`; the plan, its placements
included, is checked before any process starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..checks import check_choice, check_int, check_type, show
from ..config import POOLINGS, TableConfig
from ..nn.embedding import EmbeddingBagCollection
from ..plan import Plan
from ..sparse import JaggedBatch
from .launch import launch
from .sharded import ShardedEmbeddingBagCollection, check_placements, plan_config

__all__ = ["MAX_RUN_PLAN_BATCH", "MAX_RUN_PLAN_ELEMENTS", "PlanRun", "run_plan", "run_plan_rank"]

#: Most samples of one :func:`run_plan` batch: a teaching run, not a benchmark.
MAX_RUN_PLAN_BATCH = 4096
#: Most weights (rows x embedding_dim over all tables) of a :func:`run_plan` run: 2^24, 64 MiB in
#: float32, which every rank and the single-process reference each draw.
MAX_RUN_PLAN_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class PlanRun:
    """What :func:`run_plan` saw (**measured** on this machine's local ranks).

    ``shapes``: each rank's pooled output, ``(its samples, tables, embedding_dim)``. ``comm``: the
    ranks' comm-log rows (rank, component, collective, direction, calls, bytes sent to and
    received from other ranks, seconds). ``max_abs_diff``: the largest difference between the
    ranks' outputs, put back in sample order, and one process's ``EmbeddingBagCollection`` on the
    whole batch; ``matches`` whether it is within ``atol``.
    """

    plan: Plan
    shapes: tuple[tuple[int, ...], ...]
    comm: tuple[dict[str, Any], ...]
    max_abs_diff: float
    atol: float
    seconds: float

    @property
    def matches(self) -> bool:
        """Whether the sharded outputs equal the single-process collection's (within ``atol``)."""
        return self.max_abs_diff <= self.atol

    def bytes_by_collective(self) -> list[dict[str, Any]]:
        """Bytes each rank sent to and received from the others, per collective and direction."""
        out: dict[tuple[int, str, str], dict[str, Any]] = {}
        for r in self.comm:
            key = (r["rank"], r["collective"], r["direction"])
            zero = {"calls": 0, "bytes_sent": 0, "bytes_received": 0, "source": "measured"}
            row = out.setdefault(key, {"rank": key[0], "collective": key[1], "direction": key[2], **zero})
            for k in ("calls", "bytes_sent", "bytes_received"):
                row[k] += r[k]
        return [out[k] for k in sorted(out)]


def _random_bags(tables: Sequence[TableConfig], batch_size: int, seed: int) -> dict[str, list[list[int]]]:
    """Bags of 0 to 3 random ids per sample and table (empty bags included), from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for t in tables:
        sizes = torch.randint(0, 4, (batch_size,), generator=g).tolist()
        out[t.name] = [torch.randint(0, t.num_rows, (n,), generator=g).tolist() for n in sizes]
    return out


def run_plan_rank(
    ctx: Any,
    tables: tuple[TableConfig, ...],
    embedding_dim: int,
    plan: Plan,
    bags: dict[str, list[list[int]]],
    seed: int,
    pooling: str,
) -> torch.Tensor:
    """One rank of :func:`run_plan`: its share of the samples through the sharded collection,
    forward and backward (the loss is the sum of the outputs), then the data-parallel gradient
    sync; returns its pooled output."""
    whole = JaggedBatch.from_lists(bags)  # the batch itself is a static cache's profile
    model = ShardedEmbeddingBagCollection(
        tables,
        embedding_dim,
        plan,
        ctx.rank,
        ctx.world_size,
        pooling=pooling,
        seed=seed,
        log=ctx.log,
        profile=[whole],
    )
    b = len(next(iter(bags.values()))) // ctx.world_size
    lo = ctx.rank * b
    out = model(JaggedBatch.from_lists({k: v[lo : lo + b] for k, v in bags.items()}))
    out.sum().backward()
    model.sync_data_parallel_gradients()
    return out.detach()


def run_plan(
    tables: Sequence[TableConfig],
    embedding_dim: int,
    plan: Plan,
    batch_size: int = 8,
    seed: int = 0,
    pooling: str = "sum",
    timeout_s: float = 120.0,
) -> PlanRun:
    """Run ``plan`` on ``plan.world_size`` local ranks (:func:`~recnotebooks.distributed.launch`, gloo on
    127.0.0.1): one batch of ``batch_size`` random bags, split evenly over the ranks, forward and
    backward through :class:`ShardedEmbeddingBagCollection`; returns what each rank's output
    looked like, what its collectives moved (its :class:`~recnotebooks.distributed.CommLog`) and whether
    the outputs equal one process's :class:`~recnotebooks.nn.EmbeddingBagCollection` on the
    whole batch. **Measured.** The plan is validated before any process starts.

    >>> from recnotebooks.plan import table_wise
    >>> run = run_plan([TableConfig("a", 10), TableConfig("b", 6)], 4, table_wise(["a", "b"], 2))
    >>> run.shapes, run.matches
    (((4, 2, 4), (4, 2, 4)), True)
    """
    tables = tuple(tables) if isinstance(tables, Sequence) else tables
    if not isinstance(tables, tuple) or not tables or any(not isinstance(t, TableConfig) for t in tables):
        raise TypeError(f"tables must be a non-empty sequence of TableConfig, got {show(tables)}")
    dim = check_int("embedding_dim", embedding_dim, lo=1)
    check_type("plan", plan, Plan, "a Plan")
    pooling = check_choice("pooling", pooling, POOLINGS)
    seed = check_int("seed", seed)
    world = plan.world_size
    batch_size = check_int("batch_size", batch_size, lo=world, hi=MAX_RUN_PLAN_BATCH)
    if batch_size % world:
        raise ValueError(f"batch_size must be a multiple of the plan's world_size={world}, got {batch_size}")
    plan.validate(plan_config(tables, dim, pooling))
    check_placements(plan, plan.geometry(plan_config(tables, dim, pooling)))  # "host", "remote": refused here
    numel = sum(t.num_rows for t in tables) * dim
    if numel > MAX_RUN_PLAN_ELEMENTS:
        raise ValueError(
            f"tables hold {numel:,} weights ({sum(t.num_rows for t in tables):,} rows x {dim}), more than a "
            f"teaching run's {MAX_RUN_PLAN_ELEMENTS:,}: every rank and the reference draw them all (use "
            "smaller tables, e.g. config.with_max_rows(...))"
        )
    bags = _random_bags(tables, batch_size, seed)
    res = launch(run_plan_rank, world, tables, dim, plan, bags, seed, pooling, timeout_s=timeout_s)
    got = torch.cat(res.values)
    with torch.no_grad():
        ref = EmbeddingBagCollection(tables, dim, pooling=pooling, seed=seed)(JaggedBatch.from_lists(bags))
    diff = float((got - ref).abs().max()) if got.numel() else 0.0
    shapes = tuple(tuple(v.shape) for v in res.values)
    return PlanRun(plan, shapes, tuple(res.rows()), diff, 1e-5, res.seconds)
