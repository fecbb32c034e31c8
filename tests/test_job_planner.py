"""The Training Job Planner (notebook 06): job arithmetic by hand, every control moved, impossible
plans explained with the nearest feasible setting, no NaN anywhere, bad input named, prices cited."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
import vl_convert as vlc
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from recnotebooks.perf.hardware import HARDWARE, hardware
from recnotebooks.perf.job import CRITEO_TERABYTE_SAMPLES, job_cost, job_from_estimate
from recnotebooks.perf.job_planner import (
    JOB_MODELS,
    JOB_SETTINGS,
    LEVERS,
    JobSettings,
    best_lever,
    evaluate,
    explain_outcome,
    job_model,
    job_setup,
    nearest_feasible,
    plan_job,
    setting_values,
)
from recnotebooks.viz.controls import option_values
from recnotebooks.viz.planner import PLANNER_CONTROLS, explore_job, job_planner, measure_job


def _number(value: object) -> float:
    """A table cell that must be a number (the test fails when it is not)."""
    assert isinstance(value, (int, float)) and not isinstance(value, bool), value
    return float(value)


def _finite(tables: dict[str, list[dict[str, object]]]) -> None:
    for name, rows in tables.items():
        for row in rows:
            for k, v in row.items():
                if isinstance(v, float):
                    assert math.isfinite(v), f"{name}.{k} = {v}"


def test_job_arithmetic_by_hand() -> None:
    j = job_cost(samples=1000, epochs=2, batch_size=300, step_time_s=0.5, devices=4, price_per_hour=3.0,
                 power_w=2000.0, servers=1, server_price_per_hour=1.0)  # fmt: skip
    assert j.steps == 7  # ceil(2000 / 300)
    assert j.seconds == pytest.approx(3.5) and j.hours == pytest.approx(3.5 / 3600)
    assert j.device_hours == pytest.approx(4 * 3.5 / 3600)
    assert j.cost_usd == pytest.approx(4 * 3.5 / 3600 * 3.0 + 3.5 / 3600 * 1.0)
    assert j.energy_j == pytest.approx(7000.0) and j.energy_kwh == pytest.approx(7000 / 3.6e6)
    assert j.samples_per_joule == pytest.approx(2000 / 7000) and j.samples_per_s == pytest.approx(600)
    assert j.meets(deadline_h=1, budget_usd=1) and not j.meets(deadline_h=1e-4)


def test_job_from_an_estimate_uses_the_step_power_and_price() -> None:
    o = evaluate(model="criteo_terabyte", hardware="dgx_a100", nodes=1, gpus=8)
    r, hw = o.result, hardware("dgx_a100", price_per_hour=2.0)
    assert r is not None
    j = job_from_estimate(r, hw, CRITEO_TERABYTE_SAMPLES)
    steps = math.ceil(CRITEO_TERABYTE_SAMPLES / r.batch_size)
    assert j.hours == pytest.approx(steps * r.step_time / 3600)
    assert j.cost_usd == pytest.approx(j.hours * 8 * 2.0)
    assert j.energy_j == pytest.approx(r.power_w * steps * r.step_time)


def test_every_preset_has_a_cited_price() -> None:
    for name, hw in HARDWARE.items():
        assert hw.price_per_hour > 0, name
        src = hw.sources["price_per_hour"]
        assert "approximate" in src and "http" in src and "20" in src, name
    assert hardware("dgx_h100", price_per_hour=1.5).price_per_hour == 1.5
    with pytest.raises(ValueError, match="price_per_hour"):
        hardware("dgx_h100", price_per_hour=-1.0)


def test_production_models_are_hundreds_of_gb_to_terabytes() -> None:
    for name, lo, hi in (("mlperf_v1_x10", 300e9, 3e12), ("mlperf_v1_x30", 1e12, 5e12)):
        cfg = job_model(name)
        size = sum(t.num_rows for t in cfg.tables) * cfg.embedding_dim * 4
        assert lo < size < hi, (name, size)


def test_the_app_moves_over_every_control() -> None:
    app = job_planner()
    for name, spec in PLANNER_CONTROLS.items():
        for v in option_values(spec):
            if name == "nodes" and v == 8:
                continue  # 64 ranks: slow to search; covered by evaluate below
            result = app.set(**{name: v})
            assert app.error is None
            assert result.tables["breakdown"] and result.tables["totals"], (name, v)
            _finite(result.tables)
        app.set(**{name: spec["value"]})
    assert evaluate(nodes=8).job is not None
    app.altair_chart.to_dict()  # schema-valid


def test_an_impossible_plan_says_why_and_shows_the_nearest_feasible() -> None:
    r = explore_job(model="mlperf_v1_x30", hardware="this_machine", gpus=1, deadline_h=1, budget_usd=10)
    assert r.tables["verdict"][0]["verdict"] == "impossible"
    text = " ".join(r.notes)
    assert "impossible" in text and ("deadline" in text or "budget" in text or "fit" in text)
    assert "earest feasible" in text or "fastest that fits" in text
    assert r.tables["breakdown"] and r.tables["totals"]
    _finite(r.tables)
    # a setting that cannot be built: the chart shows the nearest feasible one instead, never nothing
    r = explore_job(hardware="cpu_cluster", gpus=8)
    assert "1 device(s), not 8" in r.notes[0]
    # nearest: the same hardware first. A CPU trainer node has one device, so the one change on it
    # that builds is 1 device per node, and that one is feasible
    assert evaluate(hardware="cpu_cluster", gpus=1).feasible
    assert {row["setting"] for row in r.tables["breakdown"]} == {"nearest feasible, gpus 8→1"}
    near, sentence = nearest_feasible(hardware="cpu_cluster", gpus=8)
    assert near is not None and near.feasible and sentence == "nearest feasible: gpus 8→1"
    app = job_planner(hardware="cpu_cluster", gpus=8)
    assert app.error is None and app.chart_data()


def test_a_terabyte_on_one_h200_says_where_the_tables_live() -> None:
    """1 TB of tables, one H200, placement hbm: the note says, right under the verdict, how many GB
    stayed in HBM and where the rest went; the chart shows it; the placement control keeps the
    choice and its label says what was modeled. A small model: all in HBM, the label its own."""
    app = job_planner(model="mlperf_v1_x10", hardware="h200_node", nodes=1, gpus=1, placement="hbm")
    r = app.result
    cfg = job_model("mlperf_v1_x10")
    total_gb = sum(t.num_rows * (cfg.embedding_dim * 4 + 4) for t in cfg.tables) / 1e9
    rows = r.tables["placement"]
    assert {x["setting"] for x in rows} == {"this setting"} and {x["source"] for x in rows} == {"modeled"}
    assert sum(_number(x["gb"]) for x in rows) == pytest.approx(total_gb, rel=1e-12)
    hbm = sum(_number(x["gb"]) for x in rows if x["placement"] == "hbm")
    assert hbm < 141 and hbm / total_gb < 0.15
    assert r.notes[0].startswith("MODELED: fits")
    assert r.notes[1].startswith("Where the tables live (MODELED): you chose hbm; the cost planner kept ")
    assert f"{hbm:.1f} GB" in r.notes[1] and "moved what does not fit there: " in r.notes[1]
    label = app.controls["placement"].description
    assert app.controls["placement"].value == "hbm"  # the choice stays (it is the planner's input)
    assert label.startswith("placement (modeled: ") and "hbm" in label and label.count("%") >= 2
    drawn = [d for d in app.chart_data() if d and "where" in d[0]]
    assert drawn and {x["where"] for x in drawn[0]} == {x["where"] for x in rows}
    assert sum(_number(x["gb"]) for x in drawn[0]) == pytest.approx(total_gb, rel=1e-12)

    small = app.set(model="criteo_kaggle")
    assert (
        small.notes[1]
        == "Where the tables live (MODELED): all 2.3 GB of tables (weights and optimizer state) live in HBM."
    )
    assert [(x["placement"], x["share"]) for x in small.tables["placement"]] == [("hbm", 1.0)]
    assert app.controls["placement"].description == "placement"
    svg = vlc.vegalite_to_svg(app.altair_chart.to_dict())  # what Vega draws: the whole app's charts
    width = re.search(r'<svg[^>]* width="([\d.]+)"', svg)
    assert width is not None and float(width.group(1)) <= 850
    assert "Where the tables live" in svg


def test_best_lever_reports_the_biggest_gain() -> None:
    best, rows = best_lever(model="criteo_terabyte")
    assert rows and best is not None
    assert best["speedup"] == max(r["speedup"] for r in rows) and best["speedup"] > 1
    assert all(math.isfinite(float(r["speedup"])) and math.isfinite(float(r["cost_ratio"])) for r in rows)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="nodes"):
        explore_job(nodes=3)
    with pytest.raises(ValueError, match="dtype"):
        explore_job(dtype="fp8")
    with pytest.raises(KeyError, match="nodez"):
        explore_job(nodez=1)
    with pytest.raises(ValueError, match="model"):
        job_model("rm9")
    with pytest.raises(ValueError, match="samples"):
        job_cost(samples=float("nan"), batch_size=1, step_time_s=1, devices=1, price_per_hour=1, power_w=1)
    with pytest.raises(ValueError, match="step_time_s"):
        job_cost(samples=10, batch_size=1, step_time_s=0, devices=1, price_per_hour=1, power_w=1)
    with pytest.raises(ValueError, match="measure_job"):
        measure_job(model="mlperf_v1")
    with pytest.raises(KeyError):
        job_planner(budget=3)


def test_measured_run_sits_beside_the_model() -> None:
    assert not explore_job(model="tiny", gpus=2).tables["measured"]  # never started by a setting
    assert measure_job(model="tiny", gpus=2) > 0
    assert measure_job(model="tiny", gpus=2) == 0.0  # reused
    rows = explore_job(model="tiny", gpus=2).tables["measured"]
    assert {r["source"] for r in rows} == {"measured", "modeled"}
    _finite({"measured": rows})


def test_one_cache_hit_rate_is_said_once() -> None:
    """1 TB on one H200 node, cost planner: the tables it puts behind a cache all hit 87%; the note
    gives that figure once (it read '87%–87%')."""
    r = explore_job(model="mlperf_v1_x10", placement="hbm", hardware="h200_node", strategy="cost")
    said = [n for n in r.notes if n.startswith("Cache hit")]
    assert said == ["Cache hit rate (modeled from the skew, lru): 87%."], said
    r = explore_job(model="mlperf_v1", placement="cache", hardware="dgx_a100")
    assert any(n.startswith("Cache hit rates (modeled from the skew, lru): ") and "–" in n for n in r.notes)


def test_the_planners_algorithms_need_no_chart_or_widget_library() -> None:
    """``perf.job_planner`` plans a job (the search included) with neither Altair nor ipywidgets
    imported: they belong to the app that draws it (``viz.planner``)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from recnotebooks.perf.job_planner import plan_job\n"
        "job = plan_job(model='criteo_kaggle', hardware='dgx_a100', nodes=1, gpus=8)\n"
        "assert job.now.job is not None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('altair', 'ipywidgets')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_plan_job_is_the_verdict_the_app_draws() -> None:
    """The perf plan (``plan_job``) and the app's tables (``explore_job``) tell the same story."""
    from recnotebooks.perf.job_planner import plan_job

    settings: dict[str, object] = dict(
        model="mlperf_v1_x30", hardware="big_basin", epochs=3, deadline_h=1, budget_usd=300
    )
    job = plan_job(**settings)
    assert not job.now.feasible and job.now.why_not()
    near, sentence = nearest_feasible(**settings)
    assert job.near == near and job.near_sentence == sentence
    r = explore_job(**settings)
    assert r.tables["verdict"][0]["reasons"] == "; ".join(job.now.why_not())
    assert r.notes[1].startswith(sentence[0].upper() + sentence[1:])
    ok = plan_job(model="tiny", hardware="dgx_h100")
    assert ok.now.feasible and ok.near is None and ok.near_sentence == "" and ok.shown is ok.now


