"""The GPU Advantage Explorer (notebook 02): how much faster than a CPU node is a GPU, per model?

The seed paper's finding (a): a GPU's advantage over a CPU node is large for MLP-heavy models
and small for embedding-heavy ones. :func:`gpu_advantage` is the pure function: a GPU server
preset, how many of its GPUs, the batch per device and a scale on the tables' rows in; for
RM1 and RM2 (embedding-heavy), RM3 (MLP-heavy) and the Efficiency Explorer's own
architecture, the throughput of the GPUs over one CPU training node
(:func:`recnotebooks.perf.servers.gpu_over_cpu`), each at its fastest placement that fits.
Every number is **modeled**. Its notes set the finding beside what the model shows for the
setting (:func:`finding_a`): similar gains per GPU while every table lives in HBM, and the gap
of the finding once the embedding-heavy models' tables do not. No published ratio is drawn:
the seed paper's own ratios could not be checked against its text here, so none is quoted.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

from recnotebooks.checks import check_choice
from recnotebooks.config import DLRMConfig, architecture_config, preset
from recnotebooks.perf.cost import COMPONENTS
from recnotebooks.perf.hardware import HARDWARE, hardware
from recnotebooks.perf.servers import CPU_NODE, gpu_over_cpu
from recnotebooks.viz.app import App, HistoryEntry, Result, trail_bars
from recnotebooks.viz.charts import time_breakdown
from recnotebooks.viz.controls import build_controls, option_values
from recnotebooks.viz.tidy import band_px, stack, stack_room

__all__ = [
    "ADVANTAGE_CONTROLS",
    "ADVANTAGE_MODELS",
    "advantage_models",
    "gpu_advantage",
    "advantage_explorer",
    "finding_a",
]

#: The models compared, with what kind of model each is.
ADVANTAGE_MODELS = {
    "rm1": "embedding-heavy",
    "rm2": "embedding-heavy",
    "rm3": "MLP-heavy",
    "explorer": "the Efficiency Explorer's model",
}
#: The seed paper's finding (a), in its words' substance (Acun et al., HPCA 2021,
#: https://arxiv.org/abs/2011.05497; :data:`recnotebooks.published.sources.DOCUMENTS` ``"seed"``).
FINDING_A = (
    "the seed paper's finding (a): a GPU's advantage over a CPU node is large for MLP-heavy models "
    "and small for embedding-heavy ones"
)
_EMBEDDING_HEAVY = ("rm1", "rm2")
ADVANTAGE_CONTROLS: dict[str, dict[str, object]] = {
    "hardware": {
        "options": [h for h, hw in HARDWARE.items() if hw.kind == "gpu"],
        "value": "big_basin",
        "label": "GPU server",
        "dropdown": True,
    },
    "gpus": {"options": [1, 2, 4, 8], "value": 1, "label": "GPUs (vs one CPU node)"},
    "batch_per_device": {"options": [256, 1024, 4096, 16384], "value": 4096, "label": "batch per device"},
    "rows_scale": {
        "options": [("1x", 1), ("3x", 3), ("10x", 10), ("30x", 30), ("100x", 100)],
        "value": 1,
        "label": "table rows x",
    },
}


def advantage_models(rows_scale: float = 1, **arch: object) -> dict[str, DLRMConfig]:
    """RM1, RM2, RM3 and the Efficiency Explorer's architecture (:func:`architecture_config`,
    the explorers' defaults changed by ``arch``), every table's rows scaled by ``rows_scale``."""
    allowed = option_values(ADVANTAGE_CONTROLS["rows_scale"])
    if isinstance(rows_scale, bool) or rows_scale not in allowed:
        raise ValueError(f"rows_scale must be one of {allowed}, got {rows_scale!r}")
    try:
        own = architecture_config(**arch)  # type: ignore[arg-type]  # the explorers' defaults, changed by arch
    except TypeError as e:
        raise KeyError(f"unknown architecture setting in {sorted(arch)}: {e}") from None
    models = {name: preset(name) for name in ("rm1", "rm2", "rm3")}
    models["explorer"] = own.replace(name="explorer")
    return {k: m.with_rows_scale(rows_scale) if rows_scale != 1 else m for k, m in models.items()}


def gpu_advantage(
    *,
    hardware_name: str = "big_basin",
    gpus: int = 1,
    batch_per_device: int = 4096,
    rows_scale: float = 1,
    **arch: object,
) -> Result:
    """Tables ``advantage`` (one row per model: ``metric`` = the model and its kind, ``value`` =
    GPU ÷ CPU-node throughput, ``display``, placements and bounds, shares) and ``steps`` (the
    modeled step of each model on the GPUs and on the CPU node, by component)."""
    hw = hardware(check_choice("hardware_name", hardware_name, option_values(ADVANTAGE_CONTROLS["hardware"])))
    check_choice("batch_per_device", batch_per_device, option_values(ADVANTAGE_CONTROLS["batch_per_device"]))
    if gpus not in option_values(ADVANTAGE_CONTROLS["gpus"]) or isinstance(gpus, bool) or gpus > hw.devices:
        raise ValueError(
            f"gpus must be one of {option_values(ADVANTAGE_CONTROLS['gpus'])} (at most {hw.devices}), "
            f"got {gpus!r}"
        )
    advantage, steps = [], []
    for name, cfg in advantage_models(rows_scale, **arch).items():
        row, g, c = gpu_over_cpu(cfg, hw, gpus=gpus, batch_per_device=batch_per_device)
        label = f"{name}: {ADVANTAGE_MODELS[name]}"  # a panel header on two lines
        advantage.append(
            {
                **row,
                "metric": label,
                "name": name,
                "value": float(row["ratio"]),
                "display": f"{float(row['ratio']):.1f}x",
            }
        )
        for who, r, place in ((f"{gpus} GPU", g, row["gpu_placement"]), ("CPU", c, row["cpu_placement"])):
            b = r.breakdown()
            steps += [
                {
                    "model_and_device": f"{name} · {who} ({place})",
                    "phase": k,
                    "seconds_per_step": b[k] / r.batch_size * batch_per_device,
                    "source": "modeled",
                }
                for k in COMPONENTS
                if b[k] > 0
            ]
    return Result(tables={"advantage": advantage, "steps": steps}, notes=_notes(advantage, hw.name, gpus))


def _notes(advantage: list[dict[str, object]], hw: str, gpus: int) -> list[str]:
    ratios = ", ".join(f"{r['name']} {float(r['ratio']):.1f}x" for r in advantage)  # type: ignore[arg-type]
    big = max(advantage, key=lambda r: float(r["ratio"]))  # type: ignore[arg-type]
    small = min(advantage, key=lambda r: float(r["ratio"]))  # type: ignore[arg-type]
    where = "; ".join(f"{r['name']}: GPU {r['gpu_placement']}, CPU {r['cpu_placement']}" for r in advantage)
    return [
        f"MODELED: {gpus} GPU{'s' if gpus > 1 else ''} of a {hw} over one {CPU_NODE} node, "
        f"throughput: {ratios}.",
        f"Largest advantage: {big['name']}; smallest: {small['name']}. Tables live in: {where}.",
        finding_a(advantage),
    ]


def finding_a(advantage: list[dict[str, object]]) -> str:
    """The seed paper's finding (a) beside what the model shows for one setting (rows of
    :func:`gpu_advantage`'s ``advantage`` table): while RM1, RM2 and RM3 all keep their tables in
    HBM their gains are similar; once the embedding-heavy ones' tables leave HBM, the gap opens.
    No published ratio is quoted (none could be checked against the paper's text)."""
    rm = {str(r["name"]): r for r in advantage if r["name"] in ("rm1", "rm2", "rm3")}
    if set(rm) != {"rm1", "rm2", "rm3"}:
        raise ValueError(f"finding_a needs the rows of rm1, rm2 and rm3, got {sorted(rm)}")
    x = {k: float(r["ratio"]) for k, r in rm.items()}  # type: ignore[arg-type]
    gains = ", ".join(f"{k} {x[k]:.1f}x" for k in ("rm1", "rm2", "rm3"))
    out = [k for k in _EMBEDDING_HEAVY if rm[k]["gpu_placement"] != "hbm"]
    head = FINDING_A[0].upper() + FINDING_A[1:] + " (stated in words: no published ratio is shown)."
    if not out and rm["rm3"]["gpu_placement"] == "hbm":
        lo, hi = min(x.values()), max(x.values())
        return (
            f"{head} MODELED here, every table in HBM: similar gains per GPU ({gains}; the largest "
            f"{hi / lo:.1f}x the smallest): row traffic and GEMMs speed up alike. The gap of the finding "
            "appears when the embedding-heavy models' tables no longer fit (raise 'table rows x')."
        )
    places = ", ".join(f"{k} in {rm[k]['gpu_placement']}" for k in out) or "rm3's tables left HBM"
    gap = x["rm3"] / max(x[k] for k in _EMBEDDING_HEAVY)
    return (
        f"{head} MODELED here, tables out of HBM ({places}): {gains}; rm3 gains {gap:.1f}x what the "
        "embedding-heavy models do: the gap of the finding comes from where the tables live."
    )


def _render(history: list[HistoryEntry]) -> object:
    trail = [e.label for e in history]
    steps_rows = history[0].result.tables["steps"]
    devices = list(dict.fromkeys(str(r["model_and_device"]) for r in steps_rows))
    room = stack_room(band_px(trail, titled=False), band_px(devices))  # plots line up at the wider band
    bars = trail_bars(
        history,
        room,
        table="advantage",
        title="GPU ÷ CPU-node throughput",
        source="modeled",
        columns=2,
        detail="one bar per setting, the current one solid; one scale for all panels; "
        "dashed line 1.0 = as fast as one CPU node",
        shared_scale=True,
        rule_at=1.0,
    )
    steps = time_breakdown(
        steps_rows,
        by="model_and_device",
        phases=list(COMPONENTS),
        title="Step time per device batch, GPU and CPU node",
        source="modeled",
        detail="same samples per device; placement in brackets",
        width=min(460, room),
    )
    return stack(bars, steps)


def advantage_explorer(
    *, history: int = 4, architecture: Mapping[str, object] | None = None, **values: object
) -> App:
    """The GPU Advantage Explorer app; ``values`` override the default settings.

    ``architecture`` sets the "explorer" model: :func:`architecture_config` arguments, for
    example the architecture settings of an Efficiency Explorer (``efficiency.values``;
    its run settings, such as the batch and the hardware, are left out)."""
    controls = build_controls(ADVANTAGE_CONTROLS, values, "the GPU Advantage Explorer")
    arch_names = set(inspect.signature(architecture_config).parameters)
    arch = {k: v for k, v in (architecture or {}).items() if k in arch_names}
    gpu_advantage(**arch)  # a bad architecture fails here, at the entry point

    def compute(hardware: str, **kw: object) -> Result:
        return gpu_advantage(hardware_name=hardware, **kw, **arch)  # type: ignore[arg-type]

    return App(
        "GPU Advantage Explorer",
        controls,
        compute,
        _render,
        history=history,
        description="MODELED: GPUs of a server preset against one CPU training node, per model",
    )
