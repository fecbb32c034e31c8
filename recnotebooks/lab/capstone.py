"""Exercises of notebook 06 (the capstone: plan a training job for a deadline and a budget).

Answers to the planning exercises are the Training Job Planner itself (the app, set to the
answer) or a dict of its settings; the checker models the setting again with the exercise's
job (model, data, deadline, budget) and compares it with the best one of a small search
(:data:`SEARCH`), computed now, so the key follows the model.
"""

from __future__ import annotations

import itertools
import re

from recnotebooks.config import preset
from recnotebooks.perf import estimate, plan_tables
from recnotebooks.perf.cost import COMPONENTS
from recnotebooks.perf.job import CRITEO_TERABYTE_SAMPLES
from recnotebooks.perf.job_planner import Outcome, evaluate

from .core import exercise, number, settled

#: The job of exercises 06.cheapest and 06.fastest: production-scale tables (~1 TB), 3 epochs of
#: Criteo Terabyte.
JOB = {"model": "mlperf_v1_x10", "samples": CRITEO_TERABYTE_SAMPLES, "epochs": 3}
CHEAPEST_DEADLINE_H = 1
FASTEST_BUDGET_USD = 30
#: The settings the answer keys search (a learner may find a better one elsewhere: it passes too).
SEARCH = {"hardware": ("big_basin", "zion", "dgx_a100", "dgx_h100", "h200_node"), "nodes": (1, 2),
          "gpus": (1, 2, 4, 8), "dtype": ("fp32", "amp_bf16")}  # fmt: skip
#: 06.largest: mlperf_v1 with its rows scaled on one DGX A100 node, at this throughput or more.
LARGEST_SCALES = (1, 2, 3, 5, 10, 20, 30, 50)
#: ... at this share of the 1x model's throughput or more, every table still in HBM.
LARGEST_SHARE = 0.5
#: 06.bound: the planner's defaults with this many nodes.
BOUND_NODES = 4
_TOLERANCE = 1.02


def _settings(answer: object) -> dict[str, object]:
    values = answer if isinstance(answer, dict) else getattr(settled(answer), "values", None)
    if getattr(answer, "error", None):
        raise ValueError("the app shows an error; move it back to a setting that works")
    if not isinstance(values, dict):
        raise TypeError("pass the Training Job Planner app (set to your answer) or a dict of its settings")
    return dict(values)


def _job(answer: object, deadline_h: float, budget_usd: float) -> Outcome:

    v = _settings(answer)
    wrong = {k: v[k] for k in JOB if k in v and v[k] != JOB[k]}
    if wrong:
        raise ValueError(f"this exercise's job is {JOB}; your setting has {wrong}")
    return evaluate(**{**v, **JOB, "deadline_h": deadline_h, "budget_usd": budget_usd})


def _search(deadline_h: float, budget_usd: float) -> list[Outcome]:

    keys = list(SEARCH)
    found = []
    for combo in itertools.product(*SEARCH.values()):
        o = evaluate(
            **JOB, **dict(zip(keys, combo, strict=True)), deadline_h=deadline_h, budget_usd=budget_usd
        )
        if o.feasible:
            found.append(o)
    if not found:
        raise RuntimeError("no setting of the search is feasible: this exercise needs updating")
    return found


def _cheapest_key() -> dict[str, object]:
    best = min(_search(CHEAPEST_DEADLINE_H, 100_000), key=lambda o: o.job.cost_usd)  # type: ignore[union-attr]
    return dict(best.values)


def _fastest_key() -> dict[str, object]:
    best = min(_search(168, FASTEST_BUDGET_USD), key=lambda o: o.job.hours)  # type: ignore[union-attr]
    return dict(best.values)


@exercise(
    "06.cheapest",
    f"""
    In the Training Job Planner: model {JOB["model"]}, Criteo Terabyte, {JOB["epochs"]} epochs. Find the
    cheapest setting that fits and ends within {CHEAPEST_DEADLINE_H} h; pass the app (or a dict of its
    settings).

    Start from one node of a modern server and see what the deadline allows; then take devices away.

    Precision is a lever: AMP runs the MLPs' GEMMs on tensor cores (the tables stay fp32).

    A cheaper device-hour is not a cheaper job when it takes many more hours; compare the cost bar.
    """,
    answer=_cheapest_key,
)
def _cheapest(answer: object) -> tuple[bool, str]:
    o = _job(answer, CHEAPEST_DEADLINE_H, 100_000)
    if not o.feasible:
        return False, "This setting is not feasible: " + "; ".join(o.why_not()) + "."
    key = _job(_cheapest_key(), CHEAPEST_DEADLINE_H, 100_000)
    cost, best = o.job.cost_usd, key.job.cost_usd  # type: ignore[union-attr]
    if cost <= best * _TOLERANCE + 0.01:
        return True, f"Right: USD {cost:,.2f} meets the deadline."
    return False, f"It meets the deadline but costs USD {cost:,.2f}; a cheaper setting does too."


