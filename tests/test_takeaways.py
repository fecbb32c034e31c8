"""Every finding notebooks 02 and 05 state in words, asserted on the numbers they compute.

Each test calls the library exactly as its notebook cell does and checks the sentence's
claim (direction, and the rounded figures the text quotes). When a test fails, the model
and the sentence disagree: find out which is wrong before changing either.
"""

from __future__ import annotations

import pytest

from recnotebooks.config import preset
from recnotebooks.lab import production_model
from recnotebooks.perf import hardware
from recnotebooks.perf.explore import SERVERS, compare_hardware, compare_models, table_count_sweep
from recnotebooks.viz.advantage import gpu_advantage
from recnotebooks.viz.servers import explore_servers


# ----- notebook 02 §2: more sparse features ----------------------------------------------------
@pytest.fixture(scope="module")
def tables_sweep() -> dict[float, list[dict[str, object]]]:
    rows = table_count_sweep(embedding_dim=32)  # as notebook 02 §2 calls it
    return {p: [r for r in rows if r["pooling"] == p] for p in (1, 80)}


def test_02_more_tables_at_one_lookup_raise_efficiency_but_cost_throughput(tables_sweep) -> None:  # type: ignore[no-untyped-def]
    first, last = tables_sweep[1][0], tables_sweep[1][-1]  # 1 and 32 tables
    assert first["num_tables"] == 1 and last["num_tables"] == 32
    # "efficiency rises (about 4.9% -> 7.5%) while throughput falls (about 1.06 M -> 0.76 M)"
    assert last["flops_efficiency"] > first["flops_efficiency"]
    assert first["flops_efficiency"] == pytest.approx(0.049, abs=0.005)
    assert last["flops_efficiency"] == pytest.approx(0.075, abs=0.008)
    assert last["throughput"] < 0.8 * first["throughput"]
    # "the step is bound by per-step overhead"
    assert {r["bound_by"] for r in tables_sweep[1]} == {"overhead"}


def test_02_more_tables_at_production_pooling_lower_efficiency_and_throughput(tables_sweep) -> None:  # type: ignore[no-untyped-def]
    effs = [float(r["flops_efficiency"]) for r in tables_sweep[80]]
    tput = [float(r["throughput"]) for r in tables_sweep[80]]
    # "efficiency falls (about 4.6% -> 3.0%) along with throughput (about 0.99 M -> 0.28 M)"
    assert effs[-1] < 0.75 * effs[0]
    assert all(a > b for a, b in zip(tput, tput[1:], strict=False))
    assert tput[-1] < 0.35 * tput[0]


# ----- notebook 02 §4 and its app: finding (a) -------------------------------------------------
def ratios(**kw: object) -> dict[str, float]:
    return {str(r["name"]): float(r["ratio"]) for r in gpu_advantage(**kw).tables["advantage"]}  # type: ignore[arg-type]


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
    assert small["placement"] != "hbm" and "cache" in str(small["placement"])  # hbm+cache
    assert large["placement"] == "hbm"
    assert float(large["throughput"]) > 2.5 * float(small["throughput"])  # 638k vs 217k: 2.9x


@pytest.fixture(scope="module")
def servers_summary() -> dict[tuple[str, str], dict[str, object]]:
    models = {
        "rm1": preset("rm1"),
        "rm2": preset("rm2"),
        "rm3": preset("rm3"),
        "production": production_model(),
    }
    summary, _ = compare_models(models, SERVERS, batch_size=8192)
    return {(str(r["model"]), str(r["server"])): r for r in summary}


