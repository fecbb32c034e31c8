"""What a cross layer learned, drawn (notebook 01 §6): :func:`cross_weights_chart`.

One cell per product of two input features ``x_i x_j`` (``i <= j``), coloured and labelled with
the learned logit's coefficient on it (:meth:`recnotebooks.nn.crosses.PlantedCross.rows`); the
planted product is outlined.
"""

from __future__ import annotations

import altair as alt

from recnotebooks.viz.tidy import Rows, chart_title, check_rows, tooltip, with_data

__all__ = ["cross_weights_chart"]

CELL_PX = 64


def cross_weights_chart(rows: Rows, *, title: str | None = None, detail: str | None = None) -> alt.LayerChart:
    """A heatmap of the coefficient on each product ``row · column`` (rows of
    :meth:`~recnotebooks.nn.crosses.PlantedCross.rows`), red positive, blue negative, on a scale
    symmetric about 0; the planted product (``planted``) outlined in black."""
    data = check_rows(
        rows, "cross_weights_chart", numeric=("coefficient",), fields=("row", "column", "product")
    )
    names = sorted({str(r["row"]) for r in data} | {str(r["column"]) for r in data})
    top = max(abs(float(r["coefficient"])) for r in data) or 1.0  # type: ignore[arg-type]
    base = alt.Chart().encode(
        x=alt.X("column:N", sort=names, title=None, axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("row:N", sort=names, title=None),
    )
    cells = base.mark_rect(stroke="white", strokeWidth=2).encode(
        color=alt.Color(
            "coefficient:Q",
            scale=alt.Scale(scheme="redblue", domain=[-top, top], reverse=True),  # red: positive
            legend=alt.Legend(title="weight", format=".1f"),
        ),
        tooltip=[tooltip("product", "N"), tooltip("coefficient", "Q", ".3f", "learned weight")],
    )
    planted = base.mark_rect(fill=None, stroke="black", strokeWidth=3).transform_filter("datum.planted")
    labels = base.mark_text(fontSize=14).encode(
        text=alt.Text("coefficient:Q", format=".2f"),
        color=alt.condition(f"abs(datum.coefficient) > {0.6 * top}", alt.value("white"), alt.value("black")),
    )
    chart = alt.layer(cells, planted, labels).properties(
        width=CELL_PX * len(names),
        height=CELL_PX * len(names),
        title=chart_title(title or "What one cross layer learned: its weight on each product", data,
                          "measured", detail),
    )  # fmt: skip
    return with_data(chart, data)
