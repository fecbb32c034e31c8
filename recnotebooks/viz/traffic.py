"""A first app (notebook 00): embedding traffic per training step against pooling.

Small on purpose: it shows how every app here works (sliders → one pure function →
chart updated in place, with a trail of earlier settings) on a number that matters in
the seed paper — how many bytes of embedding rows one step moves.
"""

from __future__ import annotations

from recnotebooks.viz.app import App, HistoryEntry, Result, history_rows
from recnotebooks.viz.charts import metric_lines

__all__ = ["POOLINGS", "TRAFFIC_CONTROLS", "lookup_traffic", "lookup_traffic_app"]

POOLINGS = (1, 2, 5, 10, 20, 40, 80, 120)
BATCH_SIZES = tuple(2**i for i in range(6, 17))
DIMS = (8, 16, 32, 64, 128, 256)
TRAFFIC_CONTROLS: dict[str, dict[str, object]] = {
    "pooling": {"options": list(POOLINGS), "value": 1, "label": "pooling factor"},
    "batch_size": {"options": list(BATCH_SIZES), "value": 2048, "label": "batch size"},
    "embedding_dim": {"options": list(DIMS), "value": 64, "label": "embedding dim"},
}


def lookup_traffic(
    *, pooling: int = 1, batch_size: int = 2048, embedding_dim: int = 64, num_tables: int = 26
) -> Result:
    """Megabytes of embedding rows (fp32) plus int64 indices read in one step's forward,
    for each pooling factor in :data:`POOLINGS`; the row at ``pooling`` is ``current``."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {list(POOLINGS)}, got {pooling!r}")
    for name, v in (
        ("pooling", pooling),
        ("batch_size", batch_size),
        ("embedding_dim", embedding_dim),
        ("num_tables", num_tables),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    rows = []
    for p in POOLINGS:
        lookups = batch_size * num_tables * p
        mb = lookups * (embedding_dim * 4 + 8) / 1e6
        rows.append(
            {
                "pooling": p,
                "MB_per_step": mb,
                "lookups_per_step": lookups,
                "current": p == pooling,
                "source": "analytic",
            }
        )
    note = (
        f"batch {batch_size} x {num_tables} tables x pooling {pooling} = "
        f"{batch_size * num_tables * pooling:,} rows of {embedding_dim} floats per step"
    )
    return Result(tables={"traffic": rows}, notes=[note])


def _render(history: list[HistoryEntry]) -> object:
    return metric_lines(
        history_rows(history, "traffic"),
        x="pooling",
        y="MB_per_step",
        color="setting",
        highlight=history[0].label,
        x_log=True,
        y_log=True,
        title="Embedding traffic per step (forward)",
        source="analytic",
        y_format=".3~s",
    ).properties(width=460, height=260)


def lookup_traffic_app(
    *, pooling: int = 1, batch_size: int = 2048, embedding_dim: int = 64, history: int = 4
) -> App:
    """Sliders for pooling, batch size and embedding dim → traffic per step, with a trail."""
    return App.from_specs(
        "Embedding traffic",
        TRAFFIC_CONTROLS,
        {"pooling": pooling, "batch_size": batch_size, "embedding_dim": embedding_dim},
        lookup_traffic,
        _render,
        history=history,
        description="bytes computed from the sizes (no timing): 26 tables, fp32 rows, int64 indices",
        what="the embedding traffic app",
    )