def test_05_per_node_gpu_servers_are_overhead_bound_and_the_advantage_follows_work_per_sample(
    servers_summary,  # type: ignore[no-untyped-def]
) -> None:
    s = servers_summary
    for m in ("rm1", "rm2", "rm3"):
        for server in SERVERS[1:]:
            assert s[(m, server)]["bound_by"] == "overhead", (m, server)
    adv = {
        m: float(s[(m, "big_basin")]["throughput"]) / float(s[(m, "cpu_cluster")]["throughput"])
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


def test_05_energy_counts_parameter_servers_and_zion_wins_at_production_scale(servers_summary) -> None:  # type: ignore[no-untyped-def]
    s = servers_summary
    # RM1 at 1x: its tables fit in the CPU node's own DRAM, no servers, and the most samples per joule
    assert s[("rm1", "cpu_cluster")]["parameter_servers"] == 0
    assert s[("rm1", "cpu_cluster")]["samples_per_joule"] == max(
        s[("rm1", x)]["samples_per_joule"] for x in SERVERS
    )
    # production scale: the CPU node and Big Basin pay for parameter servers; Zion needs none and wins
    cpu, bb, zion = (s[("production", x)] for x in ("cpu_cluster", "big_basin", "zion"))
    assert (cpu["parameter_servers"], bb["parameter_servers"], zion["parameter_servers"]) == (5, 4, 0)
    assert float(cpu["node_power_w"]) > 400 * (1 + cpu["parameter_servers"]) - 1  # type: ignore[operator]
    assert zion["samples_per_joule"] == max(s[("production", x)]["samples_per_joule"] for x in SERVERS)
    assert float(zion["throughput"]) > 10 * float(cpu["throughput"])  # 949k vs 63k


def test_05_explorer_story_rm2_grows() -> None:
    def row(kw: dict[str, object], server: str, table: str = "throughput") -> dict[str, object]:
        return next(r for r in explore_servers(**kw).tables[table] if r["metric"] == server)  # type: ignore[arg-type]

    big = {"model": "rm2", "rows_scale": 100}
    # Zion keeps the tables in its own DRAM, 4x a CPU node that needs parameter servers (160k vs 38k)
    assert "host" in str(row(big, "zion")["placement"]) and row(big, "cpu_cluster")["placement"] == "remote"
    assert float(row(big, "zion")["value"]) > 4 * float(row(big, "cpu_cluster")["value"])  # type: ignore[arg-type]
    assert float(row(big, "zion", "per_joule")["value"]) > float(
        row(big, "cpu_cluster", "per_joule")["value"]
    )  # type: ignore[arg-type]
    # the most samples per joule changes as the tables grow: big_basin at 1x, zion at 30x
    frugal = {
        s: max(explore_servers(model="rm2", rows_scale=s).tables["per_joule"], key=lambda r: r["value"])
        for s in (1, 30)
    }  # type: ignore[arg-type, return-value]
    assert frugal[1]["metric"] == "big_basin" and frugal[30]["metric"] == "zion"


def test_05_explorer_story_cache_hit_rate() -> None:
    def big_basin(hit: float) -> dict[str, object]:
        r = explore_servers(model="rm2", rows_scale=30, cache_hit_rate=hit)
        return next(x for x in r.tables["throughput"] if x["metric"] == "big_basin")

    half, base, high = big_basin(0.5), big_basin(0.9), big_basin(0.95)
    assert half["placement"] == base["placement"] == "hbm+cache"
    assert float(half["value"]) < 0.5 * float(base["value"])  # type: ignore[arg-type]
    # at 0.95 the larger cache no longer fits beside HBM-resident tables: every table behind the cache, slower
    assert high["placement"] == "cache" and float(high["value"]) < float(base["value"])  # type: ignore[arg-type]


def test_05_explorer_story_batch_amortises_overhead() -> None:
    small = explore_servers(model="mlperf_v1", batch_size=1024)
    large = explore_servers(model="mlperf_v1", batch_size=131072)
    frugal = [max(r.tables["per_joule"], key=lambda x: x["value"])["metric"] for r in (small, large)]  # type: ignore[arg-type, return-value]
    assert frugal == ["cpu_cluster", "dgx_h100"]


# ----- notebook 02 §3: the roofline --------------------------------------------------------------
def test_02_no_preset_reaches_much_more_than_half_its_roof() -> None:
    from recnotebooks.perf.explore import roofline_points

    points = {
        p["label"]: p
        for p in roofline_points(
            ["rm1", "rm2", "rm3", "criteo_kaggle", "dlrm_benchmark"], "dgx_a100", batch_size=4096
        )
    }
    shares = {k: round(float(p["roof_fraction"]) * 100) for k, p in points.items()}  # type: ignore[arg-type]
    assert shares == {"rm1": 11, "rm2": 36, "rm3": 51, "criteo_kaggle": 11, "dlrm_benchmark": 27}
    bounds = {k: p["bound_by"] for k, p in points.items()}
    assert bounds["rm1"] == bounds["criteo_kaggle"] == "overhead"
    assert bounds["rm2"] == "embedding_backward"
    assert bounds["rm3"] == "bottom_mlp" and bounds["dlrm_benchmark"] == "top_mlp"
