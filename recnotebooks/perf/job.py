"""A whole training job from one modeled step: time to train, device-hours, cost and energy.

:func:`job_cost` is plain arithmetic a learner can redo by hand (every number **modeled**,
from a step time of :func:`recnotebooks.perf.estimate`)::

    steps         = ceil(samples x epochs / global batch)
    seconds       = steps x step time
    device-hours  = seconds / 3600 x devices            (GPUs, or CPU trainer nodes)
    cost          = device-hours x price per device-hour + server-hours x price per server-hour
    energy        = watts x seconds                     (devices, hosts, parameter servers)
    samples/joule = samples x epochs / energy

:func:`job_from_estimate` reads the step, the devices, the power and the parameter servers
of a :class:`~recnotebooks.perf.cost.CostResult` and the price of its hardware
(:attr:`~recnotebooks.perf.hardware.Hardware.price_per_hour`, editable); parameter servers
are priced as :data:`~recnotebooks.perf.components.PARAMETER_SERVER` nodes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from recnotebooks.checks import check_float, check_int, check_type
from recnotebooks.perf.components import PARAMETER_SERVER
from recnotebooks.perf.cost import CostResult
from recnotebooks.perf.hardware import Hardware
from recnotebooks.plan import MAX_RANKS
from recnotebooks.published.mlperf import TRAIN_SAMPLES

__all__ = ["CRITEO_TERABYTE_SAMPLES", "LIMITS", "JobCost", "job_cost", "job_from_estimate"]

#: Training samples of Criteo Terabyte (days 0-22 of the 24 days' click logs, as MLPerf trains):
#: about 4.2 billion, as MLPerf's logs count them (:data:`recnotebooks.published.mlperf.TRAIN_SAMPLES`).
CRITEO_TERABYTE_SAMPLES = TRAIN_SAMPLES
#: Bounds on :func:`job_cost`'s arguments, far beyond any real job (a step of a picosecond to
#: 30 years, 10^18 samples, a million epochs, 10^15 W, $10^9 per device-hour), inside which every
#: total is a finite number: a step time of 1e-320 s would make samples/s infinite.
LIMITS: dict[str, float] = {
    "samples": 1e18, "epochs": 1e6, "batch_size": 2**40, "min_step_time_s": 1e-12, "step_time_s": 1e9,
    "price_per_hour": 1e9, "power_w": 1e15, "servers": 2**40,
}  # fmt: skip


@dataclass(frozen=True)
class JobCost:
    """A training job's totals (**modeled**); see the module docstring for the arithmetic."""

    samples: float
    epochs: float
    batch_size: int
    steps: int
    step_time_s: float
    samples_per_s: float
    seconds: float
    hours: float
    devices: int
    device_hours: float
    price_per_hour: float
    cost_usd: float
    power_w: float
    energy_j: float
    energy_kwh: float
    samples_per_joule: float
    source: str = "modeled"

    def meets(self, deadline_h: float | None = None, budget_usd: float | None = None) -> bool:
        """True when the job ends within ``deadline_h`` hours and costs at most ``budget_usd``."""
        ok_time = deadline_h is None or self.hours <= check_float("deadline_h", deadline_h, lo=0)
        ok_cost = budget_usd is None or self.cost_usd <= check_float("budget_usd", budget_usd, lo=0)
        return ok_time and ok_cost

    def summary(self) -> dict[str, object]:
        """Plain data (JSON-ready)."""
        return asdict(self)


def job_cost(
    *,
    samples: float,
    epochs: float = 1,
    batch_size: int,
    step_time_s: float,
    devices: int,
    price_per_hour: float,
    power_w: float,
    servers: int = 0,
    server_price_per_hour: float = 0.0,
) -> JobCost:
    """Totals of a job of ``samples`` x ``epochs`` samples at ``batch_size`` per step, each step
    ``step_time_s`` on ``devices`` devices at ``price_per_hour`` each, drawing ``power_w`` watts
    in all; ``servers`` extra nodes (parameter servers) at ``server_price_per_hour`` each.
    Raises ``ValueError`` naming a bad argument (non-positive, NaN, infinite, or outside
    :data:`LIMITS`, which keep every total finite)."""
    samples = check_float("samples", samples, lo=1, hi=LIMITS["samples"])
    epochs = check_float("epochs", epochs, lo=0, lo_open=True, hi=LIMITS["epochs"])
    batch_size = check_int("batch_size", batch_size, lo=1, hi=int(LIMITS["batch_size"]))
    step_time_s = check_float(
        "step_time_s", step_time_s, lo=LIMITS["min_step_time_s"], hi=LIMITS["step_time_s"]
    )
    devices = check_int("devices", devices, lo=1, hi=MAX_RANKS)
    price_per_hour = check_float("price_per_hour", price_per_hour, lo=0, hi=LIMITS["price_per_hour"])
    power_w = check_float("power_w", power_w, lo=0, hi=LIMITS["power_w"])
    servers = check_int("servers", servers, lo=0, hi=int(LIMITS["servers"]))
    server_price_per_hour = check_float(
        "server_price_per_hour", server_price_per_hour, lo=0, hi=LIMITS["price_per_hour"]
    )
    total = samples * epochs
    steps = math.ceil(total / batch_size)
    seconds = steps * step_time_s
    hours = seconds / 3600.0
    device_hours = hours * devices
    cost = device_hours * price_per_hour + hours * servers * server_price_per_hour
    energy = power_w * seconds
    return JobCost(
        samples=samples,
        epochs=epochs,
        batch_size=batch_size,
        steps=steps,
        step_time_s=step_time_s,
        samples_per_s=batch_size / step_time_s,
        seconds=seconds,
        hours=hours,
        devices=devices,
        device_hours=device_hours,
        price_per_hour=price_per_hour,
        cost_usd=cost,
        power_w=power_w,
        energy_j=energy,
        energy_kwh=energy / 3.6e6,
        samples_per_joule=total / energy if energy > 0 else math.inf,
    )


def job_from_estimate(
    result: CostResult, hw: Hardware, samples: float, epochs: float = 1, *, overlap: bool = False
) -> JobCost:
    """:func:`job_cost` for the step ``result`` models on ``hw``: its serial step time (no overlap
    of compute and communication, as the breakdown adds up), or with ``overlap`` the step with
    communication overlapped (:attr:`~recnotebooks.perf.result.CostResult.step_time_overlap`, as
    HugeCTR runs it)."""
    check_type("result", result, CostResult, "a CostResult from recnotebooks.perf.estimate")
    check_type("hw", hw, Hardware, "a Hardware")
    check_type("overlap", overlap, bool, "True or False")
    return job_cost(
        samples=samples,
        epochs=epochs,
        batch_size=result.batch_size,
        step_time_s=result.step_time_overlap if overlap else result.step_time,
        devices=result.world_size,
        price_per_hour=hw.price_per_hour,
        power_w=result.power_w,
        servers=result.parameter_servers,
        server_price_per_hour=PARAMETER_SERVER.price_per_hour,
    )
