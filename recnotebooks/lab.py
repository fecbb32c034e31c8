"""Notebook helpers: smoke mode and exercise checks that give hints, never answers.

Each notebook ends with exercises. ``check("01.parameters", answer)`` says whether an
answer is right; when it is not, it gives the next hint for that exercise (hints get more
specific with each attempt) but never prints the expected value. ``exercises("01")`` lists
a notebook's exercises. :func:`smoke_mode` is true when ``RECNB_SMOKE=1``: notebooks then
use tiny sizes so CI can run every notebook top to bottom in seconds.
"""

from __future__ import annotations

import html
import numbers
import os
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["smoke_mode", "Exercise", "Feedback", "check", "exercises", "EXERCISES", "reset"]


def smoke_mode() -> bool:
    """True when the environment variable ``RECNB_SMOKE`` is ``1``/``true``/``yes``."""
    return os.environ.get("RECNB_SMOKE", "").strip().lower() in ("1", "true", "yes")


@dataclass
class Feedback:
    """Outcome of :func:`check`; shows as a coloured box in a notebook."""

    exercise: str
    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def _repr_html_(self) -> str:
        color, mark = ("#1e7e34", "✔") if self.passed else ("#9a6700", "✘")
        return (
            f"<div style='border-left:4px solid {color};padding:4px 10px'><b style='color:{color}'>{mark} "
            f"{html.escape(self.exercise)}</b> {html.escape(self.message)}</div>"
        )

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'NOT YET'} {self.exercise}: {self.message}"


@dataclass
class Exercise:
    """An exercise: ``checker(answer)`` returns ``(passed, feedback)``; ``hints`` escalate."""

    id: str
    title: str
    checker: Callable[[object], tuple[bool, str]]
    hints: tuple[str, ...]


EXERCISES: dict[str, Exercise] = {}
_ATTEMPTS: dict[str, int] = {}


def _register(id: str, title: str, *hints: str) -> Callable[[Callable[[object], tuple[bool, str]]], None]:
    def deco(fn: Callable[[object], tuple[bool, str]]) -> None:
        EXERCISES[id] = Exercise(id, title, fn, hints)

    return deco


def exercises(notebook: str = "") -> list[tuple[str, str]]:
    """``(id, title)`` of the exercises whose id starts with ``notebook`` (e.g. ``"01"``)."""
    return [(e.id, e.title) for e in EXERCISES.values() if e.id.startswith(notebook)]


def reset(exercise_id: str | None = None) -> None:
    """Forget attempts (all, or one exercise's), so hints start again from the first."""
    if exercise_id is None:
        _ATTEMPTS.clear()
    else:
        _ATTEMPTS.pop(exercise_id, None)


def check(exercise_id: str, answer: object) -> Feedback:
    """Check ``answer`` for ``exercise_id``; a wrong answer gets the next hint, not the answer."""
    if exercise_id not in EXERCISES:
        raise KeyError(f"exercise_id {exercise_id!r} is not an exercise; known: {sorted(EXERCISES)}")
    ex = EXERCISES[exercise_id]
    try:
        passed, feedback = ex.checker(answer)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        passed, feedback = False, f"could not check this answer ({e})."
    if passed:
        _ATTEMPTS.pop(exercise_id, None)
        return Feedback(exercise_id, True, feedback or "Right.")
    n = _ATTEMPTS[exercise_id] = _ATTEMPTS.get(exercise_id, 0) + 1
    hint = ex.hints[min(n, len(ex.hints)) - 1] if ex.hints else ""
    return Feedback(
        exercise_id, False, f"{feedback} Hint {min(n, len(ex.hints))}/{len(ex.hints)}: {hint}".strip()
    )


# ----- helpers for checkers ------------------------------------------------------------
def _number(answer: object, what: str) -> float:
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):  # NumPy and torch scalars are fine
        item = getattr(answer, "item", None)
        if not callable(item) or getattr(answer, "ndim", 1) != 0:
            raise TypeError(f"pass {what} as a number, got {type(answer).__name__}")
        answer = item()
    return float(answer)  # type: ignore[arg-type]


def _app_result(answer: object, table: str) -> list[dict[str, object]]:
    result = getattr(answer, "result", None)
    tables = getattr(result, "tables", None)
    if not isinstance(tables, dict) or table not in tables:
        raise TypeError(f"pass the app itself (the object you displayed), which must show {table!r}")
    if getattr(answer, "error", None):
        raise ValueError("the app shows an error; move it back to a setting that works")
    return tables[table]