@exercise(
    "06.fastest",
    f"""
    Same job as 06.cheapest. Within a budget of USD {FASTEST_BUDGET_USD} (and any deadline), find the setting
    that trains fastest; pass the app (or a dict of settings).

    More devices finish sooner but each device-hour costs; watch both the time and the cost bars.

    The lever chart shows what one notch of each control buys; follow it while the budget holds.

    The newest GPUs are the most expensive per hour, yet can be the fastest within a budget.
    """,
    answer=_fastest_key,
)
def _fastest(answer: object) -> tuple[bool, str]:
    o = _job(answer, 168, FASTEST_BUDGET_USD)
    if not o.feasible:
        return False, "This setting is not feasible: " + "; ".join(o.why_not()) + "."
    key = _job(_fastest_key(), 168, FASTEST_BUDGET_USD)
    hours, best = o.job.hours, key.job.hours  # type: ignore[union-attr]
    if hours <= best * _TOLERANCE:
        return True, f"Right: {hours * 60:,.1f} minutes within the budget."
    return False, f"Within budget, but {hours * 60:,.1f} minutes; a faster setting stays within it too."


def _largest_key() -> int:

    ok, target = [], None
    for s in LARGEST_SCALES:
        cfg = preset("mlperf_v1").with_rows_scale(s)
        plan = plan_tables(cfg, "dgx_a100", 8, strategy="cost", batch_size=65536)
        r = estimate(cfg, "dgx_a100", batch_size=65536, gpus=8, plan=plan)
        target = LARGEST_SHARE * r.throughput if target is None else target
        if r.fits and all(sh.placement == "hbm" for sh in plan.shards) and r.throughput >= target:
            ok.append(s)
    if not ok:
        raise RuntimeError("no table size reaches the target throughput: this exercise needs updating")
    return max(ok)


@exercise(
    "06.largest",
    f"""
    One DGX A100 node (8 GPUs, fp32, global batch 65536, the cost planner): what is the largest scale of
    mlperf_v1's table rows, of {list(LARGEST_SCALES)}, whose tables the planner still keeps all in HBM,
    training at >= {LARGEST_SHARE:.0%} of the 1x model's samples/s?

    preset('mlperf_v1').with_rows_scale(s) scales every table; plan_tables(cfg, 'dgx_a100', 8) plans it.

    recnotebooks.perf.estimate(cfg, 'dgx_a100', batch_size=65536, gpus=8, plan=plan).throughput

    Once tables leave HBM (placement cache, host or remote) every lookup gets slower.
    """,
    answer=_largest_key,
)
def _largest(answer: object) -> tuple[bool, str]:
    s = number(answer, "the rows scale")
    if s not in LARGEST_SCALES:
        raise ValueError(f"answer with one of {list(LARGEST_SCALES)}")
    key = _largest_key()
    if s == key:
        return True, "Right: past this size the tables no longer all fit in HBM at full speed."
    return False, (
        "Too large: at that size it misses the target." if s > key else "A larger size passes too."
    )


def _bound_setting() -> tuple[str, float]:

    b = evaluate(nodes=BOUND_NODES).result.breakdown()  # type: ignore[union-attr]
    top = max(b, key=lambda k: b[k])
    return top, b[top] / sum(b.values())


def _bound_key() -> str:
    top, share = _bound_setting()
    return f"{top} bounds the step: it takes {share:.0%} of the slowest rank's step."


def _names(component: str) -> tuple[str, ...]:
    words = component.replace("_", " ")
    return (component, words, words.replace(" ", "-"))


@exercise(
    "06.bound",
    f"""
    The planner's defaults with nodes={BOUND_NODES}: in one sentence, which component bounds the step on the
    slowest rank, and what share of that step it takes (say it as a percentage)?

    The first chart is the step on the slowest rank; its longest segment is the bound.

    Name the component as the chart's legend does (e.g. 'top_mlp', 'embedding_backward').

    The note under the controls says 'bound by ...' with its share.
    """,
    answer=_bound_key,
)
def _bound(answer: object) -> tuple[bool, str]:
    if not isinstance(answer, str) or not answer.strip():
        raise TypeError("answer with a sentence (a string)")

    text = answer.lower()
    top, share = _bound_setting()
    named = [c for c in COMPONENTS if any(n in text for n in _names(c))]
    if top not in named:
        return False, "Your sentence does not name the component that bounds the step."
    if len(named) > 1:
        return False, f"Your sentence names {len(named)} components; say which one bounds the step."
    pct = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)\s*%", text)]
    if not pct:
        return False, "Right component; now say how much of the step it takes, as a percentage."
    if not any(abs(p - share * 100) <= 5 for p in pct):
        return False, "Right component, but the model gives it another share of the step (within 5 points)."
    return True, "Right: the numbers agree with the model."
