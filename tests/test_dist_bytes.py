"""Modeled traffic equals measured traffic, to the byte: for table-, row-, column-wise,
data-parallel and mixed plans on 2 and 4 gloo ranks and for 2D sparse parallelism, every rank's
bytes sent and received per component (and direction), as its CommLog records them, equal
recnotebooks.perf.traffic.collective_bytes: with the model's expected id counts on batches of
fixed pooling whose ids fall evenly into the row-wise shards, and with the actual id counts on
random batches."""

from __future__ import annotations

from collections import Counter
from typing import Any

import _shard_workers as W
import pytest

from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.distributed import launch
from recnotebooks.perf.traffic import collective_bytes, volumes
from recnotebooks.plan import Plan, column_wise, combine, data_parallel, row_wise, table_wise
from recnotebooks.sparse import JaggedBatch

pytestmark = pytest.mark.filterwarnings(
    "error::DeprecationWarning", "error::FutureWarning", "error::UserWarning"
)

POOL = 4  #: ids per bag in the fixed batches (a multiple of every row-wise split here)
TABLES = tuple(TableConfig(f"t{k}", n, pooling_factor=POOL) for k, n in enumerate((16, 8, 12, 8)))
DIM, STEPS, SEED, LOCAL = 4, 2, 3, 3


def plans(world: int) -> dict[str, Plan]:
    names = [t.name for t in TABLES]
    return {
        "table_wise": table_wise(names, world),
        "row_wise": row_wise(names, world),
        "column_wise": column_wise(names, world, fractions=[0.75, 0.25] if world == 2 else None),
        "data_parallel": data_parallel(names, world),
        "mixed": combine(row_wise(["t0"], world), column_wise(["t1"], world, ranks=sorted({0, world - 1})),
                         data_parallel(["t2"], world), table_wise(["t3"], world, ranks=world - 1)),
    }  # fmt: skip


#: an odd width: all-reduced buffers that do not split evenly over the ranks (uneven ring chunks)
ODD_TABLES, ODD_DIM = (TableConfig("t0", 16), TableConfig("u", 7)), 3


def config(tables: tuple[TableConfig, ...], dim: int) -> DLRMConfig:
    return DLRMConfig(num_dense=3, tables=tables, embedding_dim=dim, bottom_mlp=(dim,), top_mlp=(1,))


def cases(world: int) -> list[tuple[str, tuple[TableConfig, ...], int, Plan, int | None, int | None]]:
    """(name, tables, dim, plan, group size (2D) or None, fixed pooling or None: random bags)."""
    out = [(name, TABLES, DIM, plan, None, POOL) for name, plan in plans(world).items()]
    out.append(("mixed_random_bags", TABLES, DIM, plans(world)["mixed"], None, None))
    m = world // 2  # 2D: 2 groups of world / 2
    two_d = plans(m)["mixed" if m > 1 else "table_wise"]
    out.append(("2d_mixed" if m > 1 else "2d_table_wise", TABLES, DIM, two_d, m, POOL))
    out.append(("2d_random_bags", TABLES, DIM, two_d, m, None))
    odd = combine(table_wise(["t0"], world, ranks=0), data_parallel(["u"], world))
    out.append(("odd_width_dp", ODD_TABLES, ODD_DIM, odd, None, None))
    odd_2d = combine(table_wise(["t0"], m, ranks=m - 1), data_parallel(["u"], m))
    out.append(("odd_width_2d", ODD_TABLES, ODD_DIM, odd_2d, m, None))
    return out


@pytest.fixture(scope="module")
def measured() -> dict[tuple[int, str], list[list[dict[str, Any]]]]:
    """One launch per world size running every case: per (world, case), each rank's log rows."""
    out = {}
    for world in (2, 4):
        todo = cases(world)
        kwargs = [{"tables": tables, "dim": dim, "plan": plan, "batch_size": LOCAL * world, "steps": STEPS,
                   "seed": SEED, "group_size": m, "fixed_pooling": pool}
                  for _, tables, dim, plan, m, pool in todo]  # fmt: skip
        result = launch(W.bytes_cases, world, kwargs, timeout_s=120)
        assert result.warnings == [[]] * world
        for k, (name, *_) in enumerate(todo):
            out[(world, name)] = [result.values[r][k] for r in range(world)]
    return out


