"""``recnb validate`` and the placement of the machine's cores (recnotebooks.measure.validate,
verdict.apart and placement_reason, cores.handoff and calibrate.fit_calibration): a measurement whose
probes read the threads' cores sharing no cache where the calibration read them sharing one (a
VM's host moves its cores) is left out of its config's median while another is not, a config
with none left is NOT RELIABLE, and a calibration round so taken is left out of the fit. The
probe's figure is checked for what it can be on any machine (one thread, finite, positive); the
rules on stub measurements and rounds with given probes, no timing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import recnotebooks.measure.validate as val
from recnotebooks.measure.calibrate import handoff, probe
from recnotebooks.measure.step import StepMeasurement
from recnotebooks.measure.verdict import APART_HANDOFF, apart, placement_reason
from recnotebooks.perf.hardware import HARDWARE, Hardware

REF = {"gflops": 100.0, "copy_bw": 1e10, "handoff": 1.3}
SHARED = {"gflops": 100.0, "copy_bw": 1e10, "handoff": 1.2, "handoff_after": 2.6}
APART = {"gflops": 100.0, "copy_bw": 1.4e10, "handoff": 10.4, "handoff_after": 11.0}


def _m(seconds: float) -> StepMeasurement:
    return StepMeasurement("x", 64, "cpu", 1024, 9, {"data": seconds}, seconds, step_seconds=(seconds,) * 9)


def test_handoff_is_one_on_one_thread_and_a_finite_ratio_on_more() -> None:
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert handoff(1) == 1.0
        torch.set_num_threads(max(2, threads))
        h = handoff(1)
        assert math.isfinite(h) and h > 0
    finally:
        torch.set_num_threads(threads)
    p = probe(1)
    assert set(p) == {"gflops", "copy_bw", "handoff"} and p["handoff"] > 0


def test_placement_reason_reads_both_readings_against_the_calibration() -> None:
    assert apart(SHARED) is None and apart(APART) == 11.0 and apart({"gflops": 1.0}) is None
    assert placement_reason(SHARED, REF) == ""
    why = placement_reason(APART, REF)
    assert "shared no cache, unlike when calibrated" in why and "11.0x" in why and "1.3x then" in why
    # a reading after the measurement alone is enough: the placement changed during it
    assert placement_reason({**SHARED, "handoff_after": APART_HANDOFF}, REF)
    assert placement_reason({**SHARED, "handoff_after": APART_HANDOFF * 0.99}, REF) == ""
    # a machine calibrated apart (threads that never share a cache) is measured as it is
    assert placement_reason(APART, {"handoff": 10.4}) == placement_reason(SHARED, {"handoff": 10.4}) == ""
    # nothing to compare: a GPU's probe, an older calibration's
    assert placement_reason({"gflops": 1.0, "copy_bw": 1.0}, REF) == ""
    assert placement_reason(APART, {"gflops": 100.0, "copy_bw": 1e10}) == placement_reason(APART, None) == ""


def test_measurements_taken_apart_are_left_out_of_the_median() -> None:
    taken = [
        (_m(0.016), APART),
        (_m(0.011), SHARED),
        (_m(0.012), SHARED),
        (_m(0.0165), APART),
        (_m(0.013), SHARED),
    ]
    m, probes, left_out, why = val._median_of(taken, REF)
    assert m.seconds_per_step == 0.012 and left_out == 2 and why == "" and probes == [SHARED] * 3
    # without a reference reading every measurement counts, as before
    m, _, left_out, why = val._median_of(taken, {"gflops": 100.0, "copy_bw": 1e10})
    assert m.seconds_per_step == 0.013 and left_out == 0 and why == ""
    # none left: all count, and the config says why it cannot be trusted
    m, _, left_out, why = val._median_of([(_m(0.016), APART), (_m(0.015), APART), (_m(0.017), APART)], REF)
    assert m.seconds_per_step == 0.016 and left_out == 0 and why == placement_reason(APART, REF)


def test_a_config_measured_only_apart_is_not_reliable_and_one_left_out_says_so() -> None:
    sweep = val.validation_sweep()[:2]
    passes = [
        [(_m(0.010), SHARED), (_m(0.020), APART)],
        [(_m(0.013), APART), (_m(0.021), APART)],
        [(_m(0.011), SHARED), (_m(0.022), APART)],
    ]
    r = val._result(HARDWARE["this_machine"], REF, sweep, passes, drift_correction=False)
    first, second = r.configs
    assert first.measured_s == pytest.approx(0.011) and first.left_out == 1 and first.reliable
    assert second.measured_s == pytest.approx(0.021) and second.left_out == 0 and not second.reliable
    assert second.reliability == placement_reason(APART, REF)
    # the run's speed and the row's probe leave the measurements left out out too
    assert first.probe == {"gflops": 100.0, "copy_bw": 1e10, "handoff": 1.2}
    assert r.run_probe["copy_bw"] == 1.4e10  # two kept of the first, three of the second
    text = r.text()
    assert "1 measurement left out: taken while its threads' cores shared no cache" in text
    assert any("NOT RELIABLE" in w and sweep[1][0] in w for w in r.verdict.why_not)
    assert r.to_dict()["configs"][0]["left_out"] == 1  # type: ignore[index]


def test_a_calibration_leaves_out_its_rounds_taken_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    import recnotebooks.measure.calibrate as cal

    seen: list[list[float]] = []

    def median_round(rounds):  # type: ignore[no-untyped-def]
        seen.append([r["x"] for r in rounds])
        return {}

    monkeypatch.setattr(cal, "_median_round", median_round)
    monkeypatch.setattr(cal, "_compute_fields", lambda t, dev, quick, raw: {})
    monkeypatch.setattr(cal, "_overheads", lambda base, pairs: (1e-6, 1e-5))

    def round_(x: float, *probes: dict[str, float]) -> dict[str, object]:
        return {"x": x, "probes": list(probes), "overhead pairs": [(x, x)]}

    rounds = [round_(1.0, SHARED, SHARED), round_(2.0, SHARED, APART), round_(3.0, REF, REF)]
    _, raw = cal.fit_calibration(rounds, "cpu")
    assert seen[-1] == [1.0, 3.0] and raw["rounds_left_out"] == 1 and raw["rounds"] == 2
    assert raw["probe"]["handoff"] == pytest.approx(1.25)  # type: ignore[index]
    # every round reported, the one left out said so
    assert [r["left_out"] for r in raw["per_round"]] == [False, True, False]  # type: ignore[attr-defined]
    assert raw["per_round"][1]["probe"]["handoff"] == pytest.approx((1.2 + 10.4) / 2)  # type: ignore[index]
    # every round apart: all kept (this machine's threads share no cache), none left out
    _, raw = cal.fit_calibration([round_(1.0, APART, APART), round_(2.0, APART, APART)], "cpu")
    assert seen[-1] == [1.0, 2.0] and raw["rounds_left_out"] == 0


def test_a_failed_run_calibrated_apart_says_why() -> None:
    sweep = val.validation_sweep()[:2]
    passes = [[(_m(0.010), APART), (_m(0.020), APART)]]
    r = val._result(HARDWARE["this_machine"], {**REF, "handoff": 10.1}, sweep, passes, drift_correction=False)
    assert all(c.left_out == 0 and c.reliable for c in r.configs)  # calibrated apart: measured as it is
    why = r.verdict.why_not
    assert r.passed is False and any("sharing no cache (10.1x" in w for w in why)
    # calibrated with a shared cache: no such line (a fail there is the model's or the measurement's)
    r = val._result(HARDWARE["this_machine"], REF, sweep, [[(_m(0.010), SHARED), (_m(0.020), SHARED)]], False)
    assert r.passed is False and not any("sharing no cache" in w for w in r.verdict.why_not)


def test_recnb_validate_reports_what_each_calibration_round_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import recnotebooks.commands.measure as cmd
    from recnotebooks.cli import main

    sweep = val.validation_sweep()[:2]
    passes = [[(_m(0.01), SHARED), (_m(0.02), SHARED)]]
    result = val._result(HARDWARE["this_machine"], REF, sweep, passes, False)
    rounds = [{"probe": REF, "op_overhead_s": 2.5e-6, "left_out": False},
              {"probe": APART, "op_overhead_s": 4.6e-6, "left_out": True}]  # fmt: skip
    raw = {"probe": REF, "rounds": 2, "per_round": rounds}
    monkeypatch.setattr(cmd, "calibrate_and_validate", lambda **kw: (result, HARDWARE["this_machine"], raw))
    monkeypatch.setenv("RECNB_CALIBRATION", str(tmp_path / "cal.json"))
    main(["validate", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["calibration"] == json.loads(json.dumps(raw)) and out["command"] == "validate"
    assert (tmp_path / "cal.json").exists()  # saved as before
    # the figures the model ran on, kept so that the run can be judged again (measure.validate.remodel)
    assert Hardware(**out["model_hardware"]) == HARDWARE["this_machine"]


def test_the_saved_calibration_keeps_its_rounds_and_validate_saved_reports_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``recnb validate`` saves what each calibration round read beside the fit; a later
    ``--saved`` run reports them from the file (a failed run says what its calibration read)."""
    import recnotebooks.commands.measure as cmd
    from recnotebooks.cli import main
    from recnotebooks.perf.calibration_file import load_probe, load_rounds
    from recnotebooks.perf.hardware import load_calibration, save_calibration

    sweep = val.validation_sweep()[:2]
    result = val._result(
        HARDWARE["this_machine"], REF, sweep, [[(_m(0.01), SHARED), (_m(0.02), SHARED)]], False
    )
    rounds = [
        {"probe": REF, "op_overhead_s": 2.5e-6, "hstu_op_overhead_s": 3.9e-6, "left_out": False},
        {"probe": APART, "op_overhead_s": 4.6e-6, "hstu_op_overhead_s": 7.2e-6, "left_out": True},
    ]
    raw = {"probe": REF, "rounds": 2, "per_round": rounds}
    monkeypatch.setattr(cmd, "calibrate_and_validate", lambda **kw: (result, HARDWARE["this_machine"], raw))
    path = tmp_path / "cal.json"
    monkeypatch.setenv("RECNB_CALIBRATION", str(path))
    main(["validate", "--json"])
    capsys.readouterr()
    assert load_rounds() == rounds and load_probe() == REF
    assert load_calibration() == HARDWARE["this_machine"]  # the fit reads back as before
    seen: list[object] = []

    def saved_validate(hw: object, ref: object, **kw: object) -> val.ValidationResult:
        seen.append(ref)
        return result

    monkeypatch.setattr(cmd, "validate", saved_validate)
    main(["validate", "--saved", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert seen == [REF]
    assert out["calibration"] == {"saved": str(path), "probe": REF, "per_round": rounds}
    # a file saved before the rounds were kept: --saved reports none, and nothing else changes
    save_calibration(HARDWARE["this_machine"], REF, path)
    assert load_rounds() is None and "rounds" not in json.loads(path.read_text())
    main(["validate", "--saved", "--json"])
    assert "calibration" not in json.loads(capsys.readouterr().out)


def test_save_calibration_refuses_rounds_it_cannot_keep(tmp_path: Path) -> None:
    from recnotebooks.perf.hardware import save_calibration

    path = tmp_path / "cal.json"
    with pytest.raises(TypeError, match=r"rounds must be a list of dicts \(per_round\) or None, got"):
        save_calibration(HARDWARE["this_machine"], REF, path, rounds={"probe": REF})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rounds must hold JSON figures only"):
        save_calibration(HARDWARE["this_machine"], REF, path, rounds=[{"probe": object()}])
    assert not path.exists()  # nothing half-written