# ----- epochs to MLPerf's target: DLRM-DCNv2's convergence curve ----------------------------------
def test_to_target_takes_the_epochs_from_the_curve_and_labels_them() -> None:
    from recnotebooks.published.convergence import convergence_curve, epochs_to_converge

    (b0, e0), (b1, e1) = convergence_curve()[:2]
    o = evaluate(model="mlperf_dcnv2", epochs="to_target", batch_size=65536)
    assert o.job is not None and o.problem is None
    # between the reference points at 55,296 and 160,000 the curve is the straight line between them
    (_, lo), (_, hi) = convergence_curve()[1], convergence_curve()[2]
    assert (b0, b1) == (32768, 55296) and e0 < e1
    assert o.job.epochs == pytest.approx(lo + (hi - lo) * (65536 - 55296) / (160000 - 55296))
    assert o.job.epochs == epochs_to_converge(65536)
    steps = math.ceil(CRITEO_TERABYTE_SAMPLES * o.job.epochs / 65536)
    # priced as MLPerf's submissions run it (HugeCTR): communication overlapped with compute
    assert o.values["software"] == "hugectr"
    assert o.result is not None and o.job.hours == pytest.approx(steps * o.result.step_time_overlap / 3600)
    eager = evaluate(model="mlperf_dcnv2", epochs="to_target", batch_size=65536, software="torchrec")
    assert eager.job is not None and eager.result is not None
    assert eager.job.hours == pytest.approx(steps * eager.result.step_time / 3600)
    notes = explore_job(model="mlperf_dcnv2", epochs="to_target", batch_size=65536).notes
    assert any(
        n.startswith(f"Epochs: {o.job.epochs:.3f}, what MLPerf's reference runs needed") for n in notes
    )
    assert "Epochs: 3, as set (explicit)." in explore_job(model="criteo_terabyte", epochs=3).notes


