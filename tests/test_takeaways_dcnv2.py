"""The model of record (MLPerf's DLRM-DCNv2) in notebooks 01 §6, 05 §4 and 06 §5: every sentence that
states a finding, asserted on the numbers the notebook computes.

Each test calls the library exactly as its notebook cell does and checks the sentence's claim (its
direction, and the rounded figures the text quotes). When a test fails, the model and the sentence
disagree: find out which is wrong before changing either.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from _values import num, whole

from recnotebooks.config import preset
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.job_planner import FIXED_COMPONENTS, convergence_jobs, evaluate, plan_job
from recnotebooks.perf.mlperf_setup import MLPERF_SETUP
from recnotebooks.perf.servers import best_placement, model_of_record_servers
from recnotebooks.published.convergence import epochs_to_converge
from recnotebooks.published.mlperf_results import MLPERF_DCNV2_RESULTS
from recnotebooks.viz.architecture import MODEL_PARTS, model_parts, model_summary


# ----- notebook 01 §6: DLRM-DCNv2 beside DLRM v1 ---------------------------------------------------
def _shares(rows: list[dict[str, object]], model: str, column: str) -> dict[str, float]:
    return {str(r["part"]): num(r, column) for r in rows if r["model"] == model}


def test_01_the_tables_are_the_same_and_hold_almost_every_parameter() -> None:
    v1, dcn = model_summary("mlperf_v1"), model_summary("mlperf_dcnv2")
    assert v1["tables"] == dcn["tables"] == 26
    # "26.1 billion table parameters (105 GB in fp32), over 99.9% of either model's parameters"
    assert v1["table_parameters"] == dcn["table_parameters"]
    assert round(num(dcn, "table_parameters") / 1e9, 1) == 26.1
    assert round(num(dcn, "table_gb_fp32")) == 105
    rows = model_parts(["mlperf_v1", "mlperf_dcnv2"])
    for m in ("mlperf_v1", "mlperf_dcnv2"):
        assert _shares(rows, m, "parameter_share")[MODEL_PARTS["embedding"]] > 0.999


def test_01_eight_times_the_lookups_six_times_the_embedding_bytes() -> None:
    v1, dcn = model_summary("mlperf_v1"), model_summary("mlperf_dcnv2")
    # "8.2x the lookups: 214 per sample instead of 26"
    assert (v1["lookups_per_sample"], dcn["lookups_per_sample"]) == (26, 214)
    assert round(214 / 26, 1) == 8.2
    # "6.4x the embedding bytes per sample (344 kB instead of 53 kB)"
    b1, b2 = num(v1, "embedding_bytes_per_sample"), num(dcn, "embedding_bytes_per_sample")
    assert (round(b2 / 1e3), round(b1 / 1e3)) == (344, 53)
    assert round(b2 / b1, 1) == 6.4


def test_01_the_cross_layers_dominate_the_dense_compute() -> None:
    v1, dcn = model_summary("mlperf_v1"), model_summary("mlperf_dcnv2")
    cross = MODEL_PARTS["interaction"]
    # "they hold 10.6 M of the 16.0 M dense parameters (66%)"
    assert round(num(dcn, "cross_parameters") / 1e6, 1) == 10.6
    assert round(num(dcn, "dense_parameters") / 1e6, 1) == 16.0
    assert round(num(dcn, "cross_parameters") / num(dcn, "dense_parameters"), 2) == 0.66
    # "and do 66% of the 96 MFLOP of a sample, 6.5x DLRM v1's 15 MFLOP, of which the top MLP did 89%"
    rows = model_parts(["mlperf_v1", "mlperf_dcnv2"])
    dcn_flops, v1_flops = (
        _shares(rows, "mlperf_dcnv2", "flops_share"),
        _shares(rows, "mlperf_v1", "flops_share"),
    )
    assert round(dcn_flops[cross], 2) == 0.66 and max(dcn_flops, key=dcn_flops.__getitem__) == cross
    f1, f2 = num(v1, "flops_per_sample"), num(dcn, "flops_per_sample")
    assert (round(f2 / 1e6), round(f1 / 1e6), round(f2 / f1, 1)) == (96, 15, 6.5)
    assert round(v1_flops[MODEL_PARTS["top_mlp"]], 2) == 0.89
    # "The top MLP grows too (from 13 to 31 MFLOP): its input widens from 479 to 3,456"
    top = {
        m: _shares(rows, m, "flops_per_sample")[MODEL_PARTS["top_mlp"]] for m in ("mlperf_v1", "mlperf_dcnv2")
    }
    assert (round(top["mlperf_v1"] / 1e6), round(top["mlperf_dcnv2"] / 1e6)) == (13, 31)
    assert (v1["top_mlp_input"], dcn["top_mlp_input"]) == (479, 3456)
    # "The embedding lookups' adds stay under 0.1% of the FLOPs."
    assert dcn_flops[MODEL_PARTS["embedding"]] < 0.001
    # the chart draws the same numbers: each model's parts add up to its FLOPs per sample
    assert sum(_shares(rows, "mlperf_dcnv2", "flops_per_sample").values()) == pytest.approx(f2)


def test_01_the_small_sibling_splits_its_flops_the_same_way() -> None:
    small = preset("dcnv2_small")
    # "the 26 multi-hot tables (214 lookups per sample), 3 cross layers ... dim 16, rank 64"
    assert (small.num_tables, small.lookups_per_sample, small.dcn_layers) == (26, 214, 3)
    assert (small.embedding_dim, small.dcn_rank) == (16, 64)
    assert max(t.num_rows for t in small.tables) == 10_000
    # "so its FLOPs split as its big sibling's do (66% in the cross layers)"
    share = _shares(model_parts(["dcnv2_small"]), "dcnv2_small", "flops_share")[MODEL_PARTS["interaction"]]
    assert round(share, 2) == 0.66


# ----- notebook 01 §6: what a cross layer learns, the measured step read, DLRM vs DLRM-DCNv2 here ----
NOTEBOOK_01 = Path(__file__).resolve().parent.parent / "notebooks" / "01_dlrm_anatomy.ipynb"
#: The notebook's full setting (its parameters cell: ``DCN_STEPS = 10 if SMOKE else 150``).
DCN_STEPS = 150


def _notebook_01() -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(NOTEBOOK_01.read_text())["cells"])


def test_01_the_settings_are_the_notebooks() -> None:
    text = _notebook_01()
    assert f"DCN_STEPS = 10 if SMOKE else {DCN_STEPS}" in text
    assert "learn_planted_cross(pair=(0, 2), strength=2.0, samples=4096)" in text
    assert "compare_interactions(DCN_STEPS)" in text
    assert 'read_step(small_result.phases, how["batch_size"])' in text


def test_01_one_cross_layer_learns_the_planted_cross() -> None:
    from recnotebooks.nn.crosses import cross_degree, learn_planted_cross

    planted = learn_planted_cross(pair=(0, 2), strength=2.0, samples=4096)  # as the cell calls it
    # "puts a weight of about 2 on x1 x3, the planted cross, and under 0.1 on every other product"
    assert planted.name(*planted.pair) == "x1·x3" and abs(planted.planted - 2.0) < 0.1
    assert planted.largest_other < 0.1
    # "With it the model ranks fresh samples with AUC 0.79; a linear model ... stays at chance (0.49)"
    assert round(planted.auc, 2) == 0.79 and round(planted.linear_auc, 2) == 0.49
    assert abs(planted.linear_auc - 0.5) < 0.02
    # "after l layers the output holds products of up to l + 1 features (MLPerf's 3 layers: up to 4)"
    assert [cross_degree(layers) for layers in (1, 2, 3)] == [2, 3, 4]
    # "DLRM-DCNv2 does the same over 3,456 features at once, its W factored at rank 512"
    big = preset("mlperf_dcnv2")
    assert (big.interaction_output_dim, big.dcn_rank, big.dcn_layers) == (3456, 512, 3)


@pytest.mark.slow
def test_01_the_data_phase_is_one_of_the_two_largest_of_the_dcnv2_small_step() -> None:
    from recnotebooks.config import preset_training
    from recnotebooks.data import SyntheticCriteo
    from recnotebooks.measure.step import read_step
    from recnotebooks.nn import DLRM
    from recnotebooks.train import TrainConfig, Trainer

    small, how = preset("dcnv2_small"), preset_training("dcnv2_small")
    result = Trainer(  # the notebook's cell, at its full setting
        DLRM(small, seed=0),
        SyntheticCriteo(small, how["batch_size"], seed=0),
        SyntheticCriteo(small, how["batch_size"], seed=0, split="eval"),
        TrainConfig(
            steps=DCN_STEPS,
            sparse_optimizer=how["sparse_optimizer"],
            sparse_lr=how["sparse_lr"],
            dense_optimizer=how["dense_optimizer"],
            dense_lr=how["dense_lr"],
            eval_batches=4,
            progress=False,
        ),
        device="cpu",
    ).fit()
    reading = read_step(result.phases, how["batch_size"])
    text = reading.describe("dcnv2_small", result.reliability)
    # "512 samples x 214 lookups are 109,568 ids"
    assert how["batch_size"] * small.lookups_per_sample == 109_568
    if not result.reliable:  # a machine too busy to measure it: the page says so instead
        assert "NOT RELIABLE" in text
        return
    # "data is one of the step's two largest phases, between a quarter and a half of it ...; the other is
    # backward"
    assert set(list(reading.shares)[:2]) == {"data", "backward"}
    assert 0.25 <= reading.shares["data"] <= 0.5
    # "The last lines above give the step without it"
    assert f"the step would take {reading.without_data * 1e3:.1f} ms" in " ".join(text.split())


@pytest.mark.slow
def test_01_dlrm_and_dcnv2_are_too_close_to_call_on_this_data() -> None:
    from recnotebooks.measure.interaction_accuracy import compare_interactions

    versus = compare_interactions(DCN_STEPS)  # as the cell calls it
    # "both are scored on the same 8,192 held-out samples"
    assert versus.eval_samples == 8192
    # "the two AUCs differ by less than the sampling error of either one on these samples (about 0.007)"
    assert abs(versus.difference) < versus.standard_error and round(versus.standard_error, 3) == 0.007
    # "both models stay far below the teacher's 0.90"
    assert round(versus.teacher_auc, 2) == 0.90
    assert max(versus.auc.values()) < versus.teacher_auc - 0.1
    assert "too close to call" in " ".join(versus.takeaway().split())


# ----- notebook 05 §4: the model of record on today's servers ---------------------------------------
Servers = tuple[dict[str, dict[str, object]], list[dict[str, object]]]


@pytest.fixture(scope="module")
def servers() -> Servers:
    rows, parts = model_of_record_servers()  # as the notebook's cell calls it
    return {str(r["server"]): r for r in rows}, parts


TODAY = ("dgx_a100_80gb", "dgx_h100", "h200_node", "dgx_b200")


def test_05_its_tables_outgrow_big_basin(servers: Servers) -> None:
    rows, parts = servers
    # "the 26 tables take 209 GB, and one 40M-row table alone takes 41 GB, more than a whole V100's memory"
    assert round(num(rows["big_basin"], "tables_gb")) == 209
    cfg = preset("mlperf_dcnv2")
    largest = max(t.num_rows for t in cfg.tables) * cfg.embedding_dim * 4 * 2  # weights + one state each
    assert (
        round(largest / 1e9) == 41 and largest > hardware("zion").hbm_bytes > hardware("big_basin").hbm_bytes
    )
    # "On Zion (8 x 32 GB) that just fits: 27.7 GB on its fullest GPU."
    zion = rows["zion"]
    assert (zion["placement"], zion["plan"], zion["fits"]) == ("hbm", "MLPerf's", True)
    assert round(num(zion, "largest_device_gb"), 1) == 27.7 and num(zion, "largest_device_gb") > 0.8 * 32
    # "Big Basin (8 x 16 GB) cannot hold them, and HugeCTR keeps every table in HBM: trained with TorchRec,
    # it keeps 41% in HBM, 39% in host DRAM behind a GPU cache and 20% on a parameter server, and the
    # embedding lookups then take 60% of its step"
    bb = rows["big_basin"]
    assert (bb["placement"], bb["plan"], bb["parameter_servers"]) == ("hbm+cache+remote", "the planner's", 1)
    assert bb["software"] == "torchrec" and all(rows[s]["software"] == "hugectr" for s in ("zion", *TODAY))
    hugectr = best_placement(
        cfg, hardware("big_basin"), 8, 55_296, 0.9, dense_optimizer="adagrad", **MLPERF_SETUP
    )
    assert hugectr[0] == "hbm" and not hugectr[1].fits
    torchrec = {**MLPERF_SETUP, "implementation": "torchrec"}
    _, r = best_placement(cfg, hardware("big_basin"), 8, 55_296, 0.9, dense_optimizer="adagrad", **torchrec)
    assert r.step_time_overlap * 1e3 == pytest.approx(num(bb, "step_ms"))
    shares = {str(x["placement"]): round(num(x, "share"), 2) for x in r.table_placement() if x["bytes"]}
    assert shares == {"hbm": 0.41, "cache": 0.39, "remote": 0.20}
    mine = {
        str(p["phase"]): num(p, "seconds_per_step") for p in parts if str(p["server"]).startswith("big_basin")
    }
    assert round((mine["embedding_forward"] + mine["embedding_backward"]) / sum(mine.values()), 2) == 0.60
    # "Today's nodes (8 x 80 GB or more) hold them all in HBM with room to spare."
    for s in TODAY:
        assert (rows[s]["placement"], rows[s]["plan"], rows[s]["fits"]) == ("hbm", "MLPerf's", True), s
        assert hardware(s).hbm_bytes >= 80e9 and hardware(s).devices == 8
        assert num(rows[s], "largest_device_gb") < 0.7 * hardware(s).hbm_bytes / 1e9
    assert (hardware("big_basin").hbm_bytes, hardware("zion").hbm_bytes) == (16e9, 32e9)


def test_05_todays_nodes_are_faster_and_cheaper_per_sample(servers: Servers) -> None:
    rows, _ = servers

    def speed(over: str) -> dict[str, float]:
        return {s: num(r, "throughput") / num(rows[over], "throughput") for s, r in rows.items()}

    bb, zion = speed("big_basin"), speed("zion")
    # "They run 8.4x (A100 80 GB) to 32x (B200) Big Basin's samples per second and 2.3x to 8.8x Zion's,
    # newer GPUs faster"
    assert (round(bb["dgx_a100_80gb"], 1), round(bb["dgx_b200"])) == (8.4, 32)
    assert (round(zion["dgx_a100_80gb"], 1), round(zion["dgx_b200"], 1)) == (2.3, 8.8)
    assert [bb[s] for s in TODAY] == sorted(bb[s] for s in TODAY)
    # "the order in which MLPerf's published single-node results rank them too"
    published = {}
    for key, name in (("A100", "dgx_a100_80gb"), ("H100-SXM", "dgx_h100"), ("H200", "h200_node"),
                      ("B200", "dgx_b200")):  # fmt: skip
        runs = [r.samples_per_s for r in MLPERF_DCNV2_RESULTS
                if key in r.accelerator and r.nodes == 1 and r.accelerators_per_node == 8]  # fmt: skip
        assert runs, key
        published[name] = statistics.median(runs)
    assert [published[s] for s in TODAY] == sorted(published.values())
    # "a billion samples cost USD 9.2 on Big Basin, USD 2.9 on Zion and USD 1.4 (B200) to USD 2.1 (H100) on
    # today's nodes"
    cost = {s: num(r, "usd_per_billion_samples") for s, r in rows.items()}
    assert (round(cost["big_basin"], 1), round(cost["zion"], 1)) == (9.2, 2.9)
    today = {s: cost[s] for s in TODAY}
    assert min(today, key=today.__getitem__) == "dgx_b200" and max(today, key=today.__getitem__) == "dgx_h100"
    assert (round(today["dgx_b200"], 1), round(today["dgx_h100"], 1)) == (1.4, 2.1)
    assert max(today.values()) < cost["zion"] < cost["big_basin"]
    # "A newer GPU costs more per hour": the list prices rise with the generation
    assert [hardware(s).price_per_hour for s in TODAY] == sorted(hardware(s).price_per_hour for s in TODAY)
    # "and the B200 node trains the most samples per joule"
    joules = {s: num(r, "samples_per_joule") for s, r in rows.items()}
    assert max(joules, key=joules.__getitem__) == "dgx_b200"


# ----- notebook 06 §5: time to train to MLPerf's target -----------------------------------------
Curve = dict[tuple[int, int], dict[str, object]]


@pytest.fixture(scope="module")
def curve() -> Curve:
    rows = convergence_jobs(model="mlperf_dcnv2", hardware="dgx_h100", layouts=((1, 8), (8, 8)))  # the cell's
    return {(whole(r, "devices"), whole(r, "global_batch")): r for r in rows}


def _column(curve: Curve, devices: int, key: str) -> dict[int, float]:
    return {b: num(r, key) for (d, b), r in curve.items() if d == devices}


def _parts_ms(row: dict[str, object]) -> float:
    """The slowest rank's parts of a step added up, before overlap, as cell 12 prints them."""
    return num(row, "fixed_ms") / num(row, "fixed_share")


