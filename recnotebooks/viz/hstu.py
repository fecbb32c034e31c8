"""The Generative Recommender Explorer (notebook 07): an HSTU step on GPUs, jagged and padded, beside a
step measured here.

:func:`explore_hstu` is the pure function. Its inputs: the history lengths (Yambda's shape, median
2.7k and mean 4.8k events, scaled; or every history the same length with the same tokens), the
longest history the model takes, the HSTU stack (layers, heads of 128 columns each, as MLPerf's
DLRMv4 has them), the histories per GPU and the hardware (a preset and its nodes). Its tables:

* ``modeled``: one step on one GPU by component (:func:`recnotebooks.perf.hstu.hstu_step`), for the
  **jagged** batch (no padding) and for the **padded** one (every history computed at the batch's
  longest), ``layout`` saying which;
* ``metrics``: the step's time, its MFU (model FLOPs over the bf16 peak), how much longer the padded
  step takes, the padding's share of a padded batch's tokens and a GPU's bytes over its HBM
  (:func:`recnotebooks.perf.hstu_memory.hstu_memory`: the tables' share, dense state, activations),
  all **modeled**;
* ``measured`` (with ``measure``): the CPU sibling ``hstu_small`` with the same layers and heads, at
  the lengths scaled down for a laptop, **measured** here
  (:func:`recnotebooks.measure.hstu.measure_hstu_step`) beside the model of this machine; a reliable
  measurement is kept and shown again while the setting it measured stays (its note says so).

:func:`flops_per_byte` draws what makes a sequence model different from DLRM: its history length
plays the part of DLRM's pooling factor, and it brings FLOPs with the bytes.
"""

from __future__ import annotations

import dataclasses
import math

import altair as alt

from recnotebooks.checks import check_choice, check_int
from recnotebooks.config import preset
from recnotebooks.config.hstu import HSTUConfig, hstu_preset
from recnotebooks.data.listening import YAMBDA_LENGTHS
from recnotebooks.measure.hstu import HSTUMeasurement, measure_hstu_step
from recnotebooks.measure.step import DoesNotFitError
from recnotebooks.perf.hardware import Hardware, hardware
from recnotebooks.perf.hstu import (
    COMPONENTS,
    HSTUStep,
    hstu_step,
    lognormal_lengths,
    model_flops,
    padding_waste,
)
from recnotebooks.perf.hstu_memory import HSTUMemory, devices_to_fit, hstu_memory
from recnotebooks.viz.app import App, HistoryEntry, Result, trail_bars
from recnotebooks.viz.charts import metric_lines, time_breakdown
from recnotebooks.viz.controls import human, option_values, percent
from recnotebooks.viz.tidy import band_px, stack, stack_room

__all__ = [
    "HSTU_CONTROLS",
    "MEASURED_HISTORIES",
    "SMALL_SCALE",
    "explore_hstu",
    "flops_per_byte",
    "flops_per_byte_chart",
    "history_lengths",
    "hstu_explorer",
    "hstu_model",
]

#: The histories of one batch measured here (a side panel: a few, so that it updates in about a second).
MEASURED_HISTORIES = 16
#: The lengths measured here are the modeled ones divided by this (the synthetic listening log's
#: own scale, :class:`recnotebooks.data.listening.ListeningConfig`), capped at ``hstu_small``'s longest.
SMALL_SCALE = 50
#: The head width of MLPerf's DLRMv4 (query/key and value columns a head) and of ``hstu_small``.
HEAD_DIM = {"dlrmv4": 128, "hstu_small": 32}
#: Reliable measurements here by (layers, heads, lengths): a setting measured once is shown again.
_MEASURED: dict[tuple[int, int, tuple[int, ...]], HSTUMeasurement] = {}

HSTU_CONTROLS: dict[str, dict[str, object]] = {
    "lengths": {
        "options": [
            ("Yambda/16", 1 / 16),
            ("Yambda/8", 1 / 8),
            ("Yambda/4", 1 / 4),
            ("Yambda/2", 1 / 2),
            ("Yambda", 1.0),
        ],
        "value": 1.0,
        "label": "history lengths (Yambda: median 2.7k, mean 4.8k)",
    },  # fmt: skip
    "spread": {
        "options": ["Yambda-shaped", "all equal"],
        "value": "Yambda-shaped",
        "label": "spread of the lengths",
    },
    "longest": {"options": [512, 1024, 2048, 4096], "value": 4096, "label": "longest history"},
    "layers": {"options": [1, 2, 3, 4, 5, 6, 8], "value": 3, "label": "layers"},
    "heads": {"options": [1, 2, 4, 8], "value": 4, "label": "heads (128 columns each)"},
    "batch": {"options": [64, 128, 256, 512, 1024], "value": 256, "label": "histories per GPU"},
    "hardware": {
        "options": ["dgx_a100", "dgx_a100_80gb", "dgx_h100", "h200_node", "dgx_b200", "gb200_nvl72"],
        "value": "dgx_h100",
        "label": "hardware",
        "dropdown": True,
    },
    "nodes": {"options": [1, 2, 4, 8], "value": 2, "label": "nodes"},
}


