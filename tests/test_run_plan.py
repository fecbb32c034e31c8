"""recnotebooks.distributed.plan_run.run_plan: a plan run on local ranks in one call gives each rank its
samples' pooled outputs, equal to one process's collection, and the bytes its collectives moved
(checked against the byte counts of the scheme, worked out here); bad settings are refused before
any process starts."""

from __future__ import annotations

import pytest

from recnotebooks.config import TableConfig
from recnotebooks.distributed import PlanRun, run_plan
from recnotebooks.distributed.plan_run import MAX_RUN_PLAN_BATCH
from recnotebooks.plan import Plan, TableShard, column_wise, combine, data_parallel, row_wise, table_wise

pytestmark = pytest.mark.filterwarnings(
    "error::DeprecationWarning", "error::FutureWarning", "error::UserWarning"
)

TABLES = (TableConfig("t0", 10), TableConfig("t1", 7), TableConfig("t2", 5), TableConfig("t3", 6))
DIM, BATCH = 4, 6


@pytest.fixture(scope="module")
def mixed() -> PlanRun:
    """One 2-rank run of a plan with every scheme (mean pooling: row-wise sums are divided after)."""
    plan = combine(row_wise(["t0"], 2), column_wise(["t1"], 2, fractions=[0.75, 0.25]),
                   data_parallel(["t2"], 2), table_wise(["t3"], 2, ranks=1))  # fmt: skip
    return run_plan(TABLES, DIM, plan, batch_size=BATCH, seed=3, pooling="mean", timeout_s=120)


def test_every_rank_gets_its_samples_pooled_vectors_equal_to_one_process(mixed: PlanRun) -> None:
    assert mixed.shapes == ((BATCH // 2, len(TABLES), DIM),) * 2
    assert mixed.matches and mixed.max_abs_diff <= 1e-5


def test_the_bytes_are_the_schemes(mixed: PlanRun) -> None:
    b, world = BATCH // 2, 2
    # the pooled width each rank owns for model-parallel tables: t0 row-wise (4 + 4, partial sums),
    # t1 column-wise (3 on rank 0, 1 on rank 1), t3 table-wise on rank 1 (4)
    widths = [DIM + 3, DIM + 1 + DIM]
    rows = {(r["rank"], r["collective"], r["direction"]): r for r in mixed.bytes_by_collective()}
    for r in range(world):
        back = rows[(r, "all_to_all", "backward")]  # gradients of this rank's samples go to the owners
        assert back["bytes_sent"] == b * (sum(widths) - widths[r]) * 4
        assert back["bytes_received"] == (world - 1) * b * widths[r] * 4
        # the data-parallel table's gradient (5 rows x 4), all-reduced: half sent, half received
        n = 5 * DIM
        mine = n // world + (1 if r < n % world else 0)
        ar = rows[(r, "all_reduce", "forward")]
        assert ar["bytes_sent"] == ar["bytes_received"] == (n - mine + (world - 1) * mine) * 4
    assert all(r["source"] == "measured" for r in mixed.comm)


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"batch_size": 7}, ValueError, "batch_size must be a multiple of the plan's world_size=2, got 7"),
        ({"batch_size": 1}, ValueError, "batch_size must be an int in"),
        ({"batch_size": MAX_RUN_PLAN_BATCH + 2}, ValueError, "batch_size must be an int in"),
        ({"tables": TABLES[:3]}, ValueError, "'t3', which the config does not have"),
        ({"tables": ["t0"]}, TypeError, "tables must be a non-empty sequence of TableConfig"),
        ({"tables": (TableConfig("t0", 10**7), *TABLES[1:])}, ValueError, "more than a teaching run's"),
        ({"plan": "table_wise"}, TypeError, "plan must be a Plan"),
        ({"plan": Plan(2, tuple(TableShard(t.name, 0, "row_wise", row_fraction=0.5) for t in TABLES))},
         ValueError, "must add up to 1"),
        ({"embedding_dim": 0}, ValueError, "embedding_dim must be an int >= 1"),
        ({"pooling": "max"}, ValueError, "pooling must be one of"),
        ({"timeout_s": 0}, ValueError, "timeout_s"),
    ],
)  # fmt: skip
def test_bad_settings_are_refused_before_any_process_starts(kwargs: dict, error: type, needle: str) -> None:
    args = {"tables": TABLES, "embedding_dim": DIM, "plan": table_wise(TABLES, 2), "batch_size": 4} | kwargs
    with pytest.raises(error, match=needle):
        run_plan(**args)
