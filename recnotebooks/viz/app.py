"""The app pattern every notebook app follows (:class:`App`).

    widgets ──► compute(values) ──► Result (tidy tables + notes) ──► render(history) ──► chart

* ``compute`` is one **pure function** of the widget values; it returns a :class:`Result`
  (tidy rows per table, plus notes for the learner, and labels for controls whose choice the
  result changed, shown while it is). It knows nothing about widgets, so
  notebooks, tests and benchmarks call it directly too.
* ``render`` draws the **history trail**: the last few settings (newest first, labelled
  ``now``, ``-1``, ``-2``... with the whole change, "-1: num_tables 16→8, pooling 20→40",
  drawn one change per line) so a learner sees how the last change shifted the numbers.
* The chart is a :class:`~recnotebooks.viz.theme.ChartWidget` (an :class:`altair.JupyterChart`
  drawn as SVG with ids unique on the page) **updated in place**: its Vega-Lite spec is
  replaced (the widget and its place in the notebook stay); ``app.altair_chart`` is the
  Altair chart it shows.
* Widget changes are **debounced** (``debounce_s``) when a kernel event loop is running;
  without one (plain Python, tests) an update runs at once.
* An exception from ``compute`` or ``render`` (a bad combination, a setting that does not
  fit in memory) is shown **inside the app** as a message; the last good chart stays.
* Every app is **drivable from Python**: ``app.set(pooling=20)`` checks the values with
  :mod:`recnotebooks.checks` (no slider clamps 2.5 or takes ``True`` as 1), sets them and
  updates synchronously, returning the new :class:`Result` (or raising :class:`AppError`
  with the message the learner would see).
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import altair as alt
import ipywidgets as W
from altair.utils.schemapi import debug_mode

from recnotebooks.viz.charts import metric_bars, time_breakdown
from recnotebooks.viz.controls import build_controls, check_control_value, control_width
from recnotebooks.viz.theme import NO_MATH, ChartWidget, enable_offline
from recnotebooks.viz.tidy import Rows, band_px

__all__ = ["App", "AppError", "HistoryEntry", "Result", "controls_grid", "history_rows", "trail_bars",
           "trail_steps"]  # fmt: skip


class AppError(RuntimeError):
    """Raised by :meth:`App.set` when the new setting could not be shown (message inside)."""


@dataclass
class Result:
    """Output of an app's pure function: tidy tables by name, notes for the learner and control labels."""

    tables: dict[str, list[dict[str, object]]]
    notes: list[str] = field(default_factory=list)
    #: labels to show on controls (by parameter name) while this result is shown, e.g. what a
    #: choice became once modeled ("placement (modeled: 2% hbm · 98% remote)"); a control not
    #: named keeps its own label
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class HistoryEntry:
    """One setting the app showed: its widget values, result and a short label."""

    label: str
    values: dict[str, object]
    result: Result
    change: str


def history_rows(history: Sequence[HistoryEntry], table: str) -> list[dict[str, object]]:
    """Rows of ``table`` from every history entry, with a ``setting`` column (its label)."""
    return [
        {**r, "setting": e.label, "change": e.change} for e in history for r in e.result.tables.get(table, [])
    ]


def trail_bars(
    history: Sequence[HistoryEntry],
    room: int,
    *,
    title: str,
    table: str = "metrics",
    rows: Rows | None = None,
    source: str | None = None,
    detail: str | None = None,
    columns: int = 3,
    shared_scale: bool | str = False,
    rule_at: float | None = None,
) -> alt.FacetChart:
    """The trail's settings side by side: :func:`~recnotebooks.viz.charts.metric_bars` of every
    entry's ``table`` (or ``rows``), a bar per setting, the current one solid, the panels laid out
    in the ``room`` right of the stack's widest left band
    (:func:`~recnotebooks.viz.tidy.stack_room`) beside the trail's labels."""
    return metric_bars(
        history_rows(history, table) if rows is None else rows,
        highlight=history[0].label,
        title=title,
        source=source,
        detail=detail,
        columns=columns,
        shared_scale=shared_scale,
        rule_at=rule_at,
        total_width=band_px([e.label for e in history], titled=False) + room,
    )


