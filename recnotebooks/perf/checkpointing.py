"""What checkpoints cost a training job, and how often to write them (**modeled**).

A checkpoint lets a job that failed resume instead of starting over; writing it stops training
(or, asynchronously, competes with it) for the time its bytes take to reach storage. Write
often and the job spends its time writing; write rarely and each failure throws away more
work. Three pieces of arithmetic, each a learner can redo by hand:

* :func:`checkpoint_bytes`: what a resumable checkpoint of a DLRM holds: every weight and the
  optimizer's state (row-wise Adagrad one fp32 per row, exact Adagrad one per element, Adam two
  per dense parameter; :func:`~recnotebooks.perf.memory.memory_footprint` counts them). The data
  position and RNG state are a few bytes a rank.
* :func:`write_seconds`: the bytes spread over the ranks that write their own shards (as
  ``torch.distributed.checkpoint`` does), at a **stated** storage bandwidth: the time is the
  larger of ``total / storage_bw`` (the file system's aggregate) and ``per rank / rank_bw``
  (each writer's own link, when given).
* :func:`young_interval` and :func:`daly_interval`: the interval between checkpoints that
  wastes least, given the write time ``delta`` and the job's mean time between failures ``M``.
  Young (1974): ``sqrt(2 delta M)``. Daly (2006), a higher-order estimate:
  ``sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9] - delta`` for ``delta < 2M``,
  else ``M``. :func:`expected_wall_seconds` is Daly's expected wall time for exponentially
  distributed failures (failures may strike while writing and while restarting):
  ``M e^(R/M) (e^((tau + delta) / M) - 1) work / tau``.

A job's MTBF is one device's divided by its devices (any one failing stops a synchronous job):
:func:`job_checkpointing` plans a Training Job Planner job with a published failure rate,
:data:`recnotebooks.published.failures.LLAMA3_405B` by default (one GPU's share of Meta's
16,384-GPU cluster, about 5.8 years).

Sources: J. W. Young, "A first order approximation to the optimum checkpoint interval",
Communications of the ACM 17(9):530-531, 1974; J. T. Daly, "A higher order estimate of the
optimum checkpoint interval for restart dumps", Future Generation Computer Systems
22(3):303-312, 2006.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from recnotebooks.checks import check_float, check_int, check_type
from recnotebooks.config import DLRMConfig, Workload
from recnotebooks.perf.memory import memory_footprint
from recnotebooks.published.failures import LLAMA3_405B

__all__ = [
    "CheckpointPlan",
    "checkpoint_bytes",
    "checkpoint_plan",
    "daly_interval",
    "expected_wall_seconds",
    "interval_sweep",
    "job_checkpointing",
    "write_seconds",
    "young_interval",
]

#: The parts of :func:`~recnotebooks.perf.memory.memory_footprint` a checkpoint holds.
STATE_PARTS = ("embedding_weights", "embedding_optimizer_state", "dense_weights", "dense_optimizer_state")


def checkpoint_bytes(model: DLRMConfig | Workload, embedding_bytes: int | None = None) -> int:
    """Bytes of a resumable checkpoint of ``model``: its weights and optimizer state
    (:data:`STATE_PARTS`). A :class:`~recnotebooks.config.Workload` gives the optimizers and
    dtype; a bare config is counted with row-wise Adagrad on the tables and SGD on the rest, in
    fp32 (``embedding_bytes`` for fp16/bf16 tables)."""
    check_type("model", model, (DLRMConfig, Workload), "a DLRMConfig or a Workload")
    parts = memory_footprint(model, embedding_bytes=embedding_bytes)
    return sum(parts[k] for k in STATE_PARTS)


def write_seconds(total_bytes: float, ranks: int, storage_bw: float, rank_bw: float | None = None) -> float:
    """Seconds to write ``total_bytes`` of checkpoint spread evenly over ``ranks`` writers:
    the larger of the storage's aggregate time (``storage_bw``, bytes/s) and each writer's own
    (``rank_bw``, bytes/s a rank, if given)."""
    total = check_float("total_bytes", total_bytes, lo=0.0, hi=1e21)
    ranks = check_int("ranks", ranks, lo=1, hi=2**24)
    storage = check_float("storage_bw", storage_bw, lo=1.0, hi=1e16)
    aggregate = total / storage
    if rank_bw is None:
        return aggregate
    return max(aggregate, total / ranks / check_float("rank_bw", rank_bw, lo=1.0, hi=1e16))


def _check_times(delta: object, mtbf: object) -> tuple[float, float]:
    return (
        check_float("write_s", delta, lo=0.0, hi=1e12, lo_open=True),
        check_float("mtbf_s", mtbf, lo=0.0, hi=1e15, lo_open=True),
    )


def young_interval(write_s: float, mtbf_s: float) -> float:
    """Young's interval between checkpoints: ``sqrt(2 write_s mtbf_s)`` seconds of work."""
    delta, m = _check_times(write_s, mtbf_s)
    return math.sqrt(2 * delta * m)


