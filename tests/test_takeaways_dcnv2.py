"""The model of record (MLPerf's DLRM-DCNv2) in notebooks 01 §6, 05 §4 and 06 §5: every sentence that
states a finding, asserted on the numbers the notebook computes.

Each test calls the library exactly as its notebook cell does and checks the sentence's claim (its
direction, and the rounded figures the text quotes). When a test fails, the model and the sentence
disagree: find out which is wrong before changing either.
"""

from __future__ import annotations

import statistics

import pytest

from recnotebooks.config import preset
from recnotebooks.perf.convergence import epochs_to_converge
from recnotebooks.perf.explore import model_of_record_servers
from recnotebooks.perf.job_planner import FIXED_COMPONENTS, convergence_jobs, plan_job
from recnotebooks.perf.mlperf import MLPERF_DCNV2_RESULTS
from recnotebooks.viz.architecture import MODEL_PARTS, model_parts, model_summary


# ----- notebook 01 §6: DLRM-DCNv2 beside DLRM v1 ---------------------------------------------------
def _shares(rows: list[dict[str, object]], model: str, column: str) -> dict[str, float]:
    return {str(r["part"]): float(r[column]) for r in rows if r["model"] == model}  # type: ignore[arg-type]


def test_01_the_tables_are_the_same_and_hold_almost_every_parameter() -> None:
    v1, dcn = model_summary("mlperf_v1"), model_summary("mlperf_dcnv2")
    assert v1["tables"] == dcn["tables"] == 26
    # "26.1 billion table parameters (105 GB in fp32), over 99.9% of either model's parameters"
    assert v1["table_parameters"] == dcn["table_parameters"]
    assert round(float(dcn["table_parameters"]) / 1e9, 1) == 26.1  # type: ignore[arg-type]
    assert round(float(dcn["table_gb_fp32"])) == 105  # type: ignore[arg-type]
    rows = model_parts(["mlperf_v1", "mlperf_dcnv2"])
    for m in ("mlperf_v1", "mlperf_dcnv2"):
        assert _shares(rows, m, "parameter_share")[MODEL_PARTS["embedding"]] > 0.999


def test_01_eight_times_the_lookups_six_times_the_embedding_bytes() -> None:
    v1, dcn = model_summary("mlperf_v1"), model_summary("mlperf_dcnv2")
    # "8.2x the lookups: 214 per sample instead of 26"
    assert (v1["lookups_per_sample"], dcn["lookups_per_sample"]) == (26, 214)
    assert round(214 / 26, 1) == 8.2
    # "6.4x the embedding bytes per sample (344 kB instead of 53 kB)"
    b1, b2 = float(v1["embedding_bytes_per_sample"]), float(dcn["embedding_bytes_per_sample"])  # type: ignore[arg-type]
    assert (round(b2 / 1e3), round(b1 / 1e3)) == (344, 53)
    assert round(b2 / b1, 1) == 6.4


def test_01_the_cross_layers_dominate_the_dense_compute() -> None:
    v1, dcn = model_summary("mlperf_v1"), model_summary("mlperf_dcnv2")
    cross = MODEL_PARTS["interaction"]
    # "they hold 10.6 M of the 16.0 M dense parameters (66%)"
    assert round(float(dcn["cross_parameters"]) / 1e6, 1) == 10.6  # type: ignore[arg-type]
    assert round(float(dcn["dense_parameters"]) / 1e6, 1) == 16.0  # type: ignore[arg-type]
    assert round(float(dcn["cross_parameters"]) / float(dcn["dense_parameters"]), 2) == 0.66  # type: ignore[arg-type]
    # "and do 66% of the 96 MFLOP of a sample, 6.5x DLRM v1's 15 MFLOP, of which the top MLP did 89%"
    rows = model_parts(["mlperf_v1", "mlperf_dcnv2"])
    dcn_flops, v1_flops = (
        _shares(rows, "mlperf_dcnv2", "flops_share"),
        _shares(rows, "mlperf_v1", "flops_share"),
    )
    assert round(dcn_flops[cross], 2) == 0.66 and max(dcn_flops, key=dcn_flops.__getitem__) == cross
    f1, f2 = float(v1["flops_per_sample"]), float(dcn["flops_per_sample"])  # type: ignore[arg-type]
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


# ----- notebook 05 §4: the model of record on today's servers ---------------------------------------
@pytest.fixture(scope="module")
def servers() -> tuple[dict[str, dict[str, object]], list[dict[str, object]]]:
    rows, parts = model_of_record_servers()  # as the notebook's cell calls it
    return {str(r["server"]): r for r in rows}, parts


TODAY = ("dgx_a100_80gb", "dgx_h100", "h200_node", "dgx_b200")


