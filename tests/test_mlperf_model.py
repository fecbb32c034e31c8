"""The model against MLPerf Training's DLRM-DCNv2 results (recnotebooks.perf.published): the runs it
compares, the plan (recnotebooks.perf.mlperf_plan) and software stack it prices them with, and the
errors it reports. The figures the documents quote (BENCHMARKS.md) are asserted here, so a change to
the model that moves them fails until the documents say what the model says."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any

import pytest

from recnotebooks.config import preset
from recnotebooks.perf import estimate
from recnotebooks.perf.compare import (
    MLPERF_RATIOS,
    compare_published,
    fit_hugectr_step,
    mlperf_errors,
    mlperf_phases,
    mlperf_ratios,
    modeled_phases,
)
from recnotebooks.perf.components import collectives as coll
from recnotebooks.perf.components.ops import HUGECTR
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.mlperf_plan import HIER_AUTO, SMALL_TABLE_ROWS, mlperf_plan, submitted_sharding
from recnotebooks.perf.mlperf_setup import CPU_SETUP, MLPERF_RUNS, MLPERF_SETUP, mlperf_throughput
from recnotebooks.perf.mlperf_systems import mlperf_layout
from recnotebooks.published import convergence as cv
from recnotebooks.published.mlperf import FIT_ROUNDS, HELD_OUT_ROUNDS, TRAIN_SAMPLES
from recnotebooks.published.mlperf_results import MLPERF_DCNV2_RESULTS

CFG = preset("mlperf_dcnv2")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, object]]:
    return compare_published(MLPERF_RUNS)


def test_the_runs_are_every_gpu_result_with_a_logged_throughput_once() -> None:
    want = [
        m
        for m in MLPERF_DCNV2_RESULTS
        if m.samples_per_s is not None and m.accelerators_per_node > 0 and not m.republished
    ]
    assert [r.mlperf for r in MLPERF_RUNS] == want and len(want) == 81
    assert all(
        r.source == r.mlperf.source and r.mlperf.round in (*FIT_ROUNDS, *HELD_OUT_ROUNDS) for r in MLPERF_RUNS
    )


def test_every_run_is_priced_finite_and_fits(rows: list[dict[str, object]]) -> None:
    assert len(rows) == len(MLPERF_RUNS)
    for r in rows:
        assert r["fits"] and math.isfinite(r["modeled"]) and r["modeled"] > 0, r["run"]
        assert r["modeled_minutes"] == pytest.approx(
            TRAIN_SAMPLES * statistics.median(_run(r).mlperf.epochs_to_target) / r["modeled"] / 60
        )
        assert r["held_out"] is (r["round"] in HELD_OUT_ROUNDS)


def _run(row: dict[str, object]) -> object:
    (run,) = [x for x in MLPERF_RUNS if x.label == row["run"]]
    return run


@pytest.mark.parametrize("gpus, nodes", [(8, 1), (4, 1), (4, 2), (8, 8), (8, 16), (64, 1)])
def test_mlperf_plan_places_every_table_once_small_ones_everywhere(gpus: int, nodes: int) -> None:
    plan = mlperf_plan(CFG, gpus, nodes)
    world = gpus * nodes
    assert plan.world_size == world
    plan.check(CFG)
    by_table = Counter(s.table for s in plan.shards)
    if nodes > 1:  # hier_auto: each node's tables row-wise over all its GPUs, small ones everywhere
        for t in CFG.tables:
            shards = [s for s in plan.shards if s.table == t.name]
            if t.num_rows * CFG.embedding_dim * 8 < HIER_AUTO["dp_bytes"]:
                assert {s.sharding for s in shards} == {"data_parallel"} and by_table[t.name] == world
                continue
            ranks = sorted(s.rank for s in shards)
            assert {s.sharding for s in shards} == {"row_wise"} and len(ranks) % gpus == 0
            assert all(
                ranks[i : i + gpus] == list(range(ranks[i], ranks[i] + gpus))
                for i in range(0, len(ranks), gpus)
            )
            assert sum(s.row_fraction for s in shards) == pytest.approx(1.0)
        return
    for t in CFG.tables:
        shards = [s for s in plan.shards if s.table == t.name]
        if t.num_rows <= SMALL_TABLE_ROWS:
            assert {s.sharding for s in shards} == {"data_parallel"} and by_table[t.name] == world
        elif shards[0].sharding == "row_wise":  # one node's GPUs, together all the rows
            node = shards[0].rank // gpus
            assert sorted(s.rank for s in shards) == list(range(node * gpus, (node + 1) * gpus))
            assert sum(s.row_fraction for s in shards) == pytest.approx(1.0)
        else:
            assert [s.sharding for s in shards] == ["table_wise"]
    # the busiest table (100 lookups a sample) is never whole on one device
    assert {s.sharding for s in plan.shards if s.table == "C21"} == {"row_wise"}


def test_mlperf_plan_keeps_each_device_within_its_memory() -> None:
    """Four 80 GB GPUs: five 40M-row tables of 41 GB each (fp32 rows and exact Adagrad's state)
    cannot go two to a device; the plan splits what does not fit, and the model says it fits."""
    hbm = hardware("dgx_h100").hbm_bytes
    plan = mlperf_plan(CFG, 4, 1, hbm)
    rows = {t.name: t.num_rows for t in CFG.tables}
    used = [0.0] * 4
    for s in plan.shards:
        frac = 1.0 if s.sharding == "data_parallel" else (s.row_fraction if s.sharding == "row_wise" else 1.0)
        used[s.rank] += rows[s.table] * frac * CFG.embedding_dim * 8
    assert max(used) <= 0.85 * hbm
    r = estimate(
        CFG, "dgx_h100", batch_size=28000, gpus=4, dtype="amp_fp16", sparse_optimizer="adagrad", plan=plan
    )
    assert r.fits
    assert not estimate(
        CFG,
        "dgx_h100",
        batch_size=28000,
        gpus=4,
        dtype="amp_fp16",
        sparse_optimizer="adagrad",
        plan=mlperf_plan(CFG, 4),
    ).fits  # lookups alone would put two of them on one device


def test_mlperf_plan_balances_lookups_on_one_node() -> None:
    plan = mlperf_plan(CFG, 8, 1)
    pool = {t.name: t.pooling_factor for t in CFG.tables}
    load = [0.0] * 8
    for s in plan.shards:
        if s.sharding != "data_parallel":
            load[s.rank] += pool[s.table] * (s.row_fraction if s.sharding == "row_wise" else 1.0)
    total = sum(pool[t.name] for t in CFG.tables if t.num_rows > SMALL_TABLE_ROWS)
    assert sum(load) == pytest.approx(total)
    assert max(load) <= 1.5 * total / 8  # C21 alone on one device would be 100 of ~197


def test_hugectr_stack_is_one_graph_replay_fused_and_grouped() -> None:
    kw = {"batch_size": 55296, "gpus": 8, "dtype": "amp_fp16", "plan": mlperf_plan(CFG, 8, 1)}
    eager = estimate(CFG, "dgx_h100", implementation="torchrec", **kw)
    graph = estimate(CFG, "dgx_h100", implementation="hugectr", **kw)
    for e, g in zip(eager.per_rank, graph.per_rank, strict=True):
        assert g["overhead"] == HUGECTR["step_s"] < e["overhead"]
        assert g["interaction"] < e["interaction"]  # the cross layers' elementwise work fused
        assert g["all_to_all"] <= e["all_to_all"]  # one latency a grouped call, fewer calls
        for k in ("embedding_forward", "embedding_backward", "dense_optimizer", "all_reduce"):
            assert g[k] == pytest.approx(e[k]), k


def test_all_reduce_across_nodes_is_hierarchical() -> None:
    # the α-β formula's ring (DGX H100's numbers under a name the NCCL model does not cover; on
    # dgx_h100 itself NCCL prices it: tests/test_collectives_nccl.py)
    hw = hardware("dgx_h100").replace(name="h100_alpha_beta")
    size, g, n = 64e6, 8, 8
    p = g * n
    volume = 2 * (p - 1) / p * size  # what traffic gives per device
    nic = coll.nic_per_device(hw, g)
    want = (
        2 * (g - 1) / g * size / hw.intra_node_bw
        + 2 * (n - 1) / n * size / g / nic
        + (2 * (g - 1) + 2 * (n - 1)) * hw.collective_latency_s
    )
    assert coll.all_reduce_seconds(volume, p, g, hw, nic) == pytest.approx(want)
    # one node: the ring over NVLink, 2(p-1) latencies, as before
    one = coll.all_reduce_seconds(2 * 7 / 8 * size, 8, 8, hw, nic)
    assert one == pytest.approx(2 * 7 / 8 * size / hw.intra_node_bw + 14 * hw.collective_latency_s)
    assert coll.all_reduce_seconds(volume, p, g, hw, nic) < coll._collective(
        volume, p, g, hw, nic, steps=2 * (p - 1)
    )


def _by_hand(res: Any, m: Any, step_s: float) -> tuple[float, int, float]:
    """A run's logged throughput worked by hand from a modeled step of ``step_s`` seconds: its
    training steps, and its evaluations through each rank's forward; ``(samples/s, steps, eval s)``."""
    epochs = statistics.median(m.epochs_to_target)
    steps = math.ceil(epochs * TRAIN_SAMPLES / m.global_batch_size)
    fwd = max(
        c["embedding_forward"] + (c["bottom_mlp"] + c["top_mlp"] + c["interaction"]) / 3 + c["all_to_all"] / 2
        for c in res.per_rank
    )
    evals = cv.evaluations(epochs) * cv.EVAL_SAMPLES / m.global_batch_size * fwd
    return epochs * TRAIN_SAMPLES / (steps * step_s + evals), steps, evals


def test_throughput_counts_the_runs_evaluations() -> None:
    run = next(r for r in MLPERF_RUNS if r.mlperf.system == "eos_ngc24.04_merlin_hugectr")
    res = estimate(
        run.config(),
        run.hardware(),
        batch_size=run.batch_size,
        gpus=run.gpus,
        dtype=run.dtype,
        sparse_optimizer=run.sparse_optimizer,
        implementation=run.implementation,
        plan=run.plan(),
    )
    want, steps, evals = _by_hand(res, run.mlperf, res.step_time_overlap)
    assert mlperf_throughput(res, run.mlperf) == pytest.approx(want)
    assert 0 < evals < 0.3 * steps * res.step_time_overlap  # evaluations: a tenth or so of a run


def test_the_cpu_run_is_priced_one_phase_after_another() -> None:
    # Intel's script trains forward, backward, optimizer.step() in turn (no TorchRec pipeline):
    # its steps cost step_time, the GPU runs' step_time_overlap (HugeCTR overlaps)
    (intel,) = [m for m in MLPERF_DCNV2_RESULTS if m.submitter == "Intel"]
    assert intel.accelerators_per_node == 0
    cfg = preset("mlperf_dcnv2")
    res = estimate(
        cfg, "spr_node", batch_size=intel.global_batch_size, gpus=1, nodes=intel.nodes, **CPU_SETUP
    )
    assert res.step_time > 1.5 * res.step_time_overlap  # the choice matters here
    assert mlperf_throughput(res, intel) == pytest.approx(_by_hand(res, intel, res.step_time)[0])


def test_the_cpu_cluster_ratio_phase_by_phase() -> None:
    """mlperf_phases splits each run of the CPU-cluster ratio into what its log times apart: its
    training steps and one evaluation (and modeled_phases the run: the ratio's own minutes). As
    BENCHMARKS.md says, modeled over logged time: the H100 node's training 1.16x and evaluations
    1.35x, Intel's training 0.90x and evaluations 0.51x."""
    ((name, pair),) = [(k, v) for k, v in MLPERF_RATIOS.items() if "CPU" in k]
    intel, nvidia = (
        [m for m in MLPERF_DCNV2_RESULTS if (m.round, m.submitter, m.system) == key][0] for key in pair
    )
    ph = {m.submitter: modeled_phases(m) for m in (intel, nvidia)}
    (ratio,) = [r for r in mlperf_ratios() if r["ratio"] == name]
    assert ph["Intel"]["minutes"] / ph["NVIDIA"]["minutes"] == pytest.approx(ratio["modeled"], rel=1e-9)
    for m in (intel, nvidia):
        epochs = statistics.median(m.epochs_to_target)
        name_, gpus, nodes = mlperf_layout(m.accelerator, m.accelerators_per_node, m.nodes, m.host_cpu)
        gpu = m.accelerators_per_node > 0
        plan = mlperf_plan(CFG, gpus, nodes, hardware(name_).hbm_bytes) if gpu else None
        res = estimate(CFG, name_, batch_size=m.global_batch_size, gpus=gpus, nodes=nodes, plan=plan,
                       **(MLPERF_SETUP if gpu else CPU_SETUP))  # fmt: skip
        step = res.step_time_overlap if gpu else res.step_time
        steps = math.ceil(epochs * TRAIN_SAMPLES / m.global_batch_size)
        assert ph[m.submitter]["training_samples_per_s"] == pytest.approx(
            epochs * TRAIN_SAMPLES / (steps * step)
        )
        assert ph[m.submitter]["evaluations"] == cv.evaluations(epochs)
    rows = {r["label"].split()[1]: r for r in mlperf_phases([intel, nvidia])}  # type: ignore[union-attr]
    got = {
        k: (round(float(r["train_time_ratio"]), 2), round(float(r["eval_time_ratio"]), 2))
        for k, r in rows.items()
    }  # type: ignore[arg-type]
    assert got == {"NVIDIA": (1.16, 1.35), "Intel": (0.90, 0.51)}


def test_the_stack_constant_is_its_fit_on_the_fit_rounds_only() -> None:
    assert fit_hugectr_step() == pytest.approx(HUGECTR["step_s"], abs=1e-6)
    held = [r for r in MLPERF_RUNS if r.mlperf.round in HELD_OUT_ROUNDS]
    assert held and fit_hugectr_step(held) >= 0  # the fit reads only fit-round runs it is given


def test_errors_as_the_documents_state_them(rows: list[dict[str, object]]) -> None:
    """BENCHMARKS.md: fit rounds MAPE 18.8% (target 20%: met), held-out 10.5% (collectives priced as
    NCCL picks them and its kernels run them, issue 40); 8-GPU NVSwitch nodes of the fit rounds
    within 20%, NVIDIA's H100 runs on 8 and 16 nodes of v3.0-v4.0 within 19%, v3.0's too
    now that each is priced with its own config's plan (v3.0 set no
    DP_SHARDING_THRESHOLD: no table data-parallel, so the same 16 nodes exchanged more and ran 1.6x
    slower than on v3.1), Juniper's 64 A100s within 1% and Dell's two 4-GPU nodes within 10%;
    8-GPU PCIe nodes within 25% (too slow but for the A40), and Quanta's 4x H100 PCIe still
    2.3-2.9x too fast (its logs: the machine at half its own first speed)."""
    err = mlperf_errors(rows)
    assert (err["fit_runs"], err["held_out_runs"]) == (42, 39)
    assert round(100 * err["fit_mape"], 1) == 18.8 and round(100 * err["held_out_mape"], 1) == 10.5
    nvswitch8 = [
        r
        for r in rows
        if r["round"] in FIT_ROUNDS
        and r["gpus"] == 8
        and _run(r).nodes == 1
        and "SXM" in str(r["accelerator"])
    ]
    assert len(nvswitch8) >= 20 and all(0.8 <= r["ratio"] <= 1.2 for r in nvswitch8)
    pcie = [
        r
        for r in rows
        if r["round"] in FIT_ROUNDS and any(k in str(r["accelerator"]) for k in ("PCIe", "A40", "L40"))
    ]
    quanta = [r for r in pcie if "D54U" in str(r["run"])]
    assert len(pcie) == 6 and len(quanta) == 2 and all(2.3 < r["ratio"] < 2.9 for r in quanta)
    assert all(0.75 <= r["ratio"] <= 1.25 for r in pcie if r not in quanta)
    multi = [r for r in rows if r["round"] in FIT_ROUNDS and _run(r).nodes > 1 and r["gpus"] >= 64]
    nvidia = [r for r in multi if "NVIDIA" in str(r["run"]) and "H100" in str(r["accelerator"])]
    # 0.91-1.12 since NVLS tree's pipeline fill is priced (0.95-1.18 at NCCL's predicted times)
    assert len(nvidia) == 6 and all(0.9 <= r["ratio"] <= 1.13 for r in nvidia)
    v30, v31 = (submitted_sharding("dgx_h100", 8, 16, rnd) for rnd in ("v3.0", "v3.1"))
    assert (v30.plan, v30.dp_threshold, v31.plan, v31.dp_threshold) == ("hier_auto", 0.0, "hier_auto", 0.0125)
    others = {
        str(r["run"]).split()[1]: r["ratio"]
        for r in rows
        if r["round"] in FIT_ROUNDS and _run(r).nodes > 1 and "NVIDIA" not in str(r["run"])
    }
    assert len(others) == 2 and 0.99 <= others["JuniperNetworks"] <= 1.01 and 0.9 <= others["Dell"] < 0.99


def test_the_four_ratios() -> None:
    got = {r["ratio"]: r for r in mlperf_ratios()}
    assert len(got) == 4
    h200 = got["H200 / H100, one 8-GPU node"]
    assert 1.05 < h200["published"] < 1.15 and 0.8 <= h200["modeled_over_published"] <= 1.2  # met
    for name, r in got.items():
        assert r["published"] > 1 and r["modeled"] > 1, name  # every direction right
    # met since the network's share of a HugeCTR step on several nodes is on its path (EXPOSED_NETWORK)
    for name in ("8 GPUs in one NVSwitch node / two 4-GPU nodes", "64 A100s / 8 A100s"):
        assert 0.8 <= got[name]["modeled_over_published"] <= 1.2, name
    assert got["8xH100 node / 4-node CPU cluster (time to train)"]["published"] == pytest.approx(
        57.8, abs=0.1
    )


# ----- notebook 02 §7: the model of record on MLPerf's GPUs (every sentence's numbers) ---------------
def test_02_a_published_step_and_its_utilisation() -> None:
    from recnotebooks.perf.compare import published_utilisation
    from recnotebooks.perf.mlperf_setup import estimate_run

    h100 = next(
        m for m in MLPERF_DCNV2_RESULTS if (m.round, m.system) == ("v4.0", "eos_ngc24.04_merlin_hugectr")
    )
    u = published_utilisation(h100)
    # "a step of about 4 ms ... about 17% of peak"
    assert round(u["step_ms"], 1) == 4.0 and round(100 * u["utilisation"]) == 17 and u["gpus"] == 8
    run = next(r for r in MLPERF_RUNS if r.mlperf is h100)
    step = estimate_run(run)
    at_peak = CFG.total_flops_per_sample() * run.batch_size / 8 / hardware("dgx_h100").flops("fp16")
    # "FLOPs would take about 0.7 ms at peak"; the modeled step about 4 ms, bound by memory and communication
    assert round(at_peak * 1e3, 1) == 0.7 and 3.5 < step.step_time_overlap * 1e3 < 4.5
    slowest = max(step.per_rank, key=lambda c: sum(c.values()))
    memory = slowest["embedding_forward"] + slowest["embedding_backward"] + slowest["interaction"]
    assert memory > 2 * at_peak and slowest["all_to_all"] + slowest["all_reduce"] > 0.5 * at_peak


def test_02_by_system_as_the_text_says(rows: list[dict[str, object]]) -> None:
    from recnotebooks.perf.compare import mlperf_by_system

    by = {(g["system"], g["held_out"]): g["ratio"] for g in mlperf_by_system(rows)}
    assert round(by[("H100-SXM5-80GB 8x1", False)], 2) == 0.85
    h200 = [v for (k, _), v in by.items() if k == "H200-SXM5-141GB 8x1"]
    assert h200 and all(0.93 <= round(v, 2) <= 0.96 for v in h200)
    assert round(by[("B200-SXM-180GB 8x1", True)], 2) == 1.04
    # "PCIe nodes ... 0.76-1.10 on 8 GPUs ... Quanta's 4x H100 PCIe 2.6"
    pcie = {k: v for (k, _), v in by.items() if k.split()[0] in ("A40", "L40", "L40S") or "PCIe" in k}
    assert len(pcie) == 5 and round(pcie.pop("H100-PCIe-80GB 4x1"), 1) == 2.6
    assert (round(min(pcie.values()), 2), round(max(pcie.values()), 2)) == (0.76, 1.1)
    # "64 H100s about 1.02, 128 about 1.08"
    assert (
        round(by[("H100-SXM5-80GB 8x8", False)], 2) == 1.02
        and round(by[("H100-SXM5-80GB 8x16", False)], 2) == 1.08
    )
    # "Juniper's 64 A100s land within 1%, Dell's two 4-GPU nodes at 0.96"
    assert (
        round(by[("H100-SXM5-80GB 4x2", False)], 2) == 0.96
        and round(by[("A100-SXM4-80GB 8x8", False)], 2) == 1.0
    )
    err = mlperf_errors(rows)
    # "Over the fit rounds the mean error is 18.8% (the goal: at most 20%); over the held-out rounds 10.5%."
    assert (round(100 * err["fit_mape"], 1), round(100 * err["held_out_mape"], 1)) == (18.8, 10.5)


@pytest.mark.parametrize(
    "args, match",
    [((CFG, 0, 1), "gpus"), ((CFG, 8, 0), "nodes"), ((CFG, 8, 1, -1.0), "device_bytes"),
     ((CFG, 64, 128), "gpus x nodes"), (("mlperf_dcnv2", 8, 1), "config")],
)  # fmt: skip
def test_mlperf_plan_refuses_bad_input_naming_it(args: tuple, match: str) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        mlperf_plan(*args)
