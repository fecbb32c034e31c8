"""The ``recnb`` command (also ``python -m recnotebooks``).

Every command prints a readable report, or one JSON object with ``--json``. Bad arguments
exit with status 2 and a one-line message naming the option.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "build_parser", "config_from_args"]


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


def _int_arg(name: str, lo: int = 1, hi: int | None = None):  # type: ignore[no-untyped-def]
    """argparse type: an int in [lo, hi), with an error naming the option."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if v < lo or (hi is not None and v >= hi):
            allowed = f">= {lo}" if hi is None else f"in [{lo}, {hi})"
            raise argparse.ArgumentTypeError(f"{name} must be {allowed}, got {v}")
        return v

    return parse


def _positive_float(name: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not v > 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number > 0, got {text}")
        return v

    return parse


def build_parser() -> argparse.ArgumentParser:
    from recnotebooks.config import preset_names

    p = argparse.ArgumentParser(prog="recnb", description="recnotebooks: DLRM training efficiency")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a DLRM on synthetic Criteo-like data and report measurements")
    t.add_argument("--preset", default="tiny", choices=preset_names(), help="model preset (default tiny)")
    t.add_argument("--steps", type=_int_arg("--steps"), default=400)
    t.add_argument("--batch-size", type=_int_arg("--batch-size"), default=1024)
    t.add_argument("--seed", type=_int_arg("--seed", 0, 2**63), default=0)
    t.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda[:N]")
    g = t.add_argument_group("architecture overrides (dlrm repo notation)")
    g.add_argument("--tables", type=_int_arg("--tables"), help="number of tables (all --rows rows)")
    g.add_argument("--rows", type=_int_arg("--rows"), help="rows per table")
    g.add_argument("--dim", type=_int_arg("--dim"), help="embedding dimension")
    g.add_argument("--pooling", type=_positive_float("--pooling"), help="lookups per table per sample")
    g.add_argument("--bottom", help="bottom MLP incl. input width, e.g. 13-512-256-64")
    g.add_argument("--top", help="top MLP outputs, e.g. 512-512-256-1 (input width is derived)")
    g.add_argument("--interaction", choices=["dot", "cat"])
    g.add_argument("--max-rows", type=_int_arg("--max-rows"), help="cap every table's rows")
    o = t.add_argument_group("optimisation")
    o.add_argument("--sparse-optimizer", choices=["rowwise_adagrad", "sgd"], default="rowwise_adagrad")
    o.add_argument("--sparse-lr", type=_positive_float("--sparse-lr"), default=0.05)
    o.add_argument("--dense-optimizer", choices=["adagrad", "sgd", "adam"], default="adagrad")
    o.add_argument("--dense-lr", type=_positive_float("--dense-lr"), default=0.02)
    o.add_argument("--eval-batches", type=_int_arg("--eval-batches"), default=10)
    o.add_argument("--zipf", type=_positive_float("--zipf"), help="Zipf exponent of id popularity")
    t.add_argument("--json", action="store_true", help="print one JSON object")

    d = sub.add_parser("doctor", help="versions, devices, threads, and whether the notebooks will work")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    from recnotebooks.perf.commands import add_parsers

    add_parsers(sub, _int_arg, _positive_float)
    return p


def config_from_args(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The preset named by ``--preset`` with the architecture overrides applied."""
    import dataclasses

    from recnotebooks.config import TableConfig, parse_mlp, preset

    cfg = preset(args.preset)
    changes: dict[str, Any] = {}
    try:
        if args.bottom:
            widths = parse_mlp(args.bottom, "--bottom")
            if len(widths) < 2:
                raise CLIError(f"--bottom must include the input width and >= 1 layer, got {args.bottom!r}")
            changes["num_dense"], changes["bottom_mlp"] = widths[0], widths[1:]
        if args.top:
            changes["top_mlp"] = parse_mlp(args.top, "--top")
    except ValueError as e:
        raise CLIError(str(e)) from None
    if args.dim:
        changes["embedding_dim"] = args.dim
    if args.interaction:
        changes["interaction"] = args.interaction
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
        raise CLIError(str(e)) from None
    return cfg


def _check_memory(cfg, device) -> None:  # type: ignore[no-untyped-def]
    from recnotebooks.doctor import available_memory_bytes

    need = cfg.memory_footprint("rowwise_adagrad", "adagrad")["total"]
    have = available_memory_bytes(device)
    if have is not None and need > 0.8 * have:
        raise CLIError(
            f"preset {cfg.name!r} needs about {need / 2**30:.1f} GiB for weights and optimizer state but "
            f"{device} has {have / 2**30:.1f} GiB available; use --max-rows N to cap table sizes"
        )


def cmd_train(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo
    from recnotebooks.nn import DLRM
    from recnotebooks.train import TrainConfig, Trainer, resolve_device

    cfg = config_from_args(args)
    try:
        device = resolve_device(args.device)
        tc = TrainConfig(
            steps=args.steps, sparse_optimizer=args.sparse_optimizer, sparse_lr=args.sparse_lr,
            dense_optimizer=args.dense_optimizer, dense_lr=args.dense_lr, eval_batches=args.eval_batches,
            progress=not args.json and sys.stderr.isatty(),
        )  # fmt: skip
        data_cfg = SyntheticConfig(zipf_exponent=args.zipf) if args.zipf else SyntheticConfig()
    except (ValueError, TypeError) as e:
        raise CLIError(str(e)) from None
    _check_memory(cfg, device)
    torch.manual_seed(args.seed)
    train = SyntheticCriteo(cfg, args.batch_size, data_cfg, seed=args.seed, split="train")
    evals = SyntheticCriteo(cfg, args.batch_size, data_cfg, seed=args.seed, split="eval")
    model = DLRM(cfg, device=device, seed=args.seed)
    res = Trainer(model, train, evals, tc, device=device).fit()
    return {
        "command": "train",
        "source": "measured",
        "preset": args.preset,
        "config": cfg.summary(),
        "device": res.device,
        "threads": torch.get_num_threads(),
        "steps": res.steps,
        "batch_size": res.batch_size,
        "samples_per_s": res.samples_per_s,
        "seconds_per_step": res.seconds_per_step,
        "auc": res.auc,
        "logloss": res.logloss,
        "ne": res.ne,
        "phases": res.phases,
    }


def _print_train(r: dict[str, Any]) -> None:
    c = r["config"]
    print(f"{c['name']}: {c['num_tables']} tables, {c['total_rows']:,} rows, dim {c['embedding_dim']}, "
          f"bottom {c['bottom_mlp']}, top {c['top_mlp']}, {c['interaction']}")  # fmt: skip
    print(f"measured on {r['device']} ({r['threads']} threads): {r['steps']} steps of {r['batch_size']}")
    print(f"  throughput  {r['samples_per_s']:,.0f} samples/s  ({r['seconds_per_step'] * 1e3:.2f} ms/step)")
    if r["auc"] is None:
        print("  eval        skipped (see the warning above)")
    else:
        print(f"  eval        AUC {r['auc']:.4f}   log loss {r['logloss']:.4f}   NE {r['ne']:.4f}")
    total = sum(r["phases"].values()) or 1.0
    print("  phase breakdown (ms/step):")
    for k, v in r["phases"].items():
        print(f"    {k:<18} {v * 1e3:8.2f}  {100 * v / total:5.1f}%")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "train":
            result = cmd_train(args)
            printer = _print_train
        elif args.command in ("cost", "plan", "calibrate", "validate"):
            from recnotebooks.perf.commands import run

            result, printer = run(args, CLIError)
        else:
            from recnotebooks.doctor import doctor_report, print_doctor

            result = doctor_report()
            printer = print_doctor
    except CLIError as e:
        print(f"recnb {args.command}: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        printer(result)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
