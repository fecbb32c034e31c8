"""Altair chart factories: tidy rows in, a labelled, themed chart out.

Every factory takes *tidy rows* (a list of dicts: a column per quantity, a row per
(setting, phase, rank, ...)), checks them (missing columns, non-finite numbers and
oversized data raise a ``ValueError`` naming the column), and returns a chart whose
subtitle says whether its numbers are **measured** on this machine, **modeled** by the
efficiency model or **computed** from the architecture. Marks carry tooltips. Data is
expected pre-aggregated (at most :data:`MAX_CHART_ROWS` rows), so no chart hits Altair's
``MaxRowsError``. Factories return plain (unconfigured) charts, so they compose with
``|``, ``&`` and :func:`altair.hconcat`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import altair as alt

from recnotebooks.checks import check_int
from recnotebooks.viz.export import save_png, save_svg
from recnotebooks.viz.reference import ratio_bars, roofline
from recnotebooks.viz.theme import LAYOUT_WIDTH, phase_scale, source_label
from recnotebooks.viz.tidy import (
    CHAR_PX,
    MAX_CHART_ROWS,
    ONE_CHANGE_PER_LINE,
    OPACITY,
    Rows,
    band_axis,
    chart_rows,
    chart_title,
    check_rows,
    label_lines,
    legend_px,
    row_sources,
    tooltip,
    with_data,
    wrap_subtitle,
)

__all__ = [
    "MAX_CHART_ROWS",
    "time_breakdown",
    "metric_lines",
    "metric_bars",
    "part_bars",
    "ratio_bars",
    "roofline",
    "rank_bars",
    "hit_rate_curve",
    "reference_curve",
    "training_curves",
    "save_png",
    "save_svg",
    "chart_rows",
]


def time_breakdown(
    rows: Rows,
    *,
    by: str = "setting",
    value: str = "seconds_per_step",
    phase: str = "phase",
    title: str = "Step time by phase",
    source: str | None = None,
    detail: str | None = None,
    highlight: object | None = None,
    phases: Sequence[str] | None = None,
    width: int | None = None,
) -> alt.Chart:
    """Stacked horizontal bars: one bar per ``by`` value (setting, rank, config), one
    segment per phase, in milliseconds. ``highlight`` draws that bar solid, others faded.
    ``width`` sets the plot's width (px; default the theme's) and lays the phase legend under
    it out in as many columns as fit that width.

    A measured bar whose rows say ``reliable: False`` (a busy machine, erratic steps: see
    :func:`recnotebooks.timing.reliability`) is drawn pale with "⚠ NOT RELIABLE" written on it,
    the reason in its tooltip and a subtitle line; rows with ``step_min``/``step_max`` (seconds)
    add a whisker from the fastest to the slowest timed step."""
    data = check_rows(rows, "time_breakdown", numeric=[value], fields=[by, phase])
    order = list(phases) if phases else list(dict.fromkeys(str(r[phase]) for r in data))
    bars = list(dict.fromkeys(str(r[by]) for r in data))
    shaky = {
        str(r[by]): str(r.get("reliability") or "marked not reliable")
        for r in data
        if r.get("reliable", True) is False
    }
    _phase_rows(data, by, value, phase, order, highlight, shaky)
    y_axis, step, _ = band_axis(bars, by.replace("_", " "))
    columns = 4 if width is None else max(1, min(4, check_int("width", width, lo=1) // legend_px(order)))
    size = {"height": alt.Step(step)} if width is None else {"height": alt.Step(step), "width": width}
    title = chart_title(title, data, source, detail)
    if shaky:
        said = "; ".join(dict.fromkeys(shaky.values()))
        title = alt.TitleParams(
            title.text, subtitle=[*title.subtitle, *wrap_subtitle(f"⚠ pale bars: NOT RELIABLE ({said})")]
        )
    bars_chart = _phase_bars(by, phase, order, bars, y_axis, columns, bool(shaky))
    if not shaky:
        return with_data(bars_chart.properties(title=title, **size), data)
    layers = [bars_chart, *_unreliable_marks(data, by, bars, shaky)]
    return with_data(alt.layer(*layers).properties(title=title, **size), data)


def _phase_rows(
    data: list[dict[str, object]],
    by: str,
    value: str,
    phase: str,
    order: list[str],
    highlight: object | None,
    shaky: dict[str, str],
) -> None:
    """:func:`time_breakdown`'s rows made ready to draw, in place: milliseconds, each segment's
    place in the stack, its opacity (faded off the highlight, pale when unreliable), the words
    of its measurement's trust and its bar's whole step."""
    for r in data:
        r["ms"] = float(r[value]) * 1e3  # type: ignore[arg-type]
        r["_order"] = order.index(str(r[phase])) if str(r[phase]) in order else len(order)
        r["_now"] = highlight is None or r[by] == highlight
        r["_opacity"] = (1.0 if r["_now"] else 0.4) * (0.35 if str(r[by]) in shaky else 1.0)
        r[by] = str(r[by])
        r["trust"] = f"NOT RELIABLE: {shaky[r[by]]}" if r[by] in shaky else "reliable"
    total: dict[object, float] = {}
    for r in data:
        total[r[by]] = total.get(r[by], 0.0) + float(r["ms"])  # type: ignore[arg-type]
    for r in data:
        r["step_ms"] = total[str(r[by])]


def _phase_bars(
    by: str, phase: str, order: list[str], bars: list[str], y_axis: alt.Axis, columns: int, shaky: bool
) -> alt.Chart:
    """The stacked bars of :func:`time_breakdown`: one per ``by`` value, a segment per phase in
    ``order``, the phase legend below in ``columns`` columns."""
    return (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", stack="zero", title="milliseconds per step"),
            y=alt.Y(f"{by}:N", sort=bars, axis=y_axis),
            color=alt.Color(
                f"{phase}:N",
                scale=phase_scale(order),
                sort=order,
                title=phase,
                legend=alt.Legend(orient="bottom", columns=columns),
            ),
            order=alt.Order("_order:Q"),
            opacity=OPACITY,
            tooltip=[
                tooltip(by, "N"),
                tooltip(phase, "N"),
                tooltip("ms", "Q", ".2f", "ms per step"),
                tooltip("step_ms", "Q", ".2f", "whole step (ms)"),
                *([tooltip("trust", "N", title="measurement")] if shaky else []),
            ],
        )
    )


def _unreliable_marks(
    data: list[dict[str, object]], by: str, bars: list[str], shaky: dict[str, str]
) -> list[alt.Chart]:
    """One mark per unreliable bar of :func:`time_breakdown`: "⚠ NOT RELIABLE" written on it and,
    when its rows say, a whisker from its fastest to its slowest step (``step_min``/``step_max``)."""
    first = [
        r for r in data if r[by] in shaky and r["_order"] == min(q["_order"] for q in data if q[by] == r[by])
    ]
    for r in first:
        r["_warn"] = True
        if "step_min" in r and "step_max" in r:
            r["min_ms"], r["max_ms"] = float(r["step_min"]) * 1e3, float(r["step_max"]) * 1e3  # type: ignore[arg-type]
    warn = (
        alt.Chart()
        .transform_filter("datum._warn")
        .mark_text(align="left", baseline="middle", dx=4, fontWeight="bold", color="#9a6700")
        .encode(
            x=alt.datum(0),
            y=alt.Y(f"{by}:N", sort=bars),
            text=alt.value("⚠ NOT RELIABLE"),
            tooltip=[tooltip(by, "N"), tooltip("trust", "N", title="measurement")],
        )
    )
    if not any("min_ms" in r for r in first):
        return [warn]
    whisker = (
        alt.Chart()
        .transform_filter("isValid(datum.min_ms)")
        .mark_rule(color="#24292f", strokeWidth=1.5)
        .encode(
            x="min_ms:Q",
            x2="max_ms:Q",
            y=alt.Y(f"{by}:N", sort=bars),
            tooltip=[
                tooltip(by, "N"),
                tooltip("min_ms", "Q", ".2f", "fastest step (ms)"),
                tooltip("max_ms", "Q", ".2f", "slowest step (ms)"),
            ],
        )
    )
    return [warn, whisker]


def part_bars(
    rows: Rows,
    *,
    value: str,
    part: str,
    by: str = "setting",
    parts: Sequence[str] | None = None,
    colors: Sequence[str] | None = None,
    text: str | None = None,
    value_title: str | None = None,
    title: str = "Parts of a whole",
    source: str | None = None,
    detail: str | None = None,
    width: int = 380,
) -> alt.Chart:
    """Stacked horizontal bars of a whole split into parts: one bar per ``by`` value, one
    segment per ``part`` (in ``parts`` order, coloured by ``colors`` in the same order; the legend
    lists every one of ``parts``, a part with no row included), ``value`` along an x axis titled
    ``value_title``, ``width`` px wide. ``text`` names a column shown in each segment's tooltip
    (e.g. "21.6 GB (2.0%)")."""
    data = check_rows(rows, "part_bars", numeric=[value], fields=[by, part] + ([text] if text else []))
    order = list(parts) if parts else list(dict.fromkeys(str(r[part]) for r in data))
    if colors is not None and len(colors) != len(order):
        raise ValueError(f"part_bars: colors must give one colour per part ({len(order)}), got {len(colors)}")
    bars = list(dict.fromkeys(str(r[by]) for r in data))
    for r in data:
        r[by], r[part] = str(r[by]), str(r[part])
        r["_order"] = order.index(r[part]) if r[part] in order else len(order)
    scale = alt.Scale(domain=order, range=list(colors)) if colors is not None else phase_scale(order)
    y_axis, step, _ = band_axis(bars, None)
    return with_data(
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", stack="zero", title=value_title or value.replace("_", " ")),
            y=alt.Y(f"{by}:N", sort=bars, axis=y_axis),
            color=alt.Color(
                f"{part}:N",
                scale=scale,
                sort=order,
                title=None,
                legend=alt.Legend(orient="bottom", columns=2, labelLimit=360),
            ),
            order=alt.Order("_order:Q"),
            tooltip=[
                tooltip(by, "N"),
                tooltip(part, "N"),
                tooltip(text, "N") if text else tooltip(value, "Q", ",.4~g"),
            ],
        )
        .properties(title=chart_title(title, data, source, detail), width=width, height=alt.Step(step)),
        data,
    )


_C = TypeVar("_C", alt.X, alt.Y, alt.Color)


def words(column: str) -> str:
    """A column name in words: ``"all_to_all_share"`` -> ``"all to all share"``."""
    return column.replace("_", " ")


@dataclass(frozen=True)
class Field:
    """One column drawn on a channel of :func:`encoding`: its Vega-Lite type (``"Q"``, ``"N"``),
    title (``None``: none), and the axis, scale, sort and legend it is drawn with (unset: Vega-Lite's
    defaults); ``tip`` is its tooltip (default: the column titled in words, numbers as ``,.4~g``)."""

    column: str
    type: str = "Q"
    title: str | None = None
    axis: object = alt.Undefined
    scale: object = alt.Undefined
    sort: object = alt.Undefined
    legend: object = alt.Undefined
    tip: alt.Tooltip | None = None

    def channel(self, kind: type[_C]) -> _C:
        """This column on channel ``kind`` (:class:`altair.X`, :class:`altair.Y`, :class:`altair.Color`)."""
        kw = {"axis": self.axis, "scale": self.scale, "sort": self.sort, "legend": self.legend}
        kw = {k: v for k, v in kw.items() if v is not alt.Undefined}  # only what this field sets
        return kind(f"{self.column}:{self.type}", title=self.title, **kw)

    def tooltip(self) -> alt.Tooltip:
        """The tooltip of this column."""
        if self.tip is not None:
            return self.tip
        return tooltip(self.column, self.type, ",.4~g" if self.type == "Q" else None)


@dataclass(frozen=True)
class Encoding:
    """The channels every mark of a :func:`metric_lines` or :func:`metric_bars` chart shares."""

    x: alt.X
    y: alt.Y
    tooltip: list[alt.Tooltip]
    color: alt.Color | None = None
    stroke_dash: alt.StrokeDash | None = None

    def channels(self, **more: object) -> dict[str, object]:
        """Keyword arguments for ``Chart.encode``: these channels and ``more``."""
        out: dict[str, object] = {"x": self.x, "y": self.y}
        if self.color is not None:
            out["color"] = self.color
        if self.stroke_dash is not None:
            out["strokeDash"] = self.stroke_dash
        return {**out, **more, "tooltip": self.tooltip}


def encoding(
    data: list[dict[str, object]],
    key: Field,
    value: Field,
    *,
    horizontal: bool = False,
    color: Field | None = None,
    labels: Sequence[str] = (),
    dash_sources: bool = False,
) -> Encoding:
    """The one encoding of :func:`metric_lines` and :func:`metric_bars`: ``key`` (what the rows are
    laid out by: a line chart's parameter, a bar chart's bars) and ``value`` (the quantity) on the
    two axes (``horizontal``: the value along x), ``color`` by a column, and tooltips in one order:
    ``color``, ``labels`` (more nominal columns), ``key``, ``value`` and, when the rows mix
    sources (measured, modeled...), ``source``, also drawn as the line's dash (``dash_sources``)."""
    x, y = (value, key) if horizontal else (key, value)
    tips = [
        *([color.tooltip()] if color else []),
        *(tooltip(c, "N") for c in labels),
        key.tooltip(),
        value.tooltip(),
    ]
    mixed = "source" in data[0] and len(row_sources(data, "measured")) > 1
    if mixed:
        tips.append(tooltip("source", "N"))
    return Encoding(
        x=x.channel(alt.X),
        y=y.channel(alt.Y),
        tooltip=tips,
        color=color.channel(alt.Color) if color else None,
        stroke_dash=alt.StrokeDash("source:N", title="source") if mixed and dash_sources else None,
    )


