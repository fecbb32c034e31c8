"""Notebook 02 §8's take-away on precision, asserted on the numbers it computes."""

from __future__ import annotations

from recnotebooks.perf.sweeps import precision_sweep


def test_precision_moves_mlp_heavy_models_and_barely_moves_embedding_heavy_ones() -> None:
    rows = precision_sweep(("rm1", "rm3"), hw="dgx_a100", batch_size=8192)
    gain = {(r["model"], r["dtype"]): float(r["value"]) for r in rows}
    assert {r["source"] for r in rows} == {"modeled"}
    for dt in ("tf32", "amp_bf16", "amp_fp16"):
        assert gain[("rm3", dt)] >= 2.0  # "gains several times from tensor cores"
        assert gain[("rm1", dt)] <= 1.2  # "barely moves"
    # pure half is the bound: AMP never beats it, and never loses to fp32
    for m in ("rm1", "rm3"):
        assert 1.0 <= gain[(m, "amp_bf16")] <= gain[(m, "bf16")]
