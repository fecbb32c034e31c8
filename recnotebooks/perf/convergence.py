"""Moved: MLPerf's reference convergence points live in :mod:`recnotebooks.published.convergence`.

The old names work from here until the next release.
"""

from recnotebooks.published.convergence import (
    DEFAULT_ROUND,
    EPOCHS_FROM,
    EVAL_EVERY_EPOCHS,
    EVAL_SAMPLES,
    RCP_SOURCE,
    RCPS,
    RULES,
    TRAIN_SAMPLES,
    ReferencePoint,
    convergence_curve,
    curve_points,
    epochs_to_converge,
    evaluations,
    olympic_mean,
    rules_for_round,
    samples_to_converge,
    time_to_train,
)

__all__ = [
    "DEFAULT_ROUND",
    "EPOCHS_FROM",
    "EVAL_EVERY_EPOCHS",
    "EVAL_SAMPLES",
    "RCPS",
    "RCP_SOURCE",
    "RULES",
    "ReferencePoint",
    "TRAIN_SAMPLES",
    "convergence_curve",
    "curve_points",
    "epochs_to_converge",
    "evaluations",
    "olympic_mean",
    "rules_for_round",
    "samples_to_converge",
    "time_to_train",
]
