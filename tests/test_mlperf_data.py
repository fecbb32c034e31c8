"""The published MLPerf DLRM-DCNv2 table: internally consistent, scored by the policy, split
by round, and equal to values read by hand from the result files (no network, no mirrors)."""

from __future__ import annotations

import ast
import dataclasses
import datetime as dt
import math
import random
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from _values import bad
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.published import mlperf, mlperf_results
from recnotebooks.published.mlperf import (
    FIT_ROUNDS,
    HELD_OUT_ROUNDS,
    RUNS_REQUIRED,
    MLPerfResult,
    olympic_mean,
)
from recnotebooks.published.mlperf_results import MLPERF_DCNV2_RESULTS, SOURCE_COMMITS

ROWS = MLPERF_DCNV2_RESULTS
BY_KEY = {(r.round, r.submitter, r.system): r for r in ROWS}


def row(round_: str, submitter: str, system: str) -> MLPerfResult:
    return BY_KEY[(round_, submitter, system)]


# ----- the scoring rule ----------------------------------------------------------------------
def test_olympic_mean_drops_the_fastest_and_the_slowest() -> None:
    assert olympic_mean([5.0, 1.0, 9.0, 3.0]) == 4.0  # 1 and 9 dropped: (3 + 5) / 2
    assert olympic_mean([float(m) for m in range(1, 11)]) == 5.5  # 10 runs: mean of 2..9
    assert olympic_mean([1.0, 2.0, 3.0]) == 2.0  # the smallest valid set


def test_a_non_converged_run_is_the_slowest_one_dropped() -> None:
    # 9 converged runs and one that failed: the failure is dropped as the slowest, so the
    # slowest converged run (9) stays in and the fastest (1) goes
    assert olympic_mean([float(m) for m in range(1, 10)], non_converged=1) == pytest.approx(5.5)
    assert olympic_mean([2.0, 7.0], non_converged=1) == 7.0


