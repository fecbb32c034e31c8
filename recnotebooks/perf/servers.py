"""Server comparisons from the cost model: which server, and which placement on it, for a model.

:func:`best_placement` picks the placement of least modeled step time on one server;
:func:`compare_servers` puts one model on several hardware presets (:data:`SERVERS`), each
with the placement that fits it best, the way the seed paper compares a CPU cluster, Big Basin
and Zion; :func:`compare_models`, :func:`compare_hardware`, :func:`gpu_over_cpu` and
:func:`model_of_record_servers` (MLPerf's DLRM-DCNv2 on today's nodes) ask the same question
of several models, edited hardware, a GPU against a CPU node and the model of record. Every
row says ``source="modeled"``; the rows share :func:`~recnotebooks.perf.sweeps.result_row`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from recnotebooks.config import DLRMConfig, Workload, preset, preset_training
from recnotebooks.config.workload import workload_from
from recnotebooks.perf.cost import COMPONENTS, CostResult, estimate
from recnotebooks.perf.hardware import Hardware, hardware
from recnotebooks.perf.job import job_from_estimate
from recnotebooks.perf.mlperf_plan import mlperf_plan
from recnotebooks.perf.mlperf_setup import MLPERF_SETUP
from recnotebooks.perf.planner import plan_tables, table_bytes
from recnotebooks.perf.sweeps import result_row
from recnotebooks.plan import Plan

__all__ = [
    "CPU_NODE",
    "MODEL_OF_RECORD",
    "SERVERS",
    "TODAYS_SERVERS",
    "best_placement",
    "compare_hardware",
    "compare_models",
    "compare_servers",
    "device_words",
    "gpu_over_cpu",
    "model_of_record_servers",
    "placements_for",
    "server_specs",
]

#: The servers compared: the seed paper's three (a CPU training cluster, Big Basin, Zion) and modern DGXs.
SERVERS = ("cpu_cluster", "big_basin", "zion", "dgx_a100", "dgx_h100")


def device_words(hw: Hardware) -> dict[str, str]:
    """Words that fit ``hw``'s devices: ``device`` (``"GPU"`` or ``"CPU node"``), ``devices``
    (plural), ``memory`` (``"HBM"`` or ``"DRAM"``: where a device's own tables live)."""
    if hw.kind == "cpu":
        return {"device": "CPU node", "devices": "CPU nodes", "memory": "DRAM"}
    return {"device": "GPU", "devices": "GPUs", "memory": "HBM"}


def placements_for(hw: Hardware) -> list[str]:
    """Placements that exist on ``hw``: a CPU node keeps tables in its own memory (``"hbm"``
    names a device's own memory: a CPU's DRAM) or on remote parameter servers; a GPU server
    also has host DRAM read over PCIe and host DRAM behind a GPU cache."""
    return ["hbm", "remote"] if hw.kind == "cpu" else ["hbm", "cache", "host", "remote"]


def best_placement(
    workload: Workload | DLRMConfig,
    hw: Hardware,
    gpus: int,
    batch_size: int | None = None,
    cache_hit_rate: float = 0.9,
    *,
    implementation: str = "torchrec",
    **older: Any,
) -> tuple[str, CostResult]:
    """The placement of least modeled step time among those that fit, for ``workload``'s step on
    ``gpus`` devices of ``hw`` (the older form, ``best_placement(config, hw, gpus, batch_size,
    cache_hit_rate, sparse_optimizer=..., dense_optimizer=..., dtype=...)``, still works:
    :func:`~recnotebooks.config.workload.workload_from`).

    Candidates: every table in HBM, in host DRAM behind a cache of hit rate
    ``cache_hit_rate``, in host DRAM (read over PCIe, or pooled by the host's CPUs where they
    do that, as Zion's do) and on remote parameter servers; with several GPUs, each as the
    planner's greedy table-wise plan and as its cost plan (which mixes: a table that fits
    nowhere in device memory goes where its modeled time is least). A CPU node tries its own
    DRAM (labelled ``"dram"``) and parameter servers. All candidates are modeled and ranked by
    step time; no placement is preferred for its place in a list. The label names every
    placement the winning plan uses (``"hbm+cache"``), and the result's ``notes`` (and its
    ``plan.notes``) say why it won (``"hbm+cache chosen: 0.90 ms/step vs cache 1.20 ms, ..."``).
    When nothing fits, the fastest candidate is returned with ``fits=False``. The tables are sized
    and priced with the state the sparse optimizer keeps (exact Adagrad's doubles an fp32 table);
    every candidate trains in the workload's dtype with ``implementation``'s step
    (:func:`~recnotebooks.perf.estimate`); ``"hugectr"`` keeps every table in HBM, so its one
    candidate is HBM with its own plan (:func:`~recnotebooks.perf.mlperf_plan.mlperf_plan`).
    """
    w = workload_from(workload, older, "best_placement", batch_size=batch_size)
    if implementation == "hugectr":
        plan = mlperf_plan(w.config, gpus, 1, hw.hbm_bytes) if gpus > 1 else None
        r = estimate(w, hw, gpus=gpus, plan=plan, implementation=implementation)
        return "hbm", _explained("hbm", r, [("hbm", r)])
    order = placements_for(hw)
    tried: list[tuple[str, CostResult]] = []
    for place in order:
        hit = cache_hit_rate if place == "cache" else None
        for plan in _candidate_plans(w, hw, gpus, place, cache_hit_rate):
            r = estimate(
                w,
                hw,
                gpus=gpus,
                plan=plan,
                placement=place,
                cache_hit_rate=hit,
                implementation=implementation,
            )
            tried.append((_placement_label(r.plan, place, order, hw), r))
    fitting = [t for t in tried if t[1].fits] or tried
    label, best = min(fitting, key=lambda t: t[1].step_time)
    return label, _explained(label, best, tried)


def _candidate_plans(
    w: Workload, hw: Hardware, gpus: int, place: str, cache_hit_rate: float
) -> list[Plan | None]:
    """The plans :func:`best_placement` tries at ``place``: on one device estimate's own (``None``);
    on several the planner's greedy table-wise plan (away from HBM, with a table per device) and its
    cost plan."""
    if gpus <= 1:
        return [None]
    strategies = (["greedy"] if place != "hbm" and w.config.num_tables >= gpus else []) + ["cost"]
    return [
        plan_tables(w, hw, gpus, strategy=st, placement=place, cache_hit_rate=cache_hit_rate)
        for st in strategies
    ]


def _explained(label: str, best: CostResult, tried: list[tuple[str, CostResult]]) -> CostResult:
    """``best`` with a note (also in its plan's notes) comparing it with the best of each other label."""
    others: dict[str, CostResult] = {}
    for lab, r in tried:
        if lab != label and (
            lab not in others or (r.fits, -r.step_time) > (others[lab].fits, -others[lab].step_time)
        ):
            others[lab] = r
    words = [
        f"{lab} {r.step_time * 1e3:.2f} ms" + ("" if r.fits else " (does not fit)")
        for lab, r in others.items()
    ]
    note = f"{label} chosen by modeled step time: {best.step_time * 1e3:.2f} ms/step" + (
        f" vs {', '.join(words)}" if words else ""
    )
    plan = best.plan
    if plan is not None:
        plan = dataclasses.replace(plan, notes=(*plan.notes, note))
    return dataclasses.replace(best, notes=[*best.notes, note], plan=plan)


def _placement_label(plan: Plan | None, place: str, order: list[str], hw: Hardware) -> str:
    used = sorted({s.placement for s in plan.shards}, key=order.index) if plan else [place]
    if hw.kind == "cpu":  # a CPU node's own memory is its DRAM
        used = ["dram" if u == "hbm" else u for u in used]
    return "+".join(used)


def compare_servers(
    workload: Workload | DLRMConfig,
    servers: Sequence[str] = SERVERS,
    *,
    cache_hit_rate: float = 0.9,
    **older: Any,
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """``workload``'s step on one node of each server: (summary rows, per-component rows). The older
    form, ``compare_servers(config, servers, batch_size=8192, sparse_optimizer=..., dense_optimizer=...)``,
    still works (:func:`~recnotebooks.config.workload.workload_from`).

    Each node uses all its devices and the fastest placement that fits (:func:`best_placement`);
    throughput per node and per joule are modeled. The power counts the node's devices and host and the
    parameter servers its remote rows need; ``usd_per_billion_samples`` prices the node's
    device-hours and those servers' (:func:`~recnotebooks.perf.job.job_from_estimate`, at each
    preset's ``price_per_hour``), and ``largest_device_gb`` is the fullest device's memory.
    """
    w = workload_from(workload, older, "compare_servers", {"batch_size": 8192})
    rows, parts = [], []
    for name in servers:
        hw = hardware(name)
        place, r = best_placement(w, hw, hw.devices, None, cache_hit_rate)
        rows.append(
            result_row(
                r,
                server=name,
                placement=place,
                devices=hw.devices,
                node_power_w=r.power_w,
                parameter_servers=r.parameter_servers,
                usd_per_billion_samples=job_from_estimate(r, hw, 1e9).cost_usd,
                largest_device_gb=max(d["total"] for d in r.memory.device) / 1e9,
            )
        )
        b = r.breakdown()
        parts += [
            {"server": name, "phase": c, "seconds_per_step": b[c], "source": "modeled"}
            for c in COMPONENTS
            if b[c] > 0
        ]
    return rows, parts


#: The model of record: MLPerf Training's DLRM-DCNv2 (rounds v3.0 on).
MODEL_OF_RECORD = "mlperf_dcnv2"
#: The seed paper's GPU servers beside today's 8-GPU nodes, for the model of record (notebook 05 §4).
TODAYS_SERVERS = ("big_basin", "zion", "dgx_a100_80gb", "dgx_h100", "h200_node", "dgx_b200")


def model_of_record_servers(
    servers: Sequence[str] = TODAYS_SERVERS, *, batch_size: int | None = None, cache_hit_rate: float = 0.9
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The model of record (:data:`MODEL_OF_RECORD`) on one node of each of ``servers``, trained as
    MLPerf's submissions train it, **modeled**: (summary rows, per-component rows of the slowest rank).

    The step is the one notebook 02 holds against MLPerf's published runs
    (:data:`~recnotebooks.perf.mlperf_setup.MLPERF_SETUP`: NVIDIA's HugeCTR, mixed precision, exact
    Adagrad on the tables, whose state doubles their 105 GB; Adagrad on the dense part,
    :func:`~recnotebooks.config.preset_training`), at MLPerf's one-node global batch (55,296) unless
    ``batch_size`` says otherwise, communication overlapped as HugeCTR overlaps it. Its plan is
    MLPerf's (:func:`~recnotebooks.perf.mlperf_plan.mlperf_plan`: every table in HBM) where that fits;
    else, as HugeCTR keeps every table in HBM, TorchRec's step (FBGEMM's GPU cache and host memory)
    at the fastest placement that fits (:func:`best_placement`: host DRAM behind a GPU cache of hit
    rate ``cache_hit_rate``, host DRAM, parameter servers). Each row: ``server``, ``placement``,
    ``plan`` (``"MLPerf's"`` or ``"the planner's"``), ``software`` (``"hugectr"`` or
    ``"torchrec"``), ``step_ms``, ``throughput``,
    ``samples_per_joule``, ``usd_per_billion_samples`` (:func:`~recnotebooks.perf.job.job_cost` at
    each preset's price per device-hour, parameter servers included), ``bound_by``, ``fits``,
    ``parameter_servers``, ``node_power_w``, ``largest_device_gb``, ``tables_gb`` (the tables' weights
    and optimizer state), ``model`` and ``source``."""
    how = preset_training(MODEL_OF_RECORD)
    batch = int(how["batch_size"]) if batch_size is None else batch_size  # type: ignore[call-overload]
    w = Workload(
        preset(MODEL_OF_RECORD),
        batch,
        dtype=MLPERF_SETUP["dtype"],
        sparse_optimizer=MLPERF_SETUP["sparse_optimizer"],
        dense_optimizer=str(how["dense_optimizer"]),
    )
    tables_gb = sum(table_bytes(w.config, "fp32", w.sparse_optimizer).values()) / 1e9
    rows, parts = [], []
    for name in servers:
        hw = hardware(name)
        place, r, plan, software = _model_of_record_on(w, hw, cache_hit_rate)
        slowest = max(r.per_rank, key=lambda c: sum(c.values()))
        rows.append(_record_row(name, hw, place, plan, software, r, tables_gb))
        parts += [
            {"server": f"{name} ({place})", "phase": c, "seconds_per_step": slowest[c], "source": "modeled"}
            for c in COMPONENTS
            if slowest[c] > 0
        ]
    return rows, parts


def _record_row(
    name: str, hw: Hardware, place: str, plan: str, software: str, r: CostResult, tables_gb: float
) -> dict[str, object]:
    """One row of :func:`model_of_record_servers`: the step ``r`` on server ``name`` (``hw``)."""
    job = job_from_estimate(r, hw, 1e9, overlap=True)
    slowest = max(r.per_rank, key=lambda c: sum(c.values()))
    return {"model": MODEL_OF_RECORD, "server": name, "placement": place, "plan": plan, "software": software,
            "step_ms": r.step_time_overlap * 1e3, "throughput": r.throughput_overlap,
            "samples_per_joule": job.samples_per_joule, "usd_per_billion_samples": job.cost_usd,
            "bound_by": max(slowest, key=lambda k: slowest[k]), "fits": r.fits,
            "parameter_servers": r.parameter_servers, "node_power_w": r.power_w,
            "largest_device_gb": max(d["total"] for d in r.memory.device) / 1e9, "tables_gb": tables_gb,
            "source": "modeled"}  # fmt: skip


def _model_of_record_on(w: Workload, hw: Hardware, cache_hit_rate: float) -> tuple[str, CostResult, str, str]:
    """``(placement, result, plan, software)`` of the model of record's step ``w`` on one node of
    ``hw``: MLPerf's plan under HugeCTR where it fits, else TorchRec at the fastest placement that fits
    (:func:`best_placement`; HugeCTR keeps every table in HBM, the tables elsewhere take FBGEMM)."""
    software = MLPERF_SETUP["implementation"]
    whole = mlperf_plan(w.config, hw.devices, 1, hw.hbm_bytes)
    r = estimate(w, hw, gpus=hw.devices, plan=whole, implementation=software)
    if r.fits:
        return "hbm", r, "MLPerf's", software
    place, r = best_placement(w, hw, hw.devices, None, cache_hit_rate, implementation="torchrec")
    return place, r, "the planner's", "torchrec"


#: The CPU node a GPU is compared with: one dual-socket trainer of the CPU training cluster.
CPU_NODE = "cpu_cluster"


def gpu_over_cpu(
    config: DLRMConfig,
    hw: Hardware | str,
    *,
    gpus: int = 1,
    batch_per_device: int = 4096,
    cache_hit_rate: float = 0.9,
    **extra: object,
) -> tuple[dict[str, object], CostResult, CostResult]:
    """``gpus`` GPUs of ``hw`` against one CPU node (:data:`CPU_NODE`), each at the fastest
    placement that fits (:func:`best_placement`) and ``batch_per_device`` samples per device:
    (one modeled row with both throughputs, their ``ratio``, what bounds each, and the shares
    of the CPU step spent on embeddings and of the GPU step spent copying inputs over PCIe;
    the GPU's result; the CPU node's result)."""
    hw = hardware(hw) if isinstance(hw, str) else hw
    cpu = hardware(CPU_NODE)
    gpu_place, g = best_placement(config, hw, gpus, batch_per_device * gpus, cache_hit_rate)
    cpu_place, c = best_placement(config, cpu, 1, batch_per_device, cache_hit_rate)
    gb, cb = g.breakdown(), c.breakdown()
    row = {
        "model": config.name,
        "hardware": hw.name,
        "gpus": gpus,
        "batch_per_device": batch_per_device,
        "gpu_throughput": g.throughput,
        "cpu_throughput": c.throughput,
        "ratio": g.throughput / c.throughput,
        "gpu_placement": gpu_place,
        "cpu_placement": cpu_place,
        "gpu_bound_by": max(gb, key=gb.get),
        "cpu_bound_by": max(cb, key=cb.get),
        "fits": g.fits and c.fits,
        "cpu_embedding_share": (cb["embedding_forward"] + cb["embedding_backward"]) / sum(cb.values()),
        "gpu_input_copy_share": gb["host_to_device"] / sum(gb.values()),
        "source": "modeled",
        **extra,
    }
    return row, g, c


def compare_models(
    models: Mapping[str, DLRMConfig],
    servers: Sequence[str] = SERVERS,
    *,
    batch_size: int = 8192,
    cache_hit_rate: float = 0.9,
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """:func:`compare_servers` for each of ``models`` (by label): summary and per-component rows
    with a ``model`` column."""
    summary: list[dict[str, object]] = []
    parts: list[dict[str, object]] = []
    for label, cfg in models.items():
        rows, comp = compare_servers(cfg, servers, batch_size=batch_size, cache_hit_rate=cache_hit_rate)
        summary += [{**r, "model": label} for r in rows]
        parts += [{**p, "model": label} for p in comp]
    return summary, parts


def compare_hardware(
    config: DLRMConfig,
    variants: Sequence[Hardware | str],
    *,
    batch_size: int = 8192,
    cache_hit_rate: float = 0.9,
) -> list[dict[str, object]]:
    """``config`` on one whole node of each hardware variant (a preset, or an edited copy
    asking "what if"): one :func:`result_row` each, with its placement and largest device."""
    rows = []
    for v in variants:
        hw = hardware(v) if isinstance(v, str) else v
        place, r = best_placement(config, hw, hw.devices, batch_size, cache_hit_rate)
        largest = max(d["total"] for d in r.memory.device)
        rows.append(result_row(r, placement=place, largest_device_gb=largest / 1e9))
    return rows


def server_specs(servers: Sequence[str] = SERVERS) -> list[dict[str, object]]:
    """One row per server preset: devices, peak FP32 FLOP/s, device memory and its bandwidth,
    host DRAM, network and the node's power (devices and host), as the presets give them."""
    rows = []
    for name in servers:
        h = hardware(name)
        rows.append(
            {
                "server": name,
                "devices": h.devices,
                "kind": h.kind,
                "fp32_tflops": h.flops("fp32") / 1e12,
                "device_memory_gb": h.hbm_bytes / 1e9,
                "device_memory_tbps": h.hbm_bw / 1e12,
                "host_dram_gb": h.host_mem_bytes / 1e9,
                "network_gbps": h.nic_bw * 8 / 1e9,
                "node_power_w": h.devices * h.power_w + h.host_power_w,
            }
        )
    return rows
