"""Published training throughputs of DLRMs on real GPUs and CPUs, beside the model.

The calibration and ``recnb validate`` check the model against steps measured on this
machine; these are the checks against real GPUs, which this machine does not have. Each
:class:`PublishedRun` says where its number comes from and how the model is set up to
match it; :func:`compare_published` gives one tidy row per run (published samples/s, the
model's, their ratio). The published numbers are what their authors measured with their
software of the time; the model prices our eager PyTorch DLRM on the same hardware, so a
ratio far from 1 says as much about the software as about the model (see each ``note``).
The TorchRec sources do not state the precision of their matmuls; their runs are priced in
fp32 (PyTorch's default today). Priced with TF32 (its default before 1.12) instead, the
TorchRec ratios would be 1.03–2.27. NVIDIA's mixed-precision run is priced as it ran, with
AMP (``dtype="amp_fp16"``, :mod:`recnotebooks.perf.precision`): half MLPs with fp32 master
weights and fp32 tables, as its README says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from recnotebooks.checks import check_fraction, check_type
from recnotebooks.config import DLRMConfig, preset
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import GB, Hardware, hardware
from recnotebooks.perf.placement import _percent
from recnotebooks.perf.sources import cite

__all__ = ["PublishedRun", "PUBLISHED_RUNS", "TORCHREC_README_ROWS", "compare_published"]

#: Table cardinalities of the TorchRec DLRM example's README runs (Criteo 1TB, 91.10 GB of
#: fp32 tables at dim 128): https://github.com/facebookresearch/dlrm/tree/main/torchrec_dlrm
TORCHREC_README_ROWS = (
    45833188,
    36746,
    17245,
    7413,
    20243,
    3,
    7114,
    1441,
    62,
    29275261,
    1572176,
    345138,
    10,
    2209,
    11267,
    128,
    4,
    974,
    14,
    48937457,
    11316796,
    40094537,
    452104,
    12606,
    104,
    35,
)


def _torchrec_readme() -> DLRMConfig:
    cfg = preset("mlperf_v1")
    tables = tuple(
        dataclasses.replace(t, num_rows=n) for t, n in zip(cfg.tables, TORCHREC_README_ROWS, strict=True)
    )
    return cfg.replace(tables=tables, name="torchrec_readme")


def _nvidia_terabyte() -> DLRMConfig:
    # NVIDIA's DLRM: Criteo Terabyte's 26 tables (here capped at 10M rows as the dlrm repo
    # does), dim 128, MLPs 512-256-128 and 1024-1024-512-256-1.
    return preset("criteo_terabyte").replace(
        embedding_dim=128,
        bottom_mlp=(512, 256, 128),
        top_mlp=(1024, 1024, 512, 256, 1),
        name="nvidia_dlrm_terabyte",
    )


def _v100_32gb() -> Hardware:
    # Big Basin's GPU with 32 GB of HBM2 (the V100 SXM2 32 GB: same 900 GB/s; vendor spec sheet)
    return hardware("big_basin").replace(name="v100_32gb", hbm_bytes=32 * GB)


@dataclass(frozen=True)
class PublishedRun:
    """One published training throughput and how the model is set up to match it."""

    label: str  #: short: who, where, @global batch
    source: str
    config: Callable[[], DLRMConfig]
    hardware: Callable[[], Hardware]
    gpus: int
    batch_size: int
    samples_per_s: float
    dtype: str = "fp32"
    note: str = ""


_TR = "TorchRec DLRM on 8x A100 40GB, published by the TorchRec project: " + cite("torchrec")
_TRR = cite("torchrec_dlrm") + " (AWS p4d.24xlarge, A100 40GB, CUDA 11.0, NCCL 2.10.3)"
_NV = "1x V100 32GB, Criteo Terabyte, dim 128: " + cite("nvidia_dlrm")
_DP = "1000 batches of 2048 of its benchmark config, Caffe2: " + cite("dlrm_paper")
_A100 = partial(hardware, "dgx_a100")
_EARLY = (
    "the paper's early reference implementation; the model prices today's eager PyTorch with fused "
    "embeddings, so it is far faster: direction only"
)

PUBLISHED_RUNS: tuple[PublishedRun, ...] = (
    PublishedRun("TorchRec 8xA100 @2k", _TR, partial(preset, "mlperf_v1"), _A100, 8, 2048, 204_800.0),
    PublishedRun("TorchRec 8xA100 @16k", _TR, partial(preset, "mlperf_v1"), _A100, 8, 16384, 925_696.0),
    PublishedRun("TorchRec README 4xA100 @16k", _TRR, _torchrec_readme, _A100, 4, 16384, 1_458_176.0),
    PublishedRun("TorchRec README 8xA100 @2k", _TRR, _torchrec_readme, _A100, 8, 2048, 284_615.0),
    PublishedRun("TorchRec README 8xA100 @16k", _TRR, _torchrec_readme, _A100, 8, 16384, 1_671_168.0),
    PublishedRun(
        "TorchRec README 8xA100 @64k",
        _TRR,
        _torchrec_readme,
        _A100,
        8,
        65536,
        5_373_952.0,
        note="fp32 top-MLP GEMMs bound the model here; priced with TF32 it is 1.03",
    ),
    PublishedRun("NVIDIA 1xV100 FP32 @32k", _NV, _nvidia_terabyte, _v100_32gb, 1, 32768, 494_000.0),
    PublishedRun(
        "NVIDIA 1xV100 AMP @32k",
        _NV,
        _nvidia_terabyte,
        _v100_32gb,
        1,
        32768,
        875_000.0,
        dtype="amp_fp16",
        note="priced as AMP (amp_fp16): NVIDIA's README says 'mixed precision training with static loss "
        "scaling for the bottom and top MLPs while embedding tables are stored in FP32 format' (apex AMP O2 "
        "over the MLPs). Still too fast: the model prices fused embedding kernels and tensor-core GEMMs near "
        "peak, not 2020's 26 separate nn.Embedding lookups; as pure fp16 it was 2.30x",
    ),
    PublishedRun(
        "DLRM paper 1xV100 @2k",
        _DP,
        partial(preset, "dlrm_benchmark"),
        partial(hardware, "big_basin"),
        1,
        2048,
        2048 / 0.062,
        note=_EARLY,
    ),
    PublishedRun(
        "DLRM paper 2xXeon 6138 @2k",
        _DP,
        partial(preset, "dlrm_benchmark"),
        partial(hardware, "cpu_cluster"),
        1,
        2048,
        2048 / 0.256,
        note=_EARLY,
    ),
)


def compare_published(runs: Sequence[PublishedRun] = PUBLISHED_RUNS) -> list[dict[str, object]]:
    """One row per run: ``published`` and ``modeled`` samples/s, ``ratio`` (modeled over
    published), whether the model says it fits, and the run's source and note."""
    rows = []
    for run in runs:
        r = estimate(run.config(), run.hardware(), batch_size=run.batch_size, gpus=run.gpus, dtype=run.dtype)
        rows.append(
            {
                "run": run.label,
                "published": run.samples_per_s,
                "modeled": r.throughput,
                "ratio": r.throughput / run.samples_per_s,
                "fits": r.fits,
                "dtype": run.dtype,
                "bound_by": max(r.breakdown(), key=r.breakdown().get),
                "source": "modeled vs published",
                "reference": run.source,
                "note": run.note,
            }
        )
    return rows


