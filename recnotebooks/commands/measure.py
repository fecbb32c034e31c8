"""``recnb calibrate`` and ``recnb validate``: measure this machine, and the model against it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from recnotebooks.checks import check_int
from recnotebooks.measure import validate_dist
from recnotebooks.measure.calibrate import (
    calibrate,
    calibration_path,
    load_calibration,
    load_probe,
    save_calibration,
)
from recnotebooks.measure.calibrate_comm import calibrate_collectives
from recnotebooks.measure.validate import REPEATS, ValidationResult, calibrate_and_validate, validate
from recnotebooks.measure.verdict import Verdict
from recnotebooks.perf.calibration_file import (
    COLLECTIVE_FIELDS,
    COLLECTIVES_SOURCE,
    check_calibration_path,
    load_rounds,
)
from recnotebooks.train import resolve_device

from .parser import DEVICES
from .report import Report, print_lines, printer
from .settings import CLIError, MeasureSettings

__all__ = ["calibrate_command", "print_validation", "run", "validate_command"]


def run(s: MeasureSettings) -> Report:
    """``recnb calibrate`` or ``recnb validate``; a bad setting is a :class:`CLIError`."""
    try:
        return calibrate_command(s) if s.command == "calibrate" else validate_command(s)
    except ValueError as e:
        raise CLIError(str(e)) from None


def _device(text: str) -> str:
    """``--device`` checked: ``tpu``, ``gpu`` or a missing CUDA device are refused, not run on CPU."""
    if text == "auto":
        raise ValueError(f"--device must be one of {DEVICES} (it names the device measured), got 'auto'")
    try:
        return str(resolve_device(text))
    except ValueError as e:
        raise ValueError(f"--device: {e}") from None


def _kind(device: str) -> str:
    """The calibration a device's measurements go to: ``gpu`` or ``cpu``."""
    return "gpu" if device.startswith("cuda") else "cpu"


# ----- calibrate ------------------------------------------------------------------------------
def calibrate_command(s: MeasureSettings) -> Report:
    """``recnb calibrate``: microbenchmarks fitted into 'this_machine', saved."""
    dev = _device(s.device)
    check_calibration_path(kind=_kind(dev))  # before minutes of measuring
    hw, raw = calibrate(device=dev, quick=s.quick)
    if s.collectives:
        hw, raw["collectives"] = calibrate_collectives(hw, quick=s.quick)
    path = save_calibration(hw, raw["probe"], rounds=raw.get("per_round"))  # type: ignore[arg-type]
    out = {"command": "calibrate", "saved_to": str(path), "hardware": hw.summary(), "microbenchmarks": raw,
           "collectives_sources": [str(hw.sources.get(f, "")) for f in COLLECTIVE_FIELDS],
           **{k: raw[k] for k in ("passed", "verdict", "why_not")}}  # fmt: skip
    return Report(out, printer(calibrate_lines))


def calibrate_lines(r: dict[str, Any]) -> Iterator[str]:
    """``recnb calibrate``'s text: its verdict first, as prominent as the figures."""
    h = r["hardware"]
    verdict = Verdict(r["passed"], tuple(r["why_not"]))
    yield "\n".join(
        verdict.lines(f"MEASURED microbenchmarks, fitted into 'this_machine' (saved to {r['saved_to']}):")
    )
    gflops = h["peak_flops"]["fp32"] / 1e9
    yield f"  GEMM: peak {gflops:,.0f} GFLOP/s, half-efficiency dimension {h['gemm_half_dim']:.1f}"
    yield (
        f"  copy bandwidth {h['hbm_bw'] / 1e9:.1f} GB/s (read + write); row gathers at "
        f"{h['gather_efficiency']:.2f} of it for large rows "
        f"(half at {h['gather_half_row_bytes']:.0f} B rows)"
    )
    yield (
        f"  sort {h['sort_rate'] / 1e6:.0f} M pairs/s; per operator {h['op_overhead_s'] * 1e6:.1f} us; "
        f"per step {h['step_overhead_s'] * 1e3:.2f} ms"
    )
    comm = r["microbenchmarks"].get("collectives")
    if not comm and h["kind"] == "cpu":  # a GPU's link figures come from its own copy benchmark
        kept = any(s.startswith(COLLECTIVES_SOURCE) for s in r.get("collectives_sources", []))
        whose = (
            "kept from the saved --collectives calibration"
            if kept
            else "the preset's (--collectives measures them here)"
        )
        yield (
            f"  collectives: latency {h['collective_latency_s'] * 1e6:.0f} us per step, bandwidth "
            f"{h['intra_node_bw'] / 1e9:.2f} GB/s, " + whose
        )
    if comm:
        yield from _collectives_lines(h, comm)


