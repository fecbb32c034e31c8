"""The Sharding Explorer (notebook 04): a plan run for real on local processes, beside the model.

:func:`explore_sharding` is the pure function. For a model, a number of ranks and a plan (the
planner's, its naive baseline, or every table sharded one way) it gives:

* ``bytes``: per rank and collective, the bytes sent to other ranks in one step — **modeled**
  (:func:`recnotebooks.perf.traffic.collective_bytes`) and, once the setting has been run here,
  **measured** (the ranks' :class:`~recnotebooks.distributed.CommLog`). For the embeddings' all-to-alls
  the two agree to the byte: the model counts what the implementation sends.
* ``measured``: the step of each rank, by phase (``all_to_all`` and ``all_reduce`` included), from
  :func:`recnotebooks.distributed.training.train_local` on this machine's CPU processes (gloo on
  127.0.0.1): **measured**, once per setting and reused.
* ``modeled``: the same plan's step by component, **modeled** for these processes here
  (:func:`recnotebooks.measure.calibrate_comm.local_ranks_hardware`: this machine shared by the
  ranks; our step's own operators, ``implementation="recnotebooks"``) and for as many GPUs of a
  server over NVLink, over PCIe, and one GPU per node over the network
  (:func:`recnotebooks.perf.scaleout.link_hardware`; TorchRec's step, as the model's GPU figures).
* ``balance``: the lookups each rank serves per step (computed from the plan), whose spread is
  the plan's load imbalance.
* ``per_rank`` and ``why``: the plan explained on as many GPUs of the chosen server
  (:func:`recnotebooks.perf.explain.explain_plan`, **modeled**): each rank's step by component, and
  for each table why it went where it went (the planner's decisions and the costs it compared); a
  note gives the imbalance and the critical path.
* ``cache``: with the ``cache`` control, the model's largest table sits behind a device cache on
  the ranks that hold it (placement ``"cache"``: host tables, ``cache_rows`` slots under a policy,
  executed by the sharded engine, exact); once run, each cache's hit rate and the bytes it moved
  host -> device and back per step, **measured** (the ranks' cache statistics).

A setting that has not been measured yet is shown modeled only, with a note: running ranks
takes seconds, so the explorer never starts them on a slider move. :func:`measure_sharding`
runs them (all plans of a model and rank count in one launch) and the explorer reuses the result.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import altair as alt

from recnotebooks.checks import check_choice, check_float, check_int
from recnotebooks.config import DLRMConfig, Workload, preset
from recnotebooks.distributed.training import PROFILE_BATCHES, run_plans_local
from recnotebooks.measure.calibrate_comm import local_ranks_hardware
from recnotebooks.perf.cost import COMPONENTS, estimate
from recnotebooks.perf.explain import explain_plan
from recnotebooks.perf.hardware import HARDWARE, hardware
from recnotebooks.perf.planner import Decision, plan_tables
from recnotebooks.perf.scaleout import link_hardware
from recnotebooks.perf.traffic import collective_bytes
from recnotebooks.plan import NAMED_PLANS, Plan, TableShard, named_plan
from recnotebooks.viz.app import App, HistoryEntry, Result, trail_bars
from recnotebooks.viz.charts import metric_bars, time_breakdown
from recnotebooks.viz.controls import build_controls, human, option_values
from recnotebooks.viz.tidy import band_px, stack, stack_room

__all__ = ["CACHES", "PLANS", "SHARDING_CONTROLS", "STEPS", "explore_sharding", "measure_sharding",
           "model_verdict", "sharding_explorer", "sharding_model", "sharding_plan"]  # fmt: skip

#: Plans offered: the cost planner's, its naive baseline (the dlrm repo's), and every table sharded
#: one way (:data:`recnotebooks.plan.NAMED_PLANS`, built by :func:`recnotebooks.plan.named_plan`).
PLANS = ("planner", "naive", *(p for p in NAMED_PLANS if p != "mixed"))
#: Training steps of a measured run (the first few are warm-up, not timed).
STEPS = 12
#: The ``cache`` control: the largest table behind a device cache (policy, share of each shard's
#: rows as slots), or every row in its process's memory (``"none"``).
CACHES: dict[str, tuple[str, float] | None] = {
    "none": None,
    "static 5%": ("static", 0.05),
    "static 20%": ("static", 0.2),
    "lru 25%": ("lru", 0.25),
}
#: The explorer's rank counts and global batches (its ``ranks`` and ``batch_size`` controls).
RANKS = (1, 2, 4)
BATCHES = (256, 512, 1024, 2048)
SHARDING_CONTROLS: dict[str, dict[str, object]] = {
    "model": {
        "options": [("tiny (8 tables)", "tiny"), ("Criteo Kaggle, 26 tables, <= 20k rows", "kaggle_20k")],
        "value": "tiny",
        "label": "model",
        "dropdown": True,
    },
    "ranks": {"options": list(RANKS), "value": 2, "label": "processes (ranks)"},
    "plan": {"options": list(PLANS), "value": "planner", "label": "plan", "dropdown": True},
    "batch_size": {"options": list(BATCHES), "value": 512, "label": "global batch"},
    "cache": {
        "options": [
            ("none: every row in memory", "none"),
            ("largest table: static hot set, 5% of rows", "static 5%"),
            ("largest table: static hot set, 20% of rows", "static 20%"),
            ("largest table: LRU, 25% of rows", "lru 25%"),
        ],
        "value": "none",
        "label": "device cache",
        "dropdown": True,
    },
    "gpu": {
        "options": [h for h, hw in HARDWARE.items() if hw.kind == "gpu"],
        "value": "dgx_h100",
        "label": "GPU server (modeled)",
        "dropdown": True,
    },
}
#: The forward all-to-alls the "all_to_all forward" bars add up, in words: a rank sends the bag
#: lengths and the ids of its samples to each table's owner, and its tables' pooled vectors back.
FORWARD_PARTS = {"lengths_all_to_all": "bag lengths", "ids_all_to_all": "ids",
                 "pooled_all_to_all": "pooled vectors"}  # fmt: skip
#: (model, ranks, plan, batch, cache) -> per-rank results of
#: :func:`recnotebooks.distributed.training.run_rank`
_MEASURED: dict[tuple[str, int, str, int, str], list[dict[str, Any]]] = {}


def sharding_model(name: str) -> DLRMConfig:
    """The explorer's models: ``tiny``, or Criteo Kaggle's 26 tables capped at 20k rows."""
    check_choice("model", name, option_values(SHARDING_CONTROLS["model"]))
    return preset("tiny") if name == "tiny" else preset("criteo_kaggle").with_max_rows(20_000)


def sharding_plan(
    config: DLRMConfig,
    name: str,
    ranks: int,
    gpu: str = "dgx_h100",
    cache: str = "none",
    decisions: list[Decision] | None = None,
) -> Plan:
    """Plan ``name`` of :data:`PLANS` for ``ranks`` ranks (the planner plans for ``gpu`` devices),
    with the largest table behind the device cache ``cache`` of :data:`CACHES` (:func:`with_cache`);
    the planner's decisions appended to ``decisions`` where given (a named plan records none)."""
    check_choice("plan", name, PLANS)
    check_choice("cache", cache, CACHES)
    ranks = check_int("ranks", ranks, lo=1)
    if name in ("planner", "naive"):
        strategy = "cost" if name == "planner" else "naive"
        plan = plan_tables(config, gpu, ranks, strategy=strategy, decisions=decisions)
    else:
        plan = named_plan(config, name, ranks)
    return with_cache(config, plan, cache)


