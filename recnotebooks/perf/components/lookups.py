"""What the embeddings of each shard touch in one modeled step (every number **modeled**).

:func:`shard_access` gives each shard of a plan its lookups, distinct rows and last-level
cache hits under Zipf skew (:mod:`recnotebooks.perf.access`), and :func:`cache_hit_rates` the
hit rate of a ``"cache"`` placement's device cache; :mod:`.embeddings` prices them by placement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recnotebooks.config import DLRMConfig, state_floats_per_row
from recnotebooks.perf.access import expected_unique_many, hit_rate_many
from recnotebooks.perf.hardware import Hardware
from recnotebooks.perf.precision import precision
from recnotebooks.plan import Plan, TableShard

__all__ = ["ShardAccess", "accesses", "cache_hit_rates", "shard_access"]


@dataclass(frozen=True)
class ShardAccess:
    """What one shard's lookups touch in a step (see :func:`shard_access`)."""

    shard: TableShard
    row_fraction: float  #: share of the table's rows this shard holds (1 unless row-wise)
    dim: float  #: embedding columns this shard holds
    row_bytes: float
    served: float  #: bags it pools: the whole global batch, or the local one if data-parallel
    lookups: float
    distinct_rows: float
    llc_hit_rate: float  #: share of its lookups served by the device's last-level cache
    #: share of its lookups a ``"cache"`` placement serves from device memory: typed in on the
    #: shard, or modeled from its ``cache_rows`` and ``cache_policy`` (:func:`cache_hit_rates`)
    cache_hit_rate: float = 0.0
    rows: float = 0.0  #: rows this shard holds
    #: no lookup, only the optimizer's update of these rows from a given gradient (a data-parallel
    #: replica applying its all-reduced gradient to every row)
    update_only: bool = False
    #: bytes of sparse optimizer state per row of this shard, fp32 (its row and its state are read
    #: and written once per distinct row): 0 for SGD, 4 for row-wise Adagrad, ``4 * dim`` for
    #: exact Adagrad (:func:`~recnotebooks.config.state_floats_per_row`)
    state_bytes: float = 0.0


def shard_access(
    config: DLRMConfig,
    hw: Hardware,
    plan: Plan,
    local_batch: float,
    batch_size: int,
    zipf_exponent: float,
    dtype: str,
    sparse_optimizer: str,
) -> list[ShardAccess]:
    """Per shard of ``plan``: lookups, distinct rows, last-level-cache hits and the state
    ``sparse_optimizer`` keeps per row, in one vectorised evaluation. The cache holds each rank's
    hottest rows (and their state), split between its shards by their share of the rank's
    lookups. On several ranks, one more access per data-parallel shard follows the plan's: the
    update of every row (:func:`_every_row_update`)."""
    tables = {t.name: t for t in config.tables}
    shards = plan.shards
    if not shards:
        return []
    fracs = [s.row_fraction if s.sharding == "row_wise" else 1.0 for s in shards]
    rows = [max(1, int(tables[s.table].num_rows * f)) for s, f in zip(shards, fracs, strict=True)]
    served = [local_batch if s.sharding == "data_parallel" else float(batch_size) for s in shards]
    lookups = [b * tables[s.table].pooling_factor * f for s, b, f in zip(shards, served, fracs, strict=True)]
    dims = [config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0) for s in shards]
    out = accesses(shards, rows, served, lookups, dims, hw, zipf_exponent, dtype, sparse_optimizer)
    return out + _every_row_update(out, plan.world_size)


