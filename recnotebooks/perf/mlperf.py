"""Moved: the MLPerf DLRM-DCNv2 results live in :mod:`recnotebooks.published`.

:class:`MLPerfResult` and its scoring are in :mod:`recnotebooks.published.mlperf`, the table
(``MLPERF_DCNV2_RESULTS``, ``READ_DATE``, ``SOURCE_COMMITS``) in
:mod:`recnotebooks.published.mlperf_results`. The old names work from here until the next release.
"""

from recnotebooks.published.mlperf import (
    FIT_ROUNDS,
    HELD_OUT_ROUNDS,
    RUNS_REQUIRED,
    TARGET_AUC,
    TRAIN_SAMPLES,
    MLPerfResult,
    median_or_none,
    olympic_mean,
)
from recnotebooks.published.mlperf_results import MLPERF_DCNV2_RESULTS, READ_DATE, SOURCE_COMMITS

__all__ = [
    "FIT_ROUNDS",
    "HELD_OUT_ROUNDS",
    "MLPERF_DCNV2_RESULTS",
    "MLPerfResult",
    "READ_DATE",
    "RUNS_REQUIRED",
    "SOURCE_COMMITS",
    "TARGET_AUC",
    "TRAIN_SAMPLES",
    "median_or_none",
    "olympic_mean",
]