def test_to_target_outside_its_curve_says_why_and_finds_the_nearest() -> None:
    off = plan_job(model="mlperf_dcnv2", epochs="to_target", batch_size=262144)
    assert (
        off.now.job is None
        and "convergence curve" in str(off.now.problem)
        and "262144" in str(off.now.problem)
    )
    # the cheapest batch on the curve: the smallest, as HugeCTR runs one node (06 §5)
    assert off.near is not None and off.near.feasible and off.near.values["batch_size"] == 32768
    other = plan_job(model="criteo_terabyte", epochs="to_target")
    assert "applies to mlperf_dcnv2 only" in str(other.now.problem)
    assert other.near_sentence == "nearest feasible: epochs to_target→1"  # the job's epochs, not the model
    samples = evaluate(model="mlperf_dcnv2", epochs="to_target", samples=100_000_000)
    assert "samples per epoch must be" in str(samples.problem) and "4,195,197,692" in str(samples.problem)
    shown = explore_job(model="mlperf_dcnv2", epochs="to_target", batch_size=4096)
    assert shown.tables["verdict"][0]["verdict"] == "impossible" and shown.tables["totals"]
    _finite(shown.tables)


def test_the_model_of_record_is_priced_with_its_optimizers() -> None:
    from recnotebooks.perf.job_planner import job_optimizers

    assert job_optimizers("mlperf_dcnv2") == {"sparse_optimizer": "adagrad", "dense_optimizer": "adagrad"}
    assert job_optimizers("mlperf_v1_x10") == {
        "sparse_optimizer": "rowwise_adagrad",
        "dense_optimizer": "adagrad",
    }
    gb = {}
    for m in ("mlperf_v1", "mlperf_dcnv2"):
        r = evaluate(model=m).result
        assert r is not None
        gb[m] = sum(_number(x["gb"]) for x in r.table_placement())
    # the same tables: row-wise Adagrad adds a float per row, exact Adagrad one per element (dim 128)
    assert gb["mlperf_dcnv2"] == pytest.approx(gb["mlperf_v1"] * (128 + 128) / (128 + 1), rel=1e-6)


