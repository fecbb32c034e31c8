"""The plan constructors of recnotebooks.plan (table_wise, row_wise, column_wise, data_parallel,
round_robin, combine, mixed_plan, named_plan): every table's cells covered exactly once, ranks in
the world, the plans equal to the hand-written shard lists they replaced, bad input refused by name,
and the docstring examples run."""

from __future__ import annotations

import doctest
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _values import bad
from hypothesis import given
from hypothesis import strategies as st

import recnotebooks.plan as plan_mod
from recnotebooks.config import DLRMConfig, TableConfig, preset
from recnotebooks.plan import (
    NAMED_PLANS,
    SHARDINGS,
    Plan,
    TableShard,
    column_wise,
    combine,
    data_parallel,
    mixed_plan,
    named_plan,
    round_robin,
    row_wise,
    table_wise,
)


def config_of(rows: list[int], dim: int) -> DLRMConfig:
    tables = tuple(TableConfig(f"t{i}", r) for i, r in enumerate(rows))
    return DLRMConfig(1, tables, dim, (dim,), (1,), name="constructors")


def cover(cfg: DLRMConfig, plan: Plan) -> dict[str, np.ndarray]:
    """How many shards hold each cell of each table (a data-parallel table: replicas per cell)."""
    geo = plan.geometry(cfg)
    out = {t.name: np.zeros((t.num_rows, cfg.embedding_dim), dtype=int) for t in cfg.tables}
    for i, s in enumerate(plan.shards):
        out[s.table][geo[i].row_slice, geo[i].col_slice] += 1
    return out


#: A config, a world, a constructor's name and the keyword arguments it is called with.
Case = tuple[DLRMConfig, int, str, dict[str, Any]]


