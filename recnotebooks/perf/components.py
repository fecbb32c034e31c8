"""The components of one modeled training step, one small function each (every number **modeled**).

:func:`recnotebooks.perf.cost.estimate` adds these up per rank. Each function is a few lines
of bytes over a bandwidth or FLOPs over a throughput, with the :class:`Hardware` field it uses:

* the dense part, the same on every rank: :func:`data_loading`, :func:`host_to_device`,
  :func:`mlp` (bottom and top towers), :func:`interaction`, :func:`dense_optimizer`,
  :func:`overhead`;
* the embeddings of one shard: :func:`shard_access` (lookups, distinct rows and last-level
  cache hits under Zipf skew), then one function per placement of its rows —
  :func:`embedding_in_hbm`, :func:`embedding_in_host` (UVM over PCIe),
  :func:`embedding_in_cache` (a device cache in front of host DRAM),
  :func:`embedding_on_parameter_server` (a remote server pools rows and ships pooled vectors;
  :func:`parameter_servers` counts the servers a plan needs) and
  :func:`embedding_pooled_by_host` (the host's own CPUs do that, as on Zion);
* the collectives: :func:`all_to_all` (model-parallel pooled embeddings, their gradients and the
  ids) and :func:`all_reduce` (data-parallel gradients).

Memory bandwidths count bytes read plus bytes written, as the spec sheets do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from recnotebooks.checks import check_int
from recnotebooks.config import DLRMConfig
from recnotebooks.perf.access import expected_unique_many, hit_rate_many
from recnotebooks.perf.hardware import DTYPE_BYTES, HARDWARE, Hardware
from recnotebooks.perf.plan import Plan, TableShard

__all__ = ["A2A_CALLS_PER_STEP", "INDEX_BYTES", "PARAMETER_SERVER", "UVM_EFFICIENCY", "Embedding",
           "ShardAccess", "Work", "all_reduce", "cache_hit_rates",
           "all_to_all", "all_to_all_bytes", "data_loading",
           "dense_optimizer",
           "embedding_in_cache", "embedding_in_hbm", "embedding_in_host", "embedding_on_parameter_server",
           "embedding_pooled_by_host", "embedding_shard", "gather_bandwidth", "gemm_time", "host_to_device",
           "input_bytes_per_sample", "interaction", "mlp", "nic_per_device", "op_count", "overhead",
           "overhead_of_remote_rows", "parameter_servers", "shard_access", "uvm_bandwidth"]  # fmt: skip

#: Random row reads over PCIe through unified memory reach about a tenth of the link's
#: bandwidth (TorchRec's planner constant for UVM; its UVM example ran 0.62 s vs 0.06 s per
#: iteration with a cache in HBM: github.com/pytorch/torchrec, torchrec/distributed/planner/constants.py).
UVM_EFFICIENCY = 0.1
INDEX_BYTES = 8
#: Operators of one training step of our DLRM (torch profiler, top-level aten ops, CPU):
#: 115 + 25 per MLP layer (forward, backward, Adagrad) + 15 for the dot interaction.
_OPS_BASE, _OPS_PER_LAYER, _OPS_DOT = 115, 25, 15
#: What a model-parallel step adds, measured on TorchRec 1.8's DistributedModelParallel
#: (table-wise, fused kernels; torch profiler, top-level ops of one step on rank 0 over
#: gloo, 2 and 4 ranks minus 1 rank, the same at 26 and 13 tables; the collectives count as
#: operators; benchmarks/sharded_step_ops.py):
#: input and output distribution 54 + 3 per rank operators, in 5 all-to-alls (the ids'
#: splits, lengths and values; pooled embeddings forward and their gradients backward),
#: 3 of them preceded by a blocking ``.tolist()`` of the splits (priced as one operator
#: each). DDP's reducer on the data-parallel dense part: 2 + 3 per parameter tensor
#: (mlperf_v1's MLPs with and without DDP, measured by the same script without TorchRec).
_OPS_DIST_BASE, _OPS_DIST_PER_RANK, _DIST_SYNCS = 54, 3, 3
_OPS_DDP_BASE, _OPS_DDP_PER_TENSOR = 2, 3
#: All-to-all calls per sharded training step (see above); each pays ``world - 1`` latencies.
A2A_CALLS_PER_STEP = 5
#: Bytes touched per element by the elementwise tail of one MLP layer: bias + ReLU forward
#: (read + write), ReLU backward (2 reads + a write), bias gradient (a read).
_MLP_ELEMENTWISE_PASSES = 7
#: torch.optim.Adagrad's update makes ~11 passes over each parameter (addcmul_ on the state,
#: sqrt, add_ eps, addcdiv_ on the weight: reads and writes counted).
_ADAGRAD_PASSES = 11


#: A sparse parameter server is one node of the CPU training cluster (dual-socket Skylake-SP):
#: its DRAM holds the remote tables, its CPUs pool and update rows, its power counts.
PARAMETER_SERVER: Hardware = HARDWARE["cpu_cluster"]


# ----- building blocks -----------------------------------------------------------------------
def gemm_time(hw: Hardware, m: float, n: float, k: float, dtype: str = "fp32") -> float:
    """Seconds for an (m x k) @ (k x n) GEMM: ``2mnk / (peak * max_eff * prod d/(d+h))``."""
    h = hw.gemm_half_dim
    eff = hw.gemm_max_efficiency * (m / (m + h)) * (n / (n + h)) * (k / (k + h))
    return 2.0 * m * n * k / (hw.flops(dtype) * eff)


def op_count(config: DLRMConfig, world_size: int = 1, model_parallel: bool = False) -> int:
    """Operators launched by one training step of our DLRM (independent of table count).

    With ``world_size > 1`` the dense part is data-parallel (DDP's gradient reducer adds
    operators per parameter tensor); ``model_parallel`` adds the input and output
    distribution of sharded embeddings (all-to-alls, split bookkeeping, host syncs).
    """
    check_int("world_size", world_size, lo=1)
    layers = len(config.bottom_mlp) + len(config.top_mlp)
    ops = _OPS_BASE + _OPS_PER_LAYER * layers + (_OPS_DOT if config.interaction == "dot" else 0)
    if world_size > 1:
        ops += _OPS_DDP_BASE + _OPS_DDP_PER_TENSOR * 2 * layers  # a weight and a bias per layer
        if model_parallel:
            ops += _OPS_DIST_BASE + _OPS_DIST_PER_RANK * world_size + _DIST_SYNCS
    return ops


@dataclass(frozen=True)
class Work:
    """Seconds of one component and the device-memory bytes it moves (for bandwidth use)."""

    seconds: float
    device_bytes: float


# ----- the dense part ------------------------------------------------------------------------
def input_bytes_per_sample(config: DLRMConfig) -> float:
    """Bytes of one sample's inputs: dense features, ids, per-table lengths and the label."""
    return 4 * config.num_dense + INDEX_BYTES * config.lookups_per_sample + 4 * config.num_tables + 4


