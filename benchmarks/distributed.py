"""Distributed training on local gloo CPU ranks: ours against TorchRec's ``DistributedModelParallel``.

For each config (``tiny``, and Criteo Kaggle's architecture with every table capped at
``--kaggle-rows`` rows so 4 ranks fit in memory) and 1, 2 and 4 local ranks:

* **TorchRec**: ``torchrec.models.dlrm.DLRM`` sharded table-wise by TorchRec's planner, in
  ``DistributedModelParallel`` (fused exact-SGD FBGEMM tables, dense part in DDP), trained on
  ``SyntheticCriteo``'s global batches sliced per rank (``benchmarks/_torchrec_workers.py``);
* **ours**: ``recnotebooks.distributed.training.train_local(config, plan, world_size, steps,
  batch_size, seed)`` with the same table-wise assignment of tables to ranks as TorchRec's
  plan (see :func:`ours`; printed as "pending" until that function exists).

Samples/s is the global batch times the timed steps over the slowest rank's time. The ratio
ours / TorchRec at 2 ranks has a target of >= 1.2. When ours is available, its CommLog rows
(bytes and seconds per collective) are printed too.

Run: ``python benchmarks/distributed.py`` (``--quick``: tiny only, fewer steps; ``--json``).

``--embedding-heavy`` (issue 22, item 8) runs only :data:`HEAVY`, a model whose step is mostly
embedding work, at 2 and 4 ranks, and prints rank 0's milliseconds per step in each of
:data:`COMPARED`'s phases for both systems, wall and main-thread CPU (TorchRec's from hooks in
``_torchrec_workers``, ours from ``train_local``'s PhaseTimer and CommLog).
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

from recnotebooks.config import DLRMConfig, TableConfig, preset
from recnotebooks.distributed import launch
from recnotebooks.plan import Plan, TableShard

TARGET = 1.2
#: SGD learning rate of both systems (tables and dense part).
LR = 0.05


#: The embedding-heavy model (issue 22, item 8): 8 tables of 1M rows, 20 ids per sample per table,
#: dimension 32 and small MLPs (bottom 13-64-32, top 68-64-1: about 7.5k multiply-adds per sample
#: against 160 random 128-byte rows gathered, and as many updated). Dimension 32 (not 64) so that
#: ours' start-up, which copies every shard out of the full seeded tables (1 GiB at dim 32), fits
#: 4 ranks in this machine's 24 GB beside the other work on it.
HEAVY = DLRMConfig(13, tuple(TableConfig(f"T{k + 1}", 1_000_000, 20.0) for k in range(8)), 32, (64, 32),
                   (64, 1), name="embedding_heavy")  # fmt: skip
HEAVY_LABEL = "embedding_heavy (8 x 1M rows, pooling 20)"


def configs(quick: bool, kaggle_rows: int, heavy: bool = False) -> list[tuple[str, DLRMConfig, int]]:
    """(label, config, global batch size) of each benchmarked model (``heavy``: only :data:`HEAVY`)."""
    if heavy:
        return [(HEAVY_LABEL, HEAVY, 2048)]
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
                    "cpu_ms": per_rank[0].get("cpu_seconds_per_step", 0.0) * 1e3,
                    "phases": compare_torchrec(per_rank[0]["phases"], per_rank[0]["seconds"] / run["steps"]),
                    "phase_cpu": compare_torchrec_cpu(per_rank[0]["phase_cpu"],
                                                      per_rank[0]["thread_cpu_seconds_per_step"]),
                    "phases_ordered": all(r["phases_ordered"] for r in per_rank)})  # fmt: skip
    return out


def plan_like(torchrec_plan: dict[str, tuple], world: int) -> Plan:
    """Our table-wise :class:`Plan` putting each table on the rank TorchRec's plan chose."""
    return Plan(world, tuple(TableShard(name, ranks[0]) for name, (_, _, ranks) in torchrec_plan.items()),
                strategy="torchrec's table-wise plan")  # fmt: skip


