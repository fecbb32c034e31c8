"""Every finding notebooks 01, 02, 03 and 05 state in words, asserted on the numbers they compute.

Each test calls the library exactly as its notebook cell does and checks the sentence's
claim (direction, and the rounded figures the text quotes). When a test fails, the model
and the sentence disagree: find out which is wrong before changing either.
"""

from __future__ import annotations

from typing import Any

import pytest
from _values import num, whole

from recnotebooks.config import preset
from recnotebooks.lab import production_model
from recnotebooks.perf import hardware
from recnotebooks.perf.servers import SERVERS, compare_hardware, compare_models
from recnotebooks.perf.sweeps import table_count_sweep
from recnotebooks.viz.advantage import gpu_advantage
from recnotebooks.viz.servers import explore_servers


# ----- notebook 01 §2: where the parameters and the FLOPs are ---------------------------------------
def test_01_parameters_sit_in_the_tables_and_flops_in_the_mlps() -> None:
    cfg = preset("tiny")
    # "almost all [parameters] in the tables (over 99% here)"
    assert cfg.sparse_parameters / (cfg.sparse_parameters + cfg.dense_parameters) > 0.99
    flops = {k: v["forward"] + v["backward"] for k, v in cfg.flops_per_sample().items()}
    total = sum(flops.values())
    # "most of the FLOPs are in the MLPs (about 84% here; the dot interaction does nearly all the rest,
    # and the embedding lookups almost none)"
    assert round((flops["bottom_mlp"] + flops["top_mlp"]) / total, 2) == 0.84
    assert flops["interaction"] / (total - flops["bottom_mlp"] - flops["top_mlp"]) > 0.95
    assert flops["embedding"] / total < 0.01


# ----- notebook 02 §2: more sparse features ----------------------------------------------------
Sweep = dict[float, list[dict[str, object]]]


@pytest.fixture(scope="module")
def tables_sweep() -> Sweep:
    rows = table_count_sweep(embedding_dim=32)  # as notebook 02 §2 calls it
    return {p: [r for r in rows if r["pooling"] == p] for p in (1, 80)}


def test_02_more_tables_at_one_lookup_raise_efficiency_but_cost_throughput(tables_sweep: Sweep) -> None:
    first, last = tables_sweep[1][0], tables_sweep[1][-1]  # 1 and 32 tables
    assert first["num_tables"] == 1 and last["num_tables"] == 32
    # "efficiency rises (about 4.9% -> 8.4%) while throughput falls (about 1.06 M -> 0.86 M)"
    assert num(last, "flops_efficiency") > num(first, "flops_efficiency")
    assert first["flops_efficiency"] == pytest.approx(0.049, abs=0.005)
    assert last["flops_efficiency"] == pytest.approx(0.084, abs=0.005)
    assert (round(num(first, "throughput") / 1e6, 2), round(num(last, "throughput") / 1e6, 2)) == (1.06, 0.86)
    # "the step is bound by per-step overhead"
    assert {r["bound_by"] for r in tables_sweep[1]} == {"overhead"}


def test_02_at_one_lookup_flops_grow_faster_than_the_step_over_a_fixed_overhead(tables_sweep: Sweep) -> None:
    from recnotebooks.config import architecture_config
    from recnotebooks.perf import estimate

    first, last = tables_sweep[1][0], tables_sweep[1][-1]
    flops = num(last, "flops_per_sample") / num(first, "flops_per_sample")
    step = num(last, "step_ms") / num(first, "step_ms")
    # "about 2.1x the FLOPs per sample (0.90 -> 1.92 MFLOP) in about 1.2x the step time (3.9 -> 4.8 ms)"
    assert round(num(first, "flops_per_sample") / 1e6, 2) == 0.90
    assert round(num(last, "flops_per_sample") / 1e6, 2) == 1.92
    assert round(flops, 1) == 2.1 and round(step, 1) == 1.2
    assert (round(num(first, "step_ms"), 1), round(num(last, "step_ms"), 1)) == (3.9, 4.8)
    # efficiency is FLOP/s over peak: its ratio is the FLOPs' ratio over the step's
    eff = num(last, "flops_efficiency") / num(first, "flops_efficiency")
    assert eff == pytest.approx(flops / step, rel=1e-6)
    # "the dot interaction's FLOPs and the top MLP's input both grow": both components' FLOPs rise
    one, many = (
        architecture_config(num_tables=t, pooling=1, embedding_dim=32).flops_per_sample() for t in (1, 32)
    )
    for part in ("interaction", "top_mlp"):
        assert sum(many[part].values()) > 2 * sum(one[part].values()), part
    # "per-step overhead, which does not grow with the tables"
    overheads = {
        t: estimate(
            architecture_config(num_tables=t, pooling=1, embedding_dim=32), "dgx_a100", batch_size=4096
        ).breakdown()["overhead"]
        for t in (1, 32)
    }
    assert overheads[1] == pytest.approx(overheads[32])


