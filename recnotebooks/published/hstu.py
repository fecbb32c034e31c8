"""What others published about training and running HSTU on GPUs, as data: nothing here is
modeled, simulated or measured on this machine.

Each :class:`PublishedHSTUPoint` is one number a source reported -- a throughput, a step time
or a rate -- with what it ran: the hardware, the model (a preset of
:data:`recnotebooks.config.hstu.HSTU_PRESETS` that says the same shape), the batch, the history
lengths, the kernels, and where to read it (address and revision). The model prices each in
:mod:`recnotebooks.perf.hstu_compare`.

Two sources:

* NVIDIA ``recsys-examples``' HSTU end-to-end training benchmark on 2 DGX H100 nodes (16 GPUs):
  its pull request #340's description (2026-04-02: 1,092 -> 3,933 TFLOPS over the 16 GPUs,
  6.38% -> 22.96% MFU) and the documents at commit 43465aea (``E2E_BENCHMARK.md``: per GPU
  75.6 -> 310.6 TFLOPS, a later run of a changed sequence of optimizations;
  ``PERF_ANALYSIS.md``: one fixed-shape run's step time and GPU-time breakdown). The model is
  compared with the document's per-GPU numbers (the newer, and the ones that say their run,
  commit and FLOP count); the PR's totals are kept and compared too.
* ``meta-recsys/generative-recommenders`` issue #530 (2026-05-27): one H100 SXM5, the ``dlrm_v3``
  5-layer stack's **forward** pass (inference), 9.30 ms an iteration, 10.63 M tokens/s, and its
  kernel mix.
"""

from __future__ import annotations

from dataclasses import dataclass

from recnotebooks.checks import check_choice, check_float, check_int, check_str

__all__ = [
    "PublishedHSTUPoint",
    "HSTU_POINTS",
    "PHASES",
    "RECSYS_EXAMPLES_PR",
    "RECSYS_EXAMPLES_E2E",
    "RECSYS_EXAMPLES_ANALYSIS",
    "GR_ISSUE_530",
    "ANALYSIS_BREAKDOWN_MS",
    "ISSUE_530_KERNEL_MIX",
    "H100_BF16_PEAK_USED",
]

#: What a point times: a training step (forward and backward) or the forward pass alone.
PHASES = ("training", "forward")
_RE = "https://github.com/NVIDIA/recsys-examples"
RECSYS_EXAMPLES_PR = f"{_RE}/pull/340"
RECSYS_EXAMPLES_E2E = f"{_RE}/blob/43465aea/examples/hstu/training/benchmark/E2E_BENCHMARK.md"
RECSYS_EXAMPLES_ANALYSIS = f"{_RE}/blob/43465aea/examples/hstu/training/benchmark/PERF_ANALYSIS.md"
GR_ISSUE_530 = "https://github.com/meta-recsys/generative-recommenders/issues/530"
#: The H100's bf16 dense tensor-core peak both recsys-examples documents divide by (989 TFLOPS).
H100_BF16_PEAK_USED = 989e12


@dataclass(frozen=True)
class PublishedHSTUPoint:
    """One published HSTU number: ``value`` of ``metric`` (``"TFLOPS per GPU"``, ``"TFLOPS"`` over
    every GPU, ``"step ms"`` or ``"tokens per s"``) for a ``phase`` (:data:`PHASES`) of ``model`` (an
    HSTU preset) on ``gpus`` per node x ``nodes`` of ``hardware`` (the words) / ``preset`` (the
    hardware preset that matches), at ``batch_per_gpu`` histories a GPU of ``lengths`` (the words);
    ``mfu`` as the source states it (or 0 where it states none); ``software``: what it ran with;
    ``source`` and ``revision``: where to read it."""

    label: str
    source: str
    revision: str
    hardware: str
    preset: str
    gpus: int
    nodes: int
    model: str
    batch_per_gpu: int
    lengths: str
    phase: str
    metric: str
    value: float
    mfu: float
    software: str
    notes: str = ""

    def __post_init__(self) -> None:
        for name in ("label", "source", "revision", "hardware", "preset", "model", "lengths", "metric"):
            check_str(name, getattr(self, name))
        check_int("gpus", self.gpus, lo=1)
        check_int("nodes", self.nodes, lo=1)
        check_int("batch_per_gpu", self.batch_per_gpu, lo=1)
        check_choice("phase", self.phase, PHASES)
        check_float("value", self.value, lo=0.0, lo_open=True)
        check_float("mfu", self.mfu, lo=0.0, hi=1.0)

    @property
    def devices(self) -> int:
        return self.gpus * self.nodes


