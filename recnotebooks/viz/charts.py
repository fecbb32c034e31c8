"""Altair chart factories: tidy rows in, a labelled, themed chart out.

Every factory takes *tidy rows* (a list of dicts: a column per quantity, a row per
(setting, phase, rank, ...)), checks them (missing columns, non-finite numbers and
oversized data raise a ``ValueError`` naming the column), and returns a chart whose
subtitle says whether its numbers are **measured** on this machine, **modeled** by the
efficiency model or **computed** from the architecture. Marks carry tooltips. Data is
expected pre-aggregated (at most :data:`MAX_ROWS` rows), so no chart hits Altair's
``MaxRowsError``. Factories return plain (unconfigured) charts, so they compose with
``|``, ``&`` and :func:`altair.hconcat`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import altair as alt

from recnotebooks.viz.theme import phase_scale, source_label

__all__ = [
    "MAX_ROWS",
    "time_breakdown",
    "metric_lines",
    "metric_bars",
    "roofline",
    "rank_bars",
    "hit_rate_curve",
    "training_curves",
    "save_png",
    "save_svg",
]

MAX_ROWS = 5000
#: Opacity straight from a ``_opacity`` column (1 for the highlighted setting, fainter for
#: the trail). A field with no scale is much cheaper to build than ``alt.condition``.
_OPACITY = alt.Opacity("_opacity:Q", scale=None, legend=None)
Rows = Sequence[Mapping[str, object]]


def _check_rows(rows: Rows, what: str, numeric: Sequence[str] = (), fields: Sequence[str] = (),
                positive: Sequence[str] = ()) -> list[dict[str, object]]:  # fmt: skip
    if isinstance(rows, Mapping) or not isinstance(rows, Sequence):
        raise TypeError(f"{what}: rows must be a list of dicts (tidy rows), got {type(rows).__name__}")
    if not rows:
        raise ValueError(f"{what}: rows is empty; nothing to draw")
    if len(rows) > MAX_ROWS:
        raise ValueError(f"{what}: {len(rows)} rows is more than {MAX_ROWS}; aggregate before charting")
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


def _with_data(chart: alt.TopLevelMixin, data: list[dict[str, object]]) -> alt.TopLevelMixin:
    """Attach ``data`` last, as inline JSON text (Vega-Lite parses it in the browser).

    Altair deep-copies a chart's data, dict by dict, on every method call and composition;
    a string is copied for free, which makes an app update several times faster.
    """
    chart.data = alt.Data(values=json.dumps(data, separators=(",", ":")), format=alt.DataFormat(type="json"))
    return chart


def chart_rows(spec: dict) -> list[dict[str, object]]:
    """The rows of a chart spec's top-level inline data (list or JSON text)."""
    values = spec["data"]["values"]
    return json.loads(values) if isinstance(values, str) else list(values)


def _sources(rows: list[dict[str, object]], default: str) -> list[str]:
    return sorted({str(r.get("source", default)) for r in rows})


def _title(
    title: str, rows: list[dict[str, object]], source: str | None, detail: str | None
) -> alt.TitleParams:
    srcs = [source] if source else _sources(rows, "measured")
    return alt.TitleParams(title, subtitle=[source_label(s, detail) for s in srcs])


