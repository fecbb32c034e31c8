"""Exercises of notebook 05 (server design)."""

from __future__ import annotations

from recnotebooks.config import DLRMConfig, preset
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.servers import best_placement, compare_servers
from recnotebooks.viz.controls import option_values
from recnotebooks.viz.servers import SERVER_CONTROLS, explore_servers

from .core import exercise, number


def production_model() -> DLRMConfig:
    """mlperf_v1 with 10x the rows per table (about 1 TB of fp32 tables): production scale."""

    return preset("mlperf_v1").with_rows_scale(10)


def _per_joule_key() -> str:

    rows, _ = compare_servers(preset("rm3"))
    return str(max(rows, key=lambda r: float(r["samples_per_joule"]))["server"])  # type: ignore[arg-type]


def _where_key() -> str:

    return best_placement(production_model(), hardware("big_basin"), 8, 8192)[0]


def _outgrow_key() -> object:

    def placement(scale: object) -> object:
        rows = explore_servers(model="rm2", rows_scale=scale).tables["throughput"]  # type: ignore[arg-type]
        return next(r["placement"] for r in rows if r["metric"] == "big_basin")

    first = next((s for s in option_values(SERVER_CONTROLS["rows_scale"]) if placement(s) != "hbm"), None)
    if first is None:
        raise RuntimeError("rm2 fits Big Basin's HBM at every slider setting: this exercise needs updating")
    return first


@exercise(
    "05.per_joule",
    """
    Which server gives the most samples per joule for rm3 (compare_servers at batch 8192)?

    recnotebooks.perf.compare_servers(preset('rm3')) returns a row per server with samples_per_joule.

    Power counts every device of the node plus the host; throughput is per node.

    Sort the rows by samples_per_joule.
    """,
    answer=_per_joule_key,
)
def _per_joule(answer: object) -> tuple[bool, str]:

    rows, _ = compare_servers(preset("rm3"))
    names = [str(r["server"]) for r in rows]
    if answer not in names:
        raise ValueError(f"answer with one of {names}")
    if answer != _per_joule_key():
        return False, "Another server does more work per joule."
    return True, _per_joule_why(rows)


def _per_joule_why(rows: list[dict[str, object]]) -> str:
    """Why the most efficient server wins: its samples per joule against the runner-up's, and what
    bounds the GPU servers' step (at batch 8192, per-step overhead: a faster GPU draws more power
    without running much faster)."""

    def joules(r: dict[str, object]) -> float:
        return float(r["samples_per_joule"])  # type: ignore[arg-type]

    best, second = sorted(rows, key=joules, reverse=True)[:2]

    def said(r: dict[str, object]) -> str:
        return f"{float(r['throughput']):,.0f} samples/s on {float(r['node_power_w']):,.0f} W"  # type: ignore[arg-type]

    why = (
        f"Right: {best['server']} does {joules(best):.0f} samples per joule ({said(best)}), "
        f"{joules(best) / joules(second) - 1:.0%} more than {second['server']} ({said(second)})"
    )
    gpus = [r for r in rows if r["server"] != "cpu_cluster"]
    frugal = min(gpus, key=lambda r: float(r["node_power_w"]), default=None)  # type: ignore[arg-type]
    if frugal is best and all(r["bound_by"] == "overhead" for r in gpus):
        why += (
            ": at this batch every GPU server is bound by per-step overhead, so faster GPUs barely raise "
            "a node's throughput while they raise its power, and the GPU node drawing the least power wins"
        )
    return why + "."


@exercise(
    "05.where",
    """
    A production-scale model: mlperf_v1 with 10x the rows per table (lab.production_model()). Where do its
    tables live on one Big Basin node? Answer 'hbm', 'cache', 'remote' or a mix like 'hbm+cache'.

    Compare the model's table bytes with 8 x 16 GB of HBM and Big Basin's host DRAM.

    recnotebooks.perf.best_placement(config, hardware('big_basin'), 8, 8192) tries HBM, a cache in front of
    host DRAM, host DRAM and parameter servers, and keeps the fastest that fits.

    Tables need weights plus optimizer state; host DRAM must hold all of them for a cache.
    """,
    answer=_where_key,
)
def _where(answer: object) -> tuple[bool, str]:
    if not isinstance(answer, str) or not set(answer.split("+")) <= {"hbm", "cache", "remote"}:
        raise ValueError("answer with 'hbm', 'cache', 'remote' or a mix such as 'hbm+cache'")
    ok = answer == _where_key()
    return ok, (
        "Right: Big Basin's small host memory sends big tables across the network, which is what Zion's "
        "terabytes of DRAM were built to avoid."
        if ok
        else "Not there."
    )


@exercise(
    "05.outgrow",
    """
    In the Server Design Explorer with model rm2, raise 'table rows x': at which setting do Big Basin's tables
    first stop fitting in its HBM? (a number from the slider, e.g. 3)

    Watch the placement in brackets next to big_basin in the step-time chart.

    Big Basin has 8 x 16 GB of HBM; rm2's tables take about 4 GB at 1x, plus optimizer state and caches.

    recnotebooks.viz.servers.explore_servers(model='rm2', rows_scale=s) gives each server's placement.
    """,
    answer=_outgrow_key,
)
def _outgrow(answer: object) -> tuple[bool, str]:

    scales = option_values(SERVER_CONTROLS["rows_scale"])
    answer = number(answer, "the slider's setting")
    if answer not in scales:
        raise ValueError(f"answer with one of the slider's values {scales}")
    ok = answer == _outgrow_key()
    return ok, (
        "Right: from here Big Basin must keep rows in host DRAM or on parameter servers, while Zion's "
        "larger memory keeps them close."
        if ok
        else "Not that setting."
    )
