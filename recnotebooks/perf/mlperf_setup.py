"""The model of record set up as each published run ran: its model, hardware, precision and plan.

:class:`PublishedRun` is one published throughput (its number, read from
:mod:`recnotebooks.published`) and how the model is set up to reproduce it: the config, the
hardware preset, the GPUs and nodes, the precision, the optimizer, whose step is priced and the
plan. :data:`PUBLISHED_RUNS` are the TorchRec, NVIDIA and DLRM-paper runs
(:data:`~recnotebooks.published.runs.PUBLISHED_THROUGHPUTS`); :data:`MLPERF_RUNS` every MLPerf
Training DLRM-DCNv2 GPU result that logged its throughput, all set up alike (:data:`MLPERF_SETUP`;
Intel's CPU-only run as :data:`CPU_SETUP`). :func:`estimate_run` and :func:`estimate_mlperf` price
them; :func:`mlperf_seconds` and :func:`mlperf_throughput` turn a priced step into a whole MLPerf
run, as MLPerf logs it. Every number here is **modeled**; the comparisons with the published
numbers are in :mod:`recnotebooks.perf.compare`.

The TorchRec sources do not state the precision of their matmuls; their runs are priced in fp32
(PyTorch's default today). NVIDIA's mixed-precision run is priced as it ran, with AMP
(``dtype="amp_fp16"``, :mod:`recnotebooks.perf.precision`): half MLPs with fp32 master weights and
fp32 tables, as its README says.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from recnotebooks.config import DLRMConfig, preset
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import GB, Hardware, hardware
from recnotebooks.perf.mlperf_plan import HugeCTRSharding, hugectr_plan, mlperf_plan, submitted_sharding
from recnotebooks.perf.mlperf_systems import mlperf_layout
from recnotebooks.perf.result import CostResult
from recnotebooks.plan import Plan
from recnotebooks.published.convergence import EVAL_SAMPLES, evaluations
from recnotebooks.published.mlperf import TRAIN_SAMPLES, MLPerfResult
from recnotebooks.published.mlperf_results import MLPERF_DCNV2_RESULTS
from recnotebooks.published.runs import PUBLISHED_THROUGHPUTS, TORCHREC_README_ROWS, TORCHREC_UVM

__all__ = [
    "CPU_SETUP",
    "MLPERF_RUNS",
    "MLPERF_SETUP",
    "PUBLISHED_RUNS",
    "PublishedRun",
    "estimate_mlperf",
    "estimate_run",
    "mlperf_seconds",
    "mlperf_throughput",
    "torchrec_uvm_model",
]


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
    nodes: int = 1
    sparse_optimizer: str = "rowwise_adagrad"
    implementation: str = "torchrec"  #: whose step is priced (``estimate``'s ``implementation``)
    plan: Callable[[], Plan] | None = None  #: the plan the run used; None: the model's planner
    mlperf: MLPerfResult | None = None  #: the MLPerf result it stands for (throughput, minutes, epochs)
    exchange: str | None = None  #: how HugeCTR's pooled embeddings cross nodes (``estimate``'s ``exchange``)


_A100 = partial(hardware, "dgx_a100")
_EARLY = (
    "the paper's early reference implementation; the model prices today's eager PyTorch with fused "
    "embeddings, so it is far faster: direction only"
)
_PUBLISHED = {t.label: t for t in PUBLISHED_THROUGHPUTS}


def _run(
    label: str, config: Callable[[], DLRMConfig], hw: Callable[[], Hardware], **setup: str
) -> PublishedRun:
    """The published throughput ``label`` (:data:`~recnotebooks.published.runs.PUBLISHED_THROUGHPUTS`)
    with how the model is set up to match it."""
    t = _PUBLISHED[label]
    return PublishedRun(
        t.label, t.source, config, hw, t.gpus, t.batch_size, t.samples_per_s, nodes=t.nodes, **setup
    )


PUBLISHED_RUNS: tuple[PublishedRun, ...] = (
    _run("TorchRec 8xA100 @2k", partial(preset, "mlperf_v1"), _A100),
    _run("TorchRec 8xA100 @16k", partial(preset, "mlperf_v1"), _A100),
    _run("TorchRec README 4xA100 @16k", _torchrec_readme, _A100),
    _run("TorchRec README 8xA100 @2k", _torchrec_readme, _A100),
    _run("TorchRec README 8xA100 @16k", _torchrec_readme, _A100),
    _run(
        "TorchRec README 8xA100 @64k",
        _torchrec_readme,
        _A100,
        note="fp32 top-MLP GEMMs bound the model here; priced with TF32 it is 1.03",
    ),
    _run("NVIDIA 1xV100 FP32 @32k", _nvidia_terabyte, _v100_32gb),
    _run(
        "NVIDIA 1xV100 AMP @32k",
        _nvidia_terabyte,
        _v100_32gb,
        dtype="amp_fp16",
        note="priced as AMP (amp_fp16): NVIDIA's README says 'mixed precision training with static loss "
        "scaling for the bottom and top MLPs while embedding tables are stored in FP32 format' (apex AMP O2 "
        "over the MLPs). Still too fast: the model prices fused embedding kernels and tensor-core GEMMs near "
        "peak, not 2020's 26 separate nn.Embedding lookups; as pure fp16 it was 2.30x",
    ),
    _run(
        "DLRM paper 1xV100 @2k",
        partial(preset, "dlrm_benchmark"),
        partial(hardware, "big_basin"),
        note=_EARLY,
    ),
    _run(
        "DLRM paper 2xXeon 6138 @2k",
        partial(preset, "dlrm_benchmark"),
        partial(hardware, "cpu_cluster"),
        note=_EARLY,
    ),
)


def estimate_run(run: PublishedRun) -> CostResult:
    """The model's step for ``run``: :func:`~recnotebooks.perf.cost.estimate` set up as the run
    says (its hardware, GPUs and nodes, batch, precision, optimizer, implementation and plan)."""
    return estimate(
        run.config(),
        run.hardware(),
        batch_size=run.batch_size,
        gpus=run.gpus,
        nodes=run.nodes,
        dtype=run.dtype,
        sparse_optimizer=run.sparse_optimizer,
        implementation=run.implementation,
        plan=run.plan() if run.plan else None,
        exchange=run.exchange,
    )


# ----- MLPerf Training's DLRM-DCNv2, v3.0 to v5.1 ------------------------------------------------
#: How the model is set up for every MLPerf run alike (global choices, none per run or system):
#: NVIDIA's HugeCTR code, which every GPU submission ran (``implementation="hugectr"``:
#: :data:`~recnotebooks.perf.components.ops.HUGECTR`), mixed precision (its configs set
#: ``USE_MIXED_PRECISION=true``: ``amp_fp16``), exact Adagrad on the tables (the logs'
#: ``opt_name``), and the plan: on several nodes HugeCTR's as each submission's config set it
#: (:func:`~recnotebooks.perf.mlperf_plan.submitted_sharding` of the run's round, planned by
#: :func:`~recnotebooks.perf.mlperf_plan.hugectr_plan`, its exchange as that round's ``train.py`` picks it:
#: :func:`_plan_of`); on one node :func:`~recnotebooks.perf.mlperf_plan.mlperf_plan`'s rule.
MLPERF_SETUP: dict[str, str] = {
    "implementation": "hugectr",
    "dtype": "amp_fp16",
    "sparse_optimizer": "adagrad",
}
#: Intel's CPU-only submission (v3.1, 4 nodes of two Xeon 8480+) as the model prices it: eager
#: PyTorch (its TorchRec-based training script), bf16 GEMMs with fp32 master weights (it calls
#: ``ipex.optimize(..., dtype=torch.bfloat16)``), exact Adagrad, and no pipeline: its ``_train``
#: loop runs the forward (with the embeddings' all-to-all), the backward and ``optimizer.step()``
#: one after another, so :func:`mlperf_throughput` prices its steps at ``step_time``, not at
#: TorchRec's pipelined ``step_time_overlap``:
#: https://github.com/mlcommons/training_results_v3.1/tree/main/Intel/benchmarks/dlrm_v2/torchrec_cpu
#: (``_train``: https://github.com/mlcommons/training_results_v3.1/blob/main/Intel/benchmarks/dlrm_v2/torchrec_cpu/dlrm_main_mlperf.py)
CPU_SETUP: dict[str, str] = {"implementation": "torchrec", "dtype": "amp_bf16", "sparse_optimizer": "adagrad"}


def mlperf_seconds(
    result: CostResult, epochs: float, global_batch: int, overlapped: bool = True
) -> tuple[float, float]:
    """``(training, evaluation)`` seconds of an MLPerf run of ``epochs`` epochs of Criteo 1TB at
    ``global_batch`` with the modeled step ``result``: its training steps at the step overlapped as
    HugeCTR overlaps communication with compute (``step_time_overlap``), or, with
    ``overlapped=False``, at the step's components one after another (``step_time``: a training loop
    that runs forward, backward and the optimizer in turn, as :data:`CPU_SETUP`'s), and its
    evaluations (:func:`recnotebooks.published.convergence.evaluations`), each
    :data:`~recnotebooks.published.convergence.EVAL_SAMPLES` samples through the forward pass: each
    rank's embedding lookups, a third of its MLP and interaction time (forward of forward + two
    backward GEMMs) and half its all-to-all."""
    samples = epochs * TRAIN_SAMPLES
    steps = math.ceil(samples / global_batch)
    forward = max(
        c["embedding_forward"] + (c["bottom_mlp"] + c["top_mlp"] + c["interaction"]) / 3 + c["all_to_all"] / 2
        for c in result.per_rank
    )
    step = result.step_time_overlap if overlapped else result.step_time
    return steps * step, evaluations(epochs) * EVAL_SAMPLES / global_batch * forward


def mlperf_throughput(result: CostResult, run: MLPerfResult) -> float:
    """Samples per second over a whole MLPerf run, as the logs count them: the run's samples
    (its median epochs to the target) over its training and evaluation time (:func:`mlperf_seconds`):
    a GPU run's steps overlapped as HugeCTR runs them, the CPU-only run's one phase after another,
    as its training loop runs them (:data:`CPU_SETUP`)."""
    epochs = statistics.median(run.epochs_to_target)
    overlapped = run.accelerators_per_node > 0
    return epochs * TRAIN_SAMPLES / sum(mlperf_seconds(result, epochs, run.global_batch_size, overlapped))


def _sharding(m: MLPerfResult) -> tuple[str, int, int, HugeCTRSharding]:
    """``m``'s layout (:func:`mlperf_layout`) and HugeCTR's settings as its round's configs give them."""
    preset_name, gpus, nodes = mlperf_layout(m.accelerator, m.accelerators_per_node, m.nodes, m.host_cpu)
    return preset_name, gpus, nodes, submitted_sharding(preset_name, gpus, nodes, m.round)


