"""A sharded embedding collection that executes a :class:`~recnotebooks.plan.Plan`.

:class:`ShardedEmbeddingBagCollection` is TorchRec's ``ShardedEmbeddingBagCollection`` in
miniature. On each rank it holds plain :class:`~recnotebooks.nn.EmbeddingBagCollection` objects
with this rank's shards (one collection per kind of shard and width, see below) and runs the
table-wise (TW), row-wise (RW), column-wise (CW) and data-parallel (DP) schemes of TorchRec's
sharders:

1. **Input distribution.** Each rank holds the ids of its own samples. For every
   model-parallel shard it sends the shard's owner that shard's ids (row-wise: only the ids in
   the shard's row range, minus its ``row_offset``): one all-to-all of the bag lengths (fixed
   sizes), one of the ids (sizes from the lengths). Data-parallel tables need none.
2. **Local lookup.** The owner pools the ids of **all** ranks' samples, in rank order (the
   local batch is ``world_size * batch_size`` samples), in one fused lookup per collection.
3. **Output distribution.** One all-to-all sends each sample's pooled vectors back to the
   sample's rank (the autograd-aware :func:`~recnotebooks.distributed.comm.all_to_all`, so backward
   carries the gradients to the owners' pending gradients). Column-wise pieces are
   concatenated in column order; row-wise pieces are partial sums and are added (an
   all-to-all followed by a sum, which moves the same bytes as TorchRec's reduce-scatter).

Every rank uses the same local ``batch_size`` (the splits are derived from it, not sent), unless
the caller passes every rank's ``batch_sizes`` to :meth:`~ShardedEmbeddingBagCollection.start`
(uneven splits, as the events of a rank's histories: each rank knows every rank's count from
the global batch, so they are still not sent).

**Initialisation.** Every rank draws the single-process
``EmbeddingBagCollection(tables, embedding_dim, seed=seed)``'s initial weight chunk by chunk
(:func:`~recnotebooks.nn.embedding.initial_rows`) and copies its shards' blocks out of each chunk,
so the union of the shards equals the single-process weights exactly, without ever holding the
whole weight (each rank still draws every row once: start-up time, not memory).

**Training.** Each local collection records its gradient as usual; the sparse optimizers of
:mod:`recnotebooks.nn.optim` (:class:`~recnotebooks.nn.optim.SparseSGD`,
:class:`~recnotebooks.nn.optim.RowWiseAdagrad`, :class:`~recnotebooks.nn.optim.ExactAdagrad`) update
the local shards. Data-parallel
replicas need their gradient summed over ranks first: :meth:`sync_data_parallel_gradients`
all-reduces the replica's **dense** gradient (as TorchRec's DP sharding does, logged as the
``all_reduce`` component) and records it back as the replica's pending gradient (every row,
each its own bag), so any sparse optimizer then applies the summed gradient; every replica
stays identical. :class:`ShardedSparseOptimizer` does both in one ``step()``. With
:class:`~recnotebooks.nn.optim.RowWiseAdagrad`, a column-wise shard keeps its own accumulator,
the mean of the squared gradient over **its** columns (as TorchRec's column-wise sharding
does), so column-wise tables then differ from the single-process collection; SGD and exact
Adagrad (an accumulator per element: a column-wise shard holds its columns' own) are exact.

**Placements.** Each local shard is built by its :attr:`~recnotebooks.plan.TableShard.placement`
through :func:`recnotebooks.cache.embedding_collection`: ``"hbm"`` shards share plain collections
(every row in device memory); a ``"cache"`` shard gets a collection of its own whose rows live in
host memory behind a device cache of ``cache_rows`` slots run by ``cache_policy`` (``cache_ways``
per set for ``"setassoc"``; a ``"static"`` cache pins the hottest rows of a ``profile`` of global
batches). The cache is exact, so the plan trains as if every row were in device memory, and
:meth:`ShardedEmbeddingBagCollection.cache_stats` says what each cache did (measured).
``"host"`` (rows read over PCIe in place, as UVM does) and ``"remote"`` (a parameter server) are
modeled by :mod:`recnotebooks.perf` but not executed: :func:`check_placements` refuses them
before anything runs, as it refuses a cache the engine cannot size (a typed-in hit rate without
``cache_rows``) or a cached data-parallel replica (its gradient is all-reduced densely).

**Pooling.** ``"sum"`` and ``"mean"`` (row-wise: the summed partial sums divided by the bag's
full size on the sample's rank). Per-id weights (``batch.weights``) are not supported yet.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..cache import CacheConfig, CachedEmbeddingBagCollection, embedding_collection
from ..cache.config import hot_rows_from_counts
from ..checks import check_choice, check_float, check_int, check_int_list, check_type
from ..config import POOLINGS, SPARSE_OPTIMIZERS, DLRMConfig, TableConfig
from ..kernels.rows import first_out_of_range
from ..nn.embedding import EmbeddingBagCollection, initial_rows
from ..nn.optim import ExactAdagrad, RowWiseAdagrad, SparseOptimizer, make_sparse_optimizer
from ..plan import MAX_RANKS, PLACEMENTS, Plan, ShardGeometry, TableShard
from ..sparse import JaggedBatch
from .comm import CommHandle, CommLog, all_reduce, all_to_all

__all__ = [
    "EXECUTED_PLACEMENTS",
    "LocalShard",
    "ShardedEmbeddingBagCollection",
    "ShardedLookup",
    "ShardedSparseOptimizer",
    "check_collection",
    "check_placements",
    "plan_config",
    "shard_cache_config",
]

#: Placements the engine executes on this device (``"host"`` and ``"remote"`` are modeled only).
EXECUTED_PLACEMENTS = ("hbm", "cache")
#: Why the other placements are not executed, in words (the refusal says it).
_NOT_EXECUTED = {
    "host": "rows read in place from host memory over PCIe (UVM) need unified memory, which the "
    "engine does not use; the cost model prices it (recnotebooks.perf)",
    "remote": "rows on parameter servers across the network are modeled only (recnotebooks.perf)",
}


def shard_cache_config(shard: TableShard, rows: int) -> CacheConfig:
    """The :class:`~recnotebooks.cache.CacheConfig` of a ``"cache"`` shard holding ``rows`` rows:
    ``cache_rows`` slots (at most ``rows``; a set-associative cache rounds down to whole sets of
    ``cache_ways``) run by ``cache_policy``. ``ValueError`` naming the table when the shard cannot
    be run (see :func:`check_placements`)."""
    what = f"table {shard.table!r} on rank {shard.rank} (placement 'cache')"
    if shard.cache_rows is None:
        raise ValueError(
            f"{what}: the engine needs cache_rows (device slots) to run a cache, got only a typed-in "
            f"cache_hit_rate={shard.cache_hit_rate!r}; give cache_rows (and cache_policy), or placement 'hbm'"
        )
    slots = min(shard.cache_rows, rows)
    ways = min(shard.cache_ways, rows)
    if shard.cache_policy == "setassoc":
        slots = slots // ways * ways
    if slots < 1:
        raise ValueError(
            f"{what}: cache_rows={shard.cache_rows} leaves no slot to run (at least 1"
            + (
                f", and whole sets of cache_ways={ways} for 'setassoc'"
                if shard.cache_policy == "setassoc"
                else ""
            )
            + ")"
        )
    return CacheConfig(shard.cache_policy, capacity=slots, ways=ways)


def check_placements(plan: Plan, geometry: dict[int, ShardGeometry] | None = None) -> None:
    """Refuse, before any process starts, a plan with a placement the engine cannot run here:
    ``ValueError`` naming the table, its placement and what is allowed (:data:`EXECUTED_PLACEMENTS`;
    a ``"cache"`` shard needs ``cache_rows`` and cannot be a data-parallel replica). With the
    plan's ``geometry`` the caches are also sized against their shards' rows."""
    check_type("plan", plan, Plan, "a Plan")
    for i, s in enumerate(plan.shards):
        if s.placement not in EXECUTED_PLACEMENTS:
            raise ValueError(
                f"table {s.table!r} on rank {s.rank} has placement {s.placement!r}, which the sharded "
                f"engine cannot execute on this device ({_NOT_EXECUTED.get(s.placement, 'unknown')}); "
                f"allowed: {list(EXECUTED_PLACEMENTS)} of {list(PLACEMENTS)}"
            )
        if s.placement != "cache":
            continue
        if s.sharding == "data_parallel":
            raise ValueError(
                f"table {s.table!r} is data_parallel with placement 'cache': a replica's gradient is "
                "all-reduced for every row, so the engine keeps replicas in 'hbm'; allowed for a cached "
                "table: table_wise, row_wise, column_wise"
            )
        shard_cache_config(s, geometry[i].row_count if geometry is not None else s.cache_rows or 1)


@dataclass(frozen=True)
class LocalShard:
    """One shard held on this rank: plan index, table, sharding, exact block, and where its rows
    live locally (``collection`` index in :attr:`ShardedEmbeddingBagCollection.collections`,
    ``slot``: its table index inside that collection)."""

    index: int
    table: str
    table_index: int
    sharding: str
    geometry: ShardGeometry
    collection: int
    slot: int


def plan_config(tables: Sequence[TableConfig], dim: int, pooling: str = "sum") -> DLRMConfig:
    """A minimal config carrying the tables (what :meth:`Plan.validate` reads)."""
    return DLRMConfig(
        num_dense=1, tables=tuple(tables), embedding_dim=dim, bottom_mlp=(dim,), top_mlp=(1,), pooling=pooling
    )


def _blocks(t: torch.Tensor, sizes: list[int], picks: list[int]) -> torch.Tensor:
    """Blocks ``picks`` of ``t`` cut into consecutive blocks of ``sizes``, concatenated in that order:
    a view (one ``narrow``) when they follow one another, else one ``split`` and one ``cat`` (a
    fixed number of operators however many blocks: the step's operator count stays linear in its
    shards, as the cost model counts it)."""
    if not picks:
        return t.narrow(0, 0, 0)
    if picks == list(range(picks[0], picks[0] + len(picks))):
        return t.narrow(0, sum(sizes[: picks[0]]), sum(sizes[p] for p in picks))
    parts = t.split(sizes)
    return torch.cat([parts[p] for p in picks])


def _hot_rows(
    shard: TableShard, g: ShardGeometry, cache: CacheConfig, profile: Sequence[JaggedBatch] | None
) -> Any:
    """A static cache's pinned rows (shard-local): the most frequent of its rows in ``profile``."""
    if profile is None:
        raise ValueError(
            f"table {shard.table!r} on rank {shard.rank}: cache_policy 'static' pins the hottest rows of a "
            "profile; pass profile=<global batches> (or use cache_policy 'lru', 'lfu' or 'setassoc')"
        )
    counts = torch.zeros(g.row_count, dtype=torch.int64)
    for batch in profile:
        check_type("profile", batch, JaggedBatch, "a sequence of JaggedBatch")
        ids = batch[shard.table][0].to(torch.int64).cpu()
        ids = ids[(ids >= g.row_offset) & (ids < g.row_end)] - g.row_offset
        counts += torch.bincount(ids, minlength=g.row_count)
    return hot_rows_from_counts(counts.numpy(), int(cache.capacity))  # type: ignore[arg-type]


