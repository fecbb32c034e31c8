"""The Efficiency Explorer (notebook 02): architecture and hardware → modeled efficiency of GPUs or CPU nodes,
beside a step measured on this machine.

:func:`explore_efficiency` is the pure function. Its tables: ``modeled`` (the slowest
rank's step by component on the chosen hardware preset), ``metrics`` (modeled throughput,
FLOP/s efficiency, busy fraction, device-memory bandwidth use, samples per joule) and, with
``measure``, ``measured`` (a step of a row-capped copy timed here, per device batch) and
``here`` (the model's prediction for this machine, so the two can be compared).
"""

from __future__ import annotations

from recnotebooks.config import DLRMConfig, architecture_config
from recnotebooks.measure.step import DoesNotFitError, measure_here
from recnotebooks.perf.cost import COMPONENTS, CostResult, estimate
from recnotebooks.perf.hardware import hardware, hardware_names
from recnotebooks.perf.servers import device_words, placements_for
from recnotebooks.timing import PHASES
from recnotebooks.viz.app import App, HistoryEntry, Result, history_rows, trail_bars, trail_steps
from recnotebooks.viz.architecture import ARCHITECTURE_CONTROLS
from recnotebooks.viz.controls import human, percent
from recnotebooks.viz.tidy import band_px, stack, stack_room

__all__ = ["EFFICIENCY_CONTROLS", "explore_efficiency", "efficiency_explorer"]

_ARCH = ("num_dense", "num_tables", "rows_per_table", "embedding_dim", "pooling", "bottom_width", "top_width")
#: The side panel measures at most this many samples per step here (the model for this
#: machine is evaluated at the same batch): a larger per-device batch would take seconds.
MEASURED_BATCH = 1024
EFFICIENCY_CONTROLS: dict[str, dict[str, object]] = {
    **{k: ARCHITECTURE_CONTROLS[k] for k in _ARCH},
    "batch_size": {"options": [2**i for i in range(8, 18)], "value": 4096, "label": "global batch"},
    "hardware": {
        "options": [h for h in hardware_names() if h != "this_machine"],
        "value": "dgx_a100",
        "label": "hardware",
        "dropdown": True,
    },
    "gpus": {"options": [1, 2, 4, 8], "value": 1, "label": "devices (1 for a CPU node)"},
    "placement": {
        "options": [
            ("device memory (HBM or DRAM)", "hbm"),  # a GPU's HBM, a CPU node's DRAM
            ("host DRAM over PCIe (GPU)", "host"),
            ("GPU cache + host DRAM (GPU)", "cache"),
            ("remote parameter servers", "remote"),
        ],
        "value": "hbm",
        "label": "tables in",
        "dropdown": True,
    },
    "cache_hit_rate": {"options": [0.5, 0.8, 0.9, 0.95, 0.99], "value": 0.9, "label": "cache hit rate"},
}


