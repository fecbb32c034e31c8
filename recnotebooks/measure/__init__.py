"""What is **measured on this machine**: every tool that times real work here, in one home.

Modeled numbers come from :mod:`recnotebooks.perf` (the cost model; it never trains or
launches anything), simulated ones from :mod:`recnotebooks.cache` (cache simulation), and
measured ones from here:

* :mod:`~recnotebooks.measure.step` — a training step's time by phase (:func:`measure_step`;
  re-exported here), with its reliability on a busy machine;
* :mod:`~recnotebooks.measure.hstu` — the same for a generative recommender's step (HSTU),
  jagged or padded (:func:`measure_hstu_step`; re-exported here);
* :mod:`~recnotebooks.measure.table_batching` — one fused lookup vs one per table;
* :mod:`~recnotebooks.measure.mixed_precision` — fp32 vs AMP on the local device;
* :mod:`~recnotebooks.measure.cache_overhead` — what the software cache costs per step;
* :mod:`~recnotebooks.measure.calibrate` and :mod:`~recnotebooks.measure.calibrate_comm` —
  microbenchmarks that fit ``this_machine``'s hardware fields and its collectives
  (``recnb calibrate``), with :mod:`~recnotebooks.measure.collective_timing`, the worker
  that times collectives on the ranks;
* :mod:`~recnotebooks.measure.cores` — whether a measurement's threads ran on cores that share a
  cache (:func:`~recnotebooks.measure.cores.handoff`), read beside every measured step;
* :mod:`~recnotebooks.measure.validate` and :mod:`~recnotebooks.measure.validate_dist` —
  the calibrated model against real steps, on one process and on local ranks
  (``recnb validate``).
"""

from __future__ import annotations

from recnotebooks.measure.hstu import HSTUMeasurement, measure_hstu_step
from recnotebooks.measure.step import (
    DEFAULT_MEMORY_BUDGET,
    OUTLIER_FACTOR,
    DoesNotFitError,
    StepMeasurement,
    check_fits,
    clear_measurements,
    default_max_rows,
    measure_step,
    measure_step_cached,
    measurement_bytes,
    median_step,
    outlier_steps,
)

__all__ = ["DEFAULT_MEMORY_BUDGET", "OUTLIER_FACTOR", "DoesNotFitError", "StepMeasurement", "check_fits",
           "clear_measurements", "default_max_rows", "measure_step", "measure_step_cached",
           "measurement_bytes", "median_step", "outlier_steps", "HSTUMeasurement",
           "measure_hstu_step"]  # fmt: skip
