"""Checkpoints in a distributed DLRM run: what ``recnb train --checkpoint DIR`` saves and ``--resume``
loads, and the checks before any process starts.

With a checkpoint folder every rank saves its shards, both optimizers' states, the dense replica,
the step (the data position: global batch ``i`` is step ``i``'s) and the losses so far into a
sharded checkpoint (:func:`save`, through :func:`~recnotebooks.distributed.checkpoint.save_sharded`).
A run resumes (:func:`load`) from one saved on any number of ranks under any plan, or from a
single-process checkpoint file, once its model, optimizers and data position fit this run
(:func:`check_resume`); training then continues from its step. The format, resharding and the
all-or-nothing load are :mod:`recnotebooks.distributed.checkpoint`'s.

The data position is the caller's: ``data_at(step)`` is the training stream's state after
``step`` steps (:func:`recnotebooks.distributed.rank_data.data_state`), which a checkpoint saves
and a resumed run must match.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..checkpoint import read_checkpoint
from ..checks import check_int, show
from ..config import Workload
from ..plan import Plan
from ..train import config_to_dict
from .checkpoint import (
    check_manifest,
    check_target,
    dense_info,
    load_global,
    load_sharded,
    read_manifest,
    save_sharded,
    single_to_global,
    verify_files,
)

__all__ = ["check_before_start", "check_resume", "expected", "load", "resume_info", "save"]

#: The training stream's state after a step (:func:`recnotebooks.distributed.rank_data.data_state`).
DataAt = Callable[[int], dict[str, Any]]


def expected(workload: Workload) -> dict[str, Any]:
    """What a checkpoint must have been saved with to resume this run (its model and optimizers)."""
    return {"config": config_to_dict(workload.config), "sparse_optimizer": workload.sparse_optimizer,
            "dense_optimizer": workload.dense_optimizer}  # fmt: skip


def check_before_start(
    workload: Workload,
    plan: Plan,
    checkpoint: str | None,
    resume: str | None,
    steps: int,
    data_at: DataAt,
    verify: bool = False,
) -> None:
    """Before any process starts: the ``checkpoint`` folder writable (a new or empty folder, or an
    earlier checkpoint), the checkpoint to ``resume`` from there and fitting this run of ``steps``
    steps (with ``verify``, every file's checksum too: local ranks share this machine's disk), and a
    plan whose shards a checkpoint can hold (``"hbm"``). ``ValueError`` naming the parameter, its
    value and what is allowed."""
    if checkpoint is None and resume is None:
        return
    cached = [s.table for s in plan.shards if s.placement != "hbm"]
    if cached:
        raise ValueError(
            f"checkpoint/resume: table(s) {sorted(set(cached))} have placement 'cache', whose rows live "
            "behind a device cache; sharded checkpoints hold 'hbm' shards only (allowed: placement 'hbm')"
        )
    if checkpoint is not None:
        check_target(checkpoint)
    if resume is not None:
        full, info = resume_info(resume, workload)
        check_resume(info, workload, steps, data_at)
        error = verify_files(info) if verify and full is None else ""
        if error:
            raise ValueError(error)


def check_resume(info: dict[str, Any], workload: Workload, steps: int, data_at: DataAt) -> int:
    """The step a checkpoint's manifest ``info`` resumes at, once its model, optimizers and data
    position fit this run of ``steps`` steps (``ValueError`` naming the checkpoint otherwise)."""
    p = info["path"]
    check_manifest(info, expected(workload))
    step = check_int(f"checkpoint {p!r}: step", info["step"], lo=0)
    if step > steps:
        raise ValueError(
            f"steps must be at least the {step} steps the checkpoint {p!r} has done (steps counts all "
            f"steps), got {steps}"
        )
    data = info["data"]
    mine = data_at(step)
    if not isinstance(data, dict) or data.get("kind") != mine["kind"]:
        raise ValueError(
            f"checkpoint {p!r} was trained on {show(data)[:120]}, this run reads {mine['kind']!r} "
            "(give the same --data files, or none for synthetic data)"
        )
    theirs = {k: v for k, v in data.items() if k != "position"}
    if json.loads(json.dumps(theirs)) != json.loads(
        json.dumps({k: v for k, v in mine.items() if k != "position"})
    ):
        diff = [k for k in mine if k != "position" and data.get(k) != mine[k]]
        raise ValueError(
            f"checkpoint {p!r}: its data differs from this run's in {diff} (the batches would differ)"
        )
    if data.get("position") != step:
        raise ValueError(
            f"checkpoint {p!r}: its data position {data.get('position')!r} is not its step {step}; a "
            "distributed run reads global batch i at step i"
        )
    return step


def resume_info(path: str, workload: Workload) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """What ``path`` holds: a single-process checkpoint file's tensors, whole, and its fields as a
    manifest; or ``None`` and a sharded checkpoint's manifest (its tensors stay on disk)."""
    if not Path(path).is_file():
        return None, read_manifest(path)
    state = read_checkpoint(path)
    kinds = {
        "sparse_optimizer": state["sparse_optimizer"],
        "dense_optimizer": {"kind": state.get("dense_optimizer_kind")},
    }
    check_manifest({"path": path, "config": state["config"], **kinds}, expected(workload))
    if state.get("dtype", "fp32") != "fp32":
        raise ValueError(
            f"checkpoint {path!r} was trained with dtype={state['dtype']!r}; the ranks train in fp32"
        )
    tables = [(t.name, t.num_rows) for t in workload.config.tables]
    try:
        full, info = single_to_global(state, tables, workload.config.embedding_dim)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"checkpoint {path!r} does not fit this model: {e}") from None
    info["path"] = path
    return full, info


def load(
    path: str, parts: tuple[Any, Any, torch.optim.Optimizer], workload: Workload, steps: int, data_at: DataAt
) -> tuple[int, list[float]]:
    """Load the checkpoint at ``path`` into a rank's ``parts`` (its sharded model, sparse and dense
    optimizers): a sharded checkpoint, under any plan, or a single-process checkpoint file. The step
    and the losses it had."""
    full, info = resume_info(path, workload)
    step = check_resume(info, workload, steps, data_at)
    if full is not None:  # a single-process checkpoint (every rank reads it: every rank fails alike)
        load_global(full, info, *parts)
    else:
        load_sharded(path, *parts, expected(workload))
    return step, list(info["losses"])


def save(
    folder: str,
    parts: tuple[Any, Any, torch.optim.Optimizer],
    workload: Workload,
    step: int,
    losses: list[float],
    data: dict[str, Any],
    sparse_lr: float,
) -> None:
    """Save a rank's ``parts`` after ``step`` steps into the sharded checkpoint ``folder``, with the
    global losses so far, the data position ``data`` and both optimizers' settings (a resumed run's
    learning rate is its checkpoint's; ``sparse_lr`` where the sparse optimizer holds no table)."""
    model, sparse_opt, dense_opt = parts
    opts = sparse_opt.optimizers
    sparse = {"kind": workload.sparse_optimizer, "lr": opts[0].lr if opts else sparse_lr}
    if workload.sparse_optimizer != "sgd":
        sparse["eps"] = opts[0].eps if opts else 1e-8
    dense = dense_info(dense_opt, workload.dense_optimizer)
    info = {"config": config_to_dict(workload.config), "step": step, "losses": losses, "data": data,
            "sparse_optimizer": sparse, "dense_optimizer": dense}  # fmt: skip
    save_sharded(folder, model, sparse_opt, dense_opt, info)
