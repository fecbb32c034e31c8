"""The Training Job Planner (notebook 06): a model, a data set, a deadline and a budget → a plan.

:func:`plan_job` is the pure function. For one setting of the controls (model, samples x epochs,
deadline, budget, hardware preset, nodes x devices, sharding strategy, placement, cache size and
policy, global batch, precision) it gives, **modeled** (:func:`recnotebooks.perf.estimate` and
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
* ``totals``: samples/s, time to train, device-hours, cost, energy and samples per joule;
* ``levers``: each lever moved one notch (:func:`best_lever`) and the speed-up it gives;
* ``measured``: for the tiny model on at most 4 ranks, once :func:`measure_job` has run it, the
  same plan trained on this machine's CPU processes (:func:`recnotebooks.distributed.training.train_local`)
  beside the model of those processes. Ranks start only from :func:`measure_job`, never on a
  slider move.

An impossible setting (it does not fit, misses the deadline or the budget, or cannot be built)
says why and shows the nearest feasible setting (:func:`nearest_feasible`) — never an empty chart.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from recnotebooks.checks import check_choice
from recnotebooks.config import DLRMConfig, preset
from recnotebooks.distributed.training import train_local
from recnotebooks.measure.calibrate_comm import local_ranks_hardware
from recnotebooks.perf.access import CACHE_POLICIES
from recnotebooks.perf.cost import COMPONENTS, CostResult, estimate
from recnotebooks.perf.hardware import HARDWARE, hardware
from recnotebooks.perf.job import CRITEO_TERABYTE_SAMPLES, JobCost, job_from_estimate
from recnotebooks.perf.planner import STRATEGIES, plan_tables
from recnotebooks.perf.result import TABLE_HOMES
from recnotebooks.plan import PLACEMENTS, Plan
from recnotebooks.viz.app import App, HistoryEntry, Result, history_rows
from recnotebooks.viz.charts import metric_bars, part_bars, time_breakdown
from recnotebooks.viz.controls import build_controls, human, option_values, percent
from recnotebooks.viz.theme import PLACEMENT_COLORS
from recnotebooks.viz.tidy import band_px, stack, stack_room

__all__ = ["LEVERS", "MEASURE_BATCH", "Outcome", "PLANNER_CONTROLS", "best_lever", "evaluate", "job_model",
           "job_planner", "measure_job", "nearest_feasible", "plan_job"]  # fmt: skip

_MODELS = [("tiny (8 small tables)", "tiny"), ("Criteo Kaggle", "criteo_kaggle"),
           ("Criteo Terabyte", "criteo_terabyte"), ("MLPerf DLRM v1 (~100 GB)", "mlperf_v1"),
           ("production: mlperf_v1 x10 (~1 TB)", "mlperf_v1_x10"),
           ("production: mlperf_v1 x30 (~3 TB)", "mlperf_v1_x30")]  # fmt: skip
#: hardware presets, oldest and smallest first (one notch = the next one along)
_HARDWARE = ["this_machine", *(h for h in HARDWARE if h != "this_machine")]
#: How training runs: fp32, TF32 GEMMs, or autocast (AMP). Pure bf16/fp16 (every byte halved, no
#: fp32 master weights) is the model's lower bound, not a way to train, so it is not offered.
PRECISION_OPTIONS = [("fp32", "fp32"), ("tf32", "tf32"), ("AMP bf16", "amp_bf16"), ("AMP fp16", "amp_fp16")]
PLANNER_CONTROLS: dict[str, dict[str, object]] = {
    "model": {"options": _MODELS, "value": "mlperf_v1", "label": "model", "dropdown": True},
    "samples": {"options": [("Criteo Kaggle: 45.8 M", 45_840_617), ("100 M", 100_000_000),
                            ("Criteo Terabyte: 4.2 B", CRITEO_TERABYTE_SAMPLES), ("10 B", 10_000_000_000)],
                "value": CRITEO_TERABYTE_SAMPLES, "label": "samples per epoch", "dropdown": True},
    "epochs": {"options": [1, 2, 3, 5, 10], "value": 1, "label": "epochs"},
    "deadline_h": {"options": [1, 2, 4, 8, 12, 24, 48, 72, 168], "value": 24, "label": "deadline (hours)"},
    "budget_usd": {"options": [10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000], "value": 3000,
                   "label": "budget (USD)"},
    "hardware": {"options": _HARDWARE, "value": "dgx_h100", "label": "hardware", "dropdown": True},
    "nodes": {"options": [1, 2, 4, 8], "value": 1, "label": "nodes"},
    "gpus": {"options": [1, 2, 4, 8], "value": 8, "label": "devices per node"},
    "strategy": {"options": list(STRATEGIES), "value": "cost", "label": "sharding"},
    "placement": {"options": list(PLACEMENTS), "value": "hbm", "label": "placement"},
    "cache_fraction": {"options": [0.01, 0.02, 0.05, 0.1, 0.2, 0.5], "value": 0.05,
                       "label": "cache size (share of rows)"},
    "cache_policy": {"options": list(CACHE_POLICIES), "value": "lru", "label": "cache policy"},
    "batch_size": {"options": [2**i for i in range(12, 19)], "value": 65536, "label": "global batch"},
    "dtype": {"options": PRECISION_OPTIONS, "value": "fp32", "label": "precision", "dropdown": True},
}  # fmt: skip
#: Controls a learner can turn to change the job (the others describe the job itself).
LEVERS = ("nodes", "gpus", "batch_size", "dtype", "placement", "cache_fraction", "cache_policy", "strategy",
          "hardware")  # fmt: skip
_ORDERED = ("nodes", "gpus", "batch_size", "cache_fraction", "hardware")
#: Global batch of a measured run here (the tiny model on CPU processes; larger batches take seconds).
MEASURE_BATCH = 2048
MEASURE_STEPS = 12
_MEASURED: dict[tuple[object, ...], dict[str, Any]] = {}


def job_model(name: str) -> DLRMConfig:
    """The planner's models: presets, and production-scale mlperf_v1 with 10x or 30x the rows."""
    check_choice("model", name, option_values(PLANNER_CONTROLS["model"]))
    base, _, scale = name.partition("_x")
    return preset(base).with_rows_scale(int(scale)) if scale else preset(name)


