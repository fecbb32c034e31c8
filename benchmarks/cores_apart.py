"""Steps measured while the threads' cores share a cache and while they do not, and on one thread.

A virtual machine's host places its cores, and may place two of them where they share no cache
(:mod:`recnotebooks.measure.cores`). This benchmark measures rows of ``recnb validate`` (its five
HSTU rows and four DLRM rows, MLP- to memory-heavy) in turn for ``--minutes``, each on two
threads with a :func:`~recnotebooks.measure.cores.handoff` reading before and after it, keeps the
measurements whose two readings agree, and prints each row's median in each state, then the same
row on one thread (``--one`` measurements; one thread reads no placement). It can only report the
states the host gave it while it ran: a row seen in one state only says so.

MEASURED on the 2-core AMD EPYC VM (2026-12-06, idle, 12 minutes, 50-82 measurements of each
row in each state): apart / shared 1.37-1.41x for the HSTU rows, 1.10-1.58x for the DLRM ones;
apart, two threads ran four of the five HSTU rows and ``tiny`` slower than one thread did
(the Yambda-shaped HSTU row 15.5 ms against 14.3 on one thread and 11.2 shared). The figures are
in ``docs/benchmarks-log.md`` ("Cores that share no cache, measured step by step").

Run: ``python benchmarks/cores_apart.py`` (``--minutes 12`` by default; ``--quick``: one round of
each row, a smoke run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from recnotebooks.measure import measure_hstu_step, measure_step
from recnotebooks.measure.cores import cores_apart, handoff
from recnotebooks.measure.step import StepMeasurement, default_max_rows
from recnotebooks.measure.validate import HSTUCase, validation_sweep

#: The DLRM rows of ``recnb validate`` measured beside its HSTU rows: op-bound to memory-bound.
DLRM_ROWS = ("tiny", "deep narrow MLPs", "dcnv2_small", "rm2")
#: Seconds a measurement takes (``recnb validate``'s ``time_budget_s``).
BUDGET_S = 0.4


def _measure(case: object, batch: int, threads: int) -> StepMeasurement:
    timing = {"time_budget_s": BUDGET_S, "min_steps": 5, "max_steps": 200, "device": "cpu"}
    timing["threads"] = threads
    if isinstance(case, HSTUCase):
        return measure_hstu_step(case.config, case.lengths, padded=case.padded, **timing)  # type: ignore[arg-type]
    return measure_step(case, batch, max_rows=default_max_rows(case), **timing)  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=12.0, help="minutes of two-thread rounds")
    ap.add_argument("--one", type=int, default=5, help="one-thread measurements of each row")
    ap.add_argument("--quick", action="store_true", help="one round of each row (a smoke run)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    threads = max(2, torch.get_num_threads())
    rows = [r for r in validation_sweep() if isinstance(r[1], HSTUCase) or r[0] in DLRM_ROWS]
    taken: dict[str, dict[str, list[float]]] = {name: {"shared": [], "apart": []} for name, _, _ in rows}
    stop = time.monotonic() + (0 if args.quick else args.minutes * 60)
    while True:
        for name, case, batch in rows:
            before = handoff(3)
            seconds = _measure(case, batch, threads).seconds_per_step
            after = handoff(3)
            if cores_apart(before) == cores_apart(after):
                taken[name]["apart" if cores_apart(before) else "shared"].append(seconds)
        if time.monotonic() >= stop:
            break
    one = {name: statistics.median(_measure(case, batch, 1).seconds_per_step for _ in range(max(1, args.one)))
           for name, case, batch in rows}  # fmt: skip
    out = []
    for name, _, _ in rows:
        shared, apart = (statistics.median(v) if v else None for v in taken[name].values())
        out.append({"row": name, "shared_s": shared, "apart_s": apart, "one_thread_s": one[name],
                    "measurements": {k: len(v) for k, v in taken[name].items()}})  # fmt: skip
    if args.json:
        print(json.dumps(out, indent=1))
        return
    ms = lambda s: f"{s * 1e3:7.2f} ms" if s is not None else "    (none)"  # noqa: E731
    head = ("row (MEASURED, median)", "shared", "apart", "apart/shared", "one thread")
    print(f"{head[0]:26s} {head[1]:>10s} {head[2]:>10s} {head[3]:>12s} {head[4]:>10s}")
    for r in out:
        ratio = f"{r['apart_s'] / r['shared_s']:.2f}x" if r["apart_s"] and r["shared_s"] else "-"
        n = r["measurements"]
        print(f"{r['row']:26s} {ms(r['shared_s'])} {ms(r['apart_s'])} {ratio:>12s} {ms(r['one_thread_s'])}"
              f"   ({n['shared']} shared, {n['apart']} apart)")  # fmt: skip


if __name__ == "__main__":
    main()
