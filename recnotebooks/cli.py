"""The ``recnb`` command (also ``python -m recnotebooks``).

Every command prints a readable report, or one JSON object with ``--json``. Bad arguments
exit with status 2 and a one-line message naming the option; options that would have no
effect are refused rather than ignored, and a run that cannot fit in memory is refused
before anything is allocated. ``recnb train`` trains on synthetic data or, with ``--data``,
on Criteo TSV files (a deterministic held-out split, :class:`~recnotebooks.data.split.HeldOutSplit`),
and saves (``--checkpoint``) and resumes (``--resume``) runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from recnotebooks.checks import MAX_STEPS, parse_float, parse_int

if TYPE_CHECKING:  # annotations only: the commands import what they run when they run
    import torch

    from recnotebooks.config import DLRMConfig
    from recnotebooks.train import Trainer

__all__ = ["main", "build_parser", "config_from_args", "training_settings", "TRAIN_DEFAULTS"]

#: Largest ``--batch-size`` for training here (2^24 samples; the memory check usually refuses sooner).
MAX_BATCH = 2**24
#: Most ``--tables``: the dot interaction's ``X X^T`` takes batch x F^2 floats (8 GB at 1000 tables,
#: batch 2048); the memory check refuses sooner where that does not fit.
MAX_TABLES = 10_000
#: Widest ``--dim``.
MAX_DIM = 2**14
#: Default ``--eval-fraction`` of ``--data`` batches held out.
EVAL_FRACTION = 0.1
#: ``recnb train``'s settings where neither the command line nor the preset's training settings
#: (:data:`recnotebooks.config.PRESET_TRAINING`) give one.
TRAIN_DEFAULTS: dict[str, Any] = {
    "batch_size": 1024,
    "sparse_optimizer": "rowwise_adagrad",
    "sparse_lr": 0.05,
    "dense_optimizer": "adagrad",
    "dense_lr": 0.02,
}


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


def _int_arg(name: str, lo: int = 1, hi: int | None = None) -> Callable[[str], int]:
    """argparse type: an int in ``[lo, hi]`` written in ASCII digits
    (:func:`recnotebooks.checks.parse_int`)."""

    def parse(text: str) -> int:
        try:
            return parse_int(name, text, lo=lo, hi=hi)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _float_arg(
    name: str, lo: float = 0.0, hi: float | None = None, lo_open: bool = True
) -> Callable[[str], float]:
    """argparse type: a finite number in the range (default > 0), ASCII only, via
    :func:`recnotebooks.checks.parse_float`."""

    def parse(text: str) -> float:
        try:
            return parse_float(name, text, lo=lo, hi=hi, lo_open=lo_open)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _add_train_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from recnotebooks.config import (
        DENSE_OPTIMIZERS,
        INTERACTIONS,
        MAX_DCN_LAYERS,
        MAX_POOLING,
        MAX_TABLE_ROWS,
        MAX_WIDTH,
        PRESET_TRAINING,
        SPARSE_OPTIMIZERS,
        preset_names,
    )

    t = sub.add_parser(
        "train", help="train a DLRM on synthetic Criteo-like data or Criteo files; report measurements"
    )
    trained = ", ".join(PRESET_TRAINING)
    t.add_argument(
        "--preset",
        choices=preset_names(),
        help=f"model preset (default tiny; criteo_kaggle with --data); {trained} bring their source's batch "
        "size, optimizers and learning rates (config.PRESET_TRAINING), which options given here override",
    )
    t.add_argument(
        "--steps",
        type=_int_arg("--steps", hi=MAX_STEPS),
        default=400,
        help=f"total steps, at most {MAX_STEPS:,} (a resumed run counts its own)",
    )
    t.add_argument(
        "--batch-size",
        type=_int_arg("--batch-size", hi=MAX_BATCH),
        help=f"samples per step (default {TRAIN_DEFAULTS['batch_size']}, or the preset's)",
    )
    t.add_argument("--seed", type=_int_arg("--seed", 0, 2**63 - 1), default=0)
    t.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda[:N]")
    t.add_argument(
        "--dtype",
        choices=["fp32", "bf16", "fp16"],
        default="fp32",
        help="bf16: autocast, fp32 master weights (fp16 is refused: no loss scaling)",
    )
    g = t.add_argument_group("architecture overrides (dlrm repo notation)")
    g.add_argument(
        "--tables", type=_int_arg("--tables", hi=MAX_TABLES), help="number of tables (all --rows rows)"
    )
    g.add_argument("--rows", type=_int_arg("--rows", hi=MAX_TABLE_ROWS), help="rows per table")
    g.add_argument("--dim", type=_int_arg("--dim", hi=MAX_DIM), help="embedding dimension")
    g.add_argument(
        "--pooling",
        type=_float_arg("--pooling", hi=MAX_POOLING),
        help="lookups per table per sample, every table (a whole number: the bags have fixed sizes)",
    )
    g.add_argument("--bottom", help="bottom MLP incl. input width, e.g. 13-512-256-64")
    g.add_argument("--top", help="top MLP outputs, e.g. 512-512-256-1 (input width is derived)")
    g.add_argument("--interaction", choices=list(INTERACTIONS))
    g.add_argument(
        "--dcn-layers",
        type=_int_arg("--dcn-layers", hi=MAX_DCN_LAYERS),
        help="cross layers of --interaction dcn (default 3, or the preset's)",
    )
    g.add_argument(
        "--dcn-rank",
        type=_int_arg("--dcn-rank", hi=MAX_WIDTH),
        help="rank of the cross layers of --interaction dcn, at most their width (default 512, or "
        "the preset's)",
    )
    g.add_argument(
        "--max-rows", type=_int_arg("--max-rows", hi=MAX_TABLE_ROWS), help="cap every table's rows"
    )
    o = t.add_argument_group("optimisation")
    helps = {
        "--sparse-optimizer": "embedding optimizer, on the rows looked up: sgd (no state), rowwise_adagrad "
        "(one fp32 per row), adagrad (exact: one fp32 per element, a second table the size of the tables)",
        "--dense-optimizer": "MLP optimizer (torch.optim): sgd, adagrad (one float per parameter), "
        "adam (two)",
    }
    for flag, choices in (
        ("--sparse-optimizer", SPARSE_OPTIMIZERS),
        ("--sparse-lr", None),
        ("--dense-optimizer", DENSE_OPTIMIZERS),
        ("--dense-lr", None),
    ):
        key = flag[2:].replace("-", "_")
        kind = {"choices": choices} if choices else {"type": _float_arg(flag)}
        what = helps.get(flag, flag[2:].replace("-", " "))
        o.add_argument(flag, **kind, help=f"{what}; default {TRAIN_DEFAULTS[key]}, or the preset's")
    o.add_argument(
        "--eval-batches",
        type=_int_arg("--eval-batches", hi=MAX_STEPS),
        default=10,
        help="held-out batches evaluated after training (AUC, log loss, NE); the same batches "
        "with --world-size/--distributed",
    )
    o.add_argument(
        "--zipf", type=_float_arg("--zipf"), help="Zipf exponent of id popularity (synthetic data)"
    )
    d = t.add_argument_group("data and checkpoints")
    d.add_argument(
        "--data",
        nargs="+",
        metavar="PATH",
        help="Criteo Kaggle/Terabyte TSV file(s), plain or .gz, instead of synthetic data",
    )
    d.add_argument(
        "--eval-fraction",
        type=_float_arg("--eval-fraction", hi=0.5),
        help=f"share of --data batches held out for evaluation, spread evenly (default {EVAL_FRACTION})",
    )
    d.add_argument(
        "--checkpoint", metavar="PATH", help="save a checkpoint here at the end (and every N steps)"
    )
    d.add_argument(
        "--checkpoint-every",
        type=_int_arg("--checkpoint-every", hi=MAX_STEPS),
        metavar="N",
        help="with --checkpoint: also save every N steps",
    )
    d.add_argument("--resume", metavar="PATH", help="continue from a checkpoint saved by --checkpoint")
    t.add_argument("--json", action="store_true", help="print one JSON object")
    m = t.add_argument_group("distributed (hybrid-parallel: sharded embeddings, data-parallel MLPs)")
    m.add_argument(
        "--world-size", type=_int_arg("--world-size"), metavar="N", help="train on N local CPU ranks"
    )
    m.add_argument("--distributed", action="store_true", help="train as one rank of a torchrun job")
    m.add_argument(
        "--sharding",
        choices=["table_wise", "row_wise", "column_wise", "data_parallel"],
        help="how every table is sharded (default table_wise, round-robin)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``recnb`` argument parser (train, doctor, cost, plan, calibrate, validate, cache-sim)."""
    p = argparse.ArgumentParser(prog="recnb", description="recnotebooks: DLRM training efficiency")
    sub = p.add_subparsers(dest="command", required=True)
    _add_train_parser(sub)
    d = sub.add_parser("doctor", help="versions, devices, threads, and whether the notebooks will work")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    from recnotebooks.measure import commands as measure_commands
    from recnotebooks.perf import commands as model_commands

    model_commands.add_parsers(sub, _int_arg, _float_arg)
    measure_commands.add_parsers(sub)
    from recnotebooks.cache.commands import add_cache_sim_parser

    add_cache_sim_parser(sub)
    return p


