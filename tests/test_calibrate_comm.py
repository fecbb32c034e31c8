"""recnotebooks.measure.calibrate_comm: the latency/bandwidth fit, a real 2-rank calibration over gloo,
the saved calibration's round trip, and bad input."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _values import bad

from recnotebooks.config import DLRMConfig
from recnotebooks.measure import calibrate_comm as CC
from recnotebooks.perf.hardware import HARDWARE, load_calibration, save_calibration
from recnotebooks.plan import Plan

#: the verdict a calibration's raw figures carry (measure.calibrate.calibration_verdict), for the fakes
PASSED = {"passed": True, "verdict": "PASSED", "why_not": []}


def test_fit_recovers_latency_and_bandwidth_from_synthetic_timings() -> None:
    rng = np.random.default_rng(0)
    volumes = np.geomspace(1e3, 8e6, 12)
    lat, bw = 150e-6, 2.5e9
    noisy = (lat + volumes / bw) * (1 + 0.01 * rng.standard_normal(volumes.size))
    got_lat, got_bw = CC.fit_latency_bandwidth(list(volumes), list(noisy))
    assert got_lat == pytest.approx(lat, rel=0.05)
    assert got_bw == pytest.approx(bw, rel=0.05)
    exact = CC.fit_latency_bandwidth(list(volumes), list(lat + volumes / bw))
    assert exact == pytest.approx((lat, bw), rel=1e-9)


def test_fit_collectives_recovers_the_models_two_numbers() -> None:
    alpha, bw = 40e-6, 1.2e9
    rows = [
        {"collective": c, "world_size": w, "volume": CC.model_volume(c, b, w), "steps": CC.model_steps(c, w),
         "seconds": alpha * CC.model_steps(c, w) + CC.model_volume(c, b, w) / bw}
        for c in CC.COLLECTIVES for w in (2, 4) for b in CC.QUICK_SIZES
    ]  # fmt: skip
    fit = CC.fit_collectives(rows)
    assert fit["collective_latency_s"] == pytest.approx(alpha, rel=1e-9)
    assert fit["intra_node_bw"] == pytest.approx(bw, rel=1e-9)
    assert fit["mape"] < 1e-9
    per = {(f["collective"], f["world_size"]): f for f in fit["fits"]}
    assert per["all_reduce", 4]["latency_s"] == pytest.approx(6 * alpha, rel=1e-9)
    assert per["all_to_all", 4]["alpha_s"] == pytest.approx(alpha, rel=1e-9)


def test_model_terms_follow_the_cost_model() -> None:
    assert CC.model_steps("all_to_all", 4) == 3 and CC.model_steps("all_reduce", 4) == 6
    assert CC.model_volume("all_to_all", 400, 4) == 300
    assert CC.model_volume("all_reduce", 400, 4) == 600


def test_a_real_two_rank_quick_calibration_gives_finite_positive_figures() -> None:
    # a real measurement: on a loaded machine (the suite runs on 2 workers) one quick sweep can
    # be too noisy to fit, and the calibration then says so (ValueError); three tries
    for attempt in range(3):
        try:
            hw, raw = CC.calibrate_collectives(HARDWARE["this_machine"], quick=True, world_sizes=(2,))
            break
        except ValueError as e:
            assert "sweep larger volumes" in str(e) and attempt < 2, e
    assert math.isfinite(hw.collective_latency_s) and hw.collective_latency_s >= 0
    assert math.isfinite(hw.intra_node_bw) and hw.intra_node_bw > 0
    assert raw["rows"] and all(r["seconds"] > 0 and r["world_size"] == 2 for r in raw["rows"])
    assert {f["collective"] for f in raw["fits"]} == set(CC.COLLECTIVES)
    assert "calibrated here" in hw.sources["intra_node_bw"]
    assert hw.sharded_op_overhead_s is not None and hw.sharded_op_overhead_s > 0
    assert "calibrated here" in hw.sources["sharded_op_overhead_s"]


def test_a_real_one_rank_run_times_both_steps_every_round() -> None:
    """A real one-rank run of the timing worker: both steps timed on the same batches, every round
    (which is slower is the machine's business: two noisy timings are never compared here)."""
    from recnotebooks import distributed
    from recnotebooks.measure.collective_timing import time_sharded_step

    cfg, plan, _ = _one_rank_case()
    times = distributed.launch(time_sharded_step, 1, cfg, plan, 8, 2, 3, timeout_s=120).values[0]
    assert all(len(times[k]) == 3 for k in ("single", "sharded", "collectives"))
    assert all(t > 0 for k in ("single", "sharded") for t in times[k])
    assert all(c >= 0 for c in times["collectives"])


def test_the_sharded_operator_cost_is_the_difference_per_counted_operator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The arithmetic on given round times: each side's best round (the sharded side's least own
    work, its time less its collectives), their difference over the operators the model counts;
    a sharded step no slower than the single one (noise) is refused."""
    from types import SimpleNamespace

    from recnotebooks.perf.components import sharded_extra_ops

    def launch_with(times: dict[str, list[float]]) -> Callable[..., SimpleNamespace]:
        return lambda *a, **k: SimpleNamespace(values=[times])

    times = {
        "single": [0.010, 0.009, 0.012],
        "sharded": [0.015, 0.014, 0.020],
        "collectives": [0.001, 0.0025, 0.001],
    }
    monkeypatch.setattr(CC.distributed, "launch", launch_with(times))
    r = CC.measure_sharded_op_cost(batch_size=8, steps=3, rounds=3)
    # own work 0.014, 0.0115, 0.019: round 1; less the best single round, 0.009
    assert r["sharded_s"] == 0.014 and r["collectives_s"] == 0.0025 and r["single_s"] == 0.009
    assert r["extra_s"] == pytest.approx(0.0115 - 0.009)
    assert r["extra_ops"] == sharded_extra_ops(*_one_rank_case()) > 0
    assert r["sharded_op_overhead_s"] == pytest.approx(r["extra_s"] / r["extra_ops"])
    noisy = {"single": [0.010], "sharded": [0.010], "collectives": [0.0005]}
    monkeypatch.setattr(CC.distributed, "launch", launch_with(noisy))
    with pytest.raises(RuntimeError, match="not slower"):
        CC.measure_sharded_op_cost(rounds=1)
    with pytest.raises(ValueError, match="rounds"):
        CC.measure_sharded_op_cost(rounds=0)


def _one_rank_case() -> tuple[DLRMConfig, Plan, int]:
    from recnotebooks.config import preset
    from recnotebooks.plan import TableShard

    cfg = preset("tiny")
    kinds = ("table_wise", "row_wise", "column_wise")
    return cfg, Plan(1, tuple(TableShard(t.name, 0, kinds[k % 3]) for k, t in enumerate(cfg.tables))), 0


def test_the_sharded_operator_cost_prices_only_what_the_sharded_step_adds() -> None:
    from recnotebooks.config import preset
    from recnotebooks.perf.components import op_count, overhead
    from recnotebooks.plan import table_wise

    cfg = preset("tiny")
    plan = table_wise(cfg, 2)
    base = HARDWARE["this_machine"]
    assert base.sharded_op_overhead_s is None and base.sharded_op_cost_s == base.op_overhead_s
    slow = base.replace(sharded_op_overhead_s=50e-6)
    single, total = op_count(cfg), op_count(cfg, 2, plan=plan, implementation="recnotebooks")
    extra = overhead(cfg, slow, 2, True, plan, "recnotebooks") - overhead(
        cfg, base, 2, True, plan, "recnotebooks"
    )
    assert extra == pytest.approx((total - single) * (50e-6 - base.op_overhead_s))
    # TorchRec's step and one process are priced at op_overhead_s alone
    assert overhead(cfg, slow, 2, True, plan, "torchrec") == overhead(cfg, base, 2, True, plan, "torchrec")
    assert overhead(cfg, slow, 1, False) == overhead(cfg, base, 1, False)
    with pytest.raises(ValueError, match="sharded_op_overhead_s"):
        base.replace(sharded_op_overhead_s=-1.0)


def test_the_saved_calibration_round_trips(tmp_path: Path) -> None:
    hw = HARDWARE["this_machine"].replace(collective_latency_s=123e-6, intra_node_bw=0.75e9,
                                          sharded_op_overhead_s=12e-6)  # fmt: skip
    path = save_calibration(hw, {"gflops": 100.0, "copy_bw": 1e10}, path=tmp_path / "cal.json")
    back = load_calibration(path)
    assert back == hw
    assert back.collective_latency_s == 123e-6 and back.intra_node_bw == 0.75e9
    assert back.sharded_op_overhead_s == 12e-6


@pytest.mark.parametrize(
    "args, match",
    [
        (([1.0], [1.0]), "two distinct volumes"),
        (([1.0, 1.0], [1.0, 2.0]), "two distinct volumes"),
        (([1.0, 2.0], [1.0]), "equal lengths"),
        (([1.0, 2.0], [1.0, 0.0]), "seconds must all be > 0"),
        (([1.0, 2.0], [2.0, 1.0]), "do not grow"),
        (([1.0, -2.0], [1.0, 2.0]), r"volumes\[1\]"),
        (([1.0, float("nan")], [1.0, 2.0]), r"volumes\[1\]"),
    ],
)
def test_bad_fit_input_raises_value_error(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CC.fit_latency_bandwidth(*args)


def test_the_in_step_pattern_times_each_call_after_a_burst_and_takes_the_mean() -> None:
    """Real 2-rank runs: the worker returns one time per call (warm-up calls dropped) on every
    rank, and a row's seconds is the mean over calls and ranks, between its per-call extremes."""
    from recnotebooks.distributed import launch
    from recnotebooks.measure.collective_timing import time_collectives_in_step

    res = launch(time_collectives_in_step, 2, [4096, 65536], 4, 1, ["all_reduce"], timeout_s=60)
    for v in res.values:
        assert v["bytes"] == [4096, 65536]
        assert [len(ts) for ts in v["all_reduce"]] == [4, 4]
        assert all(t > 0 for ts in v["all_reduce"] for t in ts)
    rows = CC.measure_collectives(world_sizes=(2,), sizes=(4096, 65536), repeats=4, warmup=1,
                                  collectives=["all_to_all"], pattern="in_step")  # fmt: skip
    assert [r["bytes"] for r in rows] == [4096, 65536]
    for r in rows:
        assert r["pattern"] == "in_step" and r["collective"] == "all_to_all" and r["world_size"] == 2
        assert 0 < r["min_s"] <= r["seconds"] <= r["max_s"]
        assert r["steps"] == 1 and r["volume"] == r["bytes"] / 2


