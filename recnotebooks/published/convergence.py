"""How many samples DLRM-DCNv2 needs to reach MLPerf's quality target, by global batch.

MLPerf Training's recommendation benchmark (DLRM-DCNv2 on Criteo 1TB multi-hot, rounds v3.0 to
v6.0) ends when the test AUC reaches 0.80275. How many samples that takes depends on the global
batch: bigger batches take fewer, faster steps but need more samples. MLPerf publishes the
**reference convergence points** (RCPs) it holds submissions to: for each of a few global
batches, the epochs that many seeded reference runs needed (the ``rcps_dlrm_dcnv2`` files of
``mlcommons/logging``'s RCP checker, :data:`RCP_SOURCE`). Every number here is **published**.

The RCP checker (the ``rcp_checker`` module beside them,
https://github.com/mlcommons/logging/blob/master/mlperf_logging/rcp_checker/rcp_checker.py)
turns those lists into a curve, and so does :func:`convergence_curve`, the same way:

1. each point's epochs are the **olympic mean** of its runs (drop the fastest and the slowest
   run, average the rest);
2. points slower than the straight line between their neighbours are **pruned** (with points
   below the fastest-converging batch), leaving the curve the checker tests against;
3. between points, epochs are **interpolated linearly** in the global batch
   (:func:`epochs_to_converge`); outside the first and last point there is no reference, and
   the functions here refuse the batch rather than guess.

Time to train as MLPerf scores it runs from ``run_start`` to ``run_stop``: the training samples
plus an evaluation of the :data:`EVAL_SAMPLES` test samples every :data:`EVAL_EVERY_EPOCHS`
epochs. The throughput a submission logs (``tracked_stats`` ``throughput``) is training
samples over that whole interval, evaluations included; :func:`time_to_train` turns such a
throughput into minutes. (:data:`TARGET_AUC` and :data:`TRAIN_SAMPLES` are
:mod:`recnotebooks.published.mlperf`'s, imported here.)

From round v6.1 the benchmark is **DLRMv4** (HSTU on Yambda-5B, target AUC
:data:`DLRMV4_TARGET_AUC` on ``listen_plus``), and its rules (``training_6.1.0``) hold no
DLRM-DCNv2: round ``"v6.1"`` here is DLRMv4's points (:data:`DLRMV4_RCP_SOURCE`), which
publish **samples** to converge (the ``samples_count`` of the first evaluation at the target),
stored verbatim (:data:`DLRMV4_SAMPLES`) and kept as fractions of its epoch
(:data:`DLRMV4_TRAIN_SAMPLES`) so that the same curve, olympic means and pruning apply;
:func:`samples_to_converge` and :func:`time_to_train` use the round's epoch, and its evaluations
run on the grid :func:`dlrmv4_eval_grid` computes as ``closed_dlrmv4.yaml`` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from recnotebooks.checks import check_choice, check_float, check_int, show
from recnotebooks.published.mlperf import TRAIN_SAMPLES, olympic_mean

__all__ = [
    "EVAL_SAMPLES",
    "EVAL_EVERY_EPOCHS",
    "RCP_SOURCE",
    "ReferencePoint",
    "RCPS",
    "RULES",
    "rules_for_round",
    "convergence_curve",
    "epochs_to_converge",
    "EPOCHS_FROM",
    "curve_points",
    "samples_to_converge",
    "time_to_train",
    "evaluations",
    "DLRMV4_RCP_SOURCE",
    "DLRMV4_RULES_SOURCE",
    "DLRMV4_SAMPLES",
    "DLRMV4_TRAIN_SAMPLES",
    "DLRMV4_EVAL_SAMPLES",
    "DLRMV4_TARGET_AUC",
    "DLRMV4_EVAL_EVERY_DATA_PCT",
    "BENCHMARKS",
    "benchmark_of_round",
    "train_samples_of_round",
    "dlrmv4_eval_grid",
    "dlrmv4_evaluations",
]

_REFERENCE = "https://github.com/mlcommons/training/tree/master/recommendation_v2/torchrec_dlrm"
#: Test samples of one evaluation (half of day 23), as every DLRM-DCNv2 submission logs
#: ``eval_samples`` (e.g. NVIDIA's v3.0 logs, ``mlcommons/training_results_v3.0``).
EVAL_SAMPLES = 89_137_319
#: Evaluations run 20 times per epoch: ``--validation_freq_within_epoch`` is
#: ``TOTAL_TRAINING_SAMPLES / (GLOBAL_BATCH_SIZE * 20)`` steps in the reference's README (:data:`_REFERENCE`).
EVAL_EVERY_EPOCHS = 0.05
RCP_SOURCE = (
    "MLPerf reference convergence points for DLRM-DCNv2 (mlcommons/logging, rcp_checker), "
    "https://github.com/mlcommons/logging/tree/master/mlperf_logging/rcp_checker "
    "(training_3.0.0/ ... training_6.0.0/rcps_dlrm_dcnv2.json; read 2026-12-03)"
)


@dataclass(frozen=True)
class ReferencePoint:
    """One published reference convergence point: ``epochs`` that each seeded reference run at
    ``batch_size`` needed to reach :data:`TARGET_AUC`, with its learning rate and who ran it."""

    batch_size: int
    learning_rate: float
    creator: str
    platform: str
    epochs: tuple[float, ...]

    @property
    def mean_epochs(self) -> float:
        """The olympic mean of :attr:`epochs` (the RCP checker's "RCP Mean": drop the fastest and the
        slowest run, average the rest, as :func:`~recnotebooks.published.mlperf.olympic_mean` scores runs)."""
        return olympic_mean(self.epochs)


# The reference runs at 32,768 ... 135,168 (NVIDIA, DGX A100, before and at v3.0) are the rules
# of v3.0 through v5.0; v5.1 added Cisco's 160,000 (DGX H100). Copied from the JSON files of
# RCP_SOURCE in their order.
_NV_A100 = ("NVIDIA", "DGX-A100")
_RCPS_V3 = (
    ReferencePoint(32768, 0.004, *_NV_A100, (
        0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.75, 0.7, 0.7, 0.7, 0.75, 0.75, 0.75, 0.7, 0.7,
        0.7, 0.7, 0.7, 0.75, 0.7, 0.65, 0.7, 0.7, 0.7, 0.7, 0.7)),
    ReferencePoint(55296, 0.004, *_NV_A100, (
        0.75, 0.75, 0.75, 0.7, 0.8, 0.75, 0.75, 0.75, 0.75, 0.75, 0.9, 0.7, 0.75, 0.8, 0.7, 0.8, 0.7, 0.7,
        0.75, 0.7, 0.7, 0.9, 0.75, 0.7, 0.8, 0.75, 0.75, 0.8, 0.75, 0.8, 0.9, 0.75, 0.8, 0.75, 0.8, 0.75,
        0.75, 0.75, 0.7, 0.75, 0.75, 0.8, 0.75, 0.8, 0.8, 0.9, 0.75, 0.75, 0.7, 0.75)),
    ReferencePoint(65536, 0.004, *_NV_A100, (
        0.75, 0.8, 0.75, 0.75, 0.8, 0.75, 0.8, 0.9, 0.95, 0.75, 0.75, 0.75, 0.85, 0.85, 0.7, 0.75, 0.75, 0.9,
        0.85, 0.8, 0.7, 0.75, 0.75, 0.75, 0.8, 0.9, 0.75, 0.8, 0.85, 0.8)),
    ReferencePoint(102400, 0.004, *_NV_A100, (
        0.85, 0.95, 0.95, 0.85, 0.9, 0.8, 0.85, 0.9, 0.9, 0.9, 0.95, 0.9, 0.9, 0.9, 0.9, 0.9, 0.85, 0.85, 0.9,
        0.9, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.85, 0.9, 0.9, 0.9, 0.95, 0.85, 0.9, 0.9, 0.9, 0.85, 0.9,
        0.95, 0.9, 0.85, 0.95, 0.9, 0.9, 0.8, 0.9, 0.9, 0.9, 0.85, 0.9)),
    ReferencePoint(135168, 0.0034, *_NV_A100, (
        0.95, 0.9, 0.9, 0.9, 0.9, 0.95, 0.9, 0.95, 0.95, 0.9, 0.95, 0.95, 0.95, 1.0, 0.85, 0.9, 0.9, 0.95,
        0.95, 0.95, 0.95, 0.9, 0.9, 0.9, 0.95, 0.95, 1.0, 0.9, 0.95, 0.95, 0.85, 0.95, 0.95, 0.95, 0.9, 0.95,
        0.9, 0.9, 1.0, 0.9, 0.95, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.95,
        0.85, 0.95, 0.95, 0.9, 0.95, 0.95, 0.95, 0.95, 1.0, 0.9, 0.95, 0.9, 1.0, 0.85, 0.9, 0.9, 0.95, 0.95,
        0.9, 0.95, 0.9, 0.95, 0.85, 0.95, 0.95, 0.95, 0.9, 0.9, 0.95, 0.9, 0.95, 0.9, 1.0)),
)  # fmt: skip
_RCPS_V51 = (
    *_RCPS_V3,
    ReferencePoint(160000, 0.004, "Cisco", "DGX-H100", (
        0.95, 0.95, 1.0, 1.0, 0.95, 1.0, 1.0, 0.95, 0.95, 0.9, 0.9, 1.0, 0.9, 0.95, 0.9, 1.0, 0.95, 0.95,
        0.95, 1.0)),
)  # fmt: skip
_ML = "https://github.com/mlcommons/logging/blob/1237f5335a93b70f62e2bad30801373726219617/mlperf_logging"
#: DLRMv4's reference convergence points: ``rcps_dlrmv4.json`` of mlcommons/logging pull request
#: #470 at its head 1237f533 (2026-08-08; not yet on the default branch of the snapshot read,
#: 7bbf7926 of 2026-07-29), AMD's reference runs on MI350 nodes.
DLRMV4_RCP_SOURCE = f"{_ML}/rcp_checker/training_6.1.0/rcps_dlrmv4.json"
#: DLRMv4's closed-division rules at the same head: epoch, target, evaluation grid.
DLRMV4_RULES_SOURCE = f"{_ML}/compliance_checker/training_6.1.0/closed_dlrmv4.yaml"
#: Training samples of one DLRMv4 epoch (``train_samples`` of :data:`DLRMV4_RULES_SOURCE`).
DLRMV4_TRAIN_SAMPLES = 2_290_835_423
#: Samples of one DLRMv4 evaluation (``eval_samples``).
DLRMV4_EVAL_SAMPLES = 2_058_204
#: The AUC a DLRMv4 run must reach (``target_accuracy``).
DLRMV4_TARGET_AUC = 0.75
#: An evaluation every this share of an epoch's steps (``eval_every_data_pct``).
DLRMV4_EVAL_EVERY_DATA_PCT = 0.001
#: The published samples to converge of DLRMv4's reference runs, by global batch (as
#: :data:`DLRMV4_RCP_SOURCE` lists them; each a multiple of the batch's evaluation grid), with
#: the learning rate and platform of each point.
DLRMV4_SAMPLES: dict[int, tuple[float, str, tuple[int, ...]]] = {
    8192: (1e-06, "1x8xMI350", (
        66519040, 68812800, 66519040, 66519040, 71106560, 80281600, 61931520, 68812800, 68812800, 73400320,
        66519040, 73400320, 66519040, 66519040, 71106560, 73400320, 66519040, 71106560, 68812800, 68812800)),
    16384: (2e-06, "2x8xMI350", (
        84869120, 84869120, 87162880, 91750400, 82575360, 82575360, 82575360, 91750400, 82575360, 82575360,
        82575360, 77987840, 94044160, 96337920, 87162880, 89456640, 100925440, 98631680, 91750400, 82575360)),
    32768: (4e-06, "4x8xMI350", (
        107806720, 105512960, 112394240, 105512960, 110100480, 107806720, 112394240, 123863040, 114688000,
        110100480, 114688000, 128450560, 112394240, 112394240, 121569280, 98631680, 110100480, 128450560,
        112394240, 110100480)),
}  # fmt: skip
_RCPS_V61 = tuple(
    ReferencePoint(b, lr, "AMD", platform, tuple(n / DLRMV4_TRAIN_SAMPLES for n in samples))
    for b, (lr, platform, samples) in DLRMV4_SAMPLES.items()
)
#: The reference points by rules version (the ``training_X.Y.0`` directory of :data:`RCP_SOURCE`;
#: 6.1.0's are DLRMv4's, :data:`DLRMV4_RCP_SOURCE`).
RCPS: dict[str, tuple[ReferencePoint, ...]] = {"3.0.0": _RCPS_V3, "5.1.0": _RCPS_V51, "6.1.0": _RCPS_V61}
#: Which rules version each MLPerf Training round was held to (the DLRM-DCNv2 files of 3.0.0
#: through 5.0.0 hold the same points, as do 5.1.0 and 6.0.0; v6.1 is DLRMv4's).
RULES: dict[str, str] = {
    "v3.0": "3.0.0", "v3.1": "3.0.0", "v4.0": "3.0.0", "v4.1": "3.0.0", "v5.0": "3.0.0",
    "v5.1": "5.1.0", "v6.0": "5.1.0", "v6.1": "6.1.0",
}  # fmt: skip
#: The recommendation benchmark of each rules version.
BENCHMARKS: dict[str, str] = {"3.0.0": "dlrm_dcnv2", "5.1.0": "dlrm_dcnv2", "6.1.0": "dlrmv4"}
#: The round :func:`epochs_to_converge` uses unless told: the latest rules.
DEFAULT_ROUND = "v6.0"


def rules_for_round(mlperf_round: str) -> tuple[ReferencePoint, ...]:
    """The reference points MLPerf Training round ``mlperf_round`` (``"v3.0"`` ... ``"v6.0"``) used."""
    return RCPS[RULES[check_choice("mlperf_round", mlperf_round, tuple(RULES))]]


def benchmark_of_round(mlperf_round: str) -> str:
    """``"dlrm_dcnv2"`` (rounds v3.0 to v6.0) or ``"dlrmv4"`` (v6.1)."""
    return BENCHMARKS[RULES[check_choice("mlperf_round", mlperf_round, tuple(RULES))]]


def train_samples_of_round(mlperf_round: str) -> int:
    """Training samples of one epoch of the round's benchmark: Criteo 1TB's :data:`TRAIN_SAMPLES`
    or Yambda-5B's :data:`DLRMV4_TRAIN_SAMPLES`."""
    return DLRMV4_TRAIN_SAMPLES if benchmark_of_round(mlperf_round) == "dlrmv4" else TRAIN_SAMPLES


