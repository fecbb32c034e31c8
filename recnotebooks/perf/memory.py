"""Memory model: bytes per device (and per node's host DRAM) for a plan, and what fits.

For each rank: embedding weights and optimizer state by placement (device memory for
``hbm``; host DRAM for ``host`` and ``cache``, plus the cache's rows in device memory;
nothing local for ``remote``), replicated MLP weights and their optimizer state,
activations kept for backward at the local batch size, and communication buffers.
:func:`memory_report` says which table does not fit where, and why, and how many bytes of
tables each placement holds (:attr:`MemoryReport.table_bytes`, what
:meth:`recnotebooks.perf.result.CostResult.table_placement` reports).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from recnotebooks.checks import check_choice, check_int
from recnotebooks.config import DLRMConfig, state_floats_per_parameter, state_floats_per_row
from recnotebooks.perf.access import cache_rows_for_hit_rate
from recnotebooks.perf.components import PARAMETER_SERVER
from recnotebooks.perf.hardware import DTYPE_BYTES, Hardware
from recnotebooks.perf.plan import PLACEMENTS, Plan, TableShard
from recnotebooks.perf.precision import precision

__all__ = ["MemoryReport", "memory_report", "cache_slots", "DDP_BUCKET_BYTES"]

#: PyTorch DDP's default gradient bucket (``bucket_cap_mb=25``); two are in flight.
DDP_BUCKET_BYTES = 25 * 1024**2
#: Parameter-server nodes a plan may use before the report calls it out (approximate: a
#: modeling bound, not a published limit).
MAX_PARAMETER_SERVERS = 1024


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
    #: :data:`~recnotebooks.plan.PLACEMENTS`): each shard's weights and its row-wise optimizer
    #: state, as this report counts them per rank, with a data-parallel table's replicas counted
    #: once. For table-wise, row-wise and data-parallel shards they add up to the model's table
    #: bytes; a column-wise shard keeps its own row state, so a table split k ways by columns
    #: holds its state k times.
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
    config: DLRMConfig,
    hw: Hardware,
    plan: Plan,
    batch_size: int,
    *,
    gpus: int = 1,
    dtype: str = "fp32",
    sparse_optimizer: str = "rowwise_adagrad",
    dense_optimizer: str = "adagrad",
    zipf_exponent: float = 1.05,
) -> MemoryReport:
    """Memory per device and per node for ``plan`` at global ``batch_size``."""
    row_state = state_floats_per_row(sparse_optimizer)
    dense_state_floats = state_floats_per_parameter(dense_optimizer)
    check_choice("dtype", dtype, list(DTYPE_BYTES))
    batch_size = check_int("batch_size", batch_size, lo=1)
    gpus = check_int("gpus", gpus, lo=1)
    eb = DTYPE_BYTES[dtype]
    world = plan.world_size
    local_b = batch_size / world
    tables = {t.name: t for t in config.tables}
    dense_w = config.dense_parameters * eb
    dense_state = config.dense_parameters * 4 * dense_state_floats  # fp32 optimizer state
    act_bytes = precision(dtype).activation_bytes  # AMP: half activations beside fp32 weights
    act = config.memory_footprint(batch_size=max(1, round(local_b)), dtype_bytes=act_bytes)["activations"]
    device: list[dict[str, float]] = []
    host_per_rank: list[float] = []
    remote = 0.0
    reasons: list[str] = []
    per_table_dev: dict[int, list[tuple[str, float]]] = {}
    table_bytes = dict.fromkeys(PLACEMENTS, 0.0)
    replicas = Counter(s.table for s in plan.shards if s.sharding == "data_parallel")
    for r in range(world):
        d = {"embedding_weights": 0.0, "embedding_optimizer_state": 0.0, "cache": 0.0,
             "dense_weights": float(dense_w), "dense_optimizer_state": float(dense_state),
             "activations": float(act), "comm_buffers": 0.0}  # fmt: skip
        host = 0.0
        pooled_out = 0.0
        for s in plan.on_rank(r):
            t = tables[s.table]
            rows = t.num_rows * (s.row_fraction if s.sharding == "row_wise" else 1.0)
            dim = config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0)
            w = rows * dim * eb
            st = rows * 4 * row_state
            served = local_b if s.sharding == "data_parallel" else batch_size
            pooled_out += served * dim * eb
            table_bytes[s.placement] += (w + st) / (replicas[s.table] if s.sharding == "data_parallel" else 1)
            if s.placement == "hbm" or hw.kind == "cpu" and s.placement != "remote":
                d["embedding_weights"] += w
                d["embedding_optimizer_state"] += st
                per_table_dev.setdefault(r, []).append((s.table, w + st))
            elif s.placement == "remote":
                remote += 0.0 if s.sharding == "data_parallel" and r > 0 else w + st  # one copy served
            elif s.placement in ("host", "cache"):
                host += w + st
                if s.placement == "cache":
                    d["cache"] += cache_slots(s, rows, zipf_exponent) * (dim * eb + 8)  # rows plus a tag each
        if world > 1:
            d["comm_buffers"] = 2 * pooled_out + 2 * DDP_BUCKET_BYTES  # all-to-all in/out, DDP buckets
        d["total"] = sum(d.values())
        device.append(d)
        host_per_rank.append(host)
    nodes = max(1, -(-world // gpus))
    host_rows = []
    for n in range(nodes):
        tot = sum(host_per_rank[n * gpus : (n + 1) * gpus])
        host_rows.append({"embedding_tables": tot, "total": tot})
    dev_cap = hw.hbm_bytes
    for r, d in enumerate(device):
        if d["total"] > dev_cap:
            big = sorted(per_table_dev.get(r, []), key=lambda x: -x[1])[:3]
            what = ", ".join(f"{n} ({b / 1e9:.2f} GB)" for n, b in big) or "activations and MLP weights"
            reasons.append(f"rank {r} needs {d['total'] / 1e9:.2f} GB of device memory but a {hw.name} "
                           f"device has {dev_cap / 1e9:.0f} GB; largest tables there: {what}")  # fmt: skip
    for n, h in enumerate(host_rows):
        if h["total"] > hw.host_mem_bytes:
            reasons.append(f"node {n} needs {h['total'] / 1e9:.1f} GB of host DRAM for tables in host "
                           f"memory, but has {hw.host_mem_bytes / 1e9:.0f} GB")  # fmt: skip
    servers, notes = _parameter_servers(remote)
    return MemoryReport(
        device,
        host_rows,
        dev_cap,
        hw.host_mem_bytes,
        not reasons,
        reasons,
        remote,
        servers,
        notes,
        table_bytes,
    )


def cache_slots(shard: TableShard, rows: float, zipf_exponent: float = 1.05) -> float:
    """Device-cache rows of a ``"cache"`` shard over ``rows`` rows: its ``cache_rows``, or the
    fewest rows that reach its typed-in ``cache_hit_rate`` under its ``cache_policy``."""
    if shard.cache_rows is not None:
        return float(min(shard.cache_rows, rows))
    return cache_rows_for_hit_rate(float(shard.cache_hit_rate or 0.0), max(1, int(rows)), zipf_exponent,
                                   shard.cache_policy, shard.cache_ways)  # fmt: skip


def _parameter_servers(remote: float) -> tuple[int, list[str]]:
    """Parameter-server nodes needed for ``remote`` bytes, and a note saying so."""
    if remote <= 0:
        return 0, []
    ps = PARAMETER_SERVER
    servers = math.ceil(remote / ps.host_mem_bytes)
    note = (f"{remote / 1e9:,.1f} GB of tables and optimizer state live on remote parameter servers: "
            f"{servers:,} {ps.name} node(s) of {ps.host_mem_bytes / 1e9:.0f} GB DRAM each")  # fmt: skip
    if servers > MAX_PARAMETER_SERVERS:
        note += f", more than the {MAX_PARAMETER_SERVERS:,} this model is meant for (approximate bound)"
    return servers, [note]