_H100 = "H100 SXM5 80 GB, 2 DGX nodes of 8 (16 GPUs)"
_ZIPF = (
    "jagged: S events ~ Zipf(1.2) on [1, 4096] (clamped), an item and an action token each: 2 S + 3 tokens"
)
_FIXED = "fixed, non-jagged: S = 2,048 events, T = 2 S + 3 = 4,099 tokens each"
_RUN = "run cwdfw_benchmark_cont_full_nsys_20260528_202615, commit bc40d89c; average of iter 199-999"
_E2E = {"source": RECSYS_EXAMPLES_E2E, "revision": "NVIDIA/recsys-examples@43465aea", "hardware": _H100,
        "preset": "dgx_h100", "gpus": 8, "nodes": 2, "model": "recsys_examples", "batch_per_gpu": 32,
        "lengths": _ZIPF, "phase": "training", "metric": "TFLOPS per GPU"}  # fmt: skip
_PR = {**_E2E, "source": RECSYS_EXAMPLES_PR, "revision": "NVIDIA/recsys-examples PR #340 (2026-04-02)",
       "metric": "TFLOPS"}  # fmt: skip
_PR_NOTE = (
    "the PR's totals over 16 GPUs; per GPU 68.3 -> 245.8 TFLOPS, which over 989 TFLOPS is 6.9% -> 24.9% "
    "MFU: the PR's MFU implies a peak of ~1,070 TFLOPS a GPU (it does not say which); its model and "
    "data are assumed those of the documents at 43465aea (the benchmark's config at the time)"
)

_P = PublishedHSTUPoint
_FIXED_AT = {**_E2E, "source": RECSYS_EXAMPLES_ANALYSIS, "lengths": _FIXED, "metric": "step ms"}
_GR = {
    "source": GR_ISSUE_530, "revision": "meta-recsys/generative-recommenders issue #530 (2026-05-27)",
    "hardware": "one H100 SXM5 80 GB HBM3 (Vast.ai), driver 580.126, CUDA 13.0", "preset": "dgx_h100",
    "gpus": 1, "nodes": 1, "model": "dlrm_v3", "batch_per_gpu": 32, "phase": "forward",
    "lengths": "ragged: avg uih_len 1,024 and 2,048 candidates a history, S_max ~ 4,020, "
    "~99k tokens an iteration",
}  # fmt: skip

#: Every published HSTU point, recsys-examples' first.
HSTU_POINTS: tuple[PublishedHSTUPoint, ...] = (
    _P("recsys-examples PR #340 baseline", **_PR, value=1092.0, mfu=0.0638,
       software="Triton attention, no shuffler, data parallel only", notes=_PR_NOTE),
    _P("recsys-examples PR #340 best", **_PR, value=3933.0, mfu=0.2296,
       software="+ workload-balanced shuffler, CUTLASS attention, selective recompute, tensor parallel 2",
       notes=_PR_NOTE),
    _P("recsys-examples exp0 baseline", **_E2E, value=75.6, mfu=0.0765,
       software="Triton attention, DynamicEmb without caching, no shuffler, data parallel only", notes=_RUN),
    _P("recsys-examples exp1 +shuffler", **_E2E, value=115.8, mfu=0.1170,
       software="+ workload-balanced shuffler (attention FLOPs balanced over GPUs)", notes=_RUN),
    _P("recsys-examples exp2 +CUTLASS", **_E2E, value=302.6, mfu=0.3059,
       software="+ CUTLASS HSTU attention", notes=_RUN),
    _P("recsys-examples exp5 +prefetch", **_E2E, value=310.6, mfu=0.3140,
       software="+ DynamicEmb caching, hash-round-robin sharding, prefetch pipeline", notes=_RUN),
    _P("recsys-examples fixed shape", **_FIXED_AT, value=187.01, mfu=0.3454,
       software="exp4: CUTLASS attention, DynamicEmb caching (ratio 0.1), hash-round-robin sharding",
       notes="median logged-interval step time; 341.6 TFLOPS/GPU median, 63.89 TFLOPs a GPU step by the "
       "document's count (section 1.6)"),
    _P("generative-recommenders #530 forward", **_GR, metric="tokens per s", value=10.63e6, mfu=0.0,
       software="bf16, HammerKernel.TRITON (AOT-T kernel), the 5-layer STULayer stack alone (no embeddings)",
       notes="9.30 ms an iteration (50-iteration average); per-batch padding waste 23.2%"),
)  # fmt: skip

#: ``PERF_ANALYSIS.md`` section 2.2: milliseconds of rank 0's fastest profiled step (step 162, a
#: 185.407 ms GPU window), by the document's categories.
ANALYSIS_BREAKDOWN_MS = {
    "hstu fwd/bwd": 79.900, "gemm / uvqk": 33.095, "gemm / projection": 8.905, "gemm / others": 1.919,
    "elementwise": 39.507, "embedding op": 10.643, "GPU idle": 6.185, "nccl(exposed)": 2.927,
    "nccl(overlap)": 0.862, "others": 1.217, "overlapped": 0.248,
}  # fmt: skip
#: Issue #530's forward kernel mix (nsys), percent of the kernels' time as the issue lists them
#: (its top five; they sum to 99.6).
ISSUE_530_KERNEL_MIX = {
    "_addmm_fwd": 39.8, "_hstu_attn_fwd": 39.1, "_ln_mul_dropout_fwd": 9.2, "silu": 7.9,
    "_weighted_layer_norm_fwd": 3.6,
}  # fmt: skip
