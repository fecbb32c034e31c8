"""MLPerf's DLRM-DCNv2 convergence curve (recnotebooks.published.convergence) against MLPerf's own
RCP checker, whose figures are written below as it printed them, and by its definition."""

from __future__ import annotations

import _values
import pytest
from _values import num, whole
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.published import convergence as cv
from recnotebooks.published.mlperf import TRAIN_SAMPLES, MLPerfResult, olympic_mean

# mlcommons/logging's rcp_checker.RCP_Checker("training", version, "dlrm_dcnv2").pruned_rcp_data,
# run on the JSON files of RCP_SOURCE (2026-12-03): (batch, "RCP Mean") after pruning.
CHECKER_PRUNED = {
    "4.0.0": [(32768, 0.7071), (55296, 0.7615), (135168, 0.9279)],
    "5.1.0": [(32768, 0.7071), (55296, 0.7615), (160000, 0.9583)],
}


@pytest.mark.parametrize("mlperf_round, version", [("v4.0", "4.0.0"), ("v5.1", "5.1.0"), ("v3.0", "4.0.0")])
def test_curve_is_the_rcp_checkers(mlperf_round: str, version: str) -> None:
    curve = cv.convergence_curve(mlperf_round)
    assert [(b, round(e, 4)) for b, e in curve] == CHECKER_PRUNED[version]


def test_olympic_mean_drops_one_of_each_end() -> None:
    assert olympic_mean([1.0, 5.0, 2.0, 3.0, 100.0]) == pytest.approx((2 + 3 + 5) / 3)
    # 55,296's 50 runs: 10 at 0.7, 25 at 0.75, 11 at 0.8, 4 at 0.9; drop one 0.7 and one 0.9
    want = (9 * 0.7 + 25 * 0.75 + 11 * 0.8 + 3 * 0.9) / 48
    (p,) = [p for p in cv.RCPS["3.0.0"] if p.batch_size == 55296]
    assert len(p.epochs) == 50 and p.mean_epochs == pytest.approx(want)


def test_every_round_has_rules_and_points_are_published_order() -> None:
    assert set(cv.RULES) == {"v3.0", "v3.1", "v4.0", "v4.1", "v5.0", "v5.1", "v6.0", "v6.1"}
    for points in cv.RCPS.values():
        assert [p.batch_size for p in points] == sorted(p.batch_size for p in points)
        assert all(len(p.epochs) >= 20 and all(0 < e <= 1.0 for e in p.epochs) for p in points)


@settings(max_examples=60, deadline=None)
@given(st.integers(32768, 160000), st.integers(32768, 160000))
def test_more_batch_needs_more_epochs(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert cv.epochs_to_converge(lo, "v5.1") <= cv.epochs_to_converge(hi, "v5.1") + 1e-12


def test_interpolates_linearly_between_points_and_hits_them() -> None:
    curve = dict(cv.convergence_curve("v4.0"))
    for b, e in curve.items():
        assert cv.epochs_to_converge(b, "v4.0") == pytest.approx(e)
    mid = (55296 + 135168) // 2
    assert cv.epochs_to_converge(mid, "v4.0") == pytest.approx((curve[55296] + curve[135168]) / 2, rel=1e-4)
    assert cv.samples_to_converge(55296, "v4.0") == pytest.approx(curve[55296] * TRAIN_SAMPLES)


@pytest.mark.parametrize("batch", [32767, 135169, 10**9, 0, -5])
def test_outside_the_curve_is_refused(batch: int) -> None:
    with pytest.raises(ValueError, match="global_batch must lie on MLPerf's DLRM-DCNv2 convergence curve"):
        cv.epochs_to_converge(batch, "v4.0")


@pytest.mark.parametrize("bad", [True, 55296.0, "55296", None])
def test_batch_of_the_wrong_type_is_refused(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="global_batch"):
        cv.epochs_to_converge(_values.bad(bad), "v4.0")


def test_unknown_round_is_refused() -> None:
    with pytest.raises(ValueError, match="mlperf_round"):
        cv.convergence_curve("v2.1")


def test_time_to_train_arithmetic() -> None:
    e = cv.epochs_to_converge(55296, "v4.0")
    assert cv.time_to_train(1e7, 55296, "v4.0") == pytest.approx(e * TRAIN_SAMPLES / 1e7 / 60)
    with_eval = cv.time_to_train(1e7, 55296, "v4.0", eval_samples_per_s=3e7)
    evals = cv.evaluations(e)
    assert evals == 16  # 0.7615 epochs: evaluations at 0.05, 0.10, ..., 0.80
    assert with_eval == pytest.approx((e * TRAIN_SAMPLES / 1e7 + evals * cv.EVAL_SAMPLES / 3e7) / 60)
    assert cv.evaluations(0.75) == 15
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="samples_per_s"):
            cv.time_to_train(bad, 55296)