def _mlp_changes(args: argparse.Namespace) -> dict[str, Any]:
    from recnotebooks.config import parse_mlp

    changes: dict[str, Any] = {}
    try:
        if args.bottom is not None:
            widths = parse_mlp(args.bottom, "--bottom")
            if len(widths) < 2:
                raise CLIError(f"--bottom must include the input width and >= 1 layer, got {args.bottom!r}")
            changes["num_dense"], changes["bottom_mlp"] = widths[0], widths[1:]
        if args.top is not None:
            changes["top_mlp"] = parse_mlp(args.top, "--top")
    except ValueError as e:
        raise CLIError(str(e)) from None
    return changes


def training_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``recnb train``'s batch size, optimizers, learning rates and bag-size distribution: each
    option given on the command line, else the preset's (:data:`recnotebooks.config.PRESET_TRAINING`),
    else :data:`TRAIN_DEFAULTS`. Fills the options left out into ``args`` (so every path of the
    command reads one setting) and returns them with ``pooling``, the synthetic bags' distribution."""
    from recnotebooks.config import preset_training

    settings = {"pooling": "fixed", **TRAIN_DEFAULTS, **preset_training(_preset_name(args))}
    for key in TRAIN_DEFAULTS:
        if getattr(args, key, None) is None:
            setattr(args, key, settings[key])
        settings[key] = getattr(args, key)
    return {k: settings[k] for k in (*TRAIN_DEFAULTS, "pooling")}


