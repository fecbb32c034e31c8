"""The Cache Explorer (notebook 03) driven from Python: simulated curves, modeled steps, measured overhead."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import altair as alt
import pytest
from _values import bad, control_values, num, whole

from recnotebooks.cache.hot import hot_sample_fraction
from recnotebooks.config import DLRMConfig
from recnotebooks.perf.compare import torchrec_uvm_example
from recnotebooks.perf.placement import placement_costs, placement_summary
from recnotebooks.published.runs import TORCHREC_UVM
from recnotebooks.viz.app import App, AppError
from recnotebooks.viz.cache import (
    CACHE_CONTROLS,
    CURVE_FRACTIONS,
    MODEL_BATCH,
    POOLING,
    cache_capacity,
    cache_explorer,
    cache_trace,
    explore_cache,
    hit_rate_curves,
    measure_cache_overhead,
)
from recnotebooks.viz.controls import option_values
from recnotebooks.viz.tidy import chart_rows

IDS = 60_000  # a short trace keeps every test quick; the notebook replays 1M


@pytest.fixture(scope="module")
def app() -> App:
    return cache_explorer(measure=False, num_ids=IDS)


def test_tables_carry_their_sources() -> None:
    r = explore_cache(measure=False, num_ids=IDS)
    assert {x["source"] for x in r.tables["curves"]} == {"simulated"}
    assert {x["source"] for x in r.tables["traffic"]} == {"simulated"}
    assert {x["source"] for x in r.tables["placements"]} == {"modeled"}
    assert {x["source"] for x in r.tables["metrics"]} == {"simulated", "modeled"}
    assert r.notes[0].startswith("SIMULATED") and any(n.startswith("MODELED") for n in r.notes)
    assert "measured" not in r.tables


def test_explorer_sweeps_each_control(app: App) -> None:
    defaults = {k: v["value"] for k, v in CACHE_CONTROLS.items()}
    for name in CACHE_CONTROLS:
        app.set(**defaults)
        for value in control_values(app.controls[name]):
            if value == app.values[name]:
                continue
            before, data = app.result.tables, app.chart_data()
            result = app.set(**{name: value})
            assert app.error is None, (name, value, app.error)
            assert app.chart_data() != data
            if name == "ways" and app.values["policy"] != "setassoc":
                assert result.tables["metrics"] == before["metrics"]  # ways only matter set-associatively
                continue
            assert result.tables != before, f"{name}={value} changed nothing"
            assert all(0.0 <= num(x, "hit_rate") <= 1.0 for x in result.tables["curves"])
    app.altair_chart.to_dict()  # the app skips schema validation; the test does not
    app.set(**defaults)


def test_the_current_point_is_the_simulators_number() -> None:
    from recnotebooks.cache.simulate import simulate

    r = explore_cache(measure=False, num_ids=IDS, policy="lfu", cache_fraction=0.02)
    current = [x for x in r.tables["curves"] if x.get("current")]
    assert len(current) == 1 and current[0]["policy"] == "LFU"
    now = current[0]
    ref = simulate(cache_trace(100_000, 1.05, IDS), "lfu", 2_000, num_rows=100_000)
    assert now["capacity"] == 2_000 and now["hit_rate"] == pytest.approx(ref.hit_rate)
    metric = next(x for x in r.tables["metrics"] if str(x["metric"]).startswith("hit rate"))
    assert metric["value"] == pytest.approx(ref.hit_rate)


def test_opt_bounds_every_policy_and_curves_rise() -> None:
    rows = hit_rate_curves(10_000, 0.9, 32, IDS)
    by: dict[str, dict[int, float]] = {}
    for r in rows:
        by.setdefault(str(r["policy"]), {})[whole(r, "capacity")] = num(r, "hit_rate")
    assert set(by) == {"LRU", "LFU", "static hot set", "set-assoc LRU", "OPT"}
    for policy, pts in by.items():
        for c, h in pts.items():
            if c in by["OPT"]:
                assert h <= by["OPT"][c] + 1e-12, (policy, c)
        if policy in ("LRU", "OPT", "static hot set"):  # stack algorithms and a growing hot set never lose
            hs = [pts[c] for c in sorted(pts)]
            assert all(a <= b + 1e-12 for a, b in zip(hs, hs[1:], strict=False)), policy
    assert len(by["LRU"]) == len(CURVE_FRACTIONS)


def test_capacity_rounds_to_whole_sets() -> None:
    assert cache_capacity(0.001, 10_000) == 10
    assert cache_capacity(0.001, 10_000, "setassoc", 32) == 32  # at least one set
    assert cache_capacity(0.05, 10_000, "setassoc", 32) == 512  # 500 -> 16 sets of 32
    assert cache_capacity(0.5, 10, "setassoc", 4) == 4
    assert cache_capacity(1.0, 100) == 100


def test_traffic_per_step_counts_misses_and_writebacks() -> None:
    from recnotebooks.cache.simulate import simulate

    r = explore_cache(measure=False, num_ids=IDS, cache_fraction=0.2)
    steps = simulate(
        cache_trace(100_000, 1.05, IDS), "lru", 20_000, num_rows=100_000, batch_size=MODEL_BATCH * POOLING
    )
    n = -(-IDS // (MODEL_BATCH * POOLING))
    h2d = next(x for x in r.tables["traffic"] if x["direction"] == "host→device")
    assert h2d["bytes_per_step"] == pytest.approx(steps.misses / n * (64 * 4 + 4) * 8)


def test_a_cache_too_small_for_a_step_says_so() -> None:
    r = explore_cache(measure=False, num_ids=IDS, num_rows=10_000, cache_fraction=0.001)
    assert "traffic" not in r.tables
    assert any("too small" in n and "capacity" in n for n in r.notes)


def test_placements_are_the_cost_model_at_the_simulated_hit_rate() -> None:
    from recnotebooks.perf import estimate
    from recnotebooks.viz.cache import cache_model

    r = explore_cache(measure=False, num_ids=IDS, num_rows=100_000, hardware_name="big_basin")
    hit = next(num(x, "value") for x in r.tables["metrics"] if str(x["metric"]).startswith("hit rate"))
    ref = estimate(
        cache_model(100_000), "big_basin", batch_size=MODEL_BATCH, placement="cache", cache_hit_rate=hit
    )
    steps = {x["key"]: num(x, "step_ms") for x in placement_summary(r.tables["placements"])}
    assert steps["cache"] == pytest.approx(ref.step_time * 1e3)
    assert steps["hbm"] < steps["cache"] < steps["host"]


def test_placement_costs_flag_what_does_not_fit() -> None:
    from recnotebooks.config import preset

    rows = placement_summary(placement_costs(preset("rm2").with_rows_scale(30), "dgx_a100", 0.9, 4096))
    fits = {r["key"]: r["fits"] for r in rows}
    assert fits == {"hbm": False, "cache": True, "host": True, "remote": True}
    assert all(num(r, "ns_per_lookup") > 0 for r in rows)


def test_bars_share_a_scale_per_unit(app: App) -> None:
    app.set(cache_fraction=0.1)
    app.set(cache_fraction=0.2)
    chart = app.altair_chart
    assert isinstance(chart, alt.VConcatChart)
    bars = next(c for c in chart.vconcat if isinstance(c, alt.FacetChart))
    spec = bars.to_dict()
    reach: dict[str, set[float]] = {}
    for r in chart_rows(spec):
        reach.setdefault(str(r["unit"]), set()).add(num(r, "_reach"))
    assert all(len(v) == 1 for v in reach.values()), reach
    assert "SIMULATED" in json.dumps(app.altair_chart.to_dict()) and "MODELED" in json.dumps(spec)


def test_hot_samples_are_rarer_than_hot_lookups() -> None:
    one = hot_sample_fraction(10_000, 1.05, 0.05, 1, num_samples=4_000)
    many = hot_sample_fraction(10_000, 1.05, 0.05, 26, num_samples=4_000)
    assert one["all_hot_samples"] == pytest.approx(one["lookup_hit_rate"])
    assert many["all_hot_samples"] < 0.1 * many["lookup_hit_rate"]
    # independent lookups: all-hot is about the hit rate to the power of the lookups
    assert many["all_hot_samples"] == pytest.approx(many["independent_estimate"], abs=0.01)


def test_torchrec_published_figures_and_the_model_beside_them() -> None:
    rows = torchrec_uvm_example()
    pub = {r["case"]: r["seconds_per_epoch"] for r in rows if r["source"] == "published"}
    assert list(pub.values()) == [TORCHREC_UVM["uvm_s"], TORCHREC_UVM["uvm_cache_s"]] == [0.62, 0.06]
    modeled = [r for r in rows if r["source"] == "modeled"]
    assert len(modeled) == 4 and all(num(r, "seconds_per_epoch") > 0 for r in modeled)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"alpha": 0.7}, ValueError, "alpha must be one of"),
        ({"policy": "fifo"}, ValueError, "policy must be one of"),
        ({"ways": 3}, ValueError, "ways must be one of"),
        ({"num_rows": 5}, ValueError, "num_rows must be one of"),
        ({"cache_fraction": 0.0}, ValueError, "cache_fraction must be one of"),
        ({"hardware_name": "cpu_cluster"}, ValueError, "hardware_name must be one of"),
        ({"num_ids": 10}, ValueError, "num_ids must be an int >= 1000"),
        ({"policy": True}, ValueError, "policy"),
    ],
)
def test_bad_settings_name_the_parameter(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        explore_cache(measure=False, **kwargs)


def test_app_refuses_unknown_and_wrong_values(app: App) -> None:
    with pytest.raises(KeyError, match="unknown setting"):
        cache_explorer(measure=False, num_ids=IDS, polcy="lru")
    with pytest.raises(ValueError, match="ways must be one of"):
        app.set(ways=3)
    with pytest.raises(KeyError, match="unknown control"):
        app.set(polcy="lru")
    assert isinstance(AppError("x"), RuntimeError)


def test_measured_overhead_sees_the_simulators_misses(quiet_machine: None) -> None:
    from recnotebooks.cache.simulate import simulate
    from recnotebooks.viz.cache import MEASURED_BATCH, MEASURED_POOLING

    m = measure_cache_overhead(10_000, 1.05, "lru", 0.2, steps=3, num_ids=IDS)
    assert m["cached_ms"] > 0 and m["uncached_ms"] > 0 and m["reused"] == 0.0
    per_step = MEASURED_BATCH * MEASURED_POOLING
    ids = cache_trace(10_000, 1.05, IDS)[: per_step * whole(m, "steps_total")]
    ref = simulate(ids, "lru", whole(m, "capacity"), num_rows=10_000, batch_size=per_step)
    assert m["misses"] == ref.misses  # training and the simulator admit a step's rows alike
    again = measure_cache_overhead(10_000, 1.05, "lru", 0.2, steps=3, num_ids=IDS)
    assert again["reused"] == 1.0 and again["cached_ms"] == m["cached_ms"]


def test_an_unreliable_overhead_is_marked_and_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two steps taken while other programs were busy: the app's note and the ratio's text say
    NOT RELIABLE, and the same setting is measured again rather than reused."""
    import recnotebooks.measure.cache_overhead as overhead

    why = "other programs kept 1.2 cores busy while it ran"
    monkeypatch.setattr(overhead, "reliability", lambda *a: why)
    first = measure_cache_overhead(30_000, 1.05, "lru", 0.2, steps=3, num_ids=IDS)
    assert first["reliability"] == why and first["reused"] == 0.0
    assert measure_cache_overhead(30_000, 1.05, "lru", 0.2, steps=3, num_ids=IDS)["reused"] == 0.0
    r = explore_cache(num_rows=30_000, cache_fraction=0.2, num_ids=IDS)
    assert {x["reliable"] for x in r.tables["measured"]} == {False}
    assert any(n.startswith(f"NOT RELIABLE ({why})") for n in r.notes)
    ratio = next(x for x in r.tables["metrics"] if x["metric"] == "cached ÷ uncached step here: measured")
    assert str(ratio["display"]).endswith("⚠ NOT RELIABLE")


