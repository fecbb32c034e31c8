"""The GPU efficiency model: hardware presets, per-step cost and memory, planner, calibration.

Every number this package returns is **modeled** (``source="modeled"``), except what
:mod:`recnotebooks.measure.calibrate` measures to fit ``this_machine``.
"""

from recnotebooks.perf.compare import compare_published
from recnotebooks.perf.cost import COMPONENTS, CostResult, estimate
from recnotebooks.perf.hardware import HARDWARE, Hardware, hardware, hardware_names
from recnotebooks.perf.memory import MemoryReport, memory_footprint, memory_report
from recnotebooks.perf.mlperf_setup import PUBLISHED_RUNS
from recnotebooks.perf.planner import plan_tables
from recnotebooks.perf.servers import best_placement, compare_servers
from recnotebooks.perf.sweeps import sweep
from recnotebooks.plan import Plan, TableShard

__all__ = [
    "COMPONENTS",
    "CostResult",
    "HARDWARE",
    "Hardware",
    "MemoryReport",
    "PUBLISHED_RUNS",
    "Plan",
    "TableShard",
    "best_placement",
    "compare_published",
    "compare_servers",
    "estimate",
    "hardware",
    "hardware_names",
    "memory_footprint",
    "memory_report",
    "plan_tables",
    "sweep",
]
