"""Notebook 06 (the capstone), sections 2 to 5: every sentence of its markdown that describes an output,
asserted on the numbers the notebook computes (section 5's findings are in test_takeaways_dcnv2.py).

Each test calls the library as the notebook's cell does. When one fails, the model and the sentence
disagree: find out which is wrong before changing either.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.job_planner import (
    best_lever,
    convergence_jobs,
    evaluate,
    job_model,
    nearest_feasible,
    plan_job,
)
from recnotebooks.published.convergence import EPOCHS_FROM
from recnotebooks.viz.planner import job_planner

PRODUCTION = "mlperf_v1_x10"  # the parameters cell's
MEASURE_RANKS = 2
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06_capstone.ipynb"


def _source(cell: int) -> str:
    return "".join(json.loads(NOTEBOOK.read_text())["cells"][cell]["source"])


def test_parameters_are_the_ones_these_tests_use() -> None:
    params = _source(1)
    assert f'PRODUCTION = "{PRODUCTION}"' in params and f"MEASURE_RANKS = {MEASURE_RANKS}" in params


def test_2_production_tables_outgrow_hbm_and_the_planner_moves_them() -> None:
    # cell 6: "production scale: ~1 TB of tables no longer fit in 8 x 80 GB of HBM"
    h100 = hardware("dgx_h100")
    tables = job_model(PRODUCTION).sparse_parameters * 4  # fp32 weights
    assert round(tables / 1e12, 1) in (1.0, 1.1) and tables > 8 * h100.hbm_bytes and h100.hbm_bytes == 80e9
    # cell 7: "The cost planner moved what does not fit behind device caches in host DRAM (or to parameter
    # servers), so the plan still fits"
    app = job_planner()
    app.set(model=PRODUCTION)
    outcome = evaluate(**app.values)
    assert outcome.fits and outcome.result is not None
    held: dict[str, float] = {}
    for x in outcome.result.table_placement():
        assert isinstance(x["bytes"], float), x
        held[str(x["placement"])] = x["bytes"]
    assert held.get("hbm", 0) > 0 and held.get("cache", 0) + held.get("remote", 0) > 0


def test_3_an_impossible_plan_says_why_and_names_a_feasible_one_a_change_or_two_away() -> None:
    # cells 7 and 8: "a plan that ... misses the deadline or the budget ... says why, and shows the nearest
    # feasible setting: the cheapest one a single change away, else two"
    kw = {"model": "mlperf_v1_x30", "hardware": "big_basin", "epochs": 3, "deadline_h": 1, "budget_usd": 300}
    job = plan_job(**kw)
    assert not job.now.feasible and job.now.why_not()
    near, _ = nearest_feasible(**kw)
    assert near is not None and near.feasible
    changed = {k for k in near.values if near.values[k] != job.now.values[k]}
    assert 1 <= len(changed) <= 2


def test_4_on_a_big_job_the_batch_or_the_precision_helps_most() -> None:
    # cell 9: "On a big job it is often the precision or the batch"; cell 10 prints the first four, (1)
    best, levers = best_lever(model=PRODUCTION)
    assert best is not None and best == levers[0]
    assert {str(r["lever"]) for r in levers[:2]} == {"batch_size", "dtype"}


def test_4_on_many_nodes_the_all_to_all_bounds_the_step_and_more_nodes_make_it_worse() -> None:
    # cell 9: "on many nodes the all-to-all bounds the step and more nodes make it worse"
    hours = []
    for nodes in (2, 4, 8):
        o = evaluate(model=PRODUCTION, nodes=nodes)
        assert o.result is not None and o.job is not None
        parts = o.result.breakdown()
        assert max(parts, key=parts.__getitem__) == "all_to_all", nodes
        hours.append(o.job.hours)
    assert hours == sorted(hours)


def test_4_the_two_levers_answer_two_questions_and_differ() -> None:
    # cell 9: "the cell below asks twice, numbered — (1) for the production job of section 2, (2) for the tiny
    # model on a few ranks that the app then shows — and the answers differ"; cell 10 as it runs
    cell = _source(10)
    assert (
        "(1) section 2's job, {PRODUCTION}" in cell
        and "(2) the app now, the tiny model on {MEASURE_RANKS} ranks" in cell
    )
    app = job_planner()
    app.set(model=PRODUCTION)
    best, _ = best_lever(model=PRODUCTION)
    app.set(model="tiny", gpus=MEASURE_RANKS)
    tiny_best, _ = best_lever(**app.values)
    assert best is not None and tiny_best is not None and best["change"] != tiny_best["change"]
    # (2) is the lever the app itself names for its setting
    assert plan_job(**app.values).lever == tiny_best


def test_5_the_chart_marks_published_interpolated_and_pruned_points() -> None:
    # cell 11: "the filled points are the reference points on the curve, the hollow ones are read off the
    # line between them (interpolated), and the grey crosses are reference points MLPerf's checker prunes:
    # they lie above the line through their neighbours"
    from recnotebooks.viz.charts import chart_rows
    from recnotebooks.viz.planner import convergence_chart

    curve = convergence_jobs(model="mlperf_dcnv2", hardware="dgx_h100", layouts=((1, 8), (8, 8)))  # cell 12
    epochs = convergence_chart(curve).to_dict()["vconcat"][0]
    point = next(layer for layer in epochs["layer"] if layer["mark"]["type"] == "point")
    marks = {
        kind: (fill, shape)
        for kind, fill, shape in zip(
            EPOCHS_FROM,
            point["encoding"]["fill"]["scale"]["range"],
            point["encoding"]["shape"]["scale"]["range"],
            strict=True,
        )
    }
    published, interpolated, pruned = EPOCHS_FROM
    assert marks[interpolated][0] == "white" != marks[published][0]  # hollow, filled
    assert marks[pruned] == ("#9d9d9d", "cross")  # grey crosses
    rows = chart_rows(epochs)
    at = {(r["global_batch"], r["epochs_from"]): r["epochs"] for r in rows}
    for b, kind in at:
        if kind == pruned:
            assert at[(b, pruned)] > at[(b, interpolated)]  # above the line
    assert {b for b, k in at if k == interpolated} == {r["global_batch"] for r in curve} - {
        b for b, k in at if k == published
    }


@pytest.mark.parametrize("cell", [3, 6, 8, 10, 12, 14, 16])
def test_printed_reports_keep_to_the_notebook_width(cell: int) -> None:
    # every long line this notebook prints goes through say() (the smoke run checks the output too)
    src = _source(cell)
    assert "say(" in src


def test_5_the_curve_is_criteo_1tb_to_mlperfs_target_from_dozens_of_runs() -> None:
    # cell 11: "the epochs of Criteo 1TB (4.2 billion samples) that dozens of seeded reference runs needed to
    # reach the target AUC of 0.80275 at each of a few global batches"
    from recnotebooks.published.convergence import DEFAULT_ROUND, rules_for_round
    from recnotebooks.published.mlperf import TARGET_AUC, TRAIN_SAMPLES

    assert round(TRAIN_SAMPLES / 1e9, 1) == 4.2 and TARGET_AUC == 0.80275
    points = rules_for_round(DEFAULT_ROUND)
    assert 3 <= len(points) <= 8 and all(len(p.epochs) >= 20 for p in points)