def _check_optimizers(args: argparse.Namespace) -> None:
    """Refuse a preset's optimizer this version does not have (the command line's are checked by
    argparse), naming the preset and the option that overrides it."""
    from recnotebooks.config import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS

    for key, known in (("sparse_optimizer", SPARSE_OPTIMIZERS), ("dense_optimizer", DENSE_OPTIMIZERS)):
        if getattr(args, key) not in known:
            raise CLIError(
                f"preset {_preset_name(args)}'s {key} {getattr(args, key)!r} is not one of {list(known)} "
                f"here; give --{key.replace('_', '-')} NAME"
            )


def config_from_args(args: argparse.Namespace) -> DLRMConfig:
    """The preset named by ``--preset`` with the architecture overrides applied."""
    import dataclasses

    from recnotebooks.config import DCN_DEFAULTS, TableConfig, preset

    cfg = preset(_preset_name(args))
    changes = _mlp_changes(args)
    if args.dim:
        changes["embedding_dim"] = args.dim
    if args.interaction:
        changes["interaction"] = args.interaction
        if args.interaction != "dcn":  # a DCN preset's cross layers go with its interaction
            changes.update(DCN_DEFAULTS)
    for flag in ("dcn_layers", "dcn_rank"):
        if getattr(args, flag, None) is not None:
            changes[flag] = getattr(args, flag)
    if args.pooling is not None and (args.pooling < 1 or args.pooling != int(args.pooling)):
        raise CLIError(
            f"--pooling must be a whole number of lookups >= 1 (recnb train draws fixed bag sizes: every "
            f"sample looks up exactly that many rows of each table), got {args.pooling:g}"
        )
    tables = cfg.tables
    if args.tables or args.rows or args.pooling is not None:
        n = args.tables or len(tables)
        rows = args.rows or (tables[0].num_rows if args.tables else None)
        pool = args.pooling if args.pooling is not None else tables[0].pooling_factor
        if rows is None:
            tables = tuple(dataclasses.replace(t, pooling_factor=pool) for t in tables)
        else:
            tables = tuple(TableConfig(f"T{i + 1}", rows, pool) for i in range(n))
        changes["tables"] = tables
    if changes:
        changes["name"] = f"{cfg.name}+overrides"
        if args.dim and "bottom_mlp" not in changes and changes.get("interaction", cfg.interaction) == "dot":
            changes["bottom_mlp"] = (*cfg.bottom_mlp[:-1], args.dim)
    try:
        cfg = cfg.replace(**changes) if changes else cfg
        if args.max_rows:
            cfg = cfg.with_max_rows(args.max_rows)
    except (ValueError, TypeError) as e:
        hint = " (--dcn-layers, --dcn-rank)" if str(e).startswith(("dcn_layers", "dcn_rank")) else ""
        raise CLIError(str(e) + hint) from None
    return cfg