def check_collection(
    tables: Sequence[TableConfig],
    embedding_dim: int,
    rank: int,
    world_size: int,
    pooling: str,
    seed: int,
    log: CommLog | None,
) -> tuple[tuple[TableConfig, ...], int, int, int, str, int]:
    """The arguments every sharded collection takes, checked (``ValueError``/``TypeError`` naming
    the parameter): ``(tables, embedding_dim, rank, world_size, pooling, seed)``."""
    world = check_int("world_size", world_size, lo=1, hi=MAX_RANKS)
    rank = check_int("rank", rank, lo=0, hi=world - 1)
    pooling = check_choice("pooling", pooling, POOLINGS)
    seed = check_int("seed", seed)
    if log is not None:
        check_type("log", log, CommLog, "a CommLog or None")
    tables = tuple(tables)
    if not tables or any(not isinstance(t, TableConfig) for t in tables):
        raise TypeError("tables must be a non-empty sequence of TableConfig")
    return tables, check_int("embedding_dim", embedding_dim, lo=1), rank, world, pooling, seed


@torch.no_grad()
def _copy_initial_blocks(
    tables: Sequence[TableConfig], dim: int, seed: int, blocks: list[tuple[torch.Tensor, int, slice]]
) -> None:
    """Copy the shards' ``blocks`` (their rows, first full-weight row, columns) out of the
    single-process collection's initial weight, chunk by chunk as it is drawn (the whole weight
    is never held)."""
    for lo, u in initial_rows([t.num_rows for t in tables], dim, seed):
        hi = lo + u.shape[0]
        for w, start, cols in blocks:
            a, z = max(lo, start), min(hi, start + w.shape[0])
            if a < z:
                w[a - start : z - start].copy_(u[a - lo : z - lo, cols])