def test_02_more_tables_at_production_pooling_lower_efficiency_and_throughput(tables_sweep: Sweep) -> None:
    effs = [num(r, "flops_efficiency") for r in tables_sweep[80]]
    tput = [num(r, "throughput") for r in tables_sweep[80]]
    # "efficiency falls (about 4.6% -> 3.1%) along with throughput (about 0.99 M -> 0.29 M)"
    assert effs[-1] < 0.75 * effs[0]
    assert all(a > b for a, b in zip(tput, tput[1:], strict=False))
    assert tput[-1] < 0.35 * tput[0]
    # "about 4.6% -> 3.1%", "about 0.99 M -> 0.29 M", "the step grows about 3.4x (4.1 -> 14.0 ms) for 2.3x the
    # FLOPs, and at 32 tables the embedding backward bounds the step"
    first, last = tables_sweep[80][0], tables_sweep[80][-1]
    assert (round(effs[0] * 100, 1), round(effs[-1] * 100, 1)) == (4.6, 3.1)
    assert (round(tput[0] / 1e6, 2), round(tput[-1] / 1e6, 2)) == (0.99, 0.29)
    assert (round(num(first, "step_ms"), 1), round(num(last, "step_ms"), 1)) == (4.1, 14.0)
    step = num(last, "step_ms") / num(first, "step_ms")
    flops = num(last, "flops_per_sample") / num(first, "flops_per_sample")
    assert round(step, 1) == 3.4 and round(flops, 1) == 2.3
    assert last["bound_by"] == "embedding_backward"


# ----- notebook 02 §4 and its app: finding (a) -------------------------------------------------
def ratios(**kw: Any) -> dict[str, float]:
    return {str(r["name"]): num(r, "ratio") for r in gpu_advantage(**kw).tables["advantage"]}


def test_02_a_v100_has_3_5x_the_bandwidth_and_3_8x_the_flops_of_a_cpu_node() -> None:
    v100, cpu = hardware("big_basin"), hardware("cpu_cluster")
    assert round(v100.hbm_bw / cpu.hbm_bw, 1) == 3.5
    assert round(v100.flops("fp32") / cpu.flops("fp32"), 1) == 3.8


def test_02_while_tables_fit_every_rm_gains_a_similar_two_to_three_times() -> None:
    r = ratios(hardware_name="big_basin", rows_scale=1)
    assert [round(r[m], 1) for m in ("rm1", "rm2", "rm3", "explorer")] == [2.2, 3.0, 3.2, 1.4]
    rms = [r["rm1"], r["rm2"], r["rm3"]]
    assert all(1.8 <= x <= 3.6 for x in rms), r
    assert max(rms) / min(rms) < 1.6
    assert r["rm3"] == max(rms)  # still the largest, as DeepRecSys found, but not by much
    assert r["explorer"] < min(rms)  # the small default model: 1.4x
    row = next(
        x for x in gpu_advantage(hardware_name="big_basin").tables["advantage"] if x["name"] == "explorer"
    )
    assert row["gpu_bound_by"] == "overhead"


