"""``recnb cost`` / ``recnb plan`` output and errors; calibration and validation mechanics."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator
from contextlib import nullcontext as _no_raise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.cli import main
from recnotebooks.measure.calibrate import (
    at_speed,
    calibrate,
    load_calibration,
    load_probe,
    save_calibration,
)
from recnotebooks.measure.validate import spearman, validate, validation_sweep
from recnotebooks.perf.calibration_file import COLLECTIVES_SOURCE
from recnotebooks.perf.hardware import HARDWARE, Hardware, hardware


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """The command's ``--json`` object (JSON: its values are of any type)."""
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ----- cost and plan ---------------------------------------------------------------------------
def test_cost_json(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "cost", "--preset", "tiny", "--hardware", "dgx_a100")
    for key in ("step_time_s", "throughput", "fits", "breakdown_s", "memory_per_device_bytes"):
        assert key in out, key
    assert out["source"] == "modeled" and out["fits"] is True
    assert out["step_time_s"] > 0 and math.isfinite(out["throughput"])
    assert out["throughput"] == pytest.approx(8192 / out["step_time_s"])
    assert sum(out["breakdown_s"].values()) == pytest.approx(out["step_time_s"])
    assert len(out["memory_per_device_bytes"]) == 1


def test_cost_prices_an_mlperf_run_as_the_published_comparison_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """recnb cost --implementation hugectr --strategy mlperf gives the step the model compares with
    MLPerf's published runs (the same estimate, built here from the plan and the setup directly)."""
    from recnotebooks.config import preset
    from recnotebooks.perf import estimate
    from recnotebooks.perf.mlperf_plan import hugectr_plan, mlperf_plan, submitted_sharding

    cfg = preset("mlperf_dcnv2")
    for nodes in (1, 2):
        argv = ["cost", "--preset", "mlperf_dcnv2", "--hardware", "dgx_h100", "--gpus", "8", "--nodes",
                str(nodes), "--batch-size", "55296", "--implementation", "hugectr", "--strategy", "mlperf",
                "--dtype", "amp_fp16", "--sparse-optimizer", "adagrad"]  # fmt: skip
        out = run_json(capsys, *argv)
        # one node: the model's rule; two: HugeCTR's auto plan as v5.1's 2-node configs set it, exchanged flat
        sharding = submitted_sharding("dgx_h100", 8, nodes)
        plan = (
            mlperf_plan(cfg, 8, 1, HARDWARE["dgx_h100"].hbm_bytes)
            if nodes == 1
            else hugectr_plan(cfg, 8, 2, sharding)
        )
        exchange = None if nodes == 1 else "flat"
        assert (sharding.plan, sharding.hierarchical) == ("auto", False)
        want = estimate(cfg, "dgx_h100", batch_size=55296, gpus=8, nodes=nodes, plan=plan, dtype="amp_fp16",
                        sparse_optimizer="adagrad", implementation="hugectr", exchange=exchange)  # fmt: skip
        assert out["implementation"] == "hugectr" and out["plan_strategy"] == plan.strategy
        assert out["step_time_overlap_s"] == pytest.approx(want.step_time_overlap, rel=1e-12)
        assert out["exposed_communication_s"] == pytest.approx(max(want.exposed_communication, default=0.0))
        assert (out["exposed_communication_s"] > 0) is (nodes > 1)  # the network's share waits
        assert main(argv) == 0
        text = capsys.readouterr().out
        assert ("waits" in text and "off NVLink" in text) is (nodes > 1)
    # recnb plan shows the same sharding
    out = run_json(capsys, "plan", *argv[1 : argv.index("--implementation")], "--strategy", "mlperf")
    assert out["strategy"] == "hugectr_auto" and len(out["shards"]) == len(plan.shards)
    assert {(s["table"], s["rank"], s["sharding"]) for s in out["shards"]} == {
        (s.table, s.rank, s.sharding) for s in plan.shards
    }
    # TorchRec's step (the default) hides all of it
    out = run_json(capsys, *argv[: argv.index("--implementation")], "--dtype", "amp_fp16")
    assert out["implementation"] == "torchrec" and out["exposed_communication_s"] == 0.0


def test_cost_human_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--preset", "tiny", "--hardware", "dgx_a100"]) == 0
    text = capsys.readouterr().out
    assert "MODELED" in text and "tiny" in text and "fits: yes" in text


def test_cost_that_does_not_fit_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--preset", "mlperf_v1", "--hardware", "big_basin"]) == 0
    assert "DOES NOT FIT" in capsys.readouterr().out