def data_loading(config: DLRMConfig, hw: Hardware, local_batch: float) -> float:
    """The host reads and writes the batch once in its DRAM (``host_mem_bw``)."""
    return local_batch * input_bytes_per_sample(config) * 2 / hw.host_mem_bw


def host_to_device(config: DLRMConfig, hw: Hardware, local_batch: float) -> float:
    """The batch crosses the device's PCIe link (``host_link_bw``); nothing to copy on a CPU."""
    return local_batch * input_bytes_per_sample(config) / hw.host_link_bw if hw.kind == "gpu" else 0.0


def mlp(config: DLRMConfig, hw: Hardware, which: str, local_batch: float, dtype: str) -> Work:
    """Forward and backward GEMMs of the ``"bottom"`` or ``"top"`` tower, plus each layer's
    elementwise tail at ``hbm_bw`` (the bottom tower's first layer needs no input gradient)."""
    seconds, moved = 0.0, 0.0
    for j, (i, o) in enumerate(config.mlp_layers(which)):
        seconds += gemm_time(hw, local_batch, o, i, dtype)  # forward
        if not (which == "bottom" and j == 0):
            seconds += gemm_time(hw, local_batch, i, o, dtype)  # input gradient
        seconds += gemm_time(hw, i, o, local_batch, dtype)  # weight gradient
        elementwise = local_batch * o * DTYPE_BYTES[dtype] * _MLP_ELEMENTWISE_PASSES
        moved += elementwise
        seconds += elementwise / hw.hbm_bw
    return Work(seconds, moved)


