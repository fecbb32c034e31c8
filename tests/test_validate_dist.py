"""recnotebooks.measure.validate_dist and the sharing rule ``local_ranks_hardware``: the rule as a pure
function, the sweep's plans, one quick real run on 2 local ranks, the CLI wiring, and bad input."""

from __future__ import annotations

import json
import math

import pytest

from recnotebooks.config import preset
from recnotebooks.measure import calibrate_comm as CC
from recnotebooks.measure import validate_dist as VD
from recnotebooks.perf.hardware import HARDWARE
from recnotebooks.plan import mixed_plan

HW = HARDWARE["this_machine"]


def test_sharing_rule_divides_throughput_and_scales_overheads_only_when_oversubscribed() -> None:
    two = CC.local_ranks_hardware(HW, 2, cores=2)
    assert two.devices == 2
    assert two.peak_flops["fp32"] == pytest.approx(HW.peak_flops["fp32"] / 2)
    for f in CC.SHARED_THROUGHPUT_FIELDS:
        assert getattr(two, f) == pytest.approx(getattr(HW, f) / 2)
    assert two.hbm_bytes == pytest.approx(HW.hbm_bytes / 2)
    assert two.op_overhead_s == HW.op_overhead_s and two.step_overhead_s == HW.step_overhead_s
    four = CC.local_ranks_hardware(HW, 4, cores=2)
    assert four.peak_flops["fp32"] == pytest.approx(HW.peak_flops["fp32"] / 4)
    assert four.op_overhead_s == pytest.approx(2 * HW.op_overhead_s)
    assert four.step_overhead_s == pytest.approx(2 * HW.step_overhead_s)
    # collectives were measured at that rank count: unchanged without rows
    assert four.collective_latency_s == HW.collective_latency_s and four.intra_node_bw == HW.intra_node_bw
    one = CC.local_ranks_hardware(HW, 1, cores=8)
    assert one.peak_flops == HW.peak_flops and one.op_overhead_s == HW.op_overhead_s
    assert HW.devices == 1  # the input is not changed
    assert four.sharded_op_overhead_s is None  # not calibrated: op_overhead_s (scaled) prices it
    assert four.sharded_op_cost_s == four.op_overhead_s
    cal = CC.local_ranks_hardware(HW.replace(sharded_op_overhead_s=15e-6), 4, cores=2)
    assert cal.sharded_op_overhead_s == pytest.approx(30e-6)


def test_sharing_rule_refits_collectives_on_the_rows_of_its_world_size() -> None:
    def rows(alpha: float, bw: float, w: int) -> list[dict[str, object]]:
        out = []
        for c in CC.COLLECTIVES:
            for b in CC.QUICK_SIZES:
                steps, volume = CC.model_steps(c, w), CC.model_volume(c, b, w)
                out.append({"collective": c, "world_size": w, "volume": volume, "steps": steps,
                            "seconds": alpha * steps + volume / bw})  # fmt: skip
        return out

    both = rows(50e-6, 1e9, 2) + rows(200e-6, 0.4e9, 4)
    h2, h4 = CC.local_ranks_hardware(HW, 2, 2, both), CC.local_ranks_hardware(HW, 4, 2, both)
    assert (h2.collective_latency_s, h2.intra_node_bw) == pytest.approx((50e-6, 1e9), rel=1e-6)
    assert (h4.collective_latency_s, h4.intra_node_bw) == pytest.approx((200e-6, 0.4e9), rel=1e-6)
    h3 = CC.local_ranks_hardware(HW, 3, 2, both)  # no rows for 3 ranks: the given figures
    assert h3.collective_latency_s == HW.collective_latency_s


@pytest.mark.parametrize("world", [0, -1])
def test_sharing_rule_refuses_non_positive_world(world: int) -> None:
    with pytest.raises(ValueError, match="world"):
        CC.local_ranks_hardware(HW, world)


