"""The Training Job Planner (notebook 06): a model, a data set, a deadline and a budget → a plan.

The algorithms live in :mod:`recnotebooks.perf.job_planner` (:func:`~recnotebooks.perf.job_planner.plan_job`,
``evaluate``, ``best_lever``, ``nearest_feasible``); this module draws them. :func:`explore_job` is
the app's pure function. For one setting of the controls (model, samples x epochs, deadline,
budget, hardware preset, nodes x devices, sharding strategy, placement, cache size and policy,
global batch, precision, software) it gives, **modeled** (:func:`recnotebooks.perf.estimate` and
:mod:`recnotebooks.perf.job`):

* ``verdict``: whether the plan fits in memory (and why not: the memory report's reasons), meets
  the deadline and the budget;
* ``breakdown``: the step by component on the slowest rank (and on the nearest feasible setting
  when this one is not);
* ``placement``: where the tables live in the plan that was modeled
  (:meth:`~recnotebooks.perf.result.CostResult.table_placement`: GB in HBM, in host DRAM behind a
  device cache with its hit rate, in host DRAM over PCIe, on parameter servers), also said in the
  note under the verdict. With placement ``hbm`` the cost planner moves what fits in no device's
  memory elsewhere; the placement control keeps the choice (it is the planner's input: a mixed plan
  is no one control value, and setting the control to one would ask the planner for another plan),
  and its label says what was modeled ("placement (modeled: 2.0% hbm · 98% remote)");
* ``totals``: samples/s, time to train, device-hours, cost, energy and samples per joule, for the
  epochs the setting trains (a number as set, or, for the DLRM-DCNv2 model of record, "to MLPerf's
  AUC target": the epochs of MLPerf's **published** convergence curve at the global batch; a note
  says which);
* ``levers``: each lever moved one notch (``best_lever``) and the speed-up it gives;
* ``per_rank`` and ``why``: the shown setting's plan explained rank by rank
  (:func:`~recnotebooks.perf.job_planner.explain_outcome`): each rank's step by component (drawn
  for every rank up to :data:`DRAWN_RANKS`, else the slowest, median and fastest), each table's
  why; a note gives the imbalance, the fullest rank's memory and the critical path;
* ``measured``: for the tiny model on at most 4 ranks, once :func:`measure_job` has run it, the
  same plan trained on this machine's CPU processes (:func:`recnotebooks.distributed.training.train_local`)
  beside the model of those processes. Ranks start only from :func:`measure_job`, never on a
  slider move.

The software is whose step is priced: TorchRec's eager PyTorch step, or NVIDIA's HugeCTR as
MLPerf's submissions ran it (one CUDA-graph replay, fused elementwise work, communication overlapped
with compute; every table in HBM, no bf16). Choosing a model sets the software, sharding and
precision to its source's (:func:`~recnotebooks.perf.job_planner.job_setup`): DLRM-DCNv2 starts as
MLPerf's submissions train it, with the step notebooks 02 and 05 price; leaving it restores the
defaults. A note says which software was priced.

An impossible setting (it does not fit, misses the deadline or the budget, or cannot be built)
says why and shows the nearest feasible setting (``nearest_feasible``) — never an empty chart.

:func:`convergence_chart` draws :func:`~recnotebooks.perf.job_planner.convergence_jobs`: the model of
record's epochs to MLPerf's target (published), samples per second and minutes to train (modeled)
against the global batch, one line per layout.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import altair as alt

from recnotebooks.checks import check_float
from recnotebooks.distributed.training import train_local
from recnotebooks.measure.calibrate_comm import local_ranks_hardware
from recnotebooks.perf.cost import COMPONENTS, CostResult, estimate
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.job import JobCost
from recnotebooks.perf.job_planner import (
    JOB_SETTINGS,
    MLPERF_STRATEGY,
    ConvergenceRow,
    JobPlan,
    JobSettings,
    LeverRow,
    Outcome,
    describe_change,
    epochs_words,
    explain_outcome,
    job_model,
    job_setup,
    lever_helps,
    plan_job,
    setting_values,
    software_words,
)
from recnotebooks.perf.mlperf_plan import mlperf_plan
from recnotebooks.perf.planner import plan_tables
from recnotebooks.perf.result import TABLE_HOMES
from recnotebooks.published.convergence import EPOCHS_FROM, curve_points
from recnotebooks.viz.app import App, HistoryEntry, Result, trail_bars
from recnotebooks.viz.charts import metric_bars, metric_lines, part_bars, reference_curve, time_breakdown
from recnotebooks.viz.controls import build_controls, human, percent
from recnotebooks.viz.theme import PLACEMENT_COLORS
from recnotebooks.viz.tidy import band_px, stack, stack_room

__all__ = [
    "MEASURE_BATCH",
    "PLANNER_CONTROLS",
    "convergence_chart",
    "explore_job",
    "job_planner",
    "measure_job",
]

#: How each setting of :data:`~recnotebooks.perf.job_planner.JOB_SETTINGS` shows as a control.
_VIEW: dict[str, dict[str, object]] = {
    "model": {"label": "model", "dropdown": True},
    "samples": {"label": "samples per epoch", "dropdown": True},
    "epochs": {"label": "epochs", "dropdown": True},
    "deadline_h": {"label": "deadline (hours)"},
    "budget_usd": {"label": "budget (USD)"},
    "hardware": {"label": "hardware", "dropdown": True},
    "nodes": {"label": "nodes"},
    "gpus": {"label": "devices per node"},
    "strategy": {"label": "sharding"},
    "placement": {"label": "placement"},
    "cache_fraction": {"label": "cache size (share of rows)"},
    "cache_policy": {"label": "cache policy"},
    "batch_size": {"label": "global batch"},
    "dtype": {"label": "precision", "dropdown": True},
    "software": {"label": "software", "dropdown": True},
}
#: The planner's controls: each job setting's options and default, with its label.
PLANNER_CONTROLS: dict[str, dict[str, object]] = {k: {**spec, **_VIEW[k]} for k, spec in JOB_SETTINGS.items()}
#: Global batch of a measured run here (the tiny model on CPU processes; larger batches take seconds).
MEASURE_BATCH = 2048
MEASURE_STEPS = 12
_MEASURED: dict[tuple[str, int, str, str], dict[str, Any]] = {}


def _breakdown(o: Outcome, label: str) -> list[dict[str, object]]:
    b = _job_of(o)[1].breakdown()
    return [
        {"setting": label, "phase": c, "seconds_per_step": b[c], "source": "modeled"}
        for c in COMPONENTS
        if b[c] > 0
    ]


def _job_of(o: Outcome) -> tuple[JobCost, CostResult]:
    """The job and the step of an outcome that was modeled (:func:`plan_job` shows only those)."""
    if o.job is None or o.result is None:
        raise ValueError(f"the planner has no modeled job to show for this setting: {o.problem}")
    return o.job, o.result


def _totals(o: Outcome, note: str = "") -> list[dict[str, object]]:
    j, _ = _job_of(o)
    figures = [("samples per second", j.samples_per_s, human(j.samples_per_s)),
               ("time to train (hours)", j.hours, f"{j.hours:,.3g} h"),
               ("cost (USD)", j.cost_usd, f"USD {human(j.cost_usd)}"),
               ("device-hours", j.device_hours, human(j.device_hours)),
               ("energy (kWh)", j.energy_kwh, human(j.energy_kwh, "Wh").replace(" Wh", " kWh")),
               ("samples per joule", j.samples_per_joule, human(j.samples_per_joule))]  # fmt: skip
    return [{"metric": m, "value": float(v), "display": d + note, "source": "modeled"} for m, v, d in figures]


def _bound(o: Outcome) -> str:
    """The slowest rank's largest component and its share; of the components' sum where the step
    overlaps them (HugeCTR's step is shorter than that sum), else of the step."""
    _, r = _job_of(o)
    b = r.breakdown()
    top = max(b, key=lambda k: b[k])
    of = (
        "the sum of the slowest rank's components"
        if o.settings.software == "hugectr"
        else "the slowest rank's step"
    )
    return f"{top} ({b[top] / sum(b.values()):.0%} of {of})"


#: At most this many rules broken are named in the verdict's note; the rest are counted.
NAMED_REASONS = 3


def short_reason(reason: str) -> str:
    """A reason a setting is impossible in one clause: up to its first " (" or "; " (the rest,
    the explanation and the fix, is in the verdict table; the nearest feasible setting is the fix):
    "does not fit: rank 0 needs 620 GB ... has 16 GB" without the next five ranks."""
    cut = min((i for i in (reason.find(" ("), reason.find("; ")) if i > 0), default=len(reason))
    return reason[:cut]


def verdict_note(why: list[str]) -> str:
    """The verdict on an impossible setting in one line: each rule it breaks in one clause
    (:func:`short_reason`), at most :data:`NAMED_REASONS` of them, the rest counted."""
    named = [short_reason(w) for w in why[:NAMED_REASONS]]
    more = len(why) - len(named)
    rules = f"{len(why)} rules broken: " if len(why) > 1 else ""
    tail = f"; and {more} more (the verdict table lists them)" if more else ""
    return f"MODELED: this plan is impossible: {rules}{'; '.join(named)}{tail}."


def _figures(o: Outcome) -> str:
    """A setting's job in a few figures: samples/s, step, hours, cost, energy and what bounds it."""
    j, _ = _job_of(o)
    price = hardware(o.settings.hardware).price_per_hour
    return (
        f"{human(j.samples_per_s)} samples/s (a {j.step_time_s * 1e3:.3g} ms step), "
        f"{j.hours:,.3g} h to train, {j.device_hours:,.4g} device-hours, "
        f"USD {j.cost_usd:,.0f} at USD {price:g}/device-hour, "
        f"{j.energy_kwh:,.3g} kWh, bound by {_bound(o)}"
    )


def _lever_note(job: JobPlan, who: str) -> str:
    """The lever that helps ``who`` most one notch away, or that none does."""
    lever = job.lever
    if lever is None:
        return (
            f"No lever one notch away makes {who} faster: each one moved is slower, the same or does not fit."
        )
    return (
        f"Lever that helps {who} most one notch away: {lever['change']} "
        f"({lever['speedup']:.2f}x faster, cost x{lever['cost_ratio']:.2f})."
    )


def explore_job(**values: object) -> Result:
    """Tables ``verdict``, ``breakdown``, ``totals``, ``levers``, ``measured``, ``per_rank``, ``why``
    (module docstring)
    and the notes under the controls, from :func:`~recnotebooks.perf.job_planner.plan_job`.

    A feasible setting's notes: the verdict, where its tables live, its figures, epochs, software,
    cache hit rates, the best lever and its ranks (imbalance, fullest rank, critical path). An
    impossible one's, three lines: the rules it breaks (at
    most :data:`NAMED_REASONS`, each in a clause, the rest counted: :func:`verdict_note`), the
    setting shown instead (the nearest feasible one) and its figures, and its best lever."""
    job = plan_job(**values)
    explained = _explained(job.shown)
    notes = [*_feasible_notes(job), explained[2]] if job.now.feasible else _impossible_notes(job)
    tables = _job_tables(job, explained)
    if not tables["measured"] and _measurable(job.now.settings):
        notes.append("Not measured here yet: run measure_job(**app.values) (a few seconds), move a control.")
    return Result(tables=tables, notes=notes, labels=_placement_label(job.now))


def _feasible_notes(job: JobPlan) -> list[str]:
    """The notes on a feasible setting: the verdict, where its tables live, its figures, epochs,
    software, cache hit rates (one figure when every table rounds to the same) and the best lever."""
    shown = job.shown
    _, r = _job_of(shown)
    notes = [
        "MODELED: fits, meets the deadline and the budget.",
        "Where the tables live (MODELED): " + r.table_placement_text() + ".",
        f"This setting: {_figures(shown)}.",
        f"Epochs: {epochs_words(shown.settings)}.",
        f"Software: {software_words(shown.settings)}.",
    ]
    if r.cache_hit_rates:
        hits = sorted(r.cache_hit_rates.values())
        lo, hi = f"{hits[0]:.0%}", f"{hits[-1]:.0%}"
        span = lo if lo == hi else f"{lo}–{hi}"
        what = "rate" if lo == hi else "rates"
        notes.append(f"Cache hit {what} (modeled from the skew, {shown.settings.cache_policy}): {span}.")
    notes.append(_lever_note(job, "it"))
    return notes


def _impossible_notes(job: JobPlan) -> list[str]:
    """The notes on an impossible setting, three lines: the rules it breaks (:func:`verdict_note`),
    the setting shown instead and its figures, and its best lever."""
    now, shown = job.now, job.shown
    j, _ = _job_of(shown)
    sentence = job.near_sentence[0].upper() + job.near_sentence[1:]
    if job.fallback:
        shown_note = (
            f"{sentence}; shown instead: the tiny model on one DGX H100 node with the default plan: "
            f"{_figures(shown)}."
        )
    elif shown is now:
        shown_note = f"{sentence}. This setting: {_figures(shown)}."
    else:
        shown_note = (
            f"{sentence}; the charts show it: {human(j.samples_per_s)} samples/s, {j.hours:,.3g} h to "
            f"train, USD {j.cost_usd:,.0f}."
        )
    return [
        verdict_note(now.why_not()),
        shown_note,
        _lever_note(job, "it" if shown is now else "the setting shown"),
    ]


def _lever_rows(rows: list[LeverRow]) -> list[dict[str, object]]:
    """The levers that help (:func:`~recnotebooks.perf.job_planner.lever_helps`), as chart rows."""
    return [
        {**x, "metric": "speed-up one notch away (x)", "setting": x["change"], "value": x["speedup"],
         "display": f"{x['speedup']:.2f}x", "source": "modeled"}
        for x in rows
        if lever_helps(x)
    ]  # fmt: skip


#: Ranks drawn one bar each in the per-rank chart; a larger job draws its slowest, median and
#: fastest rank (the ``per_rank`` table holds every rank).
DRAWN_RANKS = 8


def _explained(o: Outcome) -> tuple[list[dict[str, object]], list[dict[str, object]], str]:
    """The shown setting's plan explained rank by rank (**modeled**:
    :func:`~recnotebooks.perf.job_planner.explain_outcome`): each rank's step by component
    (``drawn``: its bar's label, "" for a rank not drawn), each table's why, and a note with the
    imbalance, the fullest rank and the critical path."""
    e = explain_outcome(o)
    # slowest first; among equal steps the lowest rank first, as the critical path names it
    slowest_first = sorted(e.ranks, key=lambda r: (-r.step, r.rank))
    if len(slowest_first) <= DRAWN_RANKS:
        drawn = {r.rank: f"rank {r.rank}" for r in e.ranks}
    else:
        n = len(slowest_first)
        picks = (
            (slowest_first[0], "slowest"),
            (slowest_first[n // 2], "median"),
            (slowest_first[-1], "fastest"),
        )
        drawn = {r.rank: f"rank {r.rank} ({what})" for r, what in picks}
    steps = [{"rank": f"rank {r.rank}", "drawn": drawn.get(r.rank, ""), "phase": k,
              "seconds_per_step": v, "source": "modeled"}
             for r in slowest_first for k, v in r.seconds.items() if v > 0]  # fmt: skip
    why = [{**row, "source": "modeled"} for row in e.why()]
    full = max(e.ranks, key=lambda r: r.reserved / r.capacity)
    note = (
        f"Each rank (MODELED, {e.world_size} devices): step max/mean {e.time_imbalance:.2f}, reserved "
        f"memory max/mean {e.memory_imbalance:.2f} (rank {full.rank} reserves {human(full.reserved, 'B')} "
        f"of {human(full.capacity, 'B')}); critical path: {e.critical_path.sentence()}"
    )
    return steps, why, note


def _job_tables(
    job: JobPlan, explained: tuple[list[dict[str, object]], list[dict[str, object]], str]
) -> dict[str, list[dict[str, object]]]:
    """The app's tables for a planned setting: the verdict, the step and where the tables live
    (this setting's, and the nearest feasible one's beside it when that one is drawn too), the
    whole job's totals, the levers that help, the measured run, and the shown setting's plan
    ``explained`` (:func:`_explained`: ``per_rank``, ``why``)."""
    now, near, shown = job.now, job.near, job.shown
    j, _ = _job_of(shown)
    kind = "nearest feasible" if near is not None and near.feasible else "fastest that fits"
    other = "" if near is None else f"{kind}, {describe_change(now.settings, near.settings)}"
    label = "this setting" if shown is now else other  # drawn one change per line
    breakdown, placement = _breakdown(shown, label), _placement(shown, label)
    per_rank, why, _ = explained
    if near is not None and shown is now:
        breakdown += _breakdown(near, other)
        placement += _placement(near, other)
    return {
        "verdict": [{"verdict": "feasible" if now.feasible else "impossible", "fits": now.fits,
                     "reasons": "; ".join(now.why_not()), "source": "modeled"}],
        "breakdown": breakdown,
        "placement": placement,
        "totals": _totals(shown, "" if shown is now else " (nearest)"),
        "step": [{"setting": label, "step_ms": j.step_time_s * 1e3, "software": shown.settings.software,
                  "source": "modeled"}],
        "levers": _lever_rows(job.lever_rows),
        "measured": _measured_rows(now.settings),
        "per_rank": per_rank,
        "why": why,
    }  # fmt: skip


def _placement(o: Outcome, label: str) -> list[dict[str, object]]:
    """Where the setting's tables live (:meth:`~recnotebooks.perf.result.CostResult.table_placement`),
    one row per place that holds bytes, for the chart."""
    keep = ("placement", "where", "gb", "share", "hit_rate")
    rows: list[dict[str, object]] = []
    for x in _job_of(o)[1].table_placement():
        held, share = check_float("bytes", x["bytes"]), check_float("share", x["share"])
        if held > 0:
            display = f"{human(held, 'B')} ({percent(share)})"
            rows.append(
                {"setting": label, **{k: x[k] for k in keep}, "display": display, "source": "modeled"}
            )
    return rows


def _placement_label(o: Outcome) -> dict[str, str]:
    """The placement control's label when the modeled plan put table bytes elsewhere than the
    placement chosen: "placement (modeled: 2.0% hbm · 98% remote)"; no label otherwise."""
    if o.result is None:
        return {}
    held = [x for x in o.result.table_placement() if check_float("bytes", x["bytes"]) > 0]
    if all(x["placement"] == o.settings.placement for x in held):
        return {}
    shares = " · ".join(f"{percent(check_float('share', x['share']))} {x['placement']}" for x in held)
    return {"placement": f"{PLANNER_CONTROLS['placement']['label']} (modeled: {shares})"}


# ----- measured beside the model: the tiny model on local CPU ranks -----------------------
def _measurable(s: JobSettings) -> bool:
    return s.model == "tiny" and s.nodes * s.gpus <= 4


def _measure_key(s: JobSettings) -> tuple[str, int, str, str]:
    return (s.model, s.nodes * s.gpus, s.strategy, s.hardware)


def measure_job(**values: object) -> float:
    """Train the setting's plan (tiny model, at most 4 ranks) for a few steps on this machine's CPU
    processes at global batch :data:`MEASURE_BATCH` and keep it for the planner; returns the
    seconds it took (0 when already measured). **Measured.** Placements are not executed here:
    every shard sits in its process's memory."""
    s = JobSettings.from_values(**values)
    if not _measurable(s):
        raise ValueError(
            f"measure_job runs the tiny model on at most 4 ranks; got model={s.model!r}, "
            f"nodes x devices = {s.nodes * s.gpus}"
        )
    key = _measure_key(s)
    if key in _MEASURED:
        return 0.0
    t0 = time.perf_counter()
    world = s.nodes * s.gpus
    config = job_model("tiny")
    if s.strategy == MLPERF_STRATEGY:
        plan = mlperf_plan(config, world, 1, hardware(s.hardware).hbm_bytes)
    else:
        plan = plan_tables(config, s.hardware, world, strategy=s.strategy, batch_size=MEASURE_BATCH)
    res = train_local(
        config,
        plan,
        world,
        MEASURE_STEPS,
        MEASURE_BATCH,
        sparse_optimizer="sgd",
        dense_optimizer="sgd",
        timeout_s=300.0,
    )
    _MEASURED[key] = {"phases": res.phases, "plan": plan, "world": world, "reliability": res.reliability}
    return time.perf_counter() - t0


def _measured_rows(s: JobSettings) -> list[dict[str, object]]:
    m = _MEASURED.get(_measure_key(s)) if _measurable(s) else None
    if m is None:
        return []
    world = int(m["world"])
    here = local_ranks_hardware(hardware("this_machine"), world)
    r = estimate(
        job_model("tiny"),
        here,
        batch_size=MEASURE_BATCH,
        gpus=world,
        plan=m["plan"],
        sparse_optimizer="sgd",
        dense_optimizer="sgd",
        implementation="recnotebooks",
    )
    b = r.breakdown()
    rows = [
        {
            "where": f"modeled here: {world} CPU process(es)",
            "phase": c,
            "seconds_per_step": b[c],
            "source": "modeled",
        }
        for c in COMPONENTS
        if b[c] > 0
    ]
    shaky = str(m.get("reliability", ""))
    rows += [
        {
            "where": f"measured here: rank 0 of {world}",
            "phase": k,
            "seconds_per_step": s,
            "source": "measured",
            "reliable": not shaky,
            "reliability": shaky,
        }
        for k, s in m["phases"].items()
        if s > 0 and math.isfinite(s)
    ]
    return rows


#: Units of the table-size axis, largest first: (name, units per GB, the least GB a bar reaches to use it).
SIZE_UNITS = (("TB", 1e-3, 1e3), ("GB", 1.0, 1.0), ("MB", 1e3, 1e-3), ("kB", 1e6, 0.0))


def size_unit(rows: list[dict[str, object]]) -> tuple[str, float]:
    """The unit the table-size axis reads in for the bars of ``rows`` (their ``gb`` summed per
    ``setting``): TB from 1 TB, GB from 1 GB, MB from 1 MB, else kB, so its ticks read 0–6 MB, not
    0.0000–0.0060 GB. Returns (unit, units per GB)."""
    totals: dict[str, float] = {}
    for x in rows:
        totals[str(x["setting"])] = totals.get(str(x["setting"]), 0.0) + check_float("gb", x["gb"])
    top = max(totals.values(), default=0.0)
    return next((name, per_gb) for name, per_gb, least in SIZE_UNITS if top >= least)


def _render(history: list[HistoryEntry]) -> alt.VConcatChart:
    now, trail = history[0].result.tables, [e.label for e in history]

    def labels(table: str, col: str) -> list[str]:
        return list(dict.fromkeys(str(r[col]) for r in now[table]))

    # the charts line up their plots at the widest left band: the room right of it is theirs (layout)
    levers = band_px(labels("levers", "setting"), titled=False) if now["levers"] else 0
    room = stack_room(
        band_px(labels("breakdown", "setting")),
        band_px(trail, titled=False),
        band_px(labels("placement", "setting")),
        levers,
        band_px(labels("measured", "where")) if now["measured"] else 0,
        band_px([str(r["drawn"]) for r in now["per_rank"] if r["drawn"]]),
    )
    charts = [
        _step_chart(now, room),
        _ranks_chart(now["per_rank"], now["step"][0], room),
        _placement_chart(now["placement"], history[0].values["placement"], room),
        trail_bars(history, room, table="totals", title="The whole job", source="modeled",
                   detail="one bar per setting in the trail, the current one solid"),
    ]  # fmt: skip
    if now["levers"]:
        gain = "speed-up of the time to train; 1.0 = no gain"
        charts.append(metric_bars(now["levers"], title="Each lever one notch away", source="modeled",
                                  detail=gain, rule_at=1.0, total_width=levers + room))  # fmt: skip
    if now["measured"]:
        where = f"global batch {MEASURE_BATCH}; placements not executed"
        charts.append(time_breakdown(now["measured"], by="where", title="The same plan on CPU processes here",
                                     detail=where, width=min(480, room)))  # fmt: skip
    return stack(*charts)


def _step_chart(now: dict[str, list[dict[str, object]]], room: int) -> alt.TopLevelMixin:
    """The step on the slowest rank by component: this setting's (and the nearest feasible one's)."""
    shown = now["step"][0]  # the setting whose step the totals price
    ms = check_float("step_ms", shown["step_ms"])
    overlapped = f"HugeCTR overlaps communication: its step is {ms:.3g} ms, less than the bars' sum"
    return time_breakdown(
        now["breakdown"],
        by="setting",
        phases=list(COMPONENTS),
        source="modeled",
        title="One step on the slowest rank",
        detail=overlapped
        if shown["software"] == "hugectr"
        else "this setting, and the nearest feasible one when this one is impossible",
        width=min(480, room),
    )


def _ranks_chart(rows: list[dict[str, object]], shown: dict[str, object], room: int) -> alt.TopLevelMixin:
    """Each rank's step by component, slowest first (at most :data:`DRAWN_RANKS` bars: a larger
    job draws its slowest, median and fastest rank)."""
    drawn = [{**x, "rank": x["drawn"]} for x in rows if x["drawn"]]
    ranks = len({x["rank"] for x in rows})
    which = "every rank" if len(drawn) == len(rows) else f"3 of {ranks} ranks"
    return time_breakdown(
        drawn,
        by="rank",
        phases=list(COMPONENTS),
        source="modeled",
        title=f"Each rank's step: {shown['setting']}",
        detail=f"{which}, the plan explained (perf.explain); the critical path in the notes",
        width=min(480, room),
    )


def _placement_chart(rows: list[dict[str, object]], chosen: object, room: int) -> alt.TopLevelMixin:
    """Where the tables live, in the unit their size reads best in (:func:`size_unit`), against
    the placement ``chosen``."""
    unit, per_gb = size_unit(rows)
    return part_bars(
        [{**x, "size": check_float("gb", x["gb"]) * per_gb} for x in rows],
        value="size",
        part="where",
        parts=list(TABLE_HOMES.values()),
        colors=[PLACEMENT_COLORS[p] for p in TABLE_HOMES],
        text="display",
        value_title=f"{unit} of tables (weights and optimizer state)",
        title="Where the tables live",
        source="modeled",
        detail=f"you chose placement {chosen}; the bars: the plan modeled",
        width=min(480, room),
    )


def _source_changes(old: object, new: object) -> dict[str, object]:
    """The settings that follow a change of model from ``old`` to ``new``: ``new``'s
    :func:`~recnotebooks.perf.job_planner.job_setup`, and the defaults back for what ``old``'s set
    (none when ``new`` is no model of the planner: the control's own check names it)."""
    models = setting_values("model")
    if old == new or new not in models or old not in models:
        return {}
    before, after = job_setup(str(old)), job_setup(str(new))
    return {k: after.get(k, JOB_SETTINGS[k]["value"]) for k in {**before, **after}}


class PlannerApp(App):
    """The planner's :class:`~recnotebooks.viz.app.App`: choosing a model (a control or
    :meth:`set`) also sets the settings its source trains it with (:func:`_source_changes`);
    values given to :meth:`set` beside the model win."""

    def __init__(self, controls: dict[str, Any], **kw: Any) -> None:
        # before App's own observer: the settings follow the model before the update it schedules
        controls["model"].observe(self._follow_model, names="value")
        super().__init__("Training Job Planner", controls, lambda **v: explore_job(**v), _render, **kw)

    def _follow_model(self, change: dict[str, Any]) -> None:
        if getattr(self, "_driving", True):  # set() applies them itself; none during __init__
            return
        self._driving = True
        try:
            for k, v in _source_changes(change["old"], change["new"]).items():
                self.controls[k].value = v
        finally:
            self._driving = False

    def set(self, **values: object) -> Result:
        if "model" in values:
            values = {**_source_changes(self.controls["model"].value, values["model"]), **values}
        return super().set(**values)


def job_planner(*, history: int = 4, **values: object) -> App:
    """The Training Job Planner app; ``values`` override the default settings (and a ``model``'s
    :func:`~recnotebooks.perf.job_planner.job_setup` the defaults: mlperf_dcnv2 starts as MLPerf's
    submissions train it)."""
    model = values.get("model", JOB_SETTINGS["model"]["value"])
    setup = job_setup(model) if isinstance(model, str) and model in setting_values("model") else {}
    start = {**setup, **values}
    controls = build_controls(PLANNER_CONTROLS, start, "the Training Job Planner")
    what = "MODELED time, cost and energy of a training job; MEASURED on local processes for the tiny model"
    return PlannerApp(controls, history=history, description=what)


def convergence_chart(rows: Sequence[ConvergenceRow]) -> alt.VConcatChart:
    """:func:`~recnotebooks.perf.job_planner.convergence_jobs`'s rows drawn against the global batch:
    the epochs MLPerf's reference runs needed (**published**: its reference points filled, the
    values between them interpolated hollow, the points MLPerf's checker prunes grey crosses;
    :func:`~recnotebooks.published.convergence.curve_points`), above the samples per second and the
    minutes to train on each layout (**modeled**, as MLPerf's submissions run the model)."""
    if not rows:
        raise ValueError("convergence_chart needs the rows of convergence_jobs, got none")
    points = curve_points(tuple(int(r["global_batch"]) for r in rows))
    title, rcps = (
        "Epochs to MLPerf's AUC target",
        "MLPerf's reference convergence points (RCPs), linear between them",
    )
    epochs = reference_curve(points, x="global_batch", y="epochs", kind="epochs_from", kinds=EPOCHS_FROM,
                             title=title, detail=rcps, x_title="global batch")  # fmt: skip
    epochs = epochs.properties(**_CURVE_SIZE)
    speed = _per_layout(rows, "samples_per_s", "Training samples per second",
                        "HugeCTR as MLPerf's submissions run it", ".3~s")  # fmt: skip
    minutes = _per_layout(rows, "minutes", "Minutes to train to the target",
                          "training and evaluations, as MLPerf times a run", ".2f")  # fmt: skip
    return stack(epochs, speed, minutes)


#: The size of each of :func:`convergence_chart`'s panels.
_CURVE_SIZE = {"width": 400, "height": 130}


def _per_layout(
    rows: Sequence[ConvergenceRow], y: str, title: str, detail: str, y_format: str
) -> alt.TopLevelMixin:
    """Column ``y`` of :func:`~recnotebooks.perf.job_planner.convergence_jobs`'s rows against the
    global batch, one line per layout, **modeled**."""
    lines = metric_lines(rows, x="global_batch", y=y, color="layout", title=title, source="modeled",
                         detail=detail, y_format=y_format, x_title="global batch", x_format="~s")  # fmt: skip
    return lines.properties(**_CURVE_SIZE)