def test_docstring_examples_run() -> None:
    import doctest

    failed, attempted = doctest.testmod(cv, raise_on_error=False, verbose=False)
    assert attempted >= 1 and failed == 0


def _on_curve(r: MLPerfResult) -> bool:
    lo, hi = cv.convergence_curve(r.round)[0][0], cv.convergence_curve(r.round)[-1][0]
    return r.samples_per_s is not None and lo <= r.global_batch_size <= hi


def test_logged_throughput_predicts_the_published_time_to_train() -> None:
    """Issue 24 item 6: fed a submission's logged throughput (evaluations inside it), the curve
    predicts its published score (olympic mean x the review's scaling) within 5%; NVIDIA's rows
    all, and every other row on the curve too (rows at 28,000, below it, are refused)."""
    from recnotebooks.published.mlperf_results import MLPERF_DCNV2_RESULTS

    rows = [r for r in MLPERF_DCNV2_RESULTS if _on_curve(r)]
    assert sum(r.submitter == "NVIDIA" for r in rows) >= 18 and len(rows) >= 80
    for r in rows:
        assert r.samples_per_s is not None  # _on_curve keeps only the rows that log it
        predicted = cv.time_to_train(r.samples_per_s, r.global_batch_size, r.round)
        assert predicted == pytest.approx(r.score_minutes, rel=0.05), (r.round, r.submitter, r.system)
    below = [r for r in MLPERF_DCNV2_RESULTS if r.global_batch_size < 32768]
    assert below, "the data has runs below the curve"
    for r in below:
        with pytest.raises(ValueError, match="global_batch must lie on"):
            cv.time_to_train(1e7, r.global_batch_size, r.round)


# ----- published points, interpolated values and pruned points kept apart (06 §5's chart) ---------
JOB_BATCHES = (32768, 55296, 65536, 102400, 135168, 160000)  # convergence_jobs' batches, the RCP files'


def test_curve_points_say_which_epochs_were_published() -> None:
    # v6.0 (rules 5.1.0): the checker keeps 32,768, 55,296 and 160,000 (CHECKER_PRUNED); the RCP files'
    # 65,536, 102,400 and 135,168 lie above the line between them and are pruned
    rows = cv.curve_points(JOB_BATCHES, "v6.0")
    kinds: dict[tuple[int, str], float] = {
        (whole(r, "global_batch"), str(r["epochs_from"])): num(r, "epochs") for r in rows
    }
    published, interpolated, pruned = cv.EPOCHS_FROM
    kept = dict(CHECKER_PRUNED["5.1.0"])
    assert {b for b, k in kinds if k == published} == set(kept)
    assert {b for b, k in kinds if k == interpolated} == {65536, 102400, 135168}
    assert {b for b, k in kinds if k == pruned} == {65536, 102400, 135168}
    for b in kept:
        assert round(kinds[(b, published)], 4) == kept[b]
    for b in (65536, 102400, 135168):  # on the line between 55,296 and 160,000, by hand
        line = kept[55296] + (kept[160000] - kept[55296]) * (b - 55296) / (160000 - 55296)
        assert kinds[(b, interpolated)] == pytest.approx(line, abs=1e-4)
        (point,) = [p for p in cv.rules_for_round("v6.0") if p.batch_size == b]
        assert kinds[(b, pruned)] == pytest.approx(olympic_mean(point.epochs))
        assert kinds[(b, pruned)] > kinds[(b, interpolated)]  # above the line: why the checker drops it
    assert [r["global_batch"] for r in rows] == sorted(whole(r, "global_batch") for r in rows)


def test_curve_points_refuse_a_batch_off_the_curve() -> None:
    with pytest.raises(ValueError, match="convergence curve"):
        cv.curve_points((262144,))


