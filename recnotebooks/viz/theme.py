"""One look for every chart: the ``recnotebooks`` Altair theme, phase colours, source labels.

Importing :mod:`recnotebooks.viz` registers and enables the theme. :func:`enable_offline`
makes charts render with no network: the Vega JavaScript comes from ``vl-convert``'s
bundle instead of a CDN (JupyterLab, VS Code and classic notebooks alike), and every chart,
shown as cell output or inside an app, is a :class:`ChartWidget` drawn as SVG with ids no
other chart on the page shares.
"""

from __future__ import annotations

import warnings

import altair as alt

__all__ = [
    "LAYOUT_WIDTH",
    "NO_MATH",
    "THEME",
    "PHASE_COLORS",
    "PLACEMENT_COLORS",
    "SOURCES",
    "EMBED_OPTIONS",
    "ChartWidget",
    "phase_scale",
    "source_label",
    "enable_offline",
    "unique_id_bundle",
]

THEME = "recnotebooks"

#: Classes that keep MathJax (3's name, and 2's) from typesetting an element's text: JupyterLab
#: typesets TeX in HTML outputs, so a "$50 > $30" in a note or a feedback would become math.
NO_MATH = "mathjax_ignore tex2jax_ignore"

#: The width (px) every chart and app is laid out for. A 1280-px window with JupyterLab's file
#: browser open leaves an output area of about 848 px; a chart this wide fits it with room for
#: Vega's padding. Charts compute their widths from it (fewer panels per row, not smaller text),
#: and the apps' controls reflow to the width there is (:class:`recnotebooks.viz.app.App`).
LAYOUT_WIDTH = 800

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
    # a generative recommender's step (recnotebooks.perf.hstu.COMPONENTS; top_mlp, all_to_all,
    # all_reduce and overhead as above)
    "projections": "#3b5b92",
    "attention": "#9467bd",
    "pointwise": "#e7ba52",
    "embeddings": "#f58518",
    "optimizer": "#bcbd22",
    "hstu": "#7b4173",  # a measured HSTU step's forward through the stack (measure.hstu.HSTU_PHASES)
}

#: Colour of each place a table's rows can live (the plan's placements,
#: :data:`recnotebooks.perf.result.TABLE_HOMES`): device memory blue, a device cache over host DRAM
#: orange, host DRAM over PCIe red, parameter servers across the network brown.
PLACEMENT_COLORS: dict[str, str] = {
    "hbm": "#4c78a8",
    "cache": "#f58518",
    "host": "#e45756",
    "remote": "#9d755d",
}

#: What each ``source`` value means, as printed on charts.
SOURCES: dict[str, str] = {
    "measured": "MEASURED on this machine",
    "modeled": "MODELED by the efficiency model",
    "analytic": "COMPUTED from the architecture (counts, no timing)",
    "simulated": "SIMULATED by replaying an id trace",
    "published": "PUBLISHED by others (cited)",
}


def phase_scale(phases: list[str]) -> alt.Scale:
    """Colour scale with the fixed phase colours (unknown phases get neutral greys)."""
    extra = ["#7f7f7f", "#c7c7c7", "#bcbd22", "#17becf"]
    rng = [PHASE_COLORS.get(p, extra[i % len(extra)]) for i, p in enumerate(phases)]
    return alt.Scale(domain=list(phases), range=rng)


def source_label(source: str, detail: str | None = None) -> str:
    """The label a chart carries for ``source`` (a key of :data:`SOURCES`)."""
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
            },
            "axis": {
                "labelFontSize": 12,
                "titleFontSize": 12,
                "gridColor": "#eee",
                "domainColor": "#888",
                "tickColor": "#888",
                "labelSeparation": 4,  # labels closer than 4 px count as overlapping ("30" "40" ran together)
            },
            "axisQuantitative": {"labelOverlap": "greedy"},  # drop crowded tick labels, not every other
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