def history_lengths(count: int, scale: float, longest: int, spread: str = "Yambda-shaped") -> list[int]:
    """``count`` history lengths: Yambda's log-normal shape (the median and mean of
    :data:`~recnotebooks.data.listening.YAMBDA_LENGTHS` times ``scale``) capped at ``longest``
    (:func:`~recnotebooks.perf.hstu.lognormal_lengths`), or, ``spread="all equal"``, as many
    histories of one length with (nearly) the same tokens."""
    count, longest = check_int("count", count, lo=1), check_int("longest", longest, lo=1)
    check_choice("spread", spread, option_values(HSTU_CONTROLS["spread"]))
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not 0 < scale <= 1:
        raise ValueError(f"scale must be a number in (0, 1], got {scale!r}")
    median, mean = YAMBDA_LENGTHS["median"] * scale, YAMBDA_LENGTHS["mean"] * scale
    lengths = lognormal_lengths(count, median, mean, longest)
    if spread == "all equal":
        return [max(1, round(sum(lengths) / count))] * count
    return lengths


def hstu_model(name: str, layers: int, heads: int, longest: int) -> HSTUConfig:
    """The preset ``name`` (``"dlrmv4"`` or ``"hstu_small"``) with ``layers`` HSTU layers and ``heads`` heads
    of the preset's head width (:data:`HEAD_DIM`), for histories of up to ``longest`` events."""
    width = HEAD_DIM[check_choice("name", name, list(HEAD_DIM))]
    return hstu_preset(name).replace(
        num_layers=layers, heads=heads, qk_dim=width, v_dim=width, max_len=longest
    )


def _step_rows(step: HSTUStep, layout: str) -> list[dict[str, object]]:
    return [
        {"layout": layout, "phase": c, "seconds_per_step": step.seconds[c], "source": "modeled"}
        for c in COMPONENTS
        if step.seconds[c] > 0
    ]


def explore_hstu(
    *,
    lengths: float = 1.0,
    spread: str = "Yambda-shaped",
    longest: int = 4096,
    layers: int = 3,
    heads: int = 4,
    batch: int = 256,
    hardware_name: str = "dgx_h100",
    nodes: int = 2,
    measure: bool = True,
    time_budget_s: float = 0.3,
) -> Result:
    """MLPerf's DLRMv4 with these settings, modeled on ``nodes`` nodes of ``hardware_name`` (every GPU
    of each node; an NVL72 preset's node here is its whole NVLink domain, the rack's 18 trays) and, with
    ``measure``, its CPU sibling measured here (see the module docstring)."""
    hw = hardware(check_choice("hardware", hardware_name, option_values(HSTU_CONTROLS["hardware"])))
    config = hstu_model("dlrmv4", layers, heads, longest)
    run = history_lengths(batch, lengths, longest, spread)
    trays = nodes * hw.nodes_per_domain  # a rack of an NVL72 preset, else the node
    jagged = hstu_step(config, hw, run, gpus=hw.devices, nodes=trays)
    padded = hstu_step(config, hw, run, gpus=hw.devices, nodes=trays, padded=True)
    memory = hstu_memory(config, run, jagged.devices, hw)
    waste, _ = padding_waste(run)
    ratio = padded.step_seconds / jagged.step_seconds
    full = memory.total / hw.hbm_bytes
    metrics = [
        ("step time, jagged", jagged.step_seconds * 1e3, f"{jagged.step_seconds * 1e3:,.0f} ms"),
        ("MFU, jagged (bf16 peak)", jagged.mfu(), percent(jagged.mfu())),
        ("padded step ÷ jagged step", ratio, f"{ratio:.2f}x"),
        ("padding in a padded batch", waste, percent(waste)),
        ("a GPU's memory ÷ its HBM", full, f"{memory.total / 1e9:,.0f} of {hw.hbm_bytes / 1e9:,.0f} GB"),
    ]
    tables = {
        "modeled": _step_rows(jagged, "jagged") + _step_rows(padded, "padded"),
        "metrics": [{"metric": m, "value": v, "display": d, "source": "modeled"} for m, v, d in metrics],
    }
    notes = _notes(jagged, padded, run) + [_memory_note(memory, run, hw)]
    if measure:
        notes.append(_measured_here(tables, layers, heads, lengths, spread, time_budget_s))
    return Result(tables=tables, notes=notes)