def daly_interval(write_s: float, mtbf_s: float) -> float:
    """Daly's higher-order interval between checkpoints (seconds of work; see the module
    docstring): close to Young's when writing is quick against the MTBF, ``mtbf_s`` itself when
    a write takes twice the MTBF or more."""
    delta, m = _check_times(write_s, mtbf_s)
    if delta >= 2 * m:
        return m
    x = delta / (2 * m)
    return math.sqrt(2 * delta * m) * (1 + math.sqrt(x) / 3 + x / 9) - delta


def expected_wall_seconds(
    work_s: float, interval_s: float, write_s: float, mtbf_s: float, restart_s: float = 0.0
) -> float:
    """Daly's expected wall-clock seconds to finish ``work_s`` seconds of training, writing a
    checkpoint (``write_s``) after every ``interval_s`` of work, failures exponential with mean
    ``mtbf_s``, each followed by ``restart_s`` to reload (failures may strike during both)."""
    work = check_float("work_s", work_s, lo=0.0, hi=1e12)
    tau = check_float("interval_s", interval_s, lo=0.0, hi=1e12, lo_open=True)
    delta, m = _check_times(write_s, mtbf_s)
    restart = check_float("restart_s", restart_s, lo=0.0, hi=1e12)
    exponent = (tau + delta) / m + restart / m
    if exponent > 700:  # e^700 is near float64's largest: a job this unlucky never finishes
        return math.inf
    return m * math.exp(restart / m) * math.expm1((tau + delta) / m) * work / tau


@dataclass(frozen=True)
class CheckpointPlan:
    """How a job should checkpoint (**modeled**): its checkpoint's bytes (in all and a rank),
    the seconds to write one, the job's MTBF, Young's and Daly's intervals (seconds of work),
    the interval the job uses (Daly's, or the whole job when it is shorter: one checkpoint, at
    its end), how many it writes, and the expected wall time and the share of it lost to
    writing, restarting and recomputing."""

    total_bytes: float
    ranks: int
    bytes_per_rank: float
    write_s: float
    job_mtbf_s: float
    young_s: float
    daly_s: float
    work_s: float
    wall_s: float
    restart_s: float
    interval_s: float
    checkpoints: int

    @property
    def lost_share(self) -> float:
        """The share of the expected wall time not spent training (0 to 1)."""
        return 1.0 - self.work_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def expected_failures(self) -> float:
        """Failures expected over the job's wall time."""
        return self.wall_s / self.job_mtbf_s


