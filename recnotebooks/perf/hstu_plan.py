"""Plan a generative recommender's training job (MLPerf's DLRMv4): how many GPUs of which hardware
hold the model and train it to the target within a deadline. Everything here is **modeled**.

The Training Job Planner (:mod:`recnotebooks.perf.job_planner`) plans DLRMs: its settings, rules
and levers are a DLRM's (a :class:`~recnotebooks.config.Workload`, pooled bags, MLPerf's
DLRM-DCNv2 rules). An HSTU job asks the same questions of other models, so it has its own
focused planner beside it, built from the same parts:

1. each candidate: a hardware preset and a node count (1, 2, 4, ... nodes of its GPUs), the
   global batch split evenly over the GPUs (a candidate whose GPUs do not divide it is skipped);
2. the histories of a GPU at the length distribution (Yambda's by default: median 2,700, mean
   4,800 events, at most the config's ``max_len``; :func:`~recnotebooks.perf.hstu.lognormal_lengths`);
3. its memory (:func:`~recnotebooks.perf.hstu_memory.hstu_memory`: tables sharded over every GPU,
   dense state replicated, activations of the local batch) against a GPU's HBM;
4. its step (:func:`~recnotebooks.perf.hstu.hstu_step`), samples per second, and the minutes to
   the target (:func:`~recnotebooks.published.convergence.time_to_train` of round v6.1, DLRMv4's
   reference convergence points; evaluations priced as forward passes);
5. its price: GPU-hours x the preset's ``price_per_hour``.

:func:`plan_hstu_job` returns every candidate (:class:`HSTUCandidate`) and the chosen one: the
cheapest that fits and meets the deadline (or, without a deadline, the cheapest that fits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from recnotebooks.checks import check_bool, check_float, check_int, check_type
from recnotebooks.config.hstu import HSTUConfig, hstu_preset
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.hstu import hstu_step, lognormal_lengths
from recnotebooks.perf.hstu_memory import hstu_memory
from recnotebooks.published.convergence import convergence_curve, time_to_train

__all__ = ["HSTUCandidate", "HSTUJobPlan", "plan_hstu_job", "YAMBDA_LENGTHS", "HSTU_HARDWARE"]

#: Yambda's history lengths as MLPerf's DLRMv4 reference README gives them: median and mean events
#: (``recommendation_v4/README.MD``, :data:`recnotebooks.config.hstu.DLRMV4_SOURCE`).
YAMBDA_LENGTHS = (2_700.0, 4_800.0)
#: The GPU nodes :func:`plan_hstu_job` tries unless told.
HSTU_HARDWARE = ("dgx_a100_80gb", "dgx_h100", "h200_node", "dgx_b200")
#: The rules round whose convergence points price the time to train (DLRMv4's).
_ROUND = "v6.1"


@dataclass(frozen=True)
class HSTUCandidate:
    """One modeled job: ``nodes`` nodes of ``gpus`` GPUs of ``hardware`` at ``local_batch`` histories
    a GPU; ``fits``: its bytes fit a GPU's HBM less the reserve; ``minutes`` to the target and
    ``dollars`` at the preset's price (``inf`` where it does not fit)."""

    hardware: str
    nodes: int
    gpus: int
    local_batch: int
    device_gb: float
    hbm_gb: float
    fits: bool
    step_s: float
    mfu: float
    dominant: str
    minutes: float
    dollars: float

    @property
    def world(self) -> int:
        return self.nodes * self.gpus


@dataclass
class HSTUJobPlan:
    """:func:`plan_hstu_job`'s answer: ``best`` (or None) and ``why`` in words, every candidate it
    priced, and what it was asked."""

    config: HSTUConfig
    global_batch: int
    deadline_minutes: float | None
    best: HSTUCandidate | None
    why: str
    candidates: list[HSTUCandidate] = field(default_factory=list)
    source: str = "modeled"

    def rows(self) -> list[dict[str, object]]:
        """One tidy row per candidate (its fields, ``world`` and ``chosen``)."""
        return [{**c.__dict__, "world": c.world, "chosen": c == self.best} for c in self.candidates]