def _phase_share(rows: list[dict[str, object]], phases: tuple[str, ...]) -> float:
    total = sum(float(r["seconds_per_step"]) for r in rows) or 1.0  # type: ignore[arg-type]
    return sum(float(r["seconds_per_step"]) for r in rows if r["phase"] in phases) / total  # type: ignore[arg-type]


# ----- notebook 00 ---------------------------------------------------------------------
@_register(
    "00.threads",
    "How many threads does PyTorch use for CPU work on this machine?",
    "`recnb doctor` prints a line that starts with 'threads'.",
    "It is `torch.get_num_threads()`; pass that number as an int.",
)
def _threads(answer: object) -> tuple[bool, str]:
    import torch

    ok = _number(answer, "the thread count") == torch.get_num_threads()
    return ok, "Right: that is how many cores torch's CPU kernels use." if ok else "Not this machine's count."


@_register(
    "00.traffic",
    "With the demo app at embedding dim 32, find a setting that reads between 1 GB and 2 GB "
    "of embedding rows per step.",
    "Bytes per step = batch size x 26 tables x pooling x (32 floats x 4 bytes + an 8-byte index).",
    "At batch 2048 one unit of pooling is about 7 MB; doubling the batch size doubles it.",
    "Pooling 80 reads about 0.6 GB at batch 2048. What does one more doubling of the batch give?",
)
def _traffic(answer: object) -> tuple[bool, str]:
    rows = _app_result(answer, "traffic")
    dim = getattr(answer, "values", {}).get("embedding_dim")
    if dim != 32:
        return False, f"Set the embedding dim to 32 first (it is {dim})."
    now = [r for r in rows if r.get("current")]
    mb = float(now[0]["MB_per_step"]) if now else 0.0  # type: ignore[arg-type]
    ok = 1000 < mb < 2000
    return ok, (f"Right: {mb:,.0f} MB per step." if ok else f"This setting reads {mb:,.0f} MB per step.")


# ----- notebook 01 ---------------------------------------------------------------------
@_register(
    "01.parameters",
    "How many parameters (weights and biases, all tables) does the 'tiny' preset have?",
    "Parameters = embedding rows x embedding dim, summed over tables, plus every MLP layer's weights "
    "and biases.",
    "A linear layer from i to o features has i*o weights and o biases; the top MLP's input width is "
    "`config.interaction_output_dim`.",
    "Compute it from `preset('tiny')`: its `tables`, `embedding_dim` and `mlp_layers('bottom'/'top')`.",
)
def _parameters(answer: object) -> tuple[bool, str]:
    from recnotebooks.config import preset

    ok = _number(answer, "the parameter count") == preset("tiny").parameters
    return ok, "Right: almost all of them are embedding rows." if ok else "That is not the count."


@_register(
    "01.interaction",
    "Width of the top MLP input: dot interaction, 8 tables, embedding dim 32, no self-interaction?",
    "The dot interaction takes the bottom MLP output and one pooled vector per table: 9 vectors of width 32.",
    "It outputs every distinct pair's dot product (not a vector with itself) and concatenates the bottom MLP "
    "output.",
    "n vectors have n*(n-1)/2 distinct pairs; add the width of the bottom MLP output.",
)
def _interaction(answer: object) -> tuple[bool, str]:
    from recnotebooks.config import architecture_config

    ok = (
        _number(answer, "the width")
        == architecture_config(num_tables=8, embedding_dim=32).interaction_output_dim
    )
    return ok, "Right: pairs grow with the square of the number of tables." if ok else "Not that width."


@_register(
    "01.embedding_bound",
    "In the Architecture Explorer, find a setting where embedding work (embedding "
    "forward and sparse optimizer) takes more than half of the measured step.",
    "Embedding work grows with the lookups per step: tables x pooling x batch size, each a row of "
    "embedding dim floats.",
    "MLP work does not grow with pooling. Raise pooling and the number of tables, keep the MLPs small.",
    "Try pooling 40+, 16+ tables and a narrow MLP (width 64), then pass the app to check().",
)
def _embedding_bound(answer: object) -> tuple[bool, str]:
    share = _phase_share(_app_result(answer, "phases"), ("embedding_forward", "sparse_optimizer"))
    ok = share > 0.5
    return ok, (
        f"Right: embeddings take {share:.0%} of the step here: an embedding-bound model (like RM1/RM2)."
        if ok
        else f"Embedding work is {share:.0%} of this step."
    )