def _preset_name(args: argparse.Namespace) -> str:
    if getattr(args, "preset", None):
        return args.preset
    return "criteo_kaggle" if getattr(args, "data", None) else "tiny"


def _check_train_options(args: argparse.Namespace) -> None:
    """Refuse options that would otherwise be silently ignored."""
    if args.data is None:
        for flag, value in (("--eval-fraction", args.eval_fraction),):
            if value is not None:
                raise CLIError(
                    f"{flag} needs --data PATH (synthetic data has its own eval stream), got {value}"
                )
    elif args.zipf is not None:
        raise CLIError(
            f"--zipf applies to synthetic data only; with --data the ids come from the files, "
            f"got --zipf {args.zipf}"
        )
    if args.checkpoint_every is not None and args.checkpoint is None:
        raise CLIError(f"--checkpoint-every {args.checkpoint_every} needs --checkpoint PATH")


def _check_memory(cfg: DLRMConfig, device: torch.device, args: argparse.Namespace) -> None:
    """Refuse a run whose weights, optimizer state, interaction buffers and one batch's
    activations (twice: values and gradients) would not fit in 80% of free memory."""
    from recnotebooks.doctor import available_memory_bytes
    from recnotebooks.perf.memory import memory_footprint

    training_settings(args)
    fp = memory_footprint(cfg, args.sparse_optimizer, args.dense_optimizer, batch_size=args.batch_size)
    parts = {k: v for k, v in fp.items() if k != "total"}
    parts["activations"] *= 2
    parts["dense_weights"] *= 2  # and their gradients
    need = sum(parts.values())
    have = available_memory_bytes(device)
    if have is not None and need > 0.8 * have:
        big = sorted(parts.items(), key=lambda kv: -kv[1])[:2]
        what = ", ".join(f"{k} {v / 2**30:,.1f} GiB" for k, v in big)
        raise CLIError(
            f"model {cfg.name!r} ({cfg.num_tables} tables, batch size {args.batch_size}) needs about "
            f"{need / 2**30:,.1f} GiB ({what}) but {device} has {have / 2**30:.1f} GiB available; "
            "use --max-rows N to cap table sizes, fewer --tables or a smaller --batch-size"
        )


