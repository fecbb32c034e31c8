"""Validation of the calibrated model against real steps measured here.

:func:`validate` trains real steps of our DLRM over a sweep from MLP-heavy to
embedding-heavy architectures (:data:`VALIDATION_SWEEP`, measured by
:func:`recnotebooks.measure.measure_step`) and compares each with the model's
prediction for the same architecture on the machine :mod:`recnotebooks.measure.calibrate`
fitted: per-config error, MAPE and Spearman rank correlation. Each measurement follows a
speed :func:`~recnotebooks.measure.calibrate.probe`, so a shared VM's drift can be corrected.
"""

from __future__ import annotations

import numpy as np
import torch

from recnotebooks.config import DLRMConfig, preset
from recnotebooks.measure.calibrate import at_speed, probe
from recnotebooks.perf.hardware import HARDWARE, Hardware, load_calibration, load_probe

__all__ = ["validate", "VALIDATION_SWEEP", "spearman"]


def _sweep() -> list[tuple[str, DLRMConfig, int]]:
    from recnotebooks.config import architecture_config as ac

    return [
        ("tiny", preset("tiny"), 1024),
        ("criteo_kaggle", preset("criteo_kaggle"), 2048),
        ("criteo_terabyte", preset("criteo_terabyte"), 1024),
        ("rm1", preset("rm1"), 512),
        ("rm2", preset("rm2"), 256),
        ("rm3", preset("rm3"), 512),
        ("dlrm_benchmark", preset("dlrm_benchmark"), 256),
        ("explorer default", ac(), 512),
        ("wide MLPs", ac(bottom_width=1024, top_width=1024), 1024),
        ("deep narrow MLPs", ac(bottom_width=64, top_width=64, bottom_depth=5, top_depth=5), 2048),
        (
            "many tables, pooling 40",
            ac(num_tables=32, pooling=40, embedding_dim=64, bottom_width=128, top_width=128),
            256,
        ),
        ("small rows, big batch", ac(num_tables=4, embedding_dim=8, pooling=10), 4096),
        ("cat interaction", ac(interaction="cat", num_tables=16, pooling=5), 1024),
    ]


#: Names of the validation configs (MLP-heavy to embedding-heavy), see :func:`validate`.
VALIDATION_SWEEP = [name for name, _, _ in _sweep()]


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman rank correlation (no ties expected in timings)."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def validate(
    hw: Hardware | None = None,
    ref_probe: dict[str, float] | None = None,
    time_budget_s: float = 0.4,
    repeats: int = 3,
    quick: bool = False,
    drift_correction: bool = True,
    device: str | None = None,
) -> dict[str, object]:
    """Measured vs modeled step time over :data:`VALIDATION_SWEEP` on this machine.

    Each config is measured ``repeats`` times (``time_budget_s`` each), each right after a
    speed :func:`probe` (recorded with the result); the median step time is compared with
    the model for ``hw``. With ``drift_correction`` the model is first scaled to the
    machine's speed over the run, the median of all its probes (:func:`at_speed`, relative
    to ``ref_probe``, the calibration's probe; ``run_probe`` in the result): this corrects
    for a machine whose speed drifted since the calibration (a shared VM), and not for one
    probe's own noise. Each row says whether its measurement was ``reliable``.
    """
    from recnotebooks.measure import default_max_rows, measure_step
    from recnotebooks.perf.cost import estimate

    if hw is None:
        hw, ref_probe = load_calibration() or HARDWARE["this_machine"], ref_probe or load_probe()
    dev = device or ("cuda" if hw.kind == "gpu" else "cpu")  # where hw was calibrated
    sweep = _sweep()[:5] if quick else _sweep()
    # the threads the calibration ran on: the model is of the machine on those (a busy machine
    # makes a measurement unreliable, and each row says so, rather than one on fewer threads)
    threads = torch.get_num_threads()
    taken = []
    for name, cfg, bsz in sweep:
        cap = default_max_rows(cfg)
        probes, ms = [], []
        for _ in range(repeats):
            probes.append(probe(3, dev))
            ms.append(
                measure_step(
                    cfg,
                    bsz,
                    max_rows=cap,
                    time_budget_s=time_budget_s,
                    min_steps=2,
                    max_steps=200,
                    device=dev,
                    threads=threads,
                )
            )
        m = sorted(ms, key=lambda x: x.seconds_per_step)[len(ms) // 2]
        taken.append((name, cfg, bsz, cap, m, probes))
    # the machine's speed over the whole run: the median of every probe taken in it (one probe
    # reads 20-30% off on a shared VM; scaling each config by its own would add that noise)
    every = [p for *_, probes in taken for p in probes]
    run_speed = {k: float(np.median([p[k] for p in every])) for k in ("gflops", "copy_bw")}
    hw_now = at_speed(hw, run_speed, ref_probe) if drift_correction and ref_probe else hw
    rows = []
    for name, cfg, bsz, cap, m, probes in taken:
        now = {k: float(np.median([p[k] for p in probes])) for k in ("gflops", "copy_bw")}
        pred = estimate(cfg.with_max_rows(cap), hw_now, batch_size=bsz)
        err = (pred.step_time - m.seconds_per_step) / m.seconds_per_step
        rows.append(
            {
                "config": name,
                "batch_size": bsz,
                "measured_s": m.seconds_per_step,
                "modeled_s": pred.step_time,
                "error": err,
                "steps": m.steps,
                "max_rows": cap,
                "probe": now,
                "reliable": m.reliable,
                "reliability": m.reliability(),
                "measured_phases": m.phases,
                "modeled_breakdown": pred.breakdown(),
            }
        )
    mape = float(np.mean([abs(r["error"]) for r in rows]))
    rho = spearman([r["measured_s"] for r in rows], [r["modeled_s"] for r in rows])
    return {
        "command": "validate",
        "hardware": hw.name,
        "configs": rows,
        "mape": mape,
        "spearman": rho,
        "targets": {"mape": 0.15, "spearman": 0.9, "configs": 10},
        "pass": (mape <= 0.15 and rho >= 0.9) if len(rows) >= 10 else None,
        "calibrated": "calibrated" in hw.description,
        "reference_probe": ref_probe,
        "run_probe": run_speed,
        "drift_correction": bool(drift_correction and ref_probe),
    }
