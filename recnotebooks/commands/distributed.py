"""``recnb train --world-size N`` and ``recnb train --distributed``: hybrid-parallel training.

``recnb train --world-size 2 --preset tiny`` trains on two local CPU ranks (gloo, rendezvous on
127.0.0.1) started by :func:`~recnotebooks.distributed.launch.launch`; the losses equal those of the
single-process ``recnb train --preset tiny`` with the same seed and batch size. ``--sharding``
picks how every table is split (``table_wise`` round-robin by default, ``row_wise``,
``column_wise``, ``data_parallel``).

``--data FILE...`` trains on Criteo files as the single-process run does (the same checks, the same
held-out split by ``--eval-fraction``): every rank reads the files and keeps its slice of each
global batch (:class:`~recnotebooks.distributed.rank_data.CriteoFiles`), so the losses and held-out
metrics equal one process's.

``--checkpoint DIR`` saves a sharded checkpoint in the folder ``DIR`` when training ends (and every
``--checkpoint-every N`` steps), all or nothing; ``--resume`` continues from one saved on any number
of ranks under any ``--sharding``, or from a single-process checkpoint file
(:mod:`recnotebooks.distributed.checkpoint`). Under ``torchrun --max-restarts K`` a restarted job
resumes from ``--checkpoint DIR`` by itself (torchrun's ``TORCHELASTIC_RESTART_COUNT`` says it is a
restart); without ``--checkpoint`` such a run is refused: every restart would begin at step 0.

``recnb train --distributed`` is the same training inside a process started by ``torchrun``
(NCCL when CUDA is present, else gloo). On one machine with 4 GPUs::

    torchrun --nproc-per-node 4 -m recnotebooks train --distributed --preset tiny --json

On two machines (run one command on each; ``HOST0`` is the first machine's address, reachable
from the second, ``29500`` a free port there, ``--rdzv-id`` any id the two share)::

    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint HOST0:29500 --rdzv-id job42 -m recnotebooks train --distributed --preset tiny
    torchrun --nnodes 2 --node-rank 1 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint HOST0:29500 --rdzv-id job42 -m recnotebooks train --distributed --preset tiny

Every rank prints its report (add ``--local-ranks-filter 0`` to torchrun to see one per node);
the losses and the held-out metrics (AUC, log loss, NE over ``--eval-batches`` batches, the ones
the single-process run evaluates) are the global batch's and the same on every rank, the timings
are the rank's own. ``--json`` prints the single-process run's keys
(:data:`recnotebooks.run_report.TRAIN_REPORT_KEYS`), one schema for both, and the text is the
single-process run's (:func:`recnotebooks.commands.train.train_lines`) with the ranks' lines.

A rank or node lost mid-run (killed, its machine down) stops the run: every survivor prints a few
lines naming the lost rank, the step, the last checkpoint and the command that resumes, and exits
with status 75 (:mod:`recnotebooks.distributed.peers`; ``RECNB_DEBUG=1`` adds the traceback).
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from recnotebooks.checks import parse_int
from recnotebooks.data.synthetic import SyntheticConfig
from recnotebooks.distributed.checkpoint import check_target, has_checkpoint, read_manifest
from recnotebooks.distributed.launch import LaunchError, max_world_size
from recnotebooks.distributed.peers import (
    PEER_LOST_EXIT,
    PeerLostError,
    debugging,
    lost_in_launch,
    lost_report,
    tell_torchrun,
)
from recnotebooks.distributed.rank_data import CriteoFiles
from recnotebooks.distributed.training import (
    DistTrainResult,
    torchrun_env,
    train_local,
    train_torchrun,
)
from recnotebooks.plan import Plan, round_robin
from recnotebooks.run_report import train_report

from .report import Report, printer
from .settings import CLIError, TrainSettings
from .train import _criteo_data, measured, train_lines

__all__ = ["run"]


def _local_world_size(s: TrainSettings) -> int | None:
    """The world size of a local run (``None`` under torchrun); a :class:`CLIError` for bad options."""
    if s.world_size is not None and s.distributed:
        raise CLIError(
            f"give --world-size N (local ranks) or --distributed (under torchrun), not both: "
            f"got --world-size {s.world_size} --distributed"
        )
    if s.world_size is None and not s.distributed:
        raise CLIError(f"--sharding {s.sharding} needs --world-size N or --distributed")
    if s.world_size is None:
        return None
    if s.world_size > max_world_size():
        raise CLIError(
            f"--world-size must be at most {max_world_size()} local ranks on this machine "
            f"(4 per CPU core), got {s.world_size}"
        )
    if s.device not in ("auto", "cpu"):
        raise CLIError(
            f"--world-size runs local CPU ranks (gloo): --device must be auto or cpu, got {s.device}"
        )
    return s.world_size


def _world_size(s: TrainSettings, local: int | None) -> int:
    """The ranks in all: the local ones, or torchrun's; the batch must split evenly over them."""
    if local is None and "WORLD_SIZE" not in os.environ:
        raise CLIError(
            "--distributed runs under torchrun (WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT are not set)"
        )
    try:
        size = local if local is not None else torchrun_env()[1]
    except ValueError as e:
        raise CLIError(f"--distributed: {e}") from None
    if s.batch_size % size:
        raise CLIError(
            f"--batch-size must be divisible by the world size {size} (each rank takes an equal slice), "
            f"got {s.batch_size}"
        )
    return size