@st.composite
def settings_(draw: st.DrawFn) -> Case:
    """A config, a world, a constructor and its keyword arguments (ranks, fractions)."""
    world = draw(st.integers(1, 8))
    cfg = config_of(draw(st.lists(st.integers(1, 40), min_size=1, max_size=5)), draw(st.integers(1, 12)))
    kind = draw(st.sampled_from(SHARDINGS))
    kwargs: dict[str, Any] = {}
    if kind == "table_wise" and draw(st.booleans()):
        kwargs["ranks"] = draw(st.lists(st.integers(0, world - 1), min_size=cfg.num_tables,
                                        max_size=cfg.num_tables))  # fmt: skip
    if kind in ("row_wise", "column_wise") and draw(st.booleans()):
        kwargs["ranks"] = draw(st.permutations(range(world)).map(lambda p: p[: max(1, len(p) // 2)]))
    if kind == "column_wise" and "ranks" in kwargs and draw(st.booleans()):
        n = len(kwargs["ranks"])
        if n <= cfg.embedding_dim:  # whole columns: counts summing to the dimension, each >= 1
            inner = st.integers(1, max(1, cfg.embedding_dim - 1))  # dimension 1: no cut to draw
            cuts = sorted(draw(st.lists(inner, min_size=n - 1, max_size=n - 1, unique=True)))
            edges = [0, *cuts, cfg.embedding_dim]
            kwargs["fractions"] = [
                (b - a) / cfg.embedding_dim for a, b in zip(edges, edges[1:], strict=False)
            ]
    return cfg, world, kind, kwargs


def uncapped(cfg: DLRMConfig, world: int, kind: str, kwargs: dict[str, Any]) -> bool:
    """Whether every table has at least as many rows (columns) as the ranks that split it, so that
    the constructors split it over all of them (given a config, they split a smaller one over fewer)."""
    n = len(kwargs.get("ranks", range(world)))
    if kind == "row_wise":
        return min(t.num_rows for t in cfg.tables) >= n
    return kind != "column_wise" or "fractions" in kwargs or cfg.embedding_dim >= n


BUILD = {
    "table_wise": table_wise,
    "row_wise": row_wise,
    "column_wise": column_wise,
    "data_parallel": data_parallel,
}


@given(settings_())
def test_every_cell_is_covered_exactly_once_on_ranks_of_the_world(case: Case) -> None:
    cfg, world, kind, kwargs = case
    plan = BUILD[kind](cfg, world, **kwargs)
    assert plan.world_size == world and plan.strategy == kind
    assert {s.sharding for s in plan.shards} == {kind}
    assert all(0 <= s.rank < world for s in plan.shards)
    per_cell = world if kind == "data_parallel" else 1
    for name, c in cover(cfg, plan).items():
        assert (c == per_cell).all(), (name, c)
    if kind in ("row_wise", "column_wise"):
        ranks = kwargs.get("ranks", list(range(world)))
        assert {s.rank for s in plan.shards} <= set(ranks)
    if "ranks" in kwargs and kind == "table_wise":
        assert [s.rank for s in plan.shards] == kwargs["ranks"]
    if uncapped(cfg, world, kind, kwargs):  # from the names alone (rows and width unknown): the same plan
        assert BUILD[kind](list(cfg.table_names), world, **kwargs).shards == plan.shards


@given(settings_(), st.integers(0, 3))
def test_combined_plans_keep_each_tables_shards(case: Case, cut: int) -> None:
    cfg, world, kind, kwargs = case
    names = cfg.table_names
    cut = min(cut, len(names))
    if kind == "table_wise":
        kwargs.pop("ranks", None)  # one per table of the config, not of the first part
    first = BUILD[kind](list(names[:cut]), world, **kwargs) if cut else None
    rest = data_parallel(list(names[cut:]), world) if cut < len(names) else None
    parts = [p for p in (first, rest) if p is not None]
    plan = combine(*parts)
    assert plan.shards == tuple(s for p in parts for s in p.shards)
    assert plan.strategy == "mixed"
    if uncapped(cfg, world, kind, kwargs):
        plan.validate(cfg)


# ----- equal to what they replaced --------------------------------------------------------------
def old_round_robin_plan(config: DLRMConfig, world: int, sharding: str) -> Plan:
    """recnotebooks.distributed.training.round_robin_plan as it was, written out shard by shard."""
    shards: list[TableShard] = []
    for k, t in enumerate(config.tables):
        if sharding == "table_wise":
            shards.append(TableShard(t.name, k % world))
        elif sharding == "data_parallel":
            shards += [TableShard(t.name, r, sharding) for r in range(world)]
        elif sharding == "row_wise":
            parts = min(world, t.num_rows)
            shards += [TableShard(t.name, r, sharding, row_fraction=1 / parts) for r in range(parts)]
        else:
            parts = min(world, config.embedding_dim)
            shards += [TableShard(t.name, r, sharding, col_fraction=1 / parts) for r in range(parts)]
    return Plan(world, tuple(shards), strategy=f"round_robin_{sharding}")


def old_mixed_plan(config: DLRMConfig, world: int) -> Plan:
    """recnotebooks.measure.validate_dist.mixed_plan as it was."""
    shards: list[TableShard] = []
    for k, t in enumerate(config.tables):
        if k % 4 == 1:
            shards += [TableShard(t.name, r, "row_wise", row_fraction=1 / world) for r in range(world)]
        elif k % 4 == 2 and config.embedding_dim % world == 0:
            shards += [TableShard(t.name, r, "column_wise", col_fraction=1 / world) for r in range(world)]
        elif k % 4 == 3:
            shards += [TableShard(t.name, r, "data_parallel") for r in range(world)]
        else:
            shards.append(TableShard(t.name, k % world))
    return Plan(world, tuple(shards), strategy="mixed")


@pytest.mark.parametrize("name", ["tiny", "criteo_kaggle"])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_round_robin_and_mixed_equal_the_builders_they_replaced(name: str, world: int) -> None:
    cfg = preset(name)
    for sharding in SHARDINGS:
        assert round_robin(cfg, world, sharding) == old_round_robin_plan(cfg, world, sharding)
        assert named_plan(cfg, sharding, world) == old_round_robin_plan(cfg, world, sharding)
    assert mixed_plan(cfg, world) == old_mixed_plan(cfg, world) == named_plan(cfg, "mixed", world)


def test_a_small_table_is_split_over_as_many_ranks_as_it_has_rows_and_columns() -> None:
    cfg = config_of([3, 10], 2)
    assert [s.rank for s in row_wise(cfg, 5).shards if s.table == "t0"] == [0, 1, 2]
    assert [s.rank for s in column_wise(cfg, 5).shards if s.table == "t0"] == [0, 1]
    with pytest.raises(ValueError, match="would be empty"):  # the names alone cannot know: validate says
        row_wise(["t0", "t1"], 5).validate(cfg)


def test_the_tests_hand_written_shard_lists() -> None:
    """The tw/rw/cw/dp helpers the sharded-collection tests wrote out, now constructor calls."""
    rw = [TableShard("t0", r, "row_wise", row_fraction=1 / 4) for r in range(4)]
    assert row_wise(["t0"], 4).shards == tuple(rw)
    cw = [
        TableShard("t1", 1, "column_wise", col_fraction=0.5),
        TableShard("t1", 3, "column_wise", col_fraction=0.5),
    ]
    assert column_wise(["t1"], 4, ranks=[1, 3]).shards == tuple(cw)
    cw = [
        TableShard("t", 0, "column_wise", col_fraction=0.75),
        TableShard("t", 1, "column_wise", col_fraction=0.25),
    ]
    assert column_wise(["t"], 2, fractions=[0.75, 0.25]).shards == tuple(cw)
    dp = [TableShard("t2", r, "data_parallel") for r in range(3)]
    assert data_parallel(["t2"], 3).shards == tuple(dp)
    tw = [TableShard("t0", 0), TableShard("t1", 1), TableShard("t2", 1), TableShard("t3", 0)]
    assert table_wise(["t0", "t1", "t2", "t3"], 2, ranks=[0, 1, 1, 0]).shards == tuple(tw)
    assert table_wise(["t0", "t1", "t2"], 2).shards == (
        TableShard("t0", 0),
        TableShard("t1", 1),
        TableShard("t2", 0),
    )
    assert table_wise(["t0", "t1"], 3, ranks=2).shards == (TableShard("t0", 2), TableShard("t1", 2))
    # the sharded-collection tests' 4-rank mixed plan, shard for shard
    mixed = (*rw, *(TableShard("t1", r, "column_wise", col_fraction=0.5) for r in (1, 3)),
             *(TableShard("t2", r, "data_parallel") for r in range(4)), TableShard("t3", 2))  # fmt: skip
    got = combine(row_wise(["t0"], 4), column_wise(["t1"], 4, ranks=[1, 3]), data_parallel(["t2"], 4),
                  table_wise(["t3"], 4, ranks=2))  # fmt: skip
    assert got == Plan(4, mixed, "mixed")


# ----- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "needle"),
    [
        (lambda: table_wise([], 2), TypeError, "tables must be a DLRMConfig or a non-empty sequence"),
        (lambda: table_wise("t0", 2), TypeError, "tables must be"),
        (lambda: table_wise([bad(3)], 2), TypeError, r"tables\[0\] must be a TableConfig or a table name"),
        (lambda: table_wise(["t0", "t0"], 2), ValueError, r"each table once, got \['t0'\]"),
        (lambda: table_wise(["t0"], 0), ValueError, "world_size must be an int in"),
        (lambda: table_wise(["t0"], 2**20), ValueError, "world_size must be an int in"),
        (lambda: table_wise(["t0"], 2, ranks=2), ValueError, r"ranks must be an int in \[0, 1\], got 2"),
        (lambda: table_wise(["t0", "t1"], 2, ranks=[0]), ValueError, "ranks must have a length in"),
        (lambda: table_wise(["t0"], 2, ranks=[5]), ValueError, r"ranks\[0\] must be an int in \[0, 1\]"),
        (lambda: row_wise(["t0"], 2, ranks=[0, 0]), ValueError, "ranks must be distinct"),
        (lambda: row_wise(["t0"], 2, ranks=[]), ValueError, "ranks must have a length"),
        (lambda: column_wise(["t0"], 2, fractions=[1.0]), ValueError, r"one fraction per rank \(2"),
        (lambda: column_wise(["t0"], 2, fractions=[0.5, 0.6]), ValueError, "fractions must add up to 1"),
        (lambda: column_wise(["t0"], 2, fractions=[1.0, 0.0]), ValueError, r"fractions\[1\] must be"),
        (lambda: column_wise(["t0"], 2, fractions=bad(0.5)), TypeError, "fractions must be a sequence"),
        (lambda: data_parallel(["t0"], bad(1.5)), TypeError, "world_size must be an int"),
        (lambda: round_robin(["t0"], 2, "diagonal"), ValueError, "sharding must be one of"),
        (lambda: named_plan(preset("tiny"), "best", 2), ValueError, "plan must be one of"),
        (lambda: named_plan(bad(["t0"]), "row_wise", 2), TypeError, "config must be a DLRMConfig"),
        (lambda: mixed_plan(preset("tiny"), 0), ValueError, "world_size"),
        (lambda: combine(), ValueError, "at least one plan"),
        (lambda: combine(table_wise(["a"], 2), bad("b")), TypeError, r"plans\[1\] must be a Plan"),
        (
            lambda: combine(table_wise(["a"], 2), table_wise(["b"], 3)),
            ValueError,
            r"one world_size.*\[2, 3\]",
        ),
        (
            lambda: combine(table_wise(["a"], 2), row_wise(["a"], 2)),
            ValueError,
            r"'a' is in plans\[0\] and plans\[1\]",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_parameter(
    call: Callable[[], object], error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        call()


def test_a_config_is_validated_when_given() -> None:
    cfg = config_of([10, 10], 3)  # 3 columns: four column-wise ranks would leave one empty
    with pytest.raises(ValueError, match="would be empty"):
        column_wise(cfg, 4, fractions=[0.5, 0.3, 0.1, 0.1])


def test_named_plans_are_what_the_explorer_offers() -> None:
    from recnotebooks.viz.sharding import PLANS, sharding_plan

    assert set(NAMED_PLANS) - {"mixed"} <= set(PLANS)
    cfg = preset("tiny")
    for name in NAMED_PLANS[:4]:
        assert sharding_plan(cfg, name, 2) == named_plan(cfg, name, 2)


def test_docstring_examples_run() -> None:
    modules = (plan_mod.schemes, plan_mod.shards)
    results = [doctest.testmod(m, raise_on_error=False, verbose=False) for m in modules]
    assert sum(r.attempted for r in results) >= 10 and sum(r.failed for r in results) == 0


# ----- tables behind caches ------------------------------------------------------------------------
def test_behind_cache_places_the_tables_shards_and_sizes_their_slots() -> None:
    cfg = config_of([1000, 333, 10], 4)
    plan = combine(row_wise(["t0"], 3), table_wise(["t1", "t2"], 3, ranks=[1, 2]))
    got = plan_mod.behind_cache(plan, cfg, ["t0", "t2"], fraction=0.1, policy="lru")
    # by hand: a third of t0's 1000 rows is 333.3 rows, 10% of it 33 slots; 10% of t2's 10 rows is 1
    t0 = [
        TableShard("t0", r, "row_wise", "cache", 1 / 3, cache_rows=33, cache_policy="lru") for r in range(3)
    ]
    t2 = TableShard("t2", 2, placement="cache", cache_rows=1, cache_policy="lru")
    want = (*t0, TableShard("t1", 1), t2)
    assert got == Plan(3, want, plan.strategy)
    sized = plan_mod.behind_cache(plan, cfg, ["t1", "t2"], rows={"t1": 500, "t2": 4}, ways=8)
    slots = [(s.cache_rows, s.cache_ways) for s in sized.shards[3:]]
    assert slots == [(333, 8), (4, 8)]  # t1's capped at its rows
    typed = plan_mod.behind_cache(plan, cfg, ["t1"], hit_rate=0.9)
    assert typed.shards[3].cache_hit_rate == 0.9 and typed.shards[3].cache_rows is None
    # None: the shards already behind a cache get slots instead of their typed-in hit rate
    resized = plan_mod.behind_cache(typed, cfg, fraction=0.5, policy="setassoc")
    assert resized.shards[3] == TableShard(
        "t1", 1, placement="cache", cache_rows=166, cache_policy="setassoc"
    )
    assert resized.shards[:3] == plan.shards[:3] and resized.shards[4] == plan.shards[4]


def test_single_device_plan_is_the_hbm_plan_behind_caches() -> None:
    cfg = config_of([100, 50, 20], 4)
    with pytest.raises(ValueError, match="needs cache_hit_rate"):  # t2 has neither slots nor a hit rate
        plan_mod.single_device_plan(cfg, ["cache", "hbm", "cache"], cache_rows={"t0": 500})
    got = plan_mod.single_device_plan(cfg, ["cache", "hbm", "cache"], cache_rows=30, cache_policy="lfu")
    want = (TableShard("t0", 0, placement="cache", cache_rows=30, cache_policy="lfu"),
            TableShard("t1", 0, cache_policy="lfu"),
            TableShard("t2", 0, placement="cache", cache_rows=20, cache_policy="lfu"))  # fmt: skip
    assert got == Plan(1, want, "single_device")


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [({"tables": ["nope"]}, ValueError, r"unknown \['nope'\]"),
     ({"tables": "t0"}, TypeError, "sequence of table"),
     ({"tables": ["t0"], "rows": 3, "fraction": 0.1}, ValueError, "rows or fraction, not both"),
     ({"tables": ["t0"], "fraction": 0.0}, ValueError, "fraction"),
     ({"tables": ["t0"], "rows": {"nope": 3}}, ValueError, "nope"),
     ({"tables": ["t0"]}, ValueError, "needs cache_hit_rate"),
     ({"tables": ["t0"], "rows": 3, "hit_rate": 0.5}, ValueError, "not both"),
     ({"tables": ["t0"], "rows": 3, "policy": "fifo"}, ValueError, "cache_policy")],
)  # fmt: skip
def test_behind_cache_refuses_bad_input_by_name(kwargs: dict[str, Any], error: type, needle: str) -> None:
    cfg = config_of([100, 50], 4)
    with pytest.raises(error, match=needle):
        plan_mod.behind_cache(table_wise(cfg, 2), cfg, **kwargs)
