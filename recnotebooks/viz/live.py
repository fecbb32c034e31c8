"""A live training chart: loss and eval AUC redrawn in place while a Trainer runs."""

from __future__ import annotations

import time

import altair as alt

from recnotebooks.viz.charts import training_curves
from recnotebooks.viz.theme import ChartWidget, enable_offline

__all__ = ["LiveTrainingChart"]


class LiveTrainingChart:
    """Pass as a :class:`~recnotebooks.train.Trainer` callback; display it in a cell above.

    Each history record (``step``, ``loss``, and ``auc`` when evaluated) is kept; the chart
    is redrawn in place at most every ``every_s`` seconds (and on :meth:`finish`), so the
    chart never slows training down much.
    """

    def __init__(
        self, title: str = "Training (measured)", every_s: float = 0.5, detail: str | None = None
    ) -> None:
        if isinstance(every_s, bool) or not isinstance(every_s, (int, float)) or every_s < 0:
            raise ValueError(f"every_s must be a number >= 0, got {every_s!r}")
        self.title, self.every_s, self.detail = title, float(every_s), detail
        self.records: list[dict[str, float]] = []
        self.redraws = 0
        self._last = 0.0
        enable_offline()
        self.chart = ChartWidget(self._render())  # SVG, ids unique on the page

    def _render(self) -> alt.TopLevelMixin:
        return training_curves(self.records or [{"step": 0.0}], title=self.title, detail=self.detail)

    def __call__(self, record: dict[str, float]) -> None:
        self.records.append(dict(record))
        now = time.perf_counter()
        if now - self._last >= self.every_s:
            self._redraw(now)

    def finish(self) -> None:
        """Draw every record received so far."""
        self._redraw(time.perf_counter())

    def _redraw(self, now: float) -> None:
        self.chart.chart = self._render()
        self._last = now
        self.redraws += 1

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.chart)