def checkpoint_plan(
    total_bytes: float,
    ranks: int,
    storage_bw: float,
    mtbf_per_device_s: float,
    work_s: float,
    *,
    devices: int | None = None,
    rank_bw: float | None = None,
    restart_s: float | None = None,
) -> CheckpointPlan:
    """The :class:`CheckpointPlan` of a job of ``work_s`` seconds of training on ``devices``
    (default: ``ranks``) whose checkpoint of ``total_bytes`` its ``ranks`` write at
    ``storage_bw`` (``rank_bw``), each device failing once every ``mtbf_per_device_s``.
    ``restart_s``: the time to reload after a failure (default: reading the checkpoint back at
    the write's speed)."""
    ranks = check_int("ranks", ranks, lo=1, hi=2**24)
    devices = ranks if devices is None else check_int("devices", devices, lo=1, hi=2**24)
    write = write_seconds(total_bytes, ranks, storage_bw, rank_bw)
    per_device = check_float("mtbf_per_device_s", mtbf_per_device_s, lo=0.0, hi=1e15, lo_open=True)
    mtbf = per_device / devices
    restart = write if restart_s is None else check_float("restart_s", restart_s, lo=0.0, hi=1e12)
    work = check_float("work_s", work_s, lo=0.0, hi=1e12)
    if write == 0 or work == 0:  # nothing to write or nothing to do: lose nothing
        per_rank = total_bytes / ranks
        return CheckpointPlan(float(total_bytes), ranks, per_rank, write, mtbf, 0.0, 0.0, work, work, restart,
                              work, 0)  # fmt: skip
    daly = daly_interval(write, mtbf)
    interval = min(daly, work)
    wall = expected_wall_seconds(work, interval, write, mtbf, restart)
    return CheckpointPlan(
        float(total_bytes), ranks, total_bytes / ranks, write, mtbf, young_interval(write, mtbf), daly,
        work, wall, restart, interval, math.ceil(work / interval - 1e-9),
    )  # fmt: skip


def interval_sweep(
    total_bytes: float,
    ranks: int,
    storage_bws: tuple[float, ...],
    mtbf_per_device_s: float,
    *,
    devices: int | None = None,
    restart_s: float | None = None,
    points: int = 33,
) -> list[dict[str, object]]:
    """The share of a long job's wall time lost (writing, restarting, recomputing) against the
    interval between checkpoints, one curve per storage bandwidth of ``storage_bws``: ``points``
    intervals from 1/8 to 8 times Daly's, and Daly's own (``current``). Rows: ``storage``
    (words), ``storage_bw``, ``interval_h``, ``lost_share``, ``current``; **modeled**."""
    points = check_int("points", points, lo=3, hi=1001)
    rows: list[dict[str, object]] = []
    for bw in storage_bws:
        p = checkpoint_plan(
            total_bytes, ranks, bw, mtbf_per_device_s, 1.0, devices=devices, restart_s=restart_s
        )
        if p.write_s == 0:
            raise ValueError(f"total_bytes must be above 0 to sweep intervals, got {total_bytes!r}")
        taus = [p.daly_s * 64 ** (i / (points - 1)) / 8 for i in range(points)]
        for tau in sorted({*taus, p.daly_s}):
            wall = expected_wall_seconds(tau, tau, p.write_s, p.job_mtbf_s, p.restart_s)
            rows.append({"storage": f"{bw / 1e9:g} GB/s", "storage_bw": bw, "interval_h": tau / 3600,
                         "lost_share": 1.0 - tau / wall, "current": tau == p.daly_s})  # fmt: skip
    return rows


def job_checkpointing(
    outcome: object,
    storage_bw: float,
    mtbf_per_device_s: float = LLAMA3_405B.mtbf_per_gpu_s,
    *,
    rank_bw: float | None = None,
    restart_s: float | None = None,
) -> CheckpointPlan:
    """:func:`checkpoint_plan` for a job of the Training Job Planner
    (:func:`recnotebooks.perf.job_planner.evaluate`'s outcome): its model's checkpoint
    (:func:`checkpoint_bytes` of its workload), written by every device of the job, its modeled
    training time as the work, at ``storage_bw``; failures at ``mtbf_per_device_s`` a device
    (default: Llama 3's published rate, :data:`~recnotebooks.published.failures.LLAMA3_405B`)."""
    from recnotebooks.perf.job_planner import Outcome

    o = check_type("outcome", outcome, Outcome, "an Outcome of recnotebooks.perf.job_planner.evaluate")
    if o.job is None:
        raise ValueError(f"outcome must be a job that could be modeled, got one that cannot: {o.problem}")
    total = checkpoint_bytes(o.settings.workload)
    return checkpoint_plan(
        total,
        o.job.devices,
        storage_bw,
        mtbf_per_device_s,
        o.job.seconds,
        rank_bw=rank_bw,
        restart_s=restart_s,
    )
