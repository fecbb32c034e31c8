"""Charts and interactive apps for the notebooks.

``charts`` holds the Altair chart factories (one theme, measured/modeled labels, offline
rendering), ``app`` the widget app pattern every notebook app follows, and the explorer
modules the apps themselves. Importing this package enables the ``recnotebooks`` theme.
"""

from recnotebooks.viz.charts import (
    hit_rate_curve,
    metric_bars,
    metric_lines,
    part_bars,
    rank_bars,
    ratio_bars,
    roofline,
    save_png,
    save_svg,
    time_breakdown,
    training_curves,
)
from recnotebooks.viz.reference import published_vs_modeled
from recnotebooks.viz.theme import PHASE_COLORS, PLACEMENT_COLORS, SOURCES, enable_offline, source_label

__all__ = [
    "PHASE_COLORS",
    "PLACEMENT_COLORS",
    "SOURCES",
    "enable_offline",
    "hit_rate_curve",
    "metric_bars",
    "metric_lines",
    "part_bars",
    "published_vs_modeled",
    "rank_bars",
    "ratio_bars",
    "roofline",
    "save_png",
    "save_svg",
    "source_label",
    "time_breakdown",
    "training_curves",
]