def test_the_convergence_chart_marks_interpolated_values_apart_from_published_points() -> None:
    from recnotebooks.perf.job_planner import convergence_jobs
    from recnotebooks.viz.charts import chart_rows
    from recnotebooks.viz.planner import convergence_chart

    spec = convergence_chart(convergence_jobs(layouts=((1, 8),))).to_dict()
    epochs = spec["vconcat"][0]
    drawn = {(r["global_batch"], r["epochs_from"]) for r in chart_rows(epochs)}
    published, interpolated, pruned = cv.EPOCHS_FROM
    assert {b for b, k in drawn if k == published} == {32768, 55296, 160000}
    assert {b for b, k in drawn if k == interpolated} == {65536, 102400, 135168}
    # each kind has its own mark, and the legend names it
    point = next(layer for layer in epochs["layer"] if layer["mark"]["type"] == "point")
    for channel in ("fill", "stroke", "shape"):
        assert point["encoding"][channel]["field"] == "epochs_from"
        assert point["encoding"][channel]["scale"]["domain"] == list(cv.EPOCHS_FROM)
    from recnotebooks.viz.tidy import (
        CHAR_PX,
    )  # the legend names each kind whole (Vega cuts a label at its limit)

    assert point["encoding"]["fill"]["legend"]["labelLimit"] >= max(map(len, cv.EPOCHS_FROM)) * CHAR_PX
    fills = dict(zip(cv.EPOCHS_FROM, point["encoding"]["fill"]["scale"]["range"], strict=True))
    assert fills[interpolated] == "white" and fills[published] != "white"  # hollow: not a published point
    # the line is the curve: published points and the values between them, not the pruned ones
    line = next(layer for layer in epochs["layer"] if layer["mark"]["type"] == "line")
    assert line["transform"] == [{"filter": "datum._on_curve"}]
    assert all(r["_on_curve"] == (r["epochs_from"] != pruned) for r in chart_rows(epochs))


def test_reference_curve_refuses_an_unknown_kind() -> None:
    from recnotebooks.viz.charts import reference_curve

    rows = [{"x": 1, "y": 2.0, "k": "published"}, {"x": 2, "y": 3.0, "k": "guessed"}]
    with pytest.raises(ValueError, match="column 'k' must be one of"):
        reference_curve(rows, x="x", y="y", kind="k", kinds=("published", "interpolated"), title="t")
    with pytest.raises(ValueError, match="kinds must be 2 or 3"):
        reference_curve(rows, x="x", y="y", kind="k", kinds=("published",), title="t")


# ----- DLRMv4 (round v6.1): rcps_dlrmv4.json and closed_dlrmv4.yaml --------------------------------


def test_dlrmv4_points_are_the_published_samples() -> None:
    assert cv.benchmark_of_round("v6.1") == "dlrmv4" and cv.benchmark_of_round("v6.0") == "dlrm_dcnv2"
    points = cv.rules_for_round("v6.1")
    assert [p.batch_size for p in points] == [8192, 16384, 32768]
    for p in points:
        lr, platform, samples = cv.DLRMV4_SAMPLES[p.batch_size]
        assert len(samples) == 20 and p.learning_rate == lr and p.platform == platform
        assert [round(e * cv.DLRMV4_TRAIN_SAMPLES) for e in p.epochs] == list(samples)  # verbatim
        interval, first = cv.dlrmv4_eval_grid(p.batch_size)
        assert all(n % interval == 0 and n >= first - 2 * interval for n in samples)  # on the grid
    # the olympic mean by hand: 8,192's 20 runs less the fastest and the slowest
    s = sorted(cv.DLRMV4_SAMPLES[8192][2])
    assert cv.samples_to_converge(8192, "v6.1") == pytest.approx(sum(s[1:-1]) / 18)


def test_dlrmv4_eval_grid_is_closed_dlrmv4_yaml() -> None:
    """The yaml: every 0.001 of an epoch's steps; the first evaluation at block 25, 31 and 41."""
    for b, block in ((8192, 25), (16384, 31), (32768, 41)):
        interval, first = cv.dlrmv4_eval_grid(b)
        assert interval == 2_293_760 and first == block * interval
    assert cv.dlrmv4_evaluations(8192, 57_344_000) == 1
    assert cv.dlrmv4_evaluations(8192, 57_344_000 + 2_293_760) == 2
    assert cv.dlrmv4_evaluations(8192, 57_344_000 + 1) == 2  # the next grid point


def test_dlrmv4_curve_prunes_16384_and_times_to_train() -> None:
    # 16,384's mean (87.5 M samples) lies above the line from 8,192 (69.1 M) to 32,768 (112.9 M)
    assert [b for b, _ in cv.convergence_curve("v6.1")] == [8192, 32768]
    samples = cv.samples_to_converge(16384, "v6.1")
    assert samples == pytest.approx(
        (cv.samples_to_converge(8192, "v6.1") * 2 + cv.samples_to_converge(32768, "v6.1")) / 3
    )
    assert cv.time_to_train(1e6, 16384, "v6.1") == pytest.approx(samples / 1e6 / 60)
    evals = cv.dlrmv4_evaluations(16384, samples)
    with_eval = cv.time_to_train(1e6, 16384, "v6.1", eval_samples_per_s=4e6)
    assert with_eval == pytest.approx((samples / 1e6 + evals * cv.DLRMV4_EVAL_SAMPLES / 4e6) / 60)
    with pytest.raises(ValueError, match="DLRMv4 convergence curve"):
        cv.epochs_to_converge(65536, "v6.1")