#: How every chart is embedded: SVG (marks keep their ``aria-label`` s; tests read the
#: geometry), no export menu.
EMBED_OPTIONS: dict[str, object] = {"renderer": "svg", "actions": False}

# Vega's SVG renderer names its clip paths "clip1", "clip2"... and its gradients "gradient_0"...
# from counters kept in the Vega module (vega-scenegraph src/util/svg/clip.js and Gradient.js),
# and anywidget imports a fresh copy of the module for every chart widget: every chart on a page
# starts again at clip1, and the browser clips one chart with another's clip path (a stacked bar
# with rounded ends is drawn clipped, at the wrong length). Vega has no option to prefix its ids
# (vega/vega#3987 asks for one), so each copy of the bundle draws a page-wide number first and
# puts it in every id it makes.
_ID_NUMBER = 'const __recnbIds="recnb"+(globalThis.__recnbViews=(globalThis.__recnbViews||0)+1)+"_";\n'
_ID_SITES = ('clip_id="clip"+', 'id="gradient_"+')


def unique_id_bundle(esm: str) -> str | None:
    """The Vega bundle ``esm`` patched to make page-unique SVG ids; None if Vega changed.

    Each place Vega makes an id must occur exactly once; otherwise nothing is patched (and
    :class:`ChartWidget` falls back to the canvas renderer, which makes no ids).
    """
    if any(esm.count(site) != 1 for site in _ID_SITES):
        return None
    for site in _ID_SITES:
        esm = esm.replace(site, site + "__recnbIds+")
    return _ID_NUMBER + esm


class ChartWidget(alt.JupyterChart):
    """An :class:`altair.JupyterChart` whose SVG ids are unique on the page (see module doc).

    Its JavaScript is set by :func:`enable_offline` (the offline Vega bundle, patched).
    """

    _ids_unique = False  # the bundle was patched
    _bundle_ready = False  # _esm holds the offline bundle (patched when possible)

    def __init__(self, chart: alt.TopLevelMixin | None = None, **kwargs: object) -> None:
        _load_bundle()
        options = dict(kwargs.pop("embed_options", None) or EMBED_OPTIONS)  # type: ignore[call-overload]
        if not ChartWidget._ids_unique:
            options["renderer"] = "canvas"  # no ids at all rather than ids two charts share
        super().__init__(chart, embed_options=options, **kwargs)
        self.add_class("recnb-chart")


def _render_static(spec: dict, **metadata: object) -> dict:
    """Altair renderer: a chart shown as cell output is a :class:`ChartWidget` too."""
    widget = ChartWidget(alt.Chart.from_dict(spec), embed_options=metadata.get("embed_options"))
    return widget._repr_mimebundle_()  # type: ignore[return-value]


def _load_bundle() -> None:
    """Give :class:`ChartWidget` the offline Vega bundle, patched for unique ids (once)."""
    if ChartWidget._bundle_ready:
        return
    alt.JupyterChart.enable_offline()
    patched = unique_id_bundle(alt.JupyterChart._esm)
    if patched is None:
        warnings.warn(
            "recnotebooks: this Vega bundle cannot be given unique SVG ids; charts use canvas",
            RuntimeWarning,
            stacklevel=3,
        )
    ChartWidget._esm, ChartWidget._ids_unique = patched or alt.JupyterChart._esm, patched is not None
    ChartWidget._bundle_ready = True


def enable_offline() -> None:
    """Render charts without network access (Vega bundled by ``vl-convert``).

    Applies to the apps' charts and to plain charts shown as cell output (the
    ``recnotebooks`` renderer, which shows them as :class:`ChartWidget` s). Call once per
    kernel; later calls are free.
    """
    _load_bundle()
    alt.JupyterChart.enable_offline()  # a plain JupyterChart a learner makes is offline too
    if alt.renderers.active != THEME:
        alt.renderers.enable(THEME)


_register()
alt.renderers.register(THEME, _render_static)