def test_cost_says_where_the_tables_live(capsys: pytest.CaptureFixture[str]) -> None:
    """More table bytes than one device holds: the JSON and the text say how many GB stayed in
    HBM and where the cost planner moved the rest (and the bytes add up to the model's)."""
    from recnotebooks.config import preset

    argv = ("cost", "--preset", "criteo_terabyte", "--hardware", "big_basin", "--strategy", "cost")
    out = run_json(capsys, *argv)
    rows = {r["placement"]: r for r in out["table_placement"]}
    cfg = preset("criteo_terabyte")
    total = sum(t.num_rows * (cfg.embedding_dim * 4 + 4) for t in cfg.tables)
    assert sum(r["bytes"] for r in rows.values()) == pytest.approx(total, rel=1e-12)
    assert sum(r["gb"] for r in rows.values()) == pytest.approx(total / 1e9, rel=1e-12)
    assert 0 < rows["hbm"]["bytes"] < 16e9 and rows["cache"]["bytes"] > 0
    assert rows["cache"]["hit_rate"] == pytest.approx(0.9)  # the cost planner's fallback caches
    assert out["requested_placement"] == "hbm"
    assert str(out["table_placement_note"]).startswith("you chose hbm; the cost planner kept ")
    assert main(list(argv)) == 0
    text = capsys.readouterr().out
    assert "where the tables live" in text and "host DRAM behind a device cache" in text
    assert "- you chose hbm; the cost planner kept " in text and "hit rate 90.0%" in text
    small = run_json(capsys, "cost", "--preset", "tiny", "--hardware", "dgx_a100")
    assert [r["share"] for r in small["table_placement"]] == [1.0, 0.0, 0.0, 0.0]
    assert small["table_placement_note"] == "all 6.0 MB of tables (weights and optimizer state) live in HBM"


def test_cost_with_cache_rows_models_the_policys_hit_rate(capsys: pytest.CaptureFixture[str]) -> None:
    """--cache-rows: the hit rate is the policy's modeled one, per table, at that many slots."""
    from recnotebooks.config import preset
    from recnotebooks.perf.access import hit_rate

    r = run_json(capsys, "cost", "--preset", "rm2", "--hardware", "big_basin", "--placement", "cache",
                 "--cache-rows", "0.05", "--cache-policy", "lru")  # fmt: skip
    rates = r["cache_hit_rates"]
    tables = preset("rm2").tables
    assert set(rates) == {t.name for t in tables}
    for t in tables:
        assert rates[t.name] == pytest.approx(hit_rate(round(0.05 * t.num_rows), t.num_rows, 1.05, "lru"))
    slower = run_json(capsys, "cost", "--preset", "rm2", "--hardware", "big_basin", "--placement", "cache",
                      "--cache-rows", "0.01", "--cache-policy", "lru")  # fmt: skip
    assert slower["step_time_s"] > r["step_time_s"]  # a smaller cache misses more


@pytest.mark.parametrize(
    "argv",
    [
        ["--placement", "hbm", "--cache-rows", "100"],
        ["--placement", "cache", "--cache-rows", "100", "--gpus", "2"],
        ["--placement", "cache", "--cache-rows", "100", "--cache-hit-rate", "0.9"],
        ["--placement", "cache", "--cache-rows", "0"],
        ["--placement", "cache", "--cache-rows", "1.5"],
    ],
)
def test_cache_rows_misuse_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) if argv[-1] in ("0", "1.5") else _no_raise():
        assert main(["cost", "--preset", "rm2", "--hardware", "big_basin", *argv]) == 2
    assert "--cache-rows" in capsys.readouterr().err


