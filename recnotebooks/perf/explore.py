"""Tidy tables from the cost model for notebooks: parameter sweeps and server comparisons.

:func:`sweep` varies one architecture or run parameter and returns one row per value
(throughput, efficiency, bounding component...); :func:`compare_servers` puts one model on
several hardware presets, each with the placement that fits it best, the way the seed
paper compares a CPU cluster, Big Basin and Zion. Every row says ``source="modeled"``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from recnotebooks.config import DLRMConfig, architecture_config
from recnotebooks.perf.cost import COMPONENTS, CostResult, estimate
from recnotebooks.perf.hardware import Hardware, hardware
from recnotebooks.perf.planner import plan_tables

__all__ = ["RUN_PARAMETERS", "sweep", "result_row", "compare_servers", "best_placement"]

#: Parameters of the run (not the architecture) that :func:`sweep` can vary.
RUN_PARAMETERS = ("batch_size", "gpus", "cache_hit_rate")


def result_row(r: CostResult, **extra: object) -> dict[str, object]:
    """Headline numbers of one modeled result as one tidy row."""
    b = r.breakdown()
    return {"hardware": r.hardware, "throughput": r.throughput, "step_ms": r.step_time * 1e3,
            "flops_efficiency": r.flops_efficiency, "busy_fraction": r.busy_fraction,
            "hbm_utilisation": r.hbm_utilisation, "samples_per_joule": 1e6 / r.joules_per_million_samples,
            "bound_by": max(b, key=b.get), "fits": r.fits, "source": "modeled", **extra}  # fmt: skip


def sweep(
    param: str,
    values: Sequence[object],
    *,
    hw: Hardware | str = "dgx_a100",
    batch_size: int = 4096,
    gpus: int = 1,
    placement: str = "hbm",
    cache_hit_rate: float | None = None,
    **arch: object,
) -> list[dict[str, object]]:
    """One modeled row per value of ``param`` (an :func:`architecture_config` argument or
    one of :data:`RUN_PARAMETERS`); ``arch`` fixes the other architecture arguments."""
    run = {"batch_size": batch_size, "gpus": gpus, "cache_hit_rate": cache_hit_rate}
    arch_params = list(inspect.signature(architecture_config).parameters)
    if param not in RUN_PARAMETERS and param not in arch_params:
        raise ValueError(f"param must be one of {arch_params + list(RUN_PARAMETERS)}, got {param!r}")
    if param == "cache_hit_rate" and placement != "cache":
        raise ValueError(f"sweeping cache_hit_rate needs placement='cache', got placement={placement!r}")
    hw = hardware(hw) if isinstance(hw, str) else hw
    rows = []
    for v in values:
        a, r = dict(arch), dict(run)
        (r if param in RUN_PARAMETERS else a)[param] = v
        cfg = architecture_config(**a)  # type: ignore[arg-type]
        res = estimate(cfg, hw, batch_size=r["batch_size"], gpus=r["gpus"], placement=placement,  # type: ignore[arg-type]
                       cache_hit_rate=r["cache_hit_rate"])  # type: ignore[arg-type]  # fmt: skip
        rows.append(result_row(res, **{param: v}))
    return rows


def best_placement(config: DLRMConfig, hw: Hardware, gpus: int, batch_size: int,
                   cache_hit_rate: float = 0.9) -> tuple[str, CostResult]:  # fmt: skip
    """The first placement that fits, in the order HBM, host DRAM behind a cache, a remote
    parameter server (a CPU node: its own DRAM, labelled ``"dram"``, else parameter servers). The label names
    every placement the plan uses (the cost planner may move tables that fit nowhere in
    device memory behind a cache of hit rate ``cache_hit_rate``: ``"hbm+cache"``)."""
    order = ["hbm", "remote"] if hw.kind == "cpu" else ["hbm", "cache", "host", "remote"]
    last = None
    for place in order:
        hit = cache_hit_rate if place == "cache" else None
        plan = None
        if gpus > 1:
            greedy_ok = place != "hbm" and config.num_tables >= gpus
            plan = plan_tables(config, hw, gpus, strategy="greedy" if greedy_ok else "cost", placement=place,
                               cache_hit_rate=cache_hit_rate, batch_size=batch_size)  # fmt: skip
        last = estimate(
            config, hw, batch_size=batch_size, gpus=gpus, plan=plan, placement=place, cache_hit_rate=hit
        )
        if last.fits:
            used = sorted({s.placement for s in plan.shards}, key=order.index) if plan else [place]
            if hw.kind == "cpu":  # a CPU node's own memory is its DRAM
                used = ["dram" if u == "hbm" else u for u in used]
            return "+".join(used), last
    assert last is not None
    return order[-1], last


def compare_servers(
    config: DLRMConfig,
    servers: Sequence[str] = ("cpu_cluster", "big_basin", "zion", "dgx_a100", "dgx_h100"),
    *,
    batch_size: int = 8192,
    cache_hit_rate: float = 0.9,
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """``config`` on one node of each server: (summary rows, per-component rows).

    Each node uses all its devices and the first placement that fits
    (:func:`best_placement`); throughput per node and per joule (node power) are modeled.
    """
    rows, parts = [], []
    for name in servers:
        hw = hardware(name)
        place, r = best_placement(config, hw, hw.devices, batch_size, cache_hit_rate)
        rows.append(result_row(r, server=name, placement=place, devices=hw.devices,
                               node_power_w=hw.devices * hw.power_w + hw.host_power_w))  # fmt: skip
        b = r.breakdown()
        parts += [{"server": name, "phase": c, "seconds_per_step": b[c], "source": "modeled"}
                  for c in COMPONENTS if b[c] > 0]  # fmt: skip
    return rows, parts