def interaction(config: DLRMConfig, hw: Hardware, local_batch: float, dtype: str) -> Work:
    """Concatenating the features (three passes over inputs and outputs), and for ``"dot"``
    our DotInteraction's GEMMs: ``X X^T`` per sample, then a 0/1 selection GEMM of the pairs."""
    f, d, eb = config.num_interaction_features, config.embedding_dim, DTYPE_BYTES[dtype]
    concat = local_batch * f * d * eb * 2 + local_batch * config.interaction_output_dim * eb * 2
    seconds = concat * 3 / hw.hbm_bw
    if config.interaction == "dot":
        pairs = config.interaction_output_dim - config.bottom_mlp[-1]
        seconds += 2 * gemm_time(hw, local_batch * f, f, d, dtype)  # X X^T and the (G + G^T) X backward
        seconds += gemm_time(hw, local_batch, pairs, f * f, dtype) + gemm_time(
            hw, local_batch, f * f, pairs, dtype
        )
        seconds += local_batch * f * f * eb * 4 / hw.hbm_bw  # G + G^T
    return Work(seconds, concat * 3)


def dense_optimizer(config: DLRMConfig, hw: Hardware, dtype: str) -> Work:
    """Adagrad over every MLP parameter: a few streaming passes at ``hbm_bw``."""
    moved = config.dense_parameters * DTYPE_BYTES[dtype] * _ADAGRAD_PASSES
    return Work(moved / hw.hbm_bw, moved)


def overhead(config: DLRMConfig, hw: Hardware, world_size: int, model_parallel: bool) -> float:
    """Host time to launch the step's operators (``op_overhead_s`` each) plus ``step_overhead_s``."""
    return op_count(config, world_size, model_parallel) * hw.op_overhead_s + hw.step_overhead_s


# ----- the embeddings of one shard ------------------------------------------------------------
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