def _interp(batch: float, lo: tuple[int, float], hi: tuple[int, float]) -> float:
    return lo[1] + (hi[1] - lo[1]) * (batch - lo[0]) / (hi[0] - lo[0])


def convergence_curve(mlperf_round: str = DEFAULT_ROUND) -> list[tuple[int, float]]:
    """``(global batch, epochs)`` of the reference points round ``mlperf_round`` held submissions to,
    after the RCP checker's pruning (module docstring): olympic means, ascending in batch.

    >>> [(b, round(e, 4)) for b, e in convergence_curve("v4.0")]
    [(32768, 0.7071), (55296, 0.7615), (135168, 0.9279)]
    """
    points = sorted((p.batch_size, p.mean_epochs) for p in rules_for_round(mlperf_round))
    fastest = min(points, key=lambda p: p[1])
    points = [p for p in points if p[0] >= fastest[0]]
    i = 1
    while i < len(points) - 1:  # the checker's loop: drop a point above its neighbours' line
        if points[i][1] > _interp(points[i][0], points[i - 1], points[i + 1]):
            del points[i]
            i -= 1
        i += 1
    return points


_NAMES = {"dlrm_dcnv2": "DLRM-DCNv2", "dlrmv4": "DLRMv4"}


def epochs_to_converge(global_batch: int, mlperf_round: str = DEFAULT_ROUND) -> float:
    """Epochs of Criteo 1TB that DLRM-DCNv2 needs (from v6.1, of Yambda-5B that DLRMv4 needs)
    to reach its target at ``global_batch`` (the reference curve of round ``mlperf_round``, linear
    between points). A batch outside the curve raises ``ValueError``: MLPerf has no reference
    there, and neither do we."""
    curve = convergence_curve(mlperf_round)
    lo_b, hi_b = curve[0][0], curve[-1][0]
    if (
        isinstance(global_batch, int)
        and not isinstance(global_batch, bool)
        and not lo_b <= global_batch <= hi_b
    ):
        raise ValueError(
            f"global_batch must lie on MLPerf's {_NAMES[benchmark_of_round(mlperf_round)]} convergence curve "
            f"of {mlperf_round}, between "
            f"{lo_b:,} and {hi_b:,} samples (its reference points: {', '.join(f'{b:,}' for b, _ in curve)}), "
            f"got {show(global_batch)}"
        )
    b = check_int("global_batch", global_batch, lo=lo_b, hi=hi_b)
    for lo, hi in zip(curve, curve[1:], strict=False):
        if lo[0] <= b <= hi[0]:
            return _interp(b, lo, hi)
    return curve[0][1]  # a curve of one point


