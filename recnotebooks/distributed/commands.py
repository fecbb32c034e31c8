"""``recnb train --world-size N`` and ``recnb train --distributed``: hybrid-parallel training.

``recnb train --world-size 2 --preset tiny`` trains on two local CPU ranks (gloo, rendezvous on
127.0.0.1) started by :func:`~recnotebooks.distributed.launch.launch`; the losses equal those of the
single-process ``recnb train --preset tiny`` with the same seed and batch size. ``--sharding``
picks how every table is split (``table_wise`` round-robin by default, ``row_wise``,
``column_wise``, ``data_parallel``).

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
(:data:`recnotebooks.run_report.TRAIN_REPORT_KEYS`), one schema for both.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..config import DLRMConfig
from ..data.synthetic import SyntheticConfig
from ..plan import round_robin
from ..run_report import report_lines, train_report
from .launch import max_world_size
from .training import DistTrainResult, torchrun_env, train_local, train_torchrun

__all__ = ["run"]

#: ``recnb train`` options that a distributed run would ignore, so refuses: (flag, attribute).
_SINGLE_PROCESS_ONLY = (("--data", "data"), ("--checkpoint", "checkpoint"),
                        ("--checkpoint-every", "checkpoint_every"), ("--resume", "resume"))  # fmt: skip


def _check(args: argparse.Namespace, error: type[Exception]) -> int | None:
    """The world size of a local run (``None`` under torchrun), or ``error`` for bad options."""
    if args.world_size is not None and args.distributed:
        raise error(
            f"give --world-size N (local ranks) or --distributed (under torchrun), not both: "
            f"got --world-size {args.world_size} --distributed"
        )
    if args.world_size is None and not args.distributed:
        raise error(f"--sharding {args.sharding} needs --world-size N or --distributed")
    mode = "--distributed" if args.distributed else f"--world-size {args.world_size}"
    for flag, attr in _SINGLE_PROCESS_ONLY:
        if getattr(args, attr, None) is not None:
            raise error(f"{flag} is not supported with {mode} (synthetic data, no checkpoints yet)")
    if args.world_size is None:
        return None
    if args.world_size > max_world_size():
        raise error(
            f"--world-size must be at most {max_world_size()} local ranks on this machine "
            f"(4 per CPU core), got {args.world_size}"
        )
    if args.device not in ("auto", "cpu"):
        raise error(
            f"--world-size runs local CPU ranks (gloo): --device must be auto or cpu, got {args.device}"
        )
    return args.world_size


def run(
    args: argparse.Namespace, config: DLRMConfig, error: type[Exception]
) -> tuple[dict[str, Any], Callable]:
    """Run a distributed ``recnb train``; its report (a dict) and its printer. Bad input raises
    ``error`` before any process starts."""
    world = _check(args, error)
    import os

    if world is None and "WORLD_SIZE" not in os.environ:
        raise error(
            "--distributed runs under torchrun (WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT are not set)"
        )
    try:
        size = world if world is not None else torchrun_env()[1]
    except ValueError as e:
        raise error(f"--distributed: {e}") from None
    if args.batch_size % size:
        raise error(
            f"--batch-size must be divisible by the world size {size} (each rank takes an equal slice), "
            f"got {args.batch_size}"
        )
    sharding = args.sharding or "table_wise"
    options = {"sparse_optimizer": args.sparse_optimizer, "sparse_lr": args.sparse_lr,
               "dense_optimizer": args.dense_optimizer, "dense_lr": args.dense_lr,
               "zipf": args.zipf, "eval_batches": args.eval_batches}  # fmt: skip
    try:
        plan = round_robin(config, size, sharding)
        if world is not None:
            res = train_local(config, plan, world, args.steps, args.batch_size, args.seed, **options)
        else:
            res = train_torchrun(config, plan, args.steps, args.batch_size, args.seed, **options)
    except (ValueError, TypeError) as e:
        raise error(str(e)) from None
    return _report(args, config, plan, res, sharding), _print


def _report(
    args: argparse.Namespace, config: DLRMConfig, plan: Any, res: DistTrainResult, sharding: str
) -> dict[str, Any]:
    import os

    zipf = (SyntheticConfig(zipf_exponent=args.zipf) if args.zipf else SyntheticConfig()).zipf_exponent
    return train_report(
        command="train",
        source="measured",
        preset=args.preset or "tiny",
        config=config.summary(),
        device="cuda" if res.backend == "nccl" else "cpu",
        threads=res.threads,
        busy=res.busy,
        reliability=res.reliability,
        world_size=res.world_size,
        backend=res.backend,
        rank=int(os.environ.get("RANK", "0")),
        sharding=sharding,
        plan=plan.table(),
        steps=res.steps,
        batch_size=res.batch_size,
        dtype="fp32",
        samples_per_s=res.samples_per_s,
        seconds_per_step=res.seconds_per_step,
        auc=res.auc,
        logloss=res.logloss,
        ne=res.ne,
        losses=res.losses,
        phases=res.phases,
        comm=res.comm,
        data={"source": "synthetic", "zipf_exponent": zipf},
        resumed_from=None,
        resumed_at_step=None,
        checkpoint=None,
    )


def _print(r: dict[str, Any]) -> None:
    c = r["config"]
    print(
        f"{c['name']}: {c['num_tables']} tables, {c['total_rows']:,} rows, dim {c['embedding_dim']}, "
        f"bottom {c['bottom_mlp']}, top {c['top_mlp']}, {c['interaction']}"
        + (f" ({c['dcn']})" if c.get("dcn") else "")
    )
    print(
        f"measured on {r['world_size']} rank(s) ({r['backend']}, {r['sharding']} embeddings, this is rank "
        f"{r['rank']}): {r['steps']} steps of {r['batch_size']} (global batch)"
    )
    print(f"  throughput  {r['samples_per_s']:,.0f} samples/s  ({r['seconds_per_step'] * 1e3:.2f} ms/step)")
    for line in report_lines(r):
        print(line)
    total = sum(r["phases"].values()) or 1.0
    print("  phase breakdown (ms/step, this rank):")
    for k, v in r["phases"].items():
        print(f"    {k:<18} {v * 1e3:8.2f}  {100 * v / total:5.1f}%")
    sent = sum(row["bytes_sent"] for row in r["comm"])
    print(f"  comm        {sent:,} bytes sent by all ranks over {r['steps']} steps")
