"""``recnb calibrate`` and ``recnb validate``: measure this machine, and the model against it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from recnotebooks.measure import validate_dist
from recnotebooks.measure.calibrate import (
    calibrate,
    calibration_path,
    load_calibration,
    load_probe,
    save_calibration,
)
from recnotebooks.measure.calibrate_comm import calibrate_collectives
from recnotebooks.measure.validate import ValidationResult, calibrate_and_validate, validate
from recnotebooks.measure.verdict import Verdict
from recnotebooks.perf.calibration_file import COLLECTIVE_FIELDS, COLLECTIVES_SOURCE, check_calibration_path
from recnotebooks.train import resolve_device

__all__ = ["add_parsers", "print_validation", "run"]

COMMANDS = ("calibrate", "validate")
DEVICES = "cpu, cuda or cuda:N"


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``calibrate`` and ``validate`` to ``sub``."""
    cal = sub.add_parser("calibrate", help="microbenchmark this machine and save the fitted 'this_machine'")
    cal.add_argument("--quick", action="store_true", help="fewer repetitions")
    cal.add_argument("--device", default="cpu", help=f"{DEVICES} (default cpu)")
    cal.add_argument(
        "--collectives",
        action="store_true",
        help="also time all-to-all and all-reduce over gloo on 2 and 4 local ranks "
        "(~20-40 s) and fit collective_latency_s and intra_node_bw, and our sharded "
        "step's host cost per operator on one rank (sharded_op_overhead_s)",
    )
    cal.add_argument("--json", action="store_true", help="print one JSON object")
    v = sub.add_parser("validate", help="modeled vs measured step time over a sweep of architectures here")
    v.add_argument("--quick", action="store_true", help="5 configs instead of the full sweep")
    v.add_argument(
        "--saved", action="store_true", help="use the saved calibration instead of calibrating now"
    )
    v.add_argument("--device", default="cpu", help=f"{DEVICES} (default cpu)")
    v.add_argument(
        "--distributed",
        action="store_true",
        help="sharded training on 2 and 4 local gloo ranks vs the model (step and collective "
        "time, >= 8 plans; ~90 s, --quick ~40 s); calibrates the collectives now",
    )
    v.add_argument("--json", action="store_true", help="print one JSON object")


def _device(text: str) -> str:
    """``--device`` checked: ``tpu``, ``gpu`` or a missing CUDA device are refused, not run on CPU."""
    if text == "auto":
        raise ValueError(f"--device must be one of {DEVICES} (it names the device measured), got 'auto'")
    try:
        return str(resolve_device(text))
    except ValueError as e:
        raise ValueError(f"--device: {e}") from None


def run(
    args: argparse.Namespace, error: type[Exception]
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], None]]:
    try:
        return _COMMANDS[args.command](args)
    except ValueError as e:
        raise error(str(e)) from None


def cmd_calibrate(args: argparse.Namespace) -> tuple[dict[str, Any], Callable[[dict[str, Any]], None]]:
    dev = _device(args.device)
    check_calibration_path(kind="gpu" if dev.startswith("cuda") else "cpu")  # before minutes of measuring
    hw, raw = calibrate(device=dev, quick=args.quick)
    if getattr(args, "collectives", False):
        hw, raw["collectives"] = calibrate_collectives(hw, quick=args.quick)
    path = save_calibration(hw, raw["probe"])  # type: ignore[arg-type]
    out = {"command": "calibrate", "saved_to": str(path), "hardware": hw.summary(), "microbenchmarks": raw,
           "collectives_sources": [str(hw.sources.get(f, "")) for f in COLLECTIVE_FIELDS],
           **{k: raw[k] for k in ("passed", "verdict", "why_not")}}  # fmt: skip
    return out, _print_calibrate