def cached_table(config: DLRMConfig) -> str:
    """The table the ``cache`` control puts behind a cache: the largest (the first of equals)."""
    return max(config.tables, key=lambda t: t.num_rows).name


def with_cache(config: DLRMConfig, plan: Plan, cache: str) -> Plan:
    """``plan`` with every shard of the largest table in placement ``"cache"``: ``cache_rows`` the
    :data:`CACHES` share of the shard's rows, under its policy. Unchanged for ``"none"``, and for a
    data-parallel table (its replicas stay in memory: the engine all-reduces their every row)."""
    choice = CACHES[check_choice("cache", cache, CACHES)]
    table = cached_table(config)
    if choice is None or any(s.table == table and s.sharding == "data_parallel" for s in plan.shards):
        return plan
    policy, share = choice
    geo = plan.geometry(config)
    shards = tuple(
        s
        if s.table != table
        else TableShard(
            s.table,
            s.rank,
            s.sharding,
            "cache",
            s.row_fraction,
            s.col_fraction,
            cache_rows=max(1, round(share * geo[i].row_count)),
            cache_policy=policy,
        )
        for i, s in enumerate(plan.shards)
    )
    return Plan(plan.world_size, shards, plan.strategy, plan.notes, plan.requested_placement)


def measure_sharding(
    model: str = "tiny",
    ranks: int = 2,
    plans: Sequence[str] = PLANS,
    batch_size: int = 512,
    gpu: str = "dgx_h100",
    steps: int = STEPS,
    cache: str = "none",
) -> float:
    """Run every plan in ``plans`` (the largest table behind ``cache``, see :data:`CACHES`) for
    ``steps`` steps on ``ranks`` local processes (one launch) and keep the results for the explorer;
    returns the seconds it took. **Measured.**"""
    check_int("steps", steps, lo=2, hi=1000)
    batch_size = check_choice("batch_size", batch_size, BATCHES)
    ranks = check_choice("ranks", ranks, RANKS)
    names = [check_choice("plans", p, PLANS) for p in plans]
    check_choice("cache", cache, CACHES)
    config = sharding_model(model)
    todo = [p for p in names if (model, ranks, p, batch_size, cache) not in _MEASURED]
    if not todo:
        return 0.0
    t0 = time.perf_counter()
    built = [sharding_plan(config, p, ranks, gpu, cache) for p in todo]
    sgd = {"sparse_optimizer": "sgd", "dense_optimizer": "sgd"}
    res = run_plans_local(config, built, ranks, steps, batch_size, 0, timeout_s=300.0, **sgd)
    for p, values in zip(todo, res, strict=True):
        _MEASURED[(model, ranks, p, batch_size, cache)] = values
    return time.perf_counter() - t0