def test_plan_json_covers_every_table(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "plan", "--gpus", "8", "--preset", "criteo_terabyte", "--hardware", "big_basin")
    shards = out["shards"]
    assert {s["table"] for s in shards} == {f"C{i}" for i in range(1, 27)}
    assert {s["rank"] for s in shards} <= set(range(8))
    assert out["world_size"] == 8 and out["strategy"] == "cost" and out["fits"] is True
    assert main(["plan", "--gpus", "8", "--preset", "criteo_terabyte", "--hardware", "big_basin"]) == 0
    assert "plan (cost)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["cost", "--gpus", "9"], "gpus"),
        (["cost", "--placement", "cache"], "cache-hit-rate"),
        (["plan", "--placement", "cache"], "cache-hit-rate"),
        (["cost", "--gpus", "2", "--hardware", "cpu_cluster"], "gpus"),
        (["cost", "--preset", "tiny", "--gpus", "8", "--nodes", "2"], "tables"),
        (["cost", "--batch-size", "4", "--gpus", "8"], "batch_size"),
        (["cost", "--hardware", "big_basin", "--dtype", "bf16"], "bf16"),
        (["cost", "--strategy", "mlperf", "--placement", "host"], "--placement host"),
        (["cost", "--implementation", "hugectr", "--dtype", "amp_bf16"], "amp_fp16"),
        (
            ["cost", "--implementation", "hugectr", "--placement", "host"],
            "implementation='torchrec'",
        ),
    ],
)
def test_cli_errors_exit_2_naming_the_option(capsys: pytest.CaptureFixture[str], argv: list[str],
                                             needle: str) -> None:  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.startswith(f"recnb {argv[0]}: error:")


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["cost", "--placement", "cache", "--cache-hit-rate", "1.5"], "--cache-hit-rate"),
        (["cost", "--cache-hit-rate", "x"], "--cache-hit-rate"),
        (["cost", "--placement", "disk"], "--placement"),
        (["cost", "--gpus", "0"], "--gpus"),
        (["cost", "--implementation", "tensorflow"], "--implementation"),
        (["plan", "--hardware", "tpu"], "--hardware"),
    ],
)
def test_argparse_rejects_bad_values(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert needle in capsys.readouterr().err


# ----- calibration -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def calibrated(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Hardware, dict[str, object], Path]]:
    """One quick calibration (5-10 s), never written to the user's cache."""
    path = tmp_path_factory.mktemp("calibration") / "this_machine.json"
    preset = HARDWARE["this_machine"]  # a saved --collectives fit, which the calibration must keep
    src = f"{COLLECTIVES_SOURCE} on 2026-12-01: gloo"
    sources = {
        **preset.sources,
        "collective_latency_s": src,
        "intra_node_bw": src,
        "sharded_op_overhead_s": src,
    }
    fitted = preset.replace(
        collective_latency_s=7e-4, intra_node_bw=0.9e9, sharded_op_overhead_s=3e-6, sources=sources
    )
    save_calibration(fitted, {"gflops": 1.0, "copy_bw": 1.0}, path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RECNB_CALIBRATION", str(path))
        hw, raw = calibrate(quick=True)
        yield hw, raw, path


def test_a_plain_calibration_keeps_the_collective_figures(
    calibrated: tuple[Hardware, dict[str, object], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory copy is not gloo between processes: a plain calibration keeps the saved
    ``--collectives`` figures (the fixture saved some first), or else the preset's measured
    ones, never the copy bandwidth; a saved file with bad sources keeps nothing."""
    from recnotebooks.measure import calibrate as cal

    hw, _, _ = calibrated
    assert (hw.collective_latency_s, hw.intra_node_bw, hw.sharded_op_overhead_s) == (7e-4, 0.9e9, 3e-6)
    assert hw.sources["intra_node_bw"].startswith(COLLECTIVES_SOURCE) and hw.hbm_bw != 0.9e9
    monkeypatch.setattr(cal, "load_calibration", lambda kind="cpu": None)  # nothing saved
    fresh, _ = calibrate(quick=True)
    preset = HARDWARE["this_machine"]
    for f in cal.COLLECTIVE_FIELDS:
        assert getattr(fresh, f) == getattr(preset, f) and fresh.sources.get(f) == preset.sources.get(f), f
    monkeypatch.undo()
    path = tmp_path / "bad.json"
    for bad in (None, [], "x", {"collective_latency_s": 5}):
        save_calibration(preset, {"gflops": 1.0, "copy_bw": 1.0}, path)
        d = json.loads(path.read_text())
        d["hardware"]["sources"] = bad
        path.write_text(json.dumps(d))
        monkeypatch.setenv("RECNB_CALIBRATION", str(path))
        with pytest.warns(UserWarning, match="sources"):  # the whole file is ignored, and says why
            assert cal._with_saved_collectives(fresh).intra_node_bw == fresh.intra_node_bw, bad


def test_calibration_reads_the_last_level_cache_and_times_the_grouping_the_step_uses(
    calibrated: tuple[Hardware, dict[str, object], Path],
) -> None:
    """The cache sizes agree with glibc's ``getconf`` figure for L3 (one instance, or on
    AMD a whole multiple of one); the cache modeled for hot rows is the largest level
    below the gather table, its speed-up a measured ratio in range; the grouping rate is
    the fused kernel's where that runs."""
    from recnotebooks.kernels.fused import fused_available
    from recnotebooks.measure import calibrate as cal

    hw, raw, _ = calibrated
    if raw.get("llc_bytes") is None:
        pytest.skip("the OS does not report the CPU's caches here")
    assert hw.llc_bytes == raw["llc_bytes"] > 0 and 1.0 <= hw.llc_speedup <= 100.0
    assert hw.sources["llc_bytes"].startswith("calibrated here")
    try:  # glibc's getconf reads the CPU's cache description its own way
        out = subprocess.run(["getconf", "LEVEL3_CACHE_SIZE"], capture_output=True, text=True, timeout=10)
        l3 = int(out.stdout.strip() or 0)
    except (OSError, ValueError, subprocess.SubprocessError):
        l3 = 0
    total_l3, one_l3 = cal._cache_levels().get(3, (0.0, 0.0))
    if l3 > 0:
        # Intel: glibc reports one instance. AMD: glibc reports the whole package's L3
        # (cpuid), of which a VM may see one instance (here 384 MB for a 32 MB instance).
        assert total_l3 % one_l3 == 0 and (one_l3 == l3 or l3 % one_l3 == 0), (one_l3, total_l3, l3)
    below = [(one, total) for total, one in cal._cache_levels().values() if one < cal.GATHER_TABLE_BYTES]
    assert hw.llc_bytes == max(below)[1]
    assert raw["sort_path"] == ("fused counting sort" if fused_available() else "group_by_row sort")


def test_calibration_fields_are_finite_and_positive(
    calibrated: tuple[Hardware, dict[str, object], Path],
) -> None:
    hw, raw, _ = calibrated
    assert hw.name == "this_machine" and hw.kind == "cpu" and "calibrated" in hw.description
    values = [*hw.peak_flops.values(), hw.hbm_bw, hw.hbm_bytes, hw.gemm_half_dim, hw.gather_efficiency,
              hw.gather_half_row_bytes, hw.sort_rate, hw.op_overhead_s]  # fmt: skip
    assert all(math.isfinite(v) and v > 0 for v in values), hw
    assert math.isfinite(hw.step_overhead_s) and hw.step_overhead_s >= 0
    assert 0 < hw.gemm_max_efficiency <= 1 and 0 < hw.gather_efficiency <= 4
    probe = raw["probe"]
    assert isinstance(probe, dict) and probe["gflops"] > 0 and probe["copy_bw"] > 0
    assert all(str(hw.sources.get(f, "")).startswith("calibrated here") for f in ("peak_flops", "hbm_bw"))
    assert math.isfinite(hw.bag_seconds_per_byte) and hw.bag_seconds_per_byte >= 0
    assert raw["bag_seconds_per_byte"] == hw.bag_seconds_per_byte
    assert str(hw.sources["bag_seconds_per_byte"]).startswith("calibrated here")
    assert raw["update_efficiency"] == hw.update_efficiency and 1e-3 <= hw.update_efficiency <= 4.0
    assert str(hw.sources["update_efficiency"]).startswith("calibrated here")  # the fused update ran
    assert raw["silu_seconds"] == hw.silu_seconds and 0 < hw.silu_seconds < 1e-6  # a CPU's: timed
    assert str(hw.sources["silu_seconds"]).startswith("calibrated here")
    if "llc_speedup" in raw:  # the OS named the last-level cache: the update's speed-up was timed
        assert raw["update_llc_speedup"] == hw.update_llc_speedup and 1.0 <= hw.update_llc_speedup <= 100.0
        assert str(hw.sources["update_llc_speedup"]).startswith("calibrated here")


def test_the_per_bag_cost_is_the_time_bags_of_one_add_over_long_bags(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bags of 1 took 3 s, the same lookups in bags of LONG_BAG 1 s: the 2 s over the bags they
    differ by, per byte of a 256 B row; never negative."""
    import recnotebooks.measure.calibrate as cal

    times = iter([3.0, 1.0, 1.0, 3.0])
    monkeypatch.setattr(cal, "_best", lambda *a, **k: next(times))
    n = 2**18  # quick
    assert cal._bag_cost(1, True) == pytest.approx(2.0 / (n - n / cal.LONG_BAG) / 256)
    assert cal._bag_cost(1, True) == 0.0  # long bags slower: no per-bag cost, not a negative one


def test_the_update_efficiency_is_the_modeled_read_modify_writes_over_the_measured_ones() -> None:
    """The uniform update took 3 s more than the few-rows one for 1e6 more distinct rows: the
    efficiency is what the model gives those rows at efficiency 1 (row and state read and
    written at the gather bandwidth of 128-byte rows) over the 3 s; clipped to [1e-3, 4]."""
    import recnotebooks.measure.calibrate as cal

    copy_bw, eff, half = 20e9, 0.8, 100.0
    gather = copy_bw * eff * 128 / (128 + half)
    t = {"update few": 1.0, "update every": 4.0, "update distinct": 1e6}
    assert cal._fit_update(t, copy_bw, eff, half) == pytest.approx(1e6 * 132 * 2 / gather / 3.0)
    assert cal._fit_update({**t, "update every": 1.0}, copy_bw, eff, half) == 4.0  # no extra time
    assert cal._fit_update({**t, "update distinct": 1.0}, copy_bw, eff, half) == 1e-3


def test_update_llc_speedup_fit_by_hand() -> None:
    """``update_llc_speedup`` is the seconds per extra distinct row of the cold timings on
    the big table over those of the warm timings on a cached table: 3 s over 1e6 rows cold
    against 0.5 s over 1e6 rows warm is 6x; a warm row slower than a cold one reads 1 (the
    field's floor: noise, not a slower cache), and a cache 1000x faster is held at 100."""
    import recnotebooks.measure.calibrate as cal

    t = {"update few": 1.0, "update every": 4.0, "update distinct": 1e6}
    warm = {"warm update few": 1.0, "warm update every": 1.5, "warm update distinct": 1e6}
    assert cal._fit_update_llc({**t, **warm}) == pytest.approx(6.0)
    assert cal._fit_update_llc({**t, **warm, "warm update every": 9.0}) == 1.0
    assert cal._fit_update_llc({**t, **warm, "warm update distinct": 1e9}) == 100.0


def test_save_and_load_round_trip(calibrated: tuple[Hardware, dict[str, object], Path], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    hw, raw, _ = calibrated
    path = tmp_path / "sub" / "cal.json"
    assert save_calibration(hw, raw["probe"], path) == path  # type: ignore[arg-type]
    loaded = load_calibration(path)
    assert loaded == hw and loaded is not None and loaded.sources == hw.sources
    assert load_probe(path) == raw["probe"]
    monkeypatch.setenv("RECNB_CALIBRATION", str(path))
    assert hardware("this_machine") == hw
    assert hardware("this_machine", power_w=99.0).power_w == 99.0
    monkeypatch.setenv("RECNB_CALIBRATION", str(tmp_path / "missing.json"))
    assert hardware("this_machine") == HARDWARE["this_machine"]
    assert load_calibration() is None and load_probe() is None


def test_default_path_comes_from_the_environment(
    calibrated: tuple[Hardware, dict[str, object], Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hw, raw, _ = calibrated
    path = tmp_path / "env.json"
    monkeypatch.setenv("RECNB_CALIBRATION", str(path))
    assert save_calibration(hw, raw["probe"]) == path  # type: ignore[arg-type]
    assert load_calibration() == hw and load_probe() == raw["probe"]


def test_unreadable_calibration_is_ignored(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.warns(UserWarning, match="bad.json"):
        assert load_calibration(bad) is None and load_probe(bad) is None
    bad.write_text(json.dumps({"hardware": {"name": "x"}, "probe": {"gflops": 0, "copy_bw": 1}}))
    with pytest.warns(UserWarning, match="bad.json"):
        assert load_calibration(bad) is None and load_probe(bad) is None


def test_calibrate_rejects_cuda() -> None:
    with pytest.raises(ValueError, match="device"):
        calibrate(device="cuda")


def test_at_speed_scales_rates() -> None:
    hw = HARDWARE["this_machine"]
    fast = at_speed(hw, {"gflops": 200.0, "copy_bw": 30.0}, {"gflops": 100.0, "copy_bw": 10.0})
    assert fast.peak_flops["fp32"] == pytest.approx(2 * hw.peak_flops["fp32"])
    assert fast.hbm_bw == pytest.approx(3 * hw.hbm_bw)
    assert fast.op_overhead_s == pytest.approx(hw.op_overhead_s / 2)
    assert fast.gemm_half_dim == hw.gemm_half_dim


# ----- validation ------------------------------------------------------------------------------
def test_validate_mechanics(calibrated: tuple[Hardware, dict[str, object], Path]) -> None:
    hw, raw, _ = calibrated
    r = validate(hw, raw["probe"], time_budget_s=0.02, repeats=1, quick=True)  # type: ignore[arg-type]
    rows = r.configs
    assert [c.config for c in rows] == [name for name, _, _ in validation_sweep(quick=True)]
    for c in rows:
        assert math.isfinite(c.measured_s) and c.measured_s > 0
        assert math.isfinite(c.modeled_s) and c.modeled_s > 0
        assert c.error == pytest.approx((c.modeled_s - c.measured_s) / c.measured_s)
        assert isinstance(c.reliable, bool) and c.reliable == (not c.reliability)
    # the model is scaled to the run's speed: the median of every probe taken in it
    every = [c.probe for c in rows]  # one probe per config here (repeats=1)
    assert r.run_probe == {k: pytest.approx(float(np.median([p[k] for p in every]))) for k in every[0]}
    assert r.mape == pytest.approx(float(np.mean([abs(c.error) for c in rows])))
    assert -1 <= r.spearman <= 1
    # the HSTU rows are held to the MAPE target on their own too (the quick sweep has two)
    hstu = [abs(c.error) for c in rows if c.architecture == "hstu"]
    assert len(hstu) == 2 and r.hstu_mape == pytest.approx(float(np.mean(hstu)))
    on_target = r.mape <= 0.15 and r.spearman >= 0.9 and float(np.mean(hstu)) <= 0.15
    assert r.calibrated is True and r.passed is (
        None if on_target and all(c.reliable for c in rows) else False
    )  # fewer than 10 configs: not judged, unless a reason fails it
    # tidy rows: a measured and a modeled row per config, the seconds of the config's fields
    tidy = r.rows()
    assert [(t["config"], t["source"]) for t in tidy] == [
        (c.config, s) for c in rows for s in ("measured", "modeled")
    ]
    assert [t["seconds"] for t in tidy] == [s for c in rows for s in (c.measured_s, c.modeled_s)]
    # the JSON of `recnb validate --json`: the schema it had as a dict
    d = json.loads(json.dumps(r.to_dict()))
    keys = "command hardware configs mape hstu_mape spearman targets pass passed verdict why_not calibrated"
    assert set(d) == {*keys.split(), "reference_probe", "run_probe", "drift_correction"}
    assert d["command"] == "validate" and d["pass"] is d["passed"] is r.passed
    assert d["why_not"] == list(r.verdict.why_not) and d["mape"] == pytest.approx(r.mape)
    row = "config batch_size measured_s modeled_s error steps max_rows probe reliable reliability tokens"
    extra = {"measured_phases", "modeled_breakdown", "architecture", "left_out"}
    assert set(d["configs"][0]) == {*row.split(), *extra}
    assert d["targets"] == {"mape": 0.15, "spearman": 0.9, "configs": 10}


@pytest.fixture(scope="module")
def one_round() -> dict[str, object]:
    """One quick round of the calibration's microbenchmarks, measured; its probes read the cores
    sharing a cache (a VM's host may place them apart for a while: the fit would leave out a
    round so taken, which tests/test_validate_placement.py checks)."""
    from recnotebooks.measure.calibrate import calibration_round

    r = calibration_round("cpu", quick=True)
    r["probes"] = [{**p, "handoff": 1.0} for p in r["probes"]]  # type: ignore[attr-defined]
    return r


def _scaled(r: dict[str, object], f: float) -> dict[str, object]:
    """Round ``r`` on a machine ``f`` times slower: its seconds times ``f``, its rates over ``f``."""
    rates = ("bag per byte", "sort rate", "llc speedup")
    out: dict[str, object] = {}
    for k, v in r.items():
        if k.endswith("update distinct") or k == "load":  # a count of rows, the cores busy: not times
            out[k] = v
        elif k == "probes":
            out[k] = [{q: x if q == "handoff" else x / f for q, x in p.items()} for p in v]  # type: ignore[attr-defined]
        elif k in ("overhead pairs", "hstu overhead pairs"):
            out[k] = [(a * f, b * f) for a, b in v]  # type: ignore[attr-defined]
        else:
            out[k] = v / f if k in rates and k != "bag per byte" else v * f  # type: ignore[operator]
    return out


def test_a_gpu_calibration_takes_the_gpus_figures_over_the_hosts(
    one_round: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fit on a CUDA device: the GPU's figures (its memory, link, description) replace the
    host's, the compute figures stay the fitted ones (it raised TypeError, the description given
    twice, before the fit was split into its steps). The GPU's own measurements are stubbed."""
    from recnotebooks.measure import calibrate

    gpu = {"kind": "gpu", "devices": 1, "hbm_bytes": 80e9, "host_link_bw": 25e9, "intra_node_bw": 25e9,
           "host_mem_bw": 1e11, "description": "this machine's FakeGPU"}  # fmt: skip

    def gpu_fields(dev: str, reps: int, raw: dict[str, object]) -> dict[str, object]:
        raw["host_to_device_bw"] = 25e9
        return dict(gpu)

    monkeypatch.setattr(calibrate, "_gpu_fields", gpu_fields)
    hw, raw = calibrate.fit_calibration([one_round], "cuda:0", quick=True)
    cpu, _ = calibrate.fit_calibration([one_round], "cpu", quick=True)
    assert {k: getattr(hw, k) for k in gpu} == gpu and raw["host_to_device_bw"] == 25e9
    assert hw.peak_flops == cpu.peak_flops and hw.gather_efficiency == cpu.gather_efficiency
    assert hw.bag_seconds_per_byte == 0.0  # a GPU's bags: no per-byte CPU cost


def test_a_calibration_is_the_median_of_its_rounds(one_round: dict[str, object]) -> None:
    """Three rounds, one of them 3x slower and one 2x faster than the measured one: the fit is
    the measured round's (each figure is the median of its rounds), the probe is the median of
    all the rounds' probes, and every overhead pair of every round counts."""
    from recnotebooks.measure.calibrate import fit_calibration
    from recnotebooks.measure.calibrate_hstu import hstu_op_overhead

    alone, raw1 = fit_calibration([one_round], "cpu", quick=True)
    three, raw3 = fit_calibration([_scaled(one_round, 3.0), one_round, _scaled(one_round, 0.5)], "cpu", True)
    for field in ("peak_flops", "hbm_bw", "gemm_half_dim", "gather_efficiency", "gather_half_row_bytes",
                  "sort_rate", "bag_seconds_per_byte", "llc_speedup", "update_efficiency",
                  "update_llc_speedup", "silu_seconds", "rab_seconds", "rab_index_seconds",
                  "rab_padded_seconds"):  # fmt: skip
        assert getattr(three, field) == pytest.approx(getattr(alone, field), rel=1e-9), field
    assert raw3["rounds"] == 3 and raw1["rounds"] == 1
    probes = [p for r in (_scaled(one_round, 3.0), one_round, _scaled(one_round, 0.5)) for p in r["probes"]]  # type: ignore[attr-defined]
    assert raw3["probe"] == {
        k: pytest.approx(float(np.median([p[k] for p in probes]))) for k in ("gflops", "copy_bw", "handoff")
    }
    # the overhead pairs: the median over all 3 rounds' pairs, not of each round's median
    pairs = [
        p for r in (_scaled(one_round, 3.0), one_round, _scaled(one_round, 0.5)) for p in r["overhead pairs"]
    ]  # type: ignore[attr-defined]
    ts = float(np.median([a for a, _ in pairs]))
    hstu = [
        p
        for r in (_scaled(one_round, 3.0), one_round, _scaled(one_round, 0.5))
        for p in r["hstu overhead pairs"]
    ]  # type: ignore[attr-defined]
    assert three.hstu_op_overhead_s == pytest.approx(hstu_op_overhead(hstu))  # every round's pairs
    assert three.step_overhead_s <= ts + 1e-12 and alone.step_overhead_s <= float(
        np.median([a for a, _ in one_round["overhead pairs"]])
    )  # type: ignore[attr-defined]


def test_validate_calibrates_between_its_passes(
    one_round: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``recnb validate`` (not ``--saved``): calibration round, sweep pass, round, pass, ...; the
    fit is of those rounds and the rows are the median of those passes, with no drift
    correction (both are medians over the same minute)."""
    import recnotebooks.measure.validate as val

    order: list[str] = []
    passes: list[list[object]] = []

    def fake_round(dev: str, quick: bool = False) -> dict[str, object]:
        order.append("round")
        return one_round

    real_pass = val._pass

    def recorded_pass(sweep, time_budget_s, dev):  # type: ignore[no-untyped-def]
        order.append("pass")
        passes.append(real_pass(sweep, time_budget_s, dev))
        return passes[-1]

    monkeypatch.setattr(val, "calibration_round", fake_round)
    monkeypatch.setattr(val, "_pass", recorded_pass)
    # the cores read sharing a cache throughout, so that no measurement is left out (the rule:
    # tests/test_validate_placement.py)
    real_probe = val.probe
    monkeypatch.setattr(val, "probe", lambda *a, **k: {**real_probe(*a, **k), "handoff": 1.0})
    monkeypatch.setattr(val, "handoff", lambda reps=5: 1.0)
    import recnotebooks.measure.cores as cores

    monkeypatch.setattr(cores, "handoff", lambda reps=5: 1.0)  # the measured steps' own reading
    r, hw, raw = val.calibrate_and_validate(quick=True, time_budget_s=0.02, repeats=3)
    assert order == ["round", "pass"] * 3
    fit = val.fit_calibration([one_round] * 3, "cpu", True)[0]
    free = {"hbm_bytes": 1e9, "host_mem_bytes": 1e9}  # the memory free now: not a fitted figure
    assert hw.replace(**free) == fit.replace(**free) and raw["rounds"] == 3
    # what each round read, for a report that says which round read what (`recnb validate --json`)
    from recnotebooks.measure.calibrate import _per_op, median_probe
    from recnotebooks.measure.calibrate_hstu import hstu_op_overhead

    each = {"probe": median_probe(one_round["probes"]), "op_overhead_s": _per_op(one_round["overhead pairs"]),  # type: ignore[arg-type]
            "hstu_op_overhead_s": hstu_op_overhead(one_round["hstu overhead pairs"]),  # type: ignore[arg-type]
            "load": one_round["load"], "left_out": False}  # fmt: skip
    assert raw["per_round"] == [each] * 3
    assert json.loads(json.dumps(raw["per_round"])) == [each] * 3  # JSON as it is
    assert r.drift_correction is False and r.reference_probe == raw["probe"]
    sweep = val.validation_sweep(quick=True)
    for i, c in enumerate(r.configs):
        times = sorted(p[i][0].seconds_per_step for p in passes)  # type: ignore[index]
        assert c.measured_s == times[1]
        assert c.modeled_s == pytest.approx(val._compare(c.config, sweep[i][1], c.batch_size,
                                                         passes[0][i][0], [passes[0][i][1]], hw).modeled_s)  # type: ignore[index]  # fmt: skip
    # the same rounds and passes read again, all or a subset (benchmarks/validate_passes.py): the
    # same result for all of them, and each row the median of the subset's own passes
    again, hw_again, _ = val.judge_interleaved("cpu", [one_round] * 3, passes, quick=True)  # type: ignore[arg-type]
    assert again == r and hw_again.replace(**free) == hw.replace(**free)
    two, _, raw_two = val.judge_interleaved("cpu", [one_round] * 2, [passes[0], passes[2]], quick=True)  # type: ignore[list-item]
    assert raw_two["rounds"] == 2
    for i, c in enumerate(two.configs):
        times = sorted(p[i][0].seconds_per_step for p in (passes[0], passes[2]))  # type: ignore[index]
        assert c.measured_s == times[1]  # the upper of two, as the median of an even count is taken


def naive_spearman(a: list[float], b: list[float]) -> float:
    """1 - 6 sum d^2 / (n (n^2 - 1)) with ranks found by counting (no ties)."""
    n = len(a)
    rank_a = [sum(y < x for y in a) for x in a]
    rank_b = [sum(y < x for y in b) for x in b]
    d2 = sum((x - y) ** 2 for x, y in zip(rank_a, rank_b, strict=True))
    return 1 - 6 * d2 / (n * (n * n - 1))


@given(pairs=st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)), min_size=2, max_size=30,
                      unique_by=(lambda p: p[0], lambda p: p[1])))  # fmt: skip
def test_spearman_matches_naive(pairs: list[tuple[float, float]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    assert spearman(a, b) == pytest.approx(naive_spearman(a, b), abs=1e-9)


def test_spearman_by_hand() -> None:
    assert spearman([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]) == pytest.approx(1.0)
    assert spearman([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    assert spearman([1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]) == pytest.approx(0.8)


@pytest.mark.gpu
def test_cuda_calibration_and_validation(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CUDA machine: calibrate one GPU and validate the model against it."""
    from recnotebooks.measure.calibrate import calibrate
    from recnotebooks.measure.validate import validate

    monkeypatch.setenv("RECNB_CALIBRATION", str(tmp_path / "gpu.json"))
    hw, raw = calibrate(device="cuda", quick=True)
    assert hw.kind == "gpu" and raw["device"].startswith("cuda")
    for v in (hw.flops("fp32"), hw.hbm_bw, hw.host_link_bw, hw.hbm_bytes, hw.op_overhead_s):
        assert math.isfinite(v) and v > 0
    r = validate(hw, raw["probe"], time_budget_s=0.05, repeats=1, quick=True)  # type: ignore[arg-type]
    assert len(r.configs) == 5 and all(math.isfinite(c.modeled_s) for c in r.configs)


def test_a_cache_hit_rate_the_cost_plan_does_not_use_is_noted(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_json(capsys, "plan", "--cache-hit-rate", "0.8")
    assert all(s["placement"] != "cache" for s in r["shards"])
    assert any("--cache-hit-rate 0.8 was not used" in n for n in r["notes"])
    used = run_json(capsys, "plan", "--placement", "cache", "--cache-hit-rate", "0.8")
    assert not any("was not used" in n for n in used["notes"])


def test_plans_for_many_ranks_answer_and_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_json(capsys, "plan", "--gpus", "8", "--nodes", "128")  # 1,024 ranks: the most allowed
    assert r["world_size"] == 1024 and len(r["memory_per_device_bytes"]) == 1024
    assert main(["plan", "--gpus", "8", "--nodes", "129"]) == 2
    assert "must be <= 1024 devices" in capsys.readouterr().err
