"""``recnb validate``'s passes: ten against five, read from the same minutes; and the host's drift.

``recnb validate`` calibrates between its passes over the sweep (a calibration round, a pass, and
so on, :data:`~recnotebooks.measure.validate.REPEATS` times) and compares the model fitted to the
rounds' medians with the passes' medians. This benchmark runs that procedure with ``--pairs``
pairs (10 by default), keeps every round and pass, and reads the run as ``recnb validate`` reads
it: over all the pairs, and over each half as a run of half as many passes would have read it
(the first half, the second, the odd pairs, the even ones), so that both counts are judged on the
same minutes of the host. ``--drift SECONDS`` instead measures, again and again, the Yambda-shaped
HSTU row of the sweep on two threads and on one, and the calibration's cost of an HSTU operator
(:func:`~recnotebooks.measure.calibrate_hstu.hstu_overhead_pairs`), and prints their medians
window by window: how far what validate compares moves while nothing else runs.

MEASURED on the 2-core AMD EPYC VM (2026-12-06, idle): three runs of 10 pairs read HSTU MAPE 5.9%,
8.3% and 8.9% over their ten pairs, and 5.1-18.7% over their halves (4 of 12 halves over the 15%
target); the calibration's HSTU operator cost fitted to 10 rounds 4.17-4.35 us, to 5 rounds
3.77-6.59 us. ``--drift 480``: the HSTU row's median over windows of five measurements moved
12.3-20.7 ms on two threads and 15.4-26.2 ms on one; in a spell of about 100 s the operator cost
read a median of 7.1 us against 4.5 around it. The figures are in ``docs/benchmarks-log.md`` ("recnb
validate in ten passes").

Run: ``python benchmarks/validate_passes.py`` (about 4.6 minutes a run; ``--runs 3``;
``--pairs 2``: a smoke run); ``python benchmarks/validate_passes.py --drift 480``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from recnotebooks.kernels.allocator import keep_freed_memory
from recnotebooks.measure.calibrate import probe
from recnotebooks.measure.calibrate_hstu import hstu_op_overhead, hstu_overhead_pairs
from recnotebooks.measure.hstu import measure_hstu_step
from recnotebooks.measure.validate import HSTUCase, judge_interleaved, measure_interleaved, validation_sweep

#: The row ``--drift`` measures: the sweep's Yambda-shaped HSTU step.
DRIFT_ROW = "HSTU Yambda-shaped"
#: Measurements a ``--drift`` window takes the median of (about 20 s).
WINDOW = 5


def halves(n: int) -> dict[str, list[int]]:
    """The pairs each reading takes: all ``n``, and each half of them (first, second, odd, even)."""
    h = n // 2
    out = {"all": list(range(n))}
    if h:
        out |= {"first half": list(range(h)), "second half": list(range(n - h, n)),
                "even pairs": list(range(0, n, 2))[:h], "odd pairs": list(range(1, n, 2))[:h]}  # fmt: skip
    return out


def one_run(pairs: int) -> list[dict[str, object]]:
    """One interleaved run of ``pairs`` pairs, read over all of them and over each half."""
    dev, rounds, passes = measure_interleaved(repeats=pairs)
    rows = []
    for name, take in halves(pairs).items():
        result, hw, raw = judge_interleaved(dev, [rounds[i] for i in take], [passes[i] for i in take])
        hstu = [c.error for c in result.configs if c.architecture == "hstu"]
        rows.append({"reading": name, "pairs": len(take), "hstu_mape": result.hstu_mape, "mape": result.mape,
                     "spearman": result.spearman, "passed": result.passed,
                     "hstu_op_overhead_s": hw.hstu_op_overhead_s, "rounds_left_out": raw["rounds_left_out"],
                     "hstu_errors": hstu, "why_not": list(result.verdict.why_not)})  # fmt: skip
    return rows


def drift(seconds: float) -> list[dict[str, float]]:
    """The Yambda-shaped HSTU row on two threads and on one, and the HSTU operator cost, over ``seconds``."""
    keep_freed_memory()
    case = next(c for n, c, _ in validation_sweep() if n == DRIFT_ROW)
    assert isinstance(case, HSTUCase)
    end, out = time.monotonic() + seconds, []
    threads = torch.get_num_threads()
    while time.monotonic() < end:
        rec: dict[str, float] = {"t": time.monotonic(), "gflops": probe(3)["gflops"]}
        for n in (threads, 1):
            torch.set_num_threads(n)
            m = measure_hstu_step(
                case.config, case.lengths, time_budget_s=0.4, min_steps=5, max_steps=200, threads=n
            )
            rec[f"step_{n}t_s"] = m.seconds_per_step
            rec[f"op_{n}t_s"] = hstu_op_overhead(hstu_overhead_pairs(3))
        torch.set_num_threads(threads)
        out.append(rec)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=10, help="calibration rounds and passes a run (default 10)")
    ap.add_argument("--runs", type=int, default=1, help="runs back to back (default 1)")
    ap.add_argument(
        "--drift", type=float, default=None, metavar="SECONDS", help="measure the host's drift instead"
    )
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args()
    if args.drift is not None:
        recs = drift(args.drift)
        if args.json:
            print(json.dumps(recs))
            return
        keys = [k for k in recs[0] if k not in ("t", "gflops")]
        print(f"{len(recs)} measurements over {args.drift:.0f} s; medians of windows of {WINDOW}:")
        for k in keys:
            scale, unit = (1e3, "ms") if k.startswith("step") else (1e6, "us")
            w = [
                statistics.median(r[k] for r in recs[i : i + WINDOW]) * scale
                for i in range(0, len(recs), WINDOW)
            ]
            print(f"  {k:<10} {' '.join(f'{x:.1f}' for x in w)} {unit}  (max / min {max(w) / min(w):.2f}x)")
        return
    runs = [one_run(args.pairs) for _ in range(args.runs)]
    if args.json:
        print(json.dumps(runs))
        return
    for i, rows in enumerate(runs, 1):
        for r in rows:
            errs = " ".join(f"{e:+.0%}" for e in r["hstu_errors"])  # type: ignore[attr-defined]
            op = r["hstu_op_overhead_s"] * 1e6  # type: ignore[operator]
            print(f"run {i} {r['reading']:<11} {r['pairs']:>2} pairs: HSTU MAPE {r['hstu_mape']:.1%}, all "
                  f"{r['mape']:.1%}, Spearman {r['spearman']:.2f}, passed {r['passed']}; HSTU op "
                  f"{op:.2f} us ({r['rounds_left_out']} rounds left out) | {errs}")  # fmt: skip
            for why in r["why_not"]:  # type: ignore[attr-defined]
                print(f"    why not: {why}")


if __name__ == "__main__":
    main()