def metric_lines(
    rows: Rows,
    *,
    x: str,
    y: str,
    color: str | None = None,
    current: object | None = None,
    highlight: object | None = None,
    x_log: bool = False,
    y_log: bool = False,
    title: str | None = None,
    source: str | None = None,
    detail: str | None = None,
    y_format: str = ".3~s",
    x_title: str | None = None,
    y_title: str | None = None,
    y_rule: float | None = None,
    x_format: str | None = None,
) -> alt.LayerChart:
    """A metric against a parameter, one line per ``color`` value (e.g. history settings).

    The current point is ringed and labelled: the row with ``x == current``, or, when
    ``current`` is None, every row whose ``current`` column is true. With ``highlight``,
    the line whose ``color`` value equals it is drawn solid and the others faded. Axis titles
    default to the column names in words; with at most 12 distinct ``x`` values the x ticks sit
    on them (a log axis would otherwise crowd 20, 30, 40... together). ``y_rule`` draws a dashed
    horizontal reference line at that value (1.0 for a ratio). ``x_format`` is the d3 format of
    the x labels (``"~s"``: 32.8k for 32,768); by default ``"~g"`` on those ticks and ``"~s"``
    on the axis's own.
    """
    data = check_rows(
        rows,
        "metric_lines",
        numeric=[],
        positive=[c for c, lg in ((x, x_log), (y, y_log)) if lg],
        fields=[x, y] + ([color] if color else []),
    )
    check_rows(data, "metric_lines", numeric=[x, y])
    if color and highlight is not None:  # a faded line hidden under another is drawn once
        data, same = _drop_hidden_lines(data, x, y, color, highlight)
        if same:
            detail = "; ".join([*([detail] if detail else []), same])
    for r in data:
        r["_now"] = bool(r.get("current")) if current is None else r[x] == current
        r["_hl"] = highlight is None or (color is not None and r[color] == highlight)
        r["_opacity"] = 1.0 if r["_hl"] else 0.35
    names = list(dict.fromkeys(str(r[color]) for r in data)) if color else []  # legend order: as given
    data.sort(key=lambda r: bool(r["_hl"]))  # the highlighted line last, drawn on top of faded ones
    key, metric = _line_axes(data, x, y, x_log, y_log, x_title, y_title, x_format, y_format)
    series = _series(color, names) if color else None
    enc = encoding(data, key, metric, color=series, dash_sources=True)
    layers = _line_layers(enc, y, y_format, any(r["_now"] and r["_hl"] for r in data))
    if y_rule is not None:  # a dashed reference line (1.0 for a ratio)
        layers.insert(0, alt.Chart().mark_rule(color="#555", strokeDash=[4, 3]).encode(y=alt.datum(y_rule)))
    chart = alt.layer(*layers).properties(
        title=chart_title(title or f"{y} vs {x}".replace("_", " "), data, source, detail)
    )
    return with_data(chart, data)