def _arrived(lengths_in: torch.Tensor, sizes: list[int], mine: int) -> tuple[list[list[int]], torch.Tensor]:
    """What the input all-to-all's bag lengths say (``lengths_in``: source rank ``j``'s ``(mine,
    sizes[j])`` lengths of this rank's ``mine`` shards, in rank order): ``seg[j][k]``, the ids of
    shard ``k`` from rank ``j`` (on the host: one sync), and the lengths key-major (shard, then the
    samples of every rank in rank order), as the local lookup takes them."""
    world = len(sizes)
    if not mine:
        return [[] for _ in range(world)], lengths_in
    if sizes == [sizes[0]] * world:  # equal batches: views
        grid = lengths_in.view(world, mine, sizes[0])
        return grid.sum(2).tolist(), grid.transpose(0, 1).reshape(-1)
    by_source = [
        x.view(mine, n) for x, n in zip(lengths_in.split([n * mine for n in sizes]), sizes, strict=True)
    ]
    return torch.stack([x.sum(1) for x in by_source]).tolist(), torch.cat(by_source, 1).reshape(-1)


class ShardedEmbeddingBagCollection(nn.Module):
    """This rank's part of an embedding collection sharded by ``plan`` (see the module docstring).

    Args:
        tables: the table configs (the single-process collection's tables, in its order).
        embedding_dim: row width of every table.
        plan: the sharding plan; validated against the tables here (``ValueError`` before any
            communication for a plan that cannot be executed, or whose world is not ``world_size``).
        rank, world_size: this process and the number of ranks (the process group's).
        pooling: ``"sum"`` or ``"mean"``.
        seed: the single-process collection's seed (the shards are copied out of it).
        log: where the collectives record calls and bytes (``None``: not recorded).
        group: the ``torch.distributed`` process group (``None``: the default one).
        profile: global batches (``JaggedBatch``, every table) whose most frequent rows a
            ``"static"`` cache pins (FAE's profile of a data sample); needed only by those.

    ``forward(batch)`` takes this rank's samples (keys: every table, in ``tables`` order) and
    returns pooled embeddings ``(batch.batch_size, num_tables, embedding_dim)``.
    """

    def __init__(
        self,
        tables: Sequence[TableConfig],
        embedding_dim: int,
        plan: Plan,
        rank: int,
        world_size: int,
        pooling: str = "sum",
        seed: int = 0,
        log: CommLog | None = None,
        group: Any = None,
        profile: Sequence[JaggedBatch] | None = None,
    ) -> None:
        super().__init__()
        tables, dim, rank, world, pooling, seed = check_collection(
            tables, embedding_dim, rank, world_size, pooling, seed, log
        )
        check_type("plan", plan, Plan, "a Plan")
        if plan.world_size != world:
            raise ValueError(f"plan.world_size must equal world_size={world}, got {plan.world_size}")
        geometry = plan.geometry(plan_config(tables, dim, pooling))  # validates the plan
        check_placements(plan, geometry)
        self.tables, self.keys, self.embedding_dim = tables, tuple(t.name for t in tables), dim
        self.plan, self.rank, self.world_size, self.pooling = plan, rank, world, pooling
        self.log, self.group = log, group
        #: per table: its sharding
        self.shardings = tuple({s.table: s.sharding for s in plan.shards}[t.name] for t in tables)
        # model-parallel shards of every rank, in plan order: what each rank sends and receives
        self._mp_by_rank: list[list[int]] = [[] for _ in range(world)]
        for i, s in enumerate(plan.shards):
            if s.sharding != "data_parallel":
                self._mp_by_rank[s.rank].append(i)
        self._geometry = geometry
        collections, local, blocks = self._local_collections(seed, profile)
        _copy_initial_blocks(tables, dim, seed, blocks)
        for ebc in collections:
            ebc.rows.reload()  # a cache's host tables now hold the blocks: its slots load from them
        #: this rank's local collections (optimizers update these)
        self.collections = nn.ModuleList(collections)
        #: this rank's shards, in plan order
        self.local_shards = tuple(sorted(local, key=lambda s: s.index))
        # the collection of the data-parallel replicas (whole tables of one width: one collection)
        self._dp = next((s.collection for s in local if s.sharding == "data_parallel"), None)
        self._num_rows = torch.tensor([t.num_rows for t in tables], dtype=torch.int64)

    def _collection_groups(self) -> dict[tuple[bool, int, str, int], list[int]]:
        """This rank's shards grouped into collections by (data parallel?, width, local pooling, and
        for a cached shard its own index: a cache of its own); row-wise partial sums are pooled by
        sum (a mean divides by the full bag size later)."""
        groups: dict[tuple[bool, int, str, int], list[int]] = {}
        for i, s in enumerate(self.plan.shards):
            if s.rank == self.rank:
                pool = "sum" if s.sharding == "row_wise" else self.pooling
                key = (
                    s.sharding == "data_parallel",
                    self._geometry[i].col_count,
                    pool,
                    i if s.placement == "cache" else -1,
                )
                groups.setdefault(key, []).append(i)
        return groups

    def _local_collections(
        self, seed: int, profile: Sequence[JaggedBatch] | None
    ) -> tuple[list[EmbeddingBagCollection], list[LocalShard], list[tuple[torch.Tensor, int, slice]]]:
        """This rank's collections (:func:`~recnotebooks.cache.embedding_collection` of each group of
        shards: a ``"cache"`` shard's rows on the host behind a device cache), its shards, and where
        each shard's block of the single-process weight goes: (its rows here, first full-weight row,
        columns)."""
        plan, geometry = self.plan, self._geometry
        index = {t.name: k for k, t in enumerate(self.tables)}
        first = [0, *itertools.accumulate(t.num_rows for t in self.tables)]
        collections, local, blocks = [], [], []
        for c, ((_, width, pool, cached), idx) in enumerate(self._collection_groups().items()):
            names = [f"{plan.shards[i].table}.shard{i}" for i in idx]
            local_tables = [TableConfig(n, geometry[i].row_count) for n, i in zip(names, idx, strict=True)]
            cache, hot = None, None
            if cached >= 0:  # placement "cache": the tables on the host behind a device cache
                cache = shard_cache_config(plan.shards[cached], geometry[cached].row_count)
                if cache.policy == "static":
                    hot = {names[0]: _hot_rows(plan.shards[cached], geometry[cached], cache, profile)}
            ebc = embedding_collection(local_tables, width, cache, pooling=pool, seed=seed, hot_rows=hot)
            for slot, i in enumerate(idx):
                s, g = plan.shards[i], geometry[i]
                blocks.append(
                    (ebc.table_weight(names[slot]), first[index[s.table]] + g.row_offset, g.col_slice)
                )
                local.append(LocalShard(i, s.table, index[s.table], s.sharding, g, c, slot))
            collections.append(ebc)
        return collections, local, blocks

    # ----- forward --------------------------------------------------------------------
    def _batch_sizes(self, batch: JaggedBatch, batch_sizes: Sequence[int] | None) -> list[int]:
        """Every rank's local batch size (``None``: this rank's, on every rank), checked: one per
        rank, this rank's equal to ``batch.batch_size``."""
        if batch_sizes is None:
            return [batch.batch_size] * self.world_size
        w = self.world_size
        sizes = check_int_list("batch_sizes", batch_sizes, lo=0, min_len=w, max_len=w)
        if sizes[self.rank] != batch.batch_size:
            raise ValueError(
                f"batch_sizes[{self.rank}] must be this rank's batch.batch_size={batch.batch_size}, "
                f"got {sizes[self.rank]} (batch_sizes={sizes})"
            )
        return sizes

    def _check_batch(self, batch: JaggedBatch) -> None:
        check_type("batch", batch, JaggedBatch, "a JaggedBatch")
        if batch.keys != self.keys:
            raise ValueError(f"batch.keys must equal the tables {list(self.keys)}, got {list(batch.keys)}")
        if batch.weights is not None:
            raise ValueError(
                "batch.weights must be None: weighted ids are not supported by the sharded collection yet"
            )
        if not batch.values.numel():
            return
        # one read-only pass over the ids on the CPU (one vectorised check elsewhere: one host
        # sync); the per-table loop only to name a bad table
        per_key = batch.lengths.view(len(self.tables), batch.batch_size).sum(1).to(torch.int64)
        starts = torch.zeros(len(self.tables) + 1, dtype=torch.int64, device=per_key.device)
        torch.cumsum(per_key, 0, out=starts[1:])
        bad = first_out_of_range(batch.values, starts, self._num_rows)
        if bad is None:
            limit = self._num_rows.to(batch.values.device)
            limit = torch.repeat_interleave(limit, per_key.to(limit.device), output_size=batch.values.numel())
            bad = 0 if bool(((batch.values < 0) | (batch.values >= limit)).any()) else -1
        if bad >= 0:
            for t in self.tables:
                ids, _ = batch[t.name]
                if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= t.num_rows):
                    raise ValueError(
                        f"ids of table {t.name!r} must be in 0..{t.num_rows - 1}, "
                        f"got ids {int(ids.min())}..{int(ids.max())}"
                    )

    def _shard_input(self, batch: JaggedBatch, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, lengths) of plan shard ``i`` for this rank's samples (row-wise: remapped)."""
        s, g = self.plan.shards[i], self._geometry[i]
        ids, lengths = batch[s.table]
        ids, lengths = ids.to(torch.int64), lengths.to(torch.int64)
        if s.sharding != "row_wise":
            return ids, lengths
        sample = torch.repeat_interleave(
            torch.arange(batch.batch_size, device=ids.device), lengths, output_size=ids.numel()
        )
        keep = (ids >= g.row_offset) & (ids < g.row_end)
        return ids[keep] - g.row_offset, torch.bincount(sample[keep], minlength=batch.batch_size)

    def forward(self, batch: JaggedBatch, batch_sizes: Sequence[int] | None = None) -> torch.Tensor:
        """Pooled embeddings ``(batch.batch_size, num_tables, embedding_dim)`` of this rank's samples
        (:meth:`start` then :meth:`ShardedLookup.wait`)."""
        return self.start(batch, batch_sizes).wait()

    def start(self, batch: JaggedBatch, batch_sizes: Sequence[int] | None = None) -> ShardedLookup:
        """Begin the forward of ``batch``: the input distribution and the local lookups run now and
        the output all-to-all is issued asynchronously; the returned handle's
        :meth:`~ShardedLookup.wait` gives what :meth:`forward` returns (so the caller may compute,
        e.g. the bottom MLP, while the pooled vectors travel). Every rank must call ``wait``.

        ``batch_sizes``: every rank's local batch size, the same list on every rank, when they
        differ (``None``: all equal to this rank's)."""
        self._check_batch(batch)
        sizes = self._batch_sizes(batch, batch_sizes)
        b = batch.batch_size
        pieces: list[list[tuple[int, torch.Tensor]]] = [[] for _ in self.tables]  # (shard, pooled)
        handle = None
        if any(self._mp_by_rank):  # model-parallel tables (a plan all data-parallel moves no ids)
            handle = self._model_parallel(batch, sizes)
        # data-parallel tables: local replica, local samples
        if self._dp is not None:
            dp = [s for s in self.local_shards if s.collection == self._dp]
            ids = [self._shard_input(batch, s.index) for s in dp]
            out = self._lookup(
                [s.index for s in dp], torch.cat([x[0] for x in ids]), torch.cat([x[1] for x in ids]), b
            )
            for s in dp:
                pieces[s.table_index].append((s.index, out[s.index]))
        return ShardedLookup(self, batch, pieces, handle)

    def _finish(
        self, batch: JaggedBatch, pieces: list[list[tuple[int, torch.Tensor]]], handle: CommHandle | None
    ) -> torch.Tensor:
        """Wait for the output all-to-all, then assemble every table's pooled vectors."""
        if handle is not None:
            back = handle.wait()
            b = batch.batch_size
            received = [i for j in range(self.world_size) for i in self._mp_by_rank[j]]
            # one split (one backward node: a cat), not a slice per piece (a zero-filled gradient each)
            parts = back.split([b * self._geometry[i].col_count for i in received])
            for i, part in zip(received, parts, strict=True):
                table = self.keys.index(self.plan.shards[i].table)
                pieces[table].append((i, part.view(b, self._geometry[i].col_count)))
        return torch.stack([self._assemble(k, pieces[k], batch) for k in range(len(self.tables))], 1)

    def _model_parallel(self, batch: JaggedBatch, sizes: list[int]) -> CommHandle:
        """Input distribution and lookups of the model-parallel shards (``sizes``: every rank's
        local batch size); the output distribution's all-to-all, issued asynchronously."""
        b, world, rank = batch.batch_size, self.world_size, self.rank
        even = sizes == [b] * world
        dev = batch.values.device
        empty = torch.zeros(0, dtype=torch.int64, device=dev)
        # 1. input distribution: for each rank j, the lengths then ids of j's model-parallel shards
        sends = [[self._shard_input(batch, i) for i in self._mp_by_rank[j]] for j in range(world)]
        lengths_out = torch.cat([x[1] for j in range(world) for x in sends[j]] + [empty])
        mine = len(self._mp_by_rank[rank])
        len_in = [b * len(self._mp_by_rank[j]) for j in range(world)]
        lengths_handle = all_to_all(
            lengths_out, len_in, [n * mine for n in sizes], log=self.log, group=self.group, async_op=True
        )  # the lengths travel while the ids are gathered
        assert isinstance(lengths_handle, CommHandle)
        ids_out = torch.cat([x[0] for j in range(world) for x in sends[j]] + [empty])
        id_in = [sum(int(x[0].numel()) for x in sends[j]) for j in range(world)]
        lengths_in = lengths_handle.wait()
        # ids of each (source rank, local shard), on the host: the ids' receive splits, and where
        # each shard's ids lie in what arrives (one host sync)
        seg, lengths_local = _arrived(lengths_in, sizes, mine)
        ids_in = all_to_all(ids_out, id_in, [sum(row) for row in seg], log=self.log, group=self.group)
        # 2. local lookups, samples of all ranks in rank order (key-major: shard, then source rank)
        pooled: dict[int, torch.Tensor] = {}  # plan shard index -> (sum(sizes), width)
        if mine:
            pooled.update(self._lookup(self._mp_by_rank[rank], ids_in, lengths_local, sum(sizes), seg))
        # 3. output distribution: rows of rank j's samples go back to rank j, flattened
        owned = self._mp_by_rank[rank]
        by_rank = {  # one node per shard
            i: pooled[i].reshape(world, -1).unbind(0)
            if even
            else [x.reshape(-1) for x in pooled[i].split(sizes)]
            for i in owned
        }
        chunks = [by_rank[i][j] for j in range(world) for i in owned]
        send = torch.cat(chunks) if chunks else torch.zeros(0, device=dev)
        if torch.is_grad_enabled() and not send.requires_grad:
            send = send.detach().requires_grad_(True)  # every rank joins the backward all-to-all
        widths = [sum(self._geometry[i].col_count for i in self._mp_by_rank[j]) for j in range(world)]
        handle = all_to_all(
            send,
            [n * widths[rank] for n in sizes],
            [b * w for w in widths],
            log=self.log,
            group=self.group,
            async_op=True,
        )
        assert isinstance(handle, CommHandle)
        return handle

    def _lookup(
        self,
        shards: list[int],
        ids: torch.Tensor,
        lengths: torch.Tensor,
        size: int,
        seg: list[list[int]] | None = None,
    ) -> dict[int, torch.Tensor]:
        """Pool plan ``shards`` (all on this rank, possibly in several collections) over ``size``
        samples: ``{shard: (size, width)}``. ``lengths`` are key-major (shard, then sample).
        ``ids`` are key-major too, or, with ``seg`` (``seg[j][k]``: the ids of shard ``k`` from
        source rank ``j``, on the host), as the input all-to-all delivers them: source rank by
        source rank, each rank's ids shard by shard; each collection's ids are then gathered in
        its order with one copy."""
        where = {s.index: s for s in self.local_shards}
        n = len(shards)
        counts = seg if seg is not None else [lengths.view(n, size).sum(1).tolist()]
        sizes = [int(c) for row in counts for c in row]  # block j * n + k: shard k's ids from source j
        out: dict[int, torch.Tensor] = {}
        for c, ebc in enumerate(self.collections):
            mine = [(k, i) for k, i in enumerate(shards) if where[i].collection == c]
            if not mine:
                continue
            slots = sorted(mine, key=lambda x: where[x[1]].slot)
            if [where[i].slot for _, i in slots] != list(range(ebc.num_tables)):
                raise RuntimeError("internal error: a collection's shards are not all in one lookup")
            vals = _blocks(ids, sizes, [j * n + k for k, _ in slots for j in range(len(counts))])
            lens = _blocks(lengths, [size] * n, [k for k, _ in slots])
            pooled = ebc(JaggedBatch(ebc.keys, vals, lens, size))
            # (slot, sample, width) memory order: unbind is one backward node (a stack), where a
            # select per shard would zero-fill a full-size gradient each
            out.update(zip([i for _, i in slots], pooled.transpose(0, 1).unbind(0), strict=True))
        return out

    def _assemble(self, k: int, pieces: list[tuple[int, torch.Tensor]], batch: JaggedBatch) -> torch.Tensor:
        """Table ``k``'s pooled ``(batch_size, dim)`` from its shards' pieces."""
        kind = self.shardings[k]
        if kind == "column_wise":
            return torch.cat([p for _, p in sorted(pieces, key=lambda x: self._geometry[x[0]].col_offset)], 1)
        if kind == "row_wise":
            total = torch.stack([p for _, p in pieces]).sum(0)
            if self.pooling == "mean":
                _, lengths = batch[self.keys[k]]
                total = total / lengths.clamp(min=1).to(total.dtype).unsqueeze(1)
            return total
        return pieces[0][1]

    # ----- training -------------------------------------------------------------------
    @property
    def data_parallel_collection(self) -> EmbeddingBagCollection | None:
        """The local replica of the data-parallel tables (``None`` when there are none)."""
        return None if self._dp is None else self.collections[self._dp]  # type: ignore[return-value]

    def sync_gradients(self) -> None:
        """What an optimizer step needs synced first: :meth:`sync_data_parallel_gradients`."""
        self.sync_data_parallel_gradients()

    def sync_data_parallel_gradients(self) -> None:
        """Sum the data-parallel replica's gradient over ranks (a dense all-reduce) and record
        the sum as its pending gradient. Every rank must call it (after backward, before the
        optimizer step); a no-op without data-parallel tables."""
        ebc = self.data_parallel_collection
        if ebc is None:
            return
        with torch.no_grad():
            grad = all_reduce(ebc.dense_weight_gradient(), log=self.log, group=self.group)
        ebc.record_dense_gradient(grad)  # every row, with its summed gradient

    def cache_stats(self) -> list[dict[str, Any]]:
        """What each cache of this rank did (``"cache"`` shards only), one row per shard: its
        table, plan index, policy and slots, hits, misses, hit rate (distinct rows, and per id),
        evictions, write-backs and the bytes moved host -> device and back (rows and their
        optimizer state), ``source="measured"``."""
        out = []
        for s in self.local_shards:
            ebc = self.collections[s.collection]
            if isinstance(ebc, CachedEmbeddingBagCollection):
                t = ebc.stats.rows()[0]
                keep = ("policy", "requested", "unique", "hits", "misses", "evictions", "writebacks",
                        "bytes_h2d", "bytes_d2h", "hit_rate", "lookup_hit_rate")  # fmt: skip
                out.append(
                    {
                        "rank": self.rank,
                        "table": s.table,
                        "shard": s.index,
                        "slots": ebc.capacity,
                        **{k: t[k] for k in keep},
                        "source": "measured",
                    }
                )
        return out

    def shard_weights(self) -> list[tuple[LocalShard, torch.Tensor]]:
        """This rank's shards and their weight blocks (views), in plan order."""
        return [
            (s, self.collections[s.collection].table_weight(self.collections[s.collection].keys[s.slot]))
            for s in self.local_shards
        ]