def _notes(jagged: HSTUStep, padded: HSTUStep, run: list[int]) -> list[str]:
    """What the modeled steps say, in words: the step and what bounds it, and the padding."""
    parts = jagged.seconds
    bound = max(parts, key=parts.__getitem__)
    world, tokens = jagged.devices, sum(run)
    return [
        f"MODELED on {world} GPUs ({jagged.hw.name}): {len(run):,} histories of {tokens / len(run):,.0f} "
        f"events on average per GPU; the jagged step {jagged.step_seconds * 1e3:,.0f} ms, bounded by "
        f"{bound} ({parts[bound] / jagged.step_seconds:.0%}); MFU {percent(jagged.mfu())}; "
        f"{human(jagged.tokens_per_s)} tokens/s in all.",
        f"Padded to the batch's longest history ({max(run):,} events), a GPU computes "
        f"{len(run) * max(run):,} tokens for {tokens:,}: {percent(padding_waste(run)[0])} padding; the step "
        f"takes {padded.step_seconds * 1e3:,.0f} ms ({padded.step_seconds / jagged.step_seconds:.2f}x), "
        f"MFU {percent(padded.mfu())} (a padded kernel also computes the causal mask's zeros).",
    ]


def _memory_note(memory: HSTUMemory, run: list[int], hw: Hardware) -> str:
    """Whether a GPU holds its share (:func:`~recnotebooks.perf.hstu_memory.hstu_memory`), and the
    fewest GPUs that would (:func:`~recnotebooks.perf.hstu_memory.devices_to_fit`)."""
    b = memory.bytes
    tables = (b["tables"] + b["table_optimizer"]) / 1e9
    verdict = "fits" if memory.fits(hw) else "does NOT fit"
    try:
        fewest = devices_to_fit(memory.config, run, hw)
        nodes = -(-fewest // hw.devices)
        need = (
            f"the fewest {hw.name} GPUs that hold it: {fewest:,} "
            f"({nodes:,} node{'s' if nodes > 1 else ''} of {hw.devices})"
        )
    except ValueError:
        need = f"no number of {hw.name} GPUs holds it at this batch: lower the histories per GPU"
    return (
        f"MODELED memory per GPU: {memory.total / 1e9:,.1f} GB of its {hw.hbm_bytes / 1e9:,.0f} GB "
        f"({tables:,.1f} GB of table shards, {b['activations'] / 1e9:,.1f} GB of activations): it "
        f"{verdict} (a reserve kept free); {need}."
    )


def _measured_here(
    tables: dict[str, list[dict[str, object]]],
    layers: int,
    heads: int,
    scale: float,
    spread: str,
    time_budget_s: float,
) -> str:
    """The CPU sibling (``hstu_small`` with these layers and heads) measured here on
    :data:`MEASURED_HISTORIES` histories at the lengths scaled by ``1 / SMALL_SCALE``, beside the model of
    this machine: adds the ``measured`` table; the note."""
    small = hstu_model("hstu_small", layers, heads, hstu_preset("hstu_small").max_len)
    run = history_lengths(MEASURED_HISTORIES, scale / SMALL_SCALE, small.max_len, spread)
    key = (layers, heads, tuple(run))
    m = _MEASURED.get(key)
    if m is None:
        try:
            m = measure_hstu_step(small, run, time_budget_s=time_budget_s)
        except DoesNotFitError as e:
            return f"Not measured here: {e}."
        if m.reliable:  # one that cannot be trusted is taken again next time
            _MEASURED[key] = m
    else:
        m = dataclasses.replace(m, reused=True)
    machine = hardware("this_machine")
    here = hstu_step(small, machine, run, dtype="fp32", fused_attention=False)
    rows = [{**r, "where": "MODELED for this machine", "source": "modeled"}
            for r in _step_rows(here, "jagged")]  # fmt: skip
    rows += [{**r, "where": "MEASURED here"} for r in m.table() if float(r["seconds_per_step"]) > 0]  # type: ignore[arg-type]
    tables["measured"] = rows
    return (
        f"MEASURED here ({m.device}): hstu_small with {layers} layer(s) and {heads} head(s) of "
        f"{HEAD_DIM['hstu_small']}, {len(run)} histories of {sum(run) / len(run):,.0f} events on average "
        f"(longest {max(run)}): {m.seconds_per_step * 1e3:,.1f} ms a step ({m.describe()}); the model "
        f"predicts {here.step_seconds * 1e3:,.1f} ms for this machine{m.model_note(machine)}."
    )


def _render(history: list[HistoryEntry]) -> alt.TopLevelMixin:
    now, values = history[0].result.tables, history[0].values
    where = list(dict.fromkeys(str(r["where"]) for r in now.get("measured", [])))
    room = stack_room(band_px(["jagged", "padded"]), band_px([e.label for e in history], titled=False),
                      band_px(where) if where else 0)  # fmt: skip
    hw, nodes = values["hardware"], values["nodes"]
    charts = [
        time_breakdown(now["modeled"], by="layout", phases=list(COMPONENTS), title="One step on one GPU",
                       source="modeled", width=min(480, room),
                       detail=f"{hw} x {nodes} node(s); padded: every history at the batch's longest"),
        trail_bars(history, room, title="The step, its MFU, its padding and its memory", source="modeled",
                   columns=2,
                   detail="one bar per setting, the current one solid"),
    ]  # fmt: skip
    if where:
        charts.append(
            time_breakdown(
                now["measured"],
                by="where",
                title="A step of hstu_small here",
                width=min(480, room),
                detail=f"{MEASURED_HISTORIES} histories, lengths / {SMALL_SCALE}; compare the totals: the "
                "model splits a step by kind of work, the measurement by phase",
            )  # fmt: skip
        )
    return stack(*charts)


def hstu_explorer(
    *, measure: bool = True, time_budget_s: float = 0.3, history: int = 4, **values: object
) -> App:
    """The Generative Recommender Explorer app; ``values`` override the default settings."""

    def compute(hardware: str, **kw: object) -> Result:
        return explore_hstu(hardware_name=hardware, measure=measure, time_budget_s=time_budget_s, **kw)  # type: ignore[arg-type]

    return App.from_specs(
        "Generative Recommender Explorer",
        HSTU_CONTROLS,
        values,
        compute,
        _render,
        history=history,
        description="MLPerf's DLRMv4 (HSTU) MODELED on GPUs"
        + ("; its CPU sibling hstu_small MEASURED here" if measure else ""),
    )


#: History lengths :func:`flops_per_byte` draws (events).
LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096)