def _line_axes(
    data: list[dict[str, object]],
    x: str,
    y: str,
    x_log: bool,
    y_log: bool,
    x_title: str | None,
    y_title: str | None,
    x_format: str | None,
    y_format: str,
) -> tuple[Field, Field]:
    """:func:`metric_lines`' parameter (x) and metric (y) fields: titled in words, linear or log,
    with at most 12 distinct x values the ticks on them (``x_format``)."""
    x_values = sorted({float(r[x]) for r in data})  # type: ignore[arg-type]
    few = len(x_values) <= 12  # (a tickCount below the number of values would hide some log labels)
    x_axis = (  # (flush labels would push the last one onto its neighbour, which then hides it)
        alt.Axis(values=x_values, tickCount=len(x_values), format=x_format or "~g", labelFlush=False)
        if few
        else alt.Axis(format=x_format or "~s")
    )
    key = Field(
        x,
        title=x_title or words(x),
        axis=x_axis,
        scale=alt.Scale(type="log" if x_log else "linear", nice=not x_log),
    )
    metric = Field(
        y,
        title=y_title or words(y),
        axis=alt.Axis(format=y_format),
        scale=alt.Scale(type="log" if y_log else "linear"),
    )
    return key, metric


def _series(color: str, names: list[str]) -> Field:
    """:func:`metric_lines`' colour: a line per value of ``color``, in the legend in ``names``' order,
    a trail label one change per line."""
    _, chars = label_lines(names)
    legend = alt.Legend(labelExpr=ONE_CHANGE_PER_LINE, labelLimit=min(280, round(chars * CHAR_PX) + 8))
    return Field(color, "N", title=words(color), sort=names, legend=legend)


