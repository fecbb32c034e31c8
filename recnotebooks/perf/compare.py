"""The model against what others published: published training throughputs beside the model's.

The published numbers are data in :mod:`recnotebooks.published` (``runs``: the TorchRec, NVIDIA
and DLRM-paper runs; ``mlperf_results``: MLPerf's); how the model is set up to match each run is
:mod:`recnotebooks.perf.mlperf_setup`; this module compares.

The calibration and ``recnb validate`` check the model against steps measured on this
machine; these are the checks against real GPUs, which this machine does not have. Each
:class:`~recnotebooks.perf.mlperf_setup.PublishedRun` says where its number comes from and how the
model is set up to match it; :func:`compare_published` gives one tidy row per run (published
samples/s, the model's, their ratio). The published numbers are what their authors measured with
their software of the time; the model prices our eager PyTorch DLRM on the same hardware, so a
ratio far from 1 says as much about the software as about the model (see each ``note``).
Priced with TF32 (PyTorch's default before 1.12) instead of fp32, the TorchRec ratios would be
1.03–2.27.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from functools import partial

from recnotebooks.checks import check_fraction, check_type
from recnotebooks.config import DLRMConfig, preset
from recnotebooks.perf.components.ops import HUGECTR
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.mlperf_setup import (
    MLPERF_RUNS,
    PUBLISHED_RUNS,
    PublishedRun,
    estimate_mlperf,
    estimate_run,
    mlperf_seconds,
    mlperf_throughput,
    torchrec_uvm_model,
)
from recnotebooks.perf.mlperf_systems import mlperf_layout
from recnotebooks.perf.placement import _percent
from recnotebooks.perf.result import overlapped_step
from recnotebooks.published.convergence import evaluations
from recnotebooks.published.mlperf import FIT_ROUNDS, HELD_OUT_ROUNDS, TRAIN_SAMPLES, MLPerfResult
from recnotebooks.published.mlperf_results import MLPERF_DCNV2_RESULTS
from recnotebooks.published.runs import TORCHREC_UVM

__all__ = [
    "MLPERF_BAND",
    "MLPERF_RATIOS",
    "compare_published",
    "fit_hugectr_step",
    "mlperf_by_system",
    "mlperf_errors",
    "mlperf_outside_band",
    "mlperf_phases",
    "mlperf_ratios",
    "modeled_phases",
    "published_utilisation",
    "torchrec_uvm_example",
]


def compare_published(runs: Sequence[PublishedRun] = PUBLISHED_RUNS) -> list[dict[str, object]]:
    """One row per run: ``published`` and ``modeled`` samples/s, ``ratio`` (modeled over
    published), whether the model says it fits, and the run's source and note. An MLPerf run
    (:data:`~recnotebooks.perf.mlperf_setup.MLPERF_RUNS`) is compared as MLPerf logs it: samples
    over the whole run, its evaluations included
    (:func:`~recnotebooks.perf.mlperf_setup.mlperf_throughput`), and adds its ``round``, whether
    that round is ``held_out`` and its ``published_minutes`` (MLPerf's score) beside the
    ``modeled_minutes``."""
    rows = []
    for run in runs:
        r = estimate_run(run)
        modeled = r.throughput if run.mlperf is None else mlperf_throughput(r, run.mlperf)
        row: dict[str, object] = {
            "run": run.label,
            "published": run.samples_per_s,
            "modeled": modeled,
            "ratio": modeled / run.samples_per_s,
            "fits": r.fits,
            "dtype": run.dtype,
            "bound_by": max(r.breakdown(), key=r.breakdown().get),
            "source": "modeled vs published",
            "reference": run.source,
            "note": run.note,
        }
        if run.mlperf is not None:
            m = run.mlperf
            row.update(
                round=m.round,
                held_out=m.round in HELD_OUT_ROUNDS,
                accelerator=m.accelerator,
                gpus=run.gpus * run.nodes,
                published_minutes=m.score_minutes,
                modeled_minutes=m.samples_to_target / modeled / 60,
            )
        rows.append(row)
    return rows


def mlperf_errors(rows: Sequence[Mapping[str, object]]) -> dict[str, float]:
    """Mean absolute percentage error of ``rows`` (:func:`compare_published` of MLPerf runs) over
    the fit rounds (``fit_mape``) and the held-out ones (``held_out_mape``), with their counts."""
    out: dict[str, float] = {}
    for key, held in (("fit", False), ("held_out", True)):
        errs = [abs(float(r["ratio"]) - 1) for r in rows if bool(r.get("held_out")) is held and "round" in r]
        out[f"{key}_mape"] = statistics.mean(errs) if errs else math.nan
        out[f"{key}_runs"] = float(len(errs))
    return out


def fit_hugectr_step(runs: Sequence[PublishedRun] | None = None, hi: float = 5e-3) -> float:
    """The per-step cost of HugeCTR's CUDA-graphed step (:data:`~recnotebooks.perf.components.ops.
    HUGECTR`'s ``step_s``) that best fits the fit rounds' runs: least squares of the log ratio of
    modeled to published throughput, over ``[0, hi]`` seconds (golden-section search on the
    convex objective). Run once; its result is the constant, stated where it is set."""
    runs = [r for r in (MLPERF_RUNS if runs is None else runs) if r.mlperf and r.mlperf.round in FIT_ROUNDS]
    priced = []
    for run in runs:
        res = estimate_run(run)
        exposed = res.exposed_communication or [0.0] * len(res.per_rank)
        priced.append((res, list(zip(res.per_rank, exposed, strict=True)), run))

    def loss(s0: float) -> float:
        total = 0.0
        for res, ranks, run in priced:  # the step as estimate prices it with s0 in place of step_s
            step = max(overlapped_step(c, e, s0 - HUGECTR["step_s"]) for c, e in ranks)
            shifted = dataclasses.replace(res, step_time_overlap=step)
            total += math.log(mlperf_throughput(shifted, run.mlperf) / run.samples_per_s) ** 2  # type: ignore[arg-type]
        return total

    lo, up = 0.0, hi
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = up - g * (up - lo), lo + g * (up - lo)
        if loss(a) <= loss(b):
            up = b
        else:
            lo = a
    return (lo + up) / 2


#: The issue's four ratios, each a pair of MLPerf results (round, submitter, system): the first's
#: throughput (or, for the CPU cluster, time to train) over the second's.
MLPERF_RATIOS: dict[str, tuple[tuple[str, str, str], tuple[str, str, str]]] = {
    "H200 / H100, one 8-GPU node": (("v4.0", "NVIDIA", "h200_ngc24.04_merlin_hugectr"),
                                    ("v4.0", "NVIDIA", "eos_ngc24.04_merlin_hugectr")),
    "8 GPUs in one NVSwitch node / two 4-GPU nodes": (("v3.1", "Dell", "XE9680x8H100-SXM-80GB"),
                                                       ("v3.1", "Dell", "2xXE8640x4H100-SXM-80GB")),
    "64 A100s / 8 A100s": (("v4.0", "JuniperNetworks", "a100_n8_ngc23.09_merlin_hugectr"),
                           ("v3.0", "Dell", "XE9680x8A100-SXM-80GB")),
    "8xH100 node / 4-node CPU cluster (time to train)": (("v3.1", "Intel", "4-nodes-SPR-pytorch"),
                                                          ("v3.1", "NVIDIA", "eos_ngc23.09_merlin_hugectr")),
}  # fmt: skip


def _find(key: tuple[str, str, str]) -> MLPerfResult:
    (m,) = [m for m in MLPERF_DCNV2_RESULTS if (m.round, m.submitter, m.system) == key]
    return m


def mlperf_phases(results: Sequence[MLPerfResult] | None = None) -> list[dict[str, object]]:
    """Each result's run phase by phase, **modeled** (:func:`modeled_phases`) beside its log
    (``training_samples_per_s``, ``seconds_per_eval``): the training between evaluations and one
    evaluation, each as ``*_time_ratio``, modeled over logged seconds (above 1: the model is
    slower than the run), with ``held_out``, ``accelerators`` (0 for the CPU-only run) and
    ``label``. ``results`` defaults to the runs :data:`MLPERF_RUNS` prices and Intel's CPU-only
    run."""
    if results is None:
        results = [r.mlperf for r in MLPERF_RUNS if r.mlperf is not None]
        results += [m for m in MLPERF_DCNV2_RESULTS if m.accelerators_per_node == 0 and not m.republished]
    rows: list[dict[str, object]] = []
    for m in results:
        if m.training_samples_per_s is None or m.seconds_per_eval is None:
            continue
        mod = modeled_phases(m)
        rows.append(
            {
                "label": f"{m.round} {m.submitter} {m.system}",
                "round": m.round,
                "held_out": m.round in HELD_OUT_ROUNDS,
                "accelerators": m.accelerators,
                "modeled_training_samples_per_s": mod["training_samples_per_s"],
                "logged_training_samples_per_s": m.training_samples_per_s,
                "train_time_ratio": m.training_samples_per_s / mod["training_samples_per_s"],
                "modeled_eval_s": mod["eval_s"],
                "logged_eval_s": m.seconds_per_eval,
                "eval_time_ratio": mod["eval_s"] / m.seconds_per_eval,
                "source": "modeled vs published (the run's log)",
            }
        )
    return rows


def modeled_phases(m: MLPerfResult) -> dict[str, float]:
    """``m``'s run phase by phase as the model prices it (:func:`mlperf_seconds`), at its median
    epochs to the target: its ``training_samples_per_s`` (the samples over its training steps'
    time), ``eval_s`` per evaluation, its ``evaluations`` (one each 0.05 epoch) and the run's
    ``minutes``."""
    r = estimate_mlperf(m)
    epochs = statistics.median(m.epochs_to_target)
    train, evals = mlperf_seconds(r, epochs, m.global_batch_size, overlapped=m.accelerators_per_node > 0)
    n = evaluations(epochs)
    return {"training_samples_per_s": epochs * TRAIN_SAMPLES / train, "eval_s": evals / n,
            "evaluations": float(n), "minutes": (train + evals) / 60}  # fmt: skip


def mlperf_ratios() -> list[dict[str, object]]:
    """The four ratios of :data:`MLPERF_RATIOS`, published (MLPerf's scores: time to train of the
    second over the first, which is the throughput ratio at equal samples) beside modeled, and
    ``modeled / published`` (the target: within 20%, 0.8 to 1.2)."""
    rows = []
    for name, (a, b) in MLPERF_RATIOS.items():
        ma, mb = _find(a), _find(b)
        ta, tb = modeled_phases(ma)["minutes"], modeled_phases(mb)["minutes"]
        if "time to train" in name:  # the faster is the second: its speed-up over the first
            published, modeled = ma.score_minutes / mb.score_minutes, ta / tb
        else:  # samples per minute of the first over the second's
            published = (ma.samples_to_target / ma.score_minutes) / (mb.samples_to_target / mb.score_minutes)
            modeled = (ma.samples_to_target / ta) / (mb.samples_to_target / tb)
        rows.append(
            {
                "ratio": name,
                "published": published,
                "modeled": modeled,
                "modeled_over_published": modeled / published,
                "source": "modeled vs published",
                "runs": f"{a} / {b}",
            }
        )
    return rows


def _short(accelerator: str) -> str:
    """``"NVIDIA H100-SXM5-80GB"`` -> ``"H100-SXM5-80GB"``; Blackwell's names by their part."""
    name = accelerator.replace("NVIDIA ", "")
    return name[name.index("(") + 1 : name.rindex(")")] if "(" in name else name


def mlperf_by_system(rows: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """:func:`compare_published`'s MLPerf rows grouped by system (accelerator, GPUs per node x
    nodes) and by fit or held-out rounds: one row each with the ``runs`` it holds, the median
    ``published`` and ``modeled`` samples/s and the median ``ratio`` (modeled over published),
    ``label`` naming it and its runs (held-out ones marked), sorted by fit or held out, then
    accelerator and scale."""
    groups: dict[tuple[str, int, bool], list[Mapping[str, object]]] = {}
    for r in rows:
        if "round" not in r:
            continue
        run = next(x for x in MLPERF_RUNS if x.label == r["run"])
        per_node = run.mlperf.accelerators_per_node  # type: ignore[union-attr]
        key = (
            f"{_short(str(r['accelerator']))} {per_node}x{run.mlperf.nodes}",
            int(r["gpus"]),
            bool(r["held_out"]),
        )
        groups.setdefault(key, []).append(r)
    out = []
    for (name, gpus, held), rs in sorted(
        groups.items(), key=lambda kv: (kv[0][2], kv[0][0].split()[0], kv[0][1])
    ):
        published = statistics.median(float(r["published"]) for r in rs)
        runs = f"{len(rs)} run{'s' * (len(rs) > 1)}"
        tag = " (held out)" if held else ""
        out.append(
            {
                "label": f"{name}{tag}, {runs}",
                "system": name,
                "gpus": gpus,
                "held_out": held,
                "runs": len(rs),
                "published": published,
                "modeled": statistics.median(float(r["modeled"]) for r in rs),
                "ratio": statistics.median(float(r["ratio"]) for r in rs),
                "source": "modeled vs published",
            }
        )
    return out


#: The band notebook 02's MLPerf chart shades: the model within 1.25x of a system's published
#: throughput either way (0.8 to 1.25; a ratio is modeled over published).
MLPERF_BAND: tuple[float, float] = (0.8, 1.25)


def mlperf_outside_band(
    by_system: Sequence[Mapping[str, object]], band: tuple[float, float] = MLPERF_BAND
) -> list[dict[str, object]]:
    """The rows of :func:`mlperf_by_system` whose median ``ratio`` lies outside ``band`` (the
    systems notebook 02's chart draws outside its shaded band), in the same order."""
    lo, hi = band
    return [dict(r) for r in by_system if not lo <= float(r["ratio"]) <= hi]  # type: ignore[arg-type]


def published_utilisation(
    m: MLPerfResult, config: DLRMConfig | None = None, dtype: str = "bf16"
) -> dict[str, float]:
    """What a published MLPerf throughput says about its GPUs, by arithmetic a learner can redo:
    the step (global batch over samples/s, evaluations included), the model's FLOPs per sample
    (``config``: :func:`~recnotebooks.config.preset` ``"mlperf_dcnv2"``) times samples/s, and that
    over the GPUs' dense ``dtype`` peak (their preset's)."""
    cfg = preset("mlperf_dcnv2") if config is None else config
    if m.samples_per_s is None or m.accelerators_per_node == 0:
        raise ValueError(
            f"m must be a GPU result with a logged throughput, got {m.round} {m.submitter} {m.system}"
        )
    preset_name, gpus, nodes = mlperf_layout(m.accelerator, m.accelerators_per_node, m.nodes, m.host_cpu)
    flops = cfg.total_flops_per_sample() * m.samples_per_s
    peak = hardware(preset_name).flops(dtype) * gpus * nodes
    return {
        "step_ms": 1e3 * m.global_batch_size / m.samples_per_s,
        "flops_per_s": flops,
        "peak_flops_per_s": peak,
        "utilisation": flops / peak,
        "gpus": float(gpus * nodes),
    }


def torchrec_uvm_example(hit_rates: Sequence[float] = (0.2, 0.9, 0.99)) -> list[dict[str, object]]:
    """TorchRec's published UVM example (:data:`~recnotebooks.published.runs.TORCHREC_UVM`,
    ``source="published"``) beside what our model says for it (``source="modeled"``): one Big
    Basin V100 (16 GB), the TorchRec DLRM tables
    (:data:`~recnotebooks.published.runs.TORCHREC_README_ROWS`, dim 128, 64 lookups per table and
    sample) with minimal MLPs (the benchmark trains the embeddings alone), SGD; all tables in host
    DRAM over UVM, or, with the five tables over 10M rows halved, behind a cache at each of
    ``hit_rates`` (each in [0, 1]). One row per case: ``case``, ``seconds_per_epoch``, ``source``,
    ``fits``."""

    check_type("hit_rates", hit_rates, (list, tuple), "a list or tuple of hit rates")
    hits = [check_fraction(f"hit_rates[{i}]", h) for i, h in enumerate(hit_rates)]
    t = TORCHREC_UVM

    def row(case: str, seconds: float, source: str, fits: bool = True) -> dict[str, object]:
        return {"case": case, "seconds_per_epoch": seconds, "source": source, "fits": fits}

    rows = [row("UVM (published)", t["uvm_s"], "published"),
            row("UVM cache (published)", t["uvm_cache_s"], "published")]  # fmt: skip
    price = partial(estimate, hw="big_basin", batch_size=int(t["batch_size"]), sparse_optimizer="sgd")
    host = price(torchrec_uvm_model(False), placement="host")
    rows.append(row("UVM (modeled)", host.step_time * t["batches"], "modeled", host.fits))
    cached = torchrec_uvm_model(True)
    for h in hits:
        r = price(cached, placement="cache", cache_hit_rate=h)
        note = "" if r.fits else "; would not fit"
        rows.append(
            row(f"cache at {_percent(h)} hits (modeled{note})", r.step_time * t["batches"], "modeled", r.fits)
        )
    return rows