def test_02_when_tables_outgrow_the_gpu_embedding_heavy_models_lose_the_advantage() -> None:
    r = ratios(hardware_name="big_basin", rows_scale=10)  # rm1 0.92, rm2 0.85, rm3 2.8
    assert r["rm1"] < 1 and r["rm2"] < 1
    assert (f"{r['rm1']:.1f}", f"{r['rm2']:.1f}") == ("0.9", "0.8")  # as the notebook prints them
    assert round(r["rm3"], 1) == 2.8
    assert r["rm3"] > 2.5 * max(r["rm1"], r["rm2"])
    places = {
        x["name"]: x["gpu_placement"]
        for x in gpu_advantage(hardware_name="big_basin", rows_scale=10).tables["advantage"]
    }
    assert places["rm1"] == places["rm2"] == "remote"


def test_02_finding_a_is_stated_beside_the_explorer_with_what_the_model_shows() -> None:
    """The app's last note (and 02 §4's text beside it) states the seed paper's finding (a) in words,
    with what the model shows for the setting: similar gains per GPU while every table is in HBM,
    the gap once the embedding-heavy models' tables are not; no published ratio is quoted."""
    import json
    import re
    from pathlib import Path

    from recnotebooks.viz.advantage import finding_a

    fit = gpu_advantage(hardware_name="big_basin", rows_scale=1)
    note, r = fit.notes[-1], ratios(hardware_name="big_basin", rows_scale=1)
    assert note == finding_a(fit.tables["advantage"])
    assert "large for MLP-heavy models and small for embedding-heavy ones" in note
    assert "no published ratio is shown" in note
    assert {x["gpu_placement"] for x in fit.tables["advantage"] if x["name"] != "explorer"} == {"hbm"}
    assert "every table in HBM: similar gains per GPU" in note
    assert all(f"{m} {r[m]:.1f}x" in note for m in ("rm1", "rm2", "rm3"))
    rms = [r["rm1"], r["rm2"], r["rm3"]]
    assert f"the largest {max(rms) / min(rms):.1f}x the smallest" in note and max(rms) / min(rms) < 1.6
    out = gpu_advantage(hardware_name="big_basin", rows_scale=10)
    note, r = out.notes[-1], ratios(hardware_name="big_basin", rows_scale=10)
    gap = r["rm3"] / max(r["rm1"], r["rm2"])
    assert "tables out of HBM (rm1 in remote, rm2 in remote)" in note
    assert f"rm3 gains {gap:.1f}x what the embedding-heavy models do" in note and gap > 2.5
    nb = Path(__file__).parents[1] / "notebooks" / "02_gpu_efficiency.ipynb"
    sources = ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"]]
    text = next(t for t in sources if "Finding (a), beside the explorer" in t)
    said = text.split("**Finding (a), beside the explorer.**")[1].split("\n\n")[0]
    assert "*similar* gains per GPU while every table lives in HBM" in said and "no published ratio" in said
    assert not re.search(r"\d×", said)  # the paragraph quotes no ratio as published
    assert "DeepRecSys" not in text  # its ratios could not be checked against its text: none is quoted


def test_02_zion_keeps_most_of_it_by_pooling_rows_in_its_own_dram() -> None:
    zion, bb = ratios(hardware_name="zion", rows_scale=10), ratios(hardware_name="big_basin", rows_scale=10)
    assert zion["rm1"] == pytest.approx(1.8, abs=0.15) and zion["rm2"] == pytest.approx(2.4, abs=0.2)
    assert zion["rm1"] > 1.8 * bb["rm1"] and zion["rm2"] > 2 * bb["rm2"]
    places = {
        x["name"]: x["gpu_placement"]
        for x in gpu_advantage(hardware_name="zion", rows_scale=10).tables["advantage"]
    }
    assert places["rm1"] == places["rm2"] == "host"


# ----- notebook 05 ------------------------------------------------------------------------------
def test_05_what_if_big_basin_had_32_gb_gpus() -> None:
    bb = hardware("big_basin")
    rows = compare_hardware(
        preset("rm2").with_rows_scale(30),
        [bb, bb.replace(name="big_basin_32gb", hbm_bytes=32e9)],
        batch_size=8192,
    )
    small, large = rows
    assert small["placement"] == "hbm+cache+remote"
    assert large["placement"] == "hbm"
    assert num(large, "throughput") > 2.5 * num(small, "throughput")  # 638k vs 217k: 2.9x