def test_measured_app_update_is_quick_once_curves_are_kept(quiet_machine: None) -> None:
    app = cache_explorer(measure=True, num_ids=IDS, num_rows=10_000)
    r = app.set(cache_fraction=0.1)
    assert {x["source"] for x in r.tables["measured"]} == {"measured"}
    assert any("MEASURED here" in n for n in r.notes)
    app.set(cache_fraction=0.2)  # the first setting, measured when the app started: reused
    assert app.last_update_s < 1.5, app.last_update_s
    assert any("reused" in n for n in app.result.notes)


def test_controls_start_where_the_notebook_expects() -> None:
    assert option_values(CACHE_CONTROLS["policy"]) == ["lru", "lfu", "static", "setassoc", "opt"]
    assert CACHE_CONTROLS["cache_fraction"]["value"] == 0.2 and CACHE_CONTROLS["ways"]["value"] == 32


def test_notebook_03_exercises_pass_right_answers_and_hint_wrong_ones() -> None:
    from recnotebooks.cache.simulate import lru_mrc
    from recnotebooks.lab import EX03_BUDGET, EX03_ROW_BYTES, EX03_ROWS, check, reset
    from recnotebooks.perf.access import cache_rows_for_hit_rate, hit_rate

    rows = EX03_BUDGET // EX03_ROW_BYTES
    assert check("03.size", (rows, hit_rate(rows, EX03_ROWS, 1.05, policy="lru")))
    assert check("03.target", cache_rows_for_hit_rate(0.9, EX03_ROWS, 1.05, policy="lru"))
    assert check("03.policy", "lfu")  # weak skew: a row's count outlasts its last use
    assert check("03.double", lru_mrc(cache_trace(100_000, 1.05), num_rows=100_000).at(4_000))
    reset()
    wrong = check("03.size", (rows, 0.1))
    assert not wrong and "Hint 1/3" in wrong.message and "0.868" not in wrong.message  # never the answer
    first, second = check("03.policy", "lru"), check("03.policy", "lru")
    assert "Hint 1/3" in first.message and "Hint 2/3" in second.message  # hints escalate
    assert not check("03.target", None) and "could not check" in check("03.double", "x").message
    reset()