def _exchange(sharding: HugeCTRSharding) -> str:
    return "hierarchical" if sharding.hierarchical else "flat"


def _plan_of(m: MLPerfResult) -> tuple[Callable[[], Plan], str | None]:
    """The plan ``m`` is priced with and its exchange: on several nodes HugeCTR's plan with the settings
    of ``m``'s round's configs (``auto`` over a GB200 rack's 64 GPUs, exchanged flat from v5.0;
    ``hier_auto`` over 8 or 16 DGX nodes, hierarchically), on one node :func:`mlperf_plan`'s rule (the
    as-submitted single-node plans, priced by :func:`hugectr_plan` too, move the fit rounds' MAPE from
    18.5% to 15.8% and the held-out rounds' from 8.5% to 9.9%; not yet the model of record: issue 40)."""
    preset_name, gpus, nodes, sharding = _sharding(m)
    cfg = preset("mlperf_dcnv2")
    if nodes == 1:
        return partial(mlperf_plan, cfg, gpus, nodes, hardware(preset_name).hbm_bytes), None
    return partial(hugectr_plan, cfg, gpus, nodes, sharding), _exchange(sharding)


def _mlperf_run(m: MLPerfResult) -> PublishedRun:
    preset_name, gpus, nodes, _ = _sharding(m)
    cfg = partial(preset, "mlperf_dcnv2")
    plan, exchange = _plan_of(m)
    return PublishedRun(
        label=f"{m.round} {m.submitter} {m.system}",
        source=m.source,
        config=cfg,
        hardware=partial(hardware, preset_name),
        gpus=gpus,
        nodes=nodes,
        batch_size=m.global_batch_size,
        samples_per_s=float(m.samples_per_s),  # type: ignore[arg-type]
        dtype=MLPERF_SETUP["dtype"],
        sparse_optimizer=MLPERF_SETUP["sparse_optimizer"],
        implementation=MLPERF_SETUP["implementation"],
        plan=plan,
        mlperf=m,
        exchange=exchange,
        note=f"{m.accelerator}, {m.accelerators_per_node} x {m.nodes} nodes, modeled as {preset_name}",
    )