def _line_layers(enc: Encoding, y: str, y_format: str, ringed: bool) -> list[alt.Chart]:
    """:func:`metric_lines`' lines and points and, when a point is ``ringed`` (the current one of
    the highlighted line), its ring and its value written above it."""
    base = alt.Chart().encode(**enc.channels(opacity=OPACITY))
    now = base.transform_filter("datum._now && datum._hl")
    layers = [base.mark_line(), base.mark_point()]
    if ringed:  # an empty layer warns "Infinite extent" in Vega
        # a text mark has no dash: Vega-Lite warns it drops the channel
        plain = {k: v for k, v in enc.channels(opacity=OPACITY).items() if k != "strokeDash"}
        text = alt.Chart().encode(**plain).transform_filter("datum._now && datum._hl")
        text = text.mark_text(dy=-16, fontWeight="bold").encode(text=alt.Text(f"{y}:Q", format=y_format))
        layers += [now.mark_point(size=260, filled=False, strokeWidth=3), text]
    return layers


def _drop_hidden_lines(
    data: list[dict[str, object]], x: str, y: str, color: str, highlight: object
) -> tuple[list[dict[str, object]], str]:
    """``data`` without the faded lines that would lie exactly on another line (a trail's
    earlier settings that change nothing this chart plots), and the words that say so: "-2, -3:
    the same line as -1" (a trail label's part before ``:``). The highlighted line and the first
    of each set of equal lines, in the order given (the trail's newest first), stay, so every
    line in the legend is one the chart shows in its own colour."""
    points: dict[str, list[tuple[object, object]]] = {}
    for r in data:
        points.setdefault(str(r[color]), []).append((r[x], r[y]))
    first: dict[tuple[tuple[object, object], ...], str] = {}
    hidden: dict[str, list[str]] = {}
    order = sorted(points, key=lambda n: n != str(highlight))  # the highlighted line wins a tie
    for name in order:
        key = tuple(sorted(points[name], key=repr))
        if key in first:
            hidden.setdefault(first[key], []).append(name)
        else:
            first[key] = name
    if not hidden:
        return data, ""

    def short(name: str) -> str:
        return name.split(":", 1)[0] if ":" in name else name

    gone = {n for names in hidden.values() for n in names}
    words_ = [
        f"{', '.join(short(n) for n in names)}: the same line as {short(k)}" for k, names in hidden.items()
    ]
    return [r for r in data if str(r[color]) not in gone], "; ".join(words_)


