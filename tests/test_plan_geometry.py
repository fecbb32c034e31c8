"""Exact shard geometry of plans (recnotebooks.plan), checked by counting covered cells."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import recnotebooks.perf as perf
import recnotebooks.plan as plan_mod
from recnotebooks.config import DLRMConfig, TableConfig, preset
from recnotebooks.plan import Plan, ShardGeometry, TableShard, split_counts

DIM = 8
TW = "table_wise"


def config_of(rows: list[int], dim: int = DIM) -> DLRMConfig:
    tables = tuple(TableConfig(f"T{i}", r) for i, r in enumerate(rows))
    return DLRMConfig(13, tables, dim, (16, dim), (16, 1), name="geometry")


def coverage(cfg: DLRMConfig, plan: Plan) -> dict[str, np.ndarray]:
    """How many shards hold each cell of each table (data_parallel replicas counted once)."""
    geo = plan.geometry(cfg)
    cover = {t.name: np.zeros((t.num_rows, cfg.embedding_dim), dtype=int) for t in cfg.tables}
    for i, s in enumerate(plan.shards):
        if s.sharding == "data_parallel" and s.rank != 0:
            continue
        g = geo[i]
        cover[s.table][g.row_slice, g.col_slice] += 1
    return cover


def tiles_exactly(cfg: DLRMConfig, plan: Plan) -> bool:
    """Whether each table's blocks tile it (areas add up, no two overlap), without a cell array."""
    geo = plan.geometry(cfg)
    blocks: dict[str, list[ShardGeometry]] = {}
    for i, s in enumerate(plan.shards):
        if s.sharding != "data_parallel" or s.rank == 0:
            blocks.setdefault(s.table, []).append(geo[i])
    for t in cfg.tables:
        bs = blocks[t.name]
        inside = all(b.row_end <= t.num_rows and b.col_end <= cfg.embedding_dim for b in bs)
        area = sum(b.numel for b in bs) == t.num_rows * cfg.embedding_dim
        apart = all(a.row_end <= b.row_offset or b.row_end <= a.row_offset or a.col_end <= b.col_offset
                    or b.col_end <= a.col_offset for i, a in enumerate(bs) for b in bs[i + 1:])  # fmt: skip
        if not (inside and area and apart):
            return False
    return True


@st.composite
def plans(draw: st.DrawFn) -> tuple[DLRMConfig, Plan]:
    """A random config and a random plan over it (any sharding per table, uneven fractions)."""
    world = draw(st.integers(1, 6))
    dim = draw(st.integers(1, 16))
    rows = draw(st.lists(st.integers(1, 60), min_size=1, max_size=5))
    cfg = config_of(rows, dim)
    shards: list[TableShard] = []
    for name in cfg.table_names:
        kind = draw(st.sampled_from(["table_wise", "row_wise", "column_wise", "data_parallel"]))
        if kind == "table_wise":
            shards.append(TableShard(name, draw(st.integers(0, world - 1))))
        elif kind == "data_parallel":
            shards += [TableShard(name, r, kind) for r in range(world)]
        else:
            ranks = draw(st.lists(st.integers(0, world - 1), min_size=1, max_size=world, unique=True))
            weights = draw(st.lists(st.floats(0.05, 1.0), min_size=len(ranks), max_size=len(ranks)))
            fracs = [w / sum(weights) for w in weights]
            key = "row_fraction" if kind == "row_wise" else "col_fraction"
            shards += [TableShard(name, r, kind, **{key: f}) for r, f in zip(ranks, fracs, strict=True)]
    order = draw(st.permutations(range(len(shards))))
    return cfg, Plan(world, tuple(shards[i] for i in order))


@given(plans())
def test_geometry_covers_every_table_exactly_once(case: tuple[DLRMConfig, Plan]) -> None:
    cfg, plan = case
    try:
        cover = coverage(cfg, plan)
    except ValueError as e:  # only when a fraction of a small table rounds to no rows at all
        assert "would be empty" in str(e)
        return
    for name, c in cover.items():
        assert (c == 1).all(), name
    assert tiles_exactly(cfg, plan)
    geo = plan.geometry(cfg)
    assert geo == plan.geometry(cfg) and sorted(geo) == list(range(len(plan.shards)))
    for i, s in enumerate(plan.shards):  # each count within one row (column) of its share
        g = geo[i]
        rows = cfg.tables[cfg.table_names.index(s.table)].num_rows
        assert abs(g.row_count - rows * (s.row_fraction if s.sharding == "row_wise" else 1)) < 1
        assert (
            abs(g.col_count - cfg.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1)) < 1
        )


@given(plans(), st.randoms(use_true_random=False))
def test_geometry_is_the_same_in_any_shard_order(case: tuple[DLRMConfig, Plan], rnd: random.Random) -> None:
    cfg, plan = case
    shuffled = list(plan.shards)
    rnd.shuffle(shuffled)
    other = Plan(plan.world_size, tuple(shuffled))
    try:
        a, b = plan.geometry(cfg), other.geometry(cfg)
    except ValueError:
        return
    by_key = {(s.table, s.rank): a[i] for i, s in enumerate(plan.shards)}
    assert by_key == {(s.table, s.rank): b[i] for i, s in enumerate(other.shards)}