def _checked(values: dict[str, object]) -> dict[str, object]:
    unknown = sorted(set(values) - set(PLANNER_CONTROLS))
    if unknown:
        raise KeyError(f"unknown setting(s) {unknown}; the planner has {sorted(PLANNER_CONTROLS)}")
    out = {k: spec["value"] for k, spec in PLANNER_CONTROLS.items()}
    for k, v in values.items():
        out[k] = check_choice(k, v, option_values(PLANNER_CONTROLS[k]))
    return out


@dataclass(frozen=True)
class Outcome:
    """One setting, modeled: the step (None when it cannot be built), the job, and why not."""

    values: dict[str, object]
    result: CostResult | None
    job: JobCost | None
    problem: str | None  # the setting cannot be built (e.g. more devices than a node has)

    @property
    def fits(self) -> bool:
        return self.result is not None and self.result.fits

    @property
    def feasible(self) -> bool:
        """Fits in memory, meets the deadline and stays within the budget."""
        v = self.values
        return self.fits and self.job is not None and self.job.meets(v["deadline_h"], v["budget_usd"])  # type: ignore[arg-type]

    def why_not(self) -> list[str]:
        """What makes the setting infeasible, in words (empty when it is feasible)."""
        if self.problem:
            return [self.problem]
        assert self.result is not None and self.job is not None
        why = [] if self.fits else ["does not fit: " + "; ".join(self.result.memory.reasons)]
        if self.job.hours > float(self.values["deadline_h"]):  # type: ignore[arg-type]
            why.append(f"misses the deadline: {self.job.hours:,.3g} h > {self.values['deadline_h']} h")
        if self.job.cost_usd > float(self.values["budget_usd"]):  # type: ignore[arg-type]
            why.append(f"over budget: ${self.job.cost_usd:,.0f} > ${self.values['budget_usd']:,}")
        return why


def _cached_plan(plan: Plan, config: DLRMConfig, fraction: float, policy: str) -> Plan:
    """Every cache shard of ``plan`` with ``fraction`` of its rows as device slots under ``policy``
    (the model computes its hit rate from the skew: :func:`recnotebooks.perf.access.hit_rate`)."""
    rows = {t.name: t.num_rows for t in config.tables}
    shards = tuple(
        dataclasses.replace(s, cache_hit_rate=None, cache_policy=policy,
                            cache_rows=max(1, round(fraction * rows[s.table] * s.row_fraction)))
        if s.placement == "cache" else s
        for s in plan.shards
    )  # fmt: skip
    return dataclasses.replace(plan, shards=shards)


