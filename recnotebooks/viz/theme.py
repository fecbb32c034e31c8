"""One look for every chart: the ``recnotebooks`` Altair theme, phase colours, source labels.

Importing :mod:`recnotebooks.viz` registers and enables the theme. :func:`enable_offline`
makes charts render with no network: the Vega JavaScript comes from ``vl-convert``'s
bundle instead of a CDN (JupyterLab, VS Code and classic notebooks alike).
"""

from __future__ import annotations

import altair as alt

__all__ = ["THEME", "PHASE_COLORS", "SOURCES", "phase_scale", "source_label", "enable_offline"]

THEME = "recnotebooks"

#: Colour of each step phase, fixed so that a phase looks the same in every chart.
#: Embedding work in oranges, MLPs in blues, communication in greens/purples, overheads grey.
PHASE_COLORS: dict[str, str] = {
    "data": "#9d9d9d",
    "embedding_forward": "#f58518",
    "embedding_backward": "#ffbf79",
    "bottom_mlp": "#4c78a8",
    "interaction": "#b279a2",
    "top_mlp": "#72b7b2",
    "backward": "#54a24b",
    "sparse_optimizer": "#e45756",
    "dense_optimizer": "#ff9da6",
    "all_to_all": "#2ca02c",
    "all_reduce": "#8c6d31",
    "host_to_device": "#bab0ac",
    "overhead": "#d6d6d6",
}

#: What each ``source`` value means, as printed on charts.
SOURCES: dict[str, str] = {
    "measured": "MEASURED on this machine",
    "modeled": "MODELED by the efficiency model",
    "analytic": "COMPUTED from the architecture (counts, no timing)",
}


def phase_scale(phases: list[str]) -> alt.Scale:
    """Colour scale with the fixed phase colours (unknown phases get neutral greys)."""
    extra = ["#7f7f7f", "#c7c7c7", "#bcbd22", "#17becf"]
    rng = [PHASE_COLORS.get(p, extra[i % len(extra)]) for i, p in enumerate(phases)]
    return alt.Scale(domain=list(phases), range=rng)


def source_label(source: str, detail: str | None = None) -> str:
    """The label a chart carries for ``source`` (``measured``, ``modeled`` or ``analytic``)."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {list(SOURCES)}, got {source!r}")
    return SOURCES[source] + (f" · {detail}" if detail else "")


def _theme() -> dict:
    font = "system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif"
    return {
        "config": {
            "font": font,
            "view": {"continuousWidth": 380, "continuousHeight": 220, "stroke": None},
            "title": {
                "fontSize": 15,
                "anchor": "start",
                "subtitleFontSize": 12,
                "subtitleColor": "#555",
                "offset": 8,
            },  # fmt: skip
            "axis": {
                "labelFontSize": 12,
                "titleFontSize": 12,
                "gridColor": "#eee",
                "domainColor": "#888",
                "tickColor": "#888",
            },  # fmt: skip
            "legend": {"labelFontSize": 12, "titleFontSize": 12, "orient": "right"},
            "header": {"labelFontSize": 12, "titleFontSize": 12},
            "range": {"category": {"scheme": "tableau10"}},
            "bar": {"cornerRadiusEnd": 2},
            "line": {"strokeWidth": 2.5},
            "point": {"size": 60, "filled": True},
        }
    }


def _register() -> None:
    alt.theme.register(THEME, enable=True)(_theme)


def enable_offline() -> None:
    """Render charts without network access (Vega bundled by ``vl-convert``).

    Applies to :class:`altair.JupyterChart` (what the apps use) and to plain charts shown as
    cell output (the ``jupyter`` renderer). Call once per kernel; later calls are free.
    """
    alt.JupyterChart.enable_offline()
    alt.renderers.enable("jupyter", offline=True)


_register()