@given(st.integers(0, 10**12), st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=40))
def test_split_counts_sum_exactly_and_stay_near_the_shares(total: int, weights: list[float]) -> None:
    fracs = [w / sum(weights) for w in weights]
    counts = split_counts(total, fracs)
    assert sum(counts) == total and min(counts) >= 0
    assert all(
        abs(c - total * w / sum(weights)) < 1 + 1e-9 * total for c, w in zip(counts, weights, strict=True)
    )
    assert counts == split_counts(total, fracs)


def test_split_counts_by_hand() -> None:
    assert split_counts(10, [1 / 3] * 3) == (3, 4, 3)  # boundaries round(10/3)=3, round(20/3)=7, 10
    assert split_counts(8, [0.75, 0.25]) == (6, 2)
    assert split_counts(10, [0.5, 0.3, 0.2]) == (5, 3, 2)
    assert split_counts(3, [0.25] * 4) == (1, 1, 0, 1)  # 0.75, 1.5, 2.25 round to 1, 2, 2
    for bad in ([], [0.5, 0.0], [float("nan")], [-1.0]):
        with pytest.raises(ValueError, match="fractions"):
            split_counts(4, bad)
    with pytest.raises(ValueError, match="total"):
        split_counts(-1, [1.0])


def test_the_docstring_examples() -> None:
    cfg = config_of([10, 10])
    plan = Plan(3, (*(TableShard("T0", r, "row_wise", row_fraction=1 / 3) for r in range(3)),
                    TableShard("T1", 1, "column_wise", col_fraction=0.25),
                    TableShard("T1", 0, "column_wise", col_fraction=0.75)))  # fmt: skip
    geo = plan.geometry(cfg)
    assert [(geo[i].shard_offsets, geo[i].shard_sizes) for i in range(5)] == [
        ((0, 0), (3, 8)), ((3, 0), (4, 8)), ((7, 0), (3, 8)), ((0, 6), (10, 2)), ((0, 0), (10, 6))
    ]  # fmt: skip
    g = geo[1]
    assert (g.row_end, g.col_end, g.numel, g.row_slice, g.col_slice) == (7, 8, 32, slice(3, 7), slice(0, 8))
    rows = plan.geometry_table(cfg)
    assert rows[3] == {"table": "T1", "rank": 1, "sharding": "column_wise", "row_offset": 0, "row_count": 10,
                       "col_offset": 6, "col_count": 2}  # fmt: skip
    plan.validate(cfg)


def test_table_wise_and_data_parallel_are_the_whole_table() -> None:
    cfg = config_of([5, 7])
    plan = Plan(
        2, (TableShard("T0", 1), TableShard("T1", 0, "data_parallel"), TableShard("T1", 1, "data_parallel"))
    )
    assert set(plan.geometry(cfg).values()) == {ShardGeometry(0, 5, 0, DIM), ShardGeometry(0, 7, 0, DIM)}


def shards_of(*specs: tuple[str, int, str, float]) -> tuple[TableShard, ...]:
    out = []
    for table, rank, kind, frac in specs:
        key = "col_fraction" if kind == "column_wise" else "row_fraction"
        out.append(TableShard(table, rank, kind, **{key: frac}))
    return tuple(out)


@pytest.mark.parametrize(
    "shards,needle",
    [
        (shards_of(("T0", 0, TW, 1), ("T1", 0, TW, 1), ("T9", 1, TW, 1)), "'T9'"),
        (shards_of(("T0", 0, TW, 1)), "'T1' is not in the plan"),
        (shards_of(("T0", 0, "row_wise", 0.5), ("T0", 1, "column_wise", 0.5), ("T1", 0, TW, 1)), "mixes"),
        (shards_of(("T0", 0, TW, 1), ("T0", 1, TW, 1), ("T1", 0, TW, 1)),
         "exactly one rank"),
        (shards_of(("T0", 0, "data_parallel", 1), ("T1", 1, TW, 1)), "every rank.*got ranks \\[0\\]"),
        (shards_of(("T0", 0, "data_parallel", 1), ("T0", 0, "data_parallel", 1), ("T1", 1, TW, 1)),
         "every rank"),
        (shards_of(("T0", 0, "row_wise", 0.5), ("T0", 1, "row_wise", 0.3), ("T1", 0, TW, 1)),
         "must add up to 1, got 0.8000.*leave some uncovered.*of its 10 rows"),
        (shards_of(("T0", 0, "row_wise", 0.7), ("T0", 1, "row_wise", 0.7), ("T1", 0, TW, 1)),
         "overlap"),
        (shards_of(("T0", 0, "column_wise", 0.5), ("T0", 1, "column_wise", 0.25), ("T1", 0, TW, 1)),
         "column_wise shards of table 'T0' must add up to 1.*of its 8 columns"),
        (shards_of(("T0", 0, TW, 0.5), ("T1", 0, TW, 1)), "row_fraction applies to row_wise"),
        ((TableShard("T0", 0, "row_wise", col_fraction=0.5), TableShard("T1", 0)), "col_fraction applies"),
        (shards_of(("T0", 0, "row_wise", 0.96), ("T0", 1, "row_wise", 0.04), ("T1", 0, TW, 1)),
         "row_wise shard of table 'T0' on rank 1 would be empty: fraction 0.04 of 10 rows"),
        (shards_of(*(("T0", r, "column_wise", 1 / 16) for r in range(16)), ("T1", 0, TW, 1)),
         "would be empty.*of 8 columns.*at most 8 shards"),
    ],
)  # fmt: skip
def test_validate_names_the_problem(shards: tuple[TableShard, ...], needle: str) -> None:
    plan = Plan(16, shards) if len(shards) > 8 else Plan(2, shards)
    with pytest.raises(ValueError, match=needle):
        plan.validate(config_of([10, 20]))
    with pytest.raises(ValueError, match=needle):
        plan.geometry(config_of([10, 20]))


