"""Efficiency-model speed: one configuration and a 100-point sweep (targets 1 ms, 100 ms).

Apps stay live only if the model is fast. This times ``estimate`` for single-device and
8-GPU configurations (the planner runs inside the 8-GPU case) and a 100-point sweep, and
as the baseline in the same process, measuring one row-capped training step of the same
architecture here, to show what modeling saves.

Run: ``python benchmarks/cost_model.py``.
"""

from __future__ import annotations

import statistics
import time

from recnotebooks.config import preset
from recnotebooks.measure import measure_step
from recnotebooks.perf import estimate, sweep


def _time(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> None:
    cases = [
        (
            "criteo_kaggle, 1 x dgx_a100",
            lambda: estimate(preset("criteo_kaggle"), "dgx_a100", batch_size=4096),
        ),
        (
            "rm2, 1 x big_basin, cache 0.9",
            lambda: estimate(
                preset("rm2"), "big_basin", batch_size=4096, placement="cache", cache_hit_rate=0.9
            ),
        ),
        (
            "mlperf_v1, 8 x dgx_a100 (planner inside)",
            lambda: estimate(preset("mlperf_v1"), "dgx_a100", batch_size=16384, gpus=8),
        ),
        (
            "criteo_terabyte, 16 x dgx_h100 (2 nodes)",
            lambda: estimate(preset("criteo_terabyte"), "dgx_h100", batch_size=65536, gpus=8, nodes=2),
        ),
    ]
    print(f"{'one configuration':<45} {'median ms':>10}  target <= 1 ms")
    for name, fn in cases:
        t = _time(fn, 200)
        print(f"{name:<45} {t * 1e3:10.3f}  {'PASS' if t <= 1e-3 else 'FAIL'}")
    values = [256 * i for i in range(1, 101)]  # 100 distinct batch sizes
    t_sweep = _time(lambda: sweep("batch_size", values, hw="dgx_a100", num_tables=26), 20)
    print(
        f"{'100-point sweep (batch size, 26 tables)':<45} {t_sweep * 1e3:10.3f}  target <= 100 ms: "
        f"{'PASS' if t_sweep <= 0.1 else 'FAIL'}"
    )
    cfg = preset("criteo_kaggle")
    t_model = _time(lambda: estimate(cfg.with_max_rows(40_000), "this_machine", batch_size=2048), 50)
    t_meas = _time(
        lambda: measure_step(cfg, 2048, max_rows=40_000, time_budget_s=0.0, min_steps=1, max_steps=1), 5
    )
    print(
        f"baseline: measuring one criteo_kaggle step here {t_meas * 1e3:.1f} ms (warm-up included) "
        f"vs modeling it {t_model * 1e3:.3f} ms: {t_meas / t_model:,.0f}x"
    )


if __name__ == "__main__":
    main()