@lru_cache(maxsize=512)
def _evaluate(key: tuple[tuple[str, object], ...]) -> Outcome:
    v = dict(key)
    hw = hardware(str(v["hardware"]))
    gpus, nodes = int(v["gpus"]), int(v["nodes"])  # type: ignore[call-overload]
    if gpus > hw.devices:
        return Outcome(v, None, None, f"a {hw.name} node has {hw.devices} device(s), not {gpus}")
    config = job_model(str(v["model"]))
    try:
        hit = 0.9 if v["placement"] == "cache" else None  # replaced by the modeled rate below
        plan = plan_tables(config, hw, gpus * nodes, strategy=str(v["strategy"]),
                           placement=str(v["placement"]), cache_hit_rate=hit,
                           batch_size=int(v["batch_size"]), dtype=str(v["dtype"]))  # type: ignore[call-overload]  # fmt: skip
        plan = _cached_plan(plan, config, float(v["cache_fraction"]), str(v["cache_policy"]))  # type: ignore[arg-type]
        r = estimate(config, hw, batch_size=int(v["batch_size"]), gpus=gpus, nodes=nodes, plan=plan,  # type: ignore[call-overload]
                     dtype=str(v["dtype"]))  # fmt: skip
    except ValueError as e:  # a combination the planner or the model cannot build, in its words
        return Outcome(v, None, None, str(e))
    return Outcome(v, r, job_from_estimate(r, hw, float(v["samples"]), float(v["epochs"])), None)  # type: ignore[arg-type]


def evaluate(**values: object) -> Outcome:
    """The modeled outcome of one setting (controls checked; results reused for a repeated setting)."""
    return _evaluate(tuple(sorted(_checked(values).items())))


def _neighbours(values: dict[str, object], lever: str, notch: bool = True) -> list[object]:
    opts = option_values(PLANNER_CONTROLS[lever])
    i = opts.index(values[lever])
    if notch and lever in _ORDERED:
        return [opts[j] for j in (i - 1, i + 1) if 0 <= j < len(opts)]
    return [o for o in opts if o != values[lever]]


def best_lever(**values: object) -> tuple[dict[str, object] | None, list[dict[str, object]]]:
    """Each lever of :data:`LEVERS` moved one notch (the next value up or down; every other choice
    of a named option): the best by time to train among those that fit, and one row per lever
    (``lever``, ``change``, ``speedup`` = hours now / hours then, ``cost_ratio``, ``feasible``)."""
    now = evaluate(**values)
    if now.job is None:
        return None, []
    rows = []
    for lever in LEVERS:
        best = None
        for v in _neighbours(now.values, lever):
            o = evaluate(**{**now.values, lever: v})
            if o.fits and o.job is not None and (best is None or o.job.hours < best.job.hours):  # type: ignore[union-attr]
                best = o
        same = best is not None and best.job == now.job  # a lever with nothing to act on (no cache)
        if best is not None and best.job is not None and not same:
            rows.append({"lever": lever, "change": f"{lever} {now.values[lever]}→{best.values[lever]}",
                         "speedup": now.job.hours / best.job.hours, "cost_ratio": best.job.cost_usd / max(
                             now.job.cost_usd, 1e-12), "feasible": best.feasible})  # fmt: skip
    rows.sort(key=lambda r: -float(r["speedup"]))  # type: ignore[arg-type]
    return (rows[0] if rows and float(rows[0]["speedup"]) > 1 else None), rows  # type: ignore[arg-type]


def nearest_feasible(**values: object) -> tuple[Outcome | None, str]:
    """The cheapest feasible setting one change away (any value of a lever), else two changes
    away (hardware, placement or precision with nodes; hardware with devices per node), and a
    sentence saying which; when none is, ``(fastest fitting setting found, why)``."""
    now = evaluate(**values)
    v0 = now.values
    tried = [evaluate(**{**v0, k: x}) for k in LEVERS for x in _neighbours(v0, k, notch=False)]
    if not any(o.feasible for o in tried):
        pairs = [("hardware", "nodes"), ("placement", "nodes"), ("dtype", "nodes"), ("hardware", "gpus")]
        for a, b in pairs:
            for x in option_values(PLANNER_CONTROLS[a]):
                for y in option_values(PLANNER_CONTROLS[b]):
                    if x != v0[a] and y != v0[b]:
                        tried.append(evaluate(**{**v0, a: x, b: y}))
    ok = [o for o in tried if o.feasible]
    if ok:
        best = min(ok, key=lambda o: o.job.cost_usd)  # type: ignore[union-attr]
        return best, "nearest feasible: " + _change(v0, best.values)
    fitting = [o for o in [now, *tried] if o.fits]
    if not fitting:
        return None, "nothing within two changes fits in memory"
    fast = min(fitting, key=lambda o: o.job.hours)  # type: ignore[union-attr]
    j = fast.job
    assert j is not None
    return fast, (f"no setting within two changes meets the deadline and the budget; the fastest that fits "
                  f"({_change(v0, fast.values)}) takes {j.hours:,.3g} h and costs "
                  f"${j.cost_usd:,.0f}")  # fmt: skip