@pytest.mark.parametrize(
    ("minutes", "failed", "error", "match"),
    [
        ([1.0, 2.0, 3.0], 2, ValueError, "non_converged must be 0 or 1"),
        ([1.0, 2.0], 0, ValueError, "at least one run"),
        ([1.0], 1, ValueError, "at least one run"),
        ([1.0, 0.0, 3.0], 0, ValueError, r"minutes\[1\]"),
        ([1.0, math.nan, 3.0], 0, ValueError, r"minutes\[1\]"),
        ("123", 0, TypeError, "sequence of run times"),
        ([1.0, 2.0, 3.0], -1, ValueError, "non_converged"),
    ],
)
def test_olympic_mean_refuses_what_the_policy_cannot_score(
    minutes: object, failed: int, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        olympic_mean(bad(minutes), non_converged=failed)


@given(st.lists(st.floats(min_value=0.01, max_value=1e4), min_size=3, max_size=40), st.randoms())
def test_olympic_mean_is_the_trimmed_mean_whatever_the_order(times: list[float], rnd: random.Random) -> None:
    shuffled = list(times)
    rnd.shuffle(shuffled)
    expected = (sum(times) - min(times) - max(times)) / (len(times) - 2)
    assert olympic_mean(shuffled) == pytest.approx(expected, rel=1e-9)
    assert min(times) <= olympic_mean(shuffled) <= max(times)


# ----- the table is consistent -----------------------------------------------------------------
def test_the_table_has_rows_of_every_round() -> None:
    counts = Counter(r.round for r in ROWS)
    assert set(counts) == set(FIT_ROUNDS) | set(HELD_OUT_ROUNDS)
    assert all(n >= 5 for n in counts.values()), counts


@pytest.mark.parametrize("r", ROWS, ids=lambda r: f"{r.round}-{r.submitter}-{r.system}")
def test_each_row_is_scored_by_the_policy(r: MLPerfResult) -> None:
    assert r.olympic_minutes == pytest.approx(olympic_mean(r.run_minutes, r.non_converged), rel=1e-12)
    assert r.score_minutes == pytest.approx(r.olympic_minutes * r.scaling_factor, rel=1e-12)
    # every submission has the runs the rules ask for: the converged ones and at most one failure
    assert len(r.run_minutes) + r.non_converged == RUNS_REQUIRED
    assert r.non_converged in (0, 1)
    # the review scales scores up (slower) to the reference convergence, never down
    assert 1.0 <= r.scaling_factor < 1.1


@pytest.mark.parametrize("r", ROWS, ids=lambda r: f"{r.round}-{r.submitter}-{r.system}")
def test_each_row_cites_its_result_folder_in_its_round(r: MLPerfResult) -> None:
    assert r.source == (
        f"https://github.com/mlcommons/training_results_{r.round}/tree/main/"
        f"{r.submitter}/results/{r.system}/dlrm_dcnv2"
    )
    assert r.division == "closed"


@pytest.mark.parametrize("r", ROWS, ids=lambda r: f"{r.round}-{r.submitter}-{r.system}")
def test_each_row_is_a_possible_system_and_run(r: MLPerfResult) -> None:
    assert r.nodes >= 1 and r.host_cpus_per_node >= 1
    if r.accelerators_per_node == 0:  # the one CPU-only system trains on its Xeons
        assert r.accelerator == "N/A" and "CPU only" in r.notes
    else:
        assert r.accelerators >= 1 and r.accelerator.startswith("NVIDIA"), r.accelerator
    # the benchmark trains at most one epoch; converged runs stop inside it
    assert all(0.0 < e <= 1.0 for e in r.epochs_to_target), r.epochs_to_target
    assert len(r.epochs_to_target) == len(r.run_minutes)
    assert r.optimizer == "adagrad" and r.learning_rate is not None and r.global_batch_size >= 1
    if r.samples_per_s is not None:  # samples/s x minutes is at least the samples to the target
        assert r.samples_per_s * 60 * max(r.run_minutes) >= 0.99 * r.samples_to_target


def test_no_row_is_listed_twice() -> None:
    keys = [(r.round, r.submitter, r.system) for r in ROWS]
    assert len(keys) == len(set(keys))


def test_rounds_split_into_fit_and_held_out_exactly() -> None:
    assert FIT_ROUNDS == ("v3.0", "v3.1", "v4.0")
    assert HELD_OUT_ROUNDS == ("v4.1", "v5.0", "v5.1")
    assert not set(FIT_ROUNDS) & set(HELD_OUT_ROUNDS)
    assert [r for r, _ in SOURCE_COMMITS] == list(FIT_ROUNDS + HELD_OUT_ROUNDS)
    assert all(re.fullmatch(r"[0-9a-f]{40}", c) for _, c in SOURCE_COMMITS)
    order = FIT_ROUNDS + HELD_OUT_ROUNDS
    assert [order.index(r.round) for r in ROWS] == sorted(order.index(r.round) for r in ROWS)


def test_rows_with_the_same_runs_point_at_each_other() -> None:
    for r in ROWS:
        for other in r.same_runs_as:
            round_, name = other.split(" ", 1)
            twin = row(round_, *name.split("/", 1))
            assert f"{r.round} {r.submitter}/{r.system}" in twin.same_runs_as
            assert sorted(twin.run_minutes) == sorted(r.run_minutes)
    # published again in a later round: what a held-out check must leave out
    assert row("v4.1", "NVIDIA", "h200_ngc24.04_merlin_hugectr").republished
    assert not row("v4.0", "NVIDIA", "h200_ngc24.04_merlin_hugectr").republished


def test_the_read_date_is_recorded_in_the_docstring() -> None:
    dt.date.fromisoformat(mlperf_results.READ_DATE)
    assert f"read from the mirrors on {mlperf_results.READ_DATE}." in (mlperf_results.__doc__ or "")


@pytest.mark.parametrize(
    ("module", "allowed"),
    [(mlperf, "recnotebooks.checks"), (mlperf_results, "recnotebooks.published.mlperf")],
    ids=["record", "table"],
)
def test_the_modules_import_only_the_record_checks_and_the_standard_library(
    module: ModuleType, allowed: str
) -> None:
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert name == allowed or top in sys.stdlib_module_names, name


def test_a_row_refuses_impossible_values() -> None:
    r = row("v3.0", "NVIDIA", "dgxh100_ngc23.04_merlin_hugectr")
    with pytest.raises(ValueError, match="nodes"):
        dataclasses.replace(r, nodes=0)
    with pytest.raises(ValueError, match="epochs_to_target must have one value per converged run"):
        dataclasses.replace(r, epochs_to_target=r.epochs_to_target[:-1])
    with pytest.raises(ValueError, match="non_converged"):
        dataclasses.replace(r, non_converged=2)
    with pytest.raises(TypeError, match="run_minutes"):
        dataclasses.replace(r, run_minutes=bad(list(r.run_minutes)))
    with pytest.raises(ValueError, match="round must be one of"):
        dataclasses.replace(r, round="v6.0")  # a new round goes into HELD_OUT_ROUNDS first


# ----- values read by hand from the result files -------------------------------------------------
def test_nvidia_v3_0_dgx_h100_first_run() -> None:
    # https://github.com/mlcommons/training_results_v3.0/blob/main/NVIDIA/results/dgxh100_ngc23.04_merlin_hugectr/dlrm_dcnv2/result_0.txt
    # run_start time_ms 1683409408490, run_stop 1683409654871 (status success, epoch_num
    # 0.7498978502418643), global_batch_size 55296, opt_base_learning_rate 0.004
    r = row("v3.0", "NVIDIA", "dgxh100_ngc23.04_merlin_hugectr")
    assert r.run_minutes[0] == pytest.approx((1683409654871 - 1683409408490) / 60_000, abs=1e-12)
    assert r.epochs_to_target[0] == 0.7498978502418643
    assert (r.global_batch_size, r.learning_rate, r.accelerators_per_node, r.nodes) == (55296, 0.004, 8, 1)
    assert r.accelerator == "NVIDIA H100-SXM5-80GB" and r.scaling_factor == 1.0


def test_nvidia_v5_0_gb200_64_gpus_first_run_and_scaling() -> None:
    # https://github.com/mlcommons/training_results_v5.0/blob/main/NVIDIA/results/tyche_ngpu64_ngc25.03_hugectr/dlrm_dcnv2/result_0.txt
    # run_start 1745058288468, run_stop 1745058338405, epoch_num 0.9994200470406289, batch 135168;
    # its folder's scaling.json: {"scaling_factor": 1.0040924947860796}
    r = row("v5.0", "NVIDIA", "tyche_ngpu64_ngc25.03_hugectr")
    assert r.run_minutes[0] == pytest.approx((1745058338405 - 1745058288468) / 60_000, abs=1e-12)
    assert r.epochs_to_target[0] == 0.9994200470406289
    assert (r.global_batch_size, r.accelerators_per_node, r.nodes) == (135168, 4, 16)
    assert r.scaling_factor == 1.0040924947860796


def test_cisco_v5_1_has_one_aborted_run() -> None:
    # https://github.com/mlcommons/training_results_v5.1/blob/main/Cisco/results/hpf_n8/dlrm_dcnv2/result_1.txt
    # run_stop status "aborted": its last eval_accuracy is 0.8025879859924316 < 0.80275
    r = row("v5.1", "Cisco", "hpf_n8")
    assert (len(r.run_minutes), r.non_converged) == (9, 1)
    assert r.olympic_minutes == pytest.approx((sum(r.run_minutes) - min(r.run_minutes)) / 8, rel=1e-12)


def test_intel_v3_1_cpu_run_logs_no_throughput() -> None:
    # https://github.com/mlcommons/training_results_v3.1/blob/main/Intel/results/4-nodes-SPR-pytorch/dlrm_dcnv2/result_0.txt
    # run_start 1696535453333, run_stop 1696549593632; no tracked_stats event in any of its files
    r = row("v3.1", "Intel", "4-nodes-SPR-pytorch")
    assert r.run_minutes[0] == pytest.approx((1696549593632 - 1696535453333) / 60_000, abs=1e-12)
    assert r.samples_per_s is None and r.accelerators_per_node == 0 and r.nodes == 4
    assert [x for x in ROWS if x.samples_per_s is None] == [r]


def test_each_runs_phases_add_up_to_its_logged_throughput() -> None:
    """The phases a log times (the training between evaluations, one evaluation, the epochs
    between two: read from eval_start/eval_stop) give back the throughput the same log states
    (tracked_stats), at the run's median epochs: from 0.5% under it to 2.5% over (the phases leave
    out each run's first stretch, from run_start to the first evaluation, which holds the
    start-up). Two readings of one log: the phases are read as the logs mean them, and the
    logged throughput counts the evaluations' time."""
    checked = 0
    for r in ROWS:
        speed, eval_s, every = r.training_samples_per_s, r.seconds_per_eval, r.eval_every_epochs
        assert speed is not None and eval_s is not None and every is not None, r
        if r.samples_per_s is None:
            continue
        epochs = sorted(r.epochs_to_target)[len(r.epochs_to_target) // 2]
        evals = round(epochs / every)
        seconds = epochs * mlperf.TRAIN_SAMPLES / speed + evals * eval_s
        assert 0.995 <= epochs * mlperf.TRAIN_SAMPLES / seconds / r.samples_per_s <= 1.025, r
        checked += 1
    assert checked == len(ROWS) - 1  # all but Intel's CPU run, which logs no throughput


def test_phases_read_by_hand() -> None:
    # Intel v3.1 result_0.txt: eval_stop 1696536366979 -> eval_start 1696536997900 (630.9 s) over
    # epoch_num 0.05 -> 0.1; eval_start 1696536182635 -> eval_stop 1696536366977 (184.3 s); its
    # ten runs' medians: 634.5-647.3 s of training a twentieth of an epoch, 180.1-184.5 s an evaluation
    r = row("v3.1", "Intel", "4-nodes-SPR-pytorch")
    twentieth = mlperf.TRAIN_SAMPLES / 20
    speed, eval_s, every = r.training_samples_per_s, r.seconds_per_eval, r.eval_every_epochs
    assert speed is not None and eval_s is not None and every is not None
    assert twentieth / 647.3 <= speed <= twentieth / 634.5
    assert 180.0 <= eval_s <= 184.5 and abs(every - 0.05) < 1e-4
    # University of Florida v5.1 result_0.txt evaluates every 0.1318 epoch (epoch_num 0.1318, 0.2636, ...)
    uf = row("v5.1", "University-of-Florida", "hpg.dgxb200x8.n1")
    assert uf.eval_every_epochs == pytest.approx(0.1318, abs=1e-4)


def test_dell_v3_0_score_is_scaled_by_the_review() -> None:
    # https://github.com/mlcommons/training_results_v3.0/blob/main/Dell/results/XE8640x4H100-SXM-80GB/dlrm_dcnv2/scaling.json
    # {"scaling_factor": 1.010204081632653}; the system has 4 H100s and trains at batch 28000
    r = row("v3.0", "Dell", "XE8640x4H100-SXM-80GB")
    assert r.scaling_factor == 1.010204081632653
    assert (r.accelerators_per_node, r.global_batch_size) == (4, 28000)


def test_the_generator_writes_the_table_file_as_it_stands() -> None:
    """``datasets/mlperf_dcnv2.py`` rewrites recnotebooks/published/mlperf_results.py: rendering
    today's rows again gives the file back, byte for byte (so a refresh changes only what the
    mirrors changed)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "datasets"))
    try:
        import mlperf_dcnv2 as generator
    finally:
        sys.path.pop(0)
    assert Path(mlperf_results.__file__) == generator.MODULE
    text = generator.MODULE.read_text()
    head, sep, _ = text.partition(generator.GENERATED)
    assert sep and generator.READ_LINE.search(head)
    block = generator.render(MLPERF_DCNV2_RESULTS, SOURCE_COMMITS, mlperf_results.READ_DATE)
    assert generator.ruff_format(head + block) == text
