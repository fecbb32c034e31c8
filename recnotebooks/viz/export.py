"""Charts as files: PNG and SVG written offline by ``vl-convert`` (no browser, no network)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["save_png", "save_svg"]


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
