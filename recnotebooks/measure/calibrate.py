"""Calibration of ``this_machine`` by microbenchmarks, and validation against real steps.

:func:`calibrate` times small kernels on the local device and fits the hardware fields the
cost model uses: GEMM efficiency by shape (peak and half-dimension), memory copy
bandwidth, embedding-row gather bandwidth by row size, the last-level cache (its size from
the OS, its speed-up for random rows measured), the rate at which lookups are grouped by
row, per-operator overhead and the fixed per-step cost. The result is a
:class:`~recnotebooks.perf.hardware.Hardware` named ``this_machine``;
:func:`~recnotebooks.perf.hardware.save_calibration` stores it (``~/.cache/recnotebooks``,
or ``$RECNB_CALIBRATION``) and ``hardware("this_machine")`` loads it from then on. The
stored file belongs to :mod:`recnotebooks.perf.hardware` (which loads it and must not
import this module); its functions are re-exported here.

:mod:`recnotebooks.measure.validate` checks the calibrated model against real steps; its
speed :func:`probe` and :func:`at_speed` live here, beside what they correct.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from recnotebooks.checks import available_memory_bytes
from recnotebooks.config import DLRMConfig, architecture_config
from recnotebooks.kernels.fused import fused_available
from recnotebooks.kernels.fused_adagrad import group_lookups
from recnotebooks.measure import measure_step
from recnotebooks.nn.rows import group_by_row
from recnotebooks.perf.components.ops import op_count
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import (
    COLLECTIVE_FIELDS,
    COLLECTIVES_SOURCE,
    HARDWARE,
    Hardware,
    calibration_path,
    load_calibration,
    load_probe,
    save_calibration,
)
from recnotebooks.train import resolve_device

__all__ = [
    "calibrate",
    "save_calibration",
    "load_calibration",
    "load_probe",
    "calibration_path",
    "probe",
    "at_speed",
]


def probe(reps: int = 5, device: str = "cpu") -> dict[str, float]:
    """A 50 ms reading of this machine's current speed: a 1024^3 GEMM and a 64 MB copy.

    Shared machines (VMs, laptops on battery) change speed from minute to minute; the
    validation compares each measurement with the model scaled by the probe taken next to
    it, relative to the probe taken at calibration.
    """
    a, b = torch.randn(1024, 1024, device=device), torch.randn(1024, 1024, device=device)
    g = 2 * 1024**3 / _best(lambda: torch.mm(a, b), reps, device=device) / 1e9
    x = torch.randn(16 * 2**20, device=device)
    y = torch.empty_like(x)
    return {"gflops": g, "copy_bw": 2 * x.numel() * 4 / _best(lambda: y.copy_(x), reps, device=device)}


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


def _best(fn, reps: int, cold: bool = False, device: str = "cpu") -> float:  # type: ignore[no-untyped-def]
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


def calibrate(device: str = "cpu", quick: bool = False) -> tuple[Hardware, dict[str, object]]:
    """Microbenchmark the local device; returns the fitted ``this_machine`` and the raw figures.

    ``device`` is ``"cpu"`` or ``"cuda"``/``"cuda:N"`` (then ``this_machine`` describes one
    GPU of this machine: kind ``gpu``, its memory, bandwidths and PCIe link as measured).
    """
    dev = str(resolve_device(device))
    cuda = dev.startswith("cuda")
    if cuda and ":" not in dev:
        dev = f"cuda:{torch.cuda.current_device()}"
    reps = 3 if quick else 7
    probes = [probe(device=dev)]
    raw: dict[str, object] = {"device": dev}
    a, b = torch.zeros(1, device=dev), torch.zeros(1, device=dev)
    op = _best(lambda: [torch.add(a, b) for _ in range(200)], reps, device=dev) / 200
    raw["op_overhead_s"] = op
    x = torch.randn(16 * 2**20, device=dev)  # 64 MB: the size of the tables the measurements train
    y = torch.empty_like(x)
    copy_bw = 2 * x.numel() * 4 / _best(lambda x=x, y=y: y.copy_(x), reps, True, dev)
    raw["copy_bw"] = copy_bw
    # The three GEMMs of a linear layer in training, as nn.Linear runs them: Y = X W^T (+ bias),
    # dX = dY W and dW = dY^T X, on MLP-like shapes (batch m, widths n and k).
    gemm = []
    for m in (64, 512, 4096):
        for n, k in ((16, 128), (128, 16), (128, 1024), (1024, 128), (1024, 1024), (256, 2560)):
            X, W, dY = (
                torch.randn(m, k, device=dev),
                torch.randn(n, k, device=dev),
                torch.randn(m, n, device=dev),
            )
            bias = torch.randn(n, device=dev)
            forward = _best(lambda X=X, W=W, b=bias: torch.nn.functional.linear(X, W, b), reps, device=dev)
            gemm.append((m, n, k, forward))
            gemm.append((m, k, n, _best(lambda dY=dY, W=W: dY @ W, reps, device=dev)))
            gemm.append((n, k, m, _best(lambda dY=dY, X=X: dY.t() @ X, reps, device=dev)))
    probes.append(probe(device=dev))
    peak, half = _fit_gemm(gemm, op)
    raw["gemm"] = [{"m": m, "n": n, "k": k, "gflops": 2 * m * n * k / t / 1e9} for m, n, k, t in gemm]
    per_byte = 0.0 if cuda else _bag_cost(reps, quick, dev)
    raw["bag_seconds_per_byte"] = per_byte
    gathers = []  # in long bags: the rows' own time (the bags' is _bag_cost's)
    for row_bytes in (32, 128, 512):
        t = _gather_seconds(GATHER_TABLE_BYTES, row_bytes, LONG_BAG, reps, quick, True, dev)
        gathers.append((row_bytes, _lookups(quick) * row_bytes / t))
    raw["gather_bw"] = {f"{rb} B rows": bw for rb, bw in gathers}
    best = (float("inf"), 0.5, 64.0)
    for hb in np.geomspace(1, 1024, 60):
        f = np.array([rb / (rb + hb) for rb, _ in gathers])
        bw = np.array([g for _, g in gathers])
        e = float(np.sum(bw * f) / np.sum(f * f)) / copy_bw
        err = float(np.sum((copy_bw * e * f / bw - 1) ** 2))
        if err < best[0]:
            best = (err, e, float(hb))
    gather_eff, gather_half = min(best[1], 4.0), best[2]
    sort_rate, raw["sort_path"] = _grouping_rate(dev, reps)
    raw["sort_rate"] = sort_rate
    llc = {} if cuda else _last_level_cache(reps, quick)
    raw.update(llc)
    fields: dict[str, object] = {
        "hbm_bytes": _host_bytes(),
        "host_link_bw": copy_bw,
        "host_mem_bw": copy_bw,
    }  # intra_node_bw is gloo's between local ranks: the preset's, or the saved collectives' (below)
    if cuda:
        props = torch.cuda.get_device_properties(dev)
        host = torch.randn(16 * 2**20, pin_memory=True)
        link = host.numel() * 4 / _best(lambda: x.copy_(host, non_blocking=True), reps, device=dev)
        raw["host_to_device_bw"] = link
        fields = {
            "kind": "gpu",
            "devices": torch.cuda.device_count(),
            "hbm_bytes": float(props.total_memory),
            "host_link_bw": link,
            "intra_node_bw": link,
            "host_mem_bw": HARDWARE["this_machine"].host_mem_bw,
            "description": f"this machine's {props.name}, calibrated by microbenchmarks (recnb calibrate)",
        }
    base = HARDWARE["this_machine"].replace(
        peak_flops={"fp32": peak},
        gemm_max_efficiency=1.0,
        gemm_half_dim=half,
        hbm_bw=copy_bw,
        gather_efficiency=gather_eff,
        gather_half_row_bytes=gather_half,
        op_overhead_s=op,
        sort_rate=sort_rate,
        bag_seconds_per_byte=per_byte,
        host_mem_bytes=_host_bytes(),
        description="this machine, calibrated by microbenchmarks (recnb calibrate)",
        **fields,
        **llc,
    )
    probes.append(probe(device=dev))
    op_step, step = _overheads(base, reps, dev)
    probes.append(probe(device=dev))
    raw["probe"] = {k: float(np.median([p[k] for p in probes])) for k in ("gflops", "copy_bw")}
    base = base.replace(op_overhead_s=op_step, step_overhead_s=step)
    raw["op_overhead_in_step_s"], raw["step_overhead_s"] = op_step, step
    src = "calibrated here by recnb calibrate on " + time.strftime("%Y-%m-%d")
    fitted = ("peak_flops", "gemm_half_dim", "hbm_bw", "gather_efficiency", "gather_half_row_bytes",
              "op_overhead_s", "sort_rate", "step_overhead_s", "hbm_bytes", "bag_seconds_per_byte",
              *llc)  # fmt: skip
    base = base.replace(sources={**HARDWARE["this_machine"].sources, **dict.fromkeys(fitted, src)})
    return (base if cuda else _with_saved_collectives(base)), raw


def _grouping_rate(dev: str, reps: int) -> tuple[float, str]:
    """Lookups per second grouped by row as a training step here groups them: the fused
    kernel's counting sort (:mod:`recnotebooks.kernels.fused_adagrad`) where it runs (CPU, Numba),
    else ``group_by_row``'s sort; 2**20 lookups into 2**20 rows, 8 per bag."""
    n = 2**20
    ids = torch.randint(0, 2**20, (n,), device=dev)
    if dev == "cpu" and fused_available():
        ids_np, offs = ids.numpy(), np.arange(0, n + 1, 8, dtype=np.int64)
        threads = torch.get_num_threads()
        t = _best(lambda: group_lookups(ids_np, offs, n, threads), reps, True, dev)
        return n / t, "fused counting sort"
    bags = torch.arange(n, device=dev) // 8
    return n / _best(lambda: group_by_row(ids, bags), reps, True, dev), "group_by_row sort"


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


