"""The efficiency model against MLPerf Training's DLRM-DCNv2 results (v3.0-v5.1), and time to
train from MLPerf's convergence curve. Every figure is **modeled** beside **published**; nothing is
measured here, so the figures do not move with this machine's load.

    python benchmarks/mlperf.py            # the by-system table, the errors, the four ratios
    python benchmarks/mlperf.py --runs     # and every run
    python benchmarks/mlperf.py --fit      # refit HugeCTR's per-step constant on the fit rounds
    python benchmarks/mlperf.py --phases   # training and evaluation apart, against each run's log
    python benchmarks/mlperf.py --nccl     # the collectives NCCL's model picks in each multi-GPU run
"""

from __future__ import annotations

import argparse
import statistics

from recnotebooks.perf.compare import (
    MLPERF_RATIOS,
    compare_published,
    fit_hugectr_step,
    mlperf_by_system,
    mlperf_errors,
    mlperf_phases,
    mlperf_ratios,
)
from recnotebooks.perf.components.ops import HUGECTR
from recnotebooks.perf.mlperf_setup import MLPERF_RUNS, PublishedRun, estimate_run
from recnotebooks.published import convergence as cv
from recnotebooks.published.mlperf_results import MLPERF_DCNV2_RESULTS


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


def phases(show_runs: bool) -> None:
    """Every run phase by phase, modeled beside its log: the training between evaluations and one
    evaluation (time ratios: modeled over logged seconds), their mean absolute errors, and the
    CPU-cluster ratio's two runs."""
    rows = mlperf_phases()
    for r in rows if show_runs else []:
        train = (
            f"{float(r['modeled_training_samples_per_s']) / 1e6:7.3f} / "  # type: ignore[arg-type]
            f"{float(r['logged_training_samples_per_s']) / 1e6:7.3f} M/s"  # type: ignore[arg-type]
        )
        ev = f"{r['modeled_eval_s']:7.2f} / {r['logged_eval_s']:7.2f} s"
        print(
            f"{r['label']:<62} modeled / logged: training {train} (time {r['train_time_ratio']:.2f}x)   "
            f"evaluation {ev} ({r['eval_time_ratio']:.2f}x)"
        )
    for held in (False, True):
        part = [r for r in rows if r["held_out"] is held and r["accelerators"]]
        train = statistics.mean(abs(float(r["train_time_ratio"]) - 1) for r in part)  # type: ignore[arg-type]
        ev = statistics.mean(abs(float(r["eval_time_ratio"]) - 1) for r in part)  # type: ignore[arg-type]
        which = "held out v4.1-v5.1" if held else "fit rounds v3.0-v4.0"
        print(
            f"phases, {which} ({len(part)} GPU runs), modeled time against logged: training between "
            f"evaluations off by {train:.1%} on average, one evaluation by {ev:.1%}"
        )
    _, pair = next((k, v) for k, v in MLPERF_RATIOS.items() if "CPU" in k)
    for key in pair:
        (r,) = [r for r in rows if r["label"] == " ".join(key)]
        print(
            f"{r['label']}: modeled time over logged, training {r['train_time_ratio']:.2f}x, "
            f"one evaluation {r['eval_time_ratio']:.2f}x"
        )


#: Ratios reported but no longer a target (issue 40): the 8xH100 node over Intel's 4-node CPU
#: cluster, whose miss is documented phase by phase (``--phases``: modeled over logged time,
#: Intel's evaluations 0.51x, its training 0.90x; the H100 node's training 1.16x and evaluations
#: 1.35x; BENCHMARKS.md).
RETIRED_RATIOS = ("8xH100 node / 4-node CPU cluster (time to train)",)
RETIRED = "reported, not a target"

#: The system classes the held-out table reports (issue 40): a run's GPUs in one node, in several
#: nodes of one NVLink domain (GB200 trays of one rack), or in several nodes over a network.
CLASSES = ("one node", "several nodes over a network", "one NVLink domain")


def system_class(run: PublishedRun) -> str:
    """The class of :data:`CLASSES` a run belongs to."""
    if run.nodes == 1:
        return CLASSES[0]
    return CLASSES[2] if run.hardware().nodes_per_domain >= run.nodes else CLASSES[1]


def by_class(rows: list[dict[str, object]]) -> None:
    """MAPE and the range of modeled / published per system class, fit rounds and held out."""
    runs = {r.label: r for r in MLPERF_RUNS}
    for cls in CLASSES:
        parts = []
        for held in (False, True):
            ratios = [
                float(r["ratio"])  # type: ignore[arg-type]
                for r in rows
                if "round" in r and bool(r["held_out"]) is held and system_class(runs[str(r["run"])]) == cls
            ]
            which = "held out" if held else "fit rounds"
            if not ratios:
                parts.append(f"{which}: none")
                continue
            mape = statistics.mean(abs(x - 1) for x in ratios)
            parts.append(f"{which} {mape:.1%} ({len(ratios)} runs, {min(ratios):.2f}-{max(ratios):.2f})")
        print(f"  {cls:<30} " + "; ".join(parts))


def nccl_choices() -> None:
    """Per multi-GPU run, how the slowest rank's collectives were priced: NCCL's pick, or the formula."""
    for run in MLPERF_RUNS:
        if run.gpus * run.nodes <= 1:
            continue
        picked = estimate_run(run).collective_choices()
        text = ", ".join(
            f"{k} {v.get('algorithm', 'alpha-beta')}/{v.get('protocol', '-')} "
            f"{float(v['seconds']) * 1e3:.3f} ms"  # type: ignore[arg-type]
            for k, v in picked.items()
        )
        print(f"{run.label:<62} {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", action="store_true", help="print every run")
    parser.add_argument("--fit", action="store_true", help="refit HUGECTR['step_s'] on the fit rounds")
    parser.add_argument(
        "--phases", action="store_true", help="training and evaluation apart, against each run's log"
    )
    parser.add_argument("--nccl", action="store_true", help="the collectives NCCL's model picks per run")
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
    print("per system class (mean |modeled / published - 1|):")
    by_class(rows)
    for r in mlperf_ratios():
        met = "met" if 0.8 <= r["modeled_over_published"] <= 1.2 else "not met"
        target = RETIRED if str(r["ratio"]) in RETIRED_RATIOS else f"within 20%: {met}"
        print(
            f"{r['ratio']:<50} published {r['published']:6.2f}  modeled {r['modeled']:6.2f}  "
            f"modeled/published {r['modeled_over_published']:.2f} ({target})"
        )
    time_to_train_check()
    if args.phases:
        phases(args.runs)
    if args.nccl:
        nccl_choices()
    if args.fit:
        fitted = fit_hugectr_step()
        print(f"HUGECTR['step_s'] fitted on v3.0-v4.0: {fitted:.3g} s (set: {HUGECTR['step_s']:.3g} s)")


if __name__ == "__main__":
    main()