def test_06_a_bigger_batch_runs_more_samples_per_second(curve: Curve) -> None:
    # "On both layouts the samples per second grow along the whole curve (modeled), because part of a step
    # does not grow with the batch: the all-reduce and update of the dense weights (fixed_ms)"
    assert FIXED_COMPONENTS == ("overhead", "all_reduce", "dense_optimizer")
    for devices in (8, 64):
        speed, fixed = _column(curve, devices, "samples_per_s"), _column(curve, devices, "fixed_ms")
        assert list(speed.values()) == sorted(speed.values()), devices
        assert max(fixed.values()) == pytest.approx(min(fixed.values())) and min(fixed.values()) > 0


def test_06_but_it_needs_more_samples(curve: Curve) -> None:
    # "0.71 epochs at 32,768 and 0.96 at 160,000: 1.36x as many (published)"
    epochs = _column(curve, 8, "epochs")
    lo, hi = epochs[32_768], epochs[160_000]
    assert (round(lo, 2), round(hi, 2), round(hi / lo, 2)) == (0.71, 0.96, 1.36)
    assert list(epochs.values()) == sorted(epochs.values())
    assert _column(curve, 64, "epochs")[55_296] == epochs_to_converge(55_296)


def test_06_which_wins_depends_on_the_fixed_part(curve: Curve) -> None:
    one, eight = curve[(8, 32_768)], curve[(64, 32_768)]
    # "On one node it is 0.6 ms at 32,768: 17% of the 3.5 ms the step's parts add up to (the table's parts;
    # overlapped, as HugeCTR runs them, they take the 2.64 ms of its step)": the cell prints
    # parts = fixed_ms / fixed_share and step = step_ms
    assert (round(num(one, "fixed_ms"), 1), round(num(one, "fixed_share"), 2)) == (0.6, 0.17)
    assert (round(_parts_ms(one), 1), round(num(one, "step_ms"), 2)) == (3.5, 2.64)
    # "the samples per second grow only 1.15x, less than the epochs, and the time to train grows 20% (4.6 to
    # 5.5 minutes, modeled). The smallest batch trains fastest, and 55,296 ... within 2% of it."
    speed, minutes = _column(curve, 8, "samples_per_s"), _column(curve, 8, "minutes")
    epochs = _column(curve, 8, "epochs")
    assert round(speed[160_000] / speed[32_768], 2) == 1.15 < epochs[160_000] / epochs[32_768]
    assert round(minutes[160_000] / minutes[32_768] - 1, 2) == 0.20
    assert (round(minutes[32_768], 1), round(minutes[160_000], 1)) == (4.6, 5.5)
    assert min(minutes, key=minutes.__getitem__) == 32_768 and minutes[55_296] / minutes[32_768] < 1.02
    # "On 8 nodes ... the fixed part is 1.0 ms at 32,768: 54% of the 1.9 ms the parts add up to, and 85% as
    # long as the 1.19 ms they take overlapped"
    assert (round(num(eight, "fixed_ms"), 1), round(num(eight, "fixed_share"), 2)) == (1.0, 0.54)
    assert (round(_parts_ms(eight), 1), round(num(eight, "step_ms"), 2)) == (1.9, 1.19)
    assert round(num(eight, "fixed_ms") / num(eight, "step_ms"), 2) == 0.85
    # the share is of the parts added up (the slowest rank's components, summed), not of the overlapped step
    from recnotebooks.perf.cost import estimate
    from recnotebooks.perf.hardware import hardware
    from recnotebooks.perf.job_planner import job_model
    from recnotebooks.perf.mlperf_plan import mlperf_plan
    from recnotebooks.perf.mlperf_setup import MLPERF_SETUP

    config, hw = job_model("mlperf_dcnv2"), hardware("dgx_h100")
    r = estimate(
        config,
        hw,
        batch_size=32_768,
        gpus=8,
        nodes=8,
        plan=mlperf_plan(config, 8, 8, hw.hbm_bytes),
        **MLPERF_SETUP,
    )
    assert _parts_ms(eight) == pytest.approx(max(sum(c.values()) for c in r.per_rank) * 1e3, rel=1e-9)
    assert num(eight, "step_ms") == pytest.approx(r.step_time_overlap * 1e3, rel=1e-9)
    assert _parts_ms(eight) > num(eight, "step_ms") and _parts_ms(one) > num(one, "step_ms")
    assert num(eight, "fixed_ms") > num(one, "fixed_ms")  # the all-reduce across nodes: the larger part
    # "the samples per second grow 2.19x, more than the epochs, and the time to train falls 36% to its
    # least at 102,400; 135,168, where NVIDIA trains 8 nodes, is within 2% of it"
    speed, minutes = _column(curve, 64, "samples_per_s"), _column(curve, 64, "minutes")
    assert round(speed[160_000] / speed[32_768], 2) == 2.19 > epochs[160_000] / epochs[32_768]
    best = min(minutes, key=minutes.__getitem__)
    assert best == 102_400 and minutes[135_168] / minutes[best] - 1 < 0.02
    assert round(1 - minutes[best] / minutes[32_768], 2) == 0.36
    # "where NVIDIA trains one node" / "where NVIDIA trains 8 nodes": NVIDIA's H100 submissions' batches
    nv = {(r.nodes, r.global_batch_size) for r in MLPERF_DCNV2_RESULTS
          if r.submitter == "NVIDIA" and "H100-SXM" in r.accelerator and r.nodes in (1, 8)}  # fmt: skip
    assert nv == {(1, 55_296), (8, 135_168)}


