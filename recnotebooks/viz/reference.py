"""Charts against a reference: achieved FLOP/s under the hardware's roofline, ratios
(modeled ÷ published) around agreement, 1.0, with a band of "close enough" shaded, and the
published and modeled values themselves beside their ratio (:func:`published_vs_modeled`).

Both take tidy rows like every factory in :mod:`recnotebooks.viz.charts` and are exported
from there and from :mod:`recnotebooks.viz`.
"""

from __future__ import annotations

import math

import altair as alt

from recnotebooks.viz.theme import SOURCES
from recnotebooks.viz.tidy import (
    Rows,
    band_axis,
    chart_title,
    check_rows,
    row_sources,
    tooltip,
    with_data,
    wrap_subtitle,
)

__all__ = ["published_vs_modeled", "ratio_bars", "roofline"]


def ratio_bars(
    rows: Rows,
    *,
    value: str = "ratio",
    by: str = "run",
    reference: float = 1.0,
    band: tuple[float, float] = (0.5, 2.0),
    title: str = "Ratio",
    value_title: str = "ratio",
    source: str | None = None,
    detail: str | None = None,
    width: int = 420,
    labels: bool = True,
) -> alt.LayerChart:
    """Ratios (e.g. modeled ÷ published) on a log axis: a rule at ``reference`` (1.0: the two
    agree), a shaded ``band`` (within 2x either way by default) and a stem from the reference
    to each row's ratio, so over- and under-estimates read alike. ``labels=False`` leaves the
    rows' names off (a panel beside another that names them)."""
    data = check_rows(rows, "ratio_bars", positive=[value], fields=[by])
    lo, hi = band
    for name, v in (("reference", reference), ("band[0]", lo), ("band[1]", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"ratio_bars: {name} must be a finite number > 0, got {v!r}")
    if not lo < reference < hi:
        raise ValueError(f"ratio_bars: band must hold the reference, lo < {reference} < hi, got {band!r}")
    names = list(dict.fromkeys(str(r[by]) for r in data))
    for r in data:
        r[by], r["_ref"] = str(r[by]), float(reference)
        r["_text"] = f"{float(r[value]):.2f}x"  # type: ignore[arg-type]
    scale, x = _ratio_axis([float(r[value]) for r in data], band, reference, value, value_title)  # type: ignore[arg-type]
    y_axis, step, _ = band_axis(names, None)
    tips = [
        tooltip(by, "N"),
        tooltip(value, "Q", ".3~g"),
        *([tooltip("note", "N")] if "note" in data[0] else []),
    ]
    base = alt.Chart().encode(y=alt.Y(f"{by}:N", sort=names, axis=y_axis if labels else None), tooltip=tips)
    layers = [
        *_agreement(band, reference, scale),
        with_data(base.mark_rule(color="#4c78a8", strokeWidth=2).encode(x=x, x2="_ref:Q"), data),
        with_data(base.mark_point(color="#4c78a8", size=70).encode(x=x), data),
    ]
    for side, test in (("left", f"datum.{value} >= datum._ref"), ("right", f"datum.{value} < datum._ref")):
        text = base.mark_text(align=side, dx=7 if side == "left" else -7, fontSize=11)  # away from the stem
        layers.append(with_data(text.encode(x=x, text="_text:N").transform_filter(test), data))
    return alt.layer(*layers).properties(
        title=chart_title(title, data, source, detail), width=width, height=alt.Step(step)
    )


def _ratio_axis(
    values: list[float], band: tuple[float, float], reference: float, value: str, value_title: str
) -> tuple[alt.Scale, alt.X]:
    """:func:`ratio_bars`' log scale (the band and every value, with room for a value's label)
    and its x channel, ticked at the band's ends, the reference and its doublings and halvings."""
    lo, hi = band
    # room on both sides for a value's label beside its point (a label right of the lowest point's
    # stem, left of the highest's): a factor of 1.6 is about 40 px at this width and range
    domain = [min(lo, *values) / 1.6, max(hi, *values) * 1.6]
    scale = alt.Scale(type="log", domain=domain, nice=False)
    # the band's ends and the reference, plus doublings and halvings of it, so a bar far out can be read
    steps = {reference * 2.0**k for k in range(-10, 11) if domain[0] <= reference * 2.0**k <= domain[1]}
    ticks = sorted({lo, reference, hi} | steps)
    return scale, alt.X(
        f"{value}:Q", scale=scale, title=value_title, axis=alt.Axis(format="~g", values=ticks)
    )


def _agreement(band: tuple[float, float], reference: float, scale: alt.Scale) -> list[alt.Chart]:
    """:func:`ratio_bars`' background: the ``band`` of close enough shaded, and a dashed rule at
    ``reference`` (agreement)."""
    lo, hi = band
    shade = alt.Chart(
        alt.Data(values=[{"lo": lo, "hi": hi, "what": f"within {hi / reference:g}x of {reference:g}"}])
    )
    return [
        shade.mark_rect(color="#54a24b", opacity=0.12).encode(
            x=alt.X("lo:Q", scale=scale), x2="hi:Q", tooltip=[tooltip("what", "N", title="band")]
        ),
        shade.mark_rule(color="#333", strokeDash=[4, 3])
        .encode(x=alt.X("ref:Q", scale=scale), tooltip=[tooltip("ref", "Q", title="agreement")])
        .transform_calculate(ref=str(float(reference))),
    ]


#: The two kinds of number :func:`published_vs_modeled` draws, and their marks' colours.
KINDS = {"PUBLISHED": "#222222", "MODELED": "#4c78a8"}


def _values_panel(
    data: list[dict[str, object]],
    long: list[dict[str, object]],
    names: list[str],
    by: str,
    value_title: str,
    value_format: str,
    width: int,
) -> alt.LayerChart:
    """:func:`published_vs_modeled`'s left panel: per row, the published and the modeled value
    on one log axis (``long``: a row a value), joined by a line from ``_lo`` to ``_hi``."""
    y_axis, step, _ = band_axis(names, None)
    y = alt.Y(f"{by}:N", sort=names, axis=y_axis)
    scale = alt.Scale(type="log")  # a log scale has no zero: naming it makes Vega-Lite warn
    x = alt.X("value:Q", scale=scale, title=value_title, axis=alt.Axis(format=value_format, tickCount=4))
    kinds = list(KINDS)
    # one legend for colour and shape (the same field, the same legend): a diamond and a circle in
    # their colours; a legend on one and none on the other is a conflict Vega-Lite warns about
    legend = alt.Legend(title=None, orient="top")
    color = alt.Color("kind:N", scale=alt.Scale(domain=kinds, range=list(KINDS.values())), legend=legend)
    shape = alt.Shape("kind:N", scale=alt.Scale(domain=kinds, range=["diamond", "circle"]), legend=legend)
    tips = [
        tooltip(by, "N"),
        tooltip("kind", "N"),
        tooltip("value", "Q", ".3~s"),
        tooltip("ratio", "Q", ".2f"),
    ]
    join = with_data(
        alt.Chart()
        .mark_rule(color="#999", strokeWidth=2)
        .encode(y=y, x=alt.X("_lo:Q", scale=scale, title=value_title), x2="_hi:Q"),
        data,
    )
    # MODELED first, PUBLISHED (smaller) on top: where the two agree the diamond sits inside the circle
    point = alt.Chart().encode(y=y, x=x, color=color, shape=shape, tooltip=tips)
    marks = [
        with_data(
            point.mark_point(size=size, filled=True, opacity=1.0), [r for r in long if r["kind"] == kind]
        )
        for kind, size in (("MODELED", 110), ("PUBLISHED", 50))
    ]
    return alt.layer(join, *marks).properties(
        width=width, height=alt.Step(step), title="PUBLISHED and MODELED"
    )


def published_vs_modeled(
    rows: Rows,
    *,
    by: str = "label",
    published: str = "published",
    modeled: str = "modeled",
    band: tuple[float, float] = (0.5, 2.0),
    title: str = "Modeled vs published",
    value_title: str = "samples/s",
    value_format: str = "~s",
    ratio_title: str = "MODELED ÷ PUBLISHED",
    detail: str | None = None,
    width: int = 250,
    ratio_width: int = 200,
) -> alt.HConcatChart:
    """Each row's PUBLISHED and MODELED value side by side, and their ratio beside them.

    Left: two marks per row on one log axis, a dark diamond for the ``published`` value and a
    blue circle for the ``modeled`` one, joined by a line (its length is the disagreement); right:
    :func:`ratio_bars` of modeled ÷ published, with agreement at 1.0 and ``band`` shaded. Both
    panels share the rows' order; the subtitle says which number is which (and ``detail``). The
    chart's data holds, per row, ``kind`` ``"PUBLISHED"`` and ``"MODELED"`` with its ``value``
    (:func:`~recnotebooks.viz.tidy.chart_rows` of the left panel's layers) and the ``ratio``: the
    row's own ``ratio`` where it has one (e.g. the median of a system's runs' ratios), else
    modeled ÷ published."""
    data = check_rows(rows, "published_vs_modeled", positive=[published, modeled], fields=[by])
    names = list(dict.fromkeys(str(r[by]) for r in data))
    for r in data:
        r[by] = str(r[by])
        if "ratio" not in r:  # a given ratio (a median of runs' ratios) is drawn as given
            r["ratio"] = float(r[modeled]) / float(r[published])  # type: ignore[arg-type]
        r["_lo"] = min(float(r[published]), float(r[modeled]))  # type: ignore[arg-type]
        r["_hi"] = max(float(r[published]), float(r[modeled]))  # type: ignore[arg-type]
    long = [
        {by: r[by], "kind": kind, "value": float(r[col]), "ratio": r["ratio"]}  # type: ignore[arg-type]
        for r in data
        for kind, col in (("PUBLISHED", published), ("MODELED", modeled))
    ]
    values = _values_panel(data, long, names, by, value_title, value_format, width)
    ratios = ratio_bars(data, by=by, band=band, value_title=ratio_title, width=ratio_width, labels=False,
                        source="modeled")  # fmt: skip
    ratios.title = alt.TitleParams(ratio_title)  # the chart's title says where the numbers come from
    what = f"{SOURCES['modeled']}, beside {SOURCES['published']}" + (f" · {detail}" if detail else "")
    return alt.hconcat(values, ratios, spacing=12).properties(
        title=alt.TitleParams(title, subtitle=wrap_subtitle(what))
    )


def roofline(
    points: Rows,
    *,
    peak_flops: float,
    peak_bandwidth: float,
    intensity: str = "arithmetic_intensity",
    achieved: str = "flops_per_s",
    label: str = "label",
    title: str = "Roofline",
    source: str | None = None,
    detail: str | None = None,
) -> alt.LayerChart:
    """Achieved FLOP/s against arithmetic intensity (FLOP/byte), under the compute ceiling
    ``peak_flops`` and the bandwidth slope ``peak_bandwidth`` x intensity (log-log)."""
    for name, v in (("peak_flops", peak_flops), ("peak_bandwidth", peak_bandwidth)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"roofline: {name} must be a finite number > 0, got {v!r}")
    data = check_rows(points, "roofline", positive=[intensity, achieved], fields=[label])
    pts = alt.Chart().encode(
        x=_log_intensity(intensity),
        y=_log_flops(achieved),
        color=alt.Color(f"{label}:N", title=label),
        tooltip=[
            tooltip(label, "N"),
            tooltip(intensity, "Q", ".3~g"),
            tooltip(achieved, "Q", ".3~s"),
            *([tooltip("source", "N")] if "source" in data[0] else []),
        ],
    )
    shape = {"shape": alt.Shape("source:N", title="source")} if len(row_sources(data, "measured")) > 1 else {}
    roof = _roof([float(r[intensity]) for r in data], peak_flops, peak_bandwidth)  # type: ignore[arg-type]
    return alt.layer(roof, with_data(pts.mark_point(size=90).encode(**shape), data)).properties(
        title=chart_title(title, data, source, detail)
    )


def _log_intensity(field: str) -> alt.X:
    """A roofline's x: arithmetic intensity, log."""
    return alt.X(f"{field}:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP per byte)")


def _log_flops(field: str) -> alt.Y:
    """A roofline's y: FLOP/s, log."""
    return alt.Y(f"{field}:Q", scale=alt.Scale(type="log"), title="FLOP/s", axis=alt.Axis(format="~s"))


def _roof(intensities: list[float], peak_flops: float, peak_bandwidth: float) -> alt.Chart:
    """The roofline itself, dashed: ``min(peak_flops, peak_bandwidth x intensity)`` on 48 log-spaced
    intensities from a quarter of the lowest point (or the ridge) to four times the highest."""
    ridge = peak_flops / peak_bandwidth
    lo, hi = min(min(intensities), ridge) / 4, max(max(intensities), ridge) * 4
    n = 48
    grid = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    ceiling = [
        {
            "ai": a,
            "ceiling": min(peak_flops, peak_bandwidth * a),
            "bound": "memory bound" if a < ridge else "compute bound",
        }
        for a in grid
    ]
    return (
        alt.Chart(alt.Data(values=ceiling))
        .mark_line(color="#888", strokeDash=[6, 3])
        .encode(
            x=_log_intensity("ai"),
            y=_log_flops("ceiling"),
            tooltip=[
                tooltip("ai", "Q", ".3~g", "intensity"),
                tooltip("ceiling", "Q", ".3~s", "attainable FLOP/s"),
                tooltip("bound", "N"),
            ],
        )
    )