def metric_bars(
    rows: Rows,
    *,
    metric: str = "metric",
    value: str = "value",
    by: str = "setting",
    text: str | None = "display",
    highlight: object | None = None,
    title: str = "Derived quantities",
    source: str | None = None,
    detail: str | None = None,
    source_detail: Mapping[str, str] | None = None,
    columns: int = 1,
    width: int | None = None,
    total_width: int | None = None,
    value_title: str | None = None,
    shared_scale: bool | str = False,
    rule_at: float | None = None,
) -> alt.FacetChart:
    """Small multiples: one panel per metric (independent x scales), one bar per ``by``.

    ``text`` names a column with a human-readable value shown at the end of each bar (each
    panel's scale leaves room for it). ``metric`` values are the panel headers: give them in
    words ("samples per joule"); "zion: samples per joule" is drawn on two lines. Panels are
    ``width`` px wide, or, by default, as wide as fits ``columns`` of them, the bar labels and
    the gaps in ``total_width`` px (default: :data:`~recnotebooks.viz.theme.LAYOUT_WIDTH`, a
    laptop's notebook); ``columns`` is then the most per row, and the panels reflow into fewer
    columns when one would be too narrow for its header, a bar and its value. ``value_title``
    titles each panel's x axis (shown with ticks when there is no ``text``).
    ``shared_scale=True`` draws every panel on one x scale (comparable bar lengths across
    panels); a column name shares one scale between the panels whose rows hold the same value
    there (e.g. a unit). ``rule_at`` draws a dashed reference line at that value in every panel
    (1.0 for a ratio). ``source_detail`` gives each source of rows that mix them its own detail
    on its subtitle line (:func:`~recnotebooks.viz.tidy.chart_title`)."""
    group_col = shared_scale if isinstance(shared_scale, str) else None
    fields = [metric, by] + ([text] if text else []) + ([group_col] if group_col else [])
    data = check_rows(rows, "metric_bars", numeric=[value], fields=fields)
    columns = check_int("columns", columns, lo=1)
    bars = list(dict.fromkeys(str(r[by]) for r in data))
    y_axis, step, label_px = band_axis(bars, None)
    columns, width, room = _panel_layout(data, metric, text, columns, width, total_width, label_px)
    _bar_rows(data, metric, value, by, highlight, shared_scale, room, rule_at)
    layers = _bar_layers(data, metric, value, Field(by, "N", title=None, axis=y_axis, sort=bars), text,
                         value_title, shared_scale, rule_at)  # fmt: skip
    # built in two constructors: each chained .properties/.facet/.resolve_scale deep-copies the layers
    header = alt.Header(labelExpr="split(datum.label, ': ')", labelLimit=width)
    panels = list(dict.fromkeys(str(r[metric]) for r in data))
    facets = alt.FacetChart(
        spec=alt.LayerChart(layer=layers, width=width, height=alt.Step(step)),
        facet=alt.Facet(f"{metric}:N", title=None, sort=panels, header=header),
        columns=columns,
        data=alt.Data(values=[]),
        resolve=alt.Resolve(scale=alt.ScaleResolveMap(x="independent")),
        title=chart_title(title, data, source, detail, source_detail),
    )
    return with_data(facets, data)


