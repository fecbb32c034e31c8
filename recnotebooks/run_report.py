"""The report of ``recnb train`` (:func:`train_report`), one schema for one process and for
several ranks, and the lines it prints (:func:`report_lines`). Plain dicts and strings: the
trainer and the distributed commands fill it, the CLI prints it or writes it as JSON."""

from __future__ import annotations

from typing import Any

__all__ = ["TRAIN_REPORT_KEYS", "report_lines", "train_report"]


#: The keys of ``recnb train --json``, in order: one schema for one process and for
#: ``--world-size N`` / ``--distributed`` (where a key does not apply it is ``None``, or an empty list).
#: ``world_size``, ``backend`` (``None`` for one process), ``rank``, ``sharding`` and ``plan`` (``None``)
#: and ``comm`` (the collectives' records, ``[]``) say how the run was spread; ``losses`` is every
#: step's loss (its whole batch's mean, before its update; a resumed run's from ``resumed_at_step``
#: on); ``auc``, ``logloss`` and ``ne`` are measured on the same held-out batches either way
#: (``None`` when evaluation was skipped). ``threads`` is what the timed steps ran on, ``busy`` why
#: the thread policy lowered it (``""``: it did not) and ``reliability`` why the measured throughput
#: and phases cannot be trusted (``""``: they can; :func:`recnotebooks.timing.reliability`).
#: ``tokens_per_s`` and ``tokens_per_step`` count a generative recommender's events (``None`` for a
#: DLRM, which has no tokens).
TRAIN_REPORT_KEYS = (
    "command", "source", "preset", "config", "device", "threads", "busy", "reliability", "world_size",
    "backend", "rank", "sharding", "plan", "steps", "batch_size", "dtype", "samples_per_s",
    "tokens_per_s", "tokens_per_step", "seconds_per_step", "auc", "logloss", "ne", "losses", "phases",
    "comm", "data", "resumed_from", "resumed_at_step", "checkpoint",
)  # fmt: skip


def train_report(**fields: Any) -> dict[str, Any]:
    """``recnb train``'s report with the keys of :data:`TRAIN_REPORT_KEYS`, in that order; a
    missing or unknown key is a ``TypeError`` naming it (both paths build their report here)."""
    missing = [k for k in TRAIN_REPORT_KEYS if k not in fields]
    unknown = sorted(set(fields) - set(TRAIN_REPORT_KEYS))
    if missing or unknown:
        raise TypeError(f"train_report: missing keys {missing}, unknown keys {unknown}")
    return {k: fields[k] for k in TRAIN_REPORT_KEYS}


def report_lines(report: dict[str, Any]) -> list[str]:
    """The measurement, loss and held-out metric lines ``recnb train`` prints, one process or
    several: a busy machine and an unreliable measurement are said first."""
    losses = report["losses"]
    lines = []
    if report["busy"]:
        lines.append(f"  threads     {report['threads']}: {report['busy']}")
    if report["reliability"]:
        lines.append(f"  NOT RELIABLE: {report['reliability']} (the throughput and phases below may be off)")
    if losses:
        first, last = losses[0], losses[-1]
        what = "each step's batch mean, before its update"
        lines.append(f"  loss        first {first:.4f}   last {last:.4f}   ({what})")
    if report["auc"] is None:
        lines.append("  eval        skipped (see the warning above)")
    else:
        lines.append(
            f"  eval        AUC {report['auc']:.4f}   log loss {report['logloss']:.4f}   "
            f"NE {report['ne']:.4f}   (held-out batches)"
        )
    return lines
