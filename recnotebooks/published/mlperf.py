"""Published MLPerf Training results of DLRM-DCNv2, closed division: the record and its scoring.

The results themselves are :data:`~recnotebooks.published.mlperf_results.MLPERF_DCNV2_RESULTS`,
a generated table in a file of its own (:mod:`recnotebooks.published.mlperf_results`). Each
:class:`MLPerfResult` is one published, audited submission of the ``dlrm_dcnv2``
benchmark (DLRM with a DCNv2 cross network, Criteo 1TB multi-hot, trained to 0.80275 AUC):
one row per round, submitter and system of the closed division. The numbers are what the
submitters logged and MLCommons published after review; nothing here is modeled, fitted or
measured on this machine. Each row's ``source`` is the address of its result folder, e.g.
https://github.com/mlcommons/training_results_v4.0/tree/main/NVIDIA/results/eos_ngc24.04_merlin_hugectr/dlrm_dcnv2
and the table's ``SOURCE_COMMITS`` names the commit of each results repository that was read.

How the numbers were extracted: ``datasets/mlperf_dcnv2.py`` reads git mirrors of the
``mlcommons/training_results_vX.Y`` repositories (the MLLOG lines of every result file of a
result folder, the system description of the system, and the score scaling file if there is
one) and rewrites the generated block of :mod:`recnotebooks.published.mlperf_results`. Run it
again to refresh the table; see the datasets README.

What the fields mean (strings are kept as the submitter wrote them):

- ``run_minutes``: ``run_stop - run_start`` of each result file whose run converged
  (``status: success``), ms / 60,000, in the order of the files' names (``result_0`` ...).
- ``olympic_minutes``: the MLPerf score of those runs, :func:`olympic_mean` (the policy:
  https://github.com/mlcommons/training_policies/blob/master/training_rules.adoc, section
  "Benchmark Results": 10 runs for Recommendation; drop the fastest and the slowest, average
  the other 8; a single non-converging run may count as the slowest; two make the result
  invalid). ``score_minutes`` multiplies it by ``scaling_factor``, the factor the review
  applied (reference convergence points; 1.0 where the folder has no scaling file), as the
  MLCommons results summarizer does (it also counts every result file, and a file that does
  not converge as a dropped run):
  https://github.com/mlcommons/logging/blob/master/mlperf_logging/result_summarizer/result_summarizer.py
- ``samples_per_s``: the throughput the submitter's code logged, ``tracked_stats`` /
  ``throughput`` (samples/s, whole system); median over a run's values, then median over the
  converged runs. None where no throughput is logged: nothing is derived in its place. The
  NVIDIA HugeCTR code that most submitters run logs it once, at the end of a run, as
  (iterations run) x global batch / wall time from the start of training, so evaluations
  are inside it.
- ``epochs_to_target``: for each converged run (the order of ``run_minutes``), the
  ``epoch_num`` of the first evaluation whose AUC reached :data:`TARGET_AUC`. The benchmark
  trains at most one epoch; ``epoch_num`` is the fraction of it done, so the samples trained
  are ``epoch * TRAIN_SAMPLES``.
- ``training_samples_per_s``, ``seconds_per_eval`` and ``eval_every_epochs``: the run's phases
  as its log times them, medians over a run's intervals, then over the converged runs: the
  samples trained between two evaluations (the difference of their ``epoch_num`` times
  :data:`TRAIN_SAMPLES`) over the time from one's ``eval_stop`` to the next one's ``eval_start``
  (a run's first stretch, from ``run_start``, is left out: it holds the start-up); one evaluation,
  ``eval_start`` to ``eval_stop``; and the epochs between two evaluations (the rules' 0.05, or
  what a submitter ran). None where a run logs fewer than two evaluations.
- ``same_runs_as``: the other rows ("round submitter/system") whose result files hold the
  same runs (every ``run_start`` and ``run_stop`` equal to the millisecond): some submitters
  published one set of runs again in a later round, or under two names in one round.
  ``republished`` says whether one of them is of an earlier round.
- ``notes``: anything else odd the extraction found in that result folder (empty when nothing).

:data:`FIT_ROUNDS` and :data:`HELD_OUT_ROUNDS` split the rounds in time, for checking a
model fitted on the older rounds against the newer ones; drop the held-out rows that are
``republished`` (their runs are in the fit rounds or an earlier held-out round already).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from recnotebooks.checks import check_choice, check_float, check_int, check_str, check_type

__all__ = [
    "FIT_ROUNDS",
    "HELD_OUT_ROUNDS",
    "MLPerfResult",
    "RUNS_REQUIRED",
    "TARGET_AUC",
    "TRAIN_SAMPLES",
    "median_or_none",
    "olympic_mean",
]

#: Runs a DLRM-DCNv2 submission must have (the training rules' "Recommendation" row).
RUNS_REQUIRED = 10
#: The quality target of the benchmark: evaluation AUC on the Criteo 1TB test days.
TARGET_AUC = 0.80275
#: Samples in one training epoch of Criteo 1TB (days 0-22), as the logs' ``train_samples``.
TRAIN_SAMPLES = 4_195_197_692
#: Rounds a model may be fitted to, and the later rounds kept aside to check it on.
FIT_ROUNDS = ("v3.0", "v3.1", "v4.0")
HELD_OUT_ROUNDS = ("v4.1", "v5.0", "v5.1")


def olympic_mean(minutes: Sequence[float], non_converged: int = 0) -> float:
    """MLPerf's score of a set of runs: drop the fastest and the slowest, average the rest.

    ``minutes`` are the times to train of the converged runs; ``non_converged`` counts the
    runs that did not reach the target. The training rules let one such run stand as the
    slowest (it is the one dropped, so no converged run is dropped at the slow end); with
    more than one the result is invalid. At least one time must remain after dropping.
    """
    if isinstance(minutes, (str, bytes)) or not isinstance(minutes, Sequence):
        raise TypeError(f"minutes must be a sequence of run times in minutes, got {type(minutes).__name__}")
    times = sorted(check_float(f"minutes[{i}]", m, lo=0.0, lo_open=True) for i, m in enumerate(minutes))
    failed = check_int("non_converged", non_converged, lo=0)
    if failed > 1:
        raise ValueError(
            f"non_converged must be 0 or 1 (a result with more than one non-converging run is invalid), "
            f"got {failed}"
        )
    kept = times[1 : len(times) - (1 - failed)]
    if not kept:
        raise ValueError(
            f"minutes must leave at least one run after dropping the fastest and "
            f"{'none' if failed else 'the slowest'}: got {len(times)} run(s)"
        )
    return sum(kept) / len(kept)


def median_or_none(values: Sequence[float]) -> float | None:
    """The median of ``values``, or None when there are none (a quantity nobody logged)."""
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class MLPerfResult:
    """One closed-division DLRM-DCNv2 submission: a round, a submitter, a system.

    The system fields are the strings of the submitter's system description (``""`` where it
    left them empty); the numbers come from its result files (see the module docstring).
    """

    round: str
    submitter: str
    system: str
    division: str
    availability: str
    accelerator: str
    accelerators_per_node: int
    nodes: int
    host_cpu: str
    host_cpus_per_node: int
    interconnect: str
    interconnect_topology: str
    nics: str
    nic_topology: str
    framework: str
    global_batch_size: int
    optimizer: str
    learning_rate: float | None
    run_minutes: tuple[float, ...]
    non_converged: int
    olympic_minutes: float
    scaling_factor: float
    samples_per_s: float | None
    epochs_to_target: tuple[float, ...]
    source: str
    same_runs_as: tuple[str, ...] = ()
    notes: str = ""
    training_samples_per_s: float | None = None
    seconds_per_eval: float | None = None
    eval_every_epochs: float | None = None

    def __post_init__(self) -> None:
        for name in ("round", "submitter", "system", "division", "source"):
            check_str(name, getattr(self, name))
        check_choice("round", self.round, FIT_ROUNDS + HELD_OUT_ROUNDS)
        raw = ("availability", "accelerator", "host_cpu", "interconnect", "interconnect_topology", "nics")
        for name in (*raw, "nic_topology", "framework", "optimizer", "notes"):
            check_str(name, getattr(self, name), nonempty=False)
        check_int("accelerators_per_node", self.accelerators_per_node, lo=0)
        check_int("nodes", self.nodes, lo=1)
        check_int("host_cpus_per_node", self.host_cpus_per_node, lo=0)
        check_int("global_batch_size", self.global_batch_size, lo=1)
        check_int("non_converged", self.non_converged, lo=0, hi=1)
        for i, other in enumerate(check_type("same_runs_as", self.same_runs_as, tuple, "a tuple of strings")):
            check_str(f"same_runs_as[{i}]", other)
        for name in ("run_minutes", "epochs_to_target"):
            values = check_type(name, getattr(self, name), tuple, "a tuple of floats")
            for i, v in enumerate(values):
                check_float(f"{name}[{i}]", v, lo=0.0, lo_open=True)
        if len(self.epochs_to_target) != len(self.run_minutes):
            raise ValueError(
                f"epochs_to_target must have one value per converged run ({len(self.run_minutes)}), "
                f"got {len(self.epochs_to_target)}"
            )
        check_float("olympic_minutes", self.olympic_minutes, lo=0.0, lo_open=True)
        check_float("scaling_factor", self.scaling_factor, lo=0.0, lo_open=True)
        for name in (
            "learning_rate",
            "samples_per_s",
            "training_samples_per_s",
            "seconds_per_eval",
            "eval_every_epochs",
        ):
            if getattr(self, name) is not None:
                check_float(name, getattr(self, name), lo=0.0, lo_open=True)

    @property
    def accelerators(self) -> int:
        """Accelerators in the whole system (0 for a CPU-only system)."""
        return self.accelerators_per_node * self.nodes

    @property
    def republished(self) -> bool:
        """Whether an earlier round published the same runs (see ``same_runs_as``)."""
        order = FIT_ROUNDS + HELD_OUT_ROUNDS
        return any(order.index(other.split()[0]) < order.index(self.round) for other in self.same_runs_as)

    @property
    def score_minutes(self) -> float:
        """The published score: ``olympic_minutes`` times the review's ``scaling_factor``."""
        return self.olympic_minutes * self.scaling_factor

    @property
    def samples_to_target(self) -> float:
        """Median samples trained until the target AUC (median epoch x :data:`TRAIN_SAMPLES`)."""
        return statistics.median(self.epochs_to_target) * TRAIN_SAMPLES

    def __str__(self) -> str:
        tput = "n/a" if self.samples_per_s is None else f"{self.samples_per_s / 1e6:.2f}M samples/s"
        what = self.accelerator if self.accelerators_per_node else "CPU only"
        return (
            f"{self.round} {self.submitter}/{self.system}: {self.accelerators_per_node} x {self.nodes} "
            f"{what}, batch {self.global_batch_size}, "
            f"{self.olympic_minutes:.2f} min (score {self.score_minutes:.2f}), {tput}"
        )