def _modeled(config: DLRMConfig, plan: Plan, ranks: int, batch: int, gpu: str) -> list[dict[str, object]]:
    """The step by component on the slowest rank: here, and on ``ranks`` GPUs over three links."""
    here = local_ranks_hardware(hardware("this_machine"), ranks)
    base = hardware(gpu)
    where = [(f"here: {ranks} CPU process{'es' if ranks > 1 else ''}", here, ranks, 1)]
    if ranks <= base.devices:
        where += [
            (f"{ranks} GPU · NVLink ({gpu})", link_hardware(base, "nvlink"), ranks, 1),
            (f"{ranks} GPU · PCIe ({gpu})", link_hardware(base, "pcie"), ranks, 1),
        ]
    where.append((f"{ranks} GPU · network, 1 per node", link_hardware(base, "network"), 1, ranks))
    rows: list[dict[str, object]] = []
    for label, hw, gpus, nodes in where:
        impl = "recnotebooks" if label.startswith("here") else "torchrec"  # GPUs: TorchRec's step
        r = estimate(config, hw, batch_size=batch, gpus=gpus, nodes=nodes, plan=plan, implementation=impl,
                     sparse_optimizer="sgd", dense_optimizer="sgd")  # fmt: skip
        b = r.breakdown()
        rows += [
            {"where": label, "phase": c, "seconds_per_step": b[c], "source": "modeled"}
            for c in COMPONENTS
            if b[c] > 0
        ]
    return rows