#: Where an epochs value of :func:`curve_points` comes from: a reference point the checker keeps (on
#: the curve), the curve's line between two of them, or a reference point the checker prunes (its
#: runs' olympic mean, above the line: not on the curve).
EPOCHS_FROM = ("published RCP point", "interpolated", "published RCP point, pruned")


def curve_points(batches: tuple[int, ...] = (), mlperf_round: str = DEFAULT_ROUND) -> list[dict[str, object]]:
    """The curve of round ``mlperf_round`` as a chart draws it: one row per global batch
    (``global_batch``, ``epochs``, ``epochs_from``: one of :data:`EPOCHS_FROM`), ascending in batch.

    Each kept reference point is a "published RCP point"; each of ``batches`` off them gets the
    curve's value there, "interpolated" (a batch off the curve raises ``ValueError``, as
    :func:`epochs_to_converge`); each reference point the checker pruned is a "published RCP
    point, pruned", at its olympic mean. Only the first kind and the line between them are what
    MLPerf holds a run to.

    >>> [(r["global_batch"], r["epochs_from"]) for r in curve_points((65536,), "v4.0")][:3]
    [(32768, 'published RCP point'), (55296, 'published RCP point'), (65536, 'interpolated')]
    """
    kept = dict(convergence_curve(mlperf_round))
    rows = [{"global_batch": b, "epochs": e, "epochs_from": EPOCHS_FROM[0]} for b, e in kept.items()]
    for b in dict.fromkeys(batches):
        if b not in kept:
            epochs = epochs_to_converge(b, mlperf_round)
            rows.append({"global_batch": b, "epochs": epochs, "epochs_from": EPOCHS_FROM[1]})
    for p in rules_for_round(mlperf_round):
        if p.batch_size not in kept:
            rows.append(
                {"global_batch": p.batch_size, "epochs": p.mean_epochs, "epochs_from": EPOCHS_FROM[2]}
            )
    order = {k: i for i, k in enumerate(EPOCHS_FROM)}
    return sorted(rows, key=lambda r: (r["global_batch"], order[str(r["epochs_from"])]))  # type: ignore[arg-type]