ServersSummary = dict[tuple[str, str], dict[str, object]]


@pytest.fixture(scope="module")
def servers_summary() -> ServersSummary:
    models = {
        "rm1": preset("rm1"),
        "rm2": preset("rm2"),
        "rm3": preset("rm3"),
        "production": production_model(),
    }
    summary, _ = compare_models(models, SERVERS, batch_size=8192)
    return {(str(r["model"]), str(r["server"])): r for r in summary}


def test_05_per_node_gpu_servers_are_overhead_bound_and_the_advantage_follows_work_per_sample(
    servers_summary: ServersSummary,
) -> None:
    s = servers_summary
    for m in ("rm1", "rm2", "rm3"):
        for server in SERVERS[1:]:
            assert s[(m, server)]["bound_by"] == "overhead", (m, server)
    adv = {
        m: num(s[(m, "big_basin")], "throughput") / num(s[(m, "cpu_cluster")], "throughput")
        for m in ("rm1", "rm2", "rm3")
    }
    assert adv["rm1"] == pytest.approx(5.0, abs=0.5)
    assert adv["rm2"] == pytest.approx(15.7, abs=1.5)
    assert adv["rm3"] == pytest.approx(13.2, abs=1.3)
    assert adv["rm1"] < adv["rm3"] < adv["rm2"]  # not "RM3 gains most" per node
    assert (
        s[("rm1", "cpu_cluster")]["bound_by"] == s[("rm2", "cpu_cluster")]["bound_by"] == "embedding_backward"
    )
    assert s[("rm3", "cpu_cluster")]["bound_by"] == "bottom_mlp"


def test_05_energy_counts_parameter_servers_and_zion_wins_at_production_scale(
    servers_summary: ServersSummary,
) -> None:
    s = servers_summary
    # RM1 at 1x: its tables fit in the CPU node's own DRAM, no servers, and the most samples per joule
    assert s[("rm1", "cpu_cluster")]["parameter_servers"] == 0
    assert num(s[("rm1", "cpu_cluster")], "samples_per_joule") == max(
        num(s[("rm1", x)], "samples_per_joule") for x in SERVERS
    )
    # production scale: the CPU node and Big Basin pay for parameter servers; Zion needs none and wins
    cpu, bb, zion = (s[("production", x)] for x in ("cpu_cluster", "big_basin", "zion"))
    assert (cpu["parameter_servers"], bb["parameter_servers"], zion["parameter_servers"]) == (5, 4, 0)
    assert num(cpu, "node_power_w") > 400 * (1 + num(cpu, "parameter_servers")) - 1
    assert num(zion, "samples_per_joule") == max(
        num(s[("production", x)], "samples_per_joule") for x in SERVERS
    )
    assert num(zion, "throughput") > 10 * num(cpu, "throughput")  # 949k vs 63k


def test_05_explorer_story_rm2_grows() -> None:
    def row(kw: dict[str, Any], server: str, table: str = "throughput") -> dict[str, object]:
        return next(r for r in explore_servers(**kw).tables[table] if r["metric"] == server)

    big = {"model": "rm2", "rows_scale": 100}
    # Zion keeps tables in its own DRAM, 4x a CPU node that needs parameter servers (211k vs 38k)
    assert "host" in str(row(big, "zion")["placement"]) and row(big, "cpu_cluster")["placement"] == "remote"
    assert num(row(big, "zion"), "value") > 4 * num(row(big, "cpu_cluster"), "value")
    assert num(row(big, "zion", "per_joule"), "value") > num(row(big, "cpu_cluster", "per_joule"), "value")
    # "Big Basin's tables leave its HBM first (at 30x some behind a GPU cache and some on parameter servers,
    # at 100x on parameter servers); Zion keeps them in the node longer: all in its GPUs' HBM at 30x, and at
    # 100x partly in its own DRAM (and partly on parameter servers)"
    mid = {"model": "rm2", "rows_scale": 30}
    assert row({"model": "rm2", "rows_scale": 1}, "big_basin")["placement"] == "hbm"
    assert (
        row(mid, "big_basin")["placement"] == "hbm+cache+remote"
        and row(big, "big_basin")["placement"] == "hbm+remote"
    )
    assert row(mid, "zion")["placement"] == "hbm"
    # the most samples per joule changes as the tables grow: big_basin at 1x, zion at 30x
    frugal = {
        s: max(explore_servers(model="rm2", rows_scale=s).tables["per_joule"], key=lambda r: num(r, "value"))
        for s in (1, 30)
    }
    assert frugal[1]["metric"] == "big_basin" and frugal[30]["metric"] == "zion"


