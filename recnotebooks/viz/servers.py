"""The Server Design Explorer (notebook 05): one model on one node of each server.

:func:`explore_servers` is the pure function: a model preset, a scale on its table rows, the
global batch and a GPU-cache hit rate in; per server (CPU training cluster, Big Basin, Zion,
DGX A100, DGX H100) the placement that fits (:func:`recnotebooks.perf.best_placement`), the
step by component, throughput per node and samples per joule out. Every number is
**modeled** from the hardware presets; a node's power counts its devices, its host and the
parameter servers its remote tables need. Growing the tables shows the seed paper's story:
tables leave HBM; Big Basin's small host memory sends them to parameter servers over the
network, while Zion's CPUs keep them in their own DRAM and pool them there, and the most
energy-efficient server changes.
"""

from __future__ import annotations

from recnotebooks.config import DLRMConfig, preset
from recnotebooks.perf.servers import SERVERS, compare_servers
from recnotebooks.viz.app import App, HistoryEntry, Result, history_rows, trail_bars
from recnotebooks.viz.charts import time_breakdown
from recnotebooks.viz.controls import human, option_values
from recnotebooks.viz.tidy import band_px, stack, stack_room

__all__ = [
    "COST_METRIC",
    "SERVERS",
    "SERVER_CONTROLS",
    "SERVER_METRICS",
    "scaled_model",
    "explore_servers",
    "server_explorer",
    "server_bars",
]

SERVER_CONTROLS: dict[str, dict[str, object]] = {
    "model": {
        "options": ["rm1", "rm2", "rm3", "mlperf_v1", "criteo_terabyte", "dlrm_benchmark"],
        "value": "rm2",
        "label": "model",
        "dropdown": True,
    },
    "rows_scale": {
        "options": [("1/10", 0.1), ("1x", 1), ("3x", 3), ("10x", 10), ("30x", 30), ("100x", 100)],
        "value": 1,
        "label": "table rows x",
    },
    "batch_size": {"options": [2**i for i in range(10, 18)], "value": 8192, "label": "global batch per node"},
    "cache_hit_rate": {"options": [0.5, 0.8, 0.9, 0.95, 0.99], "value": 0.9, "label": "GPU cache hit rate"},
}


def scaled_model(model: str, rows_scale: float) -> DLRMConfig:
    """The preset ``model`` with every table's rows multiplied by ``rows_scale`` (at least 1 row),
    both checked against the explorer's options (:meth:`DLRMConfig.with_rows_scale` scales)."""
    allowed = option_values(SERVER_CONTROLS["rows_scale"])
    if isinstance(rows_scale, bool) or rows_scale not in allowed:
        raise ValueError(f"rows_scale must be one of {allowed}, got {rows_scale!r}")
    models = option_values(SERVER_CONTROLS["model"])
    if model not in models:
        raise ValueError(f"model must be one of {models}, got {model!r}")
    return preset(model).with_rows_scale(rows_scale)


def explore_servers(
    *, model: str = "rm2", rows_scale: float = 1, batch_size: int = 8192, cache_hit_rate: float = 0.9
) -> Result:
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
        return {
            "metric": str(r["server"]),
            "value": v,
            "display": human(v, unit) + ("" if r["fits"] else " (no fit)"),
            "placement": r["placement"],
            "source": "modeled",
        }

    tables = {
        "breakdown": [
            {**p, "server": f"{p['server']} ({r['placement']})"}
            for r in rows
            for p in parts
            if p["server"] == r["server"]
        ],
        "throughput": [bar(r, "throughput", "") for r in rows],
        "per_joule": [bar(r, "samples_per_joule", "") for r in rows],
    }
    fitting = [r for r in rows if r["fits"]] or rows
    fast = max(fitting, key=lambda r: float(r["throughput"]))  # type: ignore[arg-type]
    frugal = max(fitting, key=lambda r: float(r["samples_per_joule"]))  # type: ignore[arg-type]
    notes = [
        f"MODELED: {cfg.name} ({emb_gb:,.1f} GB of fp32 tables), global batch {batch_size} per node.",
        "Tables live in: " + "; ".join(f"{r['server']} {r['placement']}" for r in rows) + ".",
        f"Fastest node: {fast['server']} ({float(fast['throughput']):,.0f} samples/s, bounded by "  # type: ignore[arg-type]
        f"{fast['bound_by']}); most samples per joule: {frugal['server']}.",
    ]
    remote = [f"{r['server']} {r['parameter_servers']}" for r in rows if r["parameter_servers"]]
    if remote:
        notes.append("Parameter servers whose power is counted: " + ", ".join(remote) + ".")
    bad = [str(r["server"]) for r in rows if not r["fits"]]
    if bad:
        notes.append(f"DOES NOT FIT on {', '.join(bad)} even with every placement tried.")
    return Result(tables=tables, notes=notes)


