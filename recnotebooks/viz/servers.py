"""The Server Design Explorer (notebook 05): one model on one node of each server.

:func:`explore_servers` is the pure function: a model preset, a scale on its table rows, the
global batch and a GPU-cache hit rate in; per server (CPU training cluster, Big Basin, Zion,
DGX A100, DGX H100) the placement that fits (:func:`recnotebooks.perf.best_placement`), the
step by component, throughput per node and samples per joule out. Every number is
**modeled** from the hardware presets. Growing the tables shows the seed paper's story:
tables leave HBM for host DRAM behind a cache on Zion and for parameter servers on Big
Basin, and the most energy-efficient server changes.
"""

from __future__ import annotations

import dataclasses

from recnotebooks.config import DLRMConfig, preset
from recnotebooks.perf.explore import compare_servers
from recnotebooks.viz.app import App, HistoryEntry, Result, history_rows
from recnotebooks.viz.charts import metric_bars, time_breakdown
from recnotebooks.viz.controls import build_controls, human, option_values

__all__ = ["SERVERS", "SERVER_CONTROLS", "scaled_model", "explore_servers", "server_explorer"]

#: The servers compared: the seed paper's three and a modern DGX.
SERVERS = ("cpu_cluster", "big_basin", "zion", "dgx_a100", "dgx_h100")
SERVER_CONTROLS: dict[str, dict[str, object]] = {
    "model": {
        "options": ["rm1", "rm2", "rm3", "mlperf_v1", "criteo_terabyte", "dlrm_benchmark"],
        "value": "rm2",
        "label": "model",
        "dropdown": True,
    },  # fmt: skip
    "rows_scale": {
        "options": [("1/10", 0.1), ("1x", 1), ("3x", 3), ("10x", 10), ("30x", 30), ("100x", 100)],
        "value": 1,
        "label": "table rows x",
    },  # fmt: skip
    "batch_size": {"options": [2**i for i in range(10, 18)], "value": 8192, "label": "global batch per node"},
    "cache_hit_rate": {"options": [0.5, 0.8, 0.9, 0.95, 0.99], "value": 0.9, "label": "GPU cache hit rate"},
}


def scaled_model(model: str, rows_scale: float) -> DLRMConfig:
    """The preset ``model`` with every table's rows multiplied by ``rows_scale`` (at least 1 row)."""
    allowed = option_values(SERVER_CONTROLS["rows_scale"])
    if isinstance(rows_scale, bool) or rows_scale not in allowed:
        raise ValueError(f"rows_scale must be one of {allowed}, got {rows_scale!r}")
    models = option_values(SERVER_CONTROLS["model"])
    if model not in models:
        raise ValueError(f"model must be one of {models}, got {model!r}")
    cfg = preset(model)
    if rows_scale == 1:
        return cfg
    tables = tuple(
        dataclasses.replace(t, num_rows=max(1, round(t.num_rows * rows_scale))) for t in cfg.tables
    )
    return cfg.replace(tables=tables, name=f"{model} x{rows_scale:g} rows")


def explore_servers(*, model: str = "rm2", rows_scale: float = 1, batch_size: int = 8192,
                    cache_hit_rate: float = 0.9) -> Result:  # fmt: skip
    """Tables for ``model`` on one node of each of :data:`SERVERS` (see the module doc):
    ``breakdown`` (``server`` with its placement, ``phase``, ``seconds_per_step``) and
    ``throughput`` and ``per_joule`` (one row per server: ``metric`` = the server, ``value``,
    ``display``, ``placement``)."""
    if (
        isinstance(cache_hit_rate, bool)
        or not isinstance(cache_hit_rate, (int, float))
        or not 0 <= cache_hit_rate <= 1
    ):
        raise ValueError(f"cache_hit_rate must be a number in [0, 1], got {cache_hit_rate!r}")
    cfg = scaled_model(model, rows_scale)
    rows, parts = compare_servers(cfg, SERVERS, batch_size=batch_size, cache_hit_rate=cache_hit_rate)
    emb_gb = sum(t.num_rows for t in cfg.tables) * cfg.embedding_dim * 4 / 1e9

    def bar(r: dict[str, object], key: str, unit: str) -> dict[str, object]:
        v = float(r[key])  # type: ignore[arg-type]
        return {"metric": str(r["server"]), "value": v, "display": human(v, unit) + ("" if r["fits"] else " (no fit)"),
                "placement": r["placement"], "source": "modeled"}  # fmt: skip

    tables = {
        "breakdown": [
            {**p, "server": f"{p['server']} ({r['placement']})"}
            for r in rows
            for p in parts
            if p["server"] == r["server"]
        ],  # fmt: skip
        "throughput": [bar(r, "throughput", "") for r in rows],
        "per_joule": [bar(r, "samples_per_joule", "") for r in rows],
    }
    fitting = [r for r in rows if r["fits"]] or rows
    fast = max(fitting, key=lambda r: float(r["throughput"]))  # type: ignore[arg-type]
    frugal = max(fitting, key=lambda r: float(r["samples_per_joule"]))  # type: ignore[arg-type]
    notes = [f"MODELED: {cfg.name} ({emb_gb:,.1f} GB of fp32 tables), global batch {batch_size} per node.",
             "Tables live in: " + "; ".join(f"{r['server']} {r['placement']}" for r in rows) + ".",
             f"Fastest node: {fast['server']} ({float(fast['throughput']):,.0f} samples/s, bounded by "  # type: ignore[arg-type]
             f"{fast['bound_by']}); most samples per joule: {frugal['server']}."]  # fmt: skip
    bad = [str(r["server"]) for r in rows if not r["fits"]]
    if bad:
        notes.append(f"DOES NOT FIT on {', '.join(bad)} even with every placement tried.")
    return Result(tables=tables, notes=notes)


def _render(history: list[HistoryEntry]) -> object:
    now = history[0].label
    steps = time_breakdown(history[0].result.tables["breakdown"], by="server", title="Step time by component",
                           source="modeled", detail="slowest rank of one node; placement in brackets")  # fmt: skip
    # one faceted chart for both metrics (a row of servers each): composing fewer charts keeps updates fast
    rows = [{**r, "metric": f"{r['metric']} · {unit}"} for table, unit in (("throughput", "samples/s"),
            ("per_joule", "samples/J")) for r in history_rows(history, table)]  # fmt: skip
    bars = metric_bars(rows, highlight=now, title="Samples per second and per joule, one node",
                       source="modeled", columns=len(SERVERS), width=120,
                       detail="one bar per setting, the current one solid; power of the whole node")  # fmt: skip
    return (steps.properties(width=520) & bars).resolve_scale(color="independent")


def server_explorer(*, history: int = 4, **values: object) -> App:
    """The Server Design Explorer app; ``values`` override the default settings."""
    controls = build_controls(SERVER_CONTROLS, values, "the Server Design Explorer")
    return App("Server Design Explorer", controls, lambda **kw: explore_servers(**kw), _render, history=history,
               description="MODELED from hardware presets: one node of each server, first placement that fits")  # fmt: skip