def test_05_its_tables_leave_the_old_servers_hbm(servers) -> None:  # type: ignore[no-untyped-def]
    rows, parts = servers
    # "the 26 tables take 209 GB, and one 40M-row table alone takes 41 GB, more than a whole V100's memory"
    assert round(float(rows["big_basin"]["tables_gb"])) == 209  # type: ignore[arg-type]
    cfg = preset("mlperf_dcnv2")
    largest = max(t.num_rows for t in cfg.tables) * cfg.embedding_dim * 4 * 2  # weights + one state each
    assert round(largest / 1e9) == 41 and largest > 32e9
    # "Big Basin (8 x 16 GB) keeps 41% of them in HBM, 39% in host DRAM behind a GPU cache and 20% on a
    # parameter server"
    from recnotebooks.perf.explore import best_placement
    from recnotebooks.perf.hardware import hardware

    def shares(server: str) -> dict[str, float]:
        _, r = best_placement(
            cfg, hardware(server), 8, 55_296, sparse_optimizer="adagrad", dense_optimizer="adagrad"
        )
        assert r.step_time * 1e3 == pytest.approx(float(rows[server]["step_ms"]))  # type: ignore[arg-type]
        return {str(x["placement"]): round(float(x["share"]), 2) for x in r.table_placement() if x["bytes"]}  # type: ignore[arg-type]

    assert (
        rows["big_basin"]["placement"] == "hbm+cache+remote" and rows["big_basin"]["parameter_servers"] == 1
    )
    assert shares("big_basin") == {"hbm": 0.41, "cache": 0.39, "remote": 0.20}

    # "its embedding work then takes more of its step than on any other node"
    def embedding_share(server: str) -> float:
        ms = sum(float(p["seconds_per_step"]) * 1e3 for p in parts  # type: ignore[arg-type]
                 if p["server"] == server and str(p["phase"]).startswith("embedding"))  # fmt: skip
        return ms / float(rows[server]["step_ms"])  # type: ignore[arg-type]

    emb = {s: embedding_share(s) for s in rows}
    assert max(emb, key=emb.__getitem__) == "big_basin"
    # "Zion (8 x 32 GB) keeps 80% in HBM and the rest in its own DRAM"
    assert rows["zion"]["placement"] == "hbm+host" and shares("zion") == {"hbm": 0.80, "host": 0.20}
    # "Each of today's nodes (8 x 80 GB or more) keeps all of them in HBM."
    for s in TODAY:
        assert rows[s]["placement"] == "hbm" and rows[s]["fits"], s
        assert hardware(s).hbm_bytes >= 80e9 and hardware(s).devices == 8
    assert (hardware("big_basin").hbm_bytes, hardware("zion").hbm_bytes) == (16e9, 32e9)


def test_05_todays_nodes_are_faster_not_cheaper_per_sample(servers) -> None:  # type: ignore[no-untyped-def]
    rows, _ = servers
    speed = {s: float(r["throughput"]) / float(rows["big_basin"]["throughput"]) for s, r in rows.items()}  # type: ignore[arg-type]
    # "They run 1.8x (A100 80 GB) to 5.1x (B200) Big Basin's samples per second, newer GPUs faster"
    assert round(speed["dgx_a100_80gb"], 1) == 1.8 and round(speed["dgx_b200"], 1) == 5.1
    assert [speed[s] for s in TODAY] == sorted(speed[s] for s in TODAY)
    assert min(speed[s] for s in TODAY) == speed["dgx_a100_80gb"]
    # "the order in which MLPerf's published single-node results rank them too"
    published = {}
    for key, name in (
        ("A100", "dgx_a100_80gb"),
        ("H100-SXM", "dgx_h100"),
        ("H200", "h200_node"),
        ("B200", "dgx_b200"),
    ):
        runs = [r.samples_per_s for r in MLPERF_DCNV2_RESULTS
                if key in r.accelerator and r.nodes == 1 and r.accelerators_per_node == 8]  # fmt: skip
        assert runs, key
        published[name] = statistics.median(runs)
    assert [published[s] for s in TODAY] == sorted(published.values())
    # "a billion samples cost between $13 and $17 on every node here"
    cost = [float(r["usd_per_billion_samples"]) for r in rows.values()]  # type: ignore[arg-type]
    assert min(cost) >= 13 and max(cost) <= 17


# ----- notebook 06 §5: time to train to MLPerf's target -----------------------------------------
@pytest.fixture(scope="module")
def curve() -> dict[tuple[int, int], dict[str, object]]:
    rows = convergence_jobs(
        model="mlperf_dcnv2", hardware="dgx_h100", layouts=((1, 8), (8, 8))
    )  # as the cell
    return {(int(r["devices"]), int(r["global_batch"])): r for r in rows}  # type: ignore[call-overload]