def _tip(field: str, kind: str, fmt: str | None = None, title: str | None = None) -> alt.Tooltip:
    kw: dict[str, object] = {"title": title or field.replace("_", " ")}
    if fmt:
        kw["format"] = fmt
    return alt.Tooltip(f"{field}:{kind}", **kw)


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
) -> alt.Chart:
    """Stacked horizontal bars: one bar per ``by`` value (setting, rank, config), one
    segment per phase, in milliseconds. ``highlight`` draws that bar solid, others faded."""
    data = _check_rows(rows, "time_breakdown", numeric=[value], fields=[by, phase])
    order = list(phases) if phases else list(dict.fromkeys(str(r[phase]) for r in data))
    bars = list(dict.fromkeys(str(r[by]) for r in data))
    for r in data:
        r["ms"] = float(r[value]) * 1e3  # type: ignore[arg-type]
        r["_order"] = order.index(str(r[phase])) if str(r[phase]) in order else len(order)
        r["_now"] = highlight is None or r[by] == highlight
        r["_opacity"] = 1.0 if r["_now"] else 0.4
        r[by] = str(r[by])
    total = {b: sum(float(r["ms"]) for r in data if r[by] == b) for b in bars}
    for r in data:
        r["step_ms"] = total[str(r[by])]
    return _with_data(
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", stack="zero", title="milliseconds per step"),
            y=alt.Y(f"{by}:N", sort=bars, title=by.replace("_", " ")),
            color=alt.Color(
                f"{phase}:N",
                scale=phase_scale(order),
                sort=order,
                title=phase,
                legend=alt.Legend(orient="bottom", columns=4),
            ),
            order=alt.Order("_order:Q"),
            opacity=_OPACITY,
            tooltip=[
                _tip(by, "N"),
                _tip(phase, "N"),
                _tip("ms", "Q", ".2f", "ms per step"),
                _tip("step_ms", "Q", ".2f", "whole step (ms)"),
            ],  # fmt: skip
        )
        .properties(title=_title(title, data, source, detail)),
        data,
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
) -> alt.LayerChart:
    """A metric against a parameter, one line per ``color`` value (e.g. history settings).

    The current point is ringed and labelled: the row with ``x == current``, or, when
    ``current`` is None, every row whose ``current`` column is true. With ``highlight``,
    the line whose ``color`` value equals it is drawn solid and the others faded.
    """
    data = _check_rows(rows, "metric_lines", numeric=[], positive=[c for c, lg in ((x, x_log), (y, y_log)) if lg],
                       fields=[x, y] + ([color] if color else []))  # fmt: skip
    _check_rows(data, "metric_lines", numeric=[x, y])
    for r in data:
        r["_now"] = bool(r.get("current")) if current is None else r[x] == current
        r["_hl"] = highlight is None or (color is not None and r[color] == highlight)
    xs = alt.X(f"{x}:Q", scale=alt.Scale(type="log" if x_log else "linear", nice=not x_log),
               title=x.replace("_", " "))  # fmt: skip
    ys = alt.Y(f"{y}:Q", scale=alt.Scale(type="log" if y_log else "linear"), title=y.replace("_", " "),
               axis=alt.Axis(format=y_format))  # fmt: skip
    for r in data:
        r["_opacity"] = 1.0 if r["_hl"] else 0.35
    enc: dict[str, object] = {"x": xs, "y": ys, "opacity": _OPACITY}
    tips = [_tip(x, "Q", ",.4~g"), _tip(y, "Q", ",.4~g")]
    if color:
        enc["color"] = alt.Color(f"{color}:N", title=color.replace("_", " "),
                                 sort=list(dict.fromkeys(str(r[color]) for r in data)))  # fmt: skip
        tips.insert(0, _tip(color, "N"))
    if "source" in data[0] and len(_sources(data, "measured")) > 1:
        enc["strokeDash"] = alt.StrokeDash("source:N", title="source")
        tips.append(_tip("source", "N"))
    base = alt.Chart().encode(**enc, tooltip=tips)
    now = base.transform_filter("datum._now && datum._hl")
    layers = [
        base.mark_line(),
        base.mark_point(),
        now.mark_point(size=260, filled=False, strokeWidth=3),
        now.mark_text(dy=-16, fontWeight="bold").encode(text=alt.Text(f"{y}:Q", format=y_format)),
    ]
    chart = alt.layer(*layers).properties(
        title=_title(title or f"{y} vs {x}".replace("_", " "), data, source, detail)
    )
    return _with_data(chart, data)


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
    columns: int = 1,
    width: int = 260,
) -> alt.FacetChart:
    """Small multiples: one panel per metric (independent x scales), one bar per ``by``.
    ``text`` names a column with a human-readable value shown at the end of each bar."""
    data = _check_rows(rows, "metric_bars", numeric=[value], fields=[metric, by] + ([text] if text else []))
    bars = list(dict.fromkeys(str(r[by]) for r in data))
    for r in data:
        r[by] = str(r[by])
        r["_now"] = highlight is None or r[by] == highlight
        r["_opacity"] = 1.0 if r["_now"] else 0.4
    base = alt.Chart().encode(
        y=alt.Y(f"{by}:N", sort=bars, title=None, axis=alt.Axis(labelLimit=260)),
        x=alt.X(f"{value}:Q", title=None, axis=None if text else alt.Axis(format="~s", tickCount=4)),
        tooltip=[_tip(metric, "N"), _tip(by, "N"), _tip(text or value, "N" if text else "Q")],
    )
    layers = [base.mark_bar(color="#4c78a8").encode(opacity=_OPACITY)]
    if text:
        layers.append(base.mark_text(align="left", dx=3, fontSize=11).encode(text=f"{text}:N"))
    return _with_data(
        alt.layer(*layers)
        .properties(width=width, height=alt.Step(16))
        .facet(
            facet=alt.Facet(
                f"{metric}:N", title=None, sort=list(dict.fromkeys(str(r[metric]) for r in data))
            ),
            columns=columns,
            data=alt.Data(values=[]),
        )  # fmt: skip
        .resolve_scale(x="independent")
        .properties(title=_title(title, data, source, detail)),
        data,
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
    data = _check_rows(points, "roofline", positive=[intensity, achieved], fields=[label])
    ridge = peak_flops / peak_bandwidth
    lo = min(min(float(r[intensity]) for r in data), ridge) / 4  # type: ignore[arg-type]
    hi = max(max(float(r[intensity]) for r in data), ridge) * 4  # type: ignore[arg-type]
    n = 48
    grid = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    ceiling = [{"ai": a, "ceiling": min(peak_flops, peak_bandwidth * a),
                "bound": "memory bound" if a < ridge else "compute bound"} for a in grid]  # fmt: skip

    def x(f: str) -> alt.X:
        return alt.X(f"{f}:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP per byte)")

    def y(f: str) -> alt.Y:
        return alt.Y(f"{f}:Q", scale=alt.Scale(type="log"), title="FLOP/s", axis=alt.Axis(format="~s"))

    roof = (
        alt.Chart(alt.Data(values=ceiling))
        .mark_line(color="#888", strokeDash=[6, 3])
        .encode(
            x=x("ai"),
            y=y("ceiling"),
            tooltip=[
                _tip("ai", "Q", ".3~g", "intensity"),
                _tip("ceiling", "Q", ".3~s", "attainable FLOP/s"),
                _tip("bound", "N"),
            ],
        )  # fmt: skip
    )
    pts = alt.Chart().encode(
        x=x(intensity),
        y=y(achieved),
        color=alt.Color(f"{label}:N", title=label),
        tooltip=[
            _tip(label, "N"),
            _tip(intensity, "Q", ".3~g"),
            _tip(achieved, "Q", ".3~s"),
            *([_tip("source", "N")] if "source" in data[0] else []),
        ],  # fmt: skip
    )
    shape = {"shape": alt.Shape("source:N", title="source")} if len(_sources(data, "measured")) > 1 else {}
    return alt.layer(roof, _with_data(pts.mark_point(size=90).encode(**shape), data)).properties(
        title=_title(title, data, source, detail)
    )


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
    data = _check_rows(rows, "rank_bars", numeric=[value], fields=[rank] + ([color] if color else []))
    enc: dict[str, object] = {
        "x": alt.X(f"{rank}:O", title=rank),
        "y": alt.Y(
            f"{value}:Q",
            stack="zero",
            title=value_title or value.replace("_", " "),
            axis=alt.Axis(format="~s"),
        ),
        "tooltip": [_tip(rank, "O"), *([_tip(color, "N")] if color else []), _tip(value, "Q", ",.4~g")],
    }
    if color:
        order = list(dict.fromkeys(str(r[color]) for r in data))
        enc["color"] = alt.Color(f"{color}:N", scale=phase_scale(order), sort=order, title=color)
    return _with_data(
        alt.Chart().mark_bar().encode(**enc).properties(title=_title(title, data, source, detail)), data
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
    data = _check_rows(rows, "hit_rate_curve", numeric=[y], positive=[x])
    for i, r in enumerate(data):
        if not 0.0 <= float(r[y]) <= 1.0:  # type: ignore[arg-type]
            raise ValueError(f"hit_rate_curve: column {y!r} must be in [0, 1], got {r[y]!r} in rows[{i}]")
    chart = metric_lines(data, x=x, y=y, color=color if color and color in data[0] else None, current=current,
                         x_log=True, title=title, source=source, detail=detail, y_format=".0%")  # fmt: skip
    return chart


def training_curves(history: Rows, *, title: str = "Training", detail: str | None = None) -> alt.HConcatChart:
    """Loss (every logged step) and eval AUC (when evaluated) against step: measured."""
    data = _check_rows(history, "training_curves", numeric=["step"])
    loss = [{"step": r["step"], "value": r["loss"], "metric": "train loss"} for r in data if "loss" in r]
    auc = [{"step": r["step"], "value": r["auc"], "metric": "eval AUC"} for r in data if "auc" in r]
    for what, part in (("loss", loss), ("auc", auc)):
        if part:
            _check_rows(part, f"training_curves ({what})", numeric=["value"])

    def panel(part: list[dict[str, object]], name: str, color: str) -> alt.Chart:
        rows_ = part or [{"step": 0, "value": 0.5 if name == "eval AUC" else 0.0, "metric": name}]
        return (
            alt.Chart(alt.Data(values=rows_))
            .mark_line(point=len(rows_) < 30, color=color, opacity=1.0 if part else 0.0)
            .encode(
                x=alt.X("step:Q"),
                y=alt.Y("value:Q", title=name, scale=alt.Scale(zero=False)),
                tooltip=[_tip("step", "Q", ",d"), _tip("value", "Q", ".4f", name)],
            )  # fmt: skip
            .properties(width=300, height=180)
        )

    return alt.hconcat(panel(loss, "train loss", "#4c78a8"), panel(auc, "eval AUC", "#f58518")).properties(
        title=alt.TitleParams(title, subtitle=[source_label("measured", detail)])
    )


def _spec(chart: object) -> dict:
    ch = getattr(chart, "altair_chart", chart)  # an App: the chart it shows now
    for _ in range(2):  # an App holds a JupyterChart, which holds the current Altair chart
        if not hasattr(ch, "to_dict") and hasattr(ch, "chart"):
            ch = ch.chart
    if not hasattr(ch, "to_dict"):
        raise TypeError(
            f"chart must be an Altair chart, a JupyterChart or an App, got {type(chart).__name__}"
        )
    return ch.to_dict()


def save_png(chart: object, path: str | Path, scale: float = 2.0) -> Path:
    """Write ``chart`` (an Altair chart, JupyterChart or App) as PNG, offline via vl-convert."""
    import vl_convert as vlc

    p = Path(path)
    p.write_bytes(vlc.vegalite_to_png(_spec(chart), scale=scale))
    return p


def save_svg(chart: object, path: str | Path) -> Path:
    """Write ``chart`` (an Altair chart, JupyterChart or App) as SVG, offline via vl-convert."""
    import vl_convert as vlc

    p = Path(path)
    p.write_text(vlc.vegalite_to_svg(_spec(chart)))
    return p
