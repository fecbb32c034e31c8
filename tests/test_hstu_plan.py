"""Planning a DLRMv4 job: the chosen candidate fits its GPUs, meets the deadline and is the
cheapest that does; more GPUs hold less a GPU; the impossible is said, not guessed."""

from __future__ import annotations

import math

import pytest

from recnotebooks.config.hstu import hstu_preset
from recnotebooks.perf.hstu import lognormal_lengths
from recnotebooks.perf.hstu_memory import hstu_memory
from recnotebooks.perf.hstu_plan import YAMBDA_LENGTHS, plan_hstu_job
from recnotebooks.published.convergence import time_to_train


def test_dlrmv4_needs_more_than_a_node_of_h100s_and_the_choice_is_the_cheapest() -> None:
    plan = plan_hstu_job("dlrmv4", hardware_names=("dgx_h100",), max_nodes=8)
    assert plan.source == "modeled" and [c.world for c in plan.candidates] == [8, 16, 32, 64]
    assert not plan.candidates[0].fits  # 600 GB of tables and 1,024 histories a GPU: not on 8 H100s
    memory = [c.device_gb for c in plan.candidates]
    assert memory == sorted(memory, reverse=True)
    best = plan.best
    assert best is not None and best.fits and best.world >= 16
    fitting = [c for c in plan.candidates if c.fits]
    assert best.dollars == min(c.dollars for c in fitting)
    assert "GPUs" in plan.why and sum(r["chosen"] for r in plan.rows()) == 1  # type: ignore[misc]
    assert all(math.isinf(c.minutes) for c in plan.candidates if not c.fits)


def test_a_deadline_buys_more_gpus_and_an_impossible_one_is_refused_in_words() -> None:
    free = plan_hstu_job(hardware_names=("dgx_h100",), max_nodes=8)
    assert free.best is not None
    tight = plan_hstu_job(hardware_names=("dgx_h100",), max_nodes=8, deadline_minutes=free.best.minutes * 0.9)
    assert tight.best is not None and tight.best.world > free.best.world
    assert tight.best.minutes <= free.best.minutes * 0.9
    never = plan_hstu_job(hardware_names=("dgx_h100",), max_nodes=4, deadline_minutes=0.01)
    assert never.best is None and "deadline" in never.why


def test_minutes_are_the_convergence_curve_over_the_modeled_rate() -> None:
    plan = plan_hstu_job(hardware_names=("h200_node",), max_nodes=4, global_batch=16384)
    c = [c for c in plan.candidates if c.fits][0]
    no_eval = time_to_train(16384 / c.step_s, 16384, "v6.1")
    assert no_eval < c.minutes < 1.2 * no_eval  # evaluations add a little
    lengths = lognormal_lengths(c.local_batch, *YAMBDA_LENGTHS, 4096)
    assert c.device_gb * 1e9 == pytest.approx(hstu_memory(hstu_preset("dlrmv4"), lengths, c.world).total)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="global_batch"):
        plan_hstu_job(global_batch=4096)
    with pytest.raises(ValueError, match="name"):
        plan_hstu_job("nope")
    with pytest.raises(ValueError, match="hardware_names"):
        plan_hstu_job(hardware_names=())
    with pytest.raises(ValueError, match="deadline_minutes"):
        plan_hstu_job(deadline_minutes=-1)
