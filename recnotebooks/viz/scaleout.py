"""Notebook 04's charts of multi-GPU scale-out, all **modeled**: each draws the rows of one
function of :mod:`recnotebooks.perf.scaleout`.

* :func:`strategy_chart`: samples/s and embedding imbalance per planner strategy
  (``compare_strategies``);
* :func:`scale_out_chart`: all-to-all's share of the step and samples/s against GPUs, one line per
  link (``scale_out``);
* :func:`two_d_chart`: the step of each 2D sparse-parallel layout (``two_d``);
* :func:`rack_chart`: 64 GPUs as one NVLink rack or as eight nodes over InfiniBand
  (``rack_or_nodes``).

The Sharding Explorer, which runs plans for real beside the model, is :mod:`recnotebooks.viz.sharding`.
"""

from __future__ import annotations

from collections.abc import Callable

from recnotebooks.checks import check_float, check_int
from recnotebooks.viz.charts import metric_bars, metric_lines, time_breakdown
from recnotebooks.viz.controls import human
from recnotebooks.viz.tidy import stack

__all__ = ["PCIE_ONE_NODE", "rack_chart", "scale_out_chart", "strategy_chart", "two_d_chart"]


def strategy_chart(rows: list[dict[str, object]], title: str = "Planner strategies") -> object:
    """Samples/s and embedding imbalance per planner strategy
    (:func:`recnotebooks.perf.scaleout.compare_strategies` rows), **modeled**."""
    metrics = (
        ("samples per second", "samples_per_s"),
        ("embedding imbalance (slowest / mean rank)", "imbalance"),
    )
    bars = [
        {
            "metric": m,
            "setting": r["strategy"],
            "value": r[k],
            "source": "modeled",
            "display": f"{check_float(k, r[k]):.2f}" if k == "imbalance" else human(check_float(k, r[k])),
        }
        for r in rows
        for m, k in metrics
    ]
    what = "naive: round-robin; greedy: balanced by table size; cost: balanced by modeled work"
    return metric_bars(bars, columns=2, title=title, source="modeled", detail=what)


#: Why :func:`recnotebooks.perf.scaleout.scale_out` draws PCIe within one node only.
PCIE_ONE_NODE = (
    "PCIe stops at one node: past it a GPU's peer and network traffic share one PCIe x16 link, "
    "which the model does not split, so it leaves those points out rather than draw them too fast"
)


def scale_out_chart(rows: list[dict[str, object]]) -> object:
    """All-to-all's share of the step and samples/s against GPUs, one line per link
    (:func:`recnotebooks.perf.scaleout.scale_out` rows), **modeled**. When the PCIe line ends
    before the others, the subtitle says why (:data:`PCIE_ONE_NODE`)."""
    pcie = [check_int("devices", r["devices"]) for r in rows if r["link"] == "pcie"]
    others = [check_int("devices", r["devices"]) for r in rows if r["link"] != "pcie"]
    why = PCIE_ONE_NODE if pcie and others and max(pcie) < max(others) else None
    share = metric_lines(rows, x="devices", y="all_to_all_share", color="link", x_log=True, y_format=".0%",
                         title="All-to-all's share of the step", source="modeled", detail=why, x_title="GPUs",
                         y_title="share of the step")  # fmt: skip
    rate = metric_lines(rows, x="devices", y="samples_per_s", color="link", x_log=True, y_log=True,
                        title="Training throughput", source="modeled", x_title="GPUs",
                        y_title="samples / s")  # fmt: skip
    return stack(share, rate)


def two_d_chart(rows: list[dict[str, object]]) -> object:
    """The step of each 2D layout (:func:`recnotebooks.perf.scaleout.two_d` rows), split into the
    all-to-all inside a group, the replicas' gradient sync and the rest, **modeled**."""
    what = "groups x GPUs per group; all_reduce: the replicas' embedding-gradient sync; overhead: the rest"
    return _layout_steps(
        rows,
        lambda r: f"{r['layout']} ({check_float('samples_per_s', r['samples_per_s']) / 1e6:.1f} M samples/s)",
        "replica_sync_ms",
        "2D sparse parallelism: one step on 64 GPUs",
        what,
    )


def rack_chart(rows: list[dict[str, object]], detail: str | None = None) -> object:
    """The step of each layout of :func:`recnotebooks.perf.scaleout.rack_or_nodes`, split into its
    all-to-all, its all-reduce and the rest, **modeled**; each bar names NCCL's pick for its all-reduce."""
    return _layout_steps(
        rows,
        lambda r: f"{r['layout']} ({r['all_reduce_algorithm']} all-reduce)",
        "all_reduce_ms",
        "64 GPUs: one NVLink rack or eight nodes over InfiniBand",
        detail,
    )


def _layout_steps(
    rows: list[dict[str, object]],
    label: Callable[[dict[str, object]], str],
    all_reduce: str,
    title: str,
    detail: str | None,
) -> object:
    """One bar per layout of ``rows`` (named by ``label``): its step split into the all-to-all
    (``all_to_all_ms``), the all-reduce (the column ``all_reduce``) and the rest (``rest_ms``)."""
    parts = (("all_to_all", "all_to_all_ms"), ("all_reduce", all_reduce), ("overhead", "rest_ms"))
    bars = [
        {"layout": label(r), "phase": ph, "seconds_per_step": check_float(k, r[k]) / 1e3, "source": "modeled"}
        for r in rows
        for ph, k in parts
    ]
    return time_breakdown(bars, by="layout", phases=[p for p, _ in parts], source="modeled", title=title,
                          detail=detail)  # fmt: skip