def shard_access(
    config: DLRMConfig,
    hw: Hardware,
    plan: Plan,
    local_batch: float,
    batch_size: int,
    zipf_exponent: float,
    dtype: str,
    state_bytes: float,
) -> list[ShardAccess]:
    """Per shard of ``plan``: lookups, distinct rows and last-level-cache hits, in one
    vectorised evaluation. The cache holds each rank's hottest rows, split between its
    shards by their share of the rank's lookups."""
    tables = {t.name: t for t in config.tables}
    shards = plan.shards
    if not shards:
        return []
    fracs = [s.row_fraction if s.sharding == "row_wise" else 1.0 for s in shards]
    rows = [max(1, int(tables[s.table].num_rows * f)) for s, f in zip(shards, fracs, strict=True)]
    served = [local_batch if s.sharding == "data_parallel" else float(batch_size) for s in shards]
    lookups = [b * tables[s.table].pooling_factor * f for s, b, f in zip(shards, served, fracs, strict=True)]
    distinct = expected_unique_many(lookups, rows, zipf_exponent)
    dims = [config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0) for s in shards]
    row_bytes = [d * DTYPE_BYTES[dtype] for d in dims]
    llc = [0.0] * len(shards)
    if hw.llc_bytes > 0 and hw.llc_speedup > 1:
        rank_lookups: dict[int, float] = {}
        for s, n, f in zip(shards, lookups, fracs, strict=True):
            rank_lookups[s.rank] = rank_lookups.get(s.rank, 0.0) + n / f
        cached = [
            hw.llc_bytes * (n / f) / (rank_lookups[s.rank] or 1.0) / (rb + state_bytes)
            for s, n, f, rb in zip(shards, lookups, fracs, row_bytes, strict=True)
        ]
        llc = [float(h) for h in hit_rate_many(cached, rows, zipf_exponent)]
    hits = cache_hit_rates(shards, rows, zipf_exponent)
    return [
        ShardAccess(s, f, d, rb, b, n, float(u), h, c)
        for s, f, d, rb, b, n, u, h, c in zip(
            shards, fracs, dims, row_bytes, served, lookups, distinct, llc, hits, strict=True
        )
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


@dataclass(frozen=True)
class Embedding:
    """One shard's embedding forward and backward seconds, and device-memory bytes moved."""

    forward: float
    backward: float
    device_bytes: float
    remote: bool = False


def gather_bandwidth(hw: Hardware, row_bytes: float, llc_hit_rate: float = 0.0) -> float:
    """Random row gathers from device memory: ``hbm_bw * gather_efficiency * r/(r + half)``,
    faster by ``llc_speedup`` for the share of lookups that hit the last-level cache."""
    bw = hw.hbm_bw * hw.gather_efficiency * row_bytes / (row_bytes + hw.gather_half_row_bytes)
    return bw / ((1 - llc_hit_rate) + llc_hit_rate / hw.llc_speedup)


def uvm_bandwidth(hw: Hardware) -> float:
    """Random row reads of host DRAM over PCIe through unified memory (``UVM_EFFICIENCY`` of the link)."""
    return hw.host_link_bw * UVM_EFFICIENCY


def _row_traffic(a: ShardAccess, state_bytes: float) -> tuple[float, float]:
    """Bytes of rows read forward (one per lookup) and read + written backward (each distinct
    row and its optimizer state, once: the fused row-wise optimizer)."""
    return a.lookups * a.row_bytes, a.distinct_rows * (a.row_bytes + state_bytes) * 2


def _pooling_work(a: ShardAccess, hw: Hardware, sort: float) -> Embedding:
    """What any placement adds on the device: ids in and pooled vectors out forward; pooled
    gradients and a gradient per lookup backward, and grouping the lookups by row (``sort``)."""
    forward = (a.served * a.row_bytes + a.lookups * INDEX_BYTES) / hw.hbm_bw
    backward = (a.served * a.row_bytes + a.lookups * a.row_bytes) / hw.hbm_bw + sort
    moved = a.served * a.row_bytes * 2 + a.lookups * INDEX_BYTES + a.lookups * a.row_bytes
    return Embedding(forward, backward, moved)


def embedding_in_hbm(a: ShardAccess, hw: Hardware, state_bytes: float) -> Embedding:
    """Rows in device memory (a CPU node's own DRAM), gathered at :func:`gather_bandwidth`."""
    fwd, bwd = _row_traffic(a, state_bytes)
    bw = gather_bandwidth(hw, a.row_bytes, a.llc_hit_rate)
    return Embedding(fwd / bw, bwd / bw, fwd + bwd)


def embedding_in_host(a: ShardAccess, hw: Hardware, state_bytes: float) -> Embedding:
    """Rows in host DRAM read by the device over PCIe, as UVM does (:func:`uvm_bandwidth`)."""
    fwd, bwd = _row_traffic(a, state_bytes)
    return Embedding(fwd / uvm_bandwidth(hw), bwd / uvm_bandwidth(hw), 0.0)


def embedding_in_cache(a: ShardAccess, hw: Hardware, state_bytes: float) -> Embedding:
    """Rows in host DRAM behind a device cache: the share ``h`` of row traffic that hits
    (``a.cache_hit_rate``) is gathered from device memory like :func:`embedding_in_hbm`; each
    miss costs what :func:`embedding_in_host` pays for a row, a random read over PCIe."""
    fwd, bwd = _row_traffic(a, state_bytes)
    h = a.cache_hit_rate
    bw, uvm = gather_bandwidth(hw, a.row_bytes, a.llc_hit_rate), uvm_bandwidth(hw)
    return Embedding(h * fwd / bw + (1 - h) * fwd / uvm, h * bwd / bw + (1 - h) * bwd / uvm, h * (fwd + bwd))


def _pooled_by_cpus(a: ShardAccess, state_bytes: float, link_bw: float, gather_bw: float,
                    sort_s: float) -> Embedding:  # fmt: skip
    """Rows pooled by CPUs next to their DRAM (gathering at ``gather_bw``), pooled vectors
    sent over a link of ``link_bw`` (forward: with the ids); backward the pooled gradients come
    back, the CPUs group the lookups by row (``sort_s``) and update their rows."""
    fwd_rows, bwd_rows = _row_traffic(a, state_bytes)
    forward = max((a.served * a.row_bytes + a.lookups * INDEX_BYTES) / link_bw, fwd_rows / gather_bw)
    backward = max(a.served * a.row_bytes / link_bw, bwd_rows / gather_bw + sort_s)
    return Embedding(forward, backward, 0.0)


def embedding_on_parameter_server(
    a: ShardAccess, state_bytes: float, nic: float, servers: float = 1.0
) -> Embedding:
    """Rows on remote parameter servers (:data:`PARAMETER_SERVER` nodes), which pool them
    themselves and ship pooled vectors over this device's share of the network (``nic``
    bytes/s). ``servers`` is this rank's share of them (the plan's servers over the ranks
    that use them): their DRAM and CPUs serve every rank's lookups."""
    ps = PARAMETER_SERVER
    gather_bw = ps.host_mem_bw * ps.gather_efficiency * servers
    rows = _pooled_by_cpus(a, state_bytes, nic, gather_bw, a.lookups / (ps.sort_rate * servers))
    return Embedding(rows.forward, rows.backward, 0.0, remote=True)


def embedding_pooled_by_host(a: ShardAccess, hw: Hardware, state_bytes: float, gpus: int) -> Embedding:
    """Rows in host DRAM pooled by the host's own CPUs (``host_pools_embeddings``, as on Zion),
    pooled vectors sent over the device's PCIe link. The node's DRAM bandwidth and CPUs are
    shared by its ``gpus`` devices; CPU gathers and sorts run at a :data:`PARAMETER_SERVER`'s
    rates, scaled by the host's DRAM bandwidth (CPU sockets come with memory channels)."""
    ps = PARAMETER_SERVER
    share = hw.host_mem_bw / ps.host_mem_bw / gpus
    gather_bw = hw.host_mem_bw * ps.gather_efficiency / gpus
    return _pooled_by_cpus(a, state_bytes, hw.host_link_bw, gather_bw, a.lookups / (ps.sort_rate * share))


def embedding_shard(a: ShardAccess, hw: Hardware, state_bytes: float, nic: float, gpus: int = 1,
                    servers: float = 1.0) -> Embedding:  # fmt: skip
    """One shard's embedding work at its placement (a CPU node keeps non-remote rows in its DRAM);
    ``servers``: this rank's share of the parameter servers (see :func:`embedding_on_parameter_server`)."""
    place = a.shard.placement if hw.kind == "gpu" or a.shard.placement == "remote" else "hbm"
    if place == "remote" or (place == "host" and hw.host_pools_embeddings):
        rows = (embedding_on_parameter_server(a, state_bytes, nic, servers) if place == "remote"
                else embedding_pooled_by_host(a, hw, state_bytes, gpus))  # fmt: skip
        local = _pooling_work(a, hw, 0.0)  # ids and pooled vectors on the device; no rows, no sort
        return Embedding(rows.forward + local.forward, rows.backward + local.backward,
                         a.served * a.row_bytes * 2, remote=rows.remote)  # fmt: skip
    placed = {"hbm": embedding_in_hbm, "host": embedding_in_host, "cache": embedding_in_cache}[place]
    rows, local = placed(a, hw, state_bytes), _pooling_work(a, hw, a.lookups / hw.sort_rate)
    return Embedding(rows.forward + local.forward, rows.backward + local.backward,
                     rows.device_bytes + local.device_bytes)  # fmt: skip


def parameter_servers(config: DLRMConfig, plan: Plan, dtype: str, state_bytes: float) -> int:
    """:data:`PARAMETER_SERVER` nodes needed to hold the plan's remote rows (and their optimizer
    state) in their DRAM; 0 when no rows are remote. A trainer waits on them every step, so the
    energy of its step counts their power too."""
    rows = {t.name: t.num_rows for t in config.tables}
    remote = 0.0
    for s in plan.shards:
        if s.placement != "remote" or (s.sharding == "data_parallel" and s.rank > 0):
            continue  # a data-parallel table is one copy on the servers
        share = s.row_fraction if s.sharding == "row_wise" else 1.0
        dim = config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0)
        remote += rows[s.table] * share * (dim * DTYPE_BYTES[dtype] + state_bytes)
    return math.ceil(remote / PARAMETER_SERVER.host_mem_bytes) if remote > 0 else 0