def _panel_layout(
    data: list[dict[str, object]],
    metric: str,
    text: str | None,
    columns: int,
    width: int | None,
    total_width: int | None,
    label_px: int,
) -> tuple[int, int, float]:
    """:func:`metric_bars`' panels: how many per row, how wide, and how far past its longest bar
    a panel's scale reaches (room for the bar's value, ``text``). Unless ``width`` is given, the
    panels share ``total_width`` px beside the bar labels (``label_px``), at most ``columns`` per
    row, fewer when a panel would be too narrow for its header, a bar and its value."""
    text_px = max((len(str(r[text])) for r in data), default=0) * 6.2 + 8 if text else 0
    if width is None:
        total = LAYOUT_WIDTH if total_width is None else check_int("total_width", total_width, lo=1)
        header_px = max(len(line) for r in data for line in str(r[metric]).split(": ")) * CHAR_PX + 8
        need = max(MIN_PANEL_PX, header_px, text_px + MIN_PANEL_PX / 2)  # a header, a bar and its value
        while columns > 1 and _panel_width(total, label_px, columns) < need:
            columns -= 1  # reflow: fewer panels per row, never narrower text
        width = _panel_width(total, label_px, columns)
    return columns, width, width / max(width - text_px, width / 3)


def _bar_rows(
    data: list[dict[str, object]],
    metric: str,
    value: str,
    by: str,
    highlight: object | None,
    shared_scale: bool | str,
    room: float,
    rule_at: float | None,
) -> None:
    """:func:`metric_bars`' rows made ready to draw, in place: faded off the highlight, and
    ``_reach``, where a panel's scale ends (``room`` times its longest bar, or the rule's value):
    one end per panel, or per value of the ``shared_scale`` column, or (``True``) one for all."""
    group_col = shared_scale if isinstance(shared_scale, str) else None

    def scale_of(r: dict[str, object]) -> str:  # panels with the same key share one x scale
        return "all" if shared_scale is True else str(r[group_col]) if group_col else str(r[metric])

    top = {scale_of(r): float(rule_at or 0.0) for r in data}
    for r in data:
        top[scale_of(r)] = max(top[scale_of(r)], float(r[value]))  # type: ignore[arg-type]
    for r in data:
        r[by] = str(r[by])
        r["_now"] = highlight is None or r[by] == highlight
        r["_opacity"] = 1.0 if r["_now"] else 0.4
        r["_reach"] = top[scale_of(r)] * room


