"""The Cache Explorer (notebook 03): a software embedding cache in HBM over tables in host DRAM.

:func:`explore_cache` is the pure function. One table's id stream (a bounded Zipf trace,
:func:`recnotebooks.cache.simulate.zipf_trace`) is replayed through the cache policies of
:mod:`recnotebooks.cache` — the same implementation training uses — which gives:

* ``curves``: hit rate against cache size (fraction of rows) for LRU (one pass of stack
  distances, Mattson et al. 1970), LFU, a static hot set chosen from a 5% profile sample (as
  FAE does: Adnan et al., VLDB 2022), N-way set-associative LRU (FBGEMM's default cache is
  32-way LRU: its split table-batched embeddings, https://github.com/pytorch/FBGEMM) and Belady's
  OPT (Belady 1966), the upper bound no policy beats (:mod:`recnotebooks.cache.curves`): **simulated**.
* ``traffic``: replayed as training steps (``MODEL_BATCH`` samples of ``POOLING`` lookups of
  this table per step; rows of a step are never evicted during it), the rows copied host→device
  (misses) and device→host (evicted rows, all of them updated, so all written back) per step:
  **simulated**.
* ``placements``: a model of ``MODEL_TABLES`` such tables on one GPU of the chosen preset, with
  its tables in HBM, behind the cache (the simulated hit rate fed to the cost model as a
  number) or in host DRAM over UVM, by component (:func:`recnotebooks.perf.placement.placement_costs`):
  **modeled**.
* ``measured``: a small :class:`~recnotebooks.cache.CachedEmbeddingBagCollection` training step
  on this machine against the same step uncached, fed this trace's ids (so the hit rate training
  sees is the simulator's; :func:`recnotebooks.measure.cache_overhead.measure_cache_overhead`):
  **measured**, once per setting and reused.

Traces and curves are kept between calls by :mod:`recnotebooks.cache.curves`, measurements by
:mod:`recnotebooks.measure.cache_overhead` (keyed by what they depend on), so moving the cache size
or the policy only replays one point; this module computes the views of them and draws them.
"""

from __future__ import annotations

import math

import numpy as np

from recnotebooks.cache.curves import (
    CURVE_FRACTIONS,
    FEW_FRACTIONS,
    POLICY_NAMES,
    POOLING,
    TRACE_IDS,
    cache_capacity,
    cache_profile,
    cache_trace,
    curve_row,
    first_touches,
    hit_rate_curves,
    opt_hit_rate,
    simulate_policy,
)
from recnotebooks.checks import check_choice, check_int
from recnotebooks.config import DLRMConfig, architecture_config
from recnotebooks.measure.cache_overhead import (
    MEASURED_BATCH,
    MEASURED_DIM,
    MEASURED_POOLING,
    MEASURED_ROWS_CAP,
    MEASURED_WARMUP,
    measure_cache_overhead,
)
from recnotebooks.perf.cost import COMPONENTS
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.placement import placement_costs
from recnotebooks.viz.app import App, HistoryEntry, Result, trail_bars
from recnotebooks.viz.charts import metric_lines, time_breakdown
from recnotebooks.viz.controls import human, option_values, percent
from recnotebooks.viz.tidy import band_px, legend_px, stack, stack_room

__all__ = [
    "CACHE_CONTROLS",
    "CURVE_FRACTIONS",
    "MODEL_BATCH",
    "POLICY_NAMES",
    "POOLING",
    "cache_capacity",
    "cache_explorer",
    "cache_model",
    "cache_profile",
    "cache_trace",
    "first_touches",
    "explore_cache",
    "hit_rate_chart",
    "hit_rate_curves",
    "measure_cache_overhead",
    "opt_hit_rate",
]
# moved to recnotebooks.cache.curves and recnotebooks.measure.cache_overhead; kept here until the next release
__all__ += ["FEW_FRACTIONS", "MEASURED_BATCH", "MEASURED_DIM", "MEASURED_POOLING", "MEASURED_ROWS_CAP",
            "MEASURED_WARMUP", "TRACE_IDS"]  # fmt: skip

#: The modeled model: this many tables like the simulated one, dim 64, POOLING lookups each per sample.
MODEL_TABLES, MODEL_DIM, MODEL_BATCH = 8, 64, 1024
#: Bytes one cached row moves: its fp32 weights and row-wise Adagrad's one-float accumulator.
ROW_BYTES = MODEL_DIM * 4 + 4
GPUS = ["big_basin", "zion", "dgx_a100", "dgx_h100", "h200_node"]