def run(s: TrainSettings) -> Report:
    """Run a distributed ``recnb train``; its report (a dict) and its text. Bad input is a
    :class:`CLIError` before any process starts."""
    local = _local_world_size(s)
    size = _world_size(s, local)
    sharding = s.sharding or "table_wise"
    options = {"sparse_optimizer": s.sparse_optimizer, "sparse_lr": s.sparse_lr,
               "dense_optimizer": s.dense_optimizer, "dense_lr": s.dense_lr,
               "zipf": s.zipf, "eval_batches": s.eval_batches}  # fmt: skip
    info = None
    if s.data is not None:  # the single-process run's checks (a Criteo model, files that exist)
        _, _, info = _criteo_data(s, s.data)
        info.pop("reader")
        options["data"] = CriteoFiles(s.data, info["eval_fraction"])
    options |= _checkpoint_options(s, local is None)
    try:
        plan = round_robin(s.config, size, sharding)
        if local is not None:
            res = train_local(s.config, plan, local, s.steps, s.batch_size, s.seed, **options)
        else:
            res = train_torchrun(s.config, plan, s.steps, s.batch_size, s.seed, **options)
    except (ValueError, TypeError) as e:
        raise CLIError(str(e)) from None
    except PeerLostError as e:  # under torchrun: a peer of this rank was lost
        raise _peer_lost(s, e, e) from None
    except LaunchError as e:  # a rank's bad input (a --data file corrupt past the first batches): one line
        lost = lost_in_launch(e)
        if lost is not None:  # a rank died (or never joined): its peers were stopped
            raise _peer_lost(s, lost, e) from None
        first = e.failures[0]
        bad = re.match(
            r"rank (\d+) raised (?:ValueError|TypeError|FloatingPointError): (.*)", first.message, re.S
        )
        if first.kind != "raised" or bad is None:
            raise
        raise CLIError(f"{bad[2]} (rank {bad[1]})") from None
    return Report(_report(s, plan, res, sharding, info), printer(train_lines))


class PeerLost(CLIError):
    """A run stopped because a rank was lost: a few lines
    (:func:`~recnotebooks.distributed.peers.lost_report`), exit status
    :data:`~recnotebooks.distributed.peers.PEER_LOST_EXIT`."""

    exit_code = PEER_LOST_EXIT


