"""The policy-aware hit-rate model (perf.access) against the trace simulator, the cost model's
cache inputs, and placement chosen by modeled step time (perf.servers.best_placement)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from recnotebooks.config import preset
from recnotebooks.perf.access import CACHE_POLICIES, cache_rows_for_hit_rate, hit_rate, hit_rate_many
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.servers import SERVERS, best_placement, placements_for
from recnotebooks.plan import Plan, TableShard, single_device_plan

# (Zipf exponent, table rows): one trace of independent draws per skew, shared by every size
# and policy, long enough that its second half is past warm-up (hits are counted there).
SKEWS = ((0.6, 100_000), (0.8, 200_000), (1.05, 200_000), (1.3, 100_000))
LENGTH = 2_000_000
SIZES = (0.001, 0.01, 0.1, 0.5)  # cache size as a share of the table's rows
TOLERANCE = 0.03


@functools.lru_cache(maxsize=4)
def _trace(s: float, n: int) -> np.ndarray:
    """Unscattered: rank k is row k, so the true hottest rows are 0..k-1 (the set-associative
    cache hashes rows to sets, so the layout does not matter to it)."""
    from recnotebooks.cache.simulate import zipf_trace

    return zipf_trace(n, LENGTH, alpha=s, seed=7, scatter=False)


def _simulated(policy: str, s: float, n: int, slots: int) -> float:
    """Simulated hit rate of the trace's second half, the first half having warmed the cache up
    (one :class:`~recnotebooks.cache.policies.CachePolicy`, the simulator's engine, continued)."""
    from recnotebooks.cache.policies import CachePolicy
    from recnotebooks.cache.simulate import simulate

    trace = _trace(s, n)
    if policy == "static":  # the true hottest rows, pinned from the start: no warm-up
        return simulate(trace[: LENGTH // 8], "static", slots, num_rows=n, hot_rows=np.arange(slots)).hit_rate
    cache = CachePolicy(policy, n, slots, ways=32)
    cache.replay(trace[: LENGTH // 2])
    after = cache.replay(trace[LENGTH // 2 :])
    return after.hits / after.requests


@pytest.mark.parametrize("policy", CACHE_POLICIES)
def test_modeled_hit_rate_is_within_003_of_the_simulator(policy: str) -> None:
    pytest.importorskip("recnotebooks.cache.simulate")
    worst = []
    for s, n in SKEWS:
        for frac in SIZES:
            slots = max(32, round(n * frac / 32) * 32)  # set-associative: 32 ways divide it
            sim = _simulated(policy, s, n, slots)
            model = hit_rate(slots, n, s, policy)
            worst.append((abs(model - sim), s, n, slots, model, sim))
    err, s, n, slots, model, sim = max(worst)
    assert err <= TOLERANCE, (
        f"{policy}: s={s} rows={n} slots={slots}: model {model:.4f} vs simulated {sim:.4f}"
    )


def _old_hottest(k: float, n: int, s: float) -> float:
    r = np.arange(1, n + 1, dtype=np.float64) ** -s
    return float(r[: int(k)].sum() / r.sum())


def test_default_policy_is_the_hottest_rows_bound_as_before() -> None:
    for n, s, k in ((50, 1.05, 10), (40, 0.6, 39)):
        assert hit_rate(k, n, s) == pytest.approx(_old_hottest(k, n, s), rel=1e-12)
        assert hit_rate(k, n, s, "lfu") == hit_rate(k, n, s, "static") == hit_rate(k, n, s)
    many = hit_rate_many([10.0, 100.0], [1000, 5000], 0.9)
    assert many.tolist() == pytest.approx([hit_rate(10.0, 1000, 0.9), hit_rate(100.0, 5000, 0.9)], rel=1e-12)


@pytest.mark.parametrize("s", [0.6, 1.05, 1.3])
def test_policies_order_and_grow_with_the_cache(s: float) -> None:
    n = 1_000_000
    sizes = [0, 32, 3200, 32_000, 320_000, n]
    for policy in CACHE_POLICIES:
        h = [hit_rate(k, n, s, policy) for k in sizes]
        assert h[0] == 0.0 and h[-1] == 1.0 and all(a < b for a, b in zip(h, h[1:], strict=False)), policy
    for k in sizes[1:-1]:
        static, lru, sa = (hit_rate(k, n, s, p) for p in ("static", "lru", "setassoc"))
        assert sa <= lru + 1e-9 < static  # no policy beats the hottest rows; conflicts cost hits
    many = hit_rate_many([3200.0, 32_000.0], [n, n], s, "setassoc")
    assert many.tolist() == [hit_rate(3200, n, s, "setassoc"), hit_rate(32_000, n, s, "setassoc")]


def test_few_sets_conflict_more_than_many() -> None:
    n, k, s = 100_000, 1024, 1.05
    one_set = hit_rate(k, n, s, "setassoc", ways=k)
    assert one_set == pytest.approx(hit_rate(k, n, s, "lru"))
    direct = hit_rate(k, n, s, "setassoc", ways=1)
    assert direct < hit_rate(k, n, s, "setassoc", ways=8) < one_set


def test_cache_rows_for_hit_rate_inverts_each_policy() -> None:
    n, s = 1_000_000, 1.05
    for policy in CACHE_POLICIES:
        k = cache_rows_for_hit_rate(0.8, n, s, policy)
        assert hit_rate(k, n, s, policy) == pytest.approx(0.8, abs=2e-3), policy
    assert cache_rows_for_hit_rate(0.8, n, s, "lru") > cache_rows_for_hit_rate(0.8, n, s)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"policy": "fifo"}, "policy"), ({"ways": 0}, "ways"), ({"ways": 2.0}, "ways"),
     ({"zipf_exponent": -1.0}, "zipf_exponent")],
)  # fmt: skip
def test_bad_policy_inputs_name_the_parameter(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        hit_rate(100, 1000, **kwargs)  # type: ignore[arg-type]
    with pytest.raises((ValueError, TypeError), match=match):
        hit_rate_many([100.0], [1000], **kwargs)  # type: ignore[arg-type]


# ----- the cost model computes the hit rate ---------------------------------------------------
def test_estimate_computes_the_hit_rate_from_cache_rows_and_policy() -> None:
    cfg = preset("rm2")
    a100 = hardware("dgx_a100")
    rows = 100_000
    for policy in CACHE_POLICIES:
        modeled = estimate(
            cfg, a100, batch_size=4096, placement="cache", cache_rows=rows, cache_policy=policy
        )
        t = cfg.tables[0]
        assert modeled.cache_hit_rates[t.name] == pytest.approx(
            hit_rate(min(rows, t.num_rows), t.num_rows, 1.05, policy)
        )
        typed = estimate(cfg, a100, batch_size=4096, placement="cache",
                         cache_hit_rate=modeled.cache_hit_rates[t.name])  # fmt: skip
        if len({tb.num_rows for tb in cfg.tables}) == 1:
            assert typed.step_time == pytest.approx(modeled.step_time)
    lru = estimate(cfg, a100, batch_size=4096, placement="cache", cache_rows=rows, cache_policy="lru")
    static = estimate(cfg, a100, batch_size=4096, placement="cache", cache_rows=rows)
    assert lru.step_time > static.step_time  # LRU hits less than the hottest rows: more PCIe reads
    cache_bytes = lru.memory.device[0]["cache"]
    assert cache_bytes == pytest.approx(
        sum(min(rows, t.num_rows) for t in cfg.tables) * (cfg.embedding_dim * 4 + 8)
    )


def test_a_plans_shards_carry_cache_rows_and_policy() -> None:
    cfg = preset("rm2")
    shards = tuple(TableShard(t, 0, placement="cache", cache_rows=50_000, cache_policy="setassoc")
                   for t in cfg.table_names)  # fmt: skip
    r = estimate(cfg, "dgx_a100", batch_size=4096, plan=Plan(1, shards))
    t = cfg.tables[0]
    assert r.cache_hit_rates[t.name] == pytest.approx(hit_rate(50_000, t.num_rows, 1.05, "setassoc"))
    assert Plan(1, shards).table()[0]["cache_policy"] == "setassoc"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"cache_rows": 10, "cache_hit_rate": 0.9}, "not both"), ({"cache_rows": -1}, "cache_rows"),
     ({"cache_rows": 10, "cache_policy": "fifo"}, "cache_policy"), ({"cache_rows": 2.5}, "cache_rows"),
     ({"cache_rows": 10, "cache_ways": 0}, "cache_ways"), ({"cache_rows": {"nope": 3}}, "nope")],
)  # fmt: skip
def test_bad_cache_inputs_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        estimate(preset("rm2"), "dgx_a100", batch_size=4096, placement="cache", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cache_rows applies"):
        estimate(preset("rm2"), "dgx_a100", batch_size=4096, placement="hbm", cache_rows=10)
    with pytest.raises(ValueError, match="cache_rows applies"):
        TableShard("t", 0, placement="host", cache_rows=10)
    with pytest.raises(ValueError, match="cache_hit_rate"):
        single_device_plan(preset("rm2"), "cache")
    with pytest.raises(ValueError, match="cache_hit_rate"):
        TableShard("t", 0, placement="cache")


# ----- placement chosen by cost ---------------------------------------------------------------
def test_best_placement_is_the_fastest_that_fits_and_says_why() -> None:
    cfg = preset("mlperf_v1").with_rows_scale(10)
    hw = hardware("dgx_a100")
    label, r = best_placement(cfg, hw, hw.devices, 8192)
    assert r.fits and r.plan is not None
    assert r.notes[-1].startswith(f"{label} chosen by modeled step time: {r.step_time * 1e3:.2f} ms/step vs ")
    assert r.plan.notes[-1] == r.notes[-1]
    for place in placements_for(hw):  # no uniform placement that fits is faster
        other = estimate(cfg, hw, batch_size=8192, gpus=hw.devices, placement=place,
                         cache_hit_rate=0.9 if place == "cache" else None)  # fmt: skip
        assert not other.fits or other.step_time >= r.step_time


@pytest.mark.parametrize("model", ["rm1", "rm2", "dlrm_benchmark"])
def test_growing_a_model_never_raises_its_throughput(model: str) -> None:
    for server in SERVERS:
        hw = hardware(server)
        last = np.inf
        for scale in (0.1, 1, 3, 10, 30, 100):
            place, r = best_placement(preset(model).with_rows_scale(scale), hw, hw.devices, 8192)
            assert r.throughput <= last * (1 + 1e-9), f"{model} on {server} at {scale}x rows ({place})"
            last = r.throughput