CACHE_CONTROLS: dict[str, dict[str, object]] = {
    "alpha": {"options": [0.6, 0.8, 0.9, 1.05, 1.2, 1.3], "value": 1.05, "label": "skew (Zipf alpha)"},
    "cache_fraction": {  # default: FBGEMM's and TorchRec's cache load factor, 0.2 of the rows
        "options": [(percent(f), f) for f in CURVE_FRACTIONS],
        "value": 0.2,
        "label": "cache size (of rows)",
    },
    "policy": {
        "options": ["lru", "lfu", "static", "setassoc", "opt"],
        "value": "lru",
        "label": "policy",
        "dropdown": True,
    },
    "ways": {"options": [1, 2, 4, 8, 16, 32], "value": 32, "label": "ways (setassoc)"},
    "num_rows": {
        "options": [("10k", 10_000), ("30k", 30_000), ("100k", 100_000)],
        "value": 100_000,
        "label": "table rows",
    },
    "hardware": {"options": GPUS, "value": "dgx_a100", "label": "GPU (modeled)", "dropdown": True},
}
#: px left of a hit-rate chart's plot: its percent labels and its axis title
LINES_BAND_PX = 64


def _check(name: str, value: object) -> object:
    return check_choice(name, value, option_values(CACHE_CONTROLS[name]))


def cache_model(num_rows: int) -> DLRMConfig:
    """The modeled model: :data:`MODEL_TABLES` tables of ``num_rows`` rows, dim 64, POOLING lookups each."""
    return architecture_config(
        num_tables=MODEL_TABLES, rows_per_table=num_rows, embedding_dim=MODEL_DIM, pooling=POOLING
    )


def _traffic(
    policy: str, trace: np.ndarray, cap: int, num_rows: int, ways: int, profile: np.ndarray
) -> tuple[list[dict[str, object]], str]:
    """Bytes per training step each way, the trace replayed as steps of the modeled model's
    lookups of one table (a step's rows stay cached until it ends); [] if a step does not fit."""
    per_step = MODEL_BATCH * POOLING
    if policy == "opt":
        return [], "OPT cannot run as training steps: it needs every future id, which no training cache has."
    try:
        steps = simulate_policy(policy, trace, cap, num_rows, ways, profile, batch_size=per_step)
    except ValueError as e:
        return [], f"As training steps of {per_step:,} lookups this cache is too small: {e}"
    n = max(1, math.ceil(len(trace) / per_step))
    h2d = steps.misses / n * ROW_BYTES * MODEL_TABLES
    d2h = steps.evictions / n * ROW_BYTES * MODEL_TABLES
    rows = [{"direction": "host→device", "bytes_per_step": h2d, "source": "simulated"},
            {"direction": "device→host", "bytes_per_step": d2h, "source": "simulated"}]  # fmt: skip
    return rows, (
        f"SIMULATED per training step ({MODEL_BATCH:,} samples x {POOLING} lookups x {MODEL_TABLES} tables): "
        f"{human(h2d, 'B')} host→device (misses), {human(d2h, 'B')} device→host (evicted rows written "
        f"back); step hit rate {percent(float(steps.hit_rate))}."
    )


def _modeled(
    num_rows: int, hw: str, hit: float, cannot: str | None = None
) -> tuple[list[dict[str, object]], list[tuple], str]:
    """The modeled model's step per placement, its bar metrics and its note. A cache that cannot
    run as a training cache (``cannot`` says why: a step needs more slots than it has, or OPT,
    which reads the future) is not priced: its placement, its metrics and its words are left out,
    and the note says why."""

    places = placement_costs(cache_model(num_rows), hw, hit, batch_size=MODEL_BATCH)
    step = {str(r["key"]): float(r["step_s"]) for r in places}  # type: ignore[arg-type]
    eff = {str(r["key"]): float(r["flops_efficiency"]) for r in places}  # type: ignore[arg-type]
    if cannot:
        note = (
            f"MODELED on one {hw} GPU ({MODEL_TABLES} such tables, dim {MODEL_DIM}, batch {MODEL_BATCH:,}): "
            f"{step['hbm'] * 1e3:.3g} ms per step in HBM, {step['host'] * 1e3:.3g} ms in host DRAM over "
            f"UVM; no step behind this cache: it cannot run as a training cache ({cannot})."
        )
        return [r for r in places if r["key"] != "cache"], [], note
    ratio = step["cache"] / step["hbm"]
    metrics = [
        ("step, tables behind the cache: modeled", step["cache"], f"{step['cache'] * 1e3:.3g} ms", "ms"),
        ("cache ÷ HBM step time: modeled", ratio, f"{ratio:.3g}x", "ratio"),
        ("FLOP/s efficiency with the cache: modeled", eff["cache"], percent(eff["cache"]), "efficiency"),
    ]
    note = (
        f"MODELED on one {hw} GPU ({MODEL_TABLES} such tables, dim {MODEL_DIM}, batch {MODEL_BATCH:,}): "
        f"{step['hbm'] * 1e3:.3g} ms per step in HBM, {step['cache'] * 1e3:.3g} ms behind the cache, "
        f"{step['host'] * 1e3:.3g} ms in host DRAM over UVM; FLOP/s efficiency {percent(eff['cache'])} "
        f"with the cache, {percent(eff['hbm'])} in HBM."
    )
    return places, metrics, note


