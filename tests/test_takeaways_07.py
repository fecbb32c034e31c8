"""Notebook 07 (generative recommenders): every sentence of its markdown that states a finding, asserted
on the numbers the library computes, called as the notebook's cells call it.

Each test first finds the sentence in the notebook (so the words and the test cannot drift apart), then
computes its numbers. When one fails, the model and the sentence disagree: find out which is wrong
before changing either.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recnotebooks.config import hstu_preset, preset
from recnotebooks.perf.compare import published_utilisation
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.hstu import HSTUStep, attention_products, hstu_step
from recnotebooks.perf.mlperf_setup import MLPERF_RUNS, estimate_run
from recnotebooks.viz.hstu import explore_hstu, flops_per_byte, history_lengths, padding_waste

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "07_generative_recommenders.ipynb"
HISTORIES, HARDWARE = 1024, "dgx_h100"  # the parameters cell's


def _cells() -> dict[str, str]:
    return {c["id"]: "".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]}


def says(cell: str, *phrases: str) -> None:
    text = " ".join(_cells()[cell].split())
    for phrase in phrases:
        assert phrase in text, f"cell {cell} no longer says {phrase!r}"


def test_parameters_are_the_ones_these_tests_use() -> None:
    params = _cells()["g01"]
    assert f"HISTORIES = {HISTORIES}" in params and f'HARDWARE = "{HARDWARE}"' in params


@pytest.fixture(scope="module")
def lengths() -> list[int]:
    return history_lengths(HISTORIES, 1.0, 4096)


@pytest.fixture(scope="module")
def steps(lengths: list[int]) -> tuple[HSTUStep, HSTUStep]:
    v4 = hstu_preset("dlrmv4")
    return hstu_step(v4, HARDWARE, lengths, gpus=8), hstu_step(v4, HARDWARE, lengths, gpus=8, padded=True)


def test_1_a_token_is_an_event_and_the_tables_are_600_gb() -> None:
    says("g05", "looks up 214 rows in its 26 tables", "looks up 3*n* rows", "and 8 more once",
         "Its tables are 11, with 293 million rows of dim 512",
         "150 billion parameters, 600 GB in fp32")  # fmt: skip
    says("g20", "3*n* rows looked up (and 8 once a history)", "pools 214 rows into 26 vectors")
    v4, dcn = hstu_preset("dlrmv4"), preset("mlperf_dcnv2")
    assert dcn.lookups_per_sample == 214 and len(dcn.tables) == 26
    assert len(v4.event_tables) == 3 and len(v4.context) == 8 and len(v4.tables) == 11 and v4.dim == 512
    assert round(sum(t.num_rows for t in v4.tables) / 1e6) == 293
    assert round(v4.embedding_parameters / 1e9) == 150 and round(v4.embedding_parameters * 4 / 1e9) == 600


def test_2_padding_at_yambda_lengths(lengths: list[int], steps: tuple[HSTUStep, HSTUStep]) -> None:
    says("g09", "a padded batch holds 1.57× the tokens of the jagged one: 36% of it is padding",
         "3.8× the query-key products",
         "the padded step takes 2.4× as long as the jagged one (1,017 ms against 431 ms)",
         "its attention alone 3.8× as long")  # fmt: skip
    says("g20", "a padded batch is 36% padding and computes 3.8× the causal query-key products",
         "the padded step takes 2.4× the jagged one")  # fmt: skip
    assert f"{len(lengths) * max(lengths) / sum(lengths):.2f}" == "1.57" and max(lengths) == 4096
    assert round(padding_waste(lengths) * 100) == 36
    assert round(len(lengths) * max(lengths) ** 2 / attention_products(lengths), 1) == 3.8
    jagged, padded = steps
    assert round(padded.step_seconds / jagged.step_seconds, 1) == 2.4
    assert (round(padded.step_seconds * 1e3), round(jagged.step_seconds * 1e3)) == (1017, 431)
    assert round(padded.seconds["attention"] / jagged.seconds["attention"], 1) == 3.8


def test_2_even_one_length_costs_the_padded_way_the_masked_half() -> None:
    says(
        "g09",
        "Even when every history has the same length and nothing is padded, "
        "the padded way takes 1.3× as long",
    )
    v4, same = hstu_preset("dlrmv4"), history_lengths(HISTORIES, 1.0, 4096, spread="all equal")
    assert padding_waste(same) == 0
    ratio = (
        hstu_step(v4, HARDWARE, same, gpus=8, padded=True).step_seconds
        / hstu_step(v4, HARDWARE, same, gpus=8).step_seconds
    )
    assert round(ratio, 1) == 1.3


def test_2_the_synthetic_log_wastes_more_its_cap_further_in_its_tail() -> None:
    from recnotebooks.data import ListeningConfig, SyntheticListening

    says("g09", "80% of a padded batch of 64", "its cap (512 events)", "relative to its median (54)",
         "Yambda's (median 2,700)")  # fmt: skip
    config = ListeningConfig()
    here = SyntheticListening(config, batch_size=64).batch(0).lengths.tolist()
    assert round(padding_waste(here) * 100) == 80
    assert (config.max_length, config.median_length) == (512, 54)
    assert config.max_length / config.median_length > 4096 / 2700


def test_3_history_length_brings_flops_with_its_bytes() -> None:
    says("g13", "A DLRM-DCNv2 sample does 280 FLOPs per byte", "3.6× that at 64 events and 9.1× at 4,096")
    says("g20", "3.6× (64 events) to 9.1× (4,096 events)")
    rows = {(r["model"].split()[0], r["length"]): float(r["flops_per_byte"]) for r in flops_per_byte()}  # type: ignore[arg-type, union-attr]
    dcn = rows[("DLRM-DCNv2,", 64)]
    assert round(dcn) == 280 and rows[("DLRM-DCNv2,", 4096)] == dcn
    assert round(rows[("DLRMv4", 64)] / dcn, 1) == 3.6 and round(rows[("DLRMv4", 4096)] / dcn, 1) == 9.1
    v4 = [rows[("DLRMv4", n)] for n in (64, 128, 256, 512, 1024, 2048, 4096)]
    assert v4 == sorted(v4)  # the longer the history, the more FLOPs per byte (attention's square)


def _dcn_h100() -> tuple[dict[str, float], float, float]:
    """DLRM-DCNv2 as NVIDIA's v4.0 submission ran it on one DGX H100 (cell g12): its slowest rank's shares,
    its modeled MFU and its published utilisation."""
    run = next(
        r for r in MLPERF_RUNS if (r.mlperf.round, r.mlperf.system) == ("v4.0", "eos_ngc24.04_merlin_hugectr")
    )
    step = estimate_run(run)
    parts = max(step.per_rank, key=lambda c: sum(c.values()))
    share = {k: v / sum(parts.values()) for k, v in parts.items()}
    flops = preset("mlperf_dcnv2").total_flops_per_sample() * run.batch_size / run.gpus
    mfu = flops / step.step_time_overlap / hardware(HARDWARE).flops("bf16")
    return share, mfu, published_utilisation(run.mlperf)["utilisation"]


def test_3_where_the_steps_go(steps: tuple[HSTUStep, HSTUStep]) -> None:
    says("g13", "DLRM-DCNv2 spends 30% of its step on the embeddings",
         "and 16% on the all-to-all and all-reduce",
         "DLRMv4 3% and 7%, and 87% on the dense work of every token")  # fmt: skip
    says("g20", "its modeled step spends 3% on the embeddings where DLRM-DCNv2's spends 30%")
    share, _, _ = _dcn_h100()
    assert round((share["embedding_forward"] + share["embedding_backward"]) * 100) == 30
    assert round((share["all_to_all"] + share["all_reduce"]) * 100) == 16
    jagged, _ = steps
    v4 = {k: v / jagged.step_seconds for k, v in jagged.seconds.items()}
    assert round(v4["embeddings"] * 100) == 3 and round((v4["all_to_all"] + v4["all_reduce"]) * 100) == 7
    assert round((v4["projections"] + v4["attention"] + v4["pointwise"]) * 100) == 87


def test_4_a_gpu_used_better(steps: tuple[HSTUStep, HSTUStep]) -> None:
    says("g16", "the DLRMv4 step uses 35% of an H100's bf16 peak", "as MLPerf's submissions run it, 16%",
         "(NVIDIA's published v4.0 run on the same node: 17%)", "about twice as well",
         "Padded, DLRMv4 falls to 15%")  # fmt: skip
    says("g20", "Modeled MFU: 35% for DLRMv4 against 16% for DLRM-DCNv2 (17% published)")
    jagged, padded = steps
    _, dcn_mfu, published = _dcn_h100()
    assert round(jagged.mfu() * 100) == 35 and round(padded.mfu() * 100) == 15
    assert round(dcn_mfu * 100) == 16 and round(published * 100) == 17
    assert 1.8 <= jagged.mfu() / dcn_mfu <= 2.4  # "about twice"


def test_4_the_tables_decide_where_the_model_lives(
    lengths: list[int], steps: tuple[HSTUStep, HSTUStep]
) -> None:
    says("g16", "take 75 GB of each GPU's 80 GB — 94% before a single activation",
         "over a GB200 NVL72's 72 GPUs they take 8.3 GB each (4% of 186 GB)",
         "it is 7.5% of the step on one DGX H100 node and 11% on the NVL72 rack")  # fmt: skip
    says("g20", "600 GB of fp32 tables fill 94% of every GPU's HBM on one DGX H100 node")
    table_gb = hstu_preset("dlrmv4").embedding_parameters * 4 / 1e9
    h100, rack = hardware(HARDWARE), hardware("gb200_nvl72")
    assert round(table_gb / h100.devices) == 75 and h100.hbm_bytes == 80e9
    assert round(table_gb / h100.devices / (h100.hbm_bytes / 1e9) * 100) == 94
    assert (rack.devices, round(table_gb / rack.devices, 1), round(rack.hbm_bytes / 1e9)) == (72, 8.3, 186)
    assert round(table_gb / rack.devices / (rack.hbm_bytes / 1e9) * 100) == 4
    jagged, _ = steps
    on_rack = hstu_step(hstu_preset("dlrmv4"), rack, lengths, gpus=rack.devices)
    assert round(jagged.seconds["all_to_all"] / jagged.step_seconds * 100, 1) == 7.5
    assert round(on_rack.seconds["all_to_all"] / on_rack.step_seconds * 100) == 11


def test_5_the_explorer_walk_of_the_notebook() -> None:
    """Cell g19's comments: shorter histories lower attention's share; one length removes the padding;
    4 nodes of the same work per GPU make the all-to-all cross the network (a longer step)."""
    says(
        "g19",
        "shorter histories: attention's share falls",
        "no padding",
        "the all-to-all crosses the network",
    )

    def attention_share(**kw: object) -> float:
        rows = [r for r in explore_hstu(measure=False, **kw).tables["modeled"] if r["layout"] == "jagged"]  # type: ignore[arg-type]
        total = sum(float(r["seconds_per_step"]) for r in rows)  # type: ignore[arg-type]
        return sum(float(r["seconds_per_step"]) for r in rows if r["phase"] == "attention") / total  # type: ignore[arg-type]

    assert attention_share(lengths=1 / 4) < attention_share()

    def metric(name: str, **kw: object) -> float:
        rows = explore_hstu(measure=False, **kw).tables["metrics"]  # type: ignore[arg-type]
        return float(next(r["value"] for r in rows if r["metric"] == name))  # type: ignore[arg-type]

    assert metric("padding in a padded batch", lengths=1 / 4, spread="all equal") == 0
    one = metric("step time, jagged", lengths=1 / 4, spread="all equal")
    four = metric("step time, jagged", lengths=1 / 4, spread="all equal", nodes=4)
    assert four > one