def samples_to_converge(global_batch: int, mlperf_round: str = DEFAULT_ROUND) -> float:
    """Training samples to reach the target: :func:`epochs_to_converge` x the round's epoch
    (:func:`train_samples_of_round`)."""
    return epochs_to_converge(global_batch, mlperf_round) * train_samples_of_round(mlperf_round)


def evaluations(epochs: float) -> int:
    """Evaluations run while training ``epochs`` epochs (one every :data:`EVAL_EVERY_EPOCHS`,
    the last at convergence): ``ceil(epochs / 0.05)``."""
    epochs = check_float("epochs", epochs, lo=0, lo_open=True, hi=1e6)
    return math.ceil(round(epochs / EVAL_EVERY_EPOCHS, 9))


def time_to_train(
    samples_per_s: float,
    global_batch: int,
    mlperf_round: str = DEFAULT_ROUND,
    *,
    eval_samples_per_s: float | None = None,
) -> float:
    """Minutes to reach the target at ``global_batch`` (:func:`samples_to_converge`).

    With only ``samples_per_s``, it is the throughput as MLPerf logs it: training samples over
    the whole run, evaluations included, so minutes = samples / samples_per_s / 60. Given
    ``eval_samples_per_s`` too, ``samples_per_s`` is the training throughput alone and each of
    the :func:`evaluations` adds :data:`EVAL_SAMPLES` / ``eval_samples_per_s`` seconds."""
    rate = check_float("samples_per_s", samples_per_s, lo=0, lo_open=True, hi=1e15)
    epochs = epochs_to_converge(global_batch, mlperf_round)
    samples = epochs * train_samples_of_round(mlperf_round)
    seconds = samples / rate
    if eval_samples_per_s is not None:
        eval_rate = check_float("eval_samples_per_s", eval_samples_per_s, lo=0, lo_open=True, hi=1e15)
        if benchmark_of_round(mlperf_round) == "dlrmv4":
            seconds += dlrmv4_evaluations(global_batch, samples) * DLRMV4_EVAL_SAMPLES / eval_rate
        else:
            seconds += evaluations(epochs) * EVAL_SAMPLES / eval_rate
    return seconds / 60.0


