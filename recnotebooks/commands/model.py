"""``recnb cost`` and ``recnb plan``: the model's commands, MODELED numbers for real hardware
(``recnb calibrate`` and ``recnb validate`` measure: :mod:`recnotebooks.commands.measure`);
``recnb plan --explain`` explains the plan (:mod:`recnotebooks.perf.explain`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from recnotebooks.config import DLRMConfig, Workload, preset
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.explain import PlanExplanation, explain_plan
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.job_planner import MLPERF_STRATEGY
from recnotebooks.perf.memory import memory_report
from recnotebooks.perf.mlperf_plan import hugectr_plan, mlperf_plan, submitted_sharding
from recnotebooks.perf.planner import Decision, plan_tables
from recnotebooks.plan import Plan, single_device_plan

from .report import Report, printer
from .settings import MAX_WORLD_SIZE, CLIError, ModelSettings

__all__ = ["cost", "plan", "run", "hstu", "add_hstu_parser"]


def run(s: ModelSettings) -> Report:
    """``recnb cost``, ``recnb plan`` or ``recnb hstu``; a setting the model refuses is a
    :class:`CLIError`."""
    try:
        if s.command == "hstu":
            return hstu(s)
        return cost(s) if s.command == "cost" else plan(s)
    except ValueError as e:
        raise CLIError(str(e)) from None


# ----- the plan priced --------------------------------------------------------------------------
def _cache_plan(s: ModelSettings, cfg: DLRMConfig, slots: int | float) -> Plan:
    """``--cache-rows``: every table on one device behind a cache of ``slots`` slots (rows, or a
    fraction of each table's rows)."""
    if s.placement != "cache" or _world_size(s) != 1 or s.cache_hit_rate is not None:
        raise ValueError(
            "--cache-rows applies to --placement cache on one device (--gpus 1 --nodes 1), "
            "without --cache-hit-rate (the model computes the hit rate)"
        )
    rows = {
        t.name: max(1, min(t.num_rows, round(slots * t.num_rows)))
        if isinstance(slots, float)
        else min(t.num_rows, slots)
        for t in cfg.tables
    }
    return single_device_plan(
        cfg, "cache", cache_rows=rows, cache_policy=s.cache_policy, cache_ways=s.cache_ways
    )


def _world_size(s: ModelSettings) -> int:
    """Devices in all: ``--gpus`` x ``--nodes``."""
    return s.gpus * s.nodes


def _check_devices(s: ModelSettings) -> None:
    """``--gpus`` within a node of ``--hardware``, and the devices in all within MAX_WORLD_SIZE."""
    hw = hardware(s.hardware)
    if s.gpus > hw.devices:
        rack = (
            f"; a tray of its {hw.domain_size}-GPU NVLink domain: {s.gpus} GPUs are --gpus {hw.devices} "
            f"--nodes {-(-s.gpus // hw.devices)}"
            if hw.nodes_per_domain > 1
            else ""
        )
        raise ValueError(
            f"--gpus must be <= {hw.devices} (devices per {s.hardware} node{rack}), got {s.gpus}"
        )
    if _world_size(s) > MAX_WORLD_SIZE:
        raise ValueError(
            f"--gpus x --nodes must be <= {MAX_WORLD_SIZE} devices, "
            f"got {s.gpus} x {s.nodes} = {_world_size(s):,}"
        )


def _mlperf_plan(s: ModelSettings, cfg: DLRMConfig, decisions: list[Decision] | None = None) -> Plan:
    """``--strategy mlperf``: MLPerf's sharding, every table in HBM (a placement asked for is refused):
    on one node :func:`mlperf_plan`'s rule, on several HugeCTR's plan with MLPerf v5.1's settings for such a
    system (:func:`submitted_sharding`: ``auto`` over an NVL72 rack's trays, ``hier_auto`` over 8 or 16
    DGX nodes)."""
    extra = [f"--placement {s.placement}"] if s.placement != "hbm" else []
    extra += [f"--cache-hit-rate {s.cache_hit_rate}"] if s.cache_hit_rate is not None else []
    if extra:
        raise ValueError(
            f"--strategy {MLPERF_STRATEGY} keeps every table in HBM, as MLPerf's runs do; drop "
            f"{' and '.join(extra)} or use another --strategy"
        )
    if s.nodes > 1:  # HugeCTR's plan as MLPerf v5.1's configs set it for such a system
        sharding = submitted_sharding(s.hardware, s.gpus, s.nodes)
        return hugectr_plan(cfg, s.gpus, s.nodes, sharding, decisions=decisions)
    return mlperf_plan(cfg, s.gpus, s.nodes, hardware(s.hardware).hbm_bytes, decisions=decisions)


def _exchange(s: ModelSettings) -> str | None:
    """How HugeCTR's pooled embeddings cross nodes under ``--strategy mlperf`` on several nodes, as
    MLPerf v5.1's ``train.py`` picks it for the plan (:func:`submitted_sharding`); otherwise None."""
    if s.strategy != MLPERF_STRATEGY or s.nodes <= 1 or s.cache_rows is not None:
        return None
    return "hierarchical" if submitted_sharding(s.hardware, s.gpus, s.nodes).hierarchical else "flat"


def _planned(s: ModelSettings, cfg: DLRMConfig, decisions: list[Decision] | None = None) -> Plan:
    """The planner's plan for ``--strategy``, with a note where ``--cache-hit-rate`` went unused."""
    if s.placement == "cache" and s.cache_hit_rate is None:
        raise ValueError("--placement cache needs --cache-hit-rate H (0..1) or --cache-rows R|F")
    if s.cache_hit_rate is not None and s.placement != "cache" and s.strategy != "cost":
        raise ValueError(
            f"--cache-hit-rate {s.cache_hit_rate} applies to --placement cache (or to the "
            f"fallback caches of --strategy cost), not to --placement {s.placement} with "
            f"--strategy {s.strategy}"
        )
    plan = plan_tables(
        cfg,
        s.hardware,
        _world_size(s),
        strategy=s.strategy,
        placement=s.placement,
        cache_hit_rate=s.cache_hit_rate,
        batch_size=s.batch_size,
        dtype=s.dtype,
        sparse_optimizer=s.sparse_optimizer,
        decisions=decisions,
    )
    if s.cache_hit_rate is not None and not any(shard.placement == "cache" for shard in plan.shards):
        unused = (
            f"--cache-hit-rate {s.cache_hit_rate} was not used: every table fits in device memory, "
            "so the cost strategy put no table behind a cache"
        )
        plan = dataclasses.replace(plan, notes=(*plan.notes, unused))
    return plan


def model_and_plan(s: ModelSettings, decisions: list[Decision] | None = None) -> tuple[DLRMConfig, Plan]:
    """The preset's model and the plan ``cost`` prices and ``plan`` shows (``ValueError`` for a
    job the options cannot describe); the planner's decisions appended to ``decisions`` if given."""
    cfg = preset(s.preset)
    _check_devices(s)
    if s.cache_rows is not None:
        return cfg, _cache_plan(s, cfg, s.cache_rows)
    if s.strategy == MLPERF_STRATEGY:
        return cfg, _mlperf_plan(s, cfg, decisions)
    return cfg, _planned(s, cfg, decisions)


# ----- cost -----------------------------------------------------------------------------------
def cost(s: ModelSettings) -> Report:
    """``recnb cost``: the modeled step, throughput, utilisation, memory and where the tables live."""
    cfg, chosen = model_and_plan(s)
    r = estimate(cfg, s.hardware, batch_size=s.batch_size, gpus=s.gpus, nodes=s.nodes, plan=chosen,
                 dtype=s.dtype, sparse_optimizer=s.sparse_optimizer, dense_optimizer=s.dense_optimizer,
                 implementation=s.implementation, exchange=_exchange(s))  # fmt: skip
    out = {"command": "cost", "implementation": s.implementation, **r.summary(),
           "cache_hit_rates": dict(r.cache_hit_rates), "plan_strategy": chosen.strategy,
           "plan_notes": list(chosen.notes), "memory_notes": list(r.memory.notes),
           "parameter_servers": r.memory.parameter_servers}  # fmt: skip
    return Report(out, printer(cost_lines))


def cost_lines(r: dict[str, Any]) -> Iterator[str]:
    """``recnb cost``'s text."""
    yield (
        f"MODELED: {r['config']} on {r['world_size']} x {r['hardware']} device(s) ({r['nodes']} node(s)), "
        f"global batch {r['batch_size']}, {r['dtype']}"
    )
    step, overlap = r["step_time_s"] * 1e3, r["step_time_overlap_s"] * 1e3
    yield f"  step time     {step:9.3f} ms   ({overlap:.3f} ms with compute/communication overlap)"
    if r["exposed_communication_s"] > 0:
        yield (
            f"    a rank's overlapped step waits up to {r['exposed_communication_s'] * 1e3:.3f} ms for "
            f"communication off NVLink ({r['implementation']} hides only what runs over NVLink)"
        )
    yield f"  throughput    {r['throughput']:12,.0f} samples/s ({r['throughput_overlap']:,.0f} with overlap)"
    kj = r["joules_per_million_samples"] / 1e3
    yield (
        f"  busy {r['busy_fraction']:.0%} · FLOP/s {r['flops_efficiency']:.1%} of peak · HBM bandwidth "
        f"{r['hbm_utilisation']:.0%} · {kj:,.1f} kJ per million samples"
    )
    total = sum(r["breakdown_s"].values()) or 1.0
    yield "  slowest rank, by component (ms/step):"
    for k, v in r["breakdown_s"].items():
        if v > 0:
            yield f"    {k:<20} {v * 1e3:9.3f}  {100 * v / total:5.1f}%"
    for name, c in (r.get("collectives") or {}).items():  # how the slowest rank's collectives were priced
        how = f"NCCL picks {c['algorithm']}/{c['protocol']}" if "algorithm" in c else "alpha-beta formula"
        yield f"    {name:<24} {how}, {c['calls']} call(s)"
    yield from _hit_rate_lines(r.get("cache_hit_rates") or {})
    yield from _memory_lines(r)
    yield from _table_placement_lines(r)
    yield _fits_line(r)


def _table_placement_lines(r: dict[str, Any]) -> Iterator[str]:
    """Where the tables live (the places that hold bytes), and the plan's sentence about it."""
    yield "  where the tables live (weights and optimizer state, GB):"
    for row in r["table_placement"]:
        if row["bytes"] > 0:
            extra = "" if row["hit_rate"] is None else f"   hit rate {row['hit_rate']:.1%}"
            if row["parameter_servers"]:
                extra = f"   {row['parameter_servers']:,} server(s)"
            yield f"    {row['where']:<32} {row['gb']:11,.2f}  {row['share']:6.1%}{extra}"
    yield f"  - {r['table_placement_note']}"


def _hit_rate_lines(rates: dict[str, float]) -> Iterator[str]:
    """The modeled cache hit rate of each table (or their range, for many tables)."""
    if not rates:
        return
    if len(rates) <= 6:
        text = ", ".join(f"{t} {h:.3f}" for t, h in rates.items())
    else:
        lo, hi = min(rates.values()), max(rates.values())
        text = (f"{lo:.3f}" if hi - lo < 5e-4 else f"{lo:.3f} to {hi:.3f}") + f" over {len(rates)} tables"
    yield f"  cache hit rate per table (modeled): {text}"


def _memory_lines(r: dict[str, Any]) -> Iterator[str]:
    """Memory per device and the memory model's notes (``cost`` and ``plan`` alike)."""
    mem = ", ".join(f"{b / 1e9:.2f}" for b in r["memory_per_device_bytes"])
    yield f"  memory per device (GB): {mem}"
    for note in r["memory_notes"]:
        yield f"  - {note}"


def _fits_line(r: dict[str, Any]) -> str:
    return "  fits: yes" if r["fits"] else "  DOES NOT FIT: " + "; ".join(r["reasons"])


# ----- plan -----------------------------------------------------------------------------------
def plan(s: ModelSettings) -> Report:
    """``recnb plan``: the plan's shards and notes, and the memory it takes on each device; with
    ``--explain`` its explanation (:func:`explain`)."""
    if s.table is not None and not s.explain:
        raise ValueError(f"--table {s.table} applies to recnb plan --explain")
    decisions: list[Decision] = []
    cfg, chosen = model_and_plan(s, decisions)
    mem = memory_report(cfg, hardware(s.hardware), chosen, s.batch_size, gpus=s.gpus, dtype=s.dtype,
                        sparse_optimizer=s.sparse_optimizer, dense_optimizer=s.dense_optimizer)  # fmt: skip
    out = {"command": "plan", "config": cfg.name, "hardware": s.hardware, "world_size": chosen.world_size,
           "strategy": chosen.strategy, "shards": chosen.table(), "notes": list(chosen.notes),
           "fits": mem.fits, "reasons": mem.reasons,
           "memory_per_device_bytes": [d["total"] for d in mem.device], "memory_notes": list(mem.notes),
           "parameter_servers": mem.parameter_servers}  # fmt: skip
    if s.explain:
        e = explain(s, cfg, chosen, decisions)
        out["explanation"] = {**e.to_dict(), "why": e.why(s.table)}
        return Report(out, printer(lambda r: [*plan_lines(r), *explain_lines(r["explanation"])]))
    return Report(out, printer(plan_lines))


def explain(s: ModelSettings, cfg: DLRMConfig, chosen: Plan, decisions: list[Decision]) -> PlanExplanation:
    """``recnb plan --explain``: :func:`~recnotebooks.perf.explain.explain_plan` of the plan for the step
    ``--implementation`` runs (HugeCTR's exchange across nodes as ``cost`` prices it)."""
    w = Workload(
        cfg, s.batch_size, s.dtype, sparse_optimizer=s.sparse_optimizer, dense_optimizer=s.dense_optimizer
    )
    return explain_plan(
        w,
        s.hardware,
        chosen,
        gpus=s.gpus,
        nodes=s.nodes,
        decisions=decisions,
        implementation=s.implementation,
        exchange=_exchange(s),
    )


def plan_lines(r: dict[str, Any]) -> Iterator[str]:
    """``recnb plan``'s text."""
    yield f"plan ({r['strategy']}) for {r['config']} on {r['world_size']} x {r['hardware']}:"
    yield f"  {'table':<10} {'rank':>4}  {'sharding':<13} {'placement':<9} {'rows':>6} {'cols':>6}"
    for s in r["shards"]:
        yield (
            f"  {s['table']:<10} {s['rank']:>4}  {s['sharding']:<13} {s['placement']:<9} {s['rows']:>6.2f} "
            f"{s['columns']:>6.2f}"
        )
    for n in r["notes"]:
        yield f"  - {n}"
    yield from _memory_lines(r)
    yield _fits_line(r)


#: Most ranks ``recnb plan --explain`` prints one by one (the slowest of them beyond; ``--json`` has all).
EXPLAIN_RANKS = 32


def explain_lines(e: dict[str, Any]) -> Iterator[str]:
    """``recnb plan --explain``'s text, from :meth:`PlanExplanation.to_dict`: each rank's cost terms and
    storage, the imbalance, the critical path and why each table went where it went."""
    yield (
        f"explained, MODELED ({e['implementation']}'s step, global batch {e['batch_size']:,}, {e['dtype']}): "
        f"step {e['step_time_s'] * 1e3:.3f} ms ({e['step_time_overlap_s'] * 1e3:.3f} ms with overlap)"
    )
    ranks, path = e["ranks"], e["critical_path"]
    slowest = {r["rank"] for r in sorted(ranks, key=lambda r: -r["step_s"])[:EXPLAIN_RANKS]}
    shown = [r for r in ranks if r["rank"] in slowest | {path["rank"], path["overlap_rank"]}]
    if len(shown) < len(ranks):
        yield (
            f"  the {len(slowest)} slowest of {len(ranks)} ranks and the one that bounds the step with "
            "overlap (--json has every rank)"
        )
    yield "  per rank, cost terms (ms/step; lookups, MB a step):"
    heads = ("step", "overlap", "lookups", "gathered", "a2a MB", "a2a ms", "ar MB", "ar ms")
    yield f"  {'rank':>4} " + " ".join(f"{h:>9}" for h in heads)
    for r in shown:
        ms = [r[k] * 1e3 for k in ("step_s", "step_overlap_s")]
        mb = [r[k] / 1e6 for k in ("bytes_gathered", "all_to_all_bytes")]
        cols = [f"{ms[0]:9.3f}", f"{ms[1]:9.3f}", _count(r["lookups"]), f"{mb[0]:9.2f}", f"{mb[1]:9.2f}",
                f"{r['all_to_all_s'] * 1e3:9.3f}", f"{r['all_reduce_bytes'] / 1e6:9.2f}",
                f"{r['all_reduce_s'] * 1e3:9.3f}"]  # fmt: skip
        yield f"  {r['rank']:>4} " + " ".join(cols)
    yield from _storage_lines(shown)
    if any(e["host_bytes"]):
        yield "  tables in host DRAM per node (GB): " + ", ".join(f"{b / 1e9:.2f}" for b in e["host_bytes"])
    yield (
        f"  imbalance (max/mean over ranks): step time {e['time_imbalance']:.3f}, "
        f"reserved memory {e['memory_imbalance']:.3f}"
    )
    yield f"  critical path: {path['sentence']}"
    yield from _why_lines(e["why"])


def _count(n: float) -> str:
    """A count in 9 characters: ``811,008``, ``12.3M``, ``4.56G``."""
    for unit, scale in (("G", 1e9), ("M", 1e6)):
        if n >= 10 * scale:
            return f"{n / scale:8.3g}{unit}"
    return f"{n:9,.0f}"


def _storage_lines(ranks: list[dict[str, Any]]) -> Iterator[str]:
    """Each rank's reserved device memory by kind, and the headroom against the device's (GB)."""
    yield "  per rank, storage reserved in device memory (GB):"
    yield (
        f"  {'rank':>4} {'weights':>9} {'opt state':>9} {'cache':>8} {'activ.':>8} {'buffers':>8} "
        f"{'reserved':>9} {'headroom':>9}"
    )
    for r in ranks:
        b = {k: v / 1e9 for k, v in r["storage_bytes"].items()}
        yield (
            f"  {r['rank']:>4} {b['weights']:9.3f} {b['optimizer_state']:9.3f} {b['cache']:8.3f} "
            f"{b['activations']:8.3f} {b['buffers']:8.3f} {r['reserved_bytes'] / 1e9:9.3f} "
            f"{r['headroom_bytes'] / 1e9:9.3f}"
        )


def _ranks_text(ranks: list[int]) -> str:
    """``[0, 1, 2, 3, 8] -> '0-3, 8'``."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(f"{g[0]}-{g[-1]}" if len(g) > 1 else str(g[0]) for g in runs)


def _cost_text(name: str, cost: float | None, unit: str) -> str:
    """A compared candidate and its cost in ``unit`` (seconds in ms, bytes in MB)."""
    if cost is None:
        return name
    if unit == "seconds":
        return f"{name} {cost * 1e3:.3g} ms"
    if unit == "bytes":
        return f"{name} {cost / 1e6:.4g} MB"
    return f"{name} {cost:.4g}"


def _why_lines(rows: list[dict[str, Any]]) -> Iterator[str]:
    """Why each table went where it went: its ranks, sharding and placement, the chosen candidate's cost
    beside the best other's, and the reason (with the rule, said once where every table shares it)."""
    yield "  why each table went where it went (the costs the planner compared when it decided):"
    rules = dict.fromkeys((w["rule"], w["unit"]) for w in rows)
    shared = len(rules) == 1
    if shared:
        rule, unit = next(iter(rules))
        yield f"  rule: {rule}" + (f"; costs in {unit}" if unit else "")
    yield f"  {'table':<12} {'ranks':<12} {'sharding':<13} {'placement':<9} compared"
    for w in rows:
        ranks = _ranks_text(w["ranks"])
        short = ranks if len(ranks) <= 12 else f"{len(w['ranks'])} ranks"
        shards = f" ({w['decisions']} shards)" if w["decisions"] > 1 else ""
        yield (
            f"  {w['table']:<12} {short:<12} {w['sharding']:<13} {w['placement']:<9} "
            f"{_compared_text(w, with_unit=not shared)}{shards}"
        )
        detail = w["reason"] if shared else f"{w['rule']}: {w['reason']}"
        yield f"      {detail if short == ranks else f'ranks {ranks}; {detail}'}"


def _compared_text(w: dict[str, Any], with_unit: bool) -> str:
    """A :meth:`PlanExplanation.why` row's comparison: the chosen candidate's cost against the best
    other's, or the range of the candidates' costs (in its unit, named ``with_unit``)."""
    unit = f" ({w['unit']})" if with_unit and w["unit"] not in ("seconds", "bytes", "") else ""
    if w["chosen_cost"] is not None:
        other = f" vs {_cost_text(w['other'], w['other_cost'], w['unit'])}" if w["other"] else ""
        return f"{_cost_text(w['chosen'], w['chosen_cost'], w['unit'])}{other}{unit}"
    if w["compared_range"] is not None:
        lo, hi = (_cost_text("", v, w["unit"]).strip() for v in w["compared_range"])
        return f"the candidates then {lo} to {hi}{unit}"
    return "-"


# ----- recnb hstu: a generative recommender's step, modeled ----------------------------------------
def add_hstu_parser(sub: Any) -> None:
    """Add ``hstu`` to ``sub`` (the subparsers of ``recnb``)."""
    from recnotebooks.config.hstu import HSTU_PRESETS

    h = sub.add_parser(
        "hstu",
        help="a generative recommender's (HSTU, MLPerf's DLRMv4) modeled step, jagged and padded: "
        "breakdown, MFU, memory and time to train",
    )
    h.add_argument(
        "--preset", default="dlrmv4", choices=sorted(HSTU_PRESETS), help="HSTU preset (default dlrmv4)"
    )
    h.add_argument("--hardware", default="dgx_h100", help="hardware preset (default dgx_h100)")
    h.add_argument("--gpus", type=int, default=8, help="GPUs a node (default 8)")
    h.add_argument("--nodes", type=int, default=4, help="nodes (default 4)")
    h.add_argument("--batch-size", type=int, default=8192, help="global batch in histories (default 8192)")
    h.add_argument("--json", action="store_true", help="print one JSON object")
    h.set_defaults(placement="hbm", cache_hit_rate=None, cache_rows=None, cache_policy="lru", cache_ways=1,
                   dtype="bf16", sparse_optimizer="rowwise_adagrad", dense_optimizer="adam",
                   strategy="greedy")  # fmt: skip


def hstu(s: ModelSettings) -> Report:
    """``recnb hstu``: :func:`~recnotebooks.perf.hstu.hstu_step` jagged (a fused attention kernel) and
    padded (the common way: plain PyTorch, unfused) on the global batch
    split over ``gpus x nodes``, Yambda-shaped histories (scaled to the preset's ``max_len`` where it
    is below 4,096), :func:`~recnotebooks.perf.hstu_memory.hstu_memory`, and the minutes to DLRMv4's
    target (round v6.1's curve) where the batch lies on it."""
    from recnotebooks.config.hstu import hstu_preset
    from recnotebooks.perf.hstu import hstu_step, lognormal_lengths
    from recnotebooks.perf.hstu_memory import hstu_memory
    from recnotebooks.perf.hstu_plan import YAMBDA_LENGTHS
    from recnotebooks.published.convergence import convergence_curve, time_to_train

    cfg, hw = hstu_preset(s.preset), hardware(s.hardware)
    dtype = s.dtype if s.dtype in hw.peak_flops else "fp32"  # a CPU: fp32
    world = s.gpus * s.nodes
    if s.batch_size < world or s.batch_size % world:
        raise ValueError(
            f"--batch-size must be a positive multiple of --gpus x --nodes ({world}), got {s.batch_size}"
        )
    scale = min(1.0, cfg.max_len / 4096)
    lengths = lognormal_lengths(s.batch_size // world, *(x * scale for x in YAMBDA_LENGTHS), cfg.max_len)
    curve = convergence_curve("v6.1")
    out: dict[str, Any] = {"command": "hstu", "source": "modeled", "config": cfg.name, "hardware": hw.name,
                           "gpus": s.gpus, "nodes": s.nodes, "batch_size": s.batch_size, "dtype": dtype,
                           "histories_per_gpu": len(lengths), "tokens_per_gpu": sum(lengths)}  # fmt: skip
    for name, padded in (("jagged", False), ("padded", True)):
        kw = {"padded": padded, "fused_attention": not padded, "dtype": dtype}
        step = hstu_step(cfg, hw, lengths, gpus=s.gpus, nodes=s.nodes, **kw)
        mem = hstu_memory(cfg, lengths, world, hw, **kw)
        on_curve = curve[0][0] <= s.batch_size <= curve[-1][0]
        minutes = time_to_train(s.batch_size / step.step_seconds, s.batch_size, "v6.1") if on_curve else None
        out[name] = {"step_s": step.step_seconds, "breakdown_s": dict(step.seconds), "mfu": step.mfu(dtype),
                     "tokens_per_s": step.tokens_per_s, "memory_bytes": dict(mem.bytes),
                     "memory_gb_per_gpu": mem.total / 1e9, "fits": mem.fits(hw),
                     "minutes_to_target": minutes}  # fmt: skip
    return Report(out, printer(hstu_lines))


def hstu_lines(r: dict[str, Any]) -> Iterator[str]:
    """``recnb hstu``'s text."""
    yield (
        f"MODELED: {r['config']} on {r['gpus'] * r['nodes']} x {r['hardware']} ({r['nodes']} node(s)), "
        f"global batch {r['batch_size']}, {r['dtype']}: {r['histories_per_gpu']} histories, "
        f"{r['tokens_per_gpu']:,} tokens a GPU"
    )
    j, p = r["jagged"], r["padded"]
    yield f"  {'':<14}{'jagged':>12}{'padded':>12}   (padded: unfused attention, each history at the longest)"
    yield f"  {'step ms':<14}{j['step_s'] * 1e3:12.2f}{p['step_s'] * 1e3:12.2f}"
    for k in j["breakdown_s"]:
        yield f"    {k:<12}{j['breakdown_s'][k] * 1e3:12.2f}{p['breakdown_s'][k] * 1e3:12.2f}"
    yield f"  {'MFU':<14}{j['mfu']:12.1%}{p['mfu']:12.1%}"
    yield f"  {'GB a GPU':<14}{j['memory_gb_per_gpu']:12.1f}{p['memory_gb_per_gpu']:12.1f}"
    yield f"  {'fits HBM':<14}{'yes' if j['fits'] else 'no':>12}{'yes' if p['fits'] else 'no':>12}"
    m = [x["minutes_to_target"] for x in (j, p)]
    if m[0] is None:
        yield "  minutes to DLRMv4's target: the global batch is off round v6.1's curve (8,192 to 32,768)"
    else:
        yield f"  {'min to target':<14}{m[0]:12.1f}{m[1]:12.1f}   (rcps_dlrmv4 curve, evaluations left out)"