def trail_steps(
    history: Sequence[HistoryEntry],
    table: str,
    *,
    phases: Sequence[str],
    title: str,
    source: str,
    detail: str,
    width: int,
) -> alt.Chart:
    """The trail's steps by phase: :func:`~recnotebooks.viz.charts.time_breakdown` of every entry's
    ``table``, a bar per setting, the current one solid, ``width`` px wide."""
    return time_breakdown(
        history_rows(history, table),
        highlight=history[0].label,
        phases=list(phases),
        title=title,
        source=source,
        detail=detail,
        width=width,
    )


def _datasets(spec: object) -> list[list[dict[str, object]]]:
    found: list[list[dict[str, object]]] = []
    if isinstance(spec, dict):
        for k, v in spec.items():
            if k == "values" and isinstance(v, list):
                found.append(v)
            elif k == "values" and isinstance(v, str):  # inline JSON text (see charts._with_data)
                found.append(json.loads(v))
            elif k == "datasets" and isinstance(v, dict):
                found.extend(list(x) for x in v.values())
            else:
                found.extend(_datasets(v))
    elif isinstance(spec, list):
        for v in spec:
            found.extend(_datasets(v))
    return found


def _relabel(trail: list[HistoryEntry]) -> list[HistoryEntry]:
    """Label each entry with its place in the trail and its whole change ("-1: a 1→2, b 3→4");
    the chart factories draw such a label one change per line, so nothing is cut off."""
    return [
        dataclasses.replace(e, label=f"{'now' if i == 0 else f'-{i}'}: {e.change}")
        for i, e in enumerate(trail)
    ]


def shown_value(widget: W.Widget | None, value: object) -> str:
    """``value`` as the control ``widget`` shows it: a number by its option's label ("1M" for
    1,000,000 on a slider labelled so), else as the slider's readout (``131072``); a name as it is.
    A label with ", " is not used: a trail label is drawn one change per line, split there."""
    options = getattr(widget, "options", None)
    if options and isinstance(value, int | float) and not isinstance(value, bool):
        for o in options:
            if isinstance(o, tuple) and o[1] == value and ", " not in str(o[0]):
                return str(o[0])
    return str(value)


def _describe_change(
    old: Mapping[str, object] | None,
    new: Mapping[str, object],
    controls: Mapping[str, W.Widget] | None = None,
) -> str:
    """The settings ``new`` changes from ``old``, each value as its control shows it
    (:func:`shown_value`): "rows_per_table 1M→10M, pooling 1→20"."""
    if old is None:
        return "start"
    controls = controls or {}
    diff = [
        f"{k} {shown_value(controls.get(k), old.get(k))}→{shown_value(controls.get(k), v)}"
        for k, v in new.items()
        if old.get(k) != v
    ]
    return ", ".join(diff) if diff else "same"


#: px between two columns of an app's controls
CONTROL_GAP_PX = 16


def controls_grid(widgets: Sequence[W.Widget]) -> W.GridBox:
    """``widgets`` in a grid of equal cells that reflows to the width there is: as many columns
    as cells of the widest control's :func:`~recnotebooks.viz.controls.control_width` fit (one
    on a narrow screen, two in a laptop's notebook, three or more in a wide one), each widget as
    wide as its cell, so rows line up and a slider's track grows with the room it has."""
    cell = max((control_width(w) for w in widgets), default=200)
    for w in widgets:
        w.layout.width = "auto"  # stretched to its cell (a widget's own default is a fixed 300 px)
    return W.GridBox(
        list(widgets),
        layout=W.Layout(
            grid_template_columns=f"repeat(auto-fill, minmax(min({cell}px, 100%), 1fr))",
            grid_gap=f"2px {CONTROL_GAP_PX}px",
            width="100%",
        ),
    )