# ----- collectives ---------------------------------------------------------------------------
def nic_per_device(hw: Hardware, gpus: int) -> float:
    """A GPU reaches the network through its own PCIe link (GPUDirect RDMA), sharing the node's
    NICs with the other GPUs in use; a CPU node has all of them."""
    return min(hw.nic_bw / gpus, hw.host_link_bw) if hw.kind == "gpu" else hw.nic_bw


def all_to_all_bytes(
    mine: Sequence[ShardAccess],
    all_shards: Sequence[ShardAccess],
    config: DLRMConfig,
    local_batch: float,
    batch_size: int,
    world: int,
    dtype: str,
) -> float:
    """Bytes one rank exchanges per step: pooled embeddings out (or partial sums, reduce-scattered,
    for row-wise shards) and in, forward and backward, plus the ids it receives."""
    tables = {t.name: t for t in config.tables}
    send = ids_in = my_dims = 0.0
    for a in mine:
        if a.shard.sharding == "data_parallel":
            continue
        if a.shard.sharding == "row_wise":
            send += batch_size * a.row_bytes * (world - 1) / world
        else:
            send += (batch_size - local_batch) * a.row_bytes
        ids_in += (
            (batch_size - local_batch) * tables[a.shard.table].pooling_factor * a.row_fraction * INDEX_BYTES
        )
        my_dims += a.dim
    model_parallel_dims = sum(a.dim for a in all_shards if a.shard.sharding != "data_parallel")
    received = local_batch * (model_parallel_dims - my_dims) * DTYPE_BYTES[dtype]
    return 2 * max(send, received) + ids_in


