"""What every chart factory shares: tidy rows checked, attached as inline data, titled with
their source, given tooltips, and history-trail labels drawn whole.

A trail label ("-1: num_tables 16→8, pooling 20→40") is drawn one change per line on a band
axis or a legend (:func:`band_axis`), and the band is made tall enough for its lines: nothing
is cut off, and a chart keeps its width however many settings changed at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

import altair as alt

from recnotebooks.text import wrap_line
from recnotebooks.viz.theme import LAYOUT_WIDTH, source_label

__all__ = [
    "AXIS_TITLE_PX",
    "CHAR_PX",
    "LINE_PX",
    "MAX_CHART_ROWS",
    "ONE_CHANGE_PER_LINE",
    "OPACITY",
    "Rows",
    "band_axis",
    "band_px",
    "chart_rows",
    "chart_title",
    "check_rows",
    "label_lines",
    "legend_px",
    "row_sources",
    "stack",
    "stack_room",
    "tooltip",
    "with_data",
    "wrap_subtitle",
]

#: Most rows a chart takes (aggregate before charting: Altair inlines every row into the spec).
MAX_CHART_ROWS = 5000
#: Opacity straight from a ``_opacity`` column (1 for the highlighted setting, fainter for
#: the trail). A field with no scale is much cheaper to build than ``alt.condition``.
OPACITY = alt.Opacity("_opacity:Q", scale=None, legend=None)
Rows = Sequence[Mapping[str, object]]


def check_rows(
    rows: Rows,
    what: str,
    numeric: Sequence[str] = (),
    fields: Sequence[str] = (),
    positive: Sequence[str] = (),
) -> list[dict[str, object]]:
    """Copies of ``rows`` (tidy dicts) once every ``fields``/``numeric``/``positive`` column is
    there and every number is finite (``positive`` ones > 0); a ``ValueError``/``TypeError``
    naming the factory (``what``), the row and the column otherwise."""
    if isinstance(rows, Mapping) or not isinstance(rows, Sequence):
        raise TypeError(f"{what}: rows must be a list of dicts (tidy rows), got {type(rows).__name__}")
    if not rows:
        raise ValueError(f"{what}: rows is empty; nothing to draw")
    if len(rows) > MAX_CHART_ROWS:
        raise ValueError(f"{what}: {len(rows)} rows is more than {MAX_CHART_ROWS}; aggregate before charting")
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise TypeError(f"{what}: rows[{i}] must be a dict, got {type(r).__name__}")
        for c in (*numeric, *fields, *positive):
            if c not in r:
                raise ValueError(f"{what}: rows[{i}] has no column {c!r} (has {sorted(r)})")
        for c in (*numeric, *positive):
            v = r[c]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{what}: column {c!r} must be a finite number, got {v!r} in rows[{i}]")
            if c in positive and v <= 0:
                raise ValueError(f"{what}: column {c!r} must be > 0 (log scale), got {v!r} in rows[{i}]")
        out.append(dict(r))
    return out


def with_data(chart: alt.TopLevelMixin, data: list[dict[str, object]]) -> alt.TopLevelMixin:
    """Attach ``data`` last, as inline JSON text (Vega-Lite parses it in the browser).

    Altair deep-copies a chart's data, dict by dict, on every method call and composition;
    a string is copied for free, which makes an app update several times faster.
    """
    chart.data = alt.Data(values=json.dumps(data, separators=(",", ":")), format=alt.DataFormat(type="json"))
    return chart


class _Stack(alt.VConcatChart):
    """A vconcat built without Altair's copies (see :func:`stack`)."""

    def __init__(self, vconcat: Sequence[alt.TopLevelMixin] = (), **kwargs: object) -> None:
        for c in vconcat:
            if c._get("params") is not alt.Undefined or c._get("name") is not alt.Undefined:
                raise ValueError("stack: a chart with params or a name needs alt.vconcat")
        if len(vconcat) > 1 and all(c._get("data") is vconcat[0]._get("data") for c in vconcat):
            raise ValueError("stack: charts sharing one data object need alt.vconcat (it lifts the data)")
        alt.TopLevelVConcatSpec.__init__(self, vconcat=list(vconcat), **kwargs)


def stack(*charts: alt.TopLevelMixin, independent: Sequence[str] = ("color",)) -> alt.VConcatChart:
    """``charts`` one above the other, each with its own scales for the ``independent`` channels:
    the spec of ``(a & b).resolve_scale(color="independent")``, built without copies.

    Altair deep-copies every subchart (every one of its Undefined properties) when it composes
    or re-sets a property; an app update composes a few charts, which took most of its time.
    The copies only serve to lift shared data and selection parameters: charts with their own
    data and no ``params`` (every factory's) compose the same way without them.
    """
    resolve = alt.Resolve(scale=alt.ScaleResolveMap(**dict.fromkeys(independent, "independent")))
    return _Stack(vconcat=charts, resolve=resolve)


def chart_rows(spec: dict) -> list[dict[str, object]]:
    """The rows of a chart spec's top-level inline data (list or JSON text)."""
    values = spec["data"]["values"]
    return json.loads(values) if isinstance(values, str) else list(values)