def _explained(
    config: DLRMConfig, plan: Plan, ranks: int, batch: int, gpu: str, decisions: list[Decision]
) -> tuple[list[dict[str, object]], list[dict[str, object]], list[str]]:
    """The plan explained on ``ranks`` GPUs of ``gpu`` (TorchRec's step, as the model's GPU figures):
    each rank's step by component, each table's why, and a note with the imbalance and the critical
    path; nothing where the server has fewer GPUs than ``ranks``."""
    hw = hardware(gpu)
    if ranks > hw.devices:
        return [], [], []
    w = Workload(config, batch, sparse_optimizer="sgd", dense_optimizer="sgd")
    e = explain_plan(w, hw, plan, gpus=ranks, decisions=decisions)
    steps = [{"rank": f"rank {r.rank}", "phase": k, "seconds_per_step": v, "source": "modeled"}
             for r in e.ranks for k, v in r.seconds.items() if v > 0]  # fmt: skip
    why = [{**row, "source": "modeled"} for row in e.why()]
    note = (
        f"MODELED on {ranks} GPU{'s' if ranks > 1 else ''} of {gpu}: step time max/mean over ranks "
        f"{e.time_imbalance:.2f}, reserved memory max/mean {e.memory_imbalance:.2f}; critical path: "
        f"{e.critical_path.sentence()}"
    )
    return steps, why, [note]