def flops_per_byte(lengths: tuple[int, ...] = LENGTHS) -> list[dict[str, object]]:
    """FLOPs per byte of embedding traffic, forward and backward, **computed** from the architectures:
    MLPerf's DLRMv4 per history of each of ``lengths`` events (its model FLOPs,
    :func:`~recnotebooks.perf.hstu.model_flops`; its rows: one per event table per event and one per
    contextual table per history, read, their gradients written, and updated: 4 times a row's fp32 bytes)
    beside MLPerf's DLRM-DCNv2 per sample (:meth:`~recnotebooks.config.DLRMConfig.total_flops_per_sample`
    over :meth:`~recnotebooks.config.DLRMConfig.embedding_bytes_per_sample`), which does not depend on a
    history. Rows: ``model``, ``length``, ``flops``, ``bytes``, ``flops_per_byte``, ``source``."""
    v4, dcn = hstu_preset("dlrmv4"), preset("mlperf_dcnv2")
    dcn_bytes = sum(dcn.embedding_bytes_per_sample().values())
    rows: list[dict[str, object]] = []
    for n in lengths:
        n = check_int("lengths[i]", n, lo=1, hi=v4.max_len)
        lookups = n * len(v4.event_tables) + len(v4.context)
        row_bytes = v4.dim * 4
        hstu_bytes = lookups * (4 * row_bytes + 8)  # read, gradient, read and write to update; the id
        flops = model_flops(v4, [n])
        rows.append({"model": "DLRMv4 (HSTU), a history", "length": n, "flops": flops, "bytes": hstu_bytes,
                     "flops_per_byte": flops / hstu_bytes, "source": "analytic"})  # fmt: skip
        rows.append({"model": "DLRM-DCNv2, a sample", "length": n, "flops": dcn.total_flops_per_sample(),
                     "bytes": dcn_bytes, "flops_per_byte": dcn.total_flops_per_sample() / dcn_bytes,
                     "source": "analytic"})  # fmt: skip
    return rows


def flops_per_byte_chart(rows: list[dict[str, object]]) -> alt.LayerChart:
    """:func:`flops_per_byte`'s rows against the history length, one line per model."""
    if not rows or not all(math.isfinite(float(r["flops_per_byte"])) for r in rows):  # type: ignore[arg-type]
        raise ValueError("flops_per_byte_chart needs the rows of flops_per_byte")
    chart = metric_lines(rows, x="length", y="flops_per_byte", color="model", x_log=True, y_log=True,
                         title="FLOPs per byte of embedding traffic", source="analytic",
                         detail="forward and backward; DLRM-DCNv2 has no history: the same at every length",
                         x_title="history length (events)", y_title="FLOPs per byte", y_format="~s",
                         x_format=",d")  # fmt: skip
    return chart.properties(width=420, height=200)