class ShardedLookup:
    """A started :meth:`ShardedEmbeddingBagCollection.start`: :meth:`wait` returns the pooled
    ``(batch_size, num_tables, embedding_dim)`` tensor (the same tensor on later calls)."""

    def __init__(
        self,
        model: ShardedEmbeddingBagCollection,
        batch: JaggedBatch,
        pieces: list[list[tuple[int, torch.Tensor]]],
        handle: CommHandle | None,
    ) -> None:
        self._args: tuple[Any, ...] | None = (model, batch, pieces, handle)
        self._result: torch.Tensor | None = None

    def wait(self) -> torch.Tensor:
        """Block until the pooled vectors of this rank's samples have arrived; return them."""
        if self._result is None:
            assert self._args is not None
            model, batch, pieces, handle = self._args
            self._result, self._args = model._finish(batch, pieces, handle), None
        return self._result


class ShardedSparseOptimizer:
    """A sparse optimizer (a name of :data:`~recnotebooks.config.SPARSE_OPTIMIZERS`: ``"sgd"``,
    ``"rowwise_adagrad"``, ``"adagrad"``) on each local collection; :meth:`step` first syncs the
    gradients that need it (the data-parallel replicas' here; a
    collective: call it on every rank). Subclasses name the collection they take (``model_type``)."""

    model_type: type = nn.Module  # set below, once the class exists

    def __init__(self, model: Any, name: str, lr: float) -> None:
        check_type("model", model, self.model_type, f"a {self.model_type.__name__}")
        check_choice("name", name, SPARSE_OPTIMIZERS)
        check_float("lr", lr, lo=0.0, lo_open=True)  # also on a rank that holds no shard
        self.model = model
        self.optimizers: list[SparseOptimizer] = [
            make_sparse_optimizer(name, c, lr) for c in model.collections
        ]

    def step(self, count_rows: bool = True) -> int | None:
        """Apply the step's gradients; the rows updated on this rank (None with
        ``count_rows=False``, see :meth:`recnotebooks.nn.SparseOptimizer.step`)."""
        self.model.sync_gradients()
        rows = [o.step(count_rows) for o in self.optimizers]
        return sum(r for r in rows if r is not None) if count_rows else None

    def shard_momentum(self) -> list[tuple[LocalShard, torch.Tensor]]:
        """The Adagrads' accumulators of each local shard's rows (row-wise: one per row; exact: a
        row of them per row), in plan order (a cached shard's from the host copy its rows carry,
        after a flush); ``[]`` for SGD, which has none."""
        out = []
        for s in self.model.local_shards:
            opt, ebc = self.optimizers[s.collection], self.model.collections[s.collection]
            if not isinstance(opt, RowWiseAdagrad | ExactAdagrad):
                return []
            lo, hi = int(ebc.row_offsets[s.slot]), int(ebc.row_offsets[s.slot + 1])
            state = (
                ebc.full_row_state("momentum")
                if isinstance(ebc, CachedEmbeddingBagCollection)
                else opt.momentum
            )
            out.append((s, state[lo:hi].detach().clone()))
        return out

    def zero_grad(self) -> None:
        """Drop the recorded gradients."""
        for o in self.optimizers:
            o.zero_grad()


ShardedSparseOptimizer.model_type = ShardedEmbeddingBagCollection