def test_06_a_bigger_batch_runs_more_samples_per_second(curve) -> None:  # type: ignore[no-untyped-def]
    lo, hi = curve[(8, 32_768)], curve[(8, 160_000)]
    # "4.9x the samples take 3.4x the step time: 1.45x the samples per second (modeled)"
    assert round(160_000 / 32_768, 1) == 4.9
    assert round(float(hi["step_ms"]) / float(lo["step_ms"]), 1) == 3.4  # type: ignore[arg-type]
    assert round(float(hi["samples_per_s"]) / float(lo["samples_per_s"]), 2) == 1.45  # type: ignore[arg-type]
    for devices in (8, 64):  # the samples per second grow along the whole curve, on both layouts
        speeds = [float(r["samples_per_s"]) for (d, _), r in sorted(curve.items()) if d == devices]  # type: ignore[arg-type]
        assert speeds == sorted(speeds)
    # "the costs of a step that do not grow with the batch ... 7.1 ms ... 36% of the step at 32,768 and 11%
    # at 160,000"
    assert FIXED_COMPONENTS == ("overhead", "all_reduce", "dense_optimizer")
    assert float(lo["fixed_ms"]) == pytest.approx(float(hi["fixed_ms"]))  # type: ignore[arg-type]
    assert round(float(lo["fixed_ms"]), 1) == 7.1  # type: ignore[arg-type]
    assert round(float(lo["fixed_ms"]) / float(lo["step_ms"]), 2) == 0.36  # type: ignore[arg-type]
    assert round(float(hi["fixed_ms"]) / float(hi["step_ms"]), 2) == 0.11  # type: ignore[arg-type]


def test_06_but_it_needs_more_samples(curve) -> None:  # type: ignore[no-untyped-def]
    # "0.71 epochs at 32,768 and 0.96 at 160,000: 1.36x as many (published)"
    lo, hi = float(curve[(8, 32_768)]["epochs"]), float(curve[(8, 160_000)]["epochs"])  # type: ignore[arg-type]
    assert (round(lo, 2), round(hi, 2), round(hi / lo, 2)) == (0.71, 0.96, 1.36)
    epochs = [float(r["epochs"]) for (d, _), r in sorted(curve.items()) if d == 8]  # type: ignore[arg-type]
    assert epochs == sorted(epochs)
    assert float(curve[(64, 55_296)]["epochs"]) == epochs_to_converge(55_296)  # type: ignore[arg-type]


def test_06_the_two_nearly_cancel(curve) -> None:  # type: ignore[no-untyped-def]
    def minutes(devices: int) -> dict[int, float]:
        return {b: float(r["minutes"]) for (d, b), r in curve.items() if d == devices}  # type: ignore[arg-type]

    eight, sixty_four = minutes(8), minutes(64)
    # "On 8 GPUs the modeled time to train varies by less than 15% over the whole curve, least at 65,536 to
    # 102,400, most at the smallest batch"
    assert max(eight.values()) / min(eight.values()) < 1.15
    assert min(eight, key=eight.__getitem__) in (65_536, 102_400)
    assert max(eight, key=eight.__getitem__) == 32_768
    # "on 64 GPUs the smallest batch loses more (26% slower than the best)"
    assert max(sixty_four, key=sixty_four.__getitem__) == 32_768
    assert round(sixty_four[32_768] / min(sixty_four.values()) - 1, 2) == 0.26
    assert sixty_four[32_768] / min(sixty_four.values()) > eight[32_768] / min(eight.values())


def test_06_read_the_minutes_as_directions(curve) -> None:  # type: ignore[no-untyped-def]
    # "it has the all-to-all across nodes bound every 64-GPU step and puts 64 GPUs behind 8"
    for (devices, batch), r in curve.items():
        if devices == 64:
            assert r["bound_by"] == "all_to_all", batch
            assert float(r["minutes"]) > float(curve[(8, batch)]["minutes"])  # type: ignore[arg-type]
    # "NVIDIA's published v3.0 runs on DGX H100 took 4.2 minutes on 8 GPUs (batch 55,296) and 1.8 on 64
    # (batch 135,168)"
    nv = {(r.nodes * r.accelerators_per_node, r.global_batch_size): r for r in MLPERF_DCNV2_RESULTS
          if r.round == "v3.0" and r.submitter == "NVIDIA" and "H100-SXM" in r.accelerator}  # fmt: skip
    one, eight = nv[(8, 55_296)], nv[(64, 135_168)]
    assert (round(float(one.olympic_minutes), 1), round(float(eight.olympic_minutes), 1)) == (4.2, 1.8)  # type: ignore[arg-type]
    # "even on 8 GPUs it models 6.5x the published time"
    assert round(float(curve[(8, 55_296)]["minutes"]) / float(one.olympic_minutes), 1) == 6.5  # type: ignore[arg-type]


def test_06_a_batch_off_the_curve_is_refused_and_the_planner_names_the_nearest() -> None:
    with pytest.raises(ValueError, match="convergence curve") as err:
        epochs_to_converge(262_144)
    job = plan_job(model="mlperf_dcnv2", epochs="to_target", nodes=1, gpus=8, batch_size=262_144)
    assert job.now.problem == str(err.value) and not job.now.feasible
    assert job.near is not None and job.near.feasible
    assert job.near_sentence == "nearest feasible: batch_size 262144→65536"
