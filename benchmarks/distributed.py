"""Distributed training on local gloo CPU ranks: ours against TorchRec's ``DistributedModelParallel``.

For each config (``tiny``, and Criteo Kaggle's architecture with every table capped at
``--kaggle-rows`` rows so 4 ranks fit in memory) and 1, 2 and 4 local ranks:

* **TorchRec**: ``torchrec.models.dlrm.DLRM`` sharded table-wise by TorchRec's planner, in
  ``DistributedModelParallel`` (fused exact-SGD FBGEMM tables, dense part in DDP), trained on
  ``SyntheticCriteo``'s global batches sliced per rank (``benchmarks/_torchrec_workers.py``);
* **ours**: ``recnotebooks.dist.training.train_local(config, plan, world_size, steps,
  batch_size, seed)`` with the same table-wise assignment of tables to ranks as TorchRec's
  plan (see :func:`ours`; printed as "pending" until that function exists).

Samples/s is the global batch times the timed steps over the slowest rank's time. The ratio
ours / TorchRec at 2 ranks has a target of >= 1.2. When ours is available, its CommLog rows
(bytes and seconds per collective) are printed too.

Run: ``python benchmarks/distributed.py`` (``--quick``: tiny only, fewer steps; ``--json``).
The ranks share this machine's cores: with more ranks than cores, each rank gets a fraction of
a core, so samples/s cannot scale with ranks here; the comparison is between the two systems
under the same conditions.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import statistics
import sys
import time
from typing import Any

import _torchrec_workers as T  # benchmarks/_torchrec_workers.py (spawned ranks import it by name)

from recnotebooks.config import DLRMConfig, preset
from recnotebooks.dist import launch
from recnotebooks.plan import Plan, TableShard

TARGET = 1.2
#: SGD learning rate of both systems (tables and dense part).
LR = 0.05


def configs(quick: bool, kaggle_rows: int) -> list[tuple[str, DLRMConfig, int]]:
    """(label, config, global batch size) of each benchmarked model."""
    out = [("tiny", preset("tiny"), 1024)]
    if not quick:
        out.append((f"criteo_kaggle (<= {kaggle_rows:,} rows/table)",
                    preset("criteo_kaggle").with_max_rows(kaggle_rows), 2048))  # fmt: skip
    return out


def torchrec(world: int, runs: list[dict[str, Any]], timeout_s: float) -> list[dict[str, Any]]:
    """TorchRec's figures for each run on ``world`` ranks: samples/s of the slowest rank, its plan."""
    result = launch(T.torchrec_runs, world, runs, timeout_s=timeout_s)
    out = []
    for k, run in enumerate(runs):
        per_rank = [v[k] for v in result.values]
        seconds = max(r["seconds"] for r in per_rank)
        loss = sum(r["losses"][-1] for r in per_rank) / world
        out.append({"samples_per_s": run["steps"] * run["batch_size"] / seconds, "seconds": seconds,
                    "plan": per_rank[0]["plan"], "loss": loss,
                    "threads": per_rank[0].get("threads"),
                    "cpu_ms": per_rank[0].get("cpu_seconds_per_step", 0.0) * 1e3})  # fmt: skip
    return out


def plan_like(torchrec_plan: dict[str, tuple], world: int) -> Plan:
    """Our table-wise :class:`Plan` putting each table on the rank TorchRec's plan chose."""
    return Plan(world, tuple(TableShard(name, ranks[0]) for name, (_, _, ranks) in torchrec_plan.items()),
                strategy="torchrec's table-wise plan")  # fmt: skip


# ----- HOOK: ours (helper HB's recnotebooks.dist.training.train_local) -------------------------
def ours(config: DLRMConfig, plan: Plan, world_size: int, steps: int, batch_size: int, seed: int,
         lr: float = LR) -> dict[str, Any] | None:  # fmt: skip
    """Our hybrid-parallel training on ``world_size`` local ranks, or None while it does not exist.

    Calls ``train_local(config, plan, world_size, steps, batch_size, seed)`` with SGD for the
    tables and the dense part at TorchRec's learning rate. ``steps`` counts its warm-up steps
    (``training.WARMUP_STEPS``, untimed). Its ``samples_per_s`` is the slowest rank's (as
    TorchRec's); ``comm_rows`` holds every rank's CommLog rows, ``threads`` torch's threads per rank.
    """
    if importlib.util.find_spec("recnotebooks.dist.training") is None:
        return None
    training = importlib.import_module("recnotebooks.dist.training")
    if not hasattr(training, "train_local"):
        return None
    r = training.train_local(config, plan, world_size, steps, batch_size, seed, sparse_optimizer="sgd",
                             dense_optimizer="sgd", sparse_lr=lr, dense_lr=lr)  # fmt: skip
    rates = getattr(r, "rank_samples_per_s", None) or [r.samples_per_s]
    return {"samples_per_s": min(rates), "comm_rows": list(r.comm), "loss": r.losses[-1],
            "phases": r.phases, "threads": getattr(r, "threads", None),
            "cpu_ms": getattr(r, "cpu_seconds_per_step", 0.0) * 1e3}  # fmt: skip