def test_rank_outside_the_world_and_bad_geometry_values() -> None:
    with pytest.raises(ValueError, match="rank 2.*world_size is 2"):
        Plan(2, (TableShard("T0", 0), TableShard("T1", 2)))
    with pytest.raises(ValueError, match="row_count"):
        ShardGeometry(0, 0, 0, 4)
    with pytest.raises(ValueError, match="col_offset"):
        ShardGeometry(0, 1, -1, 4)


def test_check_stays_looser_than_validate() -> None:
    """The cost model may model a 3-row table split 4 ways; it cannot be executed."""
    cfg = config_of([3, 20])
    plan = Plan(
        4, (*(TableShard("T0", r, "row_wise", row_fraction=0.25) for r in range(4)), TableShard("T1", 0))
    )
    plan.check(cfg)
    with pytest.raises(ValueError, match="would be empty"):
        plan.validate(cfg)


CASES = [(p, w, s) for p in ("tiny", "criteo_kaggle", "rm2", "dlrm_benchmark") for w in (1, 2, 4, 8, 16)
         for s in ("naive", "greedy", "cost") if s == "cost" or w <= preset(p).num_tables]  # fmt: skip


@pytest.mark.parametrize("name,world,strategy", CASES)
def test_the_planners_plans_validate(name: str, world: int, strategy: str) -> None:
    cfg = preset(name)
    for hw in ("big_basin", "dgx_a100"):
        plan = perf.plan_tables(cfg, hw, world, strategy=strategy)
        plan.validate(cfg)
        assert tiles_exactly(cfg, plan)


@pytest.mark.parametrize("name", ["criteo_kaggle", "criteo_terabyte", "mlperf_v1"])
def test_the_cost_planner_leaves_no_empty_shards_on_more_ranks_than_tables(name: str) -> None:
    """Tiny tables (Criteo has 3-row ones) are split over at most one rank per row."""
    cfg = preset(name)
    for hw in ("big_basin", "dgx_a100"):
        plan = perf.plan_tables(cfg, hw, 32, strategy="cost")
        plan.validate(cfg)
        assert tiles_exactly(cfg, plan)


def test_the_plan_types_have_one_home() -> None:
    """``recnotebooks.plan`` (the cost model's front door names the same classes)."""
    assert perf.Plan is Plan and perf.TableShard is TableShard
    from recnotebooks.perf.access import CACHE_POLICIES

    assert CACHE_POLICIES is plan_mod.CACHE_POLICIES


def test_the_cache_policies_names_have_one_home() -> None:
    """``config.CACHE_REPLACEMENT_POLICIES``: the cache runs all of them, the model all but
    ``lfu_cached``, in the same order."""
    from recnotebooks.cache.policies import POLICIES
    from recnotebooks.config import CACHE_REPLACEMENT_POLICIES

    assert POLICIES is CACHE_REPLACEMENT_POLICIES
    assert plan_mod.CACHE_POLICIES == ("lru", "lfu", "static", "setassoc")
    assert set(CACHE_REPLACEMENT_POLICIES) - set(plan_mod.CACHE_POLICIES) == {"lfu_cached"}


def _split_counts_by_fractions(total: int, fractions: list[float]) -> tuple[int, ...]:
    """The cumulative rounding written with ``fractions.Fraction`` (an independent reference)."""
    import math
    from fractions import Fraction

    exact = [Fraction(f) for f in fractions]
    whole, prefix, bounds = sum(exact, Fraction(0)), Fraction(0), [0]
    for f in exact:
        prefix += f
        bounds.append(math.floor(total * prefix / whole + Fraction(1, 2)))
    return tuple(b - a for a, b in zip(bounds, bounds[1:], strict=False))


@given(
    st.integers(0, 2**62),
    st.lists(st.one_of(st.floats(1e-300, 1e300), st.integers(1, 10**6)), min_size=1, max_size=20),
)
def test_split_counts_equal_exact_rational_rounding(total: int, fractions: list[float]) -> None:
    """Integer arithmetic on the floats' exact ratios gives what Fraction arithmetic gives."""
    assert split_counts(total, fractions) == _split_counts_by_fractions(total, fractions)
