"""Memory model: the bytes of a model on one device, per device (and per node's host DRAM)
for a plan, and what fits. The project's one memory model.

:func:`memory_footprint`: a model's weights, optimizer state, the interaction's buffers and
one batch's inputs and activations, all on one device (what ``recnb train`` and the step
measurement of :mod:`recnotebooks.measure` check against free memory before allocating).

:func:`memory_report`, for each rank of a plan: embedding weights and optimizer state by
placement (device memory for ``hbm``; host DRAM for ``host`` and ``cache``, plus the cache's
rows in device memory; nothing local for ``remote``), replicated MLP weights and their
optimizer state, activations kept for backward at the local batch size, and communication
buffers. It says which table does not fit where, and why, and how many bytes of
tables each placement holds (:attr:`MemoryReport.table_bytes`, what
:meth:`recnotebooks.perf.result.CostResult.table_placement` reports).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from recnotebooks.checks import check_int, check_type
from recnotebooks.config import DLRMConfig, Workload, state_floats_per_parameter, state_floats_per_row
from recnotebooks.config.workload import OlderDefault, workload_from
from recnotebooks.perf.access import cache_rows_for_hit_rate
from recnotebooks.perf.components import PARAMETER_SERVER
from recnotebooks.perf.hardware import DTYPE_BYTES, Hardware
from recnotebooks.perf.precision import precision
from recnotebooks.plan import PLACEMENTS, Plan, TableShard

__all__ = ["MemoryReport", "memory_footprint", "memory_report", "cache_slots", "DDP_BUCKET_BYTES"]

#: PyTorch DDP's default gradient bucket (``bucket_cap_mb=25``); two are in flight.
DDP_BUCKET_BYTES = 25 * 1024**2
#: Parameter-server nodes a plan may use before the report calls it out (approximate: a
#: modeling bound, not a published limit).
MAX_PARAMETER_SERVERS = 1024
#: :func:`memory_footprint`'s optimizers when neither it nor a Workload names them.
_ROWWISE, _SGD = OlderDefault("rowwise_adagrad"), OlderDefault("sgd")


def memory_footprint(
    config: DLRMConfig | Workload,
    sparse_optimizer: str | OlderDefault = _ROWWISE,
    dense_optimizer: str | OlderDefault = _SGD,
    dtype_bytes: int | None = None,
    batch_size: int | None = None,
    embedding_bytes: int | None = None,
) -> dict[str, int]:
    """Bytes of ``config`` on one device: weights, optimizer state, the interaction's buffers
    and (if ``batch_size``) one batch's inputs and activations, by kind, and their ``total``.
    ``dtype_bytes`` (4 unless given) is the bytes of a dense weight, its optimizer state and an
    activation; ``embedding_bytes`` of a table element (``None``: ``dtype_bytes``; 2 for fp16 or bf16
    tables). A :class:`~recnotebooks.config.Workload` for ``config`` gives the model, optimizers, batch
    and ``dtype_bytes`` (its dtype's :data:`~recnotebooks.perf.hardware.DTYPE_BYTES`).
    Optimizer state as :func:`~recnotebooks.config.state_floats_per_row` and
    :func:`~recnotebooks.config.state_floats_per_parameter` count it (sparse: ``sgd`` none,
    ``rowwise_adagrad`` one float per row, exact ``adagrad`` one per element; dense: ``sgd``
    none, ``adagrad`` one per parameter, ``adam`` two). The embedding optimizer state is fp32 whatever
    the tables' dtype (as :mod:`recnotebooks.nn.optim` and FBGEMM keep it); the dense state has the
    dense weights' dtype, as ``torch.optim`` keeps it.
    ``interaction_buffers`` are the dot interaction's pair indices (three int64 per pair,
    ``P = F(F-1)/2`` pairs for ``F = num_tables + 1``), plus the ``(batch, F^2)`` product
    ``X X^T`` the pairs are gathered from (forward) or its gradient (backward; one of the two is
    alive at a time). ``batch_inputs`` are the ids (int64), bag lengths, dense features and
    labels of a batch; ``activations`` the tensors kept for backward (MLP layer outputs, pooled
    embeddings, interaction output; for ``"dcn"`` each cross layer's ``V x`` (rank wide), its
    ``W (V x) + b`` and its output (width wide; the last one is the interaction output)).

    >>> from recnotebooks.config import preset
    >>> memory_footprint(preset("tiny"))["embedding_optimizer_state"] == preset("tiny").total_rows * 4
    True
    >>> exact = memory_footprint(preset("tiny"), "adagrad", embedding_bytes=2)
    >>> exact["embedding_optimizer_state"] == 2 * exact["embedding_weights"]  # fp32 state of bf16 tables
    True
    """
    if isinstance(config, Workload):
        older = {"sparse_optimizer": sparse_optimizer, "dense_optimizer": dense_optimizer}
        return _workload_footprint(config, older, dtype_bytes, batch_size, embedding_bytes)
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    row_state = state_floats_per_row(_given(sparse_optimizer), config.embedding_dim)
    dense_state = state_floats_per_parameter(_given(dense_optimizer))
    dtype_bytes = check_int("dtype_bytes", 4 if dtype_bytes is None else dtype_bytes, lo=1, hi=16)
    eb = check_int(
        "embedding_bytes", dtype_bytes if embedding_bytes is None else embedding_bytes, lo=1, hi=16
    )
    pairs = config.interaction_output_dim - config.embedding_dim if config.interaction == "dot" else 0
    out = {
        "embedding_weights": config.sparse_parameters * eb,
        "embedding_optimizer_state": round(config.total_rows * row_state) * 4,  # fp32
        "dense_weights": config.dense_parameters * dtype_bytes,
        "dense_optimizer_state": config.dense_parameters * dense_state * dtype_bytes,
        "interaction_buffers": 3 * pairs * 8,
        "batch_inputs": 0,
        "activations": 0,
    }
    if batch_size is not None:
        out.update(_batch_bytes(config, check_int("batch_size", batch_size, lo=1), dtype_bytes, pairs))
    out["total"] = sum(out.values())
    return out


def _workload_footprint(
    workload: Workload,
    older: dict[str, str | OlderDefault],
    dtype_bytes: int | None,
    batch_size: int | None,
    embedding_bytes: int | None,
) -> dict[str, int]:
    """:func:`memory_footprint` of ``workload``: its model, optimizers and batch (``older``
    optimizers or a ``batch_size`` given too are a ``TypeError``), ``dtype_bytes`` its dtype's
    bytes unless given (:data:`~recnotebooks.perf.hardware.DTYPE_BYTES`; AMP's half activations
    counted at that width too, an upper bound)."""
    w = workload_from(workload, older, "memory_footprint", batch_size=batch_size)
    width = DTYPE_BYTES[w.dtype] if dtype_bytes is None else dtype_bytes
    return memory_footprint(
        w.config, w.sparse_optimizer, w.dense_optimizer, width, w.batch_size, embedding_bytes
    )


def _given(value: str | OlderDefault) -> str:
    """An older-form parameter's value: what the caller gave, or its default."""
    return str(value.value) if isinstance(value, OlderDefault) else value