def _train_data(args: argparse.Namespace, cfg: DLRMConfig) -> tuple[Any, Any, dict[str, Any]]:
    """Train and eval streams: synthetic, or a held-out split of ``--data`` files."""
    from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo

    if args.data is None:
        skew = {"zipf_exponent": args.zipf} if args.zipf else {}
        data_cfg = SyntheticConfig(pooling=training_settings(args)["pooling"], **skew)
        train = SyntheticCriteo(cfg, args.batch_size, data_cfg, seed=args.seed, split="train")
        evals = SyntheticCriteo(cfg, args.batch_size, data_cfg, seed=args.seed, split="eval")
        return train, evals, {"source": "synthetic", "zipf_exponent": data_cfg.zipf_exponent}
    from recnotebooks.data.criteo import NUM_CATEGORICAL, NUM_DENSE, CriteoReader
    from recnotebooks.data.split import HeldOutSplit

    if cfg.num_tables != NUM_CATEGORICAL or cfg.num_dense != NUM_DENSE:
        raise CLIError(
            f"--data needs a model with {NUM_CATEGORICAL} tables and {NUM_DENSE} dense features (Criteo), "
            f"got {cfg.num_tables} tables and {cfg.num_dense} dense features ({cfg.name!r}); use --preset "
            "criteo_kaggle or criteo_terabyte, with --max-rows N to cap the tables"
        )
    try:
        # train drops a last partial batch (every step has --batch-size samples); eval keeps it
        readers = [CriteoReader(args.data, cfg, args.batch_size, drop_last=last) for last in (True, False)]
    except (FileNotFoundError, ValueError) as e:
        raise CLIError(f"--data: {e}") from None
    fraction = EVAL_FRACTION if args.eval_fraction is None else args.eval_fraction
    info = {"source": "criteo", "files": [str(p) for p in readers[0].paths], "eval_fraction": fraction,
            "reader": readers[0]}  # fmt: skip
    return HeldOutSplit(readers[0], fraction, "train"), HeldOutSplit(readers[1], fraction, "eval"), info


def _trainer(
    args: argparse.Namespace, cfg: DLRMConfig, device: torch.device
) -> tuple[Trainer, dict[str, Any]]:
    import torch

    from recnotebooks.nn import DLRM
    from recnotebooks.train import TrainConfig, Trainer

    training_settings(args)  # the options left out: the preset's or the defaults
    tc = TrainConfig(
        steps=args.steps,
        sparse_optimizer=args.sparse_optimizer,
        sparse_lr=args.sparse_lr,
        dense_optimizer=args.dense_optimizer,
        dense_lr=args.dense_lr,
        eval_batches=args.eval_batches,
        progress=not args.json and sys.stderr.isatty(),
        dtype=args.dtype,
    )
    train, evals, info = _train_data(args, cfg)
    torch.manual_seed(args.seed)
    trainer = Trainer(DLRM(cfg, device=device, seed=args.seed), train, evals, tc, device=device)
    if args.resume is not None:
        try:
            trainer.load(args.resume)
        except (FileNotFoundError, ValueError) as e:
            raise CLIError(f"--resume: {e}") from None
        if trainer.step >= args.steps:
            raise CLIError(
                f"--steps {args.steps} must exceed the {trainer.step} steps the checkpoint "
                f"{args.resume!r} has already done (--steps counts all steps)"
            )
    return trainer, info


def _skipped_lines(reader: object) -> str:
    """Why a --data run found no usable lines, if the reader skipped some."""
    st = getattr(reader, "stats", None)
    if st is None or not st.skipped:
        return ""
    line, reason = st.first_skips[0]
    return (
        f" ({st.skipped:,} of {st.lines_read:,} lines of --data were malformed; first, line {line}: {reason})"
    )