def id_counts(batch: JaggedBatch, cfg: DLRMConfig, plan: Plan, world: int) -> dict[tuple[int, int], int]:
    """Ids each rank's samples send to each model-parallel shard (row-wise: those in its rows)."""
    geo, m = plan.geometry(cfg), plan.world_size
    out = {}
    for r in range(world):
        local = W.samples(batch, r * LOCAL, (r + 1) * LOCAL)
        for i, s in enumerate(plan.shards):
            if s.sharding == "data_parallel":
                continue
            ids, _ = local[s.table]
            if s.sharding == "row_wise":
                ids = ids[(ids >= geo[i].row_offset) & (ids < geo[i].row_end)]
            out[(r, i)] = int(ids.numel())
    assert m <= world
    return out


def by_component(rows: list[dict[str, Any]]) -> Counter:
    total: Counter = Counter()
    for x in rows:
        total[(x["rank"], x["component"], x["direction"], "sent")] += x["bytes_sent"]
        total[(x["rank"], x["component"], x["direction"], "received")] += x["bytes_received"]
    return Counter({k: v for k, v in total.items() if v})


ALL = [(w, c[0]) for w in (2, 4) for c in cases(w)]


@pytest.mark.parametrize(("world", "name"), ALL, ids=lambda x: str(x))
def test_measured_bytes_equal_modeled_bytes_exactly(measured: dict, world: int, name: str) -> None:
    _, tables, dim, plan, m, pool = next(c for c in cases(world) if c[0] == name)
    cfg = config(tables, dim)
    logs = measured[(world, name)]
    got = by_component([x for rank_rows in logs for x in rank_rows])
    modeled: list[dict[str, Any]] = []
    for step in range(STEPS):
        counts = None
        if pool is None:  # random bags: the actual counts
            counts = id_counts(W.global_batch(tables, LOCAL * world, SEED, step), cfg, plan, world)
        else:  # the expected counts are exact here: check they are what the batch holds
            batch = W.fixed_batch(tables, LOCAL * world, POOL, SEED, step)
            expected = collective_bytes(cfg, plan, LOCAL, world, dense=False)
            assert expected == collective_bytes(cfg, plan, LOCAL, world, dense=False,
                                                id_counts=id_counts(batch, cfg, plan, world))  # fmt: skip
        modeled += collective_bytes(cfg, plan, LOCAL, world, "fp32", id_counts=counts, dense=False)
    assert all(isinstance(x["bytes_sent"], int) and isinstance(x["bytes_received"], int) for x in modeled)
    want = by_component(modeled)
    assert got == want
    assert got  # something moved
    if m is not None and m < world:  # 2D: the replica sync is there
        assert any(x["collective"] == "replica_all_reduce" and x["bytes_sent"] for x in modeled)


def test_volumes_and_bad_input() -> None:
    plan = plans(2)["mixed"]
    rows = collective_bytes(config(TABLES, DIM), plan, LOCAL, dense=True)
    vol = volumes(rows, 2)
    assert set(vol) == {"all_to_all", "all_reduce"} and all(v > 0 for vs in vol.values() for v in vs)
    names = {x["collective"] for x in rows}
    assert names == {"lengths_all_to_all", "ids_all_to_all", "pooled_all_to_all", "gradient_all_to_all",
                     "data_parallel_all_reduce", "dense_all_reduce"}  # fmt: skip
    with pytest.raises(ValueError, match="world must be a multiple of plan.world_size=2"):
        collective_bytes(config(TABLES, DIM), plan, LOCAL, 3)
    with pytest.raises(ValueError, match="dtype"):
        collective_bytes(config(TABLES, DIM), plan, LOCAL, dtype="int3")
    with pytest.raises(ValueError, match="id_counts must give every"):
        collective_bytes(config(TABLES, DIM), plan, LOCAL, id_counts={})