def comm_table(rows: list[dict[str, Any]], steps: int, world: int) -> list[dict[str, Any]]:
    """Per collective and direction: calls, bytes sent and seconds per step and rank (means over
    the ``steps`` steps the log covers, warm-up included, and over the ranks)."""
    acc: dict[tuple, dict[str, float]] = {}
    for r in rows:
        key = (r["component"], r["collective"], r["direction"])
        a = acc.setdefault(key, {"calls": 0, "bytes_sent": 0, "seconds": 0.0})
        for k in a:
            a[k] += r[k]
    return [{"component": c, "collective": k, "direction": d,
             **{f"{n}_per_step": v / steps / world for n, v in a.items()}}
            for (c, k, d), a in sorted(acc.items())]  # fmt: skip


def _load() -> float:
    """The machine's 1-minute load average (other processes share these cores)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def measure(world: int, models: list[tuple[str, DLRMConfig, int]], steps: int,
            a: argparse.Namespace) -> list[dict[str, Any]]:  # fmt: skip
    """One row per model on ``world`` ranks: medians over ``a.repeats`` interleaved rounds. Each
    round is one TorchRec launch (every model) and ours for each model, the order alternating
    between rounds (TorchRec first in even rounds), so machine noise and drift hit both alike. A
    launch that fails is reported (``errors``) and its round skipped for that system."""
    runs = [{"config": cfg, "batch_size": bsz, "warmup": a.warmup, "steps": steps, "seed": a.seed, "lr": LR}
            for _, cfg, bsz in models]  # fmt: skip
    theirs: list[list[dict[str, Any]]] = [[] for _ in models]
    mine: list[list[dict[str, Any]]] = [[] for _ in models]
    errors: list[str] = []
    loads: list[float] = []
    plans: list[dict[str, tuple] | None] = [None] * len(models)

    def run_theirs() -> None:
        try:
            for k, tr in enumerate(torchrec(world, runs, a.timeout)):
                theirs[k].append(tr)
                plans[k] = tr["plan"]
        except Exception as e:  # noqa: BLE001 - a failed launch is a reported result
            errors.append(f"TorchRec, {world} ranks: {type(e).__name__}: {str(e).splitlines()[0]}")

    def run_mine() -> None:
        for k, (label, cfg, bsz) in enumerate(models):
            plan = plan_like(plans[k], world) if plans[k] else round_robin(cfg, world)
            try:
                m = ours(cfg, plan, world, a.warmup + steps, bsz, a.seed)
            except Exception as e:  # noqa: BLE001
                errors.append(f"ours, {label}, {world} ranks: {type(e).__name__}: {str(e).splitlines()[0]}")
                continue
            if m is not None:
                mine[k].append(m)

    for rnd in range(a.repeats):
        loads.append(_load())
        t0 = time.perf_counter()
        order = (run_theirs, run_mine) if rnd % 2 == 0 else (run_mine, run_theirs)
        for fn in order:
            fn()
        print(f"  {world} rank(s), round {rnd + 1}/{a.repeats}: {time.perf_counter() - t0:.0f} s "
              f"(start-up included), load {loads[-1]:.1f}", file=sys.stderr)  # fmt: skip
    rows = []
    for k, (label, _, bsz) in enumerate(models):
        tr_rate = _median([t["samples_per_s"] for t in theirs[k]])
        our_rate = _median([m["samples_per_s"] for m in mine[k]])
        rows.append({"config": label, "world_size": world, "batch_size": bsz, "steps": steps,
                     "repeats": a.repeats, "torchrec_samples_per_s": tr_rate,
                     "torchrec_rounds": [t["samples_per_s"] for t in theirs[k]],
                     "ours_rounds": [m["samples_per_s"] for m in mine[k]],
                     "torchrec_loss": theirs[k][-1]["loss"] if theirs[k] else None,
                     "ours_samples_per_s": our_rate,
                     "ours_loss": mine[k][-1]["loss"] if mine[k] else None,
                     "ours_phases": mine[k][-1]["phases"] if mine[k] else None,
                     "threads": {"torchrec": theirs[k][-1]["threads"] if theirs[k] else None,
                                 "ours": mine[k][-1]["threads"] if mine[k] else None},
                     "load_avg": loads, "errors": errors,
                     "torchrec_cpu_ms": _median([t["cpu_ms"] for t in theirs[k]]),
                     "ours_cpu_ms": _median([m["cpu_ms"] for m in mine[k]]),
                     "ratio": our_rate / tr_rate if our_rate and tr_rate else None,
                     "comm": comm_table(mine[k][-1]["comm_rows"], a.warmup + steps, world)
                     if mine[k] else None})  # fmt: skip
    return rows


def round_robin(config: DLRMConfig, world: int) -> Plan:
    """Table ``k`` on rank ``k % world`` (ours' plan when TorchRec's launch failed)."""
    return Plan(world, tuple(TableShard(t.name, k % world) for k, t in enumerate(config.tables)),
                strategy="round-robin table-wise")  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny only, 1 and 2 ranks, fewer steps")
    ap.add_argument("--only", choices=("tiny", "kaggle"), default=None, help="one config only")
    ap.add_argument("--worlds", type=int, nargs="+", default=None, help="rank counts (default 1 2 4)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps (ours: training.WARMUP_STEPS)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 20, quick 5)")
    ap.add_argument("--kaggle-rows", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="rounds (medians are reported; quick: 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per launch")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    worlds = a.worlds or ([1, 2] if a.quick else [1, 2, 4])
    steps = a.steps or (5 if a.quick else 20)
    a.repeats = 1 if a.quick and "--repeats" not in (argv or sys.argv) else a.repeats
    models = [m for m in configs(a.quick, a.kaggle_rows) if a.only is None or a.only in m[0]]
    rows = [row for world in worlds for row in measure(world, models, steps, a)]
    out = {"benchmark": "distributed", "target_ratio_at_2_ranks": TARGET, "rows": rows}
    if a.json:
        print(json.dumps(out, indent=1))
        return out
    print(
        "MEASURED samples/s on local gloo CPU ranks (table-wise, SGD, same batches; both: slowest "
        f"rank; medians over {a.repeats} interleaved round(s); {os.cpu_count()} cores):"
    )
    print(f"{'config':<40} {'ranks':>5} {'batch':>6} {'threads':>7} {'TorchRec':>10} {'ours':>10} "
          f"{'ours/TR':>8}  load avg")  # fmt: skip
    for r in rows:
        mine = f"{r['ours_samples_per_s']:10,.0f}" if r["ours_samples_per_s"] else f"{'pending':>10}"
        tr = f"{r['torchrec_samples_per_s']:10,.0f}" if r["torchrec_samples_per_s"] else f"{'failed':>10}"
        ratio = f"{r['ratio']:7.2f}x" if r["ratio"] else f"{'-':>8}"
        th = r["threads"]
        print(f"{r['config']:<40} {r['world_size']:>5} {r['batch_size']:>6} "
              f"{th['torchrec'] or '-'!s:>3}/{th['ours'] or '-'!s:<3} {tr} {mine} {ratio}  "
              + " ".join(f"{x:.1f}" for x in r["load_avg"]))  # fmt: skip
    print("per round (samples/s), and rank 0's CPU ms per step (medians; load-robust, all threads):")
    for r in rows:
        cpu = ""
        if r["torchrec_cpu_ms"] and r["ours_cpu_ms"]:
            cpu = (f"; CPU ms/step TorchRec {r['torchrec_cpu_ms']:.1f}, ours {r['ours_cpu_ms']:.1f} "
                   f"(TorchRec/ours {r['torchrec_cpu_ms'] / r['ours_cpu_ms']:.2f}x)")  # fmt: skip
        print(f"  {r['config']}, {r['world_size']} ranks: TorchRec "
              + " ".join(f"{x:,.0f}" for x in r["torchrec_rounds"]) + "; ours "
              + " ".join(f"{x:,.0f}" for x in r["ours_rounds"]) + cpu)  # fmt: skip
    for e in sorted({e for r in rows for e in r["errors"]}):
        print(f"FAILED: {e}")
    at2 = [r for r in rows if r["world_size"] == 2]
    if not any(r["ratio"] for r in at2):
        print("ours: pending (recnotebooks.dist.training.train_local does not exist yet)")
    for r in at2:
        if r["ratio"]:
            verdict = "meets" if r["ratio"] >= TARGET else "misses"
            print(f"at 2 ranks, {r['config']}: ours/TorchRec = {r['ratio']:.2f}x "
                  f"({verdict} the {TARGET}x target)")  # fmt: skip
    for r in rows:
        if r["comm"]:
            phases = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in r["ours_phases"].items() if v >= 5e-4)
            print(f"ours, {r['config']}, {r['world_size']} ranks: rank 0's phases, ms per step: {phases}")
            print("  per step and rank (MEASURED CommLog):")
            for c in r["comm"]:
                print(f"  {c['component']:<11} {c['collective']:<15} {c['direction']:<9} "
                      f"{c['calls_per_step']:5.1f} calls {c['bytes_sent_per_step'] / 1e6:9.3f} MB "
                      f"{c['seconds_per_step'] * 1e3:8.2f} ms")  # fmt: skip
    return out


if __name__ == "__main__":
    main()
