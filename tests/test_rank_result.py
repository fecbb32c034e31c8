"""A rank's training takes a :class:`~recnotebooks.config.Workload` and returns a
:class:`~recnotebooks.distributed.training.RankResult`: the old call (a ``DLRMConfig`` and the
workload's fields as keywords) builds the same workload and trains the same steps on two real gloo
ranks; the result reads as fields, and as the old dict for one release."""

from __future__ import annotations

import json
import pickle
from dataclasses import FrozenInstanceError, fields
from typing import Any

import _rank_workers as RW
import pytest

from recnotebooks.config import DEFAULT_ZIPF_EXPONENT, Workload, preset
from recnotebooks.distributed.launch import launch
from recnotebooks.distributed.training import RankResult, RankSettings, rank_call, train_local
from recnotebooks.plan import round_robin

TINY = preset("tiny")


def a_result() -> RankResult:
    return RankResult(
        losses=[0.7, 0.6],
        samples_per_s=1000.0,
        seconds_per_step=0.01,
        phases={"data": 0.001, "all_to_all": 0.002},
        comm=[{"rank": 0, "collective": "all_to_all", "bytes_sent": 8, "seconds": 1e-4}],
        threads=2,
        cpu_seconds_per_step=0.02,
        timed_comm=[],
        phase_cpu={"data": 0.001},
        thread_cpu_seconds_per_step=0.015,
        metrics={"auc": 0.7, "logloss": 0.6, "ne": 0.9},
        cache=[],
        step_spread=1.1,
        reliability="",
    )


def test_a_rank_result_reads_as_fields_and_as_the_old_dict() -> None:
    r = a_result()
    names = [f.name for f in fields(RankResult)]
    assert r.keys() == names and list(r) == names and dict(r) == r.to_dict()
    for name in names:
        assert r[name] == getattr(r, name) and r.get(name) == getattr(r, name) and name in r
    assert r["losses"] == [0.7, 0.6] and r["metrics"]["auc"] == 0.7
    assert r.get("probe") is None and r.get("probe", 3) == 3 and "probe" not in r
    with pytest.raises(KeyError, match="probe"):
        r["probe"]
    field = "losses"
    with pytest.raises(FrozenInstanceError):  # what a rank measured is not changed after
        setattr(r, field, [])


def test_a_rank_result_round_trips_through_json_and_pickle() -> None:
    r = a_result()
    assert RankResult(**json.loads(json.dumps(r.to_dict()))) == r
    assert pickle.loads(pickle.dumps(r)) == r


def test_the_old_call_builds_the_workload_and_the_rank_settings() -> None:
    w, s = rank_call(TINY, 3, (64, 2, "sgd", 0.1), {"dense_optimizer": "sgd", "zipf": 1.2, "eval_batches": 1})
    assert w == Workload(TINY, 64, zipf_exponent=1.2, sparse_optimizer="sgd", dense_optimizer="sgd")
    assert s == RankSettings(3, seed=2, sparse_lr=0.1, eval_batches=1)
    w, s = rank_call(TINY, 3, (64,), {"zipf": 0})  # zipf None or 0: the default skew, as before
    assert (w.zipf_exponent, w.sparse_optimizer, w.dense_optimizer) == (
        DEFAULT_ZIPF_EXPONENT,
        "rowwise_adagrad",
        "adagrad",
    )
    assert s == RankSettings(3) and s.options() == {"seed": 0, "sparse_lr": 0.05, "dense_lr": 0.02,
                                                    "overlap": True, "eval_batches": 0}  # fmt: skip
    given = Workload(TINY, 128, sparse_optimizer="sgd")
    assert rank_call(given, 4, (5,), {"dense_lr": 0.5}) == (given, RankSettings(4, seed=5, dense_lr=0.5))


@pytest.mark.parametrize(
    ("first", "args", "options", "error", "match"),
    [
        (Workload(TINY, 64), (), {"batch_size": 128}, TypeError, "batch_size"),
        (Workload(TINY, 64), (), {"zipf": 1.1, "sparse_optimizer": "sgd"}, TypeError, "sparse_optimizer"),
        (Workload(TINY, 64), (), {"bogus": 1}, TypeError, "bogus"),
        (TINY, (), {}, TypeError, "batch_size"),
        (TINY, (64, 0), {"seed": 1}, TypeError, "seed"),
        (TINY, tuple(range(10)), {}, TypeError, "at most 9"),
        ("tiny", (64,), {}, TypeError, "config"),
        (TINY, (64,), {"sparse_optimizer": "adam"}, ValueError, "sparse_optimizer"),
        (TINY, (64,), {"eval_batches": -1}, ValueError, "eval_batches"),
        (Workload(TINY, 64), (), {"overlap": 1}, TypeError, "overlap"),
    ],  # fmt: skip
)
def test_bad_calls_name_what_is_wrong(
    first: Any, args: tuple, options: dict, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        rank_call(first, 2, args, options)


def test_bad_workloads_are_refused_before_any_process_starts() -> None:
    plan = round_robin(TINY, 2)
    with pytest.raises(ValueError, match="dtype"):
        train_local(Workload(TINY, 64, dtype="bf16"), plan, 2, 2)
    with pytest.raises(ValueError, match="divisible"):
        train_local(Workload(TINY, 63), plan, 2, 2)
    with pytest.raises(ValueError, match="zipf_exponent"):
        train_local(Workload(TINY, 64, zipf_exponent=0.0), plan, 2, 2)


def test_a_workload_trains_the_steps_the_old_keywords_train_on_two_ranks() -> None:
    """Two real gloo ranks: the Workload call and the old call give the same losses bit for bit and
    the same collectives; the old form's defaults (other optimizers, skew and rate) differ, so a
    setting the Workload did not pass on would show."""
    plan, steps, batch = round_robin(TINY, 2, "row_wise"), 3, 64
    old = {"sparse_optimizer": "sgd", "dense_optimizer": "sgd", "zipf": 1.3, "sparse_lr": 0.2}
    res = launch(RW.both_forms, 2, TINY, plan, steps, batch, 1, old, timeout_s=300.0)
    for rank, (new, legacy, default) in enumerate(res.values):
        assert isinstance(new, RankResult) and isinstance(legacy, RankResult)
        assert len(new.losses) == steps
        assert new.losses == legacy.losses, rank
        assert new.losses != pytest.approx(default.losses, rel=1e-6, abs=0), rank
        strip = [{k: v for k, v in row.items() if k != "seconds"} for row in new.comm]
        assert strip == [{k: v for k, v in row.items() if k != "seconds"} for row in legacy.comm]
        assert new.keys() == legacy.keys() and json.loads(json.dumps(new.to_dict()))["losses"] == new.losses
    assert res.values[0][0].losses == res.values[1][0].losses  # the global-batch mean on every rank


def test_a_validation_sweep_run_reads_as_the_old_dict() -> None:
    from recnotebooks.measure.validate_dist import SweepRun

    run = SweepRun(a_result(), {"gflops": 100.0, "copy_bw": 1e10})
    assert run["probe"] == {"gflops": 100.0, "copy_bw": 1e10} and run["phases"] == a_result().phases
    assert SweepRun(a_result(), None)["probe"] is None
