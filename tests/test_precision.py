"""Precision as a lever: the precision table the cost model reads (AMP, TF32, pure half), the
published runs recomputed with it, and bf16 autocast training measured beside fp32."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest
import torch
from _values import bad, num

from recnotebooks.cli import main
from recnotebooks.config import preset
from recnotebooks.data.synthetic import SyntheticCriteo
from recnotebooks.measure.mixed_precision import compare_precision
from recnotebooks.nn.dlrm import DLRM
from recnotebooks.perf import components as C
from recnotebooks.perf.compare import compare_published
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import DTYPE_BYTES, HARDWARE
from recnotebooks.perf.mlperf_setup import PUBLISHED_RUNS
from recnotebooks.perf.precision import PRECISIONS, precision, precision_table
from recnotebooks.train import TrainConfig, Trainer

RUNS = {r.label: r for r in PUBLISHED_RUNS}
NVIDIA = RUNS["NVIDIA 1xV100 AMP @32k"]  # an MLP-heavy model: top-MLP GEMMs bound its step


def _step(dtype: str, hw: str = "dgx_a100") -> float:
    return estimate(NVIDIA.config(), hw, batch_size=32768, dtype=dtype).step_time


# ----- the precision table ---------------------------------------------------------------------
def test_every_name_has_a_row_and_dtype_bytes_is_its_storage() -> None:
    assert list(PRECISIONS) == ["fp32", "tf32", "bf16", "fp16", "amp_fp16", "amp_bf16"]
    assert {n: p.storage for n, p in PRECISIONS.items()} == DTYPE_BYTES
    assert DTYPE_BYTES["fp16"] == DTYPE_BYTES["bf16"] == 2  # pure half: every byte in half
    assert DTYPE_BYTES["amp_fp16"] == DTYPE_BYTES["amp_bf16"] == 4  # fp32 tables and gradients
    assert {r["name"] for r in precision_table()} == set(PRECISIONS)


@pytest.mark.parametrize("hw, half", [("big_basin", "fp16"), ("dgx_a100", "fp16"), ("dgx_a100", "bf16")])
def test_amp_step_lies_between_pure_half_and_fp32(hw: str, half: str) -> None:
    pure, amp, fp32 = _step(half, hw), _step(f"amp_{half}", hw), _step("fp32", hw)
    assert pure < amp < fp32


def test_amp_prices_fp32_tables_master_weights_and_casts() -> None:
    cfg, hw = NVIDIA.config(), HARDWARE["dgx_a100"]
    pure, amp = (
        estimate(cfg, hw, batch_size=32768, dtype="fp16"),
        estimate(cfg, hw, batch_size=32768, dtype="amp_fp16"),
    )
    for part in ("embedding_forward", "embedding_backward"):  # fp32 rows, as fp32 training
        assert amp.breakdown()[part] == pytest.approx(estimate(cfg, hw, batch_size=32768).breakdown()[part])
        assert amp.breakdown()[part] > pure.breakdown()[part]
    assert amp.breakdown()["interaction"] > pure.breakdown()["interaction"]  # torch.cat promotes to fp32
    half_mlp, amp_mlp = C.mlp(cfg, hw, "top", 4096, "fp16"), C.mlp(cfg, hw, "top", 4096, "amp_fp16")
    assert amp_mlp.device_bytes > half_mlp.device_bytes  # the weight casts
    assert (
        C.dense_optimizer(cfg, hw, "amp_bf16").device_bytes == C.dense_optimizer(cfg, hw, "fp32").device_bytes
    )


def test_tf32_runs_gemms_faster_than_fp32_on_the_same_bytes() -> None:
    cfg, hw = NVIDIA.config(), HARDWARE["dgx_a100"]
    fp32, tf32 = C.mlp(cfg, hw, "top", 8192, "fp32"), C.mlp(cfg, hw, "top", 8192, "tf32")
    assert tf32.seconds < fp32.seconds and tf32.device_bytes == fp32.device_bytes
    a, b = (estimate(cfg, hw, batch_size=8192, dtype=d) for d in ("fp32", "tf32"))
    assert b.step_time < a.step_time and a.memory.device == b.memory.device
    # a V100 has no TF32 tensor cores: tf32 runs at its fp32 peak
    assert _step("tf32", "big_basin") == pytest.approx(_step("fp32", "big_basin"))


def test_fp16_has_the_loss_scale_pass_and_bf16_not() -> None:
    assert precision("amp_fp16").loss_scale and not precision("amp_bf16").loss_scale
    assert not precision("fp16").loss_scale  # pure half: the idealised bound the model used to price AMP as
    cfg, hw = NVIDIA.config(), HARDWARE["dgx_a100"]
    grads = cfg.dense_parameters * 4 * 2  # one fused read + write of each fp32 gradient
    fp16, bf16 = (C.dense_optimizer(cfg, hw, d).device_bytes for d in ("amp_fp16", "amp_bf16"))
    assert fp16 - bf16 == pytest.approx(grads)


def test_components_read_the_table_and_never_compare_dtype_names() -> None:
    src = inspect.getsource(C)
    assert "dtype ==" not in src and "dtype in (" not in src and "DTYPE_BYTES" not in src


def test_bad_dtypes_name_the_parameter_and_what_is_allowed() -> None:
    cfg = preset("tiny")
    with pytest.raises(
        ValueError, match=r"dtype must be one of \['fp32', 'tf32', 'bf16', 'fp16', 'amp_fp16'"
    ):
        estimate(cfg, "dgx_a100", batch_size=64, dtype="fp8")
    with pytest.raises(
        ValueError, match="dtype='amp_bf16' runs its GEMMs in bf16, which big_basin has no peak"
    ):
        estimate(cfg, "big_basin", batch_size=64, dtype="amp_bf16")
    with pytest.raises(ValueError, match="dtype must be one of"):
        precision(bad(None))


# ----- every published comparison, recomputed ---------------------------------------------------
#: model / published after AMP was modeled (before: the same, except NVIDIA AMP 2.30 as pure fp16), and
#: since the dot interaction is priced as a gather, not a 0/1 selection GEMM
RATIOS = {
    "TorchRec 8xA100 @2k": 1.584, "TorchRec 8xA100 @16k": 1.780, "TorchRec README 4xA100 @16k": 0.911,
    "TorchRec README 8xA100 @2k": 1.153, "TorchRec README 8xA100 @16k": 1.043,
    "TorchRec README 8xA100 @64k": 0.604, "NVIDIA 1xV100 FP32 @32k": 1.059, "NVIDIA 1xV100 AMP @32k": 1.588,
    "DLRM paper 1xV100 @2k": 5.983, "DLRM paper 2xXeon 6138 @2k": 9.570,
}  # fmt: skip


def test_published_ratios_recomputed_with_amp() -> None:
    rows = {r["run"]: r for r in compare_published()}
    assert {k: round(num(r, "ratio"), 3) for k, r in rows.items()} == pytest.approx(RATIOS, abs=0.002)
    assert NVIDIA.dtype == "amp_fp16" and "FP32 format" in NVIDIA.note
    pure = estimate(NVIDIA.config(), NVIDIA.hardware(), batch_size=NVIDIA.batch_size, dtype="fp16")
    assert pure.throughput / NVIDIA.samples_per_s == pytest.approx(2.32, abs=0.01)  # the old miss


# ----- bf16 autocast training, measured -------------------------------------------------------
def test_bf16_training_gives_finite_auc_near_fp32s() -> None:
    rows = compare_precision(preset("tiny"), 40, batch_size=64, eval_batches=4)
    assert [r["dtype"] for r in rows] == ["fp32", "bf16"] and {r["source"] for r in rows} == {"measured"}
    for r in rows:
        assert (
            math.isfinite(num(r, "auc")) and math.isfinite(num(r, "logloss")) and num(r, "samples_per_s") > 0
        )
        assert r["reliable"] is (
            not r["reliability"]
        )  # a speed from a busy machine says so (02 §8 prints it)
    assert abs(num(rows[0], "auc") - num(rows[1], "auc")) < 0.08


def _trainer(dtype: str) -> Trainer:
    cfg = preset("tiny")
    data = SyntheticCriteo(cfg, 32, seed=0)
    tc = TrainConfig(steps=2, warmup_steps=0, eval_batches=0, progress=False, dtype=dtype)
    return Trainer(DLRM(cfg, seed=0), data, config=tc, device="cpu")


def test_checkpoints_record_the_dtype(tmp_path: Path) -> None:
    t = _trainer("bf16")
    t.fit()
    assert all(p.dtype == torch.float32 for p in t.model.parameters())  # fp32 master weights
    ck = t.save(tmp_path / "bf16.pt")
    assert torch.load(ck, weights_only=True)["dtype"] == "bf16"
    with pytest.raises(ValueError, match="trained with dtype='bf16' but this trainer uses dtype='fp32'"):
        _trainer("fp32").load(ck)
    _trainer("bf16").load(ck)


def test_dtype_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="dtype must be one of"):
        TrainConfig(dtype="int8")
    with pytest.raises(ValueError, match="dtype='fp16' is refused on cpu"):
        _trainer("fp16")
    with pytest.raises(ValueError, match=r"dtypes\[1\] must be one of"):
        compare_precision(preset("tiny"), 4, dtypes=("fp32", "fp8"))
    assert main(["train", "--dtype", "fp16", "--device", "cpu", "--steps", "2"]) == 2
    assert "use dtype='bf16'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--dtype", "bf17"])
    assert "invalid choice: 'bf17'" in capsys.readouterr().err
    assert main(["train", "--dtype", "bf16", "--world-size", "2", "--steps", "2"]) == 2
    assert "--dtype bf16 applies to single-process training" in capsys.readouterr().err