def explore_efficiency(
    *,
    hardware_name: str = "dgx_a100",
    batch_size: int = 4096,
    gpus: int = 1,
    placement: str = "hbm",
    cache_hit_rate: float = 0.9,
    measure: bool = True,
    time_budget_s: float = 0.3,
    **arch: object,
) -> Result:
    """Modeled step on ``hardware_name`` and (``measure``) a measured one here; see module doc."""
    cfg = architecture_config(**arch)  # type: ignore[arg-type]
    hw = hardware(hardware_name)
    words = device_words(hw)
    if placement not in placements_for(hw):
        raise ValueError(
            f"placement={placement!r} does not exist on {hw.name} (a {words['device']}): its tables "
            f"live in its own {words['memory']} ('hbm') or on parameter servers ('remote')"
        )
    hit = cache_hit_rate if placement == "cache" else None
    r = estimate(
        cfg, hw, batch_size=batch_size, gpus=min(gpus, hw.devices), placement=placement, cache_hit_rate=hit
    )
    tables = _modeled_tables(r, hw.name, words["memory"])
    b = r.breakdown()
    bound = max(b, key=b.get)
    what = words["devices"] if r.world_size > 1 else words["device"]
    notes = [
        f"MODELED on {r.world_size} {what} ({hw.name}): {r.step_time * 1e3:.2f} ms per step, "
        f"{r.throughput:,.0f} samples/s, bounded by {bound} "
        f"({b[bound] / sum(b.values()):.0%} of the slowest rank's step)."
    ]
    if gpus > hw.devices:
        notes.append(
            f"A {hw.name} node is {hw.devices} {words['device']}; modeled on {hw.devices}, not {gpus}."
        )
    if not r.fits:
        notes.append("DOES NOT FIT: " + "; ".join(r.memory.reasons))
    if measure:
        notes.append(_measured_here(tables, cfg, max(1, batch_size // r.world_size), time_budget_s))
    return Result(tables=tables, notes=notes)


def _modeled_tables(r: CostResult, hw: str, memory: str) -> dict[str, list[dict[str, object]]]:
    """The modeled step by component (``modeled``) and its bar metrics (``metrics``); ``memory``:
    the device memory's name in words."""
    b = r.breakdown()
    modeled = [
        {"phase": c, "seconds_per_step": b[c], "source": "modeled", "hardware": hw}
        for c in COMPONENTS
        if b[c] > 0
    ]
    metrics = [
        ("throughput (samples/s)", r.throughput, human(r.throughput)),
        ("FLOP/s efficiency", r.flops_efficiency, percent(r.flops_efficiency)),
        ("busy fraction", r.busy_fraction, percent(r.busy_fraction)),
        ("memory bandwidth used", r.hbm_utilisation, f"{percent(r.hbm_utilisation)} of {memory}"),
        ("samples per joule", 1e6 / r.joules_per_million_samples, human(1e6 / r.joules_per_million_samples)),
    ]
    return {
        "modeled": modeled,
        "metrics": [
            {"metric": m, "value": float(v), "display": d, "source": "modeled"} for m, v, d in metrics
        ],
    }


def _measured_here(
    tables: dict[str, list[dict[str, object]]], cfg: DLRMConfig, local: int, time_budget_s: float
) -> str:
    """A step of ``cfg``'s row-capped copy measured here at the per-device batch ``local`` (at most
    :data:`MEASURED_BATCH`) beside the model's step for this machine: adds the ``measured`` and
    ``here`` tables; the note (or why it was not measured)."""
    batch_here = min(local, MEASURED_BATCH)  # a side panel: a smaller copy keeps updates quick
    try:
        m, cap = measure_here(cfg, batch_here, time_budget_s, max_step_s=0.25)
    except DoesNotFitError as e:
        return f"Not measured here: {e}."
    tables["measured"] = m.table()
    machine = hardware("this_machine")
    here = estimate(cfg.with_max_rows(cap), machine, batch_size=batch_here)
    tables["here"] = [
        {"phase": c, "seconds_per_step": v, "source": "modeled"} for c, v in here.breakdown().items() if v > 0
    ]
    smaller = "" if batch_here == local else f" of {local:,} per device: a smaller copy, quick to measure"
    return (
        f"MEASURED here ({m.device}, batch {batch_here:,}{smaller}, tables capped at {cap:,} rows): "
        f"{m.seconds_per_step * 1e3:.1f} ms per step ({m.describe()}); the model predicts "
        f"{here.step_time * 1e3:.1f} ms for this machine{m.model_note(machine)}."
    )


def _render(history: list[HistoryEntry], measure: bool) -> object:
    hw = history[0].values["hardware"]
    room = stack_room(band_px([e.label for e in history]))  # the charts line up their plots beside the trail
    width = min(460, room)
    modeled = trail_steps(history, "modeled", phases=COMPONENTS, title="Step time by component",
                          source="modeled", detail=f"{hw}, slowest rank", width=width)  # fmt: skip
    bars = trail_bars(history, room, title="Efficiency", source="modeled")
    if not measure or not history_rows(history, "measured"):
        return stack(modeled, bars)
    measured = trail_steps(history, "measured", phases=PHASES, title="Training step here",
                           source="measured", detail="row-capped copy", width=width)  # fmt: skip
    return stack(modeled, measured, bars)


def efficiency_explorer(
    *, measure: bool = True, time_budget_s: float = 0.2, history: int = 4, **values: object
) -> App:
    """The Efficiency Explorer app; ``values`` override the default settings."""

    def compute(hardware: str, **kw: object) -> Result:
        return explore_efficiency(hardware_name=hardware, measure=measure, time_budget_s=time_budget_s, **kw)

    return App.from_specs(
        "Efficiency Explorer",
        EFFICIENCY_CONTROLS,
        values,
        compute,
        lambda h: _render(h, measure),
        history=history,
        description="MODELED on the chosen hardware preset"
        + ("; MEASURED here on a row-capped copy" if measure else ""),
    )
