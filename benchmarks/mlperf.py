"""The efficiency model against MLPerf Training's DLRM-DCNv2 results (v3.0-v5.1), and time to
train from MLPerf's convergence curve. Every figure is **modeled** beside **published**; nothing is
measured here, so the figures do not move with this machine's load.

    python benchmarks/mlperf.py            # the by-system table, the errors, the four ratios
    python benchmarks/mlperf.py --runs     # and every run
    python benchmarks/mlperf.py --fit      # refit HugeCTR's per-step constant on the fit rounds
    python benchmarks/mlperf.py --phases   # the CPU-cluster ratio's two runs, phase by phase
"""

from __future__ import annotations

import argparse
import statistics

from recnotebooks.perf import convergence as cv
from recnotebooks.perf.components.ops import HUGECTR
from recnotebooks.perf.mlperf import MLPERF_DCNV2_RESULTS
from recnotebooks.perf.published import (
    MLPERF_RUNS,
    compare_published,
    fit_hugectr_step,
    mlperf_by_system,
    mlperf_errors,
    mlperf_ratios,
    modeled_phases,
)


def time_to_train_check() -> None:
    """Fed each submission's logged throughput, the curve's time to train against its score."""
    errs: dict[bool, list[float]] = {True: [], False: []}
    for m in MLPERF_DCNV2_RESULTS:
        curve = cv.convergence_curve(m.round)
        if m.samples_per_s is None or not curve[0][0] <= m.global_batch_size <= curve[-1][0]:
            continue
        predicted = cv.time_to_train(m.samples_per_s, m.global_batch_size, m.round)
        errs[m.submitter == "NVIDIA"].append(predicted / m.score_minutes - 1)
    for nvidia, e in errs.items():
        who = "NVIDIA's" if nvidia else "the others'"
        print(
            f"time to train from the logged throughput, {who} {len(e)} runs: worst {max(map(abs, e)):.1%}, "
            f"median |error| {statistics.median(map(abs, e)):.1%}"
        )


#: The two runs of the ratio "8xH100 node / 4-node CPU cluster", phase by phase as their logs time
#: them (**published**): medians over each system's ten runs of the seconds from one ``eval_stop`` to
#: the next ``eval_start`` (0.05 epoch of training) and from ``eval_start`` to ``eval_stop`` (one
#: evaluation of 89,137,319 samples), read from ``results/<system>/dlrm_dcnv2/result_0..9.txt`` of
#: https://github.com/mlcommons/training_results_v3.1 (2026-12-04).
LOGGED_PHASES = {
    ("v3.1", "NVIDIA", "eos_ngc23.09_merlin_hugectr"): {"train_s": 13.74, "eval_s": 1.73},
    ("v3.1", "Intel", "4-nodes-SPR-pytorch"): {"train_s": 639.1, "eval_s": 181.6},
}


def phases() -> None:
    """The CPU-cluster ratio's two runs, modeled beside their logs, phase by phase."""
    for key, logged in LOGGED_PHASES.items():
        (m,) = [m for m in MLPERF_DCNV2_RESULTS if (m.round, m.submitter, m.system) == key]
        mod = modeled_phases(m)
        train, ev = (
            f"modeled {mod[k]:.2f} s, logged {logged[k]:.2f} s ({mod[k] / logged[k]:.2f}x)" for k in logged
        )
        print(
            f"{key[1]} {key[2]}: 0.05 epoch of training {train}; one evaluation {ev}; "
            f"run modeled {mod['minutes']:.1f} min, published {m.score_minutes:.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", action="store_true", help="print every run")
    parser.add_argument("--fit", action="store_true", help="refit HUGECTR['step_s'] on the fit rounds")
    parser.add_argument("--phases", action="store_true", help="the CPU-cluster ratio's runs, phase by phase")
    args = parser.parse_args()
    rows = compare_published(MLPERF_RUNS)
    if args.runs:
        for r in rows:
            print(
                f"{r['run']:<62} {r['gpus']:>4} GPUs  published {r['published'] / 1e6:6.2f} M/s  "
                f"MODELED {r['modeled'] / 1e6:6.2f} M/s  ratio {r['ratio']:.2f}  {r['bound_by']}"
            )
    for g in mlperf_by_system(rows):
        print(f"{g['label']:<48} published {g['published'] / 1e6:6.2f} M/s  ratio {g['ratio']:.2f}")
    e = mlperf_errors(rows)
    print(
        f"MAPE: fit rounds v3.0-v4.0 {e['fit_mape']:.1%} ({e['fit_runs']:.0f} runs; target <= 20%), "
        f"held out v4.1-v5.1 {e['held_out_mape']:.1%} ({e['held_out_runs']:.0f} runs)"
    )
    for r in mlperf_ratios():
        met = "met" if 0.8 <= r["modeled_over_published"] <= 1.2 else "not met"
        print(
            f"{r['ratio']:<50} published {r['published']:6.2f}  modeled {r['modeled']:6.2f}  "
            f"modeled/published {r['modeled_over_published']:.2f} (within 20%: {met})"
        )
    time_to_train_check()
    if args.phases:
        phases()
    if args.fit:
        fitted = fit_hugectr_step()
        print(f"HUGECTR['step_s'] fitted on v3.0-v4.0: {fitted:.3g} s (set: {HUGECTR['step_s']:.3g} s)")


if __name__ == "__main__":
    main()
