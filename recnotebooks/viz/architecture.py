"""The Architecture Explorer (notebook 01): DLRM shape → sizes, work and a measured step.

:func:`explore_architecture` is the pure function: architecture sliders in, tidy tables out
(``metrics``: parameters, FLOPs and embedding bytes per sample, arithmetic intensity,
memory — *computed* from the architecture; ``phases``: a per-phase step time *measured* on
this machine by :func:`recnotebooks.measure.step.measure_here` on a row-capped copy).
:func:`architecture_explorer` wraps it in an :class:`~recnotebooks.viz.app.App`.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt

from recnotebooks.config import DLRMConfig, architecture_config, preset
from recnotebooks.doctor import available_memory_bytes
from recnotebooks.measure.step import (
    MAX_MEASURED_STEP_S,
    MEASURE_DEADLINE_S,
    MEASURED_STEPS,
    check_measurable,
    measure_here,
)
from recnotebooks.measure.table_batching import published_speedups, speedups, table_batching_flags
from recnotebooks.perf.memory import memory_footprint
from recnotebooks.timing import PHASES
from recnotebooks.viz.app import App, HistoryEntry, Result, history_rows, trail_bars, trail_steps
from recnotebooks.viz.charts import metric_bars, metric_lines, part_bars
from recnotebooks.viz.controls import human
from recnotebooks.viz.theme import PHASE_COLORS
from recnotebooks.viz.tidy import band_px, stack, stack_room

__all__ = [
    "ARCHITECTURE_CONTROLS",
    "MODEL_PARTS",
    "architecture_config",
    "architecture_explorer",
    "explore_architecture",
    "model_parts",
    "model_parts_chart",
    "model_summary",
    "table_batching_chart",
]
# moved to recnotebooks.measure.step; kept here until the next release
__all__ += ["MAX_MEASURED_STEP_S", "MEASURED_STEPS", "MEASURE_DEADLINE_S", "check_measurable", "measure_here"]

_P2 = [2**i for i in range(4, 13)]
#: Options of each control: (label, value) pairs or a range; the defaults are a small
#: Criteo-like model (13 dense features, 8 tables of 1M rows, dim 32, batch 512).
ARCHITECTURE_CONTROLS: dict[str, dict[str, object]] = {
    "num_dense": {
        "options": [1, 4, 13, 32, 64, 128, 256, 512, 1024, 2560],
        "value": 13,
        "label": "dense features",
    },
    "num_tables": {"min": 1, "max": 64, "value": 8, "label": "tables"},
    "rows_per_table": {
        "options": [
            ("1k", 10**3),
            ("10k", 10**4),
            ("100k", 10**5),
            ("1M", 10**6),
            ("10M", 10**7),
            ("100M", 10**8),
        ],
        "value": 10**6,
        "label": "rows / table",
    },
    "embedding_dim": {"options": [4, 8, 16, 32, 64, 128, 256], "value": 32, "label": "embedding dim"},
    "pooling": {"options": [1, 2, 5, 10, 20, 40, 80, 120], "value": 1, "label": "pooling factor"},
    "bottom_width": {"options": _P2, "value": 256, "label": "bottom MLP width"},
    "bottom_depth": {"min": 1, "max": 5, "value": 3, "label": "bottom MLP layers"},
    "top_width": {"options": _P2, "value": 256, "label": "top MLP width"},
    "top_depth": {"min": 1, "max": 5, "value": 3, "label": "top MLP layers"},
    "batch_size": {"options": [2**i for i in range(5, 14)], "value": 512, "label": "batch size"},
    "interaction": {"options": ["dot", "cat"], "value": "dot", "label": "interaction"},
}


def explore_architecture(
    *,
    batch_size: int = 512,
    measure: bool = True,
    device: str = "cpu",
    time_budget_s: float = 0.2,
    **arch: object,
) -> Result:
    """Sizes and work of the architecture (computed) and a measured step breakdown.

    ``arch`` are :func:`architecture_config`'s arguments. Raises ``ValueError`` (with the
    reason) for a combination that is invalid or cannot be measured in memory here.
    """
    cfg = architecture_config(**arch)  # type: ignore[arg-type]
    mem = memory_footprint(
        cfg, batch_size=batch_size, sparse_optimizer="rowwise_adagrad", dense_optimizer="adagrad"
    )
    emb = cfg.embedding_bytes_per_sample()
    values = [
        ("parameters", float(cfg.parameters), human(cfg.parameters)),
        (
            "FLOPs per sample (fwd+bwd)",
            cfg.total_flops_per_sample(),
            human(cfg.total_flops_per_sample(), "FLOP"),
        ),
        (
            "embedding bytes per sample",
            emb["forward"] + emb["backward"],
            human(emb["forward"] + emb["backward"], "B"),
        ),
        ("arithmetic intensity (FLOP/B)", cfg.arithmetic_intensity(), human(cfg.arithmetic_intensity())),
        ("training memory (full model)", float(mem["total"]), human(mem["total"], "B")),
    ]
    metrics = [{"metric": m, "value": v, "display": d, "source": "analytic"} for m, v, d in values]
    avail = available_memory_bytes()
    fits = "fits in" if avail is not None and mem["total"] < avail else "would NOT fit in"
    where = "" if avail is None else f"; it {fits} the {human(avail, 'B')} available here"
    notes = [f"The full model needs {human(mem['total'], 'B')} to train (weights, row-wise Adagrad state, "
             f"activations at batch {batch_size}){where}."]  # fmt: skip
    tables: dict[str, list[dict[str, object]]] = {"metrics": metrics}
    if measure:
        m, cap = measure_here(cfg, batch_size, time_budget_s, device)
        tables["phases"] = m.table()
        notes.append(
            f"Measured on {m.device}: {m.seconds_per_step * 1e3:.1f} ms per step "
            f"({m.samples_per_s:,.0f} samples/s) of a copy with tables capped at "
            f"{min(cap, cfg.tables[0].num_rows):,} rows ({m.describe()})."
        )
    return Result(tables=tables, notes=notes)


def _render(history: list[HistoryEntry], measure: bool) -> object:
    now, trail = history[0].label, [e.label for e in history]
    if not measure:
        return metric_bars(
            history_rows(history, "metrics"),
            highlight=now,
            title="Sizes and work",
            source="analytic",
            columns=3,
        )
    room = stack_room(band_px(trail))  # the two charts line up their plots beside the trail's labels
    bars = trail_bars(history, room, title="Sizes and work", source="analytic")
    dev = history_rows(history, "phases")[0].get("device", "cpu")
    steps = trail_steps(history, "phases", phases=PHASES, title="Training step time by phase",
                        source="measured", detail=f"{dev}, tables capped", width=min(420, room))  # fmt: skip
    return stack(steps, bars)


def architecture_explorer(
    *,
    measure: bool = True,
    device: str = "cpu",
    time_budget_s: float = 0.2,
    history: int = 4,
    **values: object,
) -> App:
    """The Architecture Explorer app; ``values`` override the default slider settings.

    With ``measure=False`` it only computes sizes and work (instant); with ``measure=True``
    every change also trains a row-capped copy for ``time_budget_s`` on ``device``.
    """

    def compute(**kw: object) -> Result:
        return explore_architecture(measure=measure, device=device, time_budget_s=time_budget_s, **kw)

    what = "sizes computed from the architecture" + (
        "; step time measured here on a row-capped copy" if measure else ""
    )
    return App.from_specs(
        "Architecture Explorer",
        ARCHITECTURE_CONTROLS,
        values,
        compute,
        lambda h: _render(h, measure),
        history=history,
        description=what,
    )


def table_batching_chart(rows: list[dict[str, object]]) -> object:
    """Notebook 01's finding (c): the fused lookup's speedup over a per-table loop against the
    number of tables (measured here, beside TorchRec's published GPU figures), above the two
    step times. ``rows``: :func:`recnotebooks.measure.table_batching.measure_table_batching`'s."""

    first = rows[0]
    detail = f"{first['device']}, {first['threads']} thread(s), fastest of {first['repeats']} runs"
    title = "How many times faster one fused lookup is than a loop over tables"
    ratio = metric_lines(
        speedups(rows) + published_speedups(),
        x="num_tables",
        y="speedup",
        color="where",
        x_log=True,
        title=title,
        y_format=".2~f",
        y_rule=1.0,
        y_title="speedup (< 1: the loop is faster)",
    )
    ms = [{**r, "ms_per_step": float(r["seconds_per_step"]) * 1e3} for r in rows]  # type: ignore[arg-type]
    times = metric_lines(
        ms,
        x="num_tables",
        y="ms_per_step",
        color="implementation",
        x_log=True,
        y_log=True,
        title=f"One embedding-layer training step ({first['what']})",
        source="measured",
        detail=detail,
        y_format=".3~f",
    )
    chart = (ratio.properties(width=440, height=220) & times.properties(width=440, height=220)).resolve_scale(
        color="independent"
    )
    if table_batching_flags(rows):  # a busy machine or a step back against the trend: said above both charts
        warning = "⚠ NOT RELIABLE as a trend: why is printed below the chart"
        chart = chart.properties(title=alt.TitleParams(warning, color="#b42318", fontSize=13, anchor="start"))
    return chart


# ----- a model's parts: where its parameters and FLOPs go (notebook 01 §6) -----------------------
#: The parts of a DLRM :func:`model_parts` counts, in the order a sample meets them: the key of
#: each in :meth:`~recnotebooks.config.DLRMConfig.flops_per_sample`, and its name in words.
MODEL_PARTS: dict[str, str] = {
    "embedding": "embedding lookups",
    "bottom_mlp": "bottom MLP",
    "interaction": "interaction (dot, or DCN's cross layers)",
    "top_mlp": "top MLP",
}
_PART_COLORS = [PHASE_COLORS["embedding_forward"], PHASE_COLORS["bottom_mlp"], PHASE_COLORS["interaction"],
                PHASE_COLORS["top_mlp"]]  # fmt: skip


def _part_parameters(cfg: DLRMConfig) -> dict[str, float]:
    """Parameters of each of :data:`MODEL_PARTS`: the tables' entries, each MLP's weights and biases,
    the cross layers' (none for a dot or cat interaction)."""

    def mlp(which: str) -> float:
        return float(sum(i * o + o for i, o in cfg.mlp_layers(which)))

    return {
        "embedding": float(cfg.sparse_parameters),
        "bottom_mlp": mlp("bottom"),
        "interaction": float(cfg.cross_parameters),
        "top_mlp": mlp("top"),
    }


def _config(model: DLRMConfig | str) -> DLRMConfig:
    return preset(model) if isinstance(model, str) else model


def model_parts(
    models: Sequence[DLRMConfig | str] = ("mlperf_v1", "mlperf_dcnv2"),
) -> list[dict[str, object]]:
    """Where each model's parameters and work go, **computed** from its architecture: one row per
    model (a preset name or a config) and part of :data:`MODEL_PARTS`, with ``model``, ``part``
    (in words), ``parameters`` and ``parameter_share`` (of the model's), ``flops_per_sample``
    (forward + backward, :meth:`~recnotebooks.config.DLRMConfig.flops_per_sample`) and
    ``flops_share``, and ``source="analytic"``."""
    if isinstance(models, (str, DLRMConfig)) or not models:
        raise ValueError(
            f"models must be a non-empty sequence of preset names or DLRMConfigs, got {models!r}"
        )
    rows = []
    for m in models:
        cfg = _config(m)
        flops = {k: v["forward"] + v["backward"] for k, v in cfg.flops_per_sample().items()}
        params = _part_parameters(cfg)
        total_flops, total_params = sum(flops.values()), sum(params.values())
        for key, words in MODEL_PARTS.items():
            rows.append(
                {
                    "model": cfg.name,
                    "part": words,
                    "parameters": params[key],
                    "parameter_share": params[key] / total_params,
                    "flops_per_sample": flops[key],
                    "flops_share": flops[key] / total_flops,
                    "display": f"{human(flops[key], 'FLOP')} ({flops[key] / total_flops:.0%})",
                    "source": "analytic",
                }
            )
    return rows


def model_summary(model: DLRMConfig | str) -> dict[str, object]:
    """One model's headline sizes, **computed**: tables, lookups per sample, table and dense
    parameters (and the cross layers' among them), the top MLP's input width, FLOPs and embedding
    bytes per sample (forward + backward), and the table bytes in fp32."""
    cfg = _config(model)
    emb = cfg.embedding_bytes_per_sample()
    return {
        "model": cfg.name,
        "interaction": cfg.interaction,
        "tables": cfg.num_tables,
        "lookups_per_sample": cfg.lookups_per_sample,
        "table_parameters": cfg.sparse_parameters,
        "dense_parameters": cfg.dense_parameters,
        "cross_parameters": cfg.cross_parameters,
        "top_mlp_input": cfg.interaction_output_dim,
        "flops_per_sample": cfg.total_flops_per_sample(),
        "embedding_bytes_per_sample": emb["forward"] + emb["backward"],
        "table_gb_fp32": cfg.sparse_parameters * 4 / 1e9,
        "source": "analytic",
    }


def model_parts_chart(rows: list[dict[str, object]]) -> object:
    """:func:`model_parts`'s rows drawn: FLOPs per sample by part (one stacked bar per model), above
    the dense parameters by part (the tables' entries, thousands of times more, left out)."""

    def by_model(data: list[dict[str, object]], value: str, first: int, value_title: str, title: str,
                 detail: str) -> alt.Chart:  # fmt: skip
        """A stacked bar per model of ``value`` by part, from the ``first`` of :data:`MODEL_PARTS` on."""
        return part_bars(data, value=value, part="part", by="model", parts=list(MODEL_PARTS.values())[first:],
                         colors=_PART_COLORS[first:], text="display", value_title=value_title, title=title,
                         source="analytic", detail=detail, width=440)  # fmt: skip

    flops = by_model(rows, "flops_per_sample", 0, "FLOPs per sample (forward + backward)",
                     "Where the work of a sample goes", "multiply-add = 2 FLOPs")  # fmt: skip
    dense = [
        {**r, "display": f"{human(float(r['parameters']))} ({float(r['parameters']) / total:.0%} of dense)"}  # type: ignore[arg-type]
        for r in rows
        if r["part"] != MODEL_PARTS["embedding"]
        for total in [
            sum(
                float(x["parameters"])
                for x in rows  # type: ignore[arg-type,misc]
                if x["model"] == r["model"] and x["part"] != MODEL_PARTS["embedding"]
            )
        ]
    ]
    left_out = "the tables' entries, thousands of times more, not drawn"
    params = by_model(dense, "parameters", 1, "dense parameters (weights and biases)",
                      "Where the dense parameters are", left_out)  # fmt: skip
    return stack(flops, params)