class App:
    """A widget app: controls → pure ``compute`` → ``render`` of the history → chart.

    Args:
        title: heading shown above the controls.
        controls: widgets by parameter name; their ``value`` s are ``compute``'s kwargs.
        compute: pure function ``compute(**values) -> Result``.
        render: ``render(history) -> altair chart``; ``history[0]`` is the current setting.
        history: how many settings the trail keeps (including the current one).
        debounce_s: wait this long after the last widget change before recomputing.
        description: one line under the title (what the app shows, measured or modeled).
    """

    def __init__(
        self,
        title: str,
        controls: Mapping[str, W.ValueWidget],
        compute: Callable[..., Result],
        render: Callable[[list[HistoryEntry]], alt.TopLevelMixin],
        *,
        history: int = 4,
        debounce_s: float = 0.2,
        description: str = "",
    ) -> None:
        if not isinstance(history, int) or isinstance(history, bool) or history < 1:
            raise ValueError(f"history must be an int >= 1, got {history!r}")
        if not isinstance(debounce_s, (int, float)) or isinstance(debounce_s, bool) or debounce_s < 0:
            raise ValueError(f"debounce_s must be a number >= 0, got {debounce_s!r}")
        self.title, self.controls, self.compute, self.render = title, dict(controls), compute, render
        self._descriptions = {k: w.description for k, w in self.controls.items()}
        self.max_history, self.debounce_s = history, float(debounce_s)
        self.history: list[HistoryEntry] = []
        self.error: str | None = None
        self.updates = 0
        self.last_update_s = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._driving = False
        result = self.compute(**self.values)  # a bad initial setting raises here, at the entry point
        self._push(result)
        enable_offline()  # never a CDN: the Vega bundle comes from vl-convert
        self.altair_chart: alt.TopLevelMixin = self.render(self.history)
        self.chart = ChartWidget(self.altair_chart)  # SVG, ids unique on the page
        self.message = W.HTML(self._notes_html(result.notes))
        self._show_labels(result)
        head = W.HTML(
            f"<b style='font-size:1.1em'>{html.escape(title)}</b>"
            + (f"<div style='color:#555'>{html.escape(description)}</div>" if description else "")
        )
        self.view = W.VBox([head, controls_grid(list(self.controls.values())), self.message, self.chart])
        self.view.add_class("recnb-app")
        for w in self.controls.values():
            w.observe(self._on_change, names="value")

    # ----- state ----------------------------------------------------------------------
    @classmethod
    def from_specs(
        cls,
        title: str,
        specs: Mapping[str, Mapping[str, object]],
        values: Mapping[str, object],
        compute: Callable[..., Result],
        render: Callable[[list[HistoryEntry]], alt.TopLevelMixin],
        *,
        history: int = 4,
        description: str = "",
        what: str | None = None,
    ) -> App:
        """The app whose controls are :func:`~recnotebooks.viz.controls.build_controls` of ``specs``
        starting at ``values`` (an unknown setting is named as one that "the ``title``", or
        ``what``, does not have)."""
        controls = build_controls(specs, values, what or f"the {title}")
        return cls(title, controls, compute, render, history=history, description=description)

    @property
    def values(self) -> dict[str, object]:
        """Current widget values by parameter name."""
        return {k: w.value for k, w in self.controls.items()}

    @property
    def result(self) -> Result:
        """Result of the setting the chart shows now."""
        return self.history[0].result

    def chart_data(self) -> list[list[dict[str, object]]]:
        """Every inline dataset of the chart as sent to the browser (what tests compare)."""
        return _datasets(self.chart.spec or {})

    # ----- driving --------------------------------------------------------------------
    def set(self, **values: object) -> Result:
        """Set widget values (by parameter name) and update now; returns the new result.

        Every value is checked before any widget moves (a slider would clamp, round or take
        ``True`` as 1 silently): ``KeyError`` for an unknown name, ``TypeError`` for the wrong
        kind of value (``2.5`` or ``True`` for an integer slider, a bool for a float slider),
        ``ValueError`` for one outside the control's options or range (or NaN). Raises
        :class:`AppError` with the in-app message if the setting cannot be shown.
        """
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise KeyError(f"unknown control(s) {unknown}; this app has {sorted(self.controls)}")
        checked = {k: check_control_value(k, self.controls[k], v) for k, v in values.items()}  # all first
        self._driving = True
        try:
            for k, v in checked.items():
                self.controls[k].value = v
        finally:
            self._driving = False
        if not self.update():
            raise AppError(self.error or "update failed")
        return self.result

    @property
    def pending(self) -> bool:
        """True while the widgets hold a setting the chart does not show yet: a debounced update
        is due, or the last one failed (the chart keeps the last setting that worked)."""
        return self._handle is not None or (bool(self.history) and self.values != self.history[0].values)

    def settle(self) -> bool:
        """Run an update that is due now (see :attr:`pending`), so that what the chart shows is the
        widgets' setting; True when it does, False (the message shown) when that setting fails."""
        if self.pending:
            return self.update()
        return self.error is None

    def update(self) -> bool:
        """Recompute from the widget values and redraw; False (message shown) on error."""
        self._cancel()
        values = self.values
        if self.history and values == self.history[0].values and self.error is None:
            return True
        t0 = time.perf_counter()
        try:
            result = self.compute(**values)
            trail = _relabel([self._entry(result, values), *self.history][: self.max_history])
            with debug_mode(False):  # no schema check per object built (__init__ checked the first render)
                chart = self.render(trail)
            spec = chart.to_dict(validate=False)  # factories are schema-tested; validation costs ~30 ms
        except Exception as e:  # shown in the app, never a traceback wall
            self.error = f"{type(e).__name__}: {e}" if not isinstance(e, ValueError) else str(e)
            self.message.value = self._error_html(self.error)
            return False
        with self.chart.hold_sync():  # one message to the browser: new spec, same widget
            self.chart.spec = spec
        self.altair_chart = chart
        self.history = trail
        self.error = None
        self.message.value = self._notes_html(result.notes)
        self._show_labels(result)
        self.updates += 1
        self.last_update_s = time.perf_counter() - t0
        return True

    # ----- internals ------------------------------------------------------------------
    def _show_labels(self, result: Result) -> None:
        """Each control's label: the result's for it (:attr:`Result.labels`), else its own."""
        for k, w in self.controls.items():
            text = result.labels.get(k, self._descriptions[k])
            if w.description != text:
                w.description = text

    def _entry(self, result: Result, values: dict[str, object]) -> HistoryEntry:
        prev = self.history[0].values if self.history else None
        return HistoryEntry(
            label="now",
            values=dict(values),
            result=result,
            change=_describe_change(prev, values, self.controls),
        )

    def _push(self, result: Result) -> None:
        self.history = _relabel([self._entry(result, self.values)])

    def _on_change(self, _change: object) -> None:
        if self._driving:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or self.debounce_s == 0:
            self.update()
            return
        self._cancel()
        self._handle = loop.call_later(self.debounce_s, self.update)

    def _cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @staticmethod
    def _notes_html(notes: Sequence[str]) -> str:
        return "".join(
            f"<div class='recnb-note {NO_MATH}' style='color:#555'>{html.escape(n)}</div>" for n in notes
        )

    @staticmethod
    def _error_html(msg: str) -> str:
        return (
            f"<div class='recnb-error {NO_MATH}' style='color:#a61b1b;background:#fdecea;padding:6px 10px;"
            f"border-left:4px solid #d93025'>⚠ {html.escape(msg)}<br><span style='color:#555'>"
            "The chart still shows the last setting that worked.</span></div>"
        )

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.view)

    def __repr__(self) -> str:
        return f"App({self.title!r}, controls={sorted(self.controls)}, updates={self.updates})"
