"""Exercises of notebook 02 (GPU efficiency)."""

from __future__ import annotations

from recnotebooks.config import preset
from recnotebooks.perf.cost import COMPONENTS, estimate

from .core import AppSetting, app_result, exercise

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


@exercise(
    "02.efficient",
    """
    Start the Efficiency Explorer at lab.EX02_START (an embedding-heavy model on one A100, about 1% FLOP/s
    efficiency). Reach at least 10% without changing its tables: same number of tables, rows, embedding dim
    and pooling, still one dgx_a100 GPU with tables in HBM.

    FLOP/s efficiency = useful FLOPs / (step time x peak). Embedding work adds time but almost no FLOPs.

    Which sliders add FLOPs per sample without touching the tables? And which GEMM shapes run well?

    Widen the bottom and top MLPs a lot (1024 or more); a bigger batch amortises fixed costs.
    """,
    answer=lambda: AppSetting(
        "recnotebooks.viz.efficiency:efficiency_explorer",
        {**EX02_START, "bottom_width": 4096, "top_width": 4096, "batch_size": 65536},
    ),
)
def _efficient(answer: object) -> tuple[bool, str]:
    rows = app_result(answer, "metrics")
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


@exercise(
    "02.bound",
    """
    Which component bounds a training step of the rm2 preset on one dgx_a100 GPU at batch 4096 (tables in
    HBM)? Answer with its name, e.g. 'top_mlp'.

    Use recnotebooks.perf.estimate(preset('rm2'), 'dgx_a100', batch_size=4096) and look at .breakdown().

    rm2 has 32 tables with 120 lookups each per sample: which components scale with lookups?
    """,
    lambda given: _last_bound_hint(given),
    answer=lambda: _bound_key(),
)
def _bound(answer: object) -> tuple[bool, str]:

    if not isinstance(answer, str) or answer not in COMPONENTS:
        raise ValueError(f"answer with one of {list(COMPONENTS)}")
    ok = answer == _bound_key()
    return ok, "Right: embedding-heavy models are bound by row traffic, not FLOPs." if ok else "Not that one."


#: The components 02.bound's last hint narrows the answer to (the answer among them).
BOUND_CANDIDATES = ("embedding_forward", "embedding_backward", "overhead")


def _last_bound_hint(given: object) -> str:
    """02.bound's last hint: the candidates, less the one just given (a hint never names back the
    answer that was just judged wrong)."""
    left = [c for c in BOUND_CANDIDATES if c != given]
    return f"It is one of {' / '.join(left)}; compare their seconds."


def _bound_key() -> str:

    b = estimate(preset("rm2"), "dgx_a100", batch_size=4096).breakdown()
    return max(b, key=b.get)
