"""``recnb validate``'s HSTU rows (recnotebooks.measure.validate): the sweep, the row a
measurement becomes (modeled by perf.hstu on the same calibrated machine), the HSTU rows' own
MAPE in the verdict and the text. Structure only: the measurements are stubbed, no timing."""

from __future__ import annotations

import json

import pytest

import recnotebooks.measure.validate as val
from recnotebooks.measure.hstu import HSTUMeasurement, capped_hstu, hstu_max_rows
from recnotebooks.measure.step import StepMeasurement
from recnotebooks.measure.validate import (
    HSTU_VALIDATION_SWEEP,
    TARGETS,
    VALIDATION_SWEEP,
    HSTUCase,
    ValidationResult,
    ValidationRow,
    validation_sweep,
)
from recnotebooks.perf.hardware import HARDWARE
from recnotebooks.perf.hstu import COMPONENTS, hstu_step

HW = HARDWARE["this_machine"]
PROBE = {"gflops": 60.0, "copy_bw": 9e9}


def test_the_sweep_varies_width_depth_lengths_and_padding() -> None:
    cases = [c for _, c, _ in validation_sweep()[len(VALIDATION_SWEEP) :]]
    names = [n for n, _, _ in validation_sweep()]
    assert names == VALIDATION_SWEEP + HSTU_VALIDATION_SWEEP and len(set(names)) == len(names)
    assert all(isinstance(c, HSTUCase) for c in cases) and all(
        n.startswith("HSTU") for n in HSTU_VALIDATION_SWEEP
    )
    assert len({c.config.dim for c in cases}) >= 3 and len({c.config.num_layers for c in cases}) >= 3
    assert len({max(c.lengths) for c in cases}) >= 2 and {c.padded for c in cases} == {False, True}
    jagged = [c for c in cases if len(set(c.lengths)) > 1]
    assert jagged, "a row of histories of different lengths"
    for c in cases:
        assert not c.config.context and all(0 <= n <= c.config.max_len for n in c.lengths)
    quick = validation_sweep(quick=True)
    assert [n for n, _, _ in quick] == VALIDATION_SWEEP[:5] + HSTU_VALIDATION_SWEEP[:2]


def _fake_hstu(case: HSTUCase, seconds: float) -> HSTUMeasurement:
    return HSTUMeasurement(
        config_name=case.config.name, batch_size=len(case.lengths), device="cpu", max_rows=1024, steps=3,
        phases={"embeddings": seconds / 2, "hstu": seconds / 2}, seconds_per_step=seconds,
        step_seconds=(seconds,) * 3, tokens=sum(case.lengths), lengths=case.lengths, padded=case.padded,
    )  # fmt: skip


def test_an_hstu_row_is_the_measurement_against_perf_hstu_on_the_same_machine() -> None:
    name, case, histories = validation_sweep()[-1]
    assert isinstance(case, HSTUCase)
    m = _fake_hstu(case, 0.05)
    row = val._compare(name, case, histories, m, [PROBE], HW)
    want = hstu_step(capped_hstu(case.config, hstu_max_rows(case.config)), HW, case.lengths, dtype="fp32",
                     padded=case.padded, fused_attention=False)  # fmt: skip
    assert row.architecture == "hstu" and row.tokens == sum(case.lengths) and row.batch_size == histories
    assert row.modeled_s == pytest.approx(want.step_seconds) and set(row.modeled_breakdown) == set(COMPONENTS)
    assert row.error == pytest.approx((want.step_seconds - 0.05) / 0.05)
    assert row.measured_phases == m.phases and row.reliable and row.max_rows == hstu_max_rows(case.config)
    dlrm_name, dlrm, bsz = validation_sweep()[0]
    plain = StepMeasurement("x", bsz, "cpu", 1024, 3, {"data": 0.01}, 0.01, step_seconds=(0.01,) * 3)
    assert val._compare(dlrm_name, dlrm, bsz, plain, [PROBE], HW).architecture == "dlrm"


def test_a_pass_measures_an_hstu_case_with_its_lengths_and_padding(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[object, ...]] = []

    def fake_hstu(config, lengths, *, padded, **timing):  # type: ignore[no-untyped-def]
        seen.append((config, tuple(lengths), padded, timing["threads"], timing["min_steps"]))
        return _fake_hstu(HSTUCase(config, tuple(lengths), padded), 0.02)

    monkeypatch.setattr(val, "measure_hstu_step", fake_hstu)
    monkeypatch.setattr(val, "measure_step", lambda *a, **k: pytest.fail("a DLRM measured"))
    monkeypatch.setattr(val, "probe", lambda *a, **k: dict(PROBE))
    sweep = validation_sweep()[len(VALIDATION_SWEEP) :]
    taken = val._pass(sweep, 0.01, "cpu")
    assert [(c.config, c.lengths, c.padded) for _, c, _ in sweep] == [s[:3] for s in seen]  # type: ignore[union-attr]
    assert all(isinstance(m, HSTUMeasurement) and p == PROBE for m, p in taken)
    r = val._result(HW, None, sweep, [taken], drift_correction=False)
    assert [c.config for c in r.configs] == HSTU_VALIDATION_SWEEP
    assert all(c.architecture == "hstu" for c in r.configs)


def _row(name: str, error: float, architecture: str = "dlrm", measured: float = 0.01) -> ValidationRow:
    return ValidationRow(
        config=name, batch_size=16, measured_s=measured, modeled_s=measured * (1 + error), error=error,
        steps=5, max_rows=1024, probe=PROBE, reliable=True, reliability="", measured_phases={},
        modeled_breakdown={}, architecture=architecture, tokens=1434 if architecture == "hstu" else 0,
    )  # fmt: skip


def _result(rows: list[ValidationRow]) -> ValidationResult:
    return ValidationResult("this_machine", tuple(rows), True, PROBE, PROBE, False)


def test_the_hstu_rows_are_held_to_the_same_target_on_their_own() -> None:
    dlrm = [_row(f"d{k}", 0.01 * (k % 3) * (-1) ** k, measured=0.001 * (k + 1)) for k in range(15)]
    hstu = [_row(f"HSTU {k}", 0.1 - 0.05 * k, "hstu", measured=0.1 * (k + 1)) for k in range(5)]
    good = _result([*dlrm, *hstu])
    assert good.hstu_mape == pytest.approx(0.06) and good.passed is True, good.verdict.why_not
    # every row within 15% on average, but the HSTU rows off by 40%: not passed, and it says why
    bad = _result([*dlrm, *(_row(f"HSTU {k}", 0.4, "hstu", measured=0.1 * (k + 1)) for k in range(5))])
    assert bad.mape <= TARGETS["mape"] and bad.passed is False
    assert any("HSTU rows' MAPE 40.0%" in w for w in bad.verdict.why_not)
    assert "HSTU rows alone: MAPE 40.0% over 5" in bad.summary()
    assert _result(dlrm).hstu_mape is None and "HSTU" not in _result(dlrm).summary()


def test_the_text_and_json_label_the_hstu_rows() -> None:
    r = _result([_row("rm1", 0.05), _row("HSTU Yambda-shaped", -0.1, "hstu")])
    lines = r.text().splitlines()
    assert lines[1].startswith("HSTU Yambda-shaped") and "(1,434 tokens)" in lines[1]
    assert "tokens" not in lines[0]
    d = json.loads(json.dumps(r.to_dict()))
    assert d["hstu_mape"] == pytest.approx(0.1)
    assert [c["architecture"] for c in d["configs"]] == ["dlrm", "hstu"]
    assert {t["architecture"] for t in r.rows()} == {"dlrm", "hstu"}
