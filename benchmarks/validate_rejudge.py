"""Recorded ``recnb validate`` runs judged again by the model as this checkout prices it.

A run's host noise is in its measurements, so to compare two versions of the cost model, judge the
same runs with each: run this script in each checkout (or with ``PYTHONPATH`` pointing at another),
on the same reports. Each row keeps what it measured and is modeled again on the run's own
calibration at its speed (:func:`recnotebooks.measure.validate.remodel`). The calibration is the
report's ``model_hardware`` (``recnb validate --json`` keeps it), or, for a report written before
it did, the calibration file the run saved (``--calibration``, one per report, in order: set
``RECNB_CALIBRATION`` per run to keep each).

Printed: each row's measured step, the recorded model and error, the model now and its error; each
run's HSTU and whole MAPE recorded and now; over the runs, how many read closer now. MODELED twice,
MEASURED once.

Used (2026-12-06, evening) to judge the HSTU tables priced as DLRM's embeddings (e33592a) on the
20 runs of four ten-pass sets: HSTU MAPE 17 of 20 runs closer, mean 8.5% -> 7.2%
(docs/benchmarks-log.md, "HSTU's tables priced as a DLRM's embeddings").

Run: ``python benchmarks/validate_rejudge.py REPORT [REPORT ...]`` (``--calibration CAL [CAL ...]``,
one saved calibration per report, for older reports; ``--json`` for the figures as data). Takes a
second.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from recnotebooks.measure.validate import remodel
from recnotebooks.perf.hardware import load_calibration


def judge(report_path: Path, calibration: Path | None) -> dict[str, object]:
    """One report judged again: its rows and MAPEs, recorded and now."""
    recorded = json.loads(report_path.read_text())
    hw = None
    if calibration is not None:
        hw = load_calibration(calibration)
        if hw is None:
            raise SystemExit(f"--calibration {str(calibration)!r} holds no valid calibration")
    now = remodel(recorded, hw)
    rows = [
        {"config": r["config"], "measured_ms": r["measured_s"] * 1e3, "recorded_ms": r["modeled_s"] * 1e3,
         "recorded_error": r["error"], "now_ms": n.modeled_s * 1e3, "now_error": n.error}
        for r, n in zip(recorded["configs"], now.configs, strict=True)
    ]  # fmt: skip
    return {"report": str(report_path), "rows": rows,
            "recorded_hstu_mape": recorded.get("hstu_mape"), "now_hstu_mape": now.hstu_mape,
            "recorded_mape": recorded.get("mape"), "now_mape": now.mape}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", nargs="+", type=Path, help="recnb validate --json reports")
    p.add_argument("--calibration", nargs="*", type=Path, help="each report's saved calibration, in order")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args()
    cals = args.calibration or [None] * len(args.reports)
    if len(cals) != len(args.reports):
        raise SystemExit(f"--calibration takes one file per report: {len(args.reports)}, got {len(cals)}")
    runs = [judge(r, c) for r, c in zip(args.reports, cals, strict=True)]
    if args.json:
        print(json.dumps(runs, indent=1))
        return
    for run in runs:
        print(run["report"])
        for r in run["rows"]:  # type: ignore[attr-defined]
            print(f"  {r['config']:28s} measured {r['measured_ms']:8.2f} ms   "
                  f"recorded {r['recorded_ms']:8.2f} ({r['recorded_error']:+6.1%})   "
                  f"now {r['now_ms']:8.2f} ({r['now_error']:+6.1%})")  # fmt: skip
        hstu = ""
        if run["now_hstu_mape"] is not None:
            hstu = f"HSTU MAPE {run['recorded_hstu_mape']:.1%} -> {run['now_hstu_mape']:.1%}; "
        print(f"  {hstu}whole MAPE {run['recorded_mape']:.1%} -> {run['now_mape']:.1%}")
    with_hstu = [r for r in runs if r["now_hstu_mape"] is not None and r["recorded_hstu_mape"] is not None]
    if with_hstu:
        closer = sum(r["now_hstu_mape"] < r["recorded_hstu_mape"] for r in with_hstu)  # type: ignore[operator]
        before = statistics.mean(r["recorded_hstu_mape"] for r in with_hstu)  # type: ignore[misc]
        after = statistics.mean(r["now_hstu_mape"] for r in with_hstu)  # type: ignore[misc]
        print(f"HSTU rows: {closer} of {len(with_hstu)} runs closer now; "
              f"mean MAPE {before:.1%} -> {after:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
