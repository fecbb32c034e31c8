"""measure_step: a measured per-phase step time of a row-capped copy."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.config import preset
from recnotebooks.measure import (
    DoesNotFitError,
    StepMeasurement,
    default_max_rows,
    measure_step,
    measurement_bytes,
)
from recnotebooks.timing import PHASES


def test_measures_every_phase_of_a_capped_copy() -> None:
    cfg = preset("criteo_kaggle")
    m = measure_step(cfg, 256, max_rows=2000, time_budget_s=0.0, min_steps=3, max_steps=3)
    assert m.steps == 3 and m.max_rows == 2000 and m.source == "measured" and m.device == "cpu"
    assert list(m.phases) == list(PHASES)
    assert m.seconds_per_step == pytest.approx(sum(m.phases.values()))
    assert m.phases["embedding_forward"] > 0 and m.phases["top_mlp"] > 0
    rows = m.table(setting="x")
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert m.samples_per_s == pytest.approx(256 / m.seconds_per_step)


def test_time_budget_bounds_the_steps() -> None:
    m = measure_step(preset("tiny"), 64, time_budget_s=10.0, max_steps=4)
    assert m.steps == 4


def test_default_cap_keeps_tables_small() -> None:
    cfg = preset("criteo_terabyte")
    cap = default_max_rows(cfg)
    assert (
        cap * cfg.num_tables * cfg.embedding_dim * 4
        <= 64 * 1024**2 + cfg.num_tables * cfg.embedding_dim * 4 * 1024
    )
    assert default_max_rows(preset("tiny")) == max(t.num_rows for t in preset("tiny").tables)


def test_refuses_what_would_not_fit() -> None:
    cfg = preset("rm2")
    need = measurement_bytes(cfg, 4096, 1000)
    assert need > 4096 * cfg.lookups_per_sample * cfg.embedding_dim * 4  # at least the rows it gathers
    with pytest.raises(DoesNotFitError, match=r"batch_size=4096 .* GB"):
        measure_step(cfg, 4096, max_rows=1000, memory_budget=need - 1)


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"batch_size": 0}, "batch_size must be"), ({"max_rows": 0}, "max_rows must be"),
     ({"time_budget_s": -1.0}, "time_budget_s"), ({"min_steps": 3, "max_steps": 2}, "max_steps must be")],
)  # fmt: skip
def test_bad_input(kw: dict, match: str) -> None:
    args = {"batch_size": 64, **kw}
    with pytest.raises(ValueError, match=match):
        measure_step(preset("tiny"), **args)


# ----- a learner can trust the number: median, outliers measured again, deadline, reuse --------
def _scripted(monkeypatch: pytest.MonkeyPatch, totals: list[float]) -> list[float]:
    """Make every timed step report the next of ``totals`` (all in the top MLP phase)."""
    import recnotebooks.measure.step as measure

    script = iter(totals)
    served: list[float] = []

    def fake(trainer: object, device: object) -> dict[str, float]:
        t = next(script)
        served.append(t)
        return {**dict.fromkeys(PHASES, 0.0), "top_mlp": t}

    monkeypatch.setattr(measure, "_timed_step", fake)
    return served


def test_median_not_mean_and_an_outlier_is_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    served = _scripted(monkeypatch, [0.010, 0.600, 0.011, 0.012, 0.013, 0.0105])
    m = measure_step(preset("tiny"), 64, time_budget_s=0.0, min_steps=5, max_steps=5)
    assert served[:5] == [0.010, 0.600, 0.011, 0.012, 0.013]
    assert m.remeasured == 1 and served[5] == 0.0105  # the 0.6 s step was timed again ...
    assert m.step_seconds == (0.010, 0.0105, 0.011, 0.012, 0.013)  # ... and replaced
    assert m.seconds_per_step == pytest.approx(0.011) and m.phases["top_mlp"] == pytest.approx(0.011)
    assert "1 outlier step" in m.describe() and "median of 5 steps" in m.describe()


def test_median_of_an_even_count_averages_the_middle_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    _scripted(monkeypatch, [0.04, 0.01, 0.03, 0.02])
    m = measure_step(preset("tiny"), 64, time_budget_s=0.0, min_steps=4, max_steps=4)
    assert m.remeasured == 0 and m.seconds_per_step == pytest.approx(0.025)


@pytest.mark.parametrize(
    ("totals", "expected"),
    [([1.0], []), ([1.0, 1.0, 5.0], [2]), ([1.0, 2.5], [1]), ([1.0, 1.9, 1.5], []),
     ([3.0, 1.0, 1.0, 1.2], [0])],
)  # fmt: skip
def test_outlier_steps_against_a_naive_rule(totals: list[float], expected: list[int]) -> None:
    from recnotebooks.measure import outlier_steps

    assert outlier_steps(totals) == expected


@given(st.lists(st.floats(1e-4, 10.0), min_size=1, max_size=9))
def test_median_step_is_the_median_total(totals: list[float]) -> None:
    from recnotebooks.measure import median_step

    steps = [{"a": t / 4, "b": 3 * t / 4} for t in totals]
    med = median_step(steps)
    assert sum(med.values()) == pytest.approx(statistics.median(totals))


def test_deadline_bounds_the_call_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fake clock where the warm-up and every timed step take 0.1 s: with a 0.35 s deadline
    two steps fit (warm-up to 0.1, steps to 0.2 and 0.3); a third, the least that tells an
    outlier, may end past it (0.4) but not past twice the deadline; a fourth does not start."""
    import types

    import recnotebooks.measure.step as measure

    clock = [0.0]
    monkeypatch.setattr(measure, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(measure, "_warm_up", lambda *a: clock.__setitem__(0, clock[0] + 0.1))

    def step(trainer: object, device: object) -> dict[str, float]:
        clock[0] += 0.1
        return {**dict.fromkeys(PHASES, 0.0), "top_mlp": 0.1}

    monkeypatch.setattr(measure, "_timed_step", step)
    m = measure_step(preset("tiny"), 64, time_budget_s=30.0, min_steps=5, max_steps=50, deadline_s=0.35)
    assert m.steps == 3 and m.cut_short and "ran out" in m.describe() and clock[0] == pytest.approx(0.4)
    clock[0] = 0.0
    m = measure_step(preset("tiny"), 64, time_budget_s=30.0, min_steps=5, max_steps=50, deadline_s=0.16)
    assert m.steps == 2 and not m.reliable and clock[0] == pytest.approx(0.3)  # 2 x 0.16: no third step
    clock[0] = 0.0
    m = measure_step(preset("tiny"), 64, time_budget_s=30.0, min_steps=5, max_steps=5)  # no deadline
    assert m.steps == 5 and not m.cut_short and "ran out" not in m.describe()


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Make measure_step return a reliable fake measurement and record each call's arguments."""
    import recnotebooks.measure.step as measure

    measure.clear_measurements()
    calls: list[dict] = []

    def fake(config: object, batch_size: int, **kwargs: object) -> StepMeasurement:
        calls.append({"batch_size": batch_size, **kwargs})
        return StepMeasurement("tiny", batch_size, "cpu", 10, 3, {"top_mlp": 0.01 * len(calls)},
                               0.01 * len(calls), step_seconds=(0.01,) * 3, other_load=0.0)  # fmt: skip

    monkeypatch.setattr(measure, "measure_step", fake)
    return calls


def test_a_setting_measured_before_is_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    import recnotebooks.measure.step as measure

    calls = _recording(monkeypatch)
    cfg = preset("tiny")
    first = measure.measure_step_cached(cfg, 64, time_budget_s=0.0, max_steps=3)
    again = measure.measure_step_cached(cfg, 64, time_budget_s=0.0, max_steps=3)
    assert len(calls) == 1 and again.reused and not first.reused and "reused" in again.describe()
    assert again.seconds_per_step == first.seconds_per_step and again.phases == first.phases
    # rows beyond the cap do not change what is measured: the same capped copy is reused
    bigger = cfg.with_max_rows(10**6) if max(t.num_rows for t in cfg.tables) < 10**6 else cfg
    measure.measure_step_cached(bigger, 64, time_budget_s=0.0, max_rows=100)
    measure.measure_step_cached(cfg, 64, time_budget_s=0.0, max_rows=100)
    assert len(calls) == 2
    measure.measure_step_cached(cfg, 128, time_budget_s=0.0)  # another batch: measured
    assert len(calls) == 3
    measure.clear_measurements()


def test_a_real_measurement_is_reused_when_reliable() -> None:
    """Without fakes: the second call returns the first measurement if it was reliable, and
    measures again (saying why) if it was not."""
    import recnotebooks.measure.step as measure

    measure.clear_measurements()
    first = measure.measure_step_cached(preset("tiny"), 64, time_budget_s=0.0, min_steps=3, max_steps=3)
    again = measure.measure_step_cached(preset("tiny"), 64, time_budget_s=0.0, min_steps=3, max_steps=3)
    assert again.reused == first.reliable
    assert first.reliable or "NOT RELIABLE" in first.describe()
    measure.clear_measurements()


def test_a_fresh_measurement_far_from_the_last_is_measured_a_third_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dataclasses

    import recnotebooks.measure.step as measure

    measure.clear_measurements()
    seconds = iter([0.010, 0.030, 0.012, 0.011])
    fake = StepMeasurement("tiny", 64, "cpu", 10, 3, {"top_mlp": 0.0}, 0.0)

    def scripted(*a: object, **k: object) -> StepMeasurement:
        s = next(seconds)
        return dataclasses.replace(fake, phases={"top_mlp": s}, seconds_per_step=s)

    monkeypatch.setattr(measure, "measure_step", scripted)
    cfg = preset("tiny")
    assert measure.measure_step_cached(cfg, 64).seconds_per_step == 0.010
    assert (
        measure.measure_step_cached(cfg, 64, fresh=True).seconds_per_step == 0.012
    )  # median of .010 .030 .012
    assert measure.measure_step_cached(cfg, 64, fresh=True).seconds_per_step == 0.011  # close: kept as is
    assert measure.measure_step_cached(cfg, 64).reused
    measure.clear_measurements()


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import recnotebooks.measure.step as measure

    measure.clear_measurements()
    fake = StepMeasurement("tiny", 64, "cpu", 10, 3, {"top_mlp": 0.01}, 0.01)
    monkeypatch.setattr(measure, "measure_step", lambda *a, **k: fake)
    for b in range(1, measure.CACHE_SIZE + 10):
        measure.measure_step_cached(preset("tiny"), b)
    assert len(measure._MEASURED) == measure.CACHE_SIZE
    measure.clear_measurements()


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [({"deadline_s": 0.0}, ValueError, "deadline_s must be"),
     ({"batch_size": 2.5}, TypeError, "batch_size must be"),
     ({"max_steps": True}, TypeError, "max_steps must be"),
     ({"time_budget_s": float("nan")}, ValueError, "time_budget_s")],
)  # fmt: skip
def test_bad_input_names_the_parameter(kw: dict, error: type, match: str) -> None:
    args = {"batch_size": 64, **kw}
    with pytest.raises(error, match=match):
        measure_step(preset("tiny"), **args)