def test_convergence_jobs_bad_input_is_named() -> None:
    from recnotebooks.perf.job_planner import convergence_jobs

    with pytest.raises(ValueError, match="convergence curve"):
        convergence_jobs(batches=(16384,), layouts=((1, 8),))
    with pytest.raises(ValueError, match="applies to mlperf_dcnv2 only"):
        convergence_jobs(model="mlperf_v1", batches=(65536,), layouts=((1, 8),))
    with pytest.raises(ValueError, match=r"batches\[0\]"):
        convergence_jobs(batches=(0,), layouts=((1, 8),))
    with pytest.raises(ValueError, match="devices per node"):
        convergence_jobs(batches=(65536,), layouts=((1, 16),))
    with pytest.raises(ValueError, match="hardware"):
        convergence_jobs(hardware="dgx_z9", batches=(65536,))
    with pytest.raises(ValueError, match="non-empty"):
        convergence_jobs(batches=())


# ----- the software: TorchRec's eager step, or HugeCTR as MLPerf's submissions ran it ------------
def test_the_software_is_a_setting_and_a_lever_with_todays_default() -> None:
    assert setting_values("software") == ["torchrec", "hugectr"] and "software" in LEVERS
    assert PLANNER_CONTROLS["software"]["label"] == "software"
    # every other model starts with TorchRec, the cost planner and fp32, as before the setting existed
    for _, model in JOB_MODELS:
        if model != "mlperf_dcnv2":
            assert job_setup(model) == {}, model
    o = evaluate(model="mlperf_v1")
    assert (o.values["software"], o.values["strategy"], o.values["dtype"]) == ("torchrec", "cost", "fp32")
    assert o.job == evaluate(model="mlperf_v1", software="torchrec").job
    # HugeCTR's step on the same plan: no launch overhead, communication overlapped
    fast = evaluate(model="mlperf_v1", software="hugectr")
    assert fast.result is not None and fast.job is not None and o.job is not None
    assert max(c["overhead"] for c in fast.result.per_rank) == 0.0
    assert (
        fast.job.step_time_s == pytest.approx(fast.result.step_time_overlap) and fast.job.hours < o.job.hours
    )
    rows = best_lever(model="mlperf_v1")[1]
    assert any(r["change"] == "software torchrec→hugectr" and r["speedup"] > 1 for r in rows)


