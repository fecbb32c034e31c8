"""Moved: the model against published throughputs is :mod:`recnotebooks.perf.compare`.

How the model is set up to match each published run (:class:`PublishedRun`,
:data:`PUBLISHED_RUNS`, :data:`MLPERF_RUNS`, :data:`MLPERF_SETUP`, :data:`CPU_SETUP`,
:func:`estimate_run`, :func:`mlperf_seconds`, :func:`mlperf_throughput`) is
:mod:`recnotebooks.perf.mlperf_setup`; the comparisons (:func:`compare_published`, the MLPerf
rows, ratios and band, :func:`torchrec_uvm_example`) are :mod:`recnotebooks.perf.compare`; the
published numbers themselves are in :mod:`recnotebooks.published`. The old names work from here
until the next release.
"""

from recnotebooks.perf.compare import (
    MLPERF_BAND,
    MLPERF_RATIOS,
    compare_published,
    fit_hugectr_step,
    mlperf_by_system,
    mlperf_errors,
    mlperf_outside_band,
    mlperf_phases,
    mlperf_ratios,
    modeled_phases,
    published_utilisation,
    torchrec_uvm_example,
)
from recnotebooks.perf.mlperf_setup import (
    CPU_SETUP,
    MLPERF_RUNS,
    MLPERF_SETUP,
    PUBLISHED_RUNS,
    PublishedRun,
    estimate_run,
    mlperf_seconds,
    mlperf_throughput,
)
from recnotebooks.published.runs import TORCHREC_README_ROWS, TORCHREC_UVM, TORCHREC_UVM_SOURCE

__all__ = [  # handed on from perf.compare, perf.mlperf_setup and published.runs
    "MLPERF_BAND", "MLPERF_RATIOS", "compare_published", "fit_hugectr_step", "mlperf_by_system",
    "mlperf_errors", "mlperf_outside_band", "mlperf_phases", "mlperf_ratios", "modeled_phases",
    "published_utilisation", "torchrec_uvm_example",
    "CPU_SETUP", "MLPERF_RUNS", "MLPERF_SETUP", "PUBLISHED_RUNS", "PublishedRun", "estimate_run",
    "mlperf_seconds", "mlperf_throughput",
    "TORCHREC_README_ROWS", "TORCHREC_UVM", "TORCHREC_UVM_SOURCE",
]  # fmt: skip