def _candidate(
    config: HSTUConfig,
    hw_name: str,
    nodes: int,
    global_batch: int,
    lengths: tuple[float, float],
    padded: bool,
) -> HSTUCandidate | None:
    hw = hardware(hw_name)
    world = hw.devices * nodes
    if global_batch % world:
        return None
    local = global_batch // world
    hist = lognormal_lengths(local, *lengths, config.max_len)
    mem = hstu_memory(config, hist, world, hw, padded=padded)
    step = hstu_step(config, hw, hist, gpus=hw.devices, nodes=nodes, padded=padded)
    fits = mem.fits(hw)
    minutes = dollars = math.inf
    if fits:
        forward = hstu_step(config, hw, hist, gpus=hw.devices, nodes=nodes, padded=padded, backward=False)
        rate = global_batch / step.step_seconds
        minutes = time_to_train(
            rate, global_batch, _ROUND, eval_samples_per_s=global_batch / forward.step_seconds
        )
        dollars = minutes / 60 * world * hw.price_per_hour
    return HSTUCandidate(hw_name, nodes, hw.devices, local, mem.total / 1e9, hw.hbm_bytes / 1e9, fits,
                         step.step_seconds, step.mfu(), step.dominant, minutes, dollars)  # fmt: skip


def plan_hstu_job(
    config: HSTUConfig | str = "dlrmv4",
    *,
    hardware_names: Sequence[str] = HSTU_HARDWARE,
    global_batch: int = 8192,
    deadline_minutes: float | None = None,
    lengths: tuple[float, float] = YAMBDA_LENGTHS,
    max_nodes: int = 64,
    padded: bool = False,
) -> HSTUJobPlan:
    """Plan training ``config`` (an :class:`~recnotebooks.config.hstu.HSTUConfig` or a preset name)
    to DLRMv4's target at ``global_batch`` (on round v6.1's convergence curve, 8,192 to 32,768)
    on 1, 2, 4, ... ``max_nodes`` nodes of each of ``hardware_names``, histories of ``lengths``
    ``(median, mean)`` events; ``deadline_minutes``: the longest acceptable time to train (None:
    any). See the module docstring. The chosen candidate is the cheapest that fits and meets the
    deadline; ``why`` says what it is, or why there is none."""
    cfg = hstu_preset(config) if isinstance(config, str) else config
    check_type("config", cfg, HSTUConfig, "an HSTUConfig or an HSTU preset name")
    lo, hi = convergence_curve(_ROUND)[0][0], convergence_curve(_ROUND)[-1][0]
    global_batch = check_int("global_batch", global_batch, lo=lo, hi=hi)
    if deadline_minutes is not None:
        deadline_minutes = check_float("deadline_minutes", deadline_minutes, lo=0, lo_open=True, hi=1e9)
    max_nodes = check_int("max_nodes", max_nodes, lo=1, hi=4096)
    padded = check_bool("padded", padded)
    if not hardware_names:
        raise ValueError("hardware_names must name at least one hardware preset, got an empty sequence")
    node_counts = [2**i for i in range(max_nodes.bit_length()) if 2**i <= max_nodes]
    found = (
        _candidate(cfg, name, n, global_batch, lengths, padded)
        for name in hardware_names
        for n in node_counts
    )
    candidates = [c for c in found if c is not None]
    ok = [c for c in candidates if c.fits and (deadline_minutes is None or c.minutes <= deadline_minutes)]
    best = min(ok, key=lambda c: (c.dollars, c.minutes)) if ok else None
    return HSTUJobPlan(
        cfg, global_batch, deadline_minutes, best, _why(best, candidates, deadline_minutes), candidates
    )


def _why(best: HSTUCandidate | None, candidates: list[HSTUCandidate], deadline: float | None) -> str:
    if best is not None:
        return (
            f"{best.world} GPUs ({best.nodes} x {best.gpus} of {best.hardware}): {best.device_gb:.0f} of "
            f"{best.hbm_gb:.0f} GB a GPU, {best.minutes:.0f} min to the target, "
            f"${best.dollars:,.0f} (modeled)"
        )
    fitting = [c for c in candidates if c.fits]
    if not fitting:
        return "no candidate fits: the tables and one GPU's activations overflow every GPU tried; add nodes"
    fastest = min(fitting, key=lambda c: c.minutes)
    return (
        f"no candidate meets the deadline of {deadline:.0f} min: the fastest that fits, {fastest.world} "
        f"GPUs of {fastest.hardware}, takes {fastest.minutes:.0f} min (modeled)"
    )