def cmd_train(args: argparse.Namespace) -> dict[str, Any]:
    """``recnb train``: train, evaluate, report measured throughput and phases (a dict)."""

    from recnotebooks.run_report import train_report
    from recnotebooks.train import resolve_device

    training_settings(args)
    _check_train_options(args)
    cfg = config_from_args(args)
    _check_optimizers(args)
    try:
        device = resolve_device(args.device)
    except ValueError as e:
        raise CLIError(str(e)) from None
    _check_memory(cfg, device, args)
    try:
        trainer, info = _trainer(args, cfg, device)
    except (ValueError, TypeError) as e:
        raise CLIError(str(e)) from None
    start, reader = trainer.step, info.pop("reader", None)
    try:
        res = trainer.fit(args.steps, checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every or 0)
    except (ValueError, TypeError, FloatingPointError) as e:
        raise CLIError(str(e) + _skipped_lines(reader)) from None
    if reader is not None:  # counts of the train reader's current pass over the files
        st = reader.stats
        info |= {"lines_read": st.lines_read, "lines_skipped": st.skipped, "first_skips": st.first_skips}
    return train_report(
        command="train",
        source="measured",
        preset=_preset_name(args),
        config=cfg.summary(),
        device=res.device,
        threads=res.threads,
        busy=res.busy,
        reliability=res.reliability,
        world_size=1,
        backend=None,
        rank=0,
        sharding=None,
        plan=None,
        steps=res.steps,
        batch_size=res.batch_size,
        dtype=args.dtype,
        samples_per_s=res.samples_per_s,
        seconds_per_step=res.seconds_per_step,
        auc=res.auc,
        logloss=res.logloss,
        ne=res.ne,
        losses=res.losses,
        phases=res.phases,
        comm=[],
        data=info,
        resumed_from=args.resume,
        resumed_at_step=start if args.resume else None,
        checkpoint=args.checkpoint,
    )


def _print_train(r: dict[str, Any]) -> None:
    c = r["config"]
    print(
        f"{c['name']}: {c['num_tables']} tables, {c['total_rows']:,} rows, dim {c['embedding_dim']}, "
        f"bottom {c['bottom_mlp']}, top {c['top_mlp']}, {c['interaction']}"
        + (f" ({c['dcn']})" if c.get("dcn") else "")
    )
    print(
        f"measured on {r['device']} ({r['threads']} threads, {r['dtype']}): {r['steps']} steps of "
        f"{r['batch_size']}"
    )
    d = r["data"]
    if d["source"] == "criteo":
        files = ", ".join(d["files"])
        print(
            f"  data        {files}: {d['eval_fraction']:.0%} of batches held out for eval; "
            f"{d['lines_skipped']:,} of {d['lines_read']:,} lines skipped in this pass"
        )
    if r["resumed_from"]:
        print(f"  resumed     from {r['resumed_from']} at step {r['resumed_at_step']}")
    if r["checkpoint"]:
        print(f"  checkpoint  saved to {r['checkpoint']}")
    print(f"  throughput  {r['samples_per_s']:,.0f} samples/s  ({r['seconds_per_step'] * 1e3:.2f} ms/step)")
    from recnotebooks.run_report import report_lines

    for line in report_lines(r):
        print(line)
    total = sum(r["phases"].values()) or 1.0
    print("  phase breakdown (ms/step):")
    for k, v in r["phases"].items():
        print(f"    {k:<18} {v * 1e3:8.2f}  {100 * v / total:5.1f}%")


def _run(args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    if args.command == "train":
        training_settings(args)
    if args.command == "train" and (args.world_size or args.distributed or args.sharding):
        if args.dtype != "fp32":
            raise CLIError(
                f"--dtype {args.dtype} applies to single-process training, not --world-size/"
                "--distributed/--sharding runs (they train in fp32)"
            )
        from recnotebooks.distributed.commands import run as run_distributed

        config = config_from_args(args)
        _check_optimizers(args)
        return run_distributed(args, config, CLIError)
    if args.command == "train":
        return cmd_train(args), _print_train
    if args.command == "cache-sim":
        from recnotebooks.cache.commands import run

        return run(args, CLIError)
    if args.command in ("cost", "plan"):
        from recnotebooks.perf.commands import run

        return run(args, CLIError)
    if args.command in ("calibrate", "validate"):
        from recnotebooks.measure.commands import run

        return run(args, CLIError)
    from recnotebooks.doctor import doctor_report, print_doctor

    return doctor_report(), print_doctor


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``recnb``; returns the exit status (2 for a user error, printed as one line)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result, printer = _run(args)
    except CLIError as e:
        print(f"recnb {args.command}: error: {e}", file=sys.stderr)
        return 2
    try:
        if args.json:
            print(json.dumps(result, indent=2, default=str))
        else:
            printer(result)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `recnb plan | head`: the reader left; stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