# ----- TorchRec's UVM / UVM-caching benchmark ----------------------------------------------------
#: TorchRec's benchmark of a UVM cache ("Full sized DLRM EMB w/ UVM/UVM-caching" in its benchmarks README,
#: https://github.com/pytorch/torchrec/blob/main/benchmarks/README.md, cited as ``torchrec_benchmarks`` in
#: :mod:`recnotebooks.perf.sources`): seconds per epoch of 10 batches of 64 samples (its benchmark script,
#: https://github.com/pytorch/torchrec/blob/main/benchmarks/ebc_benchmarks.py), 26 tables of dim 128, 64
#: ids per table and sample, SGD, one 16 GB V100; tables in host memory over UVM vs a UVM cache (load
#: factor 0.2) with the five largest tables halved.
TORCHREC_UVM = {"uvm_s": 0.62, "uvm_cache_s": 0.06, "batch_size": 64, "batches": 10, "pooling": 64}
TORCHREC_UVM_SOURCE = cite("torchrec_benchmarks")  #: where :data:`TORCHREC_UVM` was published


def _torchrec_uvm_model(halve: bool) -> DLRMConfig:
    """The TorchRec DLRM tables with 64 lookups each and minimal MLPs (the benchmark trains the
    embeddings alone); ``halve``: the five tables over 10M rows halved, as the cached run does."""
    base = preset("mlperf_v1")
    rows = [n // 2 if halve and n >= 10_000_000 else n for n in TORCHREC_README_ROWS]
    tables = tuple(
        dataclasses.replace(tc, num_rows=n, pooling_factor=float(TORCHREC_UVM["pooling"]))
        for tc, n in zip(base.tables, rows, strict=True)
    )
    return base.replace(tables=tables, num_dense=1, bottom_mlp=(128,), top_mlp=(1,), name="torchrec_uvm")


def torchrec_uvm_example(hit_rates: Sequence[float] = (0.2, 0.9, 0.99)) -> list[dict[str, object]]:
    """TorchRec's published UVM example (:data:`TORCHREC_UVM`, ``source="published"``) beside what
    our model says for it (``source="modeled"``): one Big Basin V100 (16 GB), the TorchRec DLRM
    tables (:data:`TORCHREC_README_ROWS`, dim 128, 64 lookups per table and sample) with minimal
    MLPs (the benchmark trains the embeddings alone), SGD; all tables in host DRAM over UVM, or,
    with the five tables over 10M rows halved, behind a cache at each of ``hit_rates`` (each in
    [0, 1]). One row per case: ``case``, ``seconds_per_epoch``, ``source``, ``fits``."""

    check_type("hit_rates", hit_rates, (list, tuple), "a list or tuple of hit rates")
    hits = [check_fraction(f"hit_rates[{i}]", h) for i, h in enumerate(hit_rates)]
    t = TORCHREC_UVM

    def row(case: str, seconds: float, source: str, fits: bool = True) -> dict[str, object]:
        return {"case": case, "seconds_per_epoch": seconds, "source": source, "fits": fits}

    rows = [row("UVM (published)", t["uvm_s"], "published"),
            row("UVM cache (published)", t["uvm_cache_s"], "published")]  # fmt: skip
    kw = {"batch_size": int(t["batch_size"]), "sparse_optimizer": "sgd"}
    host = estimate(_torchrec_uvm_model(False), "big_basin", placement="host", **kw)  # type: ignore[arg-type]
    rows.append(row("UVM (modeled)", host.step_time * t["batches"], "modeled", host.fits))
    cached = _torchrec_uvm_model(True)
    for h in hits:
        r = estimate(cached, "big_basin", placement="cache", cache_hit_rate=h, **kw)  # type: ignore[arg-type]
        note = "" if r.fits else "; would not fit"
        rows.append(
            row(f"cache at {_percent(h)} hits (modeled{note})", r.step_time * t["batches"], "modeled", r.fits)
        )
    return rows


__all__ += ["TORCHREC_UVM", "TORCHREC_UVM_SOURCE", "torchrec_uvm_example"]