# ----- notebook 02 ---------------------------------------------------------------------
#: The embedding-heavy starting point of exercise 02.efficient (Efficiency Explorer settings).
EX02_START = {
    "num_tables": 32,
    "rows_per_table": 10**6,
    "embedding_dim": 64,
    "pooling": 120,
    "bottom_width": 64,
    "top_width": 64,
    "batch_size": 4096,
    "hardware": "dgx_a100",
    "gpus": 1,
    "placement": "hbm",
}


@_register(
    "02.efficient",
    "Start the Efficiency Explorer at lab.EX02_START (an embedding-heavy model on one A100, "
    "about 1% FLOP/s efficiency). Reach at least 10% without changing its tables: same number of tables, "
    "rows, embedding dim and pooling, still one dgx_a100 GPU with tables in HBM.",
    "FLOP/s efficiency = useful FLOPs / (step time x peak). Embedding work adds time but almost no FLOPs.",
    "Which sliders add FLOPs per sample without touching the tables? And which GEMM shapes run well?",
    "Widen the bottom and top MLPs a lot (1024 or more); a bigger batch amortises fixed costs.",
)
def _efficient(answer: object) -> tuple[bool, str]:
    rows = _app_result(answer, "metrics")
    values = getattr(answer, "values", {})
    fixed = ("num_tables", "rows_per_table", "embedding_dim", "pooling", "hardware", "gpus", "placement")
    changed = [k for k in fixed if values.get(k) != EX02_START[k]]
    if changed:
        return False, f"Keep these as in lab.EX02_START: {changed}."
    eff = next(float(r["value"]) for r in rows if r["metric"] == "FLOP/s efficiency")  # type: ignore[arg-type]
    ok = eff >= 0.10
    return ok, (
        f"Right: {eff:.1%}. The same tables, but now the GPU has dense work to do: MLP-heavy models use "
        "GPUs well, embedding-heavy ones do not."
        if ok
        else f"FLOP/s efficiency is {eff:.1%} here."
    )


@_register(
    "02.bound",
    "Which component bounds a training step of the rm2 preset on one dgx_a100 GPU at batch 4096 "
    "(tables in HBM)? Answer with its name, e.g. 'top_mlp'.",
    "Use recnotebooks.perf.estimate(preset('rm2'), 'dgx_a100', batch_size=4096) and look at .breakdown().",
    "rm2 has 32 tables with 120 lookups each per sample: which components scale with lookups?",
    "It is one of embedding_forward / embedding_backward / overhead; compare their seconds.",
)
def _bound(answer: object) -> tuple[bool, str]:
    from recnotebooks.config import preset
    from recnotebooks.perf.cost import COMPONENTS, estimate

    if not isinstance(answer, str) or answer not in COMPONENTS:
        raise ValueError(f"answer with one of {list(COMPONENTS)}")
    b = estimate(preset("rm2"), "dgx_a100", batch_size=4096).breakdown()
    ok = answer == max(b, key=b.get)
    return ok, "Right: embedding-heavy models are bound by row traffic, not FLOPs." if ok else "Not that one."


# ----- notebook 05 ---------------------------------------------------------------------
@_register(
    "05.per_joule",
    "Which server gives the most samples per joule for rm3 (compare_servers at batch 8192)?",
    "recnotebooks.perf.compare_servers(preset('rm3')) returns a row per server with samples_per_joule.",
    "Power counts every device of the node plus the host; throughput is per node.",
    "Sort the rows by samples_per_joule.",
)
def _per_joule(answer: object) -> tuple[bool, str]:
    from recnotebooks.config import preset
    from recnotebooks.perf.explore import compare_servers

    rows, _ = compare_servers(preset("rm3"))
    names = [str(r["server"]) for r in rows]
    if answer not in names:
        raise ValueError(f"answer with one of {names}")
    best = max(rows, key=lambda r: float(r["samples_per_joule"]))["server"]  # type: ignore[arg-type]
    return answer == best, "Right." if answer == best else "Another server does more work per joule."