def _batch_bytes(config: DLRMConfig, batch_size: int, dtype_bytes: int, pairs: int) -> dict[str, int]:
    """What a batch of ``batch_size`` adds on one device (:func:`memory_footprint`): the interaction's
    pair indices and its ``X X^T`` (dot: ``pairs`` > 0), the batch's inputs and its activations."""
    f = config.num_interaction_features
    widths = sum(o for w in ("bottom", "top") for _, o in config.mlp_layers(w))
    widths += config.num_interaction_features * config.embedding_dim + config.interaction_output_dim
    if config.interaction == "dcn":
        w, layers = config.interaction_output_dim, config.dcn_layers
        widths += layers * (config.dcn_rank + w) + (layers - 1) * w
    buffers = 3 * pairs * 8 + (batch_size * f * f * dtype_bytes if pairs else 0)
    per_sample = 8 * (config.lookups_per_sample + config.num_tables) + 4 * (config.num_dense + 1)
    return {
        "interaction_buffers": buffers,
        "batch_inputs": round(batch_size * per_sample),
        "activations": batch_size * widths * dtype_bytes,
    }


@dataclass
class MemoryReport:
    """Bytes per rank by kind (``device``) and per node (``host``); ``fits`` and reasons."""

    device: list[dict[str, float]]
    host: list[dict[str, float]]
    device_capacity: float
    host_capacity: float
    fits: bool
    reasons: list[str] = field(default_factory=list)
    #: Bytes of tables (and their optimizer state) on remote parameter servers, and how many
    #: :data:`~recnotebooks.perf.components.PARAMETER_SERVER` nodes that takes.
    remote_bytes: float = 0.0
    parameter_servers: int = 0
    notes: list[str] = field(default_factory=list)
    #: Bytes of the model's tables by the placement of the shard that holds them (every key of
    #: :data:`~recnotebooks.plan.PLACEMENTS`): each shard's weights and its optimizer state, as
    #: this report counts them per rank, with a data-parallel table's replicas counted once. For
    #: table-wise, row-wise and data-parallel shards they add up to the model's table bytes; a
    #: column-wise shard keeps its own row-wise Adagrad state (one float per row), so a table split
    #: k ways by columns holds that state k times (exact Adagrad's state splits with the columns).
    table_bytes: dict[str, float] = field(default_factory=dict)

    @property
    def device_cache_bytes(self) -> float:
        """Device memory of every rank's software caches (rows and their tags) in all."""
        return sum(d.get("cache", 0.0) for d in self.device)

    def table(self) -> list[dict[str, object]]:
        """Tidy rows ``{rank, kind, bytes, where}`` for charts."""
        rows: list[dict[str, object]] = []
        for r, d in enumerate(self.device):
            rows += [
                {"rank": r, "kind": k, "bytes": v, "where": "device"} for k, v in d.items() if k != "total"
            ]
        for n, h in enumerate(self.host):
            rows += [
                {"rank": f"node {n}", "kind": k, "bytes": v, "where": "host"}
                for k, v in h.items()
                if k != "total"
            ]
        return rows


