"""The modeled HSTU memory: DLRMv4's 600 GB of tables sharded over devices, Adam and row-wise
Adagrad counted by hand, the unfused kernel's scores growing with sum n^2 (padded: B N^2)."""

from __future__ import annotations

import pytest

from recnotebooks.config import TableConfig
from recnotebooks.config.hstu import HSTUConfig, hstu_preset
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.hstu_memory import MEMORY_KINDS, devices_to_fit, hstu_memory
from recnotebooks.perf.planner import RESERVE

CFG = HSTUConfig(
    (TableConfig("item", 1000), TableConfig("artist", 24)), dim=8, num_layers=2, heads=2, max_len=64
)


def test_kinds_by_hand() -> None:
    m = hstu_memory(CFG, [3, 5], devices=2, dtype="fp32")
    assert list(m.bytes) == list(MEMORY_KINDS) and m.source == "modeled"
    assert m.bytes["tables"] == 1024 * 8 * 4 / 2  # fp32 rows, half on each device
    assert m.bytes["table_optimizer"] == 1024 * 4 / 2  # row-wise Adagrad: one float a row
    assert m.bytes["adam"] == 2 * m.bytes["dense"] == 2 * CFG.dense_parameters * 4
    width = 2 * 8 + 2 * (4 * 2 * 4) + 3 * 2 * 4  # ACTIVATION_WIDTH at dim 8, 2 heads of 4
    assert m.bytes["activations"] == 2 * 8 * width * 4 + 8 * 8 * 4 * 2
    assert m.bytes["scores"] == 0  # fused: recomputed in backward
    plain = hstu_memory(CFG, [3, 5], devices=2, dtype="fp32", fused_attention=False)
    # layers x kept x heads x sum P^2 x bytes: 3 and 5 events run in buckets of 8 (sparse.padded_length)
    assert plain.bytes["scores"] == 2 * 2 * 2 * (64 + 64) * 4
    padded = hstu_memory(CFG, [3, 5], devices=2, dtype="fp32", fused_attention=False, padded=True)
    assert padded.bytes["scores"] == 2 * 2 * 2 * (2 * 25) * 4  # B N^2
    assert sum(r["share"] for r in m.rows()) == pytest.approx(1.0)  # type: ignore[misc]


def test_dlrmv4_lives_in_its_tables_over_many_gpus() -> None:
    cfg = hstu_preset("dlrmv4")
    lengths = [2048] * 16
    m = hstu_memory(cfg, lengths, devices=16)
    assert 590e9 < m.model_bytes < 610e9  # ~600 GB, fp32 tables and their Adagrad state
    assert m.bytes["tables"] > 5 * m.bytes["activations"]
    n = devices_to_fit(cfg, lengths, "dgx_h100")
    room = hardware("dgx_h100").hbm_bytes * (1 - RESERVE)
    assert hstu_memory(cfg, lengths, n).total <= room < hstu_memory(cfg, lengths, n - 1).total
    assert 8 < n <= 16  # more than a node of H100s
    assert hstu_memory(cfg, lengths, n).fits("dgx_h100")


def test_unfused_scores_grow_with_the_square() -> None:
    cfg = hstu_preset("hstu_small")
    short = hstu_memory(cfg, [64] * 8, fused_attention=False).bytes["scores"]
    long = hstu_memory(cfg, [512] * 1, fused_attention=False).bytes["scores"]
    assert long == pytest.approx(8 * short)  # same tokens, 8x the length: 8x the scores


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="lengths"):
        hstu_memory(CFG, [])
    with pytest.raises(ValueError, match="devices"):
        hstu_memory(CFG, [3], devices=0)
    with pytest.raises(TypeError, match="config"):
        hstu_memory("dlrmv4", [3])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="most"):
        devices_to_fit(hstu_preset("dlrmv4"), [64], "dgx_h100", most=2)