def _change(old: dict[str, object], new: dict[str, object]) -> str:
    return ", ".join(f"{k} {old[k]}→{new[k]}" for k in new if new[k] != old[k]) or "no change"


def _breakdown(o: Outcome, label: str) -> list[dict[str, object]]:
    b = o.result.breakdown()  # type: ignore[union-attr]
    return [{"setting": label, "phase": c, "seconds_per_step": b[c], "source": "modeled"}
            for c in COMPONENTS if b[c] > 0]  # fmt: skip


def _totals(o: Outcome, note: str = "") -> list[dict[str, object]]:
    j = o.job
    assert j is not None
    figures = [("samples per second", j.samples_per_s, human(j.samples_per_s)),
               ("time to train (hours)", j.hours, f"{j.hours:,.3g} h"),
               ("cost (USD)", j.cost_usd, f"${human(j.cost_usd)}"),
               ("device-hours", j.device_hours, human(j.device_hours)),
               ("energy (kWh)", j.energy_kwh, human(j.energy_kwh, "Wh").replace(" Wh", " kWh")),
               ("samples per joule", j.samples_per_joule, human(j.samples_per_joule))]  # fmt: skip
    return [{"metric": m, "value": float(v), "display": d + note, "source": "modeled"} for m, v, d in figures]


def _bound(o: Outcome) -> str:
    b = o.result.breakdown()  # type: ignore[union-attr]
    top = max(b, key=lambda k: b[k])
    return f"{top} ({b[top] / sum(b.values()):.0%} of the slowest rank's step)"


def plan_job(**values: object) -> Result:
    """Tables ``verdict``, ``breakdown``, ``totals``, ``levers``, ``measured`` (module docstring)."""
    now = evaluate(**values)
    v = now.values
    shown, notes = now, []
    verdict = "feasible" if now.feasible else "impossible"
    why = now.why_not()
    notes.append("MODELED: fits, meets the deadline and the budget." if now.feasible else
                 "MODELED: this plan is impossible: " + "; ".join(why) + ".")  # fmt: skip
    near = None
    if not now.feasible:
        near, sentence = nearest_feasible(**v)
        notes.append(sentence[0].upper() + sentence[1:] + ".")
    if now.job is None:  # nothing to show for this setting itself: show the nearest one instead
        if near is None:  # nothing fits within two changes: fall back on a setting that always builds
            near = evaluate(**{**v, "model": "tiny", "hardware": "dgx_h100", "nodes": 1, "gpus": 8})
            notes.append("Shown instead: the tiny model on one DGX H100 node.")
        shown = near
    j, r = shown.job, shown.result
    assert j is not None and r is not None
    where = f"Where the tables {'' if shown is now else 'of the setting shown '}live (MODELED): "
    where += r.table_placement_text() + "."
    if shown is now:  # right under the verdict: "fits" may mean "fits, once most bytes left HBM"
        notes.insert(1, where)
    price = hardware(str(shown.values["hardware"])).price_per_hour
    notes.append(f"{'This setting' if shown is now else 'The setting shown'}: {human(j.samples_per_s)} "
                 f"samples/s, {j.hours:,.3g} h to train, {j.device_hours:,.4g} device-hours, "
                 f"${j.cost_usd:,.0f} at ${price:g}/device-hour, {j.energy_kwh:,.3g} kWh, "
                 f"bound by {_bound(shown)}.")  # fmt: skip
    if shown is not now:
        notes.append(where)
    if r.cache_hit_rates:
        hits = sorted(r.cache_hit_rates.values())
        policy = shown.values["cache_policy"]
        lo, hi = f"{hits[0]:.0%}", f"{hits[-1]:.0%}"
        span = lo if lo == hi else f"{lo}–{hi}"  # one figure when every table rounds to the same rate
        what = "rate" if lo == hi else "rates"
        notes.append(f"Cache hit {what} (modeled from the skew, {policy}): {span}.")
    lever, lever_rows = best_lever(**shown.values)
    if lever:
        gain, cost = float(lever["speedup"]), float(lever["cost_ratio"])  # type: ignore[arg-type]
        notes.append(f"Lever that helps most one notch away: {lever['change']} ({gain:.2f}x faster, "
                     f"cost x{cost:.2f}).")  # fmt: skip
    kind = "nearest feasible" if near is not None and near.feasible else "fastest that fits"
    other = "" if near is None else f"{kind}, {_change(v, near.values)}"  # drawn one change per line
    breakdown = _breakdown(shown, "this setting" if shown is now else other)
    placement = _placement(shown, "this setting" if shown is now else other)
    if near is not None and shown is now:
        breakdown += _breakdown(near, other)
        placement += _placement(near, other)
    tables = {
        "verdict": [{"verdict": verdict, "fits": now.fits, "reasons": "; ".join(why), "source": "modeled"}],
        "breakdown": breakdown,
        "placement": placement,
        "totals": _totals(shown, "" if shown is now else " (nearest)"),
        "levers": [{**x, "metric": "speed-up one notch away (x)", "setting": x["change"],
                    "value": x["speedup"], "display": f"{float(x['speedup']):.2f}x",  # type: ignore[arg-type]
                    "source": "modeled"} for x in lever_rows],
        "measured": _measured_rows(v),
    }  # fmt: skip
    if not tables["measured"] and _measurable(v):
        notes.append("Not measured here yet: run measure_job(**app.values) (a few seconds), move a control.")
    return Result(tables=tables, notes=notes, labels=_placement_label(now))