def dlrmv4_eval_grid(global_batch: int) -> tuple[int, int]:
    """``(eval_interval_samples, first_eval_samples)`` of a DLRMv4 run at ``global_batch``, as
    :data:`DLRMV4_RULES_SOURCE` computes them: an evaluation every ``round(0.001 x steps of an
    epoch)`` steps, the first at the grid point at or after ``floor((4480 b + 135,331,840) / 3)``
    samples (the reference's earliest convergence less its margin).

    >>> dlrmv4_eval_grid(8192)
    (2293760, 57344000)
    """
    b = check_int("global_batch", global_batch, lo=1, hi=DLRMV4_TRAIN_SAMPLES)
    interval = max(1, round(DLRMV4_EVAL_EVERY_DATA_PCT * (DLRMV4_TRAIN_SAMPLES // b))) * b
    first = math.ceil(((4480 * b + 135_331_840) // 3) / interval) * interval
    return interval, first


def dlrmv4_evaluations(global_batch: int, samples: float) -> int:
    """Evaluations a DLRMv4 run at ``global_batch`` makes while training ``samples`` samples: one
    at each point of :func:`dlrmv4_eval_grid` from the first, the last at or after ``samples``."""
    interval, first = dlrmv4_eval_grid(global_batch)
    samples = check_float("samples", samples, lo=0, lo_open=True, hi=1e15)
    return 1 + max(0, math.ceil(round((samples - first) / interval, 9)))