# ----- the moved pieces, in their own homes ---------------------------------------------------------
def test_static_hit_curve_is_the_simulators_static_policy() -> None:
    from recnotebooks.cache.hot import static_hit_curve
    from recnotebooks.cache.simulate import simulate
    from recnotebooks.viz.cache import cache_profile

    trace, profile = cache_trace(10_000, 1.05, IDS), cache_profile(10_000, 1.05, IDS)
    sizes = [10, 200, 2_000]
    one_pass = static_hit_curve(trace, profile, 10_000, sizes)
    replays = [simulate(trace, "static", k, num_rows=10_000, profile=profile).hit_rate for k in sizes]
    assert one_pass == pytest.approx(replays)


def test_placement_labels_match_the_charts_percent() -> None:
    from recnotebooks.perf.placement import _percent
    from recnotebooks.viz.controls import percent

    for f in (0.0, 0.0036, 0.041, 0.05, 0.0995, 0.2, 0.9, 0.99, 1.0):
        assert _percent(f) == percent(f)


def test_overhead_measures_rows_given_directly() -> None:
    from recnotebooks.measure.cache_overhead import measure_overhead

    trace = cache_trace(10_000, 1.05, IDS)
    m = measure_overhead(trace, 10_000, 2_048, "setassoc", ways=32, steps=2, warmup=1, batch_size=256)
    assert m.cached_ms > 0 and m.uncached_ms > 0 and 0.0 < m.hit_rate < 1.0
    assert m.capacity == 2_048 and m.steps_total >= 3 and m.ratio == m.cached_ms / m.uncached_ms
    assert 0 < m.misses <= m.steps_total * 256 * 5  # never more misses than lookups
    d = m.to_dict()  # plain data, as the explorer keeps it (it adds "reused")
    assert d["capacity"] == 2_048.0 and d["cached_ms"] == m.cached_ms and "reused" not in d
    keys = "uncached_ms cached_ms reliability misses hit_rate rows capacity steps_total threads"
    assert set(d) == set(keys.split()) and all(isinstance(d[k], float) for k in keys.split()[3:])


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: placement_costs(bad(object()), "dgx_a100", 0.9), TypeError, "config must be a DLRMConfig"),
        (lambda: placement_costs(_tiny(), "dgx_a100", 1.5), ValueError, "hit_rate must be"),
        (lambda: placement_costs(_tiny(), "dgx_a100", 0.9, batch_size=0), ValueError, "batch_size must be"),
        (lambda: _break_even(_tiny(), "dgx_a100", "cache"), ValueError, "against must be one of"),
        (lambda: torchrec_uvm_example((0.9, 2.0)), ValueError, r"hit_rates\[1\] must be"),
        (lambda: hot_sample_fraction(1_000, 1.05, 0.0, 5), ValueError, "hot_fraction must be"),
        (lambda: hot_sample_fraction(1_000, 1.05, 0.1, 5, num_samples=1), ValueError, "num_samples must be"),
        (lambda: hot_sample_fraction(1_000, 1.05, 0.1, 5, profile_share=1.0), ValueError, "profile_share"),
        (lambda: _overhead(capacity=0), ValueError, "capacity must be"),
        (lambda: _overhead(policy="fifo"), ValueError, "policy must be one of"),
        (lambda: _overhead(policy="static"), ValueError, "needs profile="),
        (lambda: _overhead(trace=[0.5]), TypeError, "trace must be an integer array"),
        (lambda: _overhead(steps=10_000), ValueError, "trace must hold at least"),
    ],
)
def test_moved_entry_points_check_their_arguments(
    call: Callable[[], object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        call()


def _tiny() -> DLRMConfig:
    from recnotebooks.config import preset

    return preset("tiny")


def _break_even(config: DLRMConfig, hw: str, against: str) -> float | None:
    from recnotebooks.perf.placement import break_even_hit_rate

    return break_even_hit_rate(config, hw, against)


def _overhead(trace: object = None, **kw: Any) -> object:
    from recnotebooks.measure.cache_overhead import measure_overhead

    ids = cache_trace(1_000, 1.05, 10_000) if trace is None else bad(trace)
    args: dict[str, Any] = {"capacity": 100, "policy": "lru", **kw}
    return measure_overhead(ids, 1_000, **args)


def test_the_note_gives_opt_with_as_many_slots_as_the_cache() -> None:
    """The note's OPT is Belady's rule with exactly the cache's slots (a set-associative cache rounds
    its size to whole sets, off the curves' sizes), not the curve's point at a smaller size."""
    import re

    from recnotebooks.cache.simulate import simulate
    from recnotebooks.viz.cache import cache_capacity, opt_hit_rate
    from recnotebooks.viz.controls import percent

    rows, fraction = 10_000, 0.002  # 20 rows asked for; 32-way sets round it up to 32 slots
    cap = cache_capacity(fraction, rows, "setassoc", 32)
    assert cap == 32
    r = explore_cache(measure=False, num_ids=IDS, policy="setassoc", cache_fraction=fraction, num_rows=rows)
    assert all(x["capacity"] != cap for x in r.tables["curves"] if x["policy"] == "OPT")  # off the curve
    ref = simulate(cache_trace(rows, 1.05, IDS), "opt", cap, num_rows=rows).hit_rate  # independent replay
    assert opt_hit_rate(rows, 1.05, cap, IDS) == pytest.approx(ref)
    said = re.search(r"OPT with as many slots: ([\d.]+%)", r.notes[0])
    assert said and said.group(1) == percent(ref)
    hit = next(num(x, "value") for x in r.tables["metrics"] if str(x["metric"]).startswith("hit rate"))
    assert hit <= ref + 1e-12  # no policy beats OPT with the same slots
    curves = r.tables["curves"]
    smaller = max(num(x, "hit_rate") for x in curves if x["policy"] == "OPT" and num(x, "capacity") < cap)
    assert ref > smaller  # the old note's number (the curve below the size) was too low


@pytest.mark.parametrize("setting", [{"cache_fraction": 0.001}, {"policy": "opt"}])
def test_a_cache_that_cannot_run_is_not_priced(setting: dict[str, Any]) -> None:
    """Issue 37: the explorer priced a cache it said could not run (too few slots for a training
    step's rows; OPT, which reads the future). Such a cache has no step, no bytes and no cache bar;
    the note says why, and the HBM and host DRAM steps stay."""
    from recnotebooks.viz.cache import explore_cache

    r = explore_cache(measure=False, num_ids=20_000, **setting)
    assert "traffic" not in r.tables
    assert [m["metric"] for m in r.tables["metrics"]] == ["hit rate: simulated"]
    assert {p["key"] for p in r.tables["placements"]} == {"hbm", "host", "remote"}
    modeled = next(n for n in r.notes if n.startswith("MODELED"))
    assert "no step behind this cache: it cannot run as a training cache" in modeled
    assert "ms in host DRAM" in modeled and "ms per step in HBM" in modeled
    runs = explore_cache(measure=False, num_ids=20_000)  # the default 20% LRU cache runs, and is priced
    assert "traffic" in runs.tables and any(
        str(m["metric"]).startswith("step, tables behind") for m in runs.tables["metrics"]
    )
