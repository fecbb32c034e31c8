"""``measure.validate.remodel``: a recorded ``recnb validate`` run judged again by the model, on the
same measured steps. Judged by the same model it reads exactly as recorded; judged by another, only
the modeled side moves, to what the public cost models give for the run's calibration at its speed.
Stub measurements, no timing."""

from __future__ import annotations

import dataclasses
import json

import pytest

import recnotebooks.measure.validate as val
from recnotebooks.measure.calibrate import at_speed
from recnotebooks.measure.hstu import capped_hstu, hstu_max_rows
from recnotebooks.measure.step import StepMeasurement
from recnotebooks.perf.hardware import CALIBRATED_BY, HARDWARE, Hardware
from recnotebooks.perf.hstu import hstu_step

REF = {"gflops": 100.0, "copy_bw": 1e10, "handoff": 1.3}
SLOWER = {"gflops": 80.0, "copy_bw": 9e9, "handoff": 1.2}  # the run's speed: the model is scaled to it
HW = HARDWARE["this_machine"].replace(description=f"this machine, {CALIBRATED_BY}", hstu_op_overhead_s=4e-6)


def _m(seconds: float) -> StepMeasurement:
    return StepMeasurement("x", 64, "cpu", 1024, 9, {"data": seconds}, seconds, step_seconds=(seconds,) * 9)


def _report(hw: Hardware) -> tuple[val.ValidationResult, dict[str, object]]:
    """A run over the whole sweep (stub steps of 4, 8, 12, ... ms at SLOWER's speed) and its report
    as ``recnb validate --json`` writes it, through JSON."""
    sweep = val.validation_sweep()
    passes = [[(_m(0.004 * (i + 1)), SLOWER) for i in range(len(sweep))]]
    run = val._result(hw, REF, sweep, passes, drift_correction=True)
    return run, json.loads(json.dumps({**run.to_dict(), "model_hardware": dataclasses.asdict(hw)}))


def test_a_run_judged_again_by_the_same_model_reads_as_recorded() -> None:
    run, report = _report(HW)
    again = val.remodel(report)  # the calibration from the report itself
    assert [c.to_dict() for c in again.configs] == [c.to_dict() for c in run.configs]
    assert (again.mape, again.hstu_mape, again.spearman) == (run.mape, run.hstu_mape, run.spearman)
    assert again.passed == run.passed and again.calibrated and again.run_probe == run.run_probe


def test_another_model_moves_the_modeled_side_alone() -> None:
    run, report = _report(HW)
    dearer = HW.replace(hstu_op_overhead_s=8e-6)  # HSTU operators twice as dear
    again = val.remodel(report, dearer)
    cases = {name: cfg for name, cfg, _ in val.validation_sweep()}
    for before, now in zip(run.configs, again.configs, strict=True):
        assert (now.config, now.measured_s, now.measured_phases, now.probe, now.reliable) == (
            before.config, before.measured_s, before.measured_phases, before.probe, before.reliable
        )  # fmt: skip
        assert now.error == pytest.approx((now.modeled_s - now.measured_s) / now.measured_s)
        if now.architecture == "dlrm":
            assert now.modeled_s == before.modeled_s
            continue
        case = cases[now.config]
        assert isinstance(case, val.HSTUCase)
        capped = capped_hstu(case.config, hstu_max_rows(case.config))
        expected = hstu_step(capped, at_speed(dearer, SLOWER, REF), case.lengths, dtype="fp32",
                             padded=case.padded, attention="bucketed")  # fmt: skip
        assert now.modeled_s == pytest.approx(expected.step_seconds)
        assert now.modeled_breakdown["overhead"] > before.modeled_breakdown["overhead"]
    assert again.hstu_mape != run.hstu_mape


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda r: ["not", "a", "report"], TypeError, "recorded must be a validation report"),
        (lambda r: {**r, "command": "calibrate"}, ValueError, "recorded must be a report of recnb validate"),
        (lambda r: {**r, "configs": []}, ValueError, "recorded must be a report of recnb validate"),
        (lambda r: {k: v for k, v in r.items() if k != "model_hardware"}, ValueError, "give hw"),
        (lambda r: {**r, "run_probe": None}, ValueError, r"recorded\['run_probe'\]"),
        (lambda r: {**r, "configs": [{**r["configs"][0], "config": "MLPerf 2030"}]}, ValueError,
         r"recorded\['configs'\]\[0\] must be a row of the validation sweep, got 'MLPerf 2030'"),
        (lambda r: {**r, "configs": [{**r["configs"][0], "measured_s": 0.0}]}, ValueError,
         r"recorded\['configs'\]\[0\]\['measured_s'\]"),
        (lambda r: {**r, "configs": [{k: v for k, v in r["configs"][0].items() if k != "steps"}]},
         ValueError, r"recorded\['configs'\]\[0\] must hold a ValidationRow's fields"),
        (lambda r: {**r, "model_hardware": {**r["model_hardware"], "warp_drive": 1}}, ValueError,
         r"recorded\['model_hardware'\] must be a Hardware's fields"),
    ],
)  # fmt: skip
def test_what_is_not_a_recorded_run_is_named(change: object, error: type[Exception], match: str) -> None:
    _, report = _report(HW)
    with pytest.raises(error, match=match):
        val.remodel(change(report))  # type: ignore[operator]
    with pytest.raises(TypeError, match="hw must be a Hardware"):
        val.remodel(report, "this_machine")  # type: ignore[arg-type]