# ----- HOOK: ours (helper HB's recnotebooks.distributed.training.train_local) -------------------------
def ours(config: DLRMConfig, plan: Plan, world_size: int, steps: int, batch_size: int, seed: int,
         lr: float = LR) -> dict[str, Any] | None:  # fmt: skip
    """Our hybrid-parallel training on ``world_size`` local ranks, or None while it does not exist.

    Calls ``train_local(config, plan, world_size, steps, batch_size, seed)`` with SGD for the
    tables and the dense part at TorchRec's learning rate. ``steps`` counts its warm-up steps
    (``training.WARMUP_STEPS``, untimed). Its ``samples_per_s`` is the slowest rank's (as
    TorchRec's); ``comm_rows`` holds every rank's CommLog rows, ``threads`` torch's threads per rank.
    """
    if importlib.util.find_spec("recnotebooks.distributed.training") is None:
        return None
    training = importlib.import_module("recnotebooks.distributed.training")
    if not hasattr(training, "train_local"):
        return None
    r = training.train_local(config, plan, world_size, steps, batch_size, seed, sparse_optimizer="sgd",
                             dense_optimizer="sgd", sparse_lr=lr, dense_lr=lr)  # fmt: skip
    rates = getattr(r, "rank_samples_per_s", None) or [r.samples_per_s]
    return {"samples_per_s": min(rates), "comm_rows": list(r.comm), "loss": r.losses[-1],
            "phases": compare_ours(r.phases, r.timed_comm, r.seconds_per_step,
                                   steps - min(training.WARMUP_STEPS, steps - 1)),
            "phase_cpu": compare_ours_cpu(r.phase_cpu, r.thread_cpu_seconds_per_step),
            "threads": getattr(r, "threads", None),
            "cpu_ms": getattr(r, "cpu_seconds_per_step", 0.0) * 1e3}  # fmt: skip


#: The phases both sides are compared on (seconds per step of rank 0, timed steps only), and what
#: each contains on each side. TorchRec's come from hooks (``_torchrec_workers._Phases``), ours
#: from the PhaseTimer and the CommLog of ``train_local`` (timed steps only).
COMPARED = {
    "data": "draw the global SyntheticCriteo batch, slice this rank's samples (TorchRec: + to_kjt)",
    "sparse_forward": "input distribution (ids' all-to-alls), local lookups, output all-to-all until "
                      "the pooled vectors are there and assembled (B, tables, dim) (ours: its exposed "
                      "wait, the bottom MLP runs while it travels; TorchRec runs the bottom MLP first)",
    "bottom_mlp": "bottom MLP forward",
    "interaction": "dot interaction forward",
    "top_mlp": "top MLP forward",
    "backward_dense": "backward of loss, top MLP, interaction and bottom MLP (ours: also recording the "
                      "pooled gradient for the sparse optimizer)",
    "backward_all_to_all": "the pooled gradients' all-to-all back to the table owners",
    "sparse_update": "embedding backward and SGD update of the rows (TorchRec: FBGEMM's CPU backward "
                     "with the update fused in, inside loss.backward(); ours: the sparse_optimizer phase)",
    "all_reduce": "the dense gradients' all-reduce (TorchRec: DDP's asynchronous all-reduce, the wait "
                  "left at the end of backward; ours: the blocking DDP comm hook)",
    "dense_optimizer": "zero_grad and SGD step of the dense parameters",
    "other": "the rest of the step: loss, module wrappers, Python between phases",
}  # fmt: skip


def _per_step_comm(rows: list[dict[str, Any]], steps: int, collective: str, direction: str) -> float:
    key = (collective, direction)
    return sum(r["seconds"] for r in rows if (r["collective"], r["direction"]) == key) / steps


def compare_ours(phases: dict[str, float], timed_comm: list[dict[str, Any]], step_s: float,
                 steps: int) -> dict[str, float]:  # fmt: skip
    """Our rank 0's phases mapped onto :data:`COMPARED` (seconds per step; ``steps``: timed steps).

    Our ``all_to_all`` phase holds every logged all-to-all's blocked time (moved out of the phase it
    blocked in) and the pooled vectors' assembly after the wait; the backward all-to-all (from the
    timed steps' CommLog) goes to ``backward_all_to_all``, the rest to ``sparse_forward``."""
    fwd = _per_step_comm(timed_comm, steps, "all_to_all", "forward")
    bwd = _per_step_comm(timed_comm, steps, "all_to_all", "backward")
    a2a = phases.get("all_to_all", 0.0)
    out = {"data": phases.get("data", 0.0),
           "sparse_forward": phases.get("embedding_forward", 0.0) + a2a - bwd,
           "bottom_mlp": phases.get("bottom_mlp", 0.0),
           "interaction": phases.get("interaction", 0.0), "top_mlp": phases.get("top_mlp", 0.0),
           "backward_dense": phases.get("backward", 0.0), "backward_all_to_all": bwd,
           "sparse_update": phases.get("sparse_optimizer", 0.0), "all_reduce": phases.get("all_reduce", 0.0),
           "dense_optimizer": phases.get("dense_optimizer", 0.0)}  # fmt: skip
    out["other"] = step_s - sum(out.values())
    out["step"] = step_s
    out.update({"ours.embedding_forward": phases.get("embedding_forward", 0.0),
                "ours.forward_all_to_all_blocked": fwd})  # fmt: skip
    return out


