"""The seed paper's efficiency trends (Acun et al., HPCA 2021), as properties of the cost model.

Numbers the model gives at the time of writing are in the comments; each test states the
trend, not the number.
"""

from __future__ import annotations

import pytest

from recnotebooks.config import DLRMConfig, TableConfig, preset
from recnotebooks.perf.compare import compare_published
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import GB, HARDWARE
from recnotebooks.perf.mlperf_setup import PUBLISHED_RUNS


def strictly_decreasing(xs: list[float]) -> bool:
    return all(a > b for a, b in zip(xs, xs[1:], strict=False))


def strictly_increasing(xs: list[float]) -> bool:
    return all(a < b for a, b in zip(xs, xs[1:], strict=False))


# ----- GPU vs CPU by model class ---------------------------------------------------------------
def gpu_over_cpu(name: str) -> float:
    """Throughput of one Big Basin V100 over one CPU trainer, batch 4096."""
    cfg = preset(name)
    gpu = estimate(cfg, "big_basin", batch_size=4096)
    cpu = estimate(cfg, "cpu_cluster", batch_size=4096)
    assert gpu.fits and cpu.fits
    return gpu.throughput / cpu.throughput


@pytest.mark.parametrize(
    "other",
    [
        "rm1",  # rm3 3.2x vs rm1 2.2x and rm2 3.0x (with last-level-cache hits of hot rows)
        "rm2",
    ],
)  # fmt: skip
def test_gpu_advantage_is_largest_for_mlp_heavy_rm3(other: str) -> None:
    assert gpu_over_cpu("rm3") > gpu_over_cpu(other)


