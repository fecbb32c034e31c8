"""Sweeps of the cost model: one thing moves, one tidy row per value, for notebooks.

:func:`sweep` varies one architecture or run parameter (:data:`RUN_PARAMETERS`) and returns one
row per value (throughput, efficiency, bounding component...); :func:`table_count_sweep` sweeps
the table count at several poolings, :func:`precision_sweep` the training precision and
:func:`roofline_points` places presets on a device's roofline. :func:`result_row` is the row
every one of them shares. Which server or placement suits a model is
:mod:`recnotebooks.perf.servers`. Every row says ``source="modeled"``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from recnotebooks.config import architecture_config, preset
from recnotebooks.perf.cost import CostResult, estimate
from recnotebooks.perf.hardware import Hardware, hardware

__all__ = [
    "RUN_PARAMETERS",
    "TABLE_SWEEP_POOLINGS",
    "precision_sweep",
    "result_row",
    "roofline_points",
    "sweep",
    "table_count_sweep",
]

#: Parameters of the run (not the architecture) that :func:`sweep` can vary.
RUN_PARAMETERS = ("batch_size", "gpus", "cache_hit_rate")


def result_row(r: CostResult, **extra: object) -> dict[str, object]:
    """Headline numbers of one modeled result as one tidy row."""
    b = r.breakdown()
    return {
        "hardware": r.hardware,
        "throughput": r.throughput,
        "step_ms": r.step_time * 1e3,
        "flops_efficiency": r.flops_efficiency,
        "busy_fraction": r.busy_fraction,
        "hbm_utilisation": r.hbm_utilisation,
        "samples_per_joule": 1e6 / r.joules_per_million_samples,
        "bound_by": max(b, key=b.get),
        "fits": r.fits,
        "source": "modeled",
        **extra,
    }


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
    run: dict[str, Any] = {"batch_size": batch_size, "gpus": gpus, "cache_hit_rate": cache_hit_rate}
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
        res = estimate(
            cfg,
            hw,
            batch_size=r["batch_size"],
            gpus=r["gpus"],
            placement=placement,
            cache_hit_rate=r["cache_hit_rate"],
        )
        rows.append(result_row(res, **{param: v}))
    return rows


def roofline_points(
    names: Sequence[str], hw: Hardware | str, *, batch_size: int = 4096, dtype: str = "fp32"
) -> list[dict[str, object]]:
    """One roofline point per preset in ``names`` on one device of ``hw``: arithmetic intensity
    (FLOPs per byte of embedding traffic), the modeled FLOP/s it achieves, the share of the
    roof (``min(peak, intensity x bandwidth)``) that is, and what bounds its step."""
    hw = hardware(hw) if isinstance(hw, str) else hw
    points = []
    for name in names:
        cfg = preset(name)
        r = estimate(cfg, hw, batch_size=batch_size, dtype=dtype)
        achieved, intensity = r.flops_efficiency * hw.flops(dtype), cfg.arithmetic_intensity()
        b = r.breakdown()
        points.append(
            {
                "label": name,
                "arithmetic_intensity": intensity,
                "flops_per_s": achieved,
                "roof_fraction": achieved / min(hw.flops(dtype), intensity * hw.hbm_bw),
                "bound_by": max(b, key=b.get),
                "source": "modeled",
            }
        )
    return points


#: The two poolings notebook 02 sweeps the table count at: criteo_kaggle's one lookup per
#: table, and a production-like 80 (RM1 pools 80 rows per table; DeepRecSys).
TABLE_SWEEP_POOLINGS = (1, 80)


def table_count_sweep(
    tables: Sequence[int] = (1, 2, 4, 8, 16, 32),
    poolings: Sequence[float] = TABLE_SWEEP_POOLINGS,
    *,
    hw: Hardware | str = "dgx_a100",
    **arch: object,
) -> list[dict[str, object]]:
    """:func:`sweep` of ``num_tables`` at each pooling: FLOP/s efficiency and throughput side by
    side (rows carry ``num_tables``, ``pooling`` and ``flops_per_sample``, forward + backward:
    efficiency is FLOP/s over peak, so it rises whenever FLOPs grow faster than the step)."""
    rows = []
    for p in poolings:
        for r in sweep("num_tables", list(tables), hw=hw, pooling=p, **arch):
            cfg = architecture_config(num_tables=r["num_tables"], pooling=p, **arch)  # type: ignore[arg-type]
            rows.append({**r, "pooling": p, "flops_per_sample": cfg.total_flops_per_sample()})
    return rows


def precision_sweep(
    models: Sequence[str] = ("rm1", "rm3"),
    dtypes: Sequence[str] = ("fp32", "tf32", "amp_bf16", "amp_fp16", "bf16"),
    *,
    hw: Hardware | str = "dgx_a100",
    batch_size: int = 8192,
) -> list[dict[str, object]]:
    """One modeled row per model and training precision (:mod:`recnotebooks.perf.precision`):
    samples/s, its ratio to fp32, and what bounds the step. Rows carry ``metric`` (the model),
    ``setting`` (the dtype), ``value`` (samples/s over fp32's) and ``display`` for a bar chart."""

    rows = []
    for m in models:
        config = preset(m)
        base = estimate(config, hw, batch_size=batch_size, dtype="fp32").throughput
        for dt in dtypes:
            r = estimate(config, hw, batch_size=batch_size, dtype=dt)
            b = r.breakdown()
            rows.append(
                {
                    "metric": f"{m}: samples/s over fp32",
                    "model": m,
                    "setting": dt,
                    "dtype": dt,
                    "samples_per_s": r.throughput,
                    "value": r.throughput / base,
                    "display": f"{r.throughput / base:.2f}x",
                    "bound_by": max(b, key=b.get),
                    "source": "modeled",
                }
            )
    return rows