#: Main-thread CPU time cannot split our backward's collectives out (they are issued inside it): in
#: CPU terms both sides' ``backward_dense`` hold the whole backward but the sparse part, collectives
#: included, and these rows are left empty.
CPU_MERGED = ("backward_all_to_all", "all_reduce")


def compare_ours_cpu(cpu: dict[str, float], step_cpu: float) -> dict[str, float]:
    """Our rank 0's main-thread CPU seconds per step mapped onto :data:`COMPARED` (see :data:`CPU_MERGED`);
    ``step_cpu``: the main thread's CPU per step."""
    out = {"data": cpu.get("data", 0.0),
           "sparse_forward": cpu.get("embedding_forward", 0.0) + cpu.get("all_to_all", 0.0),
           "bottom_mlp": cpu.get("bottom_mlp", 0.0), "interaction": cpu.get("interaction", 0.0),
           "top_mlp": cpu.get("top_mlp", 0.0), "backward_dense": cpu.get("backward", 0.0),
           "sparse_update": cpu.get("sparse_optimizer", 0.0),
           "dense_optimizer": cpu.get("dense_optimizer", 0.0)}  # fmt: skip
    out["other"] = step_cpu - sum(out.values())
    out["step"] = step_cpu
    return out


def compare_torchrec_cpu(cpu: dict[str, float], step_cpu: float) -> dict[str, float]:
    """TorchRec's rank 0 main-thread CPU seconds per step mapped as :func:`compare_ours_cpu`."""
    p = cpu
    out = {"data": p["data"], "sparse_forward": p["input_dist"] + p["lookup"] + p["output_dist"],
           "bottom_mlp": p["bottom_mlp"], "interaction": p["interaction"], "top_mlp": p["top_mlp"],
           "backward_dense": p["backward_top"] + p["backward_output_dist"] + p["backward_bottom"]
           + p["backward_all_reduce_wait"],
           "sparse_update": p["backward_lookup_fused_update"], "dense_optimizer": p["optimizer"]}  # fmt: skip
    out["other"] = step_cpu - sum(out.values())
    out["step"] = step_cpu
    out.update({f"torchrec.{k}": v for k, v in p.items()})
    return out


def compare_torchrec(phases: dict[str, float], step_s: float) -> dict[str, float]:
    """TorchRec's rank 0 phases (``_torchrec_workers.TORCHREC_PHASES``) mapped onto :data:`COMPARED`."""
    p = phases
    out = {"data": p["data"], "sparse_forward": p["input_dist"] + p["lookup"] + p["output_dist"],
           "bottom_mlp": p["bottom_mlp"],
           "interaction": p["interaction"], "top_mlp": p["top_mlp"],
           "backward_dense": p["backward_top"] + p["backward_bottom"],
           "backward_all_to_all": p["backward_output_dist"],
           "sparse_update": p["backward_lookup_fused_update"],
           "all_reduce": p["backward_all_reduce_wait"], "dense_optimizer": p["optimizer"]}  # fmt: skip
    out["other"] = step_s - sum(out.values())
    out["step"] = step_s
    out.update({f"torchrec.{k}": v for k, v in p.items()})
    return out


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


def _median_phases(runs: list[dict[str, Any]], key: str = "phases") -> dict[str, float] | None:
    """Each phase's median over the rounds (seconds per step)."""
    if not runs:
        return None
    return {k: statistics.median(r[key][k] for r in runs) for k in runs[0][key]}


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
    uptimes: list[str] = []  # 1, 5 and 15-minute load averages at the start of each round
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
        uptimes.append(" ".join(f"{x:.2f}" for x in os.getloadavg()))
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
                     "ours_phases": _median_phases(mine[k]),
                     "torchrec_phases": _median_phases(theirs[k]),
                     "ours_phase_cpu": _median_phases(mine[k], "phase_cpu"),
                     "torchrec_phase_cpu": _median_phases(theirs[k], "phase_cpu"),
                     "torchrec_phases_ordered": all(t["phases_ordered"] for t in theirs[k]),
                     "rounds_phases": {"torchrec": [t["phases"] for t in theirs[k]],
                                       "ours": [m["phases"] for m in mine[k]]},
                     "threads": {"torchrec": theirs[k][-1]["threads"] if theirs[k] else None,
                                 "ours": mine[k][-1]["threads"] if mine[k] else None},
                     "load_avg": loads, "uptime": uptimes, "errors": errors,
                     "plan": {name: ranks for name, (_, _, ranks) in plans[k].items()} if plans[k] else None,
                     "torchrec_cpu_ms": _median([t["cpu_ms"] for t in theirs[k]]),
                     "ours_cpu_ms": _median([m["cpu_ms"] for m in mine[k]]),
                     "ratio": our_rate / tr_rate if our_rate and tr_rate else None,
                     "comm": comm_table(mine[k][-1]["comm_rows"], a.warmup + steps, world)
                     if mine[k] else None})  # fmt: skip
    return rows