# ----- FLOP efficiency on one A100 -------------------------------------------------------------
def kaggle_like(num_tables: int = 26, pooling: float = 20.0, width: int | None = None) -> DLRMConfig:
    """criteo_kaggle's MLPs and dot interaction over uniform 1M-row tables."""
    cfg = preset("criteo_kaggle")
    tables = tuple(TableConfig(f"T{i}", 1_000_000, pooling) for i in range(num_tables))
    if width is not None:
        cfg = cfg.replace(bottom_mlp=(width, width // 2, 16), top_mlp=(width, width // 2, 1))
    return cfg.replace(tables=tables, name="kaggle_like")


def efficiency(cfg: DLRMConfig, batch: int = 16384) -> float:
    return estimate(cfg, "dgx_a100", batch_size=batch).flops_efficiency


def test_more_tables_cost_throughput_and_efficiency_until_the_pairs_take_over() -> None:
    """At pooling 20, batch 16384: every table adds row traffic, so throughput always falls.
    FLOP/s efficiency falls too while the lookups dominate (with a cat interaction over all
    of 4..64 tables: 0.198 ... 0.149). With the dot interaction the top MLP's input has one
    value per pair of features, ``F(F-1)/2``: its FLOPs grow with the square of the table
    count while the lookups grow linearly, so past 16 tables efficiency rises again
    (0.180, 0.164, 0.150, 0.155, 0.199), the effect notebook 02 §2 shows at one lookup."""
    counts = (4, 8, 16, 32, 64)
    dot = [estimate(kaggle_like(num_tables=n), "dgx_a100", batch_size=16384) for n in counts]
    assert strictly_decreasing([r.throughput for r in dot])
    assert strictly_decreasing([r.flops_efficiency for r in dot[:3]])
    assert dot[-1].flops_efficiency > dot[2].flops_efficiency
    cat = [efficiency(kaggle_like(num_tables=n).replace(interaction="cat")) for n in counts]
    assert strictly_decreasing(cat), cat
    pairs = [kaggle_like(num_tables=n).interaction_output_dim - 16 for n in counts]
    assert pairs == [(n + 1) * n // 2 for n in counts]  # F(F-1)/2 with F = n + 1


def test_efficiency_falls_with_more_pooling() -> None:
    effs = [efficiency(kaggle_like(pooling=p)) for p in (1, 5, 20, 80)]  # 0.216 ... 0.061
    assert strictly_decreasing(effs), effs
    assert effs[-1] < 0.5 * effs[0]


def test_efficiency_rises_with_mlp_width() -> None:
    effs = [efficiency(kaggle_like(width=w)) for w in (64, 256, 1024, 4096)]  # 0.015 ... 0.68
    assert strictly_increasing(effs), effs
    assert effs[-1] > 10 * effs[0]


def test_efficiency_rises_with_batch_size() -> None:
    effs = [efficiency(kaggle_like(), batch=b) for b in (1024, 4096, 16384, 65536)]  # 0.034 ... 0.156
    assert strictly_increasing(effs), effs


# ----- where the tables live -------------------------------------------------------------------
def test_host_tables_cost_far_more_and_a_cache_recovers_most() -> None:
    cfg = preset("rm1")
    hbm = estimate(cfg, "dgx_a100", batch_size=4096, placement="hbm")
    host = estimate(cfg, "dgx_a100", batch_size=4096, placement="host")
    cache = estimate(cfg, "dgx_a100", batch_size=4096, placement="cache", cache_hit_rate=0.95)
    assert hbm.fits and host.fits and cache.fits
    assert host.step_time >= 3 * hbm.step_time  # 172 ms vs 6.5 ms
    recovered = (host.step_time - cache.step_time) / (host.step_time - hbm.step_time)
    assert recovered >= 0.8  # 0.99
    assert hbm.step_time < cache.step_time < host.step_time


# ----- communication ---------------------------------------------------------------------------
def all_to_all_share(name: str, gpus: int, nodes: int = 1) -> float:
    r = estimate(preset(name), "dgx_a100", batch_size=2048 * gpus * nodes, gpus=gpus, nodes=nodes)
    b = r.breakdown()
    return b["all_to_all"] / sum(b.values())


@pytest.mark.parametrize("name", ["criteo_terabyte", "mlperf_v1"])
def test_all_to_all_share_grows_with_gpu_count(name: str) -> None:
    shares = [all_to_all_share(name, g) for g in (2, 4, 8)]  # terabyte 0.021, 0.055, 0.110
    assert strictly_increasing(shares), shares


def all_to_all_seconds(gpus: int, nodes: int, hw_name: str = "dgx_a100", **changes: float) -> float:
    hw = HARDWARE[hw_name].replace(**changes) if changes else HARDWARE[hw_name]
    r = estimate(preset("criteo_terabyte"), hw, batch_size=2048 * 8, gpus=gpus, nodes=nodes)
    return max(c["all_to_all"] for c in r.per_rank)


def test_all_to_all_drops_sharply_from_network_to_nvlink() -> None:
    assert all_to_all_seconds(1, 8) >= 5 * all_to_all_seconds(8, 1)


def test_all_to_all_across_one_nic_nodes_is_much_slower() -> None:
    # the same comparison where a node's network is one 200 Gb/s NIC (what one A100 has in a DGX)
    one_nic = all_to_all_seconds(1, 8, nic_bw=25 * GB)
    assert one_nic >= 5 * all_to_all_seconds(8, 1)  # 7.3x


# ----- published throughputs on real GPUs (recnotebooks.perf.published) ------------------------
RUNS = {r.label: r for r in PUBLISHED_RUNS}
COMPARED = {row["run"]: row for row in compare_published()}


def test_published_figures_are_the_cited_ones() -> None:
    # As each run's source cites: TorchRec 204,800 and 925,696 samples/s; NVIDIA 494k FP32, 875k AMP; the DLRM
    # paper's 1000 batches in 62 s (V100) and 256 s (dual Xeon 6138). The TorchRec README's tables
    # are 91.10 GB.
    got = {
        (r.gpus, r.batch_size, r.dtype): r.samples_per_s
        for r in PUBLISHED_RUNS
        if r.label.startswith("TorchRec 8")
    }
    assert got == {(8, 2048, "fp32"): 204_800.0, (8, 16384, "fp32"): 925_696.0}
    assert sorted(r.samples_per_s for r in PUBLISHED_RUNS if r.label.startswith("NVIDIA")) == [
        494_000.0,
        875_000.0,
    ]
    paper = sorted(
        1000 * r.batch_size / r.samples_per_s for r in PUBLISHED_RUNS if r.label.startswith("DLRM")
    )
    assert paper == pytest.approx([62.0, 256.0])
    cfg = RUNS["TorchRec README 8xA100 @2k"].config()
    assert cfg.sparse_parameters * 4 == pytest.approx(91.10e9, rel=1e-3)


def test_8gpu_throughput_grows_sublinearly_with_batch() -> None:
    small, large = COMPARED["TorchRec 8xA100 @2k"], COMPARED["TorchRec 8xA100 @16k"]
    ratio = large["modeled"] / small["modeled"]  # 5.08
    assert 1 < ratio < 8
    published = large["published"] / small["published"]  # 4.52
    assert published / 2 <= ratio <= published * 2


@pytest.mark.parametrize(
    "label", [label for label in RUNS if label.startswith(("TorchRec", "NVIDIA 1xV100 FP32"))]
)
def test_model_is_within_2x_of_published_fp32_gpu_runs(label: str) -> None:
    # TorchRec: 1.58, 1.78 (TorchRec project), 0.91, 1.15, 1.04, 0.60 (README); NVIDIA FP32 1.06. The
    # README's batch-65,536 run is the weakest: the model is bound by fp32 top-MLP GEMMs there.
    row = COMPARED[label]
    assert row["fits"]
    assert 1 / 2 <= row["ratio"] <= 2


def test_known_misses_err_on_the_side_their_notes_give() -> None:
    # Mixed precision, priced as AMP (amp_fp16: fp32 tables and master weights, casts, loss
    # scaling), is still too fast (1.82x; 2.30x as pure fp16); so is today's DLRM against the
    # DLRM paper's early Caffe2 run (6.0x GPU, 9.6x CPU), but the GPU still wins, as published.
    assert COMPARED["NVIDIA 1xV100 AMP @32k"]["ratio"] > 1
    gpu, cpu = COMPARED["DLRM paper 1xV100 @2k"], COMPARED["DLRM paper 2xXeon 6138 @2k"]
    assert gpu["ratio"] > 1 and cpu["ratio"] > 1
    assert gpu["published"] > cpu["published"] and gpu["modeled"] > cpu["modeled"]
    assert all(RUNS[k].note for k in ("NVIDIA 1xV100 AMP @32k", "DLRM paper 1xV100 @2k"))
