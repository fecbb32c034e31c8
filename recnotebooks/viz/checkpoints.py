"""Notebook 04's checkpoint chart: the share of a job lost against the interval between
checkpoints (:func:`recnotebooks.perf.checkpointing.interval_sweep`), **modeled**."""

from __future__ import annotations

from recnotebooks.viz.charts import metric_lines

__all__ = ["checkpoint_interval_chart"]


def checkpoint_interval_chart(rows: list[dict[str, object]], detail: str | None = None) -> object:
    """One line per storage bandwidth: the share of the wall time lost against the interval
    between checkpoints (log hours), Daly's interval ringed."""
    return metric_lines(rows, x="interval_h", y="lost_share", color="storage", x_log=True, y_log=True,
                        y_format=".1%", title="Time lost to failures and checkpoints", source="modeled",
                        detail=detail, x_title="hours of training between checkpoints", x_format="~g",
                        y_title="share of the job lost")  # fmt: skip