def _measured(
    tables: dict[str, list[dict[str, object]]],
    metrics: list[tuple],
    num_rows: int,
    alpha: float,
    policy: str,
    fraction: float,
    ways: int,
    num_ids: int,
) -> str:
    """Measure this setting here (or say why not): adds the ``measured`` table and metric; the note."""
    if policy == "opt":
        return "Not measured here: OPT needs every future id, so no training cache can run it."
    try:
        m = measure_cache_overhead(num_rows, alpha, policy, fraction, ways, num_ids=num_ids)
    except ValueError as e:  # a training step needs more slots than this cache has
        return f"Not measured here: {e}"
    shaky = str(m.get("reliability", ""))
    tables["measured"] = [
        {
            "metric": k,
            "ms_per_step": m[f"{k}_ms"],
            "source": "measured",
            "reliable": not shaky,
            "reliability": shaky,
        }
        for k in ("uncached", "cached")
    ]
    ratio = m["cached_ms"] / m["uncached_ms"]
    metrics.append(
        (
            "cached ÷ uncached step here: measured",
            ratio,
            f"{ratio:.3g}x" + (" ⚠ NOT RELIABLE" if shaky else ""),
            "ratio",
        )
    )
    return (
        (
            f"NOT RELIABLE ({shaky}): the measured ratio may be off; move a slider away and back to "
            "measure again. "
            if shaky
            else ""
        )
        + f"MEASURED here: one table of {int(m['rows']):,} rows (dim {MEASURED_DIM}, batch {MEASURED_BATCH}, "
        f"{int(m['capacity']):,} slots), {m['uncached_ms']:.2f} ms per step uncached, "
        f"{m['cached_ms']:.2f} ms cached ({ratio:.2f}x); its timed steps, after the cache was filled, "
        f"saw a {percent(m['hit_rate'])} hit rate" + (" (measured earlier, reused)." if m["reused"] else ".")
    )


def _simulated(
    policy: str, fraction: float, cap: int, num_rows: int, alpha: float, ways: int, num_ids: int
) -> tuple[float, list[dict[str, object]], str]:
    """This setting's simulated hit rate, the curves with its point ringed (added where its
    policy's curve was not simulated at this size) and the note that says what was simulated."""
    trace, profile = cache_trace(num_rows, alpha, num_ids), cache_profile(num_rows, alpha, num_ids)
    curves = [dict(r) for r in hit_rate_curves(num_rows, alpha, ways, num_ids)]
    hit = float(simulate_policy(policy, trace, cap, num_rows, ways, profile).hit_rate)
    for r in curves:  # the current setting is a point of its policy's curve: ring it there
        r["current"] = r["policy"] == POLICY_NAMES[policy] and r["capacity"] == cap
    if not any(r["current"] for r in curves):  # a size that curve was not simulated at: add the point
        curves.append({**curve_row(policy, fraction, cap, num_rows, hit), "current": True})
    note = (
        f"SIMULATED: {human(num_ids)} lookups of one table of {human(num_rows)} rows, Zipf({alpha}); "
        f"{POLICY_NAMES[policy]} with {cap:,} slots ({percent(cap / num_rows)} of rows) serves "
        f"{percent(hit)} of lookups (OPT with as many slots: "
        f"{percent(opt_hit_rate(num_rows, alpha, cap, num_ids))}); "
        f"{percent(first_touches(trace))} of lookups are first touches of a row, which no cache avoids."
    )
    return hit, curves, note


