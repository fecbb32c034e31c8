"""The checkpoint model (:mod:`recnotebooks.perf.checkpointing`) against independent references:
Young's and Daly's formulas by hand, a brute-force search for the interval that wastes least, a
Monte Carlo simulation of exponential failures, and a real DLRM's parameters and optimizer state."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.config import preset
from recnotebooks.nn.dlrm import DLRM
from recnotebooks.perf.checkpointing import (
    checkpoint_bytes,
    checkpoint_plan,
    daly_interval,
    expected_wall_seconds,
    job_checkpointing,
    write_seconds,
    young_interval,
)
from recnotebooks.perf.job_planner import evaluate
from recnotebooks.published.failures import LLAMA3_405B, PublishedInterruptions


def test_young_and_daly_by_hand() -> None:
    assert young_interval(60.0, 3600.0) == pytest.approx(math.sqrt(2 * 60 * 3600))
    x = 60 / (2 * 3600)
    assert daly_interval(60.0, 3600.0) == pytest.approx(
        math.sqrt(2 * 60 * 3600) * (1 + math.sqrt(x) / 3 + x / 9) - 60
    )
    assert daly_interval(8000.0, 3600.0) == 3600.0  # a write of twice the MTBF or more: the MTBF
    assert daly_interval(1e-3, 1e6) == pytest.approx(young_interval(1e-3, 1e6), rel=1e-3)  # quick writes


@settings(max_examples=25, deadline=None)
@given(st.floats(1e-4, 0.3))
def test_dalys_interval_wastes_within_a_hair_of_the_least(ratio: float) -> None:
    """A brute-force search over intervals finds no wall time more than 0.5% below Daly's."""
    m, delta, restart = 3600.0, 3600.0 * ratio, 120.0
    daly = daly_interval(delta, m)
    taus = np.geomspace(daly / 20, daly * 20, 4001)
    best = min(expected_wall_seconds(1e6, float(t), delta, m, restart) for t in taus)
    assert expected_wall_seconds(1e6, daly, delta, m, restart) <= best * 1.005


def _simulated_wall(segments: int, tau: float, delta: float, m: float, restart: float, seed: int) -> float:
    """Wall time of ``segments`` of ``tau`` work plus a write of ``delta``, failures exponential
    (mean ``m``) striking anywhere: a failed segment starts over after a restart, which may fail too."""
    rng = np.random.default_rng(seed)
    wall = 0.0
    for _ in range(segments):
        need = tau + delta  # the first try needs no restart
        while True:
            x = rng.exponential(m)
            if x >= need:
                wall += need
                break
            wall += x
            need = restart + tau + delta
    return wall


def test_the_expected_wall_time_matches_a_simulation() -> None:
    tau, delta, m, restart, segments = 600.0, 60.0, 1800.0, 90.0, 20_000
    simulated = _simulated_wall(segments, tau, delta, m, restart, seed=7)
    assert expected_wall_seconds(segments * tau, tau, delta, m, restart) == pytest.approx(simulated, rel=0.02)


def test_write_time_is_the_slower_of_the_storage_and_a_writer() -> None:
    assert write_seconds(1e12, 64, 1e10) == pytest.approx(100.0)  # 1 TB at 10 GB/s
    assert write_seconds(1e12, 64, 1e10, rank_bw=1e9) == pytest.approx(100.0)  # the storage is slower
    assert write_seconds(1e12, 64, 1e11, rank_bw=1e9) == pytest.approx(1e12 / 64 / 1e9)  # a writer's link is
    assert write_seconds(0.0, 4, 1e9) == 0.0


def test_a_checkpoint_holds_the_weights_and_the_optimizer_state_of_a_real_model() -> None:
    """Counted from a built DLRM: its parameters (fp32) and one fp32 a table row (row-wise Adagrad)."""
    config = preset("tiny")
    model = DLRM(config)
    weights = sum(p.numel() for p in model.parameters()) * 4
    assert checkpoint_bytes(config) == weights + config.total_rows * 4


def test_llama3s_published_failure_rate() -> None:
    assert LLAMA3_405B.job_mtbf_s / 3600 == pytest.approx(54 * 24 / 419)  # about 3.1 hours
    assert LLAMA3_405B.mtbf_per_gpu_s / (365 * 86400) == pytest.approx(5.785, abs=0.01)
    with pytest.raises(ValueError, match="unexpected"):
        PublishedInterruptions("x", 8, 1.0, 0, "a source")


def test_a_plan_adds_up() -> None:
    p = checkpoint_plan(1e12, 64, 1e10, LLAMA3_405B.mtbf_per_gpu_s, 86_400.0)
    assert p.bytes_per_rank == pytest.approx(1e12 / 64) and p.write_s == pytest.approx(100.0)
    assert p.job_mtbf_s == pytest.approx(LLAMA3_405B.mtbf_per_gpu_s / 64)
    assert p.daly_s == pytest.approx(daly_interval(100.0, p.job_mtbf_s))
    assert p.restart_s == p.write_s  # read back at the write's speed
    assert p.interval_s == p.daly_s < 86_400.0 and p.checkpoints == math.ceil(86_400.0 / p.daly_s)
    assert p.wall_s == pytest.approx(expected_wall_seconds(86_400.0, p.daly_s, 100.0, p.job_mtbf_s, 100.0))
    short = checkpoint_plan(1e12, 64, 1e10, LLAMA3_405B.mtbf_per_gpu_s, 600.0)  # shorter than Daly's interval
    assert short.interval_s == 600.0 and short.checkpoints == 1  # one, at its end
    assert 0 < p.lost_share < 1 and p.expected_failures == pytest.approx(p.wall_s / p.job_mtbf_s)
    # more devices fail more often: a shorter interval, more lost
    big = checkpoint_plan(1e12, 64, 1e10, LLAMA3_405B.mtbf_per_gpu_s, 86_400.0, devices=16_384)
    assert big.daly_s < p.daly_s and big.lost_share > p.lost_share


def test_a_job_of_the_planner() -> None:
    outcome = evaluate(model="tiny", nodes=1, gpus=4)
    plan = job_checkpointing(outcome, 1e9)
    assert plan.ranks == outcome.job.devices == 4
    assert plan.total_bytes == checkpoint_bytes(outcome.settings.workload)
    assert plan.work_s == pytest.approx(outcome.job.seconds)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: write_seconds(1e9, 4, 0.0), "storage_bw"),
        (lambda: write_seconds(-1.0, 4, 1e9), "total_bytes"),
        (lambda: write_seconds(1e9, 0, 1e9), "ranks"),
        (lambda: write_seconds(1e9, 4, 1e9, rank_bw=math.nan), "rank_bw"),
        (lambda: young_interval(0.0, 10.0), "write_s"),
        (lambda: daly_interval(1.0, math.inf), "mtbf_s"),
        (lambda: expected_wall_seconds(1.0, 0.0, 1.0, 10.0), "interval_s"),
        (lambda: expected_wall_seconds(1.0, 1.0, 1.0, 10.0, -1.0), "restart_s"),
        (lambda: checkpoint_plan(1e9, 4, 1e9, 0.0, 10.0), "mtbf_per_device_s"),
        (lambda: checkpoint_bytes("tiny"), "model"),
        (lambda: job_checkpointing("a job", 1e9), "outcome"),
    ],
)
def test_bad_input_names_the_parameter(call: object, name: str) -> None:
    with pytest.raises((ValueError, TypeError), match=name):
        call()  # type: ignore[operator]


def test_a_hopeless_job_never_finishes_rather_than_overflowing() -> None:
    assert expected_wall_seconds(1e6, 1e6, 1e3, 1.0) == math.inf