def test_05_explorer_story_cache_hit_rate() -> None:
    def big_basin(hit: float) -> dict[str, object]:
        r = explore_servers(model="rm2", rows_scale=30, cache_hit_rate=hit)
        return next(x for x in r.tables["throughput"] if x["metric"] == "big_basin")

    half, base, high = big_basin(0.5), big_basin(0.9), big_basin(0.95)
    assert "cache" in str(base["placement"])
    # at 0.5 the cache loses to parameter servers ("hbm+remote, about 20% slower")
    assert half["placement"] == "hbm+remote"
    assert 0.75 < num(half, "value") / num(base, "value") < 0.85
    # at 0.95 the larger cache no longer fits beside HBM-resident tables: parameter servers take them too
    assert high["placement"] == "hbm+remote" and num(high, "value") < num(base, "value")


def test_05_explorer_story_batch_amortises_overhead() -> None:
    small = explore_servers(model="mlperf_v1", batch_size=1024)
    large = explore_servers(model="mlperf_v1", batch_size=131072)
    frugal = [max(r.tables["per_joule"], key=lambda x: num(x, "value"))["metric"] for r in (small, large)]
    assert frugal == ["cpu_cluster", "dgx_h100"]
    # "at small batches every GPU server is bounded by per-step overhead"
    from recnotebooks.perf.servers import compare_servers

    rows, _ = compare_servers(preset("mlperf_v1"), SERVERS, batch_size=1024, cache_hit_rate=0.9)
    assert {r["bound_by"] for r in rows if r["server"] != "cpu_cluster"} == {"overhead"}


# ----- notebook 02 §3: the roofline --------------------------------------------------------------
def test_02_no_preset_reaches_much_more_than_half_its_roof() -> None:
    from recnotebooks.perf.sweeps import roofline_points

    points = {
        p["label"]: p
        for p in roofline_points(
            ["rm1", "rm2", "rm3", "criteo_kaggle", "dlrm_benchmark"], "dgx_a100", batch_size=4096
        )
    }
    shares = {k: round(num(p, "roof_fraction") * 100) for k, p in points.items()}
    assert shares == {"rm1": 11, "rm2": 36, "rm3": 51, "criteo_kaggle": 12, "dlrm_benchmark": 27}
    bounds = {k: p["bound_by"] for k, p in points.items()}
    assert bounds["rm1"] == bounds["criteo_kaggle"] == "overhead"
    assert bounds["rm2"] == "embedding_backward"
    assert bounds["rm3"] == "bottom_mlp" and bounds["dlrm_benchmark"] == "top_mlp"


# ----- notebook 03: placement and caches -----------------------------------------------------------
def _placements_rm2x30() -> dict[str, dict[str, object]]:
    from recnotebooks.perf.placement import placement_costs, placement_summary

    big = preset("rm2").with_rows_scale(30)  # as notebook 03 §1 calls it
    return {str(p["key"]): p for p in placement_summary(placement_costs(big, "dgx_a100", 0.9, 4096))}


