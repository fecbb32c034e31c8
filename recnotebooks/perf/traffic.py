"""The bytes of every collective of a sharded step, per rank: what the cost model charges.

:func:`collective_bytes` is the one place the model says how many bytes each rank sends to and
receives from **other** ranks in one training step, per collective, for a
:class:`~recnotebooks.plan.Plan` (every number **modeled**). It counts what our own sharded
step (:class:`recnotebooks.distributed.ShardedEmbeddingBagCollection` and the 2D collection of
:mod:`recnotebooks.distributed.twod`) sends, in the units its :class:`~recnotebooks.distributed.CommLog`
records, so ``tests/test_dist_bytes.py`` can check model and measurement agree to the byte.
With ``b`` samples per rank, ``mp[j]`` the model-parallel shards of rank ``j`` and ``w[j]``
their summed widths (columns), rank ``r`` of ``M`` ranks:

================================  ===========================================================
collective                        bytes sent (received: the same with the roles swapped)
================================  ===========================================================
``lengths_all_to_all``            ``sum_{j != r} b |mp[j]| * LENGTH_BYTES`` (one length a bag)
``ids_all_to_all``                ``sum_{j != r}`` ids of my samples for ``mp[j]`` ``* INDEX_BYTES``
``pooled_all_to_all`` (forward)   ``(M - 1) b w[r] * E``: pooled rows (row-wise: partial sums)
``gradient_all_to_all``           their gradients back: sent ``b (sum_j w[j] - w[r]) * E``
``data_parallel_all_reduce``      the replicated tables' dense gradient, ``n`` elements in
                                  ``M`` chunks (``c_r = n // M``, one more for the first
                                  ``n % M`` ranks): ``(n - c_r) + (M - 1) c_r`` elements
``replica_all_reduce`` (2D)       every shard's dense gradient over the ``G`` replicas of
                                  its rank (same chunk formula over ``G``)
``dense_all_reduce``              DDP of the MLPs: the ring's ``2 (W - 1) / W`` of the bytes,
                                  in :func:`ddp_buckets` calls
================================  ===========================================================

Every row is one call, except ``dense_all_reduce``: DistributedDataParallel all-reduces the MLPs'
gradients in buckets, one call each (:func:`ddp_buckets`).

``E`` is the bytes of ``dtype`` (the implementation pools and sends fp32). The ids a rank
sends depend on the data: by default the **expected** count, local batch x the table's pooling
factor x the shard's row fraction; ``id_counts`` takes the actual counts instead (exact).
Lengths and ids are int64, as our implementation sends them; TorchRec's input distribution
sends the KeyedJaggedTensor's own dtypes (int32 lengths and offsets are common there), so its
lengths would cost half. Widths and the 2D shards' rows are exact: the plan's cumulative
rounding (:func:`recnotebooks.plan.split_counts`).

**2D.** ``world`` may be ``G`` times ``plan.world_size``: the plan then shards the tables
inside each group of ``M = plan.world_size`` consecutive ranks, and the groups are replicas
(rank ``g M + m`` is rank ``m`` of group ``g``). Every all-to-all stays inside a group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from recnotebooks.checks import check_choice, check_float, check_int, check_type, show
from recnotebooks.config import DLRMConfig
from recnotebooks.perf.hardware import DTYPE_BYTES
from recnotebooks.plan import Plan, split_counts

__all__ = [
    "COLLECTIVE_CALLS",
    "DDP_BUCKET_BYTES",
    "DDP_FIRST_BUCKET_BYTES",
    "INDEX_BYTES",
    "LENGTH_BYTES",
    "all_reduce_calls",
    "collective_bytes",
    "ddp_buckets",
    "volumes",
]

#: Bytes of one id and of one bag length as our sharded step sends them (int64).
INDEX_BYTES = 8
LENGTH_BYTES = 8
#: DistributedDataParallel's gradient buckets: at most ``bucket_cap_mb`` = 25 MiB each, the first
#: (the last layers' gradients, which backward produces first) 1 MiB
#: (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``); see the ``bucket_cap_mb`` argument of
#: https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html
DDP_FIRST_BUCKET_BYTES, DDP_BUCKET_BYTES = 1 << 20, 25 << 20
#: The collective calls a sharded step makes, modeled: (name, collective of
#: :data:`~recnotebooks.perf.components.collectives.COLLECTIVES`, component, direction as
#: ``CommLog`` records it).
COLLECTIVE_CALLS = (
    ("lengths_all_to_all", "all_to_all", "all_to_all", "forward"),
    ("ids_all_to_all", "all_to_all", "all_to_all", "forward"),
    ("pooled_all_to_all", "all_to_all", "all_to_all", "forward"),
    ("gradient_all_to_all", "all_to_all", "all_to_all", "backward"),
    ("data_parallel_all_reduce", "all_reduce", "all_reduce", "forward"),
    ("replica_all_reduce", "all_reduce", "all_reduce", "forward"),
    ("dense_all_reduce", "all_reduce", "all_reduce", "forward"),
)
_META = {name: (kind, comp, direction) for name, kind, comp, direction in COLLECTIVE_CALLS}


def _tidy(x: float) -> int | float:
    """An integral value as an int (bytes the test compares exactly), anything else unchanged."""
    n = round(x)
    return int(n) if abs(x - n) <= 1e-9 * max(1.0, abs(x)) else float(x)


def _ring_chunks(n: int, world: int, rank: int) -> int:
    """Elements rank ``rank`` sends (and receives) all-reducing ``n`` elements as a
    reduce-scatter then an all-gather over ``world`` chunks (``recnotebooks.distributed.comm``'s count)."""
    mine = n // world + (1 if rank < n % world else 0)
    return n - mine + (world - 1) * mine


def _blocks(config: DLRMConfig, plan: Plan) -> list[tuple[int, int]]:
    """(rows, columns) of every shard, by cumulative rounding as :meth:`Plan.geometry` does,
    without its execution checks (a modeled plan may leave a shard empty)."""
    rows = {t.name: t.num_rows for t in config.tables}
    dim = config.embedding_dim
    out = [(rows[s.table], dim) for s in plan.shards]
    split: dict[str, list[int]] = {}
    for i, s in enumerate(plan.shards):
        if s.sharding in ("row_wise", "column_wise"):
            split.setdefault(s.table, []).append(i)
    for t, idx in split.items():
        order = sorted(idx, key=lambda i: (plan.shards[i].rank, i))
        row_wise = plan.shards[order[0]].sharding == "row_wise"
        fracs = [plan.shards[i].row_fraction if row_wise else plan.shards[i].col_fraction for i in order]
        for i, c in zip(order, split_counts(rows[t] if row_wise else dim, fracs), strict=True):
            out[i] = (c, dim) if row_wise else (rows[t], c)
    return out


def _batch_and_bytes(local_batch: float, dtype: str) -> tuple[float, int]:
    """The checked samples per rank and the bytes of one element of ``dtype``."""
    b = check_float("local_batch", local_batch, lo=0.0)
    return b, DTYPE_BYTES[check_choice("dtype", dtype, DTYPE_BYTES)]


@dataclass(frozen=True)
class _Owners:
    """Where a plan's shards live, on its ``M`` ranks: ``mp[k]``, the indices of the model-parallel
    shards rank ``k`` owns, ``widths[k]`` their pooled columns, ``dp_elements`` the elements of one
    replica of the data-parallel tables and ``held[k]`` every element rank ``k`` holds."""

    mp: list[list[int]]
    widths: list[int]
    dp_elements: int
    held: list[int]


def _owners(config: DLRMConfig, plan: Plan) -> _Owners:
    m = plan.world_size
    blocks = _blocks(config, plan)
    mp: list[list[int]] = [[] for _ in range(m)]
    for i, s in enumerate(plan.shards):
        if s.sharding != "data_parallel":
            mp[s.rank].append(i)
    size = [r * c for r, c in blocks]
    held = [0] * m
    for n, s in zip(size, plan.shards, strict=True):
        held[s.rank] += n
    return _Owners(
        mp=mp,
        widths=[sum(blocks[i][1] for i in mp[j]) for j in range(m)],
        dp_elements=sum(
            n for n, s in zip(size, plan.shards, strict=True) if s.sharding == "data_parallel" and s.rank == 0
        ),
        held=held,
    )


def _id_counter(
    config: DLRMConfig, plan: Plan, b: float, id_counts: Mapping[tuple[int, int], float] | None
) -> Callable[[int, int], float]:
    """``ids(rank, i)``: the ids ``rank`` sends to the owner of shard ``i``, from ``id_counts`` (every
    pair must be there), or the expected count: ``b`` x the table's pooling factor x the shard's
    row fraction."""
    pooling = {t.name: t.pooling_factor for t in config.tables}

    def ids(rank: int, i: int) -> float:
        if id_counts is not None:
            if (rank, i) not in id_counts:
                raise ValueError(
                    f"id_counts must give every (rank, model-parallel shard) pair, missing {(rank, i)}"
                )
            return float(id_counts[(rank, i)])
        s = plan.shards[i]
        return b * pooling[s.table] * (s.row_fraction if s.sharding == "row_wise" else 1.0)

    return ids


def _row(rank: int, name: str, sent: float, received: float, calls: int = 1) -> dict[str, Any]:
    """One tidy row of :func:`collective_bytes`: collective ``name`` of ``rank``."""
    kind, comp, direction = _META[name]
    return {
        "source": "modeled",
        "rank": rank,
        "collective": name,
        "comm": kind,
        "component": comp,
        "direction": direction,
        "calls": calls,
        "bytes_sent": _tidy(sent),
        "bytes_received": _tidy(received),
    }


def _all_to_all_rows(
    r: int, m: int, b: float, e: int, owners: _Owners, ids: Callable[[int, int], float], expected: list[float]
) -> list[dict[str, Any]]:
    """Rank ``r``'s four all-to-alls inside its group of ``m``: the bags' lengths, the ids, the pooled
    vectors and their gradients (``expected``: the ids each owner receives from one rank, when the
    counts are expected; empty when ``ids`` gives the actual ones)."""
    g, k = divmod(r, m)
    mp = owners.mp
    others = [j for j in range(m) if j != k]
    mp_total = sum(len(x) for x in mp)
    lengths = _row(
        r,
        "lengths_all_to_all",
        b * (mp_total - len(mp[k])) * LENGTH_BYTES,
        (m - 1) * b * len(mp[k]) * LENGTH_BYTES,
    )
    if expected:  # expected counts do not depend on the sender: summed once per owner
        sent, received = sum(expected) - expected[k], (m - 1) * expected[k]
    else:
        sent = sum(ids(r, i) for j in others for i in mp[j])
        received = sum(ids(g * m + j, i) for j in others for i in mp[k])
    out, back = (m - 1) * b * owners.widths[k] * e, b * (sum(owners.widths) - owners.widths[k]) * e
    return [
        lengths,
        _row(r, "ids_all_to_all", sent * INDEX_BYTES, received * INDEX_BYTES),
        _row(r, "pooled_all_to_all", out, back),
        _row(r, "gradient_all_to_all", back, out),
    ]


def collective_bytes(
    config: DLRMConfig,
    plan: Plan,
    local_batch: float,
    world: int | None = None,
    dtype: str = "fp32",
    *,
    id_counts: Mapping[tuple[int, int], float] | None = None,
    dense: bool = True,
) -> list[dict[str, Any]]:
    """Tidy rows, one per (rank, collective) of one training step (see the module docstring).

    Args:
        config: the model (tables, their pooling factors, embedding dim, MLPs).
        plan: the sharding plan over ``plan.world_size`` ranks (checked with :meth:`Plan.check`).
        local_batch: samples per rank.
        world: ranks in all (``None``: ``plan.world_size``); a multiple ``G * plan.world_size``
            is 2D sparse parallelism with ``G`` replica groups.
        dtype: of the pooled embeddings, their gradients and the all-reduced gradients.
        id_counts: ``{(global rank, plan shard index): ids}`` that rank sends to the shard's
            owner in the step, for every model-parallel shard and rank (``None``: expected counts).
        dense: include ``dense_all_reduce`` (DDP of the MLPs, not part of the embedding collection).

    Each row: ``source`` ("modeled"), ``rank``, ``collective`` (a name of :data:`COLLECTIVE_CALLS`),
    ``comm`` (the ``recnotebooks.distributed.comm`` collective), ``component``, ``direction``, ``calls``
    (1; :func:`ddp_buckets` for ``dense_all_reduce``), ``bytes_sent``, ``bytes_received`` (ints
    where whole).
    """
    plan.check(config)
    m = plan.world_size
    world = m if world is None else check_int("world", world, lo=1)
    if world % m:
        raise ValueError(f"world must be a multiple of plan.world_size={m} (2D: groups of it), got {world}")
    b, e = _batch_and_bytes(local_batch, dtype)
    groups, owners = world // m, _owners(config, plan)
    ids = _id_counter(config, plan, b, id_counts)
    expected = [sum(ids(0, i) for i in owners.mp[j]) for j in range(m)] if id_counts is None else []
    buckets = ddp_buckets(config, dtype) if dense and world > 1 else 0  # once, not per rank
    rows: list[dict[str, Any]] = []
    for r in range(world):
        g, k = divmod(r, m)
        if any(owners.mp):
            rows += _all_to_all_rows(r, m, b, e, owners, ids, expected)
        if owners.dp_elements:
            both = _ring_chunks(owners.dp_elements, m, k) * e
            rows.append(_row(r, "data_parallel_all_reduce", both, both))
        if groups > 1:
            both = _ring_chunks(owners.held[k], groups, g) * e
            rows.append(_row(r, "replica_all_reduce", both, both))
        if dense and world > 1:
            both = 2 * (world - 1) / world * config.dense_parameters * e
            rows.append(_row(r, "dense_all_reduce", both, both, buckets))
    return rows


def ddp_buckets(config: DLRMConfig, dtype: str = "fp32") -> int:
    """The all-reduce calls DistributedDataParallel makes for the MLPs' gradients in one step.

    DDP fills buckets with the parameters in the reverse of their registration order (the top
    MLP's last bias first; the bottom MLP registers first, each layer its weight then its bias)
    and closes a bucket once it holds :data:`DDP_FIRST_BUCKET_BYTES` (the first) or
    :data:`DDP_BUCKET_BYTES` (every later one); whatever remains is one more bucket. That is
    every step after the first, once DDP has rebuilt its buckets in the order the gradients
    arrived (its first step sends all of them in one call; tests/test_dist_hybrid.py). A
    ``"dcn"`` interaction's gradients arrive between the towers', its last cross layer's first,
    each layer's ``b_l`` and ``W_l`` before its ``V_l``.
    """
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    e = DTYPE_BYTES[check_choice("dtype", dtype, tuple(DTYPE_BYTES))]
    sizes = [n * e for i, o in config.mlp_layers("bottom") for n in (i * o, o)]
    if config.interaction == "dcn":  # per layer V (w x r), W (r x w), b (w), in forward order
        w, r = config.interaction_output_dim, config.dcn_rank
        sizes += [n * e for _ in range(config.dcn_layers) for n in (w * r, r * w, w)]
    sizes += [n * e for i, o in config.mlp_layers("top") for n in (i * o, o)]
    buckets, filled, cap = 0, 0.0, DDP_FIRST_BUCKET_BYTES
    for nbytes in reversed(sizes):
        filled += nbytes
        if filled >= cap:
            buckets, filled, cap = buckets + 1, 0.0, DDP_BUCKET_BYTES
    return buckets + (filled > 0)


def all_reduce_calls(rows: list[dict[str, Any]], world: int) -> list[int]:
    """Per rank: the all-reduce calls of :func:`collective_bytes` rows (their ``calls``) on
    ``world`` ranks. Raises ValueError for a row of another rank or without those fields."""
    world = check_int("world", world, lo=1)
    out = [0] * world
    for i, row in enumerate(rows):
        ok = isinstance(row, dict) and {"component", "rank", "calls"} <= row.keys()
        if not ok or not (isinstance(row["rank"], int) and 0 <= row["rank"] < world):
            raise ValueError(
                f"rows[{i}] must be a collective_bytes row of a rank in [0, {world - 1}], got {show(row)}"
            )
        if row["component"] == "all_reduce":
            out[row["rank"]] += int(row["calls"])
    return out


def volumes(rows: list[dict[str, Any]], world: int) -> dict[str, list[float]]:
    """Per component (``all_to_all``, ``all_reduce``), per rank: the bytes its collectives put on
    a link, each collective counted by the larger of what it sends and receives."""
    out = {"all_to_all": [0.0] * world, "all_reduce": [0.0] * world}
    for row in rows:
        out[row["component"]][row["rank"]] += max(row["bytes_sent"], row["bytes_received"])
    return out


def _rank_and_node_widths(config: DLRMConfig, plan: Plan, gpus: int) -> tuple[list[int], list[int]]:
    """The pooled columns of each rank's model-parallel shards, and of each node of ``gpus`` ranks
    (a row-wise table's partial sums meet in one vector per node: counted once)."""
    blocks = _blocks(config, plan)
    w = [0] * plan.world_size
    node_width: list[dict[tuple[str, int], int]] = [{} for _ in range(plan.world_size // gpus)]
    for i, s in enumerate(plan.shards):
        if s.sharding == "data_parallel":
            continue
        cols = blocks[i][1]
        w[s.rank] += cols
        key = (s.table, -1 if s.sharding == "row_wise" else i)
        node_width[s.rank // gpus][key] = cols
    return w, [sum(d.values()) for d in node_width]


def hierarchical_bytes(
    config: DLRMConfig, plan: Plan, local_batch: float, gpus: int, dtype: str = "fp32"
) -> list[dict[str, Any]]:
    """Per rank: the bytes of the pooled embeddings' forward exchange when it is **hierarchical**
    across nodes of ``gpus`` devices, as HugeCTR's embedding collection runs it with
    ``CommunicationStrategy.Hierarchical`` (what NVIDIA's MLPerf ``train.py`` sets on more than one
    node; every number **modeled**). The gradients go back the same way, sent and received swapped.

    HugeCTR's hierarchical model-parallel embedding (``HugeCTR/embedding/hier_model_parallel_embedding.cpp``
    and ``operators/hier_model_forward.cu`` in https://github.com/NVIDIA-Merlin/HugeCTR) runs in two
    phases. **Inside the node** each GPU writes its lookups' pooled (row-wise: partial) vectors for
    the samples of every *rail* (the ``B / gpus`` samples of the GPUs with the same local index on
    all nodes: its ``batch_size_per_rail``) into that rail's GPU over NVLink (peer writes), which
    sums the partials of one table (``dst_reduction``). **Across nodes** each GPU then exchanges,
    with the GPU of its own rail on every other node only (``NcclAll2AllComm::hier_communicate`` in
    ``operators/communication.cpp``: ``ncclSend`` to ``node * gpus + local_gpu``), its node's
    tables' vectors for that GPU's own samples, each table once however many of the node's GPUs
    hold rows of it. With ``B`` samples in all, ``b`` per rank, ``w[r]`` the widths of rank ``r``'s
    model-parallel shards and ``W[n]`` those of node ``n`` (row-wise shards of a table counted once):

    * ``nvlink_sent = (gpus - 1) (B / gpus) w[r] E``, ``nvlink_received``: the same summed over the
      node's other ranks' ``w``;
    * ``network_sent = (nodes - 1) b W[n] E``, ``network_received = b * sum of the other nodes' W * E``.

    On one node (``gpus == plan.world_size``) there is no network phase and the NVLink phase is
    the plain all-to-all of :func:`collective_bytes`' ``pooled_all_to_all``. The ids and bag
    lengths are not here: HugeCTR's data distributor sends them to their owners in one flat
    all-to-all (``embedding/data_distributor/sparse_data_distribution_op_impl.cu``).

    Each row: ``rank``, ``nvlink_sent``, ``nvlink_received``, ``network_sent``,
    ``network_received`` (bytes, ints where whole), ``source`` ("modeled").
    """
    plan.check(config)
    world = plan.world_size
    gpus = check_int("gpus", gpus, lo=1, hi=world)
    if world % gpus:
        raise ValueError(f"gpus must divide plan.world_size={world} (whole nodes), got {gpus}")
    b, e = _batch_and_bytes(local_batch, dtype)
    nodes = world // gpus
    w, wn = _rank_and_node_widths(config, plan, gpus)
    rail = b * world / gpus  # samples of one rail: the same local GPU on every node
    rows = []
    for r in range(world):
        n, first = divmod(r, gpus)[0], r - r % gpus
        peers = [k for k in range(first, first + gpus) if k != r]
        rows.append(
            {
                "source": "modeled",
                "rank": r,
                "nvlink_sent": _tidy((gpus - 1) * rail * w[r] * e),
                "nvlink_received": _tidy(sum(rail * w[k] * e for k in peers)),
                "network_sent": _tidy((nodes - 1) * b * wn[n] * e),
                "network_received": _tidy(sum(b * wn[m] * e for m in range(nodes) if m != n)),
            }
        )
    return rows


__all__ += ["hierarchical_bytes"]