def _render(history: list[HistoryEntry]) -> object:
    trail = [e.label for e in history]
    breakdown = history[0].result.tables["breakdown"]
    servers = list(dict.fromkeys(str(r["server"]) for r in breakdown))  # "zion (hbm+cache+remote)"
    room = stack_room(band_px(servers), band_px(trail, titled=False))  # plots line up at the wider band
    steps = time_breakdown(
        breakdown,
        by="server",
        title="Step time by component",
        source="modeled",
        detail="slowest rank of one node; placement in brackets",
        width=min(480, room),
    )
    # one faceted chart for both metrics (a row of servers each): composing fewer charts keeps updates fast
    rows = [
        {**r, "metric": f"{r['metric']}: {unit}", "unit": unit}
        for table, unit in (("throughput", "samples per second"), ("per_joule", "samples per joule"))
        for r in history_rows(history, table)
    ]
    bars = trail_bars(
        history,
        room,
        rows=rows,
        title="Samples per second and per joule, one node",
        source="modeled",
        columns=len(SERVERS),  # a row per quantity where it fits; fewer per row on a laptop
        detail="one bar per setting, the current one solid; one scale per quantity; "
        "power of the node and its parameter servers",
        shared_scale="unit",
    )
    return stack(steps, bars)


def server_explorer(*, history: int = 4, **values: object) -> App:
    """The Server Design Explorer app; ``values`` override the default settings."""
    return App.from_specs(
        "Server Design Explorer",
        SERVER_CONTROLS,
        values,
        explore_servers,
        _render,
        history=history,
        description="MODELED from hardware presets: one node of each server, fastest placement that fits",
    )


#: Human names of the per-server figures :func:`server_bars` draws.
SERVER_METRICS = {"throughput": "samples per second", "samples_per_joule": "samples per joule"}
#: ... and the cost of a billion samples (a node's device-hours at each preset's price, and its
#: parameter servers'), which :func:`~recnotebooks.perf.servers.compare_servers` also gives.
COST_METRIC = {"usd_per_billion_samples": "USD per billion samples"}


def server_bars(
    summary: list[dict[str, object]], models: list[str], metrics: dict[str, str] | None = None
) -> list[dict[str, object]]:
    """Rows for :func:`~recnotebooks.viz.charts.metric_bars` from the summary of
    :func:`~recnotebooks.perf.servers.compare_models`: one panel per model and figure of ``metrics``
    (a summary column and its name in words; default :data:`SERVER_METRICS`), e.g.
    ``"rm1: samples per joule"``, one bar per server, its placement after the value (a price in
    US dollars as the course writes money: ``"USD 13.4 (hbm)"``)."""
    rows = []
    for m in models:
        for key, name in (metrics or SERVER_METRICS).items():
            for r in summary:
                if r["model"] == m:
                    v = float(r[key])  # type: ignore[arg-type]
                    shown = f"USD {v:,.3g}" if key.startswith("usd") else human(v)
                    rows.append(
                        {
                            "metric": f"{m}: {name}",
                            "value": v,
                            "setting": r["server"],
                            "display": f"{shown} ({r['placement']})",
                            "source": "modeled",
                        }
                    )
    return rows