def _peer_lost(s: TrainSettings, lost: PeerLostError, cause: BaseException) -> PeerLost:
    """The error ``recnb`` prints for ``lost``: which rank, at which step, the last checkpoint and the
    command that resumes; told to torchrun's agent too; ``RECNB_DEBUG=1`` prints ``cause``'s traceback."""
    text = lost_report(lost, s.checkpoint, s.checkpoint_every)
    if debugging():
        traceback.print_exception(cause)
        for f in getattr(cause, "failures", []):  # a launch's: the ranks' own tracebacks
            if f.traceback:
                print(f"traceback of rank {f.rank}:\n{f.traceback}", file=sys.stderr)
    tell_torchrun(text)
    return PeerLost(text)


def _env_int(name: str) -> int:
    """A torchrun variable as an int (0 when unset); a :class:`CLIError` naming it otherwise."""
    try:
        return parse_int(name, os.environ.get(name, "0"), lo=0)
    except ValueError as e:
        raise CLIError(str(e)) from None


def _checkpoint_options(s: TrainSettings, torchrun: bool) -> dict[str, Any]:
    """``--checkpoint``, ``--checkpoint-every`` and ``--resume`` as :func:`train_local`'s options,
    checked before any process starts. Under torchrun, a restart (``TORCHELASTIC_RESTART_COUNT`` > 0)
    resumes from ``--checkpoint`` when it holds one, and ``--max-restarts`` without ``--checkpoint``
    is refused."""
    resume, explicit = s.resume, s.resume is not None
    restarts = _env_int("TORCHELASTIC_MAX_RESTARTS") if torchrun else 0
    if restarts and s.checkpoint is None:
        raise CLIError(
            f"torchrun --max-restarts {restarts} restarts the ranks after a failure, but without "
            "--checkpoint DIR there is no checkpoint to resume from and every restart would begin at "
            "step 0; give --checkpoint DIR (a folder every node can reach) and --checkpoint-every N"
        )
    if torchrun and _env_int("TORCHELASTIC_RESTART_COUNT") and s.checkpoint and has_checkpoint(s.checkpoint):
        resume, explicit = s.checkpoint, False  # a restart: from the last save
    try:
        if s.checkpoint is not None:
            check_target(s.checkpoint)
    except ValueError as e:
        raise CLIError(f"--checkpoint: {e}") from None
    if resume is not None and not Path(resume).is_file():
        try:
            step = read_manifest(resume)["step"]
        except ValueError as e:
            raise CLIError(f"--resume: {e}") from None
        if explicit and step >= s.steps:
            raise CLIError(
                f"--steps {s.steps} must exceed the {step} steps the checkpoint {resume!r} has already "
                "done (--steps counts all steps)"
            )
    out = {"checkpoint": s.checkpoint, "checkpoint_every": s.checkpoint_every or 0, "resume": resume}
    return {k: v for k, v in out.items() if v}


def _report(
    s: TrainSettings, plan: Plan, res: DistTrainResult, sharding: str, info: dict[str, Any] | None
) -> dict[str, Any]:
    """The run's report: the single-process run's keys, this rank's timings; ``info``: the
    ``--data`` files' (``None``: synthetic data)."""
    zipf = (SyntheticConfig(zipf_exponent=s.zipf) if s.zipf else SyntheticConfig()).zipf_exponent
    resumed_from = s.resume if s.resume is not None or not res.start_step else s.checkpoint
    data = {"source": "synthetic", "zipf_exponent": zipf} if info is None else {**info, **res.data}
    return train_report(
        command="train", source="measured", preset=s.preset, config=s.config.summary(),
        device="cuda" if res.backend == "nccl" else "cpu", world_size=res.world_size, backend=res.backend,
        rank=int(os.environ.get("RANK", "0")), sharding=sharding, plan=plan.table(), dtype="fp32",
        comm=res.comm, data=data, resumed_from=resumed_from,
        resumed_at_step=res.start_step if resumed_from else None, checkpoint=s.checkpoint, **measured(res),
    )  # fmt: skip