def row_sources(rows: list[dict[str, object]], default: str) -> list[str]:
    """The distinct ``source`` values of ``rows`` (``default`` where a row has none), sorted."""
    return sorted({str(r.get("source", default)) for r in rows})


#: A subtitle line longer than this many characters is broken in two (at "; " or " · " or a
#: space): 12 px text this long fits a laptop's notebook beside a chart's left band.
SUBTITLE_CHARS = 90


def wrap_subtitle(line: str) -> list[str]:
    """A chart subtitle's ``line`` broken within :data:`SUBTITLE_CHARS` characters at word
    boundaries, where printed reports break theirs (:func:`recnotebooks.text.wrap_line`)."""
    return wrap_line(line, SUBTITLE_CHARS)


def chart_title(
    title: str,
    rows: list[dict[str, object]],
    source: str | None,
    detail: str | None,
    source_detail: Mapping[str, str] | None = None,
) -> alt.TitleParams:
    """``title`` with one subtitle line per source: MEASURED, MODELED... (``detail`` appended to a
    single source's line; after several sources' lines, once, on a line of its own); a long line is
    broken so that it fits a laptop's notebook (:func:`wrap_subtitle`). ``source_detail`` gives a
    source its own detail, on its own line ("MEASURED on this machine · the ranks' logs")."""
    srcs = [source] if source else row_sources(rows, "measured")
    own = dict(source_detail or {})
    if len(srcs) == 1:
        return alt.TitleParams(title, subtitle=wrap_subtitle(source_label(srcs[0], own.get(srcs[0], detail))))
    lines = [part for s in srcs for part in wrap_subtitle(source_label(s, own.get(s)))]
    return alt.TitleParams(title, subtitle=lines + (wrap_subtitle(detail) if detail else []))


def tooltip(field: str, kind: str, fmt: str | None = None, title: str | None = None) -> alt.Tooltip:
    """A tooltip for ``field`` titled in words (``title`` or the field name without underscores)."""
    kw: dict[str, object] = {"title": title or field.replace("_", " ")}
    if fmt:
        kw["format"] = fmt
    return alt.Tooltip(f"{field}:{kind}", **kw)


#: A history-trail label ("-1: num_tables 16→8, pooling 20→40") is drawn one change per line.
ONE_CHANGE_PER_LINE = "split(datum.label, ', ')"
LINE_PX, CHAR_PX = 14, 7.6  # one 12 px label line; an average character at 12 px in DejaVu Sans (wide)


def label_lines(labels: Sequence[str]) -> tuple[int, int]:
    """(lines, characters of the longest line) of ``labels`` drawn one change per line."""
    lines = [line for label in labels for line in str(label).split(", ")]
    return max(1 + str(label).count(", ") for label in labels), max(len(line) for line in lines)


#: px a y axis's title takes beside its labels (12 px text on its side, and its padding)
AXIS_TITLE_PX = 24
#: px of a legend entry besides its label: the symbol, its gap and the column padding
LEGEND_ENTRY_PX = 34


def band_px(labels: Sequence[str], titled: bool = True) -> int:
    """The px a band axis of ``labels`` (trail labels one change per line) takes left of its
    plot: the labels, their padding and, when ``titled``, the axis title.

    Charts stacked one above the other (:func:`stack`) line up their plots at the widest such
    band, so an app sizes every chart of its stack from the widest band of them all."""
    return band_axis(labels, None)[2] + 8 + (AXIS_TITLE_PX if titled else 0)


def stack_room(*bands: int) -> int:
    """The px right of the widest left band of a stack (``bands``: each chart's
    :func:`band_px`) within :data:`~recnotebooks.viz.theme.LAYOUT_WIDTH`: what every chart of the
    stack may use for its plot, panels and right-hand legend."""
    return LAYOUT_WIDTH - max(bands, default=0)


def legend_px(labels: Sequence[str]) -> int:
    """The px of one column of a legend of ``labels`` (symbol, label, padding)."""
    _, chars = label_lines(labels)
    return min(280, round(chars * CHAR_PX) + 8) + LEGEND_ENTRY_PX


def band_axis(labels: Sequence[str], title: str | None) -> tuple[alt.Axis, int, int]:
    """A band axis that shows whole trail labels (wrapped), its step and its label width (px)."""
    lines, chars = label_lines(labels)
    width = min(280, round(chars * CHAR_PX) + 8)
    centre = {"expr": f"-(length({ONE_CHANGE_PER_LINE}) - 1) * {LINE_PX / 2}"}  # the block, not its 1st line
    # the title above the labels, flush with their left edge: beside them Vega places it by the
    # first line's width only, over a longer second line ("now: a 1→2" over "rows 1M→10M")
    above = {
        "titleAngle": 0,
        "titleAlign": "left",
        "titleBaseline": "bottom",
        "titleX": -width - 8,
        "titleY": -4,
    }
    axis = alt.Axis(
        labelExpr=ONE_CHANGE_PER_LINE,
        labelLimit=width,
        labelLineHeight=LINE_PX,
        labelOffset=centre,
        title=title,
        **(above if title else {}),
    )
    return axis, max(18, LINE_PX * lines + 4), width