@pytest.mark.parametrize(
    ("hw", "nodes", "gpus", "batch", "dtype"),
    [("dgx_h100", 1, 8, 65536, "amp_fp16"), ("dgx_h100", 8, 8, 131072, "amp_fp16"),
     ("h200_node", 2, 4, 32768, "fp32"), ("dgx_a100", 1, 8, 65536, "tf32")],
)  # fmt: skip
def test_the_model_of_record_with_hugectr_is_priced_as_mlperf_runs_it(
    hw: str, nodes: int, gpus: int, batch: int, dtype: str
) -> None:
    """mlperf_dcnv2 starts with HugeCTR, MLPerf's plan and fp16 mixed precision, and its step is
    the one MLPERF_SETUP and mlperf_plan give (notebooks 02, 05 §4 and 06 §5), at any precision."""
    from recnotebooks.perf.cost import estimate
    from recnotebooks.perf.mlperf_plan import mlperf_plan
    from recnotebooks.perf.mlperf_setup import MLPERF_SETUP

    start = evaluate(model="mlperf_dcnv2").values
    assert {k: start[k] for k in ("software", "strategy", "dtype")} == {
        "software": MLPERF_SETUP["implementation"], "strategy": "mlperf", "dtype": MLPERF_SETUP["dtype"]
    }  # fmt: skip
    o = evaluate(model="mlperf_dcnv2", hardware=hw, nodes=nodes, gpus=gpus, batch_size=batch, dtype=dtype)
    cfg, h = job_model("mlperf_dcnv2"), hardware(hw)
    setup = {**MLPERF_SETUP, "dtype": dtype}
    plan = mlperf_plan(cfg, gpus, nodes, h.hbm_bytes)
    r = estimate(cfg, h, batch_size=batch, gpus=gpus, nodes=nodes, plan=plan, **setup)
    assert o.result is not None and o.job is not None and o.problem is None
    assert o.result.step_time_overlap == r.step_time_overlap and o.job.step_time_s == r.step_time_overlap
    assert o.result.per_rank == r.per_rank and o.fits == r.fits


def test_the_planner_gives_the_step_of_05_and_06_section_5() -> None:
    from recnotebooks.perf.job_planner import convergence_jobs
    from recnotebooks.perf.servers import model_of_record_servers

    for row in convergence_jobs(batches=(65536,)):
        o = evaluate(model="mlperf_dcnv2", nodes=row["nodes"], gpus=8, batch_size=65536, epochs="to_target")
        assert o.job is not None
        assert o.job.step_time_s * 1e3 == pytest.approx(row["step_ms"], rel=1e-12)
        assert o.job.epochs == row["epochs"]
    (server,), _ = model_of_record_servers(("dgx_h100",), batch_size=65536)
    o = evaluate(model="mlperf_dcnv2", hardware="dgx_h100", gpus=8, batch_size=65536)
    assert server["plan"] == "MLPerf's" and o.job is not None
    assert o.job.step_time_s * 1e3 == pytest.approx(_number(server["step_ms"]), rel=1e-12)


def test_the_software_says_what_it_prices_and_refuses_what_the_model_does_not() -> None:
    from recnotebooks.perf.cost import estimate

    notes = explore_job(model="mlperf_dcnv2").notes
    assert any(n.startswith("Software: HugeCTR as MLPerf's submissions ran it") for n in notes)
    eager = explore_job(model="mlperf_dcnv2", software="torchrec").notes
    assert any("TorchRec" in n and "MLPerf's submissions ran this model with HugeCTR" in n for n in eager)
    with pytest.raises(ValueError, match=r"software must be one of \['torchrec', 'hugectr'\], got 'jax'"):
        evaluate(software="jax")
    # HugeCTR has no bf16 mode: the planner says so (and which are allowed), as does the model
    bf16 = evaluate(model="mlperf_dcnv2", dtype="amp_bf16")
    allowed = "dtype must be one of ['fp32', 'tf32', 'amp_fp16'] with software 'hugectr'"
    assert bf16.job is None and allowed in str(bf16.problem)
    assert "amp_bf16" in str(bf16.problem)
    with pytest.raises(ValueError, match="dtype with implementation='hugectr' must be one of"):
        estimate(job_model("tiny"), "dgx_h100", batch_size=64, dtype="amp_bf16", implementation="hugectr")
    # tables outside HBM are TorchRec's: refused with HugeCTR, and MLPerf's plan keeps them in HBM
    cache = evaluate(model="mlperf_dcnv2", placement="cache")
    assert "placement must be one of ['hbm'], got 'cache' with software 'hugectr'" in str(cache.problem)
    host = evaluate(model="mlperf_dcnv2", software="torchrec", placement="host")
    assert "got 'host' with strategy 'mlperf'" in str(host.problem)
    spilled = evaluate(model="mlperf_v1_x10", software="hugectr")  # 1 TB: the cost planner moves tables out
    assert "the plan's tables must be one of ['hbm']" in str(spilled.problem) and spilled.job is None
    assert evaluate(model="mlperf_v1_x10", software="torchrec").job is not None
    for bad in (bf16, cache, spilled):  # impossible, said why, and the nearest feasible setting shown
        job = plan_job(**bad.values)
        assert job.shown.job is not None and not job.now.feasible
        _finite(explore_job(**bad.values).tables)