def _collective(volume: float, world: int, gpus: int, hw: Hardware, nic: float, steps: int) -> float:
    """Seconds to move ``volume`` bytes per device: the share to devices in this node over NVLink,
    the rest over this device's share of the node's NICs, plus ``steps`` latencies."""
    if world <= 1:
        return 0.0
    inside = (gpus - 1) / (world - 1)
    return (
        max(volume * inside / hw.intra_node_bw, volume * (1 - inside) / nic) + steps * hw.collective_latency_s
    )


def all_to_all(volume: float, world: int, gpus: int, hw: Hardware, nic: float) -> float:
    """The step's all-to-alls (:data:`A2A_CALLS_PER_STEP`, pairwise: ``world - 1`` latencies each)."""
    if volume <= 0:  # nothing to exchange when every table is data-parallel
        return 0.0
    return _collective(volume, world, gpus, hw, nic, steps=A2A_CALLS_PER_STEP * (world - 1))


def all_reduce(gradient_bytes: float, world: int, gpus: int, hw: Hardware, nic: float) -> float:
    """Ring all-reduce of the data-parallel gradients: ``2(p-1)/p * S`` bytes, ``2(p-1)`` latencies."""
    return _collective(2 * gradient_bytes * (world - 1) / world, world, gpus, hw, nic, steps=2 * (world - 1))


def overhead_of_remote_rows(hw: Hardware) -> float:
    """A rank with rows on a parameter server waits for two round trips (lookup and update)."""
    return 2 * hw.collective_latency_s
