"""Calibration of ``this_machine`` by microbenchmarks, and validation against real steps.

:func:`calibrate` times small kernels on the local device and fits the hardware fields the
cost model uses: GEMM efficiency by shape (peak and half-dimension), memory copy
bandwidth, embedding-row gather bandwidth by row size, the last-level cache (its size from
the OS, its speed-up for random rows measured), the rate at which lookups are grouped by
row, the speed of the sparse optimizer's update of rows against a gather of their bytes,
per-operator overhead and the fixed per-step cost, on a CPU the seconds per element of a SiLU
pass and what an HSTU step costs beyond its bytes (:mod:`recnotebooks.measure.calibrate_hstu`:
its relative attention bias per pair, its operators' host cost), each the median of three
rounds. The result is a :class:`~recnotebooks.perf.hardware.Hardware` named ``this_machine``;
:func:`~recnotebooks.perf.hardware.save_calibration` stores it (``~/.cache/recnotebooks``,
or ``$RECNB_CALIBRATION``) and ``hardware("this_machine")`` loads it from then on. The
stored file belongs to :mod:`recnotebooks.perf.calibration_file` and
:mod:`recnotebooks.perf.hardware` (which loads it and must not import this module); their
functions are re-exported here.

:mod:`recnotebooks.measure.validate` checks the calibrated model against real steps; its
speed :func:`probe` and :func:`at_speed` live here, beside what they correct.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from recnotebooks.checks import available_memory_bytes, show
from recnotebooks.config import DLRMConfig, architecture_config
from recnotebooks.kernels.allocator import keep_freed_memory
from recnotebooks.kernels.fused import fused_available
from recnotebooks.kernels.fused_adagrad import adagrad, group_lookups
from recnotebooks.measure import measure_step
from recnotebooks.measure.calibrate_hstu import (
    hstu_op_overhead,
    hstu_overhead_pairs,
    rab_padded_seconds,
    rab_seconds,
)
from recnotebooks.measure.cores import handoff
from recnotebooks.measure.verdict import Verdict, apart, verdict
from recnotebooks.nn.rows import group_by_row
from recnotebooks.perf.calibration_file import (
    COLLECTIVE_FIELDS,
    COLLECTIVES_SOURCE,
    calibration_path,
    load_probe,
)
from recnotebooks.perf.components.ops import op_count
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import CALIBRATED_BY, HARDWARE, Hardware, load_calibration, save_calibration
from recnotebooks.threads import SLACK, LoadMonitor
from recnotebooks.train import resolve_device

__all__ = [
    "calibrate",
    "calibration_device",
    "calibration_round",
    "calibration_verdict",
    "fit_calibration",
    "save_calibration",
    "load_calibration",
    "load_probe",
    "calibration_path",
    "probe",
    "median_probe",
    "handoff",
    "at_speed",
]


def probe(reps: int = 5, device: str = "cpu") -> dict[str, float]:
    """A 50 ms reading of this machine's current speed: a 1024^3 GEMM (``gflops``) and a 64 MB
    copy (``copy_bw``, bytes/s), and on a CPU how its threads' cores share a cache
    (``handoff``, :func:`handoff`).

    Shared machines (VMs, laptops on battery) change speed from minute to minute; the
    validation compares each measurement with the model scaled by the probe taken next to
    it, relative to the probe taken at calibration.
    """
    a, b = torch.randn(1024, 1024, device=device), torch.randn(1024, 1024, device=device)
    g = 2 * 1024**3 / _best(lambda: torch.mm(a, b), reps, device=device) / 1e9
    x = torch.randn(16 * 2**20, device=device)
    y = torch.empty_like(x)
    out = {"gflops": g, "copy_bw": 2 * x.numel() * 4 / _best(lambda: y.copy_(x), reps, device=device)}
    if not device.startswith("cuda"):
        out["handoff"] = handoff(reps)
    return out


def median_probe(probes: list[dict[str, float]]) -> dict[str, float]:
    """The median of each figure of ``probes`` (:func:`probe` readings; ``handoff`` where every
    one has it): a calibration's reference, a validation run's speed."""
    keys = [k for k in ("gflops", "copy_bw", "handoff") if all(k in p for p in probes)]
    return {k: float(np.median([p[k] for p in probes])) for k in keys}


def at_speed(hw: Hardware, now: dict[str, float], ref: dict[str, float]) -> Hardware:
    """``hw`` scaled from the speed of probe ``ref`` to that of probe ``now``."""
    f, b = now["gflops"] / ref["gflops"], now["copy_bw"] / ref["copy_bw"]
    return hw.replace(
        peak_flops={k: v * f for k, v in hw.peak_flops.items()},
        hbm_bw=hw.hbm_bw * b,
        host_mem_bw=hw.host_mem_bw * b,
        host_link_bw=hw.host_link_bw * b,
        intra_node_bw=hw.intra_node_bw * b,
        sort_rate=hw.sort_rate * f,
        op_overhead_s=hw.op_overhead_s / f,
        step_overhead_s=hw.step_overhead_s / f,
        bag_seconds_per_byte=hw.bag_seconds_per_byte / f,
        silu_seconds=hw.silu_seconds / f,
        hstu_op_overhead_s=None if hw.hstu_op_overhead_s is None else hw.hstu_op_overhead_s / f,
        rab_seconds=None if hw.rab_seconds is None else hw.rab_seconds / f,
        rab_index_seconds=None if hw.rab_index_seconds is None else hw.rab_index_seconds / f,
        rab_padded_seconds=None if hw.rab_padded_seconds is None else hw.rab_padded_seconds / f,
    )


_FLUSH: dict[str, torch.Tensor] = {}


def _flush(device: str) -> None:
    """Evict the caches (write 256 MB: CPU caches or GPU L2), as a training step's other
    phases do."""
    if device not in _FLUSH:
        _FLUSH[device] = torch.empty(64 * 2**20, device=device)
    _FLUSH[device].fill_(1.0)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _best(fn: Callable[..., object], reps: int, cold: bool = False, device: str = "cpu") -> float:
    """Median seconds of ``reps`` calls of ``fn`` after one warm-up (caches flushed before
    each call when ``cold``; the device synchronised around each call)."""
    fn()
    _sync(device)
    ts = []
    for _ in range(reps):
        if cold:
            _flush(device)
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def _fit_gemm(samples: list[tuple[int, int, int, float]], overhead: float) -> tuple[float, float]:
    """Least relative squares for ``t = 2mnk / (P prod d/(d+h)) + overhead`` over ``h``."""
    best = (float("inf"), 1.0, 1.0)
    for h in np.geomspace(0.5, 512, 80):
        x = np.array(
            [2 * m * n * k / ((m / (m + h)) * (n / (n + h)) * (k / (k + h))) for m, n, k, _ in samples]
        )
        t = np.array([s[3] - overhead for s in samples]).clip(min=1e-9)
        inv_p = float(np.sum(x / t) / np.sum((x / t) ** 2))  # minimises sum (x/(P t) - 1)^2
        err = float(np.sum((x * inv_p / t - 1) ** 2))
        if err < best[0]:
            best = (err, 1 / inv_p, float(h))
    return best[1], best[2]


#: Rounds of the microbenchmarks a full calibration takes the median of (``quick``: one).
ROUNDS = 3
#: Floats of the copy the memory bandwidth is read from (64 MB: the size of the tables the
#: measurements train).
COPY_FLOATS = 16 * 2**20
#: Row sizes (bytes) the gather bandwidth is fitted over.
GATHER_ROW_BYTES = (32, 128, 512)


def _gemm_shapes() -> list[tuple[int, int, int]]:
    """``(m, n, k)`` of the timed GEMMs: the three GEMMs of a linear layer in training, as
    nn.Linear runs them (Y = X W^T + bias, dX = dY W and dW = dY^T X), on MLP-like shapes
    (batch m, widths n and k)."""
    out = []
    for m in (64, 512, 4096):
        for n, k in ((16, 128), (128, 16), (128, 1024), (1024, 128), (1024, 1024), (256, 2560)):
            out += [(m, n, k), (m, k, n), (n, k, m)]
    return out


#: Elements of the calibration's SiLU timing (:func:`_silu_seconds`): 4 MB of float32, the size
#: of one bucket's attention weights in a small HSTU step (2 heads, 1,024 events square).
SILU_FLOATS = 2**20


def _silu_seconds(reps: int) -> float:
    """Seconds per element of a SiLU pass on the CPU: the median of ``silu`` and of its
    backward (``silu_backward``, as autograd runs it) over :data:`SILU_FLOATS` elements just
    written (warm, as the attention's scores are when it runs), the mean of the two."""
    x, grad = torch.randn(SILU_FLOATS), torch.randn(SILU_FLOATS)
    forward = _best(lambda: torch.nn.functional.silu(x), reps)
    backward = _best(lambda: torch.ops.aten.silu_backward(grad, x), reps)
    return (forward + backward) / 2 / SILU_FLOATS


def _round(dev: str, reps: int, quick: bool, cuda: bool) -> dict[str, object]:
    """One round of the calibration's microbenchmarks: seconds (``op``, ``copy``, ``gemm m n
    k``, ``gather <row bytes>``, on a CPU ``update few`` and ``update every`` with the count
    ``update distinct``: :func:`_update_times`) or derived rates (``bag per byte``, ``sort
    rate``, ``llc speedup``), each the median of ``reps`` calls; the ``overhead pairs`` of
    :func:`_overhead_pairs`; and the speed ``probes`` taken around them."""
    t: dict[str, object] = {"probes": [probe(device=dev)]}
    a, b = torch.zeros(1, device=dev), torch.zeros(1, device=dev)
    t["op"] = _best(lambda: [torch.add(a, b) for _ in range(200)], reps, device=dev) / 200
    x = torch.randn(COPY_FLOATS, device=dev)
    y = torch.empty_like(x)
    t["copy"] = _best(lambda: y.copy_(x), reps, True, dev)
    for m, n, k in _gemm_shapes()[::3]:
        X, W, dY = (
            torch.randn(m, k, device=dev),
            torch.randn(n, k, device=dev),
            torch.randn(m, n, device=dev),
        )
        bias = torch.randn(n, device=dev)
        t[f"gemm {m} {n} {k}"] = _best(
            lambda X=X, W=W, b=bias: torch.nn.functional.linear(X, W, b), reps, device=dev
        )
        t[f"gemm {m} {k} {n}"] = _best(lambda dY=dY, W=W: dY @ W, reps, device=dev)
        t[f"gemm {n} {k} {m}"] = _best(lambda dY=dY, X=X: dY.t() @ X, reps, device=dev)
    t["probes"].append(probe(device=dev))  # type: ignore[attr-defined]
    if not cuda:
        t["silu"] = _silu_seconds(reps)
        t["rab"], t["rab index"] = rab_seconds(reps)
        t["rab padded"] = rab_padded_seconds(reps)
        t["hstu overhead pairs"] = hstu_overhead_pairs(reps)
        t["bag per byte"] = _bag_cost(reps, quick, dev)
        speedup = _llc_speedup(reps, quick)
        if speedup is not None:
            t["llc speedup"] = speedup
    for rb in GATHER_ROW_BYTES:
        t[f"gather {rb}"] = _gather_seconds(GATHER_TABLE_BYTES, rb, LONG_BAG, reps, quick, True, dev)
    t["sort rate"] = _grouping_rate(dev, reps)[0]
    if _grouping_path(dev) == "fused counting sort":
        t |= _update_rounds(reps, quick)
    t["overhead pairs"] = _overhead_pairs(reps, dev)
    return t


def calibrate(device: str = "cpu", quick: bool = False) -> tuple[Hardware, dict[str, object]]:
    """Microbenchmark the local device; returns the fitted ``this_machine`` and the raw figures.

    ``device`` is ``"cpu"`` or ``"cuda"``/``"cuda:N"`` (then ``this_machine`` describes one
    GPU of this machine: kind ``gpu``, its memory, bandwidths and PCIe link as measured).
    The microbenchmarks run in :data:`ROUNDS` rounds (``quick``: one) and each figure is the
    median of its rounds (:func:`calibration_round`, :func:`fit_calibration`).
    """
    dev = calibration_device(device)
    rounds = [calibration_round(dev, quick) for _ in range(1 if quick else ROUNDS)]
    return fit_calibration(rounds, dev, quick)


def calibration_device(device: str) -> str:
    """``device`` resolved as the calibration names it (``cuda`` becomes ``cuda:N``)."""
    dev = str(resolve_device(device))
    if dev.startswith("cuda") and ":" not in dev:
        dev = f"cuda:{torch.cuda.current_device()}"
    return dev


def calibration_round(dev: str, quick: bool = False) -> dict[str, object]:
    """One round of the calibration's microbenchmarks on ``dev`` (a :func:`calibration_device`):
    what :func:`fit_calibration` takes the median of. A shared machine has slow spells of
    seconds, and one spell would otherwise set a constant (one round at a time, the gather
    bandwidth read 0.5x-1.1x of the copy's run to run); rounds can be spread over a run, as
    ``recnb validate`` spreads them between its passes. The round records the cores other
    programs kept busy while it ran (``load``: :func:`calibration_verdict` reads it)."""
    keep_freed_memory()  # under the allocator the measured steps run on (kernels/allocator.py)
    monitor = LoadMonitor()  # a window of its own over the whole round
    monitor.mark()
    t = _round(dev, 3 if quick else 5, quick, dev.startswith("cuda"))
    during = monitor.since_mark()
    t["load"] = {
        "others": during.others,
        "cores": float(during.cores),
        "threads": float(torch.get_num_threads()),
    }
    return t


def calibration_verdict(rounds: list[dict[str, object]]) -> Verdict:
    """Whether a calibration's rounds (:func:`calibration_round`) can be trusted: NOT PASSED when
    other programs kept more cores busy than the rounds' threads left free (by over
    :data:`~recnotebooks.threads.SLACK`, the rule of :func:`recnotebooks.timing.reliability`) in
    half of the rounds or more, so that the median round was measured on shared cores."""
    busy = []
    for r in rounds:
        load = r.get("load")
        if not isinstance(load, dict) or load.get("others") is None:
            continue
        spare = max(0.0, float(load["cores"]) - float(load["threads"]))
        if float(load["others"]) > spare + SLACK:
            busy.append((float(load["others"]), spare))
    if not busy or 2 * len(busy) < len(rounds):
        return verdict([])
    most, spare = max(busy)
    left = f", more than the {spare:.0f} its threads left free" if spare >= 1 else ""
    return verdict(
        [
            f"the machine was busy: other programs kept up to {most:.1f} cores busy during "
            f"{len(busy)} of {len(rounds)} calibration rounds{left}, so its figures are of shared cores"
        ]
    )


def _round_figures(r: dict[str, object]) -> dict[str, object]:
    """What one round (:func:`calibration_round`) read, for a report: its speed probe (the median
    of its probes), the operator costs its overhead pairs give, and the load beside it. The fit
    takes medians over the rounds; these say which round read what (a round taken in a slow spell
    of a shared host shows here)."""
    probes: list[dict[str, float]] = r["probes"]  # type: ignore[assignment]
    pairs: list[tuple[float, float]] = r["overhead pairs"]  # type: ignore[assignment]
    out: dict[str, object] = {"probe": median_probe(probes), "op_overhead_s": _per_op(pairs)}
    if "hstu overhead pairs" in r:
        out["hstu_op_overhead_s"] = hstu_op_overhead(r["hstu overhead pairs"])  # type: ignore[arg-type]
    if "load" in r:
        out["load"] = r["load"]
    return out


def _median_round(rounds: list[dict[str, object]]) -> dict[str, float]:
    """Each timing's median over ``rounds`` (:func:`calibration_round`; not the probes, the
    overhead pairs or the load, which are fitted whole)."""
    skip = ("probes", "overhead pairs", "hstu overhead pairs", "load")
    return {k: float(np.median([r[k] for r in rounds])) for k in rounds[0] if k not in skip}


def _fit_gather(gathers: list[tuple[int, float]], copy_bw: float) -> tuple[float, float]:
    """The gather's efficiency against the copy bandwidth and its half-efficiency row bytes,
    ``bw(row) = copy_bw * efficiency * row / (row + half)``, fitted to ``(row bytes, bytes/s)``
    by least squares over a grid of ``half`` (the efficiency capped at 4: rows cached)."""
    best = (float("inf"), 0.5, 64.0)
    for hb in np.geomspace(1, 1024, 60):
        f = np.array([rb / (rb + hb) for rb, _ in gathers])
        bw = np.array([g for _, g in gathers])
        e = float(np.sum(bw * f) / np.sum(f * f)) / copy_bw
        err = float(np.sum((copy_bw * e * f / bw - 1) ** 2))
        if err < best[0]:
            best = (err, e, float(hb))
    return min(best[1], 4.0), best[2]


def _gpu_fields(dev: str, reps: int, raw: dict[str, object]) -> dict[str, object]:
    """The fields a GPU's calibration sets: its count, memory and the measured host link
    (``raw["host_to_device_bw"]``)."""
    props = torch.cuda.get_device_properties(dev)
    host = torch.randn(COPY_FLOATS, pin_memory=True)
    x = torch.empty(COPY_FLOATS, device=dev)
    link = host.numel() * 4 / _best(lambda: x.copy_(host, non_blocking=True), reps, device=dev)
    raw["host_to_device_bw"] = link
    return {
        "kind": "gpu",
        "devices": torch.cuda.device_count(),
        "hbm_bytes": float(props.total_memory),
        "host_link_bw": link,
        "intra_node_bw": link,
        "host_mem_bw": HARDWARE["this_machine"].host_mem_bw,
        "description": f"this machine's {props.name}, {CALIBRATED_BY}",
    }


def _compute_fields(t: dict[str, float], dev: str, quick: bool, raw: dict[str, object]) -> dict[str, object]:
    """The compute and memory figures fitted to the median round ``t``: the GEMM peak, the copy
    bandwidth, the gather's efficiency, the sort rate, the fused update's efficiency, the cache
    speedups; their raw figures go into ``raw``."""
    op = t["op"]
    raw["op_overhead_s"] = op
    copy_bw = 2 * COPY_FLOATS * 4 / t["copy"]
    raw["copy_bw"] = copy_bw
    gemm = [(m, n, k, t[f"gemm {m} {n} {k}"]) for m, n, k in _gemm_shapes()]
    peak, half = _fit_gemm(gemm, op)
    raw["gemm"] = [{"m": m, "n": n, "k": k, "gflops": 2 * m * n * k / s / 1e9} for m, n, k, s in gemm]
    n_look = _lookups(quick)
    per_byte = 0.0 if dev.startswith("cuda") else t["bag per byte"]
    raw["bag_seconds_per_byte"] = per_byte
    # in long bags: the rows' own time (the bags' is the per-bag cost's)
    gathers = [(rb, n_look * rb / t[f"gather {rb}"]) for rb in GATHER_ROW_BYTES]
    raw["gather_bw"] = {f"{rb} B rows": bw for rb, bw in gathers}
    gather_eff, gather_half = _fit_gather(gathers, copy_bw)
    # the fused update's rows: their read-modify-writes against a gather of their bytes
    update_eff = _fit_update(t, copy_bw, gather_eff, gather_half) if "update few" in t else 1.0
    raw["sort_rate"], raw["sort_path"], raw["update_efficiency"] = (
        t["sort rate"],
        _grouping_path(dev),
        update_eff,
    )
    llc = {"llc_bytes": _llc_bytes(), "llc_speedup": t["llc speedup"]} if "llc speedup" in t else {}
    if "silu" in t:  # a CPU's: a GPU's SiLU passes stay priced by their bytes
        llc["silu_seconds"] = raw["silu_seconds"] = t["silu"]
    if "rab" in t:  # a CPU's: a GPU's bias is priced by its bytes
        llc["rab_seconds"], llc["rab_index_seconds"] = t["rab"], t["rab index"]
        raw["rab_seconds"], raw["rab_index_seconds"] = t["rab"], t["rab index"]
    if "rab padded" in t:  # a calibration file of its own time may lack it
        llc["rab_padded_seconds"] = raw["rab_padded_seconds"] = t["rab padded"]
    if "warm update few" in t:
        llc["update_llc_speedup"] = raw["update_llc_speedup"] = _fit_update_llc(t)
    raw.update(llc)
    return {
        "peak_flops": {"fp32": peak},
        "gemm_max_efficiency": 1.0,
        "gemm_half_dim": half,
        "hbm_bw": copy_bw,
        "gather_efficiency": gather_eff,
        "gather_half_row_bytes": gather_half,
        "op_overhead_s": op,
        "sort_rate": t["sort rate"],
        "update_efficiency": update_eff,
        "bag_seconds_per_byte": per_byte,
        "host_mem_bytes": _host_bytes(),
        "description": f"this machine, {CALIBRATED_BY}",
        # intra_node_bw is gloo's between local ranks: the preset's, or the saved collectives' (below)
        "hbm_bytes": _host_bytes(),
        "host_link_bw": copy_bw,
        "host_mem_bw": copy_bw,
        **llc,
    }


def fit_calibration(
    rounds: list[dict[str, object]], dev: str, quick: bool = False
) -> tuple[Hardware, dict[str, object]]:
    """``this_machine`` fitted to the median of ``rounds`` (:func:`calibration_round`), and the
    raw figures (``probe``: the median of every speed probe the rounds took; ``per_round``: what
    each round read, :func:`_round_figures`, and whether it was ``left_out``). Rounds whose probes
    read the threads' cores sharing no cache (:func:`~recnotebooks.measure.verdict.apart`) are
    left out while any other is left (``rounds_left_out``): the machine calibrated is the one
    whose cores share a cache, where it has been seen so."""
    if not isinstance(rounds, list) or not rounds or not all(isinstance(r, dict) for r in rounds):
        raise ValueError(
            f"rounds must be a non-empty list of calibration_round() results, got {show(rounds)}"
        )
    taken_apart = [any(apart(p) for p in r["probes"]) for r in rounds]  # type: ignore[attr-defined]
    shared = [r for r, a in zip(rounds, taken_apart, strict=True) if not a]
    left_out = len(rounds) - len(shared) if shared else 0
    per_round = [{**_round_figures(r), "left_out": a and bool(shared)}
                 for r, a in zip(rounds, taken_apart, strict=True)]  # fmt: skip
    rounds = shared or rounds
    t = _median_round(rounds)
    cuda = dev.startswith("cuda")
    raw: dict[str, object] = {"device": dev, "rounds": len(rounds), "rounds_left_out": left_out}
    fields = _compute_fields(t, dev, quick, raw)
    if cuda:
        fields.update(_gpu_fields(dev, 3 if quick else 5, raw))
    base = HARDWARE["this_machine"].replace(**fields)
    pairs: list[tuple[float, float]] = [p for r in rounds for p in r["overhead pairs"]]  # type: ignore[attr-defined]
    op_step, step = _overheads(base, pairs)
    probes: list[dict[str, float]] = [p for r in rounds for p in r["probes"]]  # type: ignore[attr-defined]
    raw["probe"] = median_probe(probes)
    base = base.replace(op_overhead_s=op_step, step_overhead_s=step)
    raw["op_overhead_in_step_s"], raw["step_overhead_s"] = op_step, step
    if "hstu overhead pairs" in rounds[0]:  # a CPU's: a GPU's HSTU operators cost op_overhead_s
        hstu = [p for r in rounds for p in r["hstu overhead pairs"]]  # type: ignore[attr-defined]
        base = base.replace(hstu_op_overhead_s=hstu_op_overhead(hstu))
        raw["hstu_op_overhead_s"] = base.hstu_op_overhead_s
    raw["per_round"] = per_round
    raw.update(calibration_verdict(rounds).to_dict())
    src = "calibrated here by recnb calibrate on " + time.strftime("%Y-%m-%d")
    llc = [k for k in ("llc_bytes", "llc_speedup", "update_llc_speedup", "silu_seconds", "rab_seconds",
                       "rab_index_seconds", "rab_padded_seconds") if k in fields]  # fmt: skip
    llc += ["hstu_op_overhead_s"] if base.hstu_op_overhead_s is not None else []
    fitted = ("peak_flops", "gemm_half_dim", "hbm_bw", "gather_efficiency", "gather_half_row_bytes",
              "op_overhead_s", "sort_rate", "step_overhead_s", "hbm_bytes", "bag_seconds_per_byte",
              *llc, *(("update_efficiency",) if "update few" in t else ()))  # fmt: skip
    base = base.replace(sources={**HARDWARE["this_machine"].sources, **dict.fromkeys(fitted, src)})
    return (base if cuda else _with_saved_collectives(base)), raw


#: Row bytes and the few rows of the calibration's timing of the fused update (:func:`_update_times`).
UPDATE_ROW_BYTES, UPDATE_FEW_ROWS = 128, 4096


def _update_times(
    reps: int, quick: bool, table_bytes: float | None = None, cold: bool = True
) -> tuple[float, float, float]:
    """Seconds of our fused row-wise Adagrad update (what a training step's sparse optimizer
    runs here) of :func:`_lookups` lookups in bags of :data:`LONG_BAG` into a table of
    ``table_bytes`` (default :data:`GATHER_TABLE_BYTES`) of 128-byte rows (caches flushed
    before each call when ``cold``), twice: the lookups on :data:`UPDATE_FEW_ROWS` random rows
    of the table, and uniform over all rows; and how many more distinct rows the second
    updates (what its extra time is for: the same lookups, grouped and summed alike)."""
    rng = np.random.default_rng(0)
    table_bytes = GATHER_TABLE_BYTES if table_bytes is None else table_bytes
    rows, dim, n = int(table_bytes // UPDATE_ROW_BYTES), UPDATE_ROW_BYTES // 4, _lookups(quick)
    w = rng.standard_normal((rows, dim), dtype=np.float32)
    state = np.ones((rows, 1), np.float32)
    offsets = np.arange(0, n + 1, LONG_BAG, dtype=np.int64)
    grad = rng.standard_normal((n // LONG_BAG, dim), dtype=np.float32)
    coef, threads = np.zeros(1, np.float32), torch.get_num_threads()
    few = rng.choice(rows, UPDATE_FEW_ROWS, replace=False)[rng.integers(0, UPDATE_FEW_ROWS, n)]
    every = rng.integers(0, rows, n)

    def update(ids: np.ndarray) -> Callable[[], None]:
        return lambda: adagrad(w, grad, ids, offsets, coef, False, 1e-6, state, 1e-8, threads)

    t_few, t_every = _best(update(few), reps, cold), _best(update(every), reps, cold)
    return t_few, t_every, float(np.unique(every).size - np.unique(few).size)


def _update_rounds(reps: int, quick: bool) -> dict[str, float]:
    """:func:`_update_times` on the calibration's table, cold (``update few``, ``update
    every``, ``update distinct``), and where the OS names the last-level cache, warm on a
    table half one instance of it (``warm update few``...): what :func:`_fit_update` and
    :func:`_fit_update_llc` fit."""
    keys = ("update few", "update every", "update distinct")
    t = dict(zip(keys, _update_times(reps, quick), strict=True))
    levels = _llc_levels()
    if levels is not None:
        t |= dict(
            zip((f"warm {k}" for k in keys), _update_times(reps, quick, levels[0] / 2, False), strict=True)
        )
    return t


def _update_row_seconds(t: dict[str, float], prefix: str = "") -> float:
    """Seconds per extra distinct row between :func:`_update_times`' two timings."""
    extra = t[f"{prefix}update every"] - t[f"{prefix}update few"]
    return max(extra, 1e-12) / max(t[f"{prefix}update distinct"], 1.0)


def _fit_update_llc(t: dict[str, float]) -> float:
    """``update_llc_speedup``: a distinct row's update from memory (the cold timings on the
    calibration's table) over one from the last-level cache (the warm timings on a table it
    holds), within the field's range [1, 100] (a cache does not slow a row: below 1 is noise)."""
    return float(min(100.0, max(1.0, _update_row_seconds(t) / _update_row_seconds(t, "warm "))))


def _fit_update(t: dict[str, float], copy_bw: float, gather_eff: float, gather_half: float) -> float:
    """``update_efficiency`` from :func:`_update_times`: the model prices a distinct row's
    update as its row and state bytes (row-wise Adagrad: 4) read and written at
    ``update_efficiency`` of their gather bandwidth
    (:func:`~recnotebooks.perf.components.embeddings.gather_bandwidth`); fitted so that the extra
    distinct rows cost what the second timing took more than the first."""
    gather_bw = copy_bw * gather_eff * UPDATE_ROW_BYTES / (UPDATE_ROW_BYTES + gather_half)
    modeled = t["update distinct"] * (UPDATE_ROW_BYTES + 4) * 2 / gather_bw
    return float(min(4.0, max(1e-3, modeled / t["update distinct"] / _update_row_seconds(t))))


def _grouping_path(dev: str) -> str:
    """How a training step on ``dev`` groups its lookups by row (what :func:`_grouping_rate` times)."""
    return "fused counting sort" if dev == "cpu" and fused_available() else "group_by_row sort"


def _grouping_rate(dev: str, reps: int) -> tuple[float, str]:
    """Lookups per second grouped by row as a training step here groups them: the fused
    kernel's counting sort (:mod:`recnotebooks.kernels.fused_adagrad`) where it runs (CPU, Numba),
    else ``group_by_row``'s sort; 2**20 lookups into 2**20 rows, 8 per bag."""
    n = 2**20
    ids = torch.randint(0, 2**20, (n,), device=dev)
    path = _grouping_path(dev)
    if path == "fused counting sort":
        ids_np, offs = ids.numpy(), np.arange(0, n + 1, 8, dtype=np.int64)
        threads = torch.get_num_threads()
        return n / _best(lambda: group_lookups(ids_np, offs, n, threads), reps, True, dev), path
    bags = torch.arange(n, device=dev) // 8
    return n / _best(lambda: group_by_row(ids, bags), reps, True, dev), path


#: bytes of the table the calibration's row gathers read (uniform random rows, bags of LONG_BAG)
GATHER_TABLE_BYTES = 64 * 2**20
#: Bag length the per-bag cost is measured against (bags of 1 vs bags of this many).
LONG_BAG = 128


def _lookups(quick: bool) -> int:
    """Lookups of one timed gather call."""
    return 2**20 if not quick else 2**18


def _gather_seconds(
    table_bytes: float, row_bytes: int, bag: int, reps: int, quick: bool, cold: bool, dev: str = "cpu"
) -> float:
    """Seconds of one ``embedding_bag`` call (what our forward calls; :func:`_best`): uniform
    random :func:`_lookups` of ``row_bytes`` fp32 rows from a table of ``table_bytes``, summed in
    bags of ``bag`` (caches flushed before each call when ``cold``)."""
    w = torch.randn(max(1, int(table_bytes // row_bytes)), row_bytes // 4, device=dev)
    n = _lookups(quick)
    ids, offs = torch.randint(0, w.shape[0], (n,), device=dev), torch.arange(0, n, bag, device=dev)
    return _best(lambda: torch.nn.functional.embedding_bag(ids, w, offs, mode="sum"), reps, cold, dev)


def _bag_cost(reps: int, quick: bool, dev: str = "cpu") -> float:
    """Seconds per bag per byte of its pooled vector, beyond its rows
    (:attr:`Hardware.bag_seconds_per_byte`): uniform random lookups of 256 B rows from the
    calibration's table, pooled in bags of 1 and of :data:`LONG_BAG`; the time they differ by,
    over the bags they differ by, over 256 (0 if none)."""
    short, long = (
        _gather_seconds(GATHER_TABLE_BYTES, 256, bag, reps, quick, True, dev) for bag in (1, LONG_BAG)
    )
    n = _lookups(quick)
    return max(0.0, (short - long) / (n - n / LONG_BAG) / 256)


def _cache_levels() -> dict[int, tuple[float, float]]:
    """The CPU's data cache levels: ``level -> (bytes of all its instances, bytes of one)``,
    from Linux sysfs; empty elsewhere."""
    levels: dict[tuple[int, str], int] = {}
    for d in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index[0-9]*"):
        try:
            if (d / "type").read_text().strip() == "Instruction":
                continue
            size = (d / "size").read_text().strip().upper()
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
            key = (int((d / "level").read_text()), (d / "shared_cpu_list").read_text().strip())
            levels[key] = int(size.rstrip("KMG")) * scale
        except (OSError, ValueError):
            continue
    out: dict[int, tuple[float, float]] = {}
    for (lvl, _), size_bytes in levels.items():
        total, one = out.get(lvl, (0.0, 0.0))
        out[lvl] = (total + size_bytes, max(one, float(size_bytes)))
    return out


def _llc_levels() -> tuple[float, float] | None:
    """``(bytes of one instance, bytes of all)`` of the cache where a Zipf table's hottest rows
    sit: the largest CPU cache level whose instances are smaller than the calibration's gather
    table (its L3; or its L2 where one L3 holds that whole table, so that the calibration's
    gathers already run from L3); None where the OS does not say."""
    below = [(one, total) for total, one in _cache_levels().values() if one < GATHER_TABLE_BYTES]
    return max(below) if below else None


def _llc_bytes() -> float:
    """``llc_bytes``: all instances of :func:`_llc_levels`' cache (the model's one device is the
    whole CPU)."""
    levels = _llc_levels()
    return levels[1] if levels else 0.0


def _llc_speedup(reps: int, quick: bool) -> float | None:
    """``llc_speedup``, measured: random 128-byte row gathers from a table half one instance
    of :func:`_llc_levels`' cache, warm, against the calibration's table after a step's worth of
    other traffic (:func:`_flush`); None where the OS does not say (the preset's values stay)."""
    levels = _llc_levels()
    if levels is None:
        return None
    warm = _gather_seconds(levels[0] / 2, 128, LONG_BAG, reps, quick, False)
    speedup = _gather_seconds(GATHER_TABLE_BYTES, 128, LONG_BAG, reps, quick, True) / warm
    return float(min(100.0, max(1.0, speedup)))


def _with_saved_collectives(hw: Hardware) -> Hardware:
    """``hw`` with the collective fields of the saved CPU calibration where those were
    measured by ``recnb calibrate --collectives`` (so recalibrating the rest keeps them)."""
    saved = load_calibration(kind="cpu")
    if saved is None:
        return hw
    src = saved.sources if isinstance(saved.sources, dict) else {}
    keep = [f for f in COLLECTIVE_FIELDS if str(src.get(f, "")).startswith(COLLECTIVES_SOURCE)]
    if not keep:
        return hw
    return hw.replace(
        **{f: getattr(saved, f) for f in keep}, sources={**hw.sources, **{f: src[f] for f in keep}}
    )


def _host_bytes() -> float:
    return float(available_memory_bytes() or 8e9)


def _overhead_configs() -> tuple[DLRMConfig, DLRMConfig]:
    """Two minimal models (1 table of dim 4, batch 2: no real work) that differ only in MLP
    depth (1 and 5 layers each side)."""

    def cfg(depth: int) -> DLRMConfig:
        sizes = {"bottom_width": 16, "top_width": 16, "bottom_depth": depth, "top_depth": depth}
        return architecture_config(num_dense=1, num_tables=1, rows_per_table=1000, embedding_dim=4, **sizes)

    return cfg(1), cfg(5)


def _overhead_pairs(reps: int, device: str = "cpu") -> list[tuple[float, float]]:
    """Seconds per step of :func:`_overhead_configs`' two models, measured back to back
    ``reps`` times: a slow moment of the VM slows a pair, and the median pair's difference is
    the operators' cost (measured apart, one slow spell inflated it 5x)."""

    def t(c: DLRMConfig) -> float:
        return measure_step(c, 2, time_budget_s=0.1, max_steps=100, device=device).seconds_per_step

    shallow, deep = _overhead_configs()
    return [(t(shallow), t(deep)) for _ in range(reps)]


def _per_op(pairs: list[tuple[float, float]]) -> float:
    """Seconds per operator from :func:`_overhead_pairs`: the median step-time difference of the
    two models over the operators the deeper one adds."""
    shallow, deep = _overhead_configs()
    return float(np.median([(b - a) for a, b in pairs])) / (op_count(deep) - op_count(shallow))


def _overheads(hw: Hardware, pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """Per-operator and fixed per-step cost inside real training steps, from
    :func:`_overhead_pairs`: the step-time difference of the two models over the operators
    the extra layers add gives the cost per operator (autograd and optimizer bookkeeping
    included), and what the shallow one's step has beyond its modeled work is the fixed
    per-step cost."""
    shallow, _ = _overhead_configs()
    ts = float(np.median([a for a, _ in pairs]))
    op = max(hw.op_overhead_s, _per_op(pairs))
    modeled = estimate(shallow, hw.replace(op_overhead_s=op, step_overhead_s=0.0), batch_size=2).step_time
    return op, max(0.0, ts - modeled)