def print_phases(r: dict[str, Any]) -> None:
    """Rank 0's ms per step in each compared phase, both sides (medians over rounds), and ours / TorchRec."""
    ours, theirs = r["ours_phases"], r["torchrec_phases"]
    if not ours or not theirs:
        return
    note = "" if r["torchrec_phases_ordered"] else " (TorchRec's backward marks came out of order)"
    print(f"\n{r['config']}, {r['world_size']} ranks: rank 0's ms per step, medians over rounds "
          f"(uptime at each round: {'; '.join(r['uptime'])}){note}")  # fmt: skip
    cpu_o, cpu_t = r["ours_phase_cpu"] or {}, r["torchrec_phase_cpu"] or {}
    head = f"{'TorchRec':>8} {'ours':>8} {'ours/TR':>8}"
    print(f"  {'ms per step':<22} wall: {head}   CPU:  {head}")

    def cells(t: float | None, o: float | None) -> str:
        if t is None or o is None:
            return f"{'-':>8} {'-':>8} {'-':>8}"
        ratio = f"{o / t:7.2f}x" if t >= 5e-5 else f"{'-':>8}"
        return f"{t * 1e3:8.2f} {o * 1e3:8.2f} {ratio}"

    for k in [*COMPARED, "step"]:
        wall, cpu = cells(theirs.get(k), ours.get(k)), cells(cpu_t.get(k), cpu_o.get(k))
        print(f"  {k:<22}       {wall}         {cpu}")
    for who, d in (("TorchRec", theirs), ("ours", ours), ("TorchRec (CPU)", cpu_t)):
        prefix = "torchrec." if who.startswith("TorchRec") else "ours."
        own = ", ".join(f"{k[len(prefix) :]} {v * 1e3:.2f}" for k, v in d.items() if k.startswith(prefix))
        print(f"  {who} alone: {own}")


def round_robin(config: DLRMConfig, world: int) -> Plan:
    """Table ``k`` on rank ``k % world`` (ours' plan when TorchRec's launch failed)."""
    return Plan(world, tuple(TableShard(t.name, k % world) for k, t in enumerate(config.tables)),
                strategy="round-robin table-wise")  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny only, 1 and 2 ranks, fewer steps")
    ap.add_argument("--only", choices=("tiny", "kaggle"), default=None, help="one config only")
    ap.add_argument("--embedding-heavy", action="store_true",
                    help="only the embedding-heavy model (8 x 1M rows, pooling 20, dim 32, small MLPs), "
                         "2 and 4 ranks unless --worlds; per-phase table of both sides")  # fmt: skip
    ap.add_argument("--worlds", type=int, nargs="+", default=None, help="rank counts (default 1 2 4)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps (ours: training.WARMUP_STEPS)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 20, quick 5)")
    ap.add_argument("--kaggle-rows", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="rounds (medians are reported; quick: 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per launch")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    worlds = a.worlds or ([1, 2] if a.quick else [2, 4] if a.embedding_heavy else [1, 2, 4])
    steps = a.steps or (5 if a.quick else 20)
    a.repeats = 1 if a.quick and "--repeats" not in (argv or sys.argv) else a.repeats
    models = configs(a.quick, a.kaggle_rows, a.embedding_heavy)
    models = [m for m in models if a.only is None or a.only in m[0]]
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
        print("ours: pending (recnotebooks.distributed.training.train_local does not exist yet)")
    for r in at2:
        if r["ratio"]:
            verdict = "meets" if r["ratio"] >= TARGET else "misses"
            print(f"at 2 ranks, {r['config']}: ours/TorchRec = {r['ratio']:.2f}x "
                  f"({verdict} the {TARGET}x target)")  # fmt: skip
    for r in rows:
        print_phases(r)
    for r in rows:
        if r["comm"]:
            print(f"ours, {r['config']}, {r['world_size']} ranks, per step and rank (MEASURED CommLog, "
                  "warm-up included):")  # fmt: skip
            for c in r["comm"]:
                print(f"  {c['component']:<11} {c['collective']:<15} {c['direction']:<9} "
                      f"{c['calls_per_step']:5.1f} calls {c['bytes_sent_per_step'] / 1e6:9.3f} MB "
                      f"{c['seconds_per_step'] * 1e3:8.2f} ms")  # fmt: skip
    return out


if __name__ == "__main__":
    main()
