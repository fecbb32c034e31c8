"""Calibrate this machine's collectives: all-to-all and all-reduce over gloo on local ranks.

The cost model charges a collective (:func:`~recnotebooks.perf.components.collectives.all_to_all_seconds` and
:func:`~recnotebooks.perf.components.collectives.all_reduce_seconds`) as

    seconds = steps * collective_latency_s + volume / intra_node_bw

where, for ``W`` ranks inside one node and a buffer of ``S`` bytes per rank,

* all-to-all (pairwise): ``steps = W - 1`` per call, ``volume = S (W - 1) / W`` (the bytes sent
  to other ranks, as :class:`recnotebooks.distributed.CommLog` counts them);
* all-reduce (ring): ``steps = 2 (W - 1)``, ``volume = 2 S (W - 1) / W``.

:func:`measure_collectives` times :mod:`recnotebooks.distributed.comm`'s collectives (the ones the
sharded step runs) on 2 and 4 local gloo ranks over a sweep of buffer sizes, in one of two
patterns:

* ``"in_step"`` (what :func:`calibrate_collectives` uses): as a training step issues them, each
  call after the same burst of compute on every rank and without a barrier; per size, the mean
  over calls and ranks (the cost a step pays per call on average: rare slow calls count, and
  validation compares the mean over ranks). On this 2-core machine that fits about 1 ms per
  latency step against 0.35-0.5 ms back to back: most calls take about what they take back to
  back, but a call that finds a peer descheduled mid-burst, or a rank slow to wake from its
  blocking wait, takes milliseconds on every rank;
* ``"back_to_back"``: calls after a barrier, small buffers as a batch of calls; per size, the
  median over repeats of the slowest rank's time per call (the collective alone).

:func:`fit_latency_bandwidth` fits
``seconds = latency * steps + volume / bandwidth`` by least squares on relative errors (the
sweep spans decades, so every size counts alike). :func:`calibrate_collectives` fits one
``collective_latency_s`` and one ``intra_node_bw`` over every point of both collectives and
world sizes (the two numbers the model uses) and puts them into a ``Hardware``
(``this_machine``), to be saved with :func:`recnotebooks.perf.hardware.save_calibration`.

Ranks beyond the machine's cores share them: their collectives are then slower than a
dedicated core's, and the fit measures exactly that (the figures describe *this* machine
running that many ranks).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from recnotebooks import distributed
from recnotebooks.checks import check_choice, check_float, check_int, check_int_list, show
from recnotebooks.config import preset
from recnotebooks.measure.collective_timing import (
    time_collectives,
    time_collectives_in_step,
    time_sharded_step,
)
from recnotebooks.perf.calibration_file import COLLECTIVES_SOURCE
from recnotebooks.perf.components.collectives import COLLECTIVES
from recnotebooks.perf.components.ops import sharded_extra_ops
from recnotebooks.perf.hardware import Hardware, hardware
from recnotebooks.plan import Plan, TableShard

__all__ = ["COLLECTIVES", "PATTERNS", "DEFAULT_SIZES", "QUICK_SIZES", "model_steps", "model_volume",
           "fit_latency_bandwidth", "measure_collectives", "fit_collectives", "measure_sharded_op_cost",
           "calibrate_collectives"]  # fmt: skip

#: The collectives calibrated (those the cost model charges).
#: Buffer bytes per rank swept by default (1 KB to 4 MB) and in quick mode.
DEFAULT_SIZES = (1024, 8192, 65536, 262144, 1048576, 4194304)
QUICK_SIZES = (4096, 65536, 1048576, 4194304)


def model_steps(collective: str, world: int) -> int:
    """Latency steps the cost model charges one call of ``collective`` on ``world`` ranks."""
    check_choice("collective", collective, COLLECTIVES)
    world = check_int("world", world, lo=2)
    return world - 1 if collective == "all_to_all" else 2 * (world - 1)


def model_volume(collective: str, nbytes: float, world: int) -> float:
    """Bytes per rank the cost model charges one call of ``collective`` on a buffer of ``nbytes``."""
    check_choice("collective", collective, COLLECTIVES)
    nbytes = check_float("nbytes", nbytes, lo=0)
    world = check_int("world", world, lo=2)
    share = nbytes * (world - 1) / world
    return share if collective == "all_to_all" else 2 * share


def _positive_array(name: str, values: object) -> np.ndarray:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise TypeError(f"{name} must be a sequence of numbers, got {show(values)}")
    return np.array([check_float(f"{name}[{i}]", v, lo=0) for i, v in enumerate(values)], dtype=float)


def fit_latency_bandwidth(
    volumes: Sequence[float], seconds: Sequence[float], steps: Sequence[float] | None = None
) -> tuple[float, float]:
    """``(latency_s, bandwidth)`` of ``seconds ≈ latency_s * steps + volumes / bandwidth``.

    Least squares on relative errors (weights ``1 / seconds``); ``steps`` defaults to 1 per point
    (then ``latency_s`` is the time of an empty call). A negative latency fit is clipped to 0 and
    the bandwidth refitted. Raises ValueError for fewer than two points, mismatched lengths,
    non-positive seconds, fewer than two distinct volumes, or timings that do not grow with
    the volume (no finite bandwidth).
    """
    v, t = _positive_array("volumes", volumes), _positive_array("seconds", seconds)
    s = np.ones_like(t) if steps is None else _positive_array("steps", steps)
    if not (len(v) == len(t) == len(s)):
        raise ValueError(
            f"volumes, seconds and steps must have equal lengths, got {len(v)}, {len(t)} and {len(s)}"
        )
    if len(t) < 2 or len(np.unique(v)) < 2:
        raise ValueError(f"the fit needs at least two distinct volumes, got volumes={show(list(v))}")
    if np.any(t <= 0):
        raise ValueError(f"seconds must all be > 0, got {show(list(t))}")
    a = np.stack([s / t, v / t], axis=1)  # rows of the weighted system [steps, volume] / t
    (lat, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if lat < 0:
        lat = 0.0
        inv_bw = float(np.sum(v / t) / np.sum((v / t) ** 2))
    if not inv_bw > 0:
        raise ValueError(
            "seconds do not grow with volumes (no finite bandwidth fits): sweep larger volumes, got "
            f"volumes={show(list(v))}, seconds={show(list(t))}"
        )
    return float(lat), float(1.0 / inv_bw)


#: The timing patterns of :func:`measure_collectives` (see the module docstring).
PATTERNS = ("in_step", "back_to_back")


def measure_collectives(
    world_sizes: Sequence[int] = (2, 4),
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeats: int = 5,
    warmup: int = 2,
    collectives: Sequence[str] = COLLECTIVES,
    timeout_s: float = 60.0,
    pattern: str = "back_to_back",
) -> list[dict[str, Any]]:
    """Time the collectives on each number of local gloo ranks; tidy rows, one per point.

    Each row: ``source`` ("measured"), ``pattern``, ``collective``, ``world_size``, ``bytes``
    (each rank's buffer), ``volume`` and ``steps`` (as the model charges them), ``seconds``,
    ``min_s`` and ``max_s``. ``pattern="back_to_back"``: ``repeats`` repeats, ``seconds`` their
    median of the slowest rank, min and max over repeats; ``"in_step"``: ``repeats`` calls each
    after a burst of compute, ``seconds`` the mean over calls and ranks, min and max over calls
    (of the ranks' mean).
    """
    worlds = check_int_list("world_sizes", world_sizes, lo=2, min_len=1)
    sizes_ = check_int_list("sizes", sizes, lo=4, min_len=2)
    repeats = check_int("repeats", repeats, lo=1, hi=1000)
    warmup = check_int("warmup", warmup, lo=0, hi=1000)
    if isinstance(collectives, str) or not collectives:
        raise ValueError(
            f"collectives must be a non-empty list from {list(COLLECTIVES)}, got {show(collectives)}"
        )
    names = [check_choice("collectives[]", c, COLLECTIVES) for c in collectives]
    pattern = check_choice("pattern", pattern, PATTERNS)
    worker = time_collectives_in_step if pattern == "in_step" else time_collectives
    rows = []
    for world in worlds:
        result = distributed.launch(worker, world, sizes_, repeats, warmup, names, timeout_s=timeout_s)
        used = result.values[0]["bytes"]
        for name in names:
            for k, nbytes in enumerate(used):
                per_rank = np.array([v[name][k] for v in result.values])  # (ranks, repeats or calls)
                if pattern == "in_step":  # each call's mean over ranks; the mean over calls
                    each, seconds = per_rank.mean(axis=0), float(per_rank.mean())
                else:  # a repeat ends when its slowest rank does; the median repeat
                    each = per_rank.max(axis=0)
                    seconds = float(np.median(each))
                rows.append(
                    {
                        "source": "measured",
                        "pattern": pattern,
                        "collective": name,
                        "world_size": world,
                        "bytes": nbytes,
                        "volume": model_volume(name, nbytes, world),
                        "steps": model_steps(name, world),
                        "seconds": seconds,
                        "min_s": float(each.min()),
                        "max_s": float(each.max()),
                    }
                )
    return rows


def fit_collectives(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Fits of :func:`measure_collectives` rows: per (collective, world size) ``latency_s`` (one
    call's) and ``bandwidth`` (B/s of the model's volume), ``alpha_s`` (= latency per model step);
    and the model's two numbers fitted over every row: ``collective_latency_s``, ``intra_node_bw``."""
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or not rows:
        raise ValueError(f"rows must be a non-empty list of measure_collectives rows, got {show(rows)}")
    needed = ("collective", "world_size", "volume", "steps", "seconds")
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or any(k not in r for k in needed):
            raise ValueError(f"rows[{i}] must be a dict with keys {list(needed)}, got {show(r)}")
    fits = []
    for key in sorted({(r["collective"], r["world_size"]) for r in rows}):
        sel = [r for r in rows if (r["collective"], r["world_size"]) == key]
        lat, bw = fit_latency_bandwidth([r["volume"] for r in sel], [r["seconds"] for r in sel])
        fits.append(
            {
                "collective": key[0],
                "world_size": key[1],
                "latency_s": lat,
                "bandwidth": bw,
                "alpha_s": lat / sel[0]["steps"],
                "points": len(sel),
            }
        )
    alpha, bw = fit_latency_bandwidth(
        [r["volume"] for r in rows], [r["seconds"] for r in rows], [r["steps"] for r in rows]
    )
    modeled = [alpha * r["steps"] + r["volume"] / bw for r in rows]
    errors = [abs(m - r["seconds"]) / r["seconds"] for m, r in zip(modeled, rows, strict=True)]
    return {"fits": fits, "collective_latency_s": alpha, "intra_node_bw": bw, "mape": float(np.mean(errors))}


#: The sharding scheme of table ``k`` in :func:`measure_sharded_op_cost`'s one-rank plan. Not
#: data-parallel: its replica updates every row of its tables each step, work the model prices by
#: the rows (``perf.components.lookups``), not by the operators.
_SCHEMES = ("table_wise", "row_wise", "column_wise")


def measure_sharded_op_cost(
    batch_size: int = 16, steps: int = 10, rounds: int = 9, timeout_s: float = 120.0
) -> dict[str, Any]:
    """Seconds per operator that our sharded step adds to the single-process one, MEASURED here.

    One local rank trains the ``tiny`` preset both ways on the same small batches (table ``k``
    table-, row- or column-wise, whole on the one rank; not data-parallel, whose every-row
    update the model prices by its rows;
    :func:`recnotebooks.measure.collective_timing.time_sharded_step`): the arithmetic is the same,
    so the step-time difference, less the time the sharded step's logged collectives took (the
    model charges those separately, at the calibrated latency), is the sharded step's own host
    work (its Python loops over shards, host syncs of splits and offsets, DDP's reducer),
    divided by the operators the model counts for it
    (:func:`~recnotebooks.perf.components.sharded_extra_ops`). Each side's fastest round is
    taken (contention only adds time); for the sharded side, the round whose time less its own
    collectives is least, so a collective slowed by another program in one round is never
    subtracted from another round's step. Returns
    ``sharded_op_overhead_s``, ``extra_s``, ``extra_ops``, ``single_s``, ``sharded_s``,
    ``collectives_s`` and the per-round figures. Raises RuntimeError when the sharded step was
    not slower (noise).
    """
    batch_size = check_int("batch_size", batch_size, lo=1, hi=1 << 16)
    steps = check_int("steps", steps, lo=1, hi=1000)
    rounds = check_int("rounds", rounds, lo=1, hi=1000)
    config = preset("tiny")
    plan = Plan(1, tuple(TableShard(t.name, 0, _SCHEMES[k % 3]) for k, t in enumerate(config.tables)))
    args = (config, plan, batch_size, steps, rounds)
    res = distributed.launch(time_sharded_step, 1, *args, timeout_s=timeout_s)
    times = res.values[0]
    # the sharded round whose own work (its time less the collectives logged in it) was least
    own = [s - c for s, c in zip(times["sharded"], times["collectives"], strict=True)]
    best = int(np.argmin(own))
    sharded_s, coll_s = times["sharded"][best], times["collectives"][best]
    extra_s = own[best] - min(times["single"])
    ops = float(sharded_extra_ops(config, plan, 0))
    if not extra_s > 0:
        raise RuntimeError(f"the sharded step was not slower than the single-process one ({extra_s:.3g} s)")
    return {
        "sharded_op_overhead_s": extra_s / ops,
        "extra_s": extra_s,
        "extra_ops": ops,
        "single_s": min(times["single"]),
        "sharded_s": sharded_s,
        "collectives_s": coll_s,
        "rounds": times,
        "batch_size": batch_size,
    }


def calibrate_collectives(
    hw: Hardware | None = None,
    quick: bool = False,
    world_sizes: Sequence[int] = (2, 4),
    timeout_s: float = 60.0,
    pattern: str = "in_step",
) -> tuple[Hardware, dict[str, Any]]:
    """Measure and fit this machine's collectives; ``hw`` (default ``this_machine``) with
    ``collective_latency_s`` and ``intra_node_bw`` replaced, and ``sharded_op_overhead_s`` from
    :func:`measure_sharded_op_cost`; and the raw figures (rows and fits, ``"sharded_op"``).

    ``pattern`` is :func:`measure_collectives`'s: ``"in_step"`` (the default: collectives as a
    training step issues them, between compute, which is what the model charges them for) or
    ``"back_to_back"`` (the collective alone)."""
    hw = hardware("this_machine") if hw is None else hw
    if not isinstance(hw, Hardware):
        raise TypeError(f"hw must be a Hardware or None, got {show(hw)}")
    t0 = time.perf_counter()
    pattern = check_choice("pattern", pattern, PATTERNS)
    sizes = QUICK_SIZES if quick else DEFAULT_SIZES
    repeats = (30 if quick else 60) if pattern == "in_step" else (3 if quick else 5)  # calls or repeats
    rows = measure_collectives(world_sizes, sizes, repeats=repeats, timeout_s=timeout_s, pattern=pattern)
    fit = fit_collectives(rows)
    alpha, bw = fit["collective_latency_s"], fit["intra_node_bw"]
    if not (math.isfinite(alpha) and math.isfinite(bw) and bw > 0):
        raise RuntimeError(f"the collective fit failed: latency {alpha}, bandwidth {bw}")
    how = "each call after a burst of compute, as in a step" if pattern == "in_step" else "back to back"
    src = (
        f"{COLLECTIVES_SOURCE} on {time.strftime('%Y-%m-%d')}: gloo on "
        f"{'/'.join(map(str, world_sizes))} local ranks, all-to-all and all-reduce ({how}), "
        "seconds = steps * latency + volume / bandwidth"
    )
    ops = _sharded_op_cost(quick, timeout_s)
    src_ops = (
        f"{COLLECTIVES_SOURCE} on {time.strftime('%Y-%m-%d')}: our "
        "sharded step on one rank minus the single-process step, per operator counted"
    )
    out = hw.replace(
        collective_latency_s=alpha,
        intra_node_bw=bw,
        sharded_op_overhead_s=ops["sharded_op_overhead_s"],
        sources={
            **hw.sources,
            "collective_latency_s": src,
            "intra_node_bw": src,
            "sharded_op_overhead_s": src_ops,
        },
    )
    raw = {"rows": rows, **fit, "pattern": pattern, "sharded_op": ops, "seconds": time.perf_counter() - t0}
    return out, raw


def _sharded_op_cost(quick: bool, timeout_s: float, tries: int = 3) -> dict[str, Any]:
    """:func:`measure_sharded_op_cost`, measured again (up to ``tries`` times) when another
    program's work made the sharded step read no slower than the single-process one: that is
    noise, not a figure, and a busy moment passes."""
    for attempt in range(tries):
        try:
            return measure_sharded_op_cost(rounds=9 if quick else 15, timeout_s=max(timeout_s, 120.0))
        except RuntimeError as e:
            if attempt == tries - 1:
                raise RuntimeError(
                    f"{e} in {tries} tries: the machine is too busy to measure it; "
                    "run the calibration again when it is quieter"
                ) from None
    raise AssertionError("unreachable")


# ----- local ranks sharing this machine --------------------------------------------------------
#: Fields the microbenchmarks measure with every core busy (throughput-bound): W ranks get 1/W each.
SHARED_THROUGHPUT_FIELDS = ("hbm_bw", "host_mem_bw", "host_link_bw", "sort_rate")


def local_ranks_hardware(
    hw: Hardware,
    world: int,
    cores: int | None = None,
    collective_rows: Sequence[dict[str, Any]] | None = None,
) -> Hardware:
    """``hw`` (this machine, calibrated as one process) as seen by each of ``world`` local ranks.

    The sharing rule (``W = world`` ranks on ``C = cores`` cores, default ``os.cpu_count()``;
    each rank runs ``max(1, C // W)`` threads, :mod:`recnotebooks.distributed.launch`):

    * ``devices = W`` (one "device" per rank, so ``estimate(..., gpus=W)`` is allowed) and
      ``hbm_bytes``, ``host_mem_bytes`` divided by ``W`` (memory is shared);
    * throughput-bound figures, calibrated with all ``C`` cores busy (``peak_flops``,
      :data:`SHARED_THROUGHPUT_FIELDS`: memory, gather and copy bandwidth, sort rate), are
      divided by ``W``: the ranks run at once and share the cores and the memory bus;
    * per-operator and per-step overheads were measured single-threaded: unchanged while each
      rank has a core of its own, times ``W / C`` when ``W > C`` (ranks time-share the cores);
    * collectives (``collective_latency_s``, ``intra_node_bw``) were measured *at* ``W`` ranks:
      unchanged, or, given ``collective_rows`` (:func:`measure_collectives` rows) that include
      ``world_size == W``, refitted on those rows alone (the fit for exactly this rank count).

    Raises ValueError for ``world`` or ``cores`` < 1, TypeError for a ``hw`` that is not a Hardware.
    """
    if not isinstance(hw, Hardware):
        raise TypeError(f"hw must be a Hardware, got {show(hw)}")
    w = check_int("world", world, lo=1)
    c = check_int("cores", (os.cpu_count() or 1) if cores is None else cores, lo=1)
    busy = max(1.0, w / c)
    changes: dict[str, Any] = {
        "devices": w,
        "hbm_bytes": hw.hbm_bytes / w,
        "host_mem_bytes": hw.host_mem_bytes / w,
        "peak_flops": {k: v / w for k, v in hw.peak_flops.items()},
        **{f: getattr(hw, f) / w for f in SHARED_THROUGHPUT_FIELDS},
        "op_overhead_s": hw.op_overhead_s * busy,
        "sharded_op_overhead_s": None
        if hw.sharded_op_overhead_s is None
        else hw.sharded_op_overhead_s * busy,
        "step_overhead_s": hw.step_overhead_s * busy,
    }
    if collective_rows is not None:
        mine = [r for r in collective_rows if isinstance(r, dict) and r.get("world_size") == w]
        if mine:
            fit = fit_collectives(mine)
            changes.update(
                collective_latency_s=fit["collective_latency_s"], intra_node_bw=fit["intra_node_bw"]
            )
    return hw.replace(**changes, description=f"{hw.description}; shared by {w} local ranks on {c} cores")


__all__ += ["SHARED_THROUGHPUT_FIELDS", "local_ranks_hardware"]