def _placement(o: Outcome, label: str) -> list[dict[str, object]]:
    """Where the setting's tables live (:meth:`~recnotebooks.perf.result.CostResult.table_placement`),
    one row per place that holds bytes, for the chart."""
    return [{"setting": label, "placement": x["placement"], "where": x["where"], "gb": x["gb"],
             "share": x["share"], "hit_rate": x["hit_rate"],
             "display": f"{human(float(x['bytes']), 'B')} ({percent(float(x['share']))})",  # type: ignore[arg-type]
             "source": "modeled"}
            for x in o.result.table_placement() if float(x["bytes"]) > 0]  # type: ignore[union-attr,arg-type]  # fmt: skip


def _placement_label(o: Outcome) -> dict[str, str]:
    """The placement control's label when the modeled plan put table bytes elsewhere than the
    placement chosen: "placement (modeled: 2.0% hbm · 98% remote)"; no label otherwise."""
    if o.result is None:
        return {}
    held = [x for x in o.result.table_placement() if float(x["bytes"]) > 0]  # type: ignore[arg-type]
    if all(x["placement"] == o.values["placement"] for x in held):
        return {}
    shares = " · ".join(f"{percent(float(x['share']))} {x['placement']}" for x in held)  # type: ignore[arg-type]
    return {"placement": f"{PLANNER_CONTROLS['placement']['label']} (modeled: {shares})"}


# ----- measured beside the model: the tiny model on local CPU ranks -----------------------
def _measurable(v: dict[str, object]) -> bool:
    return v["model"] == "tiny" and int(v["nodes"]) * int(v["gpus"]) <= 4  # type: ignore[call-overload]


def _measure_key(v: dict[str, object]) -> tuple[object, ...]:
    return (v["model"], int(v["nodes"]) * int(v["gpus"]), v["strategy"], v["hardware"])  # type: ignore[call-overload]


def measure_job(**values: object) -> float:
    """Train the setting's plan (tiny model, at most 4 ranks) for a few steps on this machine's CPU
    processes at global batch :data:`MEASURE_BATCH` and keep it for the planner; returns the
    seconds it took (0 when already measured). **Measured.** Placements are not executed here:
    every shard sits in its process's memory."""
    v = _checked(values)
    if not _measurable(v):
        raise ValueError(f"measure_job runs the tiny model on at most 4 ranks; got model={v['model']!r}, "
                         f"nodes x devices = {int(v['nodes']) * int(v['gpus'])}")  # type: ignore[call-overload]  # fmt: skip
    key = _measure_key(v)
    if key in _MEASURED:
        return 0.0
    t0 = time.perf_counter()
    world = int(key[1])  # type: ignore[call-overload]
    config = job_model("tiny")
    plan = plan_tables(config, str(v["hardware"]), world, strategy=str(v["strategy"]),
                       batch_size=MEASURE_BATCH)  # fmt: skip
    res = train_local(config, plan, world, MEASURE_STEPS, MEASURE_BATCH, sparse_optimizer="sgd",
                      dense_optimizer="sgd", timeout_s=300.0)  # fmt: skip
    _MEASURED[key] = {"phases": res.phases, "plan": plan, "world": world, "reliability": res.reliability}
    return time.perf_counter() - t0