def _bar_layers(
    data: list[dict[str, object]],
    metric: str,
    value: str,
    bar: Field,
    text: str | None,
    value_title: str | None,
    shared_scale: bool | str,
    rule_at: float | None,
) -> list[alt.Chart]:
    """A :func:`metric_bars` panel's layers: the bars, their values written at their ends (``text``),
    an invisible point at the panel's reach (its scale's end) and the dashed rule at ``rule_at``."""
    axis = alt.Axis(format="~s", tickCount=3, title=value_title)
    if text:
        axis = (
            alt.Axis(labels=False, ticks=False, domain=False, grid=False, title=value_title)
            if value_title
            else None
        )
    tip = tooltip(text, "N") if text else tooltip(value, "Q")
    amount = Field(value, title=value_title, axis=axis, tip=tip)
    base = alt.Chart().encode(**encoding(data, bar, amount, horizontal=True, labels=[metric]).channels())
    layers = [base.mark_bar(color="#4c78a8").encode(opacity=OPACITY)]
    if text:
        layers.append(base.mark_text(align="left", dx=3, fontSize=11).encode(text=f"{text}:N"))
    if text or shared_scale:  # an invisible point at each panel's reach sets its scale's end
        layers.append(base.mark_point(opacity=0).encode(x=replace(amount, column="_reach").channel(alt.X)))
    if rule_at is not None:
        rule = alt.Chart().mark_rule(color="#555", strokeDash=[4, 3])
        layers.append(rule.encode(x=alt.datum(rule_at, type="quantitative")))
    return layers


#: A metric_bars panel is never laid out narrower than this (px), unless asked with ``width``.
MIN_PANEL_PX = 150
_FACET_SPACING = 20  # px between two panels (Vega-Lite's default)