def accesses(
    shards: Sequence[TableShard],
    rows: Sequence[int],
    served: Sequence[float],
    lookups: Sequence[float],
    dims: Sequence[float],
    hw: Hardware,
    zipf_exponent: float,
    dtype: str,
    sparse_optimizer: str,
) -> list[ShardAccess]:
    """Per shard of ``shards`` (each holding ``rows`` rows of ``dims`` columns, serving ``served``
    bags with ``lookups`` lookups a step): its distinct rows under Zipf skew, its last-level
    cache hits and the state ``sparse_optimizer`` keeps per row, in one vectorised evaluation.
    The cache holds each rank's hottest rows (and their state), split between its shards by
    their share of the rank's lookups. :func:`shard_access` gives a DLRM plan's shards these; a
    generative recommender's tables (:mod:`recnotebooks.perf.hstu`, each event a bag of one row)
    give their own."""
    fracs = [s.row_fraction if s.sharding == "row_wise" else 1.0 for s in shards]
    distinct = expected_unique_many(lookups, rows, zipf_exponent)
    row_bytes = [d * precision(dtype).embedding_bytes for d in dims]
    state = [4.0 * state_floats_per_row(sparse_optimizer, d) for d in dims]  # fp32 state per row
    llc = [0.0] * len(shards)
    if hw.llc_bytes > 0 and max(hw.llc_speedup, hw.update_cache_speedup) > 1:
        rank_lookups: dict[int, float] = {}
        for s, n, f in zip(shards, lookups, fracs, strict=True):
            rank_lookups[s.rank] = rank_lookups.get(s.rank, 0.0) + n / f
        cached = [
            hw.llc_bytes * (n / f) / (rank_lookups[s.rank] or 1.0) / (rb + sb)
            for s, n, f, rb, sb in zip(shards, lookups, fracs, row_bytes, state, strict=True)
        ]
        llc = [float(h) for h in hit_rate_many(cached, rows, zipf_exponent)]
    hits = cache_hit_rates(shards, rows, zipf_exponent)
    return [
        ShardAccess(s, f, d, rb, b, n, float(u), h, c, float(r), state_bytes=sb)
        for s, f, d, rb, b, n, u, h, c, r, sb in zip(
            shards, fracs, dims, row_bytes, served, lookups, distinct, llc, hits, rows, state, strict=True
        )
    ]


def _every_row_update(accesses: list[ShardAccess], world: int) -> list[ShardAccess]:
    """What our data-parallel tables add on ``world > 1`` ranks (recnotebooks.distributed's
    ``ShardedEmbeddingBagCollection.sync_data_parallel_gradients``): the replica's dense gradient
    is all-reduced (the ``all_reduce`` component), then recorded as every row's gradient (each
    row a bag of its own, no lookup: ``EmbeddingBagCollection.record_dense_gradient``), and the
    optimizer updates every row. One update-only access per data-parallel shard with every row
    distinct (no last-level cache: each row is touched once). The dense gradient's
    materialisation (one pass over the rows) is not priced; the batch's own distinct-row update,
    which this replaces, still is."""
    if world <= 1:
        return []
    return [
        ShardAccess(
            a.shard,
            a.row_fraction,
            a.dim,
            a.row_bytes,
            a.rows,
            a.rows,
            a.rows,
            0.0,
            a.cache_hit_rate,
            a.rows,
            update_only=True,
            state_bytes=a.state_bytes,
        )
        for a in accesses
        if a.shard.sharding == "data_parallel"
    ]


def cache_hit_rates(shards: Sequence[TableShard], rows: Sequence[int], zipf_exponent: float) -> list[float]:
    """The device-cache hit rate of each shard (0 unless its placement is ``"cache"``): the
    typed-in ``cache_hit_rate``, or :func:`~recnotebooks.perf.access.hit_rate` of its
    ``cache_rows`` slots over its ``rows`` under its ``cache_policy``, one vectorised
    evaluation per policy."""
    out = [float(s.cache_hit_rate or 0.0) if s.placement == "cache" else 0.0 for s in shards]
    groups: dict[tuple[str, int], list[int]] = {}
    for i, s in enumerate(shards):
        if s.placement == "cache" and s.cache_rows is not None:
            groups.setdefault((s.cache_policy, s.cache_ways), []).append(i)
    for (policy, ways), idx in groups.items():
        slots = [float(shards[i].cache_rows) for i in idx]  # type: ignore[arg-type]
        modeled = hit_rate_many(slots, [rows[i] for i in idx], zipf_exponent, policy, ways)
        for i, h in zip(idx, modeled, strict=True):
            out[i] = float(h)
    return out