def _collectives_lines(h: dict[str, Any], comm: dict[str, Any]) -> Iterator[str]:
    """``calibrate --collectives``: the fitted latency and bandwidth, each collective's fit, and our
    sharded step's cost per operator."""
    how = {"in_step": "each call after compute, as in a step", "back_to_back": "back to back"}
    yield (
        f"  collectives (gloo, local ranks, {how.get(comm.get('pattern', ''), 'timed')}): latency "
        f"{h['collective_latency_s'] * 1e6:.0f} us per step, bandwidth "
        f"{h['intra_node_bw'] / 1e9:.2f} GB/s (fit error {comm['mape']:.0%})"
    )
    for f in comm["fits"]:
        yield (
            f"    {f['collective']:<10} {f['world_size']} ranks: {f['latency_s'] * 1e6:7.0f} us + "
            f"bytes / {f['bandwidth'] / 1e9:.2f} GB/s"
        )
    ops = comm.get("sharded_op")
    if ops:
        yield (
            f"  our sharded step on one rank: {ops['sharded_s'] * 1e3:.1f} ms vs "
            f"{ops['single_s'] * 1e3:.1f} ms single-process (batch {ops['batch_size']}; collectives "
            f"{ops['collectives_s'] * 1e3:.1f} ms): {ops['sharded_op_overhead_s'] * 1e6:.1f} us per "
            f"operator it adds ({ops['extra_ops']:.0f} counted)"
        )


# ----- validate -------------------------------------------------------------------------------
def validate_command(s: MeasureSettings) -> Report:
    """``recnb validate``: modeled vs measured step time here (``--distributed``: on local ranks)."""
    dev = _device(s.device)
    repeats = REPEATS if s.repeats is None else check_int("--repeats", s.repeats, lo=1, hi=100)
    if s.distributed:
        if dev != "cpu":
            raise ValueError(f"--distributed runs local CPU ranks (gloo): --device must be cpu, got {dev!r}")
        if s.repeats is not None:
            raise ValueError(f"--repeats is for the single-process sweep, not --distributed; got {s.repeats}")
        dist = validate_dist.validate_distributed(quick=s.quick, saved=s.saved)
        return Report(dist.to_dict(), lambda _: validate_dist.print_report(dist))
    kind = _kind(dev)
    calibrated: dict[str, object] = {}  # --saved: no calibration this run
    if s.saved:
        hw, ref = load_calibration(kind=kind), load_probe(kind=kind)
        if hw is None or ref is None:
            path = calibration_path(kind)
            state = "is unreadable or invalid (corrupt?)" if path.exists() else "does not exist"
            raise ValueError(
                f"--saved: the saved {kind} calibration {str(path)!r} {state}; "
                "run `recnb calibrate` first, or drop --saved to calibrate now"
            )
        result = validate(hw, ref, quick=s.quick, device=dev, repeats=repeats)
        rounds = load_rounds(kind=kind)  # what the saved calibration's rounds read, where kept
        if rounds is not None:
            saved = {"saved": str(calibration_path(kind)), "probe": ref, "per_round": rounds}
            calibrated = {"calibration": saved}
    else:
        check_calibration_path(kind=kind)  # before minutes of measuring
        result, hw, raw = calibrate_and_validate(device=dev, quick=s.quick, repeats=repeats)
        save_calibration(hw, raw["probe"], rounds=raw.get("per_round"))  # type: ignore[arg-type]
        calibrated = {"calibration": raw}  # its figures, round by round: a failed run says what each read
    # the figures the model ran on, so that measure.validate.remodel can judge this run again later
    kept = {"model_hardware": dataclasses.asdict(hw)}
    return Report({**result.to_dict(), **kept, **calibrated}, lambda _: print_validation(result))


def print_validation(r: ValidationResult) -> None:
    """The CLI's table of :func:`~recnotebooks.measure.validate.validate`'s result."""
    print_lines(("MEASURED here vs MODELED for 'this_machine' (step time of a row-capped copy):", r.text()))