def memory_report(
    workload: Workload | DLRMConfig,
    hw: Hardware,
    plan: Plan,
    batch_size: int | None = None,
    *,
    gpus: int = 1,
    **older: Any,
) -> MemoryReport:
    """Memory per device and per node for ``plan`` at ``workload``'s global batch: each rank's share
    of :func:`memory_footprint`'s weights and state (by its shards and their placements, the
    state in fp32), the activations of its local batch, caches and communication buffers.
    A shard's optimizer state is what the workload's sparse optimizer keeps for its rows and columns
    (:func:`~recnotebooks.config.state_floats_per_row` of the shard's columns).

    The older form, ``memory_report(config, hw, plan, batch_size, gpus=..., dtype=...,
    sparse_optimizer=..., dense_optimizer=..., zipf_exponent=...)``, still works
    (:func:`~recnotebooks.config.workload.workload_from`)."""
    w = workload_from(workload, older, "memory_report", batch_size=batch_size)
    gpus = check_int("gpus", gpus, lo=1)
    held = _Held(plan)
    shared = _shared_bytes(w, plan.world_size)
    for r in range(plan.world_size):
        _add_rank(held, w, hw, plan, r, shared)
    nodes = max(1, -(-plan.world_size // gpus))
    host_rows = []
    for n in range(nodes):
        tot = sum(held.host[n * gpus : (n + 1) * gpus])
        host_rows.append({"embedding_tables": tot, "total": tot})
    reasons = _reasons(held, host_rows, hw)
    servers, notes = _parameter_servers(held.remote)
    return MemoryReport(
        held.device,
        host_rows,
        hw.hbm_bytes,
        hw.host_mem_bytes,
        not reasons,
        reasons,
        held.remote,
        servers,
        notes,
        held.table_bytes,
    )


class _Held:
    """What :func:`memory_report` adds up over a plan's ranks, in rank order: device bytes by kind and
    host bytes per rank, bytes on parameter servers, each rank's tables in device memory, and the
    tables' bytes by placement (a data-parallel table's replicas counted once)."""

    def __init__(self, plan: Plan) -> None:
        self.device: list[dict[str, float]] = []
        self.host: list[float] = []
        self.remote = 0.0
        self.on_device: dict[int, list[tuple[str, float]]] = {}
        self.table_bytes = dict.fromkeys(PLACEMENTS, 0.0)
        self.replicas = Counter(s.table for s in plan.shards if s.sharding == "data_parallel")


def _shared_bytes(w: Workload, world: int) -> dict[str, float]:
    """Device bytes every rank holds alike, by kind (the tables, caches and buffers at 0): the
    dense weights, their fp32 optimizer state and the activations of the local batch."""
    state32 = memory_footprint(w.config, w.sparse_optimizer, w.dense_optimizer, dtype_bytes=4)  # fp32 state
    local_b = w.batch_size / world
    act_bytes = precision(w.dtype).activation_bytes  # AMP: half activations beside fp32 weights
    act = memory_footprint(w.config, batch_size=max(1, round(local_b)), dtype_bytes=act_bytes)["activations"]
    return {"embedding_weights": 0.0, "embedding_optimizer_state": 0.0, "cache": 0.0,
            "dense_weights": float(w.config.dense_parameters * DTYPE_BYTES[w.dtype]),
            "dense_optimizer_state": float(state32["dense_optimizer_state"]),
            "activations": float(act), "comm_buffers": 0.0}  # fmt: skip


def _add_rank(
    held: _Held, w: Workload, hw: Hardware, plan: Plan, rank: int, shared: dict[str, float]
) -> None:
    """Rank ``rank``'s device bytes by kind (``shared``: what every rank holds) and host bytes, its
    tables' bytes on parameter servers and by placement, added to ``held``."""
    config, eb, batch_size = w.config, DTYPE_BYTES[w.dtype], w.batch_size
    d, host, pooled_out = dict(shared), 0.0, 0.0
    tables = {t.name: t for t in config.tables}
    for s in plan.on_rank(rank):
        rows = tables[s.table].num_rows * (s.row_fraction if s.sharding == "row_wise" else 1.0)
        dim = config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0)
        wt = rows * dim * eb
        st = rows * 4 * state_floats_per_row(w.sparse_optimizer, dim)  # fp32 state
        dp = s.sharding == "data_parallel"
        pooled_out += (batch_size / plan.world_size if dp else batch_size) * dim * eb
        held.table_bytes[s.placement] += (wt + st) / (held.replicas[s.table] if dp else 1)
        if s.placement == "hbm" or hw.kind == "cpu" and s.placement != "remote":
            d["embedding_weights"] += wt
            d["embedding_optimizer_state"] += st
            held.on_device.setdefault(rank, []).append((s.table, wt + st))
        elif s.placement == "remote":
            held.remote += 0.0 if dp and rank > 0 else wt + st  # one copy served
        elif s.placement in ("host", "cache"):
            host += wt + st
            if s.placement == "cache":
                d["cache"] += cache_slots(s, rows, w.zipf_exponent) * (dim * eb + 8)  # rows plus a tag each
    if plan.world_size > 1:
        d["comm_buffers"] = 2 * pooled_out + 2 * DDP_BUCKET_BYTES  # all-to-all in/out, DDP buckets
    d["total"] = sum(d.values())
    held.device.append(d)
    held.host.append(host)


def _reasons(held: _Held, host_rows: list[dict[str, float]], hw: Hardware) -> list[str]:
    """Why the plan does not fit: each rank over its device memory (its largest tables there) and
    each node over its host DRAM."""
    reasons = []
    for r, d in enumerate(held.device):
        if d["total"] > hw.hbm_bytes:
            big = sorted(held.on_device.get(r, []), key=lambda x: -x[1])[:3]
            what = ", ".join(f"{n} ({b / 1e9:.2f} GB)" for n, b in big) or "activations and MLP weights"
            reasons.append(
                f"rank {r} needs {d['total'] / 1e9:.2f} GB of device memory but a {hw.name} "
                f"device has {hw.hbm_bytes / 1e9:.0f} GB; largest tables there: {what}"
            )
    for n, h in enumerate(host_rows):
        if h["total"] > hw.host_mem_bytes:
            reasons.append(
                f"node {n} needs {h['total'] / 1e9:.1f} GB of host DRAM for tables in host "
                f"memory, but has {hw.host_mem_bytes / 1e9:.0f} GB"
            )
    return reasons


def cache_slots(shard: TableShard, rows: float, zipf_exponent: float = 1.05) -> float:
    """Device-cache rows of a ``"cache"`` shard over ``rows`` rows: its ``cache_rows``, or the
    fewest rows that reach its typed-in ``cache_hit_rate`` under its ``cache_policy``."""
    if shard.cache_rows is not None:
        return float(min(shard.cache_rows, rows))
    return cache_rows_for_hit_rate(
        float(shard.cache_hit_rate or 0.0),
        max(1, int(rows)),
        zipf_exponent,
        shard.cache_policy,
        shard.cache_ways,
    )


def _parameter_servers(remote: float) -> tuple[int, list[str]]:
    """Parameter-server nodes needed for ``remote`` bytes, and a note saying so."""
    if remote <= 0:
        return 0, []
    ps = PARAMETER_SERVER
    servers = math.ceil(remote / ps.host_mem_bytes)
    note = (
        f"{remote / 1e9:,.1f} GB of tables and optimizer state live on remote parameter servers: "
        f"{servers:,} {ps.name} node(s) of {ps.host_mem_bytes / 1e9:.0f} GB DRAM each"
    )
    if servers > MAX_PARAMETER_SERVERS:
        note += f", more than the {MAX_PARAMETER_SERVERS:,} this model is meant for (approximate bound)"
    return servers, [note]