def _panel_width(total: int, label_px: int, columns: int) -> int:
    """The width of each of ``columns`` panels beside bar labels ``label_px`` wide in ``total`` px."""
    return max(60, (total - label_px - _FACET_SPACING * (columns - 1)) // columns - 4)


def rank_bars(
    rows: Rows,
    *,
    value: str,
    rank: str = "rank",
    color: str | None = None,
    title: str = "Per rank",
    source: str | None = None,
    detail: str | None = None,
    value_title: str | None = None,
) -> alt.Chart:
    """Vertical bars per rank (stacked by ``color`` when given): load balance at a glance."""
    data = check_rows(rows, "rank_bars", numeric=[value], fields=[rank] + ([color] if color else []))
    enc: dict[str, object] = {
        "x": alt.X(f"{rank}:O", title=rank),
        "y": alt.Y(
            f"{value}:Q",
            stack="zero",
            title=value_title or value.replace("_", " "),
            axis=alt.Axis(format="~s"),
        ),
        "tooltip": [
            tooltip(rank, "O"),
            *([tooltip(color, "N")] if color else []),
            tooltip(value, "Q", ",.4~g"),
        ],
    }
    if color:
        order = list(dict.fromkeys(str(r[color]) for r in data))
        enc["color"] = alt.Color(f"{color}:N", scale=phase_scale(order), sort=order, title=color)
    return with_data(
        alt.Chart().mark_bar().encode(**enc).properties(title=chart_title(title, data, source, detail)), data
    )


def hit_rate_curve(
    rows: Rows,
    *,
    x: str = "cache_fraction",
    y: str = "hit_rate",
    color: str | None = "policy",
    current: object | None = None,
    title: str = "Cache hit rate vs cache size",
    source: str | None = None,
    detail: str | None = None,
) -> alt.LayerChart:
    """Hit rate (0..1) against cache size (fraction of rows, log x), one line per policy."""
    data = check_rows(rows, "hit_rate_curve", numeric=[y], positive=[x])
    for i, r in enumerate(data):
        if not 0.0 <= float(r[y]) <= 1.0:  # type: ignore[arg-type]
            raise ValueError(f"hit_rate_curve: column {y!r} must be in [0, 1], got {r[y]!r} in rows[{i}]")
    chart = metric_lines(
        data,
        x=x,
        y=y,
        color=color if color and color in data[0] else None,
        current=current,
        x_log=True,
        title=title,
        source=source,
        detail=detail,
        y_format=".0%",
    )
    return chart


#: How :func:`reference_curve` marks a point of each kind, in the order of its ``kinds``: a published
#: point on the curve filled, a value read off the line between two of them hollow, a published
#: point off the curve a grey cross. (fill, stroke, shape)
_CURVE_MARKS = (
    ("#4c78a8", "#4c78a8", "circle"),
    ("white", "#4c78a8", "circle"),
    ("#9d9d9d", "#9d9d9d", "cross"),
)


def reference_curve(
    rows: Rows,
    *,
    x: str,
    y: str,
    kind: str,
    kinds: Sequence[str],
    title: str,
    source: str = "published",
    detail: str | None = None,
    y_format: str = ".2f",
    x_title: str | None = None,
    x_format: str = "~s",
) -> alt.LayerChart:
    """A published curve against a parameter, each point marked by where its value comes from.

    ``rows`` have a ``kind`` column, one of ``kinds`` (two or three): ``kinds[0]`` for a point that
    was published (drawn filled), ``kinds[1]`` for a value read off the curve between two of them
    (hollow), ``kinds[2]`` for a published point that is not on the curve (a grey cross, off the
    line). The line joins the points of the first two kinds in ``x`` order; a legend names each
    kind, so an interpolated value never reads as a published one."""
    if not 2 <= len(kinds) <= len(_CURVE_MARKS) or len(set(kinds)) != len(kinds):
        raise ValueError(f"reference_curve: kinds must be 2 or 3 distinct names, got {list(kinds)!r}")
    data = check_rows(rows, "reference_curve", numeric=[x, y], fields=[kind])
    for i, r in enumerate(data):
        if r[kind] not in kinds:
            raise ValueError(
                f"reference_curve: column {kind!r} must be one of {list(kinds)}, got {r[kind]!r} in rows[{i}]"
            )
        r["_on_curve"] = r[kind] in kinds[:2]
    xs = sorted({float(r[x]) for r in data})  # type: ignore[arg-type]
    marks = _CURVE_MARKS[: len(kinds)]
    base = alt.Chart().encode(
        x=alt.X(f"{x}:Q", title=x_title or words(x),
                axis=alt.Axis(values=xs, tickCount=len(xs), format=x_format, labelFlush=False)),
        y=alt.Y(f"{y}:Q", title=words(y), axis=alt.Axis(format=y_format), scale=alt.Scale(zero=False)),
        tooltip=[tooltip(kind, "N"), tooltip(x, "Q", x_format), tooltip(y, "Q", y_format)],
    )  # fmt: skip
    legend = alt.Legend(
        title=words(kind), labelLimit=round(max(len(k) for k in kinds) * CHAR_PX) + 8
    )  # whole

    def scale(i: int) -> alt.Scale:
        return alt.Scale(domain=list(kinds), range=[m[i] for m in marks])

    points = base.mark_point(size=70, strokeWidth=2, opacity=1).encode(
        fill=alt.Fill(f"{kind}:N", scale=scale(0), legend=legend),
        stroke=alt.Stroke(f"{kind}:N", scale=scale(1), legend=legend),
        shape=alt.Shape(f"{kind}:N", scale=scale(2), legend=legend),
    )
    line = base.transform_filter("datum._on_curve").mark_line(color=marks[0][1])
    chart = alt.layer(line, points).properties(title=chart_title(title, data, source, detail))
    # the points off the curve first, so that a point on it is drawn over one close by
    return with_data(chart, sorted(data, key=lambda r: (bool(r["_on_curve"]), float(r[x]))))  # type: ignore[arg-type]


def training_curves(history: Rows, *, title: str = "Training", detail: str | None = None) -> alt.HConcatChart:
    """Loss (every logged step) and eval AUC (when evaluated) against step: measured."""
    data = check_rows(history, "training_curves", numeric=["step"])
    loss = [{"step": r["step"], "value": r["loss"], "metric": "train loss"} for r in data if "loss" in r]
    auc = [{"step": r["step"], "value": r["auc"], "metric": "eval AUC"} for r in data if "auc" in r]
    for what, part in (("loss", loss), ("auc", auc)):
        if part:
            check_rows(part, f"training_curves ({what})", numeric=["value"])

    def panel(part: list[dict[str, object]], name: str, color: str) -> alt.Chart:
        rows_ = part or [{"step": 0, "value": 0.5 if name == "eval AUC" else 0.0, "metric": name}]
        return (
            alt.Chart(alt.Data(values=rows_))
            .mark_line(point=len(rows_) < 30, color=color, opacity=1.0 if part else 0.0)
            .encode(
                x=alt.X("step:Q"),
                y=alt.Y("value:Q", title=name, scale=alt.Scale(zero=False)),
                tooltip=[tooltip("step", "Q", ",d"), tooltip("value", "Q", ".4f", name)],
            )
            .properties(width=300, height=180)
        )

    return alt.hconcat(panel(loss, "train loss", "#4c78a8"), panel(auc, "eval AUC", "#f58518")).properties(
        title=alt.TitleParams(title, subtitle=[source_label("measured", detail)])
    )