def _last_level_cache(reps: int, quick: bool) -> dict[str, float]:
    """``llc_bytes`` and ``llc_speedup`` for the cache where a Zipf table's hottest rows sit:
    the largest CPU cache level whose instances are smaller than the calibration's gather
    table (its L3; or its L2 where one L3 holds that whole table, so that the calibration's
    gathers already run from L3). ``llc_bytes`` counts all of that level's instances (the
    model's one device is the whole CPU); the speed-up is measured: random 128-byte row
    gathers from a table half one instance's size, warm, against the calibration's table
    after a step's worth of other traffic (:func:`_flush`). Empty where the OS does not say
    (the preset's values stay)."""
    below = [(one, total) for total, one in _cache_levels().values() if one < GATHER_TABLE_BYTES]
    if not below:
        return {}
    one, llc = max(below)
    warm = _gather_seconds(one / 2, 128, LONG_BAG, reps, quick, False)
    speedup = _gather_seconds(GATHER_TABLE_BYTES, 128, LONG_BAG, reps, quick, True) / warm
    return {"llc_bytes": llc, "llc_speedup": float(min(100.0, max(1.0, speedup)))}


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


def _overheads(hw: Hardware, reps: int, device: str = "cpu") -> tuple[float, float]:
    """Per-operator and fixed per-step cost inside real training steps.

    Two minimal models (1 table of dim 4, batch 2: no real work) that differ only in MLP
    depth are measured; the step-time difference over the operators the extra layers add
    gives the cost per operator (autograd and optimizer bookkeeping included), and what the
    shallow one's step has beyond its modeled work is the fixed per-step cost.
    """

    def cfg(depth: int) -> DLRMConfig:
        sizes = {"bottom_width": 16, "top_width": 16, "bottom_depth": depth, "top_depth": depth}
        return architecture_config(num_dense=1, num_tables=1, rows_per_table=1000, embedding_dim=4, **sizes)

    def t(c: DLRMConfig) -> float:
        return measure_step(c, 2, time_budget_s=0.1, max_steps=100, device=device).seconds_per_step

    shallow, deep = cfg(1), cfg(5)
    # the two back to back, ``reps`` times: a slow moment of the VM slows a pair, and the median
    # pair's difference is the operators' cost (measured apart, one slow spell inflated it 5x)
    pairs = [(t(shallow), t(deep)) for _ in range(reps)]
    ts = float(np.median([a for a, _ in pairs]))
    per_op = float(np.median([(b - a) for a, b in pairs])) / (op_count(deep) - op_count(shallow))
    op = max(hw.op_overhead_s, per_op)
    modeled = estimate(shallow, hw.replace(op_overhead_s=op, step_overhead_s=0.0), batch_size=2).step_time
    return op, max(0.0, ts - modeled)