def test_threads_are_set_for_the_measurement_and_restored() -> None:
    import torch

    before = torch.get_num_threads()
    m = measure_step(preset("tiny"), 64, time_budget_s=0.0, max_steps=2, threads=1)
    assert m.threads == 1 and torch.get_num_threads() == before and m.other_load is None
    assert "1 thread(s)" in m.describe()
    with pytest.raises(ValueError, match="threads must be"):
        measure_step(preset("tiny"), 64, threads=0)


def test_a_measurement_on_another_thread_count_is_reused_by_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reuse cache keys on the setting, not on the threads the load allowed at the time."""
    import recnotebooks.measure.step as measure

    calls = _recording(monkeypatch)
    measure.measure_step_cached(preset("tiny"), 64, threads=1)
    again = measure.measure_step_cached(preset("tiny"), 64, threads=2)
    assert len(calls) == 1 and again.reused
    measure.clear_measurements()


def test_an_unreliable_measurement_is_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import recnotebooks.measure.step as measure

    measure.clear_measurements()
    shaky = StepMeasurement("tiny", 64, "cpu", 10, 1, {"top_mlp": 0.01}, 0.01, step_seconds=(0.01,))
    steady = StepMeasurement("tiny", 64, "cpu", 10, 3, {"top_mlp": 0.02}, 0.02, step_seconds=(0.02,) * 3,
                             other_load=0.0)  # fmt: skip
    assert not shaky.reliable and "only 1 timed step" in shaky.reliability() and steady.reliable
    served = iter([shaky, steady])
    monkeypatch.setattr(measure, "measure_step", lambda *a, **k: next(served))
    first = measure.measure_step_cached(preset("tiny"), 64)
    second = measure.measure_step_cached(preset("tiny"), 64)  # the shaky one is not reused
    third = measure.measure_step_cached(preset("tiny"), 64)  # the steady one is
    assert first is shaky and second is steady and third.reused and third.seconds_per_step == 0.02
    measure.clear_measurements()


def test_the_apps_reuse_a_setting_when_only_modeled_inputs_change() -> None:
    from recnotebooks.viz.efficiency import explore_efficiency

    kw = {"num_tables": 4, "rows_per_table": 10**4, "batch_size": 256, "time_budget_s": 0.0}
    first = explore_efficiency(hardware_name="dgx_a100", **kw)
    again = explore_efficiency(hardware_name="big_basin", **kw)  # only the modeled preset changed
    assert first.tables["modeled"] != again.tables["modeled"]
    if not first.tables["measured"][0]["reliable"]:  # a machine too busy to measure it: it says so,
        assert "NOT RELIABLE" in first.notes[-1]  # and the setting is measured again
        assert "reused" not in again.notes[-1]
        return
    assert first.tables["measured"] == again.tables["measured"]
    assert "reused" in again.notes[-1] and "median of" in again.notes[-1]


@pytest.mark.parametrize("during, flagged", [(1.1, False), (1.4, True)])
def test_01_and_02_flag_a_busy_measurement_alike_and_say_the_load_they_judge(
    monkeypatch: pytest.MonkeyPatch, during: float, flagged: bool
) -> None:
    """Issue 37: 02's explorer said "2.0 of 2 cores busy" (the load when its threads were chosen) and
    did not flag the bar, while 01 flagged a load of 1.3 *while it ran*. Both apps measure through
    ``measure_here`` and flag by :func:`recnotebooks.timing.reliability` on the load while it ran; the
    note now says that load beside the one the threads were chosen by, so the two read alike."""
    import recnotebooks.viz.architecture as arch
    import recnotebooks.viz.efficiency as eff

    busy = "other programs kept 2.0 of 2 cores busy: measured on 1 thread(s) so that no step waits for a core"
    m = StepMeasurement("x", 512, "cpu", 1024, 8, {"top_mlp": 0.01}, 0.01, step_seconds=(0.01,) * 8,
                        threads=1, busy=busy, other_load=during, spare_cores=1.0)  # fmt: skip
    assert m.reliable is (not flagged)
    monkeypatch.setattr(eff, "measure_here", lambda *a, **k: (m, 1024))
    monkeypatch.setattr(arch, "measure_here", lambda *a, **k: (m, 1024))
    for result, rows in (
        (eff.explore_efficiency(), "measured"),
        (arch.explore_architecture(), "phases"),
    ):
        note = result.notes[-1]
        assert {r["reliable"] for r in result.tables[rows]} == {not flagged}  # the bar, flagged or not
        if flagged:
            assert f"NOT RELIABLE: other programs kept {during:.1f} cores busy while it ran" in note
        else:
            assert f"while it ran they kept {during:.2f} cores busy, not more than the 1" in note
            assert "reliable" in note and "NOT RELIABLE" not in note
