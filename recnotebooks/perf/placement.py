"""Where a model's tables live, priced by the cost model: HBM, a cache over host DRAM, UVM, parameter servers.

:func:`placement_costs` models one training step of a model with all its tables in each place
(:data:`recnotebooks.plan.PLACEMENTS`), by component; :func:`placement_summary` keeps one row
per place; :func:`break_even_hit_rate` finds the hit rate from which a cache over host DRAM beats
another placement. Every number is **modeled** (:func:`recnotebooks.perf.cost.estimate`).
"""

from __future__ import annotations

from recnotebooks.checks import check_choice, check_fraction, check_int, check_type
from recnotebooks.config import DLRMConfig
from recnotebooks.perf.cost import COMPONENTS, estimate
from recnotebooks.perf.hardware import Hardware
from recnotebooks.perf.result import _percent
from recnotebooks.plan import PLACEMENTS

__all__ = ["PLACEMENT_NAMES", "break_even_hit_rate", "placement_costs", "placement_summary"]

#: How each placement (of :data:`~recnotebooks.plan.PLACEMENTS`) is named in the rows, in chart
#: order; the cache's name also carries its hit rate.
PLACEMENT_NAMES = {"hbm": "HBM", "cache": "cache", "host": "host DRAM (UVM)", "remote": "parameter servers"}


def _check(config: object, hw: object, batch_size: object, gpus: object) -> tuple[int, int]:
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    check_type("hw", hw, (str, Hardware), "a hardware preset name or a Hardware")
    return check_int("batch_size", batch_size, lo=1), check_int("gpus", gpus, lo=1)


def placement_costs(
    config: DLRMConfig, hw: Hardware | str, hit_rate: float, batch_size: int = 1024, gpus: int = 1
) -> list[dict[str, object]]:
    """Modeled step of ``config`` on ``gpus`` GPUs of ``hw`` with its tables in HBM, behind a cache
    of ``hit_rate`` over host DRAM, in host DRAM over UVM and on remote parameter servers.

    One row per placement and non-zero component: ``placement`` (its name, with "(does not
    fit)" when the model says so), ``key`` (``"hbm"``, ``"cache"``, ``"host"``, ``"remote"``),
    ``phase``, ``seconds_per_step``, ``step_s``, ``fits``, ``ns_per_lookup`` (the embedding
    forward and backward of a step over its lookups per GPU), ``flops_efficiency``,
    ``source="modeled"``.
    """
    batch_size, gpus = _check(config, hw, batch_size, gpus)
    hit_rate = check_fraction("hit_rate", hit_rate)
    rows: list[dict[str, object]] = []
    lookups = batch_size * sum(t.pooling_factor for t in config.tables) / gpus
    for place in PLACEMENT_NAMES:  # in the order the chart shows them
        label = PLACEMENT_NAMES[place] + (f" ({_percent(hit_rate)} hits)" if place == "cache" else "")
        r = estimate(
            config,
            hw,
            batch_size=batch_size,
            gpus=gpus,
            placement=place,
            cache_hit_rate=hit_rate if place == "cache" else None,
        )
        b = r.breakdown()
        ns = (b["embedding_forward"] + b["embedding_backward"]) / lookups * 1e9 if lookups else 0.0
        for c in COMPONENTS:
            if b[c] > 0:
                rows.append(
                    {
                        "placement": label + ("" if r.fits else " (does not fit)"),
                        "key": place,
                        "phase": c,
                        "seconds_per_step": b[c],
                        "step_s": r.step_time,
                        "fits": r.fits,
                        "ns_per_lookup": ns,
                        "flops_efficiency": r.flops_efficiency,
                        "source": "modeled",
                    }
                )
    return rows


def placement_summary(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """One row per placement of :func:`placement_costs` rows (in their order): ``placement``,
    ``key``, ``step_ms``, ``ns_per_lookup``, ``fits``, ``flops_efficiency``, ``source="modeled"``."""
    check_type("rows", rows, (list, tuple), "a list of placement_costs rows")
    out: dict[str, dict[str, object]] = {}
    for r in rows:
        out.setdefault(
            str(r["key"]),
            {
                "placement": r["placement"],
                "key": r["key"],
                "step_ms": float(r["step_s"]) * 1e3,  # type: ignore[arg-type]
                "ns_per_lookup": r["ns_per_lookup"],
                "fits": r["fits"],
                "flops_efficiency": r["flops_efficiency"],
                "source": "modeled",
            },
        )
    return list(out.values())


def break_even_hit_rate(
    config: DLRMConfig, hw: Hardware | str, against: str = "remote", batch_size: int = 1024, gpus: int = 1
) -> float | None:
    """The hit rate from which a cache over host DRAM gives a shorter modeled step than the
    placement ``against`` (``"hbm"``, ``"host"`` or ``"remote"``), found by bisection on
    :func:`recnotebooks.perf.cost.estimate` (the step falls as the hit rate rises); None if even
    a perfect cache does not."""
    batch_size, gpus = _check(config, hw, batch_size, gpus)
    against = check_choice("against", against, [p for p in PLACEMENTS if p != "cache"])
    other = estimate(config, hw, batch_size=batch_size, gpus=gpus, placement=against).step_time

    def cache(h: float) -> float:
        return estimate(
            config, hw, batch_size=batch_size, gpus=gpus, placement="cache", cache_hit_rate=h
        ).step_time

    if cache(1.0) >= other:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cache(mid) >= other else (lo, mid)
    return hi