def test_the_app_starts_a_model_as_its_source_trains_it() -> None:
    app = job_planner()
    assert app.values["software"] == "torchrec"
    app.controls["model"].value = "mlperf_dcnv2"  # as a learner picks it in the dropdown
    assert not app.pending and app.error is None
    assert (app.values["software"], app.values["strategy"], app.values["dtype"]) == (
        "hugectr",
        "mlperf",
        "amp_fp16",
    )
    assert any(n.startswith("Software: HugeCTR") for n in app.result.notes)
    # the step the totals price (communication overlapped) is said, beside bars that add up to more
    o = evaluate(**app.values)
    assert o.job is not None
    ms = o.job.step_time_s * 1e3
    assert app.result.tables["step"] == [
        {"setting": "this setting", "step_ms": ms, "software": "hugectr", "source": "modeled"}
    ]
    assert f"(a {ms:.3g} ms step)" in app.result.notes[2]
    bars = sum(_number(r["seconds_per_step"]) for r in app.result.tables["breakdown"]) * 1e3
    spec = str(app.altair_chart.to_dict())  # the subtitle wraps after "... its step is 4.88 ms,"
    assert bars > ms and f"HugeCTR overlaps communication: its step is {ms:.3g} ms," in spec
    app.set(model="criteo_terabyte")  # leaving it restores the defaults
    assert (app.values["software"], app.values["strategy"], app.values["dtype"]) == (
        "torchrec",
        "cost",
        "fp32",
    )
    app.set(software="torchrec", model="mlperf_dcnv2")  # a value given beside the model wins, in any order
    assert (app.values["software"], app.values["dtype"]) == ("torchrec", "amp_fp16")
    assert job_planner(model="mlperf_dcnv2").values["software"] == "hugectr"
    assert job_planner(model="mlperf_dcnv2", dtype="fp32").values["dtype"] == "fp32"
    with pytest.raises(ValueError, match="software"):
        app.set(software="jax")


# ----- issue 37: a plan breaking several rules, the nearest change, short notes, levers that help ----
#: The setting of issue 37 (06 §2): tiny model, Big Basin, 2 nodes x 2 devices, greedy, a device cache
#: under LFU, batch 131072, AMP bf16, software HugeCTR: it breaks three rules (HugeCTR keeps every
#: table in HBM and has no bf16 mode; Big Basin's V100s have no bf16 peak).
ISSUE_37 = dict(model="tiny", hardware="big_basin", nodes=2, gpus=2, strategy="greedy", placement="cache",
                cache_policy="lfu", batch_size=131072, dtype="amp_bf16", software="hugectr")  # fmt: skip


def test_a_plan_breaking_several_rules_is_a_verdict_naming_each_not_an_assertion() -> None:
    r = explore_job(**ISSUE_37)  # raised a bare AssertionError before
    assert r.tables["verdict"][0]["verdict"] == "impossible" and r.tables["totals"]
    why = plan_job(**ISSUE_37).now.why_not()
    assert len(why) == 3
    assert "placement must be one of ['hbm']" in why[0] and "'hugectr'" in why[0]
    assert "no bf16 mode" in why[1] and "big_basin has no peak for" in why[2]
    # the notes: the verdict in one line (the rules, each in a clause), the setting shown, its lever
    assert len(r.notes) <= 4, r.notes
    assert r.notes[0].startswith("MODELED: this plan is impossible: 3 rules broken: placement must be")
    assert all(len(n) < 320 for n in r.notes), r.notes
    # the nearest feasible setting keeps the hardware and the layout: two changes fix both rules
    job = plan_job(**ISSUE_37)
    assert job.near is not None and job.near.feasible and not job.fallback
    assert {k: job.near.values[k] for k in ("hardware", "nodes", "gpus")} == {
        "hardware": "big_basin", "nodes": 2, "gpus": 2}  # fmt: skip
    assert job.near.values["placement"] == "hbm" and job.near.values["dtype"] in ("fp32", "tf32", "amp_fp16")
    assert r.notes[1].startswith("Nearest feasible: ") and "USD" in r.notes[1] and "$" not in r.notes[1]


def test_the_nearest_feasible_setting_is_on_the_same_hardware_when_one_is() -> None:
    """mlperf_v1 with HugeCTR on 2 x 2 Big Basin GPUs (16 GB each) does not fit: before, the nearest
    was another machine (a GB200 NVL72 rack); two changes on the same hardware are feasible and
    nearer. Independently: the cheapest feasible setting among every pair of changes on Big Basin."""
    base = dict(model="mlperf_v1", hardware="big_basin", nodes=2, gpus=2, strategy="greedy",
                dtype="fp32", placement="hbm", software="hugectr")  # fmt: skip
    near, sentence = nearest_feasible(**base)
    assert near is not None and near.feasible and near.values["hardware"] == "big_basin", sentence
    v0 = evaluate(**base).values
    same = [k for k in LEVERS if k != "hardware"]
    assert not any(evaluate(**{**v0, k: x}).feasible for k in same for x in setting_values(k) if x != v0[k])
    assert evaluate(**{**v0, "hardware": "gb200_nvl72"}).feasible  # one change, but of the machine
    pairs = [
        evaluate(**{**v0, a: x, b: y})
        for i, a in enumerate(LEVERS)
        for b in LEVERS[i + 1 :]
        if "hardware" not in (a, b)
        for x in setting_values(a)
        for y in setting_values(b)
        if x != v0[a] and y != v0[b]
    ]
    cheapest = min(o.job.cost_usd for o in pairs if o.feasible and o.job is not None)
    assert near.job is not None and near.job.cost_usd == pytest.approx(cheapest)