def _print_calibrate(r: dict[str, Any]) -> None:
    h = r["hardware"]
    verdict = Verdict(r["passed"], tuple(r["why_not"]))  # first, as prominent as the figures
    print(
        "\n".join(
            verdict.lines(f"MEASURED microbenchmarks, fitted into 'this_machine' (saved to {r['saved_to']}):")
        )
    )
    gflops = h["peak_flops"]["fp32"] / 1e9
    print(f"  GEMM: peak {gflops:,.0f} GFLOP/s, half-efficiency dimension {h['gemm_half_dim']:.1f}")
    print(
        f"  copy bandwidth {h['hbm_bw'] / 1e9:.1f} GB/s (read + write); row gathers at "
        f"{h['gather_efficiency']:.2f} of it for large rows "
        f"(half at {h['gather_half_row_bytes']:.0f} B rows)"
    )
    print(
        f"  sort {h['sort_rate'] / 1e6:.0f} M pairs/s; per operator {h['op_overhead_s'] * 1e6:.1f} us; "
        f"per step {h['step_overhead_s'] * 1e3:.2f} ms"
    )
    comm = r["microbenchmarks"].get("collectives")
    if not comm and h["kind"] == "cpu":  # a GPU's link figures come from its own copy benchmark
        kept = any(s.startswith(COLLECTIVES_SOURCE) for s in r.get("collectives_sources", []))
        print(
            f"  collectives: latency {h['collective_latency_s'] * 1e6:.0f} us per step, bandwidth "
            f"{h['intra_node_bw'] / 1e9:.2f} GB/s, "
            + (
                "kept from the saved --collectives calibration"
                if kept
                else "the preset's (--collectives measures them here)"
            )
        )
    if comm:
        how = {"in_step": "each call after compute, as in a step", "back_to_back": "back to back"}
        print(
            f"  collectives (gloo, local ranks, {how.get(comm.get('pattern', ''), 'timed')}): latency "
            f"{h['collective_latency_s'] * 1e6:.0f} us per step, bandwidth "
            f"{h['intra_node_bw'] / 1e9:.2f} GB/s (fit error {comm['mape']:.0%})"
        )
        for f in comm["fits"]:
            print(
                f"    {f['collective']:<10} {f['world_size']} ranks: {f['latency_s'] * 1e6:7.0f} us + "
                f"bytes / {f['bandwidth'] / 1e9:.2f} GB/s"
            )
        ops = comm.get("sharded_op")
        if ops:
            print(
                f"  our sharded step on one rank: {ops['sharded_s'] * 1e3:.1f} ms vs "
                f"{ops['single_s'] * 1e3:.1f} ms single-process (batch {ops['batch_size']}; collectives "
                f"{ops['collectives_s'] * 1e3:.1f} ms): {ops['sharded_op_overhead_s'] * 1e6:.1f} us per "
                f"operator it adds ({ops['extra_ops']:.0f} counted)"
            )


def cmd_validate(args: argparse.Namespace) -> tuple[dict[str, Any], Callable[[dict[str, Any]], None]]:
    dev = _device(args.device)
    if getattr(args, "distributed", False):
        if dev != "cpu":
            raise ValueError(f"--distributed runs local CPU ranks (gloo): --device must be cpu, got {dev!r}")
        dist = validate_dist.validate_distributed(quick=args.quick, saved=args.saved)
        return dist.to_dict(), lambda _: validate_dist.print_report(dist)
    kind = "gpu" if dev.startswith("cuda") else "cpu"
    if args.saved:
        hw, ref = load_calibration(kind=kind), load_probe(kind=kind)
        if hw is None or ref is None:
            path = calibration_path(kind)
            state = "is unreadable or invalid (corrupt?)" if path.exists() else "does not exist"
            raise ValueError(
                f"--saved: the saved {kind} calibration {str(path)!r} {state}; "
                "run `recnb calibrate` first, or drop --saved to calibrate now"
            )
        result = validate(hw, ref, quick=args.quick, device=dev)
    else:
        check_calibration_path(kind=kind)  # before minutes of measuring
        result, hw, raw = calibrate_and_validate(device=dev, quick=args.quick)
        save_calibration(hw, raw["probe"])  # type: ignore[arg-type]
    return result.to_dict(), lambda _: print_validation(result)


def print_validation(r: ValidationResult) -> None:
    """The CLI's table of :func:`~recnotebooks.measure.validate.validate`'s result."""
    print("MEASURED here vs MODELED for 'this_machine' (step time of a row-capped copy):")
    print(r.text())


_COMMANDS = {"calibrate": cmd_calibrate, "validate": cmd_validate}