def test_06_beside_the_published_runs(curve: Curve) -> None:
    # "NVIDIA's v4.0 runs on DGX H100 took 3.8 minutes on 8 GPUs (batch 55,296) and 1.3 on 64 (batch
    # 135,168); the model says 4.7 and 1.3: 1.2x and 1.0x the published time"
    nv = {(r.nodes * r.accelerators_per_node, r.global_batch_size): float(r.olympic_minutes)
          for r in MLPERF_DCNV2_RESULTS
          if r.round == "v4.0" and r.submitter == "NVIDIA" and "H100-SXM" in r.accelerator}  # fmt: skip
    published = (nv[(8, 55_296)], nv[(64, 135_168)])
    modeled = (num(curve[(8, 55_296)], "minutes"), num(curve[(64, 135_168)], "minutes"))
    assert tuple(round(x, 1) for x in published) == (3.8, 1.3)
    assert tuple(round(x, 1) for x in modeled) == (4.7, 1.3)
    ratios = tuple(round(m / p, 1) for m, p in zip(modeled, published, strict=True))
    assert ratios == (1.2, 1.0)


def test_06_the_planner_starts_the_model_of_record_as_mlperf_runs_it_and_torchrec_takes_longer(
    curve: Curve,
) -> None:
    # "The planner above starts this model the same way (software HugeCTR, sharding `mlperf`, AMP fp16),
    # so on one DGX H100 node at a batch of the curve its step is `convergence_jobs`' own. Switch its
    # software to TorchRec and the same plan in the same precision takes 2.9x as long at a global batch
    # of 65,536 (4.0x at 32,768)"
    from recnotebooks.perf.job_planner import evaluate

    ratios = {}
    for batch in (32_768, 65_536):
        o = evaluate(model="mlperf_dcnv2", epochs="to_target", batch_size=batch)
        assert (o.values["software"], o.values["strategy"], o.values["dtype"]) == (
            "hugectr",
            "mlperf",
            "amp_fp16",
        )
        assert (o.values["hardware"], o.values["nodes"], o.values["gpus"]) == ("dgx_h100", 1, 8)
        assert o.job is not None and o.job.step_time_s * 1e3 == pytest.approx(
            curve[(8, batch)]["step_ms"], rel=1e-12
        )
        eager = evaluate(model="mlperf_dcnv2", epochs="to_target", batch_size=batch, software="torchrec")
        assert eager.values["dtype"] == "amp_fp16" and eager.values["strategy"] == "mlperf"
        assert eager.job is not None
        ratios[batch] = eager.job.hours / o.job.hours
    assert (round(ratios[65_536], 1), round(ratios[32_768], 1)) == (2.9, 4.0)


def test_06_a_batch_off_the_curve_is_refused_and_the_planner_names_the_nearest() -> None:
    with pytest.raises(ValueError, match="convergence curve") as err:
        epochs_to_converge(262_144)
    job = plan_job(model="mlperf_dcnv2", epochs="to_target", nodes=1, gpus=8, batch_size=262_144)
    assert job.now.problem == str(err.value) and not job.now.feasible
    assert job.near is not None and job.near.feasible
    # "names the nearest feasible setting: the cheapest batch on the curve, 32,768 with HugeCTR on one node"
    assert job.near.values["software"] == "hugectr" and (
        job.near.values["nodes"],
        job.near.values["gpus"],
    ) == (1, 8)
    assert job.near_sentence == "nearest feasible: batch_size 262144→32768"
    on_curve = [b for b in (2**i for i in range(12, 19)) if 32_768 <= b <= 160_000]
    costs = {
        b: evaluate(model="mlperf_dcnv2", epochs="to_target", batch_size=b).job.cost_usd for b in on_curve
    }
    assert min(costs, key=costs.__getitem__) == 32_768