def test_the_planner_offers_only_levers_that_help_or_says_none_does() -> None:
    for settings in (ISSUE_37, {}, dict(model="criteo_terabyte"), dict(model="tiny", hardware="big_basin")):
        job = plan_job(**settings)
        r = explore_job(**settings)
        assert all(_number(x["speedup"]) >= 1.005 for x in r.tables["levers"])
        helps = [x for x in job.lever_rows if x["speedup"] >= 1.005]
        assert len(r.tables["levers"]) == len(helps)
        said = [n for n in r.notes if "lever" in n.lower()]
        assert len(said) == 1
        assert (
            said[0].startswith("Lever that helps") if helps else said[0].startswith("No lever one notch away")
        )


def test_the_table_size_axis_reads_in_a_unit_of_the_size() -> None:
    """6 MB of tiny tables read 0–6 MB, not 0.0000–0.0060 GB; a 100 GB model's in GB; 3 TB in TB."""
    from recnotebooks.viz.planner import size_unit

    for model, unit in (("tiny", "MB"), ("mlperf_v1", "GB"), ("mlperf_v1_x30", "TB")):
        app = job_planner(model=model, nodes=8 if model == "mlperf_v1_x30" else 1)
        rows = app.result.tables["placement"]
        assert size_unit(rows)[0] == unit, (model, rows)
        spec = app.chart.spec
        assert f"{unit} of tables (weights and optimizer state)" in str(spec)
    assert size_unit([{"setting": "a", "gb": 0.0}]) == ("kB", 1e6)


# ----- issue 38: the settings a frozen, checked dataclass ----------------------------------------
#: The planner's defaults as they were when they lived in JOB_SETTINGS alone (an independent record).
DEFAULTS = dict(model="mlperf_v1", samples=CRITEO_TERABYTE_SAMPLES, epochs=1, deadline_h=24, budget_usd=3000,
                hardware="dgx_h100", nodes=1, gpus=8, strategy="cost", placement="hbm", cache_fraction=0.05,
                cache_policy="lru", batch_size=65536, dtype="fp32", software="torchrec")  # fmt: skip


def test_job_settings_are_checked_once_frozen_and_replaced_by_lever() -> None:
    import dataclasses

    s = JobSettings()
    assert s.as_dict() == DEFAULTS and list(s.as_dict()) == list(JOB_SETTINGS)
    assert {k: spec["value"] for k, spec in JOB_SETTINGS.items()} == DEFAULTS
    again = JobSettings.from_values(**s.as_dict())
    assert again == s and hash(again) == hash(s) and again is not s
    with pytest.raises(ValueError, match=r"nodes must be one of \[1, 2, 4, 8\], got 3"):
        JobSettings(nodes=3)
    with pytest.raises(ValueError, match="dtype"):
        JobSettings(dtype="fp8")
    with pytest.raises(ValueError, match="gpus"):
        JobSettings(gpus=True)  # a bool is no count
    wrong: dict[str, Any] = {"nodez": 1}  # as a caller's keywords: untyped, checked at run time
    with pytest.raises(TypeError, match="nodez"):
        JobSettings(**wrong)
    two: Any = 2.0
    assert type(JobSettings(nodes=two).nodes) is int  # the option it equals
    with pytest.raises(dataclasses.FrozenInstanceError):
        field = "nodes"
        setattr(s, field, 2)
    moved = s.replace(nodes=2, dtype="amp_bf16")
    assert (moved.nodes, moved.dtype, s.nodes, s.dtype) == (2, "amp_bf16", 1, "fp32")
    with pytest.raises(ValueError, match="gpus"):
        s.replace(gpus=3)
    with pytest.raises(KeyError, match="nodez"):
        s.replace(nodez=2)
    # from_values starts a model as its source trains it; the constructor takes the fields as given
    assert JobSettings.from_values(model="mlperf_dcnv2").software == "hugectr"
    assert JobSettings(model="mlperf_dcnv2").software == "torchrec"
    assert JobSettings.from_values(model="mlperf_dcnv2", dtype="fp32").dtype == "fp32"
    with pytest.raises(KeyError, match="nodez"):
        JobSettings.from_values(nodez=1)
    not_settings: Any = "dgx_h100"
    with pytest.raises(TypeError, match="settings"):
        evaluate(not_settings)
    work = JobSettings(model="mlperf_dcnv2", batch_size=4096, dtype="amp_fp16").workload
    assert (work.batch_size, work.dtype, work.sparse_optimizer) == (4096, "amp_fp16", "adagrad")
    assert work.config == job_model("mlperf_dcnv2")