#: One :class:`PublishedRun` per MLPerf DLRM-DCNv2 GPU result that logged its throughput
#: (:data:`~recnotebooks.published.mlperf_results.MLPERF_DCNV2_RESULTS`), the runs a round republished from an
#: earlier one left out; rounds in :data:`~recnotebooks.published.mlperf.HELD_OUT_ROUNDS` are the
#: held-out test (never used to fit :data:`~recnotebooks.perf.components.ops.HUGECTR`).
MLPERF_RUNS: tuple[PublishedRun, ...] = tuple(
    _mlperf_run(m)
    for m in MLPERF_DCNV2_RESULTS
    if m.samples_per_s is not None and m.accelerators_per_node > 0 and not m.republished
)


def estimate_mlperf(m: MLPerfResult) -> CostResult:
    """``m``'s step as the model prices it: a GPU run as :data:`MLPERF_SETUP` with MLPerf's plan, the
    CPU-only run as :data:`CPU_SETUP`."""
    cfg = preset("mlperf_dcnv2")
    if m.accelerators_per_node == 0:
        preset_name, gpus, nodes = mlperf_layout(m.accelerator, m.accelerators_per_node, m.nodes, m.host_cpu)
        return estimate(cfg, preset_name, batch_size=m.global_batch_size, gpus=gpus, nodes=nodes, **CPU_SETUP)
    preset_name, gpus, nodes, _ = _sharding(m)
    plan, exchange = _plan_of(m)
    return estimate(
        cfg, preset_name, batch_size=m.global_batch_size, gpus=gpus, nodes=nodes, plan=plan(),
        exchange=exchange, **MLPERF_SETUP,
    )  # fmt: skip


# ----- TorchRec's UVM / UVM-caching benchmark (published: recnotebooks.published.runs.TORCHREC_UVM) -----
def torchrec_uvm_model(halve: bool) -> DLRMConfig:
    """The TorchRec DLRM tables with 64 lookups each and minimal MLPs (the benchmark trains the
    embeddings alone); ``halve``: the five tables over 10M rows halved, as the cached run does."""
    base = preset("mlperf_v1")
    rows = [n // 2 if halve and n >= 10_000_000 else n for n in TORCHREC_README_ROWS]
    tables = tuple(
        dataclasses.replace(tc, num_rows=n, pooling_factor=float(TORCHREC_UVM["pooling"]))
        for tc, n in zip(base.tables, rows, strict=True)
    )
    return base.replace(tables=tables, num_dense=1, bottom_mlp=(128,), top_mlp=(1,), name="torchrec_uvm")