def test_03_where_a_table_lives_sets_what_a_lookup_costs() -> None:
    from recnotebooks.perf.placement import break_even_hit_rate

    big = preset("rm2").with_rows_scale(30)
    assert round(big.sparse_parameters * 4 / 1e9) == 123
    p = _placements_rm2x30()
    assert p["hbm"]["fits"] is False and all(p[k]["fits"] for k in ("cache", "host", "remote"))
    ms = {k: num(v, "step_ms") for k, v in p.items()}
    ns = {k: num(v, "ns_per_lookup") for k, v in p.items()}
    # "about 23 ms (0.9 ns per lookup); over UVM about 2,050 ms (130 ns, about 150x more)"
    assert round(ms["hbm"]) == 23 and round(ns["hbm"], 1) == 0.9
    assert round(ms["host"], -1) == 2050 and round(ns["host"]) == 130
    assert round(ns["host"] / ns["hbm"], -1) == 150
    # "a cache at 90% about 226 ms ... about 10x longer than in HBM"; "parameter servers about 124 ms"
    assert round(ms["cache"]) == 226 and 9 < ms["cache"] / ms["hbm"] < 11
    assert round(ms["remote"]) == 124 and ms["remote"] < ms["cache"]
    # takeaways: "14 ns behind a cache at 90% hits, 7 ns on parameter servers"
    assert round(ns["cache"]) == 14 and round(ns["remote"]) == 7
    # "the cache beats them only from about 95% hits"
    hit = break_even_hit_rate(big, "dgx_a100", "remote", 4096)
    assert hit is not None and round(hit, 2) == 0.95


@pytest.fixture(scope="module")
def curves_03() -> dict[str, dict[int, float]]:
    from recnotebooks.viz.cache import hit_rate_curves

    by: dict[str, dict[int, float]] = {}
    for r in hit_rate_curves(100_000, 1.05, num_ids=1_000_000):  # notebook 03 §2 (CURVE_IDS, full run)
        by.setdefault(str(r["policy"]), {})[whole(r, "capacity")] = num(r, "hit_rate")
    return by


def test_03_policies_differ_most_in_small_caches(curves_03: dict[str, dict[int, float]]) -> None:
    c = curves_03
    # "At 1% LRU about 59%, LFU 68%, the static hot set 68%, OPT 73%"
    assert [round(c[p][1000], 2) for p in ("LRU", "LFU", "static hot set", "OPT")] == [0.59, 0.68, 0.68, 0.73]
    # "At 20% LRU about 85% and OPT 91%, while the static set stops at about 82%"
    assert (round(c["LRU"][20_000], 2), round(c["OPT"][20_000], 2)) == (0.85, 0.91)
    assert round(c["static hot set"][20_000], 2) == 0.82
    assert c["static hot set"][50_000] - c["static hot set"][20_000] < 0.01  # it has no more hot rows to pin
    # "a 32-way set-associative cache stays within a point of LRU at every size"
    for cap, h in c["set-assoc LRU"].items():
        near = min(c["LRU"], key=lambda k: abs(k - cap))
        assert abs(h - c["LRU"][near]) < 0.01, cap
    # OPT bounds every policy
    for p, pts in c.items():
        assert all(h <= c["OPT"][k] + 1e-12 for k, h in pts.items() if k in c["OPT"]), p


def test_03_first_touches_cap_every_cache(curves_03: dict[str, dict[int, float]]) -> None:
    from recnotebooks.viz.cache import cache_trace, first_touches

    f = first_touches(cache_trace(100_000, 1.05, 1_000_000))
    assert round(f, 2) == 0.07  # "about 7% of the lookups touch their row for the first time"
    assert max(curves_03["OPT"].values()) == pytest.approx(1 - f)  # "no cache serves more than about 93%"
    assert round(1 - f, 2) == 0.93


def test_03_the_closed_form_model_beside_the_simulator(curves_03: dict[str, dict[int, float]]) -> None:
    from recnotebooks.perf.access import hit_rate

    lru, static = (hit_rate(5_000, 100_000, 1.05, policy=p) for p in ("lru", "static"))
    # "the model's LRU agrees within 0.01 at 5%; its static bound ... about 4 points more"
    assert abs(lru - curves_03["LRU"][5_000]) < 0.01
    assert round((static - curves_03["static hot set"][5_000]) * 100) == 4