@_register(
    "05.where",
    "A production-scale model: mlperf_v1 with 10x the rows per table (lab.production_model()). "
    "Where do its tables live on one Big Basin node? Answer 'hbm', 'cache', 'remote' or a mix like "
    "'hbm+cache'.",
    "Compare the model's table bytes with 8 x 16 GB of HBM and Big Basin's host DRAM.",
    "recnotebooks.perf.best_placement(config, hardware('big_basin'), 8, 8192) tries HBM, a cache in "
    "front of host DRAM, host DRAM and parameter servers, and keeps the fastest that fits.",
    "Tables need weights plus optimizer state; host DRAM must hold all of them for a cache.",
)
def _where(answer: object) -> tuple[bool, str]:
    from recnotebooks.perf.explore import best_placement
    from recnotebooks.perf.hardware import hardware

    if not isinstance(answer, str) or not set(answer.split("+")) <= {"hbm", "cache", "remote"}:
        raise ValueError("answer with 'hbm', 'cache', 'remote' or a mix such as 'hbm+cache'")
    place, _ = best_placement(production_model(), hardware("big_basin"), 8, 8192)
    ok = answer == place
    return ok, (
        "Right: Big Basin's small host memory sends big tables across the network, which is what Zion's "
        "terabytes of DRAM were built to avoid."
        if ok
        else "Not there."
    )


@_register(
    "05.outgrow",
    "In the Server Design Explorer with model rm2, raise 'table rows x': at which setting do "
    "Big Basin's tables first stop fitting in its HBM? (a number from the slider, e.g. 3)",
    "Watch the placement in brackets next to big_basin in the step-time chart.",
    "Big Basin has 8 x 16 GB of HBM; rm2's tables take about 4 GB at 1x, plus optimizer state and caches.",
    "recnotebooks.viz.servers.explore_servers(model='rm2', rows_scale=s) gives each server's placement.",
)
def _outgrow(answer: object) -> tuple[bool, str]:
    from recnotebooks.viz.controls import option_values
    from recnotebooks.viz.servers import SERVER_CONTROLS, explore_servers

    scales = option_values(SERVER_CONTROLS["rows_scale"])
    answer = _number(answer, "the slider's setting")
    if answer not in scales:
        raise ValueError(f"answer with one of the slider's values {scales}")

    def placement(scale: object) -> object:
        rows = explore_servers(model="rm2", rows_scale=scale).tables["throughput"]  # type: ignore[arg-type]
        return next(r["placement"] for r in rows if r["metric"] == "big_basin")

    first = next((s for s in scales if placement(s) != "hbm"), None)
    if first is None:
        raise RuntimeError("rm2 fits Big Basin's HBM at every slider setting: this exercise needs updating")
    ok = answer == first
    return ok, (
        "Right: from here Big Basin must keep rows in host DRAM or on parameter servers, while Zion's "
        "larger memory keeps them close."
        if ok
        else "Not that setting."
    )


def production_model() -> object:
    """mlperf_v1 with 10x the rows per table (about 1 TB of fp32 tables): production scale."""
    from recnotebooks.config import preset

    return preset("mlperf_v1").with_rows_scale(10)


# ----- notebook 03 ---------------------------------------------------------------------
#: Exercise 03.size: a table of EX03_ROWS rows, dim 64, fp32 plus row-wise Adagrad's 4 bytes per row,
#: whose cache gets EX03_BUDGET bytes of HBM (Zipf exponent 1.05).
EX03_ROWS, EX03_BUDGET, EX03_ROW_BYTES = 10_000_000, 256e6, 64 * 4 + 4


@_register(
    "03.size",
    "A table of 10M rows (dim 64, fp32, plus row-wise Adagrad's 4 bytes per row) gets 256 MB of HBM for its "
    "cache. How many rows fit, and what hit rate does an LRU cache of that size serve at Zipf(1.05)? "
    "Answer (rows, hit_rate).",
    "A cached row costs its weights and its optimizer state: 64 x 4 + 4 bytes.",
    "Rows = budget // bytes per row. The hit rate of an LRU cache of that many rows is modeled by "
    "recnotebooks.perf.access.hit_rate(rows, n_rows, zipf_exponent, policy='lru').",
    "hit_rate(256e6 // 260, 10_000_000, 1.05, policy='lru'): pass both numbers as a tuple.",
)
def _size(answer: object) -> tuple[bool, str]:
    from recnotebooks.perf.access import hit_rate

    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise TypeError("answer with a pair (rows, hit_rate)")
    rows, hit = _number(answer[0], "the rows"), _number(answer[1], "the hit rate")
    want = EX03_BUDGET // EX03_ROW_BYTES
    if abs(rows - want) > 0.01 * want:
        return False, f"{rows:,.0f} rows is not what 256 MB holds."
    ref = hit_rate(want, EX03_ROWS, 1.05, policy="lru")
    ok = abs(hit - ref) <= 0.02
    return ok, (
        f"Right: {want:,.0f} rows ({want / EX03_ROWS:.1%} of the table) serve about {ref:.0%} of lookups."
        if ok
        else f"The rows are right; a hit rate of {hit:.3f} is not what LRU serves there."
    )