def _bytes(
    config: DLRMConfig, plan: Plan, ranks: int, batch: int, measured: list[dict[str, Any]] | None, steps: int
) -> list[dict[str, object]]:
    """Bytes sent per step by rank and collective: modeled, and measured when run."""
    rows: list[dict[str, object]] = []
    sums: dict[tuple[int, str], float] = {}
    for r in collective_bytes(config, plan, batch // ranks, ranks):
        if r["collective"] == "dense_all_reduce":
            continue  # DDP's bucket all-reduce: modeled as a ring, logged by the hybrid model as all_reduce
        key = (int(r["rank"]), f"{r['component']} {r['direction']}")
        sums[key] = sums.get(key, 0.0) + float(r["bytes_sent"])
    rows += [{"rank": k[0], "collective": k[1], "bytes": v, "source": "modeled"} for k, v in sums.items()]

    for rank, res in enumerate(measured or []):
        for c in res["comm"]:
            if c["component"] == "all_to_all":  # the embeddings' collectives (all_reduce mixes in DDP's)
                rows.append(
                    {
                        "rank": rank,
                        "collective": f"all_to_all {c['direction']}",
                        "bytes": c["bytes_sent"] / steps,
                        "source": "measured",
                    }
                )
    return rows


def _balance(config: DLRMConfig, plan: Plan, ranks: int, batch: int) -> list[dict[str, object]]:
    """Lookups each rank pools per step (all ranks' samples of its model-parallel shards)."""
    pooling = {t.name: t.pooling_factor for t in config.tables}
    per = [0.0] * ranks
    for s in plan.shards:
        share = batch / ranks if s.sharding == "data_parallel" else batch * s.row_fraction
        per[s.rank] += share * pooling[s.table]
    return [{"rank": r, "lookups": v, "source": "computed"} for r, v in enumerate(per)]


def explore_sharding(
    *,
    model: str = "tiny",
    ranks: int = 2,
    plan: str = "planner",
    batch_size: int = 512,
    gpu: str = "dgx_h100",
    cache: str = "none",
) -> Result:
    """Tables ``modeled``, ``bytes``, ``measured``, ``balance``, ``forward_parts`` (the forward
    all-to-alls of each rank apart: bag lengths, ids, pooled vectors), ``cache`` (each device
    cache's hit rate and bytes moved, measured), ``per_rank`` and ``why`` (the plan explained on the
    chosen server's GPUs, modeled) of one setting (module docstring)."""
    config = sharding_model(model)
    ranks = check_choice("ranks", ranks, RANKS)
    batch = check_choice("batch_size", batch_size, BATCHES)
    check_choice("gpu", gpu, option_values(SHARDING_CONTROLS["gpu"]))
    check_choice("cache", cache, CACHES)
    decisions: list[Decision] = []
    p = sharding_plan(config, plan, ranks, gpu, cache, decisions)
    measured = _MEASURED.get((model, ranks, plan, batch, cache))
    per_rank, why, explained = _explained(config, p, ranks, batch, gpu, decisions)
    tables: dict[str, list[dict[str, object]]] = {
        "modeled": _modeled(config, p, ranks, batch, gpu),
        "bytes": _bytes(config, p, ranks, batch, measured, STEPS),
        "balance": _balance(config, p, ranks, batch),
        "forward_parts": [{"rank": int(r["rank"]), "collective": r["collective"],
                           "bytes": float(r["bytes_sent"]), "source": "modeled"}
                          for r in collective_bytes(config, p, batch // ranks, ranks)
                          if r["collective"] in FORWARD_PARTS],  # the forward all-to-alls apart
        "measured": [{"rank": f"rank {r}", "phase": k, "seconds_per_step": v, "source": "measured"}
                     for r, res in enumerate(measured or []) for k, v in res["phases"].items() if v > 0],
        "cache": _cache_rows(measured, STEPS),
        "per_rank": per_rank,
        "why": why,
    }  # fmt: skip
    tables["summary"] = _summary(tables)
    notes = _notes(tables, p, ranks, measured is not None, model, plan, batch, cache)
    cache_notes = _cache_notes(config, p, cache, tables["cache"], measured is not None)
    return Result(tables=tables, notes=notes + cache_notes + explained)


def _cache_rows(measured: list[dict[str, Any]] | None, steps: int) -> list[dict[str, object]]:
    """Each cached shard's hit rate and bytes per step host -> device and back, **measured** (the
    ranks' :meth:`~recnotebooks.distributed.sharded.ShardedEmbeddingBagCollection.cache_stats`, over
    every step of the run, the cold start included)."""
    rows: list[dict[str, object]] = []
    for res in measured or []:
        for c in res.get("cache", []):
            base = {"rank": int(c["rank"]), "table": c["table"], "shard": int(c["shard"]),
                    "policy": c["policy"], "slots": int(c["slots"]), "source": "measured"}  # fmt: skip
            rows += [
                {
                    **base,
                    "metric": "hit rate (distinct rows)",
                    "value": float(c["hit_rate"]),
                    "display": f"{float(c['hit_rate']):.0%}",
                },
                {
                    **base,
                    "metric": "host -> device bytes per step",
                    "value": c["bytes_h2d"] / steps,
                    "display": human(c["bytes_h2d"] / steps, "B"),
                },
                {
                    **base,
                    "metric": "device -> host bytes per step",
                    "value": c["bytes_d2h"] / steps,
                    "display": human(c["bytes_d2h"] / steps, "B"),
                },
            ]
    return rows


#: the policies of :data:`CACHES`, in words
_POLICY_WORDS = {
    "static": f"a static hot-set cache (FAE: the hottest rows of the first {PROFILE_BATCHES} batches pinned)",
    "lru": "an LRU cache",
}


def _cache_notes(
    config: DLRMConfig, plan: Plan, cache: str, rows: list[dict[str, object]], measured: bool
) -> list[str]:
    """What the cache control did to the plan, and (once run) what each cache measured."""
    choice = CACHES[cache]
    if choice is None:
        return []
    table = cached_table(config)
    shards = [s for s in plan.shards if s.table == table]
    if all(s.placement != "cache" for s in shards):
        return [
            f"Cache {cache!r} not applied: table {table!r} is data_parallel here, and its replicas stay "
            "in each process's memory (the engine all-reduces every row of a replica)."
        ]
    slots = ", ".join(f"rank {s.rank}: {s.cache_rows:,} slots" for s in shards)
    rows_of = next(t.num_rows for t in config.tables if t.name == table)
    notes = [
        f"Table {table!r} ({rows_of:,} rows) is in host memory behind {_POLICY_WORDS[choice[0]]} ({slots}); "
        "training is exact, as without it."
    ]
    if not measured:
        return notes
    for r in rows:
        if r["metric"] != "hit rate (distinct rows)":
            continue
        same = [x for x in rows if x["rank"] == r["rank"] and x["shard"] == r["shard"]]
        moved = {str(x["metric"]): str(x["display"]) for x in same}
        notes.append(
            f"MEASURED here, rank {r['rank']}'s cache of {table!r}: {r['display']} of the distinct rows hit, "
            f"{moved['host -> device bytes per step']} per step copied host -> device and "
            f"{moved['device -> host bytes per step']} written back (rows and their optimizer state; "
            f"over all {STEPS} steps, the cold start included)."
        )
    return notes


def _step_by_where(modeled: list[dict[str, object]]) -> dict[str, float]:
    """The modeled step of the slowest rank, per place it is modeled for (the ``modeled`` table)."""
    steps: dict[str, float] = {}
    for r in modeled:
        steps[str(r["where"])] = steps.get(str(r["where"]), 0.0) + check_float(
            "seconds_per_step", r["seconds_per_step"]
        )
    return steps


def _all_to_all_bytes(rows: list[dict[str, object]]) -> dict[tuple[str, int], float]:
    """The all-to-all bytes of the ``bytes`` table per (source, rank)."""
    a2a: dict[tuple[str, int], float] = {}
    for r in rows:
        if str(r["collective"]).startswith("all_to_all"):
            key = (str(r["source"]), check_int("rank", r["rank"]))
            a2a[key] = a2a.get(key, 0.0) + check_float("bytes", r["bytes"])
    return a2a


def _summary(tables: dict[str, list[dict[str, object]]]) -> list[dict[str, object]]:
    """Headline numbers of a setting, for the history trail: modeled all-to-all bytes per step (all
    ranks) and the modeled step here and over NVLink (or the network)."""
    steps = _step_by_where(tables["modeled"])
    sent = sum(v for (source, _), v in _all_to_all_bytes(tables["bytes"]).items() if source == "modeled")
    here = next(v for k, v in steps.items() if k.startswith("here"))
    gpu = next(
        (v for k, v in steps.items() if "NVLink" in k), next(v for k, v in steps.items() if "network" in k)
    )
    figures = [
        ("all-to-all bytes per step: all ranks", sent, human(sent, "B")),
        ("step here, ms", here * 1e3, f"{here * 1e3:.3g} ms"),
        ("step on the GPUs, ms", gpu * 1e3, f"{gpu * 1e3:.3g} ms"),
    ]
    return [{"metric": m, "value": v, "display": d, "source": "modeled"} for m, v, d in figures]


def _notes(
    tables: dict[str, list[dict[str, object]]],
    plan: Plan,
    ranks: int,
    measured: bool,
    model: str,
    name: str,
    batch: int,
    cache: str = "none",
) -> list[str]:
    """The notes under the controls: the plan's kinds of sharding and its load balance, rank 0's
    forward all-to-alls in parts, the measured bytes and step against the model's (or how to
    measure them), and the modeled all-to-all time at each place."""
    kinds = sorted({s.sharding for s in plan.shards})
    lookups = [check_float("lookups", r["lookups"]) for r in tables["balance"]]
    mean = sum(lookups) / len(lookups)
    notes = [f"Plan '{name}' on {ranks} rank{'s' if ranks > 1 else ''}: {', '.join(kinds)}; lookups per rank "
             f"max/mean {max(lookups) / mean:.2f} (1.00 = balanced)."]  # fmt: skip
    if ranks > 1:
        notes.append(_forward_note(tables["forward_parts"]))
    if measured:
        notes += [_bytes_note(_all_to_all_bytes(tables["bytes"])), _time_note(tables)]
    else:
        with_cache = f", cache={cache!r}" if cache != "none" else ""
        notes.append(
            f"Not measured at this setting yet: modeled only. Run measure_sharding(model={model!r}, "
            f"ranks={ranks}, batch_size={batch}{with_cache}) (a few seconds) and move a "
            "control."
        )
    return [*notes, _all_to_all_time_note(tables["modeled"])]


def _forward_note(parts: list[dict[str, object]]) -> str:
    """Rank 0's forward all-to-alls (the ``forward_parts`` table) in bytes, each apart."""
    sums = {c: 0.0 for c in FORWARD_PARTS}
    for r in parts:
        if r["rank"] == 0 and r["collective"] in sums:
            sums[str(r["collective"])] += check_float("bytes", r["bytes"])
    said = ", ".join(f"{human(v, 'B')} of {FORWARD_PARTS[c]}" for c, v in sums.items())
    return f"MODELED: rank 0's 'all_to_all forward' bar adds three all-to-alls: {said}."


def _bytes_note(a2a: dict[tuple[str, int], float]) -> str:
    """The all-to-all bytes the ranks measured, against the model's (to the byte, or why not)."""
    model_b = sum(v for (s, _), v in a2a.items() if s == "modeled")
    meas_b = sum(v for (s, _), v in a2a.items() if s == "measured")
    same = (
        "modeled: equal to the byte"
        if round(meas_b) == round(model_b)
        else f"modeled {human(model_b, 'B')}: row-wise ids at their expected count"
    )
    return f"MEASURED here: the ranks' all-to-alls sent {human(meas_b, 'B')} per step in all ({same})."


def _all_to_all_time_note(modeled: list[dict[str, object]]) -> str:
    """The modeled all-to-all time of a step at each place it is modeled for."""
    a2a = dict.fromkeys((str(r["where"]) for r in modeled), 0.0)
    for r in modeled:
        if r["phase"] == "all_to_all":
            a2a[str(r["where"])] += check_float("seconds_per_step", r["seconds_per_step"])
    return "MODELED all-to-all per step: " + "; ".join(f"{w} {t * 1e3:.3g} ms" for w, t in a2a.items()) + "."


def _time_note(tables: dict[str, list[dict[str, object]]]) -> str:
    """The measured step (slowest rank) against the model's for the same processes here, and how
    much of each is collectives. The measured ``data`` phase (every rank draws the global synthetic
    batch, work the model does not price) is left out of the comparison and named."""
    comm = ("all_to_all", "all_reduce")
    per_rank: dict[str, list[float]] = {}
    for r in tables["measured"]:
        tot = per_rank.setdefault(str(r["rank"]), [0.0, 0.0, 0.0])
        sec = check_float("seconds_per_step", r["seconds_per_step"])
        if r["phase"] == "data":
            tot[2] += sec
            continue
        tot[0] += sec
        tot[1] += sec if r["phase"] in comm else 0.0
    step, coll, data = max(per_rank.values())
    here = [r for r in tables["modeled"] if str(r["where"]).startswith("here")]
    model = sum(check_float("seconds_per_step", r["seconds_per_step"]) for r in here)
    model_coll = sum(
        check_float("seconds_per_step", r["seconds_per_step"]) for r in here if r["phase"] in comm
    )
    return (
        f"MEASURED step here {step * 1e3:.3g} ms (slowest rank; collectives {coll * 1e3:.3g} ms; not "
        f"counting {data * 1e3:.3g} ms of drawing its synthetic batch, which the model does not price) "
        "against "
        f"{model * 1e3:.3g} ms MODELED for the same processes (collectives {model_coll * 1e3:.3g} ms): "
        f"{model_verdict(step, model)}."
    )


def model_verdict(measured_s: float, modeled_s: float) -> str:
    """How far a modeled step is from a measured one, in words a ratio near 1 cannot hide: within
    10% as a percentage ("the model is 4% too fast here": the measured step is 4% longer), beyond
    it as a factor ("1.3x too fast"), and "within 1%" when the two agree that closely. A ratio
    printed to one decimal would read "1.0x too fast" for anything up to 5% off."""
    measured_s = check_float("measured_s", measured_s, lo=0.0, lo_open=True)
    modeled_s = check_float("modeled_s", modeled_s, lo=0.0, lo_open=True)
    fast = measured_s >= modeled_s  # the model's step is the shorter: it is too fast
    ratio = measured_s / modeled_s if fast else modeled_s / measured_s
    word = "fast" if fast else "slow"
    if ratio < 1.005:
        return "the model is within 1% of it here"
    if ratio < 1.1:
        return f"the model is {ratio - 1:.0%} too {word} here"
    return f"the model is {ratio:.1f}x too {word} here"


def _sent_rows(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The ``bytes`` table as bars: one panel per collective, one bar per source and rank."""
    return [
        {
            **r,
            "metric": f"{r['collective']}: bytes sent per step",
            "value": r["bytes"],
            "setting": f"{r['source']} · rank {r['rank']}",
            "display": human(check_float("bytes", r["bytes"]), "B"),
        }
        for r in rows
    ]


def _labelled_bars(
    rows: list[dict[str, object]], room: int, *, columns: int, source: str, title: str, detail: str
) -> alt.FacetChart:
    """Bars of ``rows`` (:func:`~recnotebooks.viz.charts.metric_bars`), their plots ``room`` wide
    right of the band their ``setting`` labels take."""
    labels = list(dict.fromkeys(str(r["setting"]) for r in rows))
    return metric_bars(
        rows,
        columns=columns,
        source=source,
        detail=detail,
        title=title,
        total_width=band_px(labels, titled=False) + room,
    )


def _render(history: list[HistoryEntry]) -> alt.VConcatChart:
    now, trail = history[0].result.tables, [e.label for e in history]
    rows = _sent_rows(now["bytes"])
    cache_bars = [{**r, "setting": f"rank {r['rank']} · {r['table']} ({r['policy']}, {r['slots']:,} slots)"}
                  for r in now["cache"]]  # fmt: skip

    def labels(table: list[dict[str, object]], col: str) -> list[str]:
        return list(dict.fromkeys(str(r[col]) for r in table))

    # the charts line up their plots at the widest left band: the room right of it is theirs
    room = stack_room(
        band_px(trail, titled=False),
        band_px(labels(now["modeled"], "where")),
        band_px(labels(rows, "setting"), titled=False),
        band_px(labels(now["measured"], "rank")) if now["measured"] else 0,
        band_px(labels(cache_bars, "setting"), titled=False) if cache_bars else 0,
        band_px(labels(now["per_rank"], "rank")) if now["per_rank"] else 0,
    )
    detail = "here: this machine shared by the ranks; GPUs: as many of the chosen server"
    trail_chart = trail_bars(
        history, room, table="summary", title="This setting and the last ones", source="modeled",
        detail="one bar per setting, the current one solid",
    )  # fmt: skip
    steps = time_breakdown(now["modeled"], by="where", phases=list(COMPONENTS), source="modeled",
                           title="One step of this plan, slowest rank", detail=detail,
                           width=min(480, room))  # fmt: skip
    charts: list[alt.TopLevelMixin] = [trail_chart, steps]
    if rows:
        senders = list(dict.fromkeys(str(r["setting"]) for r in rows))
        both = {"measured": "the ranks' comm logs", "modeled": "perf.traffic"}  # one subtitle line each
        width = band_px(senders, titled=False) + room
        charts.append(metric_bars(rows, columns=2, title="Bytes each rank sends, modeled and measured",
                                  source_detail=both, total_width=width))  # fmt: skip
    if cache_bars:
        stats = "the ranks' cache statistics over every step of the run"
        charts.append(_labelled_bars(cache_bars, room, columns=3, source="measured",
                                     title="The device cache on each rank", detail=stats))  # fmt: skip
    if now["measured"]:
        where = "CPU processes on this machine, gloo on 127.0.0.1"
        charts.append(time_breakdown(now["measured"], by="rank", title="Measured step of each rank, here",
                                     source="measured", detail=where, width=min(480, room)))  # fmt: skip
    if now["per_rank"]:
        what = "the plan explained on the chosen server's GPUs (perf.explain); the critical path in the notes"
        charts.append(time_breakdown(now["per_rank"], by="rank", title="Each rank's step on the GPUs",
                                     source="modeled", detail=what, width=min(480, room)))  # fmt: skip
    return stack(*charts)


def sharding_explorer(*, history: int = 4, **values: object) -> App:
    """The Sharding Explorer app; ``values`` override the default settings."""
    controls = build_controls(SHARDING_CONTROLS, values, "the Sharding Explorer")
    what = (
        "MODELED steps and bytes of a sharding plan, beside the plan MEASURED on local processes once run "
        "(with a device cache: its hit rate and bytes, measured)"
    )
    return App("Sharding Explorer", controls, lambda **kw: explore_sharding(**kw), _render, history=history,
               description=what)  # fmt: skip