def explore_cache(
    *,
    alpha: float = 1.05,
    cache_fraction: float = 0.2,
    policy: str = "lru",
    ways: int = 32,
    num_rows: int = 100_000,
    hardware_name: str = "dgx_a100",
    measure: bool = True,
    num_ids: int = TRACE_IDS,
) -> Result:
    """Tables ``curves``, ``traffic``, ``placements``, ``metrics`` and (``measure``) ``measured``
    for one setting; see the module doc. Every parameter is checked against the app's controls."""
    alpha, cache_fraction = _check("alpha", alpha), _check("cache_fraction", cache_fraction)
    policy, ways, num_rows = _check("policy", policy), _check("ways", ways), _check("num_rows", num_rows)
    hw = hardware(str(check_choice("hardware_name", hardware_name, GPUS)))
    num_ids = check_int("num_ids", num_ids, lo=1000)
    cap = cache_capacity(cache_fraction, num_rows, policy, ways)
    hit, curves, note = _simulated(policy, cache_fraction, cap, num_rows, alpha, ways, num_ids)
    tables: dict[str, list[dict[str, object]]] = {"curves": curves}
    trace, profile = cache_trace(num_rows, alpha, num_ids), cache_profile(num_rows, alpha, num_ids)
    traffic, step_note = _traffic(policy, trace, cap, num_rows, ways, profile)
    notes = [note, step_note]
    if traffic:
        tables["traffic"] = traffic
    cannot = (
        None
        if traffic
        else "OPT reads every future id"
        if policy == "opt"
        else "too few slots for a step's rows"
    )
    tables["placements"], metrics, note = _modeled(num_rows, hw.name, hit, cannot)
    metrics.insert(0, ("hit rate: simulated", hit, percent(hit), "fraction"))
    if traffic:  # a cache too small for a step moves no bytes of a step: no bar, the note says why
        h2d = float(traffic[0]["bytes_per_step"])  # type: ignore[arg-type]
        metrics.insert(1, ("host→device per step: simulated", h2d, human(h2d, "B"), "bytes"))
    notes.append(note)
    if measure:
        notes.append(_measured(tables, metrics, num_rows, alpha, policy, cache_fraction, ways, num_ids))
    tables["metrics"] = [
        {"metric": name, "value": float(v), "display": d, "unit": u, "source": name.rsplit(": ", 1)[1]}
        for name, v, d, u in metrics
    ]
    return Result(tables=tables, notes=notes)


def hit_rate_chart(
    curves: list[dict[str, object]] | tuple[dict, ...], detail: str, width: int = 560, height: int = 200
) -> object:
    """Hit rate against cache size (% of rows, log axis), one line per policy: rows of
    :func:`hit_rate_curves` (a row with ``current`` true is ringed), labelled **simulated**."""
    return metric_lines(
        list(curves),
        x="cache_percent",
        y="hit_rate",
        color="policy",
        x_log=True,
        y_format=".0%",
        x_title="cache size (% of the table's rows)",
        y_title="hit rate (share of lookups)",
        title="Hit rate vs cache size",
        source="simulated",
        detail=detail,
    ).properties(width=width, height=height)


def _render(history: list[HistoryEntry]) -> object:
    now, trail = history[0], [e.label for e in history]
    places = now.result.tables["placements"]
    where = list(dict.fromkeys(str(r["placement"]) for r in places))
    # the three charts line up their plots at the widest left band: the room right of it is theirs
    room = stack_room(band_px(where), band_px(trail, titled=False), LINES_BAND_PX)
    policies = list(POLICY_NAMES.values())
    lines = hit_rate_chart(
        now.result.tables["curves"],
        f"{human(int(now.values['num_rows']))} rows, Zipf({now.values['alpha']}); ringed: now",  # type: ignore[call-overload]
        width=min(560, room - legend_px(policies)),
    )
    steps = time_breakdown(
        places,
        by="placement",
        phases=[c for c in COMPONENTS if any(r["phase"] == c for r in places)],
        title="Step time by where the tables live",
        source="modeled",
        detail=f"one {now.values['hardware']} GPU, {MODEL_TABLES} tables, batch {MODEL_BATCH}",
        width=min(560, room),
    )
    bars = trail_bars(history, room, title="This setting and the last ones", shared_scale="unit")
    return stack(lines, steps, bars)


def cache_explorer(
    *, measure: bool = True, num_ids: int = TRACE_IDS, history: int = 4, **values: object
) -> App:
    """The Cache Explorer app; ``values`` override the default settings (see :data:`CACHE_CONTROLS`)."""

    def compute(hardware: str, **kw: object) -> Result:
        return explore_cache(hardware_name=hardware, measure=measure, num_ids=num_ids, **kw)  # type: ignore[arg-type]

    return App.from_specs(
        "Cache Explorer",
        CACHE_CONTROLS,
        values,
        compute,
        _render,
        history=history,
        description="SIMULATED hit rates (the cache's own policies replaying an id trace); MODELED GPU "
        "steps; " + ("MEASURED cache overhead here" if measure else "nothing measured"),
    )