def _measured_rows(v: dict[str, object]) -> list[dict[str, object]]:
    m = _MEASURED.get(_measure_key(v)) if _measurable(v) else None
    if m is None:
        return []
    world = int(m["world"])
    here = local_ranks_hardware(hardware("this_machine"), world)
    r = estimate(job_model("tiny"), here, batch_size=MEASURE_BATCH, gpus=world, plan=m["plan"],
                 sparse_optimizer="sgd", dense_optimizer="sgd", implementation="recnotebooks")  # fmt: skip
    b = r.breakdown()
    rows = [{"where": f"modeled here: {world} CPU process(es)", "phase": c, "seconds_per_step": b[c],
             "source": "modeled"} for c in COMPONENTS if b[c] > 0]  # fmt: skip
    shaky = str(m.get("reliability", ""))
    rows += [{"where": f"measured here: rank 0 of {world}", "phase": k, "seconds_per_step": s,
              "source": "measured", "reliable": not shaky, "reliability": shaky}
             for k, s in m["phases"].items() if s > 0 and math.isfinite(s)]  # fmt: skip
    return rows


def _render(history: list[HistoryEntry]) -> object:
    now, trail = history[0].result.tables, [e.label for e in history]

    def labels(table: str, col: str) -> list[str]:
        return list(dict.fromkeys(str(r[col]) for r in now[table]))

    # the charts line up their plots at the widest left band: the room right of it is theirs (layout)
    room = stack_room(band_px(labels("breakdown", "setting")), band_px(trail, titled=False),
                      band_px(labels("placement", "setting")),
                      band_px(labels("levers", "setting"), titled=False) if now["levers"] else 0,
                      band_px(labels("measured", "where")) if now["measured"] else 0)  # fmt: skip
    steps = time_breakdown(now["breakdown"], by="setting", phases=list(COMPONENTS), source="modeled",
                           title="One step on the slowest rank", detail="this setting, and the nearest "
                           "feasible one when this one is impossible", width=min(480, room))  # fmt: skip
    totals = metric_bars(history_rows(history, "totals"), highlight=history[0].label, columns=3,
                         title="The whole job", source="modeled",
                         detail="one bar per setting in the trail, the current one solid",
                         total_width=band_px(trail, titled=False) + room)  # fmt: skip
    chosen = f"you chose placement {history[0].values['placement']}; the bars: the plan modeled"
    where = part_bars(now["placement"], value="gb", part="where", parts=list(TABLE_HOMES.values()),
                      colors=[PLACEMENT_COLORS[p] for p in TABLE_HOMES], text="display",
                      value_title="GB of tables (weights and optimizer state)", title="Where the tables live",
                      source="modeled", detail=chosen, width=min(480, room))  # fmt: skip
    charts = [steps, where, totals]
    if now["levers"]:
        levers = band_px(labels("levers", "setting"), titled=False)
        charts.append(metric_bars(now["levers"], title="Each lever one notch away", source="modeled",
                                  detail="speed-up of the time to train; 1.0 = no gain", rule_at=1.0,
                                  total_width=levers + room))  # fmt: skip
    if now["measured"]:
        charts.append(time_breakdown(now["measured"], by="where", title="The same plan on CPU processes here",
                                     detail=f"global batch {MEASURE_BATCH}; placements not executed",
                                     width=min(480, room)))  # fmt: skip
    return stack(*charts)


def job_planner(*, history: int = 4, **values: object) -> App:
    """The Training Job Planner app; ``values`` override the default settings."""
    controls = build_controls(PLANNER_CONTROLS, values, "the Training Job Planner")
    what = "MODELED time, cost and energy of a training job; MEASURED on local processes for the tiny model"
    return App("Training Job Planner", controls, lambda **kw: plan_job(**kw), _render, history=history,
               description=what)  # fmt: skip