def test_each_pattern_aggregates_its_timings_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the ranks' timings fixed (launch stubbed): ``in_step`` keeps the mean over calls and
    ranks and the extremes of each call's rank mean; ``back_to_back`` the median repeat of the
    slowest rank."""
    import types

    import recnotebooks.distributed as D

    per_rank = [[[1.0, 2.0, 9.0]], [[3.0, 2.0, 1.0]]]  # rank -> size -> call (or repeat) seconds
    fake = types.SimpleNamespace(values=[{"bytes": [4096], "all_reduce": t} for t in per_rank])
    monkeypatch.setattr(D, "launch", lambda *a, **k: fake)
    kw: dict[str, Any] = {"world_sizes": (2,), "sizes": (4096, 8192), "collectives": ["all_reduce"]}
    (row,) = CC.measure_collectives(**kw, pattern="in_step")
    assert row["seconds"] == pytest.approx(18.0 / 6) and (row["min_s"], row["max_s"]) == (2.0, 5.0)
    (row,) = CC.measure_collectives(**kw, pattern="back_to_back")
    assert row["seconds"] == 3.0 and (row["min_s"], row["max_s"]) == (2.0, 9.0)  # slowest: 3, 2, 9
    assert row["pattern"] == "back_to_back" and row["steps"] == 2 and row["volume"] == 4096


def test_bad_measure_input_raises_before_any_process_starts() -> None:
    with pytest.raises(ValueError, match="pattern"):
        CC.measure_collectives(pattern="streaming")
    with pytest.raises(ValueError, match="pattern"):
        CC.calibrate_collectives(HARDWARE["this_machine"], pattern="overlapped")
    with pytest.raises(ValueError, match="world_sizes"):
        CC.measure_collectives(world_sizes=[1])
    with pytest.raises(ValueError, match="collectives"):
        CC.measure_collectives(collectives=["broadcast"])
    with pytest.raises(ValueError, match="sizes"):
        CC.measure_collectives(sizes=[1024])
    with pytest.raises(ValueError, match="rows"):
        CC.fit_collectives([])
    with pytest.raises(ValueError, match="collective"):
        CC.model_steps("gather", 2)
    with pytest.raises(TypeError, match="volumes"):
        CC.fit_latency_bandwidth(bad("12"), [1.0, 2.0])


def test_recnb_calibrate_collectives_saves_the_fitted_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The wiring of ``recnb calibrate --collectives`` (microbenchmarks stubbed: fast)."""
    from recnotebooks.cli import build_parser
    from recnotebooks.commands import measure as commands
    from recnotebooks.commands.settings import resolve

    base = HARDWARE["this_machine"]
    fits = [{"collective": "all_to_all", "world_size": 2, "latency_s": 1e-4, "bandwidth": 1e9}]
    monkeypatch.setenv("RECNB_CALIBRATION", str(tmp_path / "cal.json"))
    monkeypatch.setattr(
        commands,
        "calibrate",
        lambda device, quick: (base, {"probe": {"gflops": 1.0, "copy_bw": 1.0}, **PASSED}),
    )
    monkeypatch.setattr(commands, "calibrate_collectives",
                        lambda hw, quick: (hw.replace(collective_latency_s=77e-6, intra_node_bw=0.5e9),
                                           {"fits": fits, "mape": 0.1, "pattern": "in_step"}))  # fmt: skip
    out, show_it = commands.run(resolve(build_parser().parse_args(["calibrate", "--quick", "--collectives"])))
    assert out["hardware"]["collective_latency_s"] == 77e-6
    saved = load_calibration(tmp_path / "cal.json")
    assert saved is not None and saved.intra_node_bw == 0.5e9
    show_it(out)
    assert (
        "collectives (gloo, local ranks, each call after compute, as in a step): latency 77 us"
        in capsys.readouterr().out
    )


def test_recnb_calibrate_without_collectives_says_whose_collective_figures_it_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from recnotebooks.cli import build_parser
    from recnotebooks.commands import measure as commands
    from recnotebooks.commands.settings import resolve
    from recnotebooks.perf.calibration_file import COLLECTIVES_SOURCE

    monkeypatch.setenv("RECNB_CALIBRATION", str(tmp_path / "cal.json"))
    base = HARDWARE["this_machine"]
    measured = base.replace(
        sources={**base.sources, "collective_latency_s": f"{COLLECTIVES_SOURCE} on 2026-12-01"}
    )
    for hw, words in ((base, "the preset's (--collectives measures them here)"),
                      (measured, "kept from the saved --collectives calibration")):  # fmt: skip
        monkeypatch.setattr(
            commands, "calibrate", lambda device, quick, hw=hw: (hw, {"probe": {"gflops": 1.0}, **PASSED})
        )
        out, show_it = commands.run(resolve(build_parser().parse_args(["calibrate", "--quick"])))
        show_it(out)
        assert words in capsys.readouterr().out
