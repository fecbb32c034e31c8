"""``recnb cost`` and ``recnb plan``: the model's commands (``recnb calibrate`` and ``recnb validate``
measure, and live in :mod:`recnotebooks.measure.commands`)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from recnotebooks.config import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS, DLRMConfig, preset, preset_names
from recnotebooks.perf.access import CACHE_POLICIES
from recnotebooks.perf.components.ops import IMPLEMENTATIONS
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import hardware, hardware_names
from recnotebooks.perf.job_planner import MLPERF_STRATEGY
from recnotebooks.perf.memory import memory_report
from recnotebooks.perf.mlperf_plan import mlperf_plan
from recnotebooks.perf.planner import STRATEGIES, plan_tables
from recnotebooks.perf.precision import precision_names
from recnotebooks.plan import PLACEMENTS, Plan, single_device_plan

__all__ = ["add_parsers", "run"]

COMMANDS = ("cost", "plan")


#: Most devices (``--gpus`` x ``--nodes``) a plan or estimate is made for: a plan has a row
#: per table and rank and the model is evaluated rank by rank, so 1,024 ranks (128 eight-GPU
#: nodes) answer within seconds to a few tens of seconds here; larger clusters are refused.
MAX_WORLD_SIZE = 1024


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    int_arg: Callable[..., Callable[[str], int]],
    number: Callable[..., Callable[[str], float]],
) -> None:
    """Add ``cost`` and ``plan`` to ``sub`` (argparse types given)."""

    rate = number("--cache-hit-rate", lo=0.0, hi=1.0, lo_open=False)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--preset", default="criteo_kaggle", choices=preset_names(), help="model preset")
        p.add_argument("--hardware", default="dgx_a100", choices=hardware_names(), help="hardware preset")
        p.add_argument(
            "--gpus",
            type=int_arg("--gpus", hi=MAX_WORLD_SIZE),
            default=1,
            help="devices per node (default 1)",
        )
        p.add_argument(
            "--nodes", type=int_arg("--nodes", hi=MAX_WORLD_SIZE), default=1, help="nodes (default 1)"
        )
        p.add_argument(
            "--batch-size", type=int_arg("--batch-size", hi=2**40), default=8192, help="global batch size"
        )
        p.add_argument(
            "--placement", default="hbm", choices=PLACEMENTS, help="where tables live (default hbm)"
        )
        p.add_argument(
            "--cache-hit-rate",
            type=rate,
            default=None,
            help="hit rate of --placement cache (and of --strategy cost's fallback caches)",
        )
        p.add_argument(
            "--cache-rows",
            type=_cache_rows_arg,
            default=None,
            metavar="R|F",
            help="device cache slots per table for --placement cache, as rows (int) or a fraction of each "
            "table's rows; the model computes the hit rate for --cache-policy (instead of --cache-hit-rate)",
        )
        p.add_argument("--cache-policy", default="lru", choices=CACHE_POLICIES, help="policy of --cache-rows")
        p.add_argument(
            "--cache-ways",
            type=int_arg("--cache-ways", hi=4096),
            default=32,
            help="ways of --cache-policy setassoc (default 32, FBGEMM's)",
        )
        amp = "fp32, tf32, pure bf16/fp16, amp_fp16/amp_bf16 (autocast: fp32 weights)"
        p.add_argument("--dtype", default="fp32", choices=precision_names(), help=amp)
        p.add_argument(
            "--sparse-optimizer",
            default="rowwise_adagrad",
            choices=SPARSE_OPTIMIZERS,
            help="embedding optimizer whose fp32 state is sized and priced: sgd (none), rowwise_adagrad "
            "(one float per row), adagrad (exact: one per element)",
        )
        p.add_argument(
            "--dense-optimizer",
            default="adagrad",
            choices=DENSE_OPTIMIZERS,
            help="MLP optimizer whose state is sized: sgd (none), adagrad (a float a weight), adam (two)",
        )
        p.add_argument("--json", action="store_true", help="print one JSON object")

    c = sub.add_parser(
        "cost", help="modeled step time, throughput, utilisation and memory on a hardware preset"
    )
    common(c)
    c.add_argument(
        "--strategy",
        default="greedy",
        choices=(*STRATEGIES, MLPERF_STRATEGY),
        help="plan for several devices (mlperf: the sharding the model prices MLPerf's runs with, every "
        "table in HBM)",
    )
    c.add_argument(
        "--implementation",
        default="torchrec",
        choices=IMPLEMENTATIONS,
        help="whose training step is priced: torchrec (default: TorchRec's eager step; on one device, "
        "ours), recnotebooks (our sharded step), hugectr (NVIDIA's CUDA-graphed step, as MLPerf's "
        "DLRM-DCNv2 submissions ran it: tables in HBM, fp32, tf32 or amp_fp16)",
    )
    pl = sub.add_parser("plan", help="assign tables to devices and placements; explain the plan")
    common(pl)
    pl.add_argument(
        "--strategy",
        default="cost",
        choices=(*STRATEGIES, MLPERF_STRATEGY),
        help="planner strategy (default cost; mlperf: the sharding the model prices MLPerf's runs with)",
    )


def run(
    args: argparse.Namespace, error: type[Exception]
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], None]]:
    try:
        return _COMMANDS[args.command](args)
    except ValueError as e:
        raise error(str(e)) from None


def _cache_rows_arg(text: str) -> float:
    """``--cache-rows``: rows per table (an int >= 1) or a fraction of each table's rows in (0, 1],
    in ASCII digits (``int()`` and ``float()`` also read other scripts' digits)."""
    try:
        value = float(text) if text.isascii() else float("nan")
    except ValueError:
        value = float("nan")
    whole = value.is_integer() and "." not in text and "e" not in text.lower()
    if not (whole and value >= 1) and not (0 < value <= 1):
        raise argparse.ArgumentTypeError(
            "--cache-rows must be rows (an int >= 1) or a fraction of each table's rows in (0, 1], "
            f"in ASCII digits, got {text!r}"
        )
    return int(text) if whole else value


def _cache_plan(args: argparse.Namespace, cfg: DLRMConfig) -> Plan:
    """``--cache-rows``: every table on one device behind a cache of that many slots."""

    if args.placement != "cache" or args.gpus * args.nodes != 1 or args.cache_hit_rate is not None:
        raise ValueError(
            "--cache-rows applies to --placement cache on one device (--gpus 1 --nodes 1), "
            "without --cache-hit-rate (the model computes the hit rate)"
        )
    rows = {
        t.name: max(1, min(t.num_rows, round(args.cache_rows * t.num_rows)))
        if isinstance(args.cache_rows, float)
        else min(t.num_rows, args.cache_rows)
        for t in cfg.tables
    }
    return single_device_plan(
        cfg, "cache", cache_rows=rows, cache_policy=args.cache_policy, cache_ways=args.cache_ways
    )


def _plan(args: argparse.Namespace) -> tuple[DLRMConfig, Plan]:

    cfg = preset(args.preset)
    world = args.gpus * args.nodes
    devices = hardware(args.hardware).devices
    if args.gpus > devices:
        raise ValueError(f"--gpus must be <= {devices} (devices per {args.hardware} node), got {args.gpus}")
    if world > MAX_WORLD_SIZE:
        raise ValueError(
            f"--gpus x --nodes must be <= {MAX_WORLD_SIZE} devices, "
            f"got {args.gpus} x {args.nodes} = {world:,}"
        )
    if getattr(args, "cache_rows", None) is not None:
        return cfg, _cache_plan(args, cfg)
    if args.strategy == MLPERF_STRATEGY:
        extra = [f"--placement {args.placement}"] if args.placement != "hbm" else []
        extra += [f"--cache-hit-rate {args.cache_hit_rate}"] if args.cache_hit_rate is not None else []
        if extra:
            raise ValueError(
                f"--strategy {MLPERF_STRATEGY} keeps every table in HBM, as MLPerf's runs do; drop "
                f"{' and '.join(extra)} or use another --strategy"
            )
        return cfg, mlperf_plan(cfg, args.gpus, args.nodes, hardware(args.hardware).hbm_bytes)
    if args.placement == "cache" and args.cache_hit_rate is None:
        raise ValueError("--placement cache needs --cache-hit-rate H (0..1) or --cache-rows R|F")
    if args.cache_hit_rate is not None and args.placement != "cache" and args.strategy != "cost":
        raise ValueError(
            f"--cache-hit-rate {args.cache_hit_rate} applies to --placement cache (or to the "
            f"fallback caches of --strategy cost), not to --placement {args.placement} with "
            f"--strategy {args.strategy}"
        )
    plan = plan_tables(
        cfg,
        args.hardware,
        world,
        strategy=args.strategy,
        placement=args.placement,
        cache_hit_rate=args.cache_hit_rate,
        batch_size=args.batch_size,
        dtype=args.dtype,
        sparse_optimizer=args.sparse_optimizer,
    )
    if args.cache_hit_rate is not None and not any(s.placement == "cache" for s in plan.shards):
        unused = (
            f"--cache-hit-rate {args.cache_hit_rate} was not used: every table fits in device memory, "
            "so the cost strategy put no table behind a cache"
        )
        plan = dataclasses.replace(plan, notes=(*plan.notes, unused))
    return cfg, plan


def cmd_cost(args: argparse.Namespace) -> tuple[dict[str, Any], Callable[[dict[str, Any]], None]]:

    cfg, plan = _plan(args)
    r = estimate(
        cfg,
        args.hardware,
        batch_size=args.batch_size,
        gpus=args.gpus,
        nodes=args.nodes,
        plan=plan,
        dtype=args.dtype,
        sparse_optimizer=args.sparse_optimizer,
        dense_optimizer=args.dense_optimizer,
        implementation=args.implementation,
    )
    out = {"command": "cost", "implementation": args.implementation, **r.summary(),
           "cache_hit_rates": dict(r.cache_hit_rates), "plan_strategy": plan.strategy,
           "plan_notes": list(plan.notes), "memory_notes": list(r.memory.notes),
           "parameter_servers": r.memory.parameter_servers}  # fmt: skip
    return out, _print_cost


def _print_cost(r: dict[str, Any]) -> None:
    print(
        f"MODELED: {r['config']} on {r['world_size']} x {r['hardware']} device(s) ({r['nodes']} node(s)), "
        f"global batch {r['batch_size']}, {r['dtype']}"
    )
    step, overlap = r["step_time_s"] * 1e3, r["step_time_overlap_s"] * 1e3
    print(f"  step time     {step:9.3f} ms   ({overlap:.3f} ms with compute/communication overlap)")
    if r["exposed_communication_s"] > 0:
        print(
            f"    a rank's overlapped step waits up to {r['exposed_communication_s'] * 1e3:.3f} ms for "
            f"communication off NVLink ({r['implementation']} hides only what runs over NVLink)"
        )
    print(f"  throughput    {r['throughput']:12,.0f} samples/s ({r['throughput_overlap']:,.0f} with overlap)")
    kj = r["joules_per_million_samples"] / 1e3
    print(
        f"  busy {r['busy_fraction']:.0%} · FLOP/s {r['flops_efficiency']:.1%} of peak · HBM bandwidth "
        f"{r['hbm_utilisation']:.0%} · {kj:,.1f} kJ per million samples"
    )
    total = sum(r["breakdown_s"].values()) or 1.0
    print("  slowest rank, by component (ms/step):")
    for k, v in r["breakdown_s"].items():
        if v > 0:
            print(f"    {k:<20} {v * 1e3:9.3f}  {100 * v / total:5.1f}%")
    _print_hit_rates(r.get("cache_hit_rates") or {})
    mem = ", ".join(f"{b / 1e9:.2f}" for b in r["memory_per_device_bytes"])
    print(f"  memory per device (GB): {mem}")
    for note in r["memory_notes"]:
        print(f"  - {note}")
    _print_table_placement(r)
    print("  fits: yes" if r["fits"] else "  DOES NOT FIT: " + "; ".join(r["reasons"]))


def _print_table_placement(r: dict[str, Any]) -> None:
    """Where the tables live (the places that hold bytes), and the plan's sentence about it."""
    print("  where the tables live (weights and optimizer state, GB):")
    for row in r["table_placement"]:
        if row["bytes"] > 0:
            extra = "" if row["hit_rate"] is None else f"   hit rate {row['hit_rate']:.1%}"
            if row["parameter_servers"]:
                extra = f"   {row['parameter_servers']:,} server(s)"
            print(f"    {row['where']:<32} {row['gb']:11,.2f}  {row['share']:6.1%}{extra}")
    print(f"  - {r['table_placement_note']}")


def _print_hit_rates(rates: dict[str, float]) -> None:
    """The modeled cache hit rate of each table (or their range, for many tables)."""
    if not rates:
        return
    if len(rates) <= 6:
        text = ", ".join(f"{t} {h:.3f}" for t, h in rates.items())
    else:
        lo, hi = min(rates.values()), max(rates.values())
        text = (f"{lo:.3f}" if hi - lo < 5e-4 else f"{lo:.3f} to {hi:.3f}") + f" over {len(rates)} tables"
    print(f"  cache hit rate per table (modeled): {text}")


def cmd_plan(args: argparse.Namespace) -> tuple[dict[str, Any], Callable[[dict[str, Any]], None]]:

    cfg, plan = _plan(args)
    mem = memory_report(
        cfg,
        hardware(args.hardware),
        plan,
        args.batch_size,
        gpus=args.gpus,
        dtype=args.dtype,
        sparse_optimizer=args.sparse_optimizer,
        dense_optimizer=args.dense_optimizer,
    )
    out = {"command": "plan", "config": cfg.name, "hardware": args.hardware, "world_size": plan.world_size,
           "strategy": plan.strategy, "shards": plan.table(), "notes": list(plan.notes), "fits": mem.fits,
           "reasons": mem.reasons, "memory_per_device_bytes": [d["total"] for d in mem.device],
           "memory_notes": list(mem.notes), "parameter_servers": mem.parameter_servers}  # fmt: skip
    return out, _print_plan


def _print_plan(r: dict[str, Any]) -> None:
    print(f"plan ({r['strategy']}) for {r['config']} on {r['world_size']} x {r['hardware']}:")
    print(f"  {'table':<10} {'rank':>4}  {'sharding':<13} {'placement':<9} {'rows':>6} {'cols':>6}")
    for s in r["shards"]:
        print(
            f"  {s['table']:<10} {s['rank']:>4}  {s['sharding']:<13} {s['placement']:<9} {s['rows']:>6.2f} "
            f"{s['columns']:>6.2f}"
        )
    for n in r["notes"]:
        print(f"  - {n}")
    mem = ", ".join(f"{b / 1e9:.2f}" for b in r["memory_per_device_bytes"])
    print(f"  memory per device (GB): {mem}")
    for note in r["memory_notes"]:
        print(f"  - {note}")
    print("  fits: yes" if r["fits"] else "  DOES NOT FIT: " + "; ".join(r["reasons"]))


_COMMANDS = {"cost": cmd_cost, "plan": cmd_plan}