def test_sharing_rule_bad_types() -> None:
    with pytest.raises(TypeError, match="world"):
        CC.local_ranks_hardware(HW, 2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="hw"):
        CC.local_ranks_hardware("this_machine", 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cores"):
        CC.local_ranks_hardware(HW, 2, cores=0)


def test_sweep_has_every_scheme_and_valid_plans() -> None:
    full, quick = VD.sweep((2, 4)), VD.sweep((2, 4), quick=True)
    assert len(full) >= VD.TARGETS["configs"] and len(quick) >= VD.TARGETS["configs"]
    strategies = {it["plan"].strategy for it in full}
    for s in ("table_wise", "row_wise", "column_wise", "data_parallel"):
        assert f"round_robin_{s}" in strategies
    assert "mixed" in strategies
    for it in full:
        it["plan"].validate(it["config"])
        assert it["batch_size"] % it["plan"].world_size == 0
    kinds = {sh.sharding for sh in mixed_plan(preset("tiny"), 2).shards}
    assert kinds == {"table_wise", "row_wise", "column_wise", "data_parallel"}


def test_quick_real_run_on_two_ranks_reports_step_and_collectives() -> None:
    names = ["tiny table_wise x2", "tiny row_wise x2"]
    r = VD.validate_distributed((2,), quick=True, hw=HW, steps=3, names=names)
    assert [c.config for c in r.configs] == names
    for c in r.configs:
        assert c.measured_s > 0 and c.modeled_s > 0 and math.isfinite(c.error)
        for coll in VD.COLLECTIVES:
            assert c.measured_collectives[coll] > 0 and c.modeled_breakdown[coll] > 0
    kinds = {(row["source"], row["kind"], row.get("collective")) for row in r.rows()}
    for src in ("measured", "modeled"):
        assert {
            (src, "step", None),
            (src, "collective", "all_to_all"),
            (src, "collective", "all_reduce"),
        } <= kinds
    # fewer than 8 configs: not judged, unless a target is missed
    assert r.passed is (None if r.mape <= VD.TARGETS["mape"] and r.spearman >= 0.9 else False)
    assert math.isfinite(r.mape)
    # the JSON of `recnb validate --distributed --json`: the schema it had as a dict
    d = json.loads(json.dumps(r.to_dict(), default=str))
    assert (
        d["distributed"] is True
        and d["pass"] is d["passed"] is r.passed
        and d["mape"] == pytest.approx(r.mape)
    )
    assert d["why_not"] == list(r.verdict.why_not)
    assert d["rows"] == r.rows() and d["worlds"] == [2] and d["calibration"] == "given"
    for c, row in zip(r.configs, d["configs"], strict=True):
        assert row["measured_all_to_all_s"] == c.measured_collectives["all_to_all"]
        assert row["modeled_all_reduce_s"] == c.modeled_breakdown["all_reduce"]
        assert row["error"] == pytest.approx((row["modeled_s"] - row["measured_s"]) / row["measured_s"])


def _row(name: str, measured: float, modeled: float) -> VD.DistValidationRow:
    """A made-up row: step times and collectives (all_to_all 1 ms measured, 2 ms modeled)."""
    return VD.DistValidationRow(
        config=name,
        world_size=2,
        batch_size=512,
        strategy="table_wise",
        measured_s=measured,
        modeled_s=modeled,
        error=modeled / measured - 1,
        modeled_without_drift_correction_s=2 * modeled,
        measured_data_s=0.0,
        measured_collectives={"all_to_all": 1e-3, "all_reduce": 0.0},
        measured_phases={},
        modeled_breakdown={"all_to_all": 2e-3, "all_reduce": 0.0},
    )


def _result(*rows: VD.DistValidationRow) -> VD.DistValidationResult:
    return VD.DistValidationResult(
        hardware=HW,
        calibration="given",
        collective_rows=(),
        worlds=(2,),
        steps=3,
        configs=rows,
        drift_correction=False,
        calibration_seconds=0.0,
        seconds=1.0,
    )


def test_result_totals_and_tidy_rows_by_hand() -> None:
    r = _result(_row("a", 1.0, 1.1), _row("b", 2.0, 0.9), _row("c", 3.0, 3.3))
    assert r.mape == pytest.approx((0.1 + 0.55 + 0.1) / 3)
    assert r.mape_without_drift_correction == pytest.approx((1.2 + 0.1 + 1.2) / 3)
    assert r.spearman == pytest.approx(0.5)  # ranks (0, 1, 2) against (1, 0, 2): 1 - 6 * 2 / (3 * 8)
    assert r.passed is False  # 3 configs, fewer than the 8 a verdict needs; MAPE and Spearman miss
    assert r.verdict.why_not == (
        "MAPE 25.0% is above the target of 20%",
        "Spearman 0.50 is below the target of 0.9",
        "3 configs, fewer than the 8 a verdict needs",
    )
    tidy = r.rows()
    assert len(tidy) == 3 * 2 * (1 + len(VD.COLLECTIVES))
    assert tidy[0] == {"config": "a", "world_size": 2, "source": "measured", "kind": "step", "seconds": 1.0}
    a2a = [t["seconds"] for t in tidy if t["config"] == "a" and t.get("collective") == "all_to_all"]
    assert a2a == [1e-3, 2e-3]  # measured, then modeled
    eight = _result(*[_row(f"c{k}", 1.0 + k, 1.05 * (1.0 + k)) for k in range(8)])
    assert eight.passed is True and eight.spearman == pytest.approx(1.0)


def test_bad_input_is_refused_before_any_process_starts(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="worlds"):
        VD.validate_distributed((1,), hw=HW)
    with pytest.raises(TypeError, match="worlds"):
        VD.validate_distributed("2", hw=HW)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="quick"):
        VD.validate_distributed((2,), quick="yes", hw=HW)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="hw"):
        VD.validate_distributed((2,), hw="this_machine")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="names"):
        VD.validate_distributed((2,), hw=HW, names=["no such config"])
    with pytest.raises(ValueError, match="steps"):
        VD.validate_distributed((2,), hw=HW, steps=1)
    monkeypatch.setenv("RECNB_CALIBRATION", str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="saved"):
        VD.validate_distributed((2,), saved=True)


def test_cli_validate_distributed_dispatches(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from recnotebooks import cli

    seen = {}

    def fake(quick: bool = False, saved: bool = False) -> VD.DistValidationResult:
        seen.update(quick=quick, saved=saved)
        return _result(_row("a", 1.0, 1.1), _row("b", 2.0, 2.1))

    monkeypatch.setattr(VD, "validate_distributed", fake)
    assert cli.main(["validate", "--distributed", "--quick", "--saved", "--json"]) in (0, None)
    assert seen == {"quick": True, "saved": True}
    assert '"distributed": true' in capsys.readouterr().out
    assert cli.main(["validate", "--distributed"]) in (0, None)  # the table printed from the result
    out = capsys.readouterr().out
    assert (
        "a " in out
        and "+10.0%" in out
        and "1.00/2.00" in out
        and "NOT JUDGED: MAPE" in out
        and "fewer than the 8 a verdict needs" in out
    )