@_register(
    "03.target",
    "The fewest rows an LRU cache of that 10M-row table needs to serve 90% of lookups at Zipf(1.05) "
    "(within 5%)?",
    "The hit rate grows with the cache size; find the size where it reaches 0.9.",
    "recnotebooks.perf.access.cache_rows_for_hit_rate inverts hit_rate; it takes a policy too.",
    "cache_rows_for_hit_rate(0.9, 10_000_000, 1.05, policy='lru').",
)
def _target(answer: object) -> tuple[bool, str]:
    from recnotebooks.perf.access import cache_rows_for_hit_rate

    rows = _number(answer, "the rows")
    want = cache_rows_for_hit_rate(0.9, EX03_ROWS, 1.05, policy="lru")
    ok = abs(rows - want) <= 0.05 * want
    return ok, (
        f"Right: about {want:,.0f} rows, {want * EX03_ROW_BYTES / 1e6:,.0f} MB of HBM."
        if ok
        else ("Too few: that cache serves less than 90%." if rows < want else "More than needed.")
    )


@_register(
    "03.policy",
    "At weak skew (Zipf alpha 0.6) and a cache of 1% of 100k rows, which policy of the Cache Explorer "
    "('lru', 'lfu', 'static', 'setassoc') serves the most lookups?",
    "Set the Cache Explorer to skew 0.6 and cache size 1.0%, then read the curves at the ringed size.",
    "With weak skew recency says little about the future; what a row's count says stays true longer.",
    "Compare LFU and the static hot set with LRU in the explorer's chart at 1.0%.",
)
def _policy(answer: object) -> tuple[bool, str]:
    from recnotebooks.viz.cache import POLICY_NAMES, cache_capacity, hit_rate_curves

    policies = ["lru", "lfu", "static", "setassoc"]
    if answer not in policies:
        raise ValueError(f"answer with one of {policies}")
    curves = hit_rate_curves(100_000, 0.6)
    hits = {
        p: next(float(r["hit_rate"]) for r in curves  # type: ignore[arg-type]
                if r["policy"] == POLICY_NAMES[p] and r["capacity"] == cache_capacity(0.01, 100_000, p, 32))
        for p in policies
    }  # fmt: skip
    best = max(hits, key=hits.get)  # type: ignore[arg-type]
    ok = answer == best
    return ok, (
        f"Right: {hits[best]:.1%} of lookups, against {hits['lru']:.1%} for LRU."
        if ok
        else f"{answer} serves {hits[str(answer)]:.1%}; another policy serves more."
    )


@_register(
    "03.double",
    "An LRU cache of 2% of 100k rows at Zipf(1.05) misses some share of lookups. Predict its miss ratio at "
    "twice the size (4%) within 0.01, then check it on the miss-ratio curve.",
    "A miss-ratio curve gives the miss ratio at every cache size; LRU's comes from one pass of stack "
    "distances.",
    "recnotebooks.cache.simulate.lru_mrc(trace) gives it; the explorer's trace is "
    "recnotebooks.viz.cache.cache_trace(100_000, 1.05).",
    "lru_mrc(cache_trace(100_000, 1.05)).at(4_000).",
)
def _double(answer: object) -> tuple[bool, str]:
    from recnotebooks.cache.simulate import lru_mrc
    from recnotebooks.viz.cache import cache_trace

    miss = _number(answer, "the miss ratio")
    curve = lru_mrc(cache_trace(100_000, 1.05), num_rows=100_000)
    want, half = curve.at(4_000), curve.at(2_000)
    ok = abs(miss - want) <= 0.01
    return ok, (
        f"Right: {want:.3f}, down from {half:.3f}: doubling the cache took {1 - want / half:.0%} of the "
        "misses away, not half of them."
        if ok
        else "Not that ratio."
    )