def test_03_explorer_things_to_try() -> None:
    from recnotebooks.viz.cache import explore_cache

    def run(**kw: Any) -> dict[str, float]:
        r = explore_cache(measure=False, **kw)
        return {str(m["metric"]).split(":")[0]: num(m, "value") for m in r.tables["metrics"]}

    base, weak, weak_lfu = run(), run(alpha=0.6), run(alpha=0.6, policy="lfu")
    # "skew 1.05 -> 0.6: LRU at 20% from about 83% to 37%, bytes per step more than triple, LFU holds up
    # better"
    assert (round(base["hit rate"], 2), round(weak["hit rate"], 2)) == (0.83, 0.37)
    assert weak["host→device per step"] > 3 * base["host→device per step"]
    assert weak_lfu["hit rate"] > weak["hit rate"]
    # "ways 32 -> 1: at 5% about 68% against 73%"
    sa32, sa1 = (run(policy="setassoc", cache_fraction=0.05, ways=w)["hit rate"] for w in (32, 1))
    assert (round(sa1, 2), round(sa32, 2)) == (0.68, 0.73)
    # "cache size 20% -> 2%: a step's 5,120 lookups touch more distinct rows than 2,000 slots"
    small = explore_cache(measure=False, cache_fraction=0.02)
    assert "traffic" not in small.tables
    assert any("5,120 lookups" in n and "too small" in n for n in small.notes)


def test_03_hot_lookups_are_not_hot_samples() -> None:
    from recnotebooks.cache.hot import hot_sample_curve

    rows = hot_sample_curve(100_000, 1.05, hot_fraction=0.05)  # as notebook 03 §4 calls it
    lookups = {r["lookups_per_sample"]: num(r, "share") for r in rows if str(r["what"]).startswith("lookups")}
    samples = {r["lookups_per_sample"]: num(r, "share") for r in rows if str(r["what"]).startswith("samples")}
    # "about 62% of lookups for one lookup per sample and 77-79% with 26-50"
    assert round(lookups[1], 2) == 0.62 and round(lookups[26], 2) >= 0.77 and round(lookups[50], 2) <= 0.79
    # "about 20% at 5 lookups, 5% at 10, 0.1% at 26 and almost none at 50"
    assert (round(samples[5], 2), round(samples[10], 2), round(samples[26], 3)) == (0.20, 0.05, 0.001)
    assert samples[50] < 1e-4
    for n in (2, 5, 10):  # "a sample of n lookups is all-hot with about the hit rate to the power n"
        assert samples[n] == pytest.approx(lookups[n] ** n, rel=0.1)


def test_03_placement_by_cost_for_a_model_too_big_for_hbm() -> None:
    from recnotebooks.perf import best_placement

    big = preset("rm2").with_rows_scale(30)
    one, r1 = best_placement(big, hardware("dgx_a100"), 1, 4096)
    bb, r8 = best_placement(big, hardware("big_basin"), 8, 4096)
    dgx, rd = best_placement(big, hardware("dgx_a100"), 8, 4096)
    # "on one A100 ... parameter servers (about 124 ms)"; "Big Basin ... split the tables between their HBM, a
    # cache over host DRAM and parameter servers (about 22 ms)"; "a DGX A100 ... all in HBM (about 7 ms)"
    assert one == "remote" and round(r1.step_time * 1e3) == 124
    assert bb == "hbm+cache+remote" and round(r8.step_time * 1e3) == 22
    assert dgx == "hbm" and round(rd.step_time * 1e3) == 7


def test_03_torchrec_uvm_example_beside_the_model() -> None:
    from recnotebooks.perf.compare import torchrec_uvm_example

    rows = {str(r["case"]): r for r in torchrec_uvm_example()}
    s = {k: num(r, "seconds_per_epoch") for k, r in rows.items()}
    assert (s["UVM (published)"], s["UVM cache (published)"]) == (0.62, 0.06)
    # "the model's UVM epoch is 0.56 s, within 10% of the published 0.62 s"
    assert round(s["UVM (modeled)"], 2) == 0.56 and abs(s["UVM (modeled)"] / 0.62 - 1) < 0.1
    # "about 90% hits to come near the published 0.06 s (0.079 s); at 99% 0.031 s, about half of it"
    assert round(s["cache at 90% hits (modeled)"], 3) == 0.079
    full = "cache at 99% hits (modeled; would not fit)"  # "the model also flags that it would not fit"
    assert round(s[full], 3) == 0.031 and 0.4 < s[full] / 0.06 < 0.6
    assert rows[full]["fits"] is False