@given(st.fixed_dictionaries({k: st.sampled_from(setting_values(k)) for k in JOB_SETTINGS}))
@examples(max_examples=6, deadline=None)
def test_the_keyword_entry_points_and_the_dataclass_give_equal_outcomes(values: dict[str, Any]) -> None:
    """``evaluate(**values)`` and ``evaluate(JobSettings(**values))``, each modeled from scratch
    (the cache emptied between them), give the same outcome; so do the levers."""
    from recnotebooks.perf.job_planner import _evaluate

    s = JobSettings(**values)
    _evaluate.cache_clear()
    by_keywords = evaluate(**values)
    _evaluate.cache_clear()
    by_settings = evaluate(s)
    assert by_keywords.settings == s and by_keywords.values == dict(sorted(values.items()))
    assert by_keywords.job == by_settings.job and by_keywords.problems == by_settings.problems
    assert by_keywords.feasible == by_settings.feasible and by_keywords.why_not() == by_settings.why_not()
    assert evaluate(s, nodes=2) == evaluate(**{**values, "nodes": 2})
    if by_settings.job is not None and s.model in ("tiny", "criteo_kaggle"):  # the levers: a small model
        _evaluate.cache_clear()
        assert best_lever(**values) == best_lever(s)


# ----- each rank of the plan explained (issue 40, item 5) ------------------------------------
@pytest.mark.parametrize(
    "values",
    [{}, {"model": "criteo_terabyte", "nodes": 2, "gpus": 8},
     {"model": "mlperf_dcnv2", "nodes": 8, "gpus": 8, "hardware": "dgx_h100"}],
)  # fmt: skip
def test_each_rank_of_the_planned_step_is_explained(values: dict[str, Any]) -> None:
    o = evaluate(**values)
    e = explain_outcome(o)
    r = o.result
    assert r is not None and e.plan == r.plan and len(e.ranks) == o.settings.gpus * o.settings.nodes
    # the same step the planner priced: each rank's components are the estimate's for that rank
    for rank in e.ranks:
        assert rank.seconds == pytest.approx(dict(r.per_rank[rank.rank]))
        assert rank.step == pytest.approx(sum(rank.seconds.values()))
    assert max(x.step for x in e.ranks) == pytest.approx(sum(r.breakdown().values()))
    assert e.time_imbalance == pytest.approx(
        max(x.step for x in e.ranks) / (sum(x.step for x in e.ranks) / len(e.ranks))
    )
    assert {w["table"] for w in e.why()} == {t.name for t in o.settings.workload.config.tables}

    res = explore_job(**values)
    rows = res.tables["per_rank"]
    steps: dict[str, float] = {}
    for x in rows:
        steps[str(x["rank"])] = steps.get(str(x["rank"]), 0.0) + _number(x["seconds_per_step"])
    assert len(steps) == len(e.ranks)  # every rank in the table
    drawn = {str(x["rank"]): str(x["drawn"]) for x in rows if x["drawn"]}
    if len(steps) <= 8:
        assert drawn == {k: k for k in steps}
    else:  # the slowest (the rank the critical path names), median and fastest drawn, labelled so
        order = sorted(steps, key=lambda k: (-steps[k], int(k.split()[1])))
        assert order[0] == f"rank {e.critical_path.rank}"
        picked = {order[0]: "slowest", order[len(order) // 2]: "median", order[-1]: "fastest"}
        assert drawn == {k: f"{k} ({what})" for k, what in picked.items()}
    note = res.notes[-1]
    assert note.startswith(f"Each rank (MODELED, {len(steps)} devices): step max/mean {e.time_imbalance:.2f}")
    assert "critical path: rank " in note
    _finite(res.tables)
    chart = job_planner(**values).altair_chart.to_dict()
    assert "Each rank's step" in str(chart)


def test_an_impossible_setting_explains_the_setting_shown_and_bad_outcomes_are_refused() -> None:
    res = explore_job(hardware="cpu_cluster", gpus=8)
    assert len({x["rank"] for x in res.tables["per_rank"]}) == 1  # the nearest feasible: 1 device
    with pytest.raises(TypeError, match="outcome must be an Outcome"):
        explain_outcome("tiny")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="outcome: this setting was not modeled.*1 device"):
        explain_outcome(evaluate(hardware="cpu_cluster", gpus=8))
