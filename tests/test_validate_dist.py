"""recnotebooks.measure.validate_dist and the sharing rule ``local_ranks_hardware``: the rule as a pure
function, the sweep's plans, one quick real run on 2 local ranks, the CLI wiring, and bad input."""

from __future__ import annotations

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
    assert [c["config"] for c in r["configs"]] == names
    for c in r["configs"]:
        assert c["measured_s"] > 0 and c["modeled_s"] > 0 and math.isfinite(c["error"])
        assert c["measured_all_to_all_s"] > 0 and c["modeled_all_to_all_s"] > 0
        assert c["measured_all_reduce_s"] > 0 and c["modeled_all_reduce_s"] > 0
    kinds = {(row["source"], row["kind"], row.get("collective")) for row in r["rows"]}
    for src in ("measured", "modeled"):
        assert {
            (src, "step", None),
            (src, "collective", "all_to_all"),
            (src, "collective", "all_reduce"),
        } <= kinds
    assert r["pass"] is None  # fewer than 8 configs: no verdict
    assert math.isfinite(r["mape"])


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

    def fake(quick: bool = False, saved: bool = False) -> dict[str, object]:
        seen.update(quick=quick, saved=saved)
        return {"command": "validate", "distributed": True, "configs": [], "mape": 0.0, "spearman": 1.0}

    monkeypatch.setattr(VD, "validate_distributed", fake)
    assert cli.main(["validate", "--distributed", "--quick", "--saved", "--json"]) in (0, None)
    assert seen == {"quick": True, "saved": True}
    assert '"distributed": true' in capsys.readouterr().out
