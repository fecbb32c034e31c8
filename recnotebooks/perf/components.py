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

Memory bandwidths count bytes read plus bytes written, as the spec sheets do. What ``dtype``
means (bytes of activations, weights and tables, the GEMM rate, the casts and loss scaling of
mixed precision) is read from its row of :data:`recnotebooks.perf.precision.PRECISIONS`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from recnotebooks.checks import check_choice, check_int
from recnotebooks.config import DLRMConfig
from recnotebooks.perf import traffic
from recnotebooks.perf.access import expected_unique_many, hit_rate_many
from recnotebooks.perf.hardware import HARDWARE, Hardware
from recnotebooks.perf.plan import Plan, TableShard
from recnotebooks.perf.precision import precision

__all__ = ["A2A_CALLS", "A2A_CALLS_PER_STEP", "IMPLEMENTATIONS", "INDEX_BYTES", "PARAMETER_SERVER",
           "UVM_EFFICIENCY", "Embedding",
           "SHARDED_OPS", "SHARD_OPS", "ShardAccess", "Work", "all_reduce", "cache_hit_rates",
           "all_to_all", "all_to_all_bytes", "data_loading",
           "dense_optimizer",
           "embedding_in_cache", "embedding_in_hbm", "embedding_in_host", "embedding_on_parameter_server",
           "embedding_pooled_by_host", "embedding_shard", "gather_bandwidth", "gemm_time", "host_to_device",
           "input_bytes_per_sample", "interaction", "mlp", "nic_per_device", "op_count", "overhead",
           "overhead_of_remote_rows", "parameter_servers", "shard_access", "sharded_op_terms",
           "uvm_bandwidth"]  # fmt: skip

#: Random row reads over PCIe through unified memory reach about a tenth of the link's
#: bandwidth (TorchRec's planner constant for UVM; its UVM example ran 0.62 s vs 0.06 s per
#: iteration with a cache in HBM: github.com/pytorch/torchrec, torchrec/distributed/planner/constants.py).
UVM_EFFICIENCY = 0.1
INDEX_BYTES = traffic.INDEX_BYTES  #: an id as our sharded step sends it (int64)
#: Operators of one training step of our DLRM (torch profiler, top-level aten ops, CPU):
#: 115 + 25 per MLP layer (forward, backward, Adagrad) + 15 for the dot interaction.
_OPS_BASE, _OPS_PER_LAYER, _OPS_DOT = 115, 25, 15
#: What OUR sharded step (recnotebooks.dist's HybridParallelDLRM, as
#: recnotebooks.dist.training.run_rank trains it: row-wise Adagrad, dense Adagrad) adds to the
#: single-process step: top-level operators on rank 0, counted with torch.profiler over gloo on
#: 2 and 4 ranks, 4, 8 and 16 tables, MLPs of 4 and 8 layers, every scheme and a mixed plan, minus
#: the single-process step counted the same way, fitted by least squares (residuals <= 8 of
#: 400-2000 operators) by benchmarks/our_step_ops.py, 2026-12-01. Terms (see
#: :func:`sharded_op_terms`): a fixed part (DDP, the all-to-alls' bookkeeping), data-parallel
#: tables' fixed part (their all-reduce and the re-recording of every row), DDP's reducer per
#: parameter tensor, each local embedding collection beyond the first (one per kind of shard
#: and width), and per scheme ops per shard of the plan (the input distribution loops over
#: every rank's shards) and per shard on the rank (lookup, assembly, optimizer). No term per
#: rank: the counts were equal on 2 and 4 ranks. ``aten::item`` host syncs (.tolist() of splits
#: and offsets: 40-230 a step) count as operators.
SHARDED_OPS: dict[str, float] = {"base": 91, "data_parallel_base": 28, "ddp_per_tensor": 3,
                                 "collection": 90}  # fmt: skip
#: per scheme: (operators per shard of the plan, per shard on the rank); same provenance.
SHARD_OPS: dict[str, tuple[float, float]] = {
    "table_wise": (23, 8), "row_wise": (21, 24), "column_wise": (12, 21), "data_parallel": (0, 31),
}  # fmt: skip
#: What TorchRec 1.8's DistributedModelParallel step adds (table-wise, fused kernels; torch
#: profiler, top-level ops of one step on rank 0 over gloo, 2 and 4 ranks minus 1 rank, the same
#: at 26 and 13 tables; benchmarks/sharded_step_ops.py): input and output distribution 54 + 3 per
#: rank operators and 3 blocking ``.tolist()`` of the splits; DDP's reducer 2 + 3 per parameter
#: tensor (mlperf_v1's MLPs with and without DDP, measured by the same script without TorchRec).
_TORCHREC_DIST_BASE, _TORCHREC_DIST_PER_RANK, _TORCHREC_SYNCS = 54, 3, 3
_TORCHREC_DDP_BASE = 2
#: All-to-all calls per model-parallel step; each pays ``world - 1`` latencies. Ours
#: (:data:`A2A_CALLS_PER_STEP`): the ids' lengths, the ids and the pooled embeddings forward, their
#: gradients backward. TorchRec's: the ids' splits too.
A2A_CALLS_PER_STEP = 4
A2A_CALLS: dict[str, int] = {"recnotebooks": A2A_CALLS_PER_STEP, "torchrec": 5}
#: The implementations of a sharded step the model prices (see :func:`op_count`).
IMPLEMENTATIONS = ("recnotebooks", "torchrec")
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
    """Seconds for an (m x k) @ (k x n) GEMM: ``2mnk / (peak * max_eff * prod d/(d+h))``, at the
    peak of the precision's GEMM type (``amp_fp16`` GEMMs run at the fp16 tensor-core peak)."""
    h = hw.gemm_half_dim
    eff = hw.gemm_max_efficiency * (m / (m + h)) * (n / (n + h)) * (k / (k + h))
    return 2.0 * m * n * k / (hw.flops(precision(dtype).gemm) * eff)


def _single_op_count(config: DLRMConfig) -> int:
    layers = len(config.bottom_mlp) + len(config.top_mlp)
    return _OPS_BASE + _OPS_PER_LAYER * layers + (_OPS_DOT if config.interaction == "dot" else 0)


def sharded_op_terms(config: DLRMConfig, plan: Plan, rank: int) -> dict[str, float]:
    """How many of each of :data:`SHARDED_OPS`' and :data:`SHARD_OPS`' terms ``plan``'s step has on
    ``rank`` (keys: those of :data:`SHARDED_OPS`, ``"<scheme>.plan"`` and ``"<scheme>.local"``)."""
    terms = dict.fromkeys(SHARDED_OPS, 0.0)
    terms.update({f"{k}.{w}": 0.0 for k in SHARD_OPS for w in ("plan", "local")})
    terms["base"] = 1.0
    terms["ddp_per_tensor"] = 2.0 * (len(config.bottom_mlp) + len(config.top_mlp))  # weight and bias
    terms["data_parallel_base"] = float(any(s.sharding == "data_parallel" for s in plan.shards))
    groups = set()
    for s in plan.shards:
        terms[f"{s.sharding}.plan"] += 1
        if s.rank == rank:
            terms[f"{s.sharding}.local"] += 1
            width = round(config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0))
            groups.add(
                (s.sharding == "data_parallel", width, "sum" if s.sharding == "row_wise" else config.pooling)
            )
    terms["collection"] = float(max(0, len(groups) - 1))
    return terms


def op_count(config: DLRMConfig, world_size: int = 1, model_parallel: bool = False, plan: Plan | None = None,
             implementation: str = "torchrec") -> int:  # fmt: skip
    """Operators launched by one training step of our DLRM (independent of table count on one
    process), and on ``world_size > 1`` ranks what the sharded step of ``implementation`` adds.

    * ``"recnotebooks"``: **our** step (:class:`recnotebooks.dist.HybridParallelDLRM`, what
      ``recnb train --world-size``/``--distributed`` runs, on CPUs or GPUs), counted on our
      implementation: :func:`sharded_op_terms` of ``plan`` priced by :data:`SHARDED_OPS` and
      :data:`SHARD_OPS`, the slowest rank's count (it grows with the shards: a Python loop each);
    * ``"torchrec"`` (the default, as :func:`recnotebooks.perf.cost.estimate`'s): TorchRec's
      DistributedModelParallel with fused kernels (what the published GPU runs and the paper's
      clusters ran): a fixed count and one per rank, not per table.

    Without a plan, ``model_parallel`` means the tables round-robin table-wise, otherwise all
    data-parallel; with one, ``model_parallel`` is read from it.
    """
    world_size = check_int("world_size", world_size, lo=1)
    check_choice("implementation", implementation, IMPLEMENTATIONS)
    ops = _single_op_count(config)
    if world_size == 1:
        return ops
    if plan is None:
        shards = tuple(
            TableShard(t.name, k % world_size) if model_parallel else TableShard(t.name, r, "data_parallel")
            for k, t in enumerate(config.tables)
            for r in (range(1) if model_parallel else range(world_size))
        )
        plan = Plan(world_size, shards)
    elif plan.world_size != world_size:
        raise ValueError(f"plan is for {plan.world_size} ranks but world_size={world_size}")
    if implementation == "torchrec":
        tensors = 2 * (len(config.bottom_mlp) + len(config.top_mlp))  # a weight and a bias per layer
        ops += _TORCHREC_DDP_BASE + SHARDED_OPS["ddp_per_tensor"] * tensors
        if any(s.sharding != "data_parallel" for s in plan.shards):
            ops += _TORCHREC_DIST_BASE + _TORCHREC_DIST_PER_RANK * world_size + _TORCHREC_SYNCS
        return int(ops)
    weights = {
        **SHARDED_OPS,
        **{f"{k}.{w}": v[i] for k, v in SHARD_OPS.items() for i, w in enumerate(("plan", "local"))},
    }
    extra = max(
        sum(weights[k] * n for k, n in sharded_op_terms(config, plan, r).items()) for r in range(world_size)
    )
    return ops + round(extra)


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
    elementwise tail at ``hbm_bw`` (the bottom tower's first layer needs no input gradient).
    Under mixed precision, the casts at ``hbm_bw``: each weight to half and its gradient back,
    and the tower's input where it arrives wider (fp32 dense features; a ``"cat"`` interaction's
    fp32 concatenation)."""
    p = precision(dtype)
    layers = config.mlp_layers(which)
    top_input = p.activation_bytes if config.interaction == "dot" else p.concat_bytes
    arrives = 4 if which == "bottom" else top_input  # fp32 dense features into the bottom tower
    casts = local_batch * layers[0][0] * p.input_cast_bytes(arrives)
    seconds, moved = casts / hw.hbm_bw, casts
    for j, (i, o) in enumerate(layers):
        seconds += gemm_time(hw, local_batch, o, i, dtype)  # forward
        if not (which == "bottom" and j == 0):
            seconds += gemm_time(hw, local_batch, i, o, dtype)  # input gradient
        seconds += gemm_time(hw, i, o, local_batch, dtype)  # weight gradient
        elementwise = local_batch * o * p.activation_bytes * _MLP_ELEMENTWISE_PASSES
        elementwise += (i + 1) * o * p.cast_bytes_per_weight()  # the weight and bias casts
        moved += elementwise
        seconds += elementwise / hw.hbm_bw
    return Work(seconds, moved)


def interaction(config: DLRMConfig, hw: Hardware, local_batch: float, dtype: str) -> Work:
    """Concatenating the features (three passes over inputs and outputs), and for ``"dot"``
    our DotInteraction's GEMMs: ``X X^T`` per sample, then a 0/1 selection GEMM of the pairs.
    The features' concatenation is in the widest of its inputs' types (``concat_bytes``: fp32
    under AMP, as ``torch.cat`` promotes), cast to half for the GEMMs (and back backward);
    the output in the activations' type."""
    p = precision(dtype)
    # under AMP the dot interaction runs in fp32 (autocast covers the MLPs only, as NVIDIA's DLRM
    # and our DotInteraction do): fp32 GEMMs, fp32 output
    gdt = "fp32" if p.casts and config.interaction == "dot" else dtype
    f, d, eb, cb = config.num_interaction_features, config.embedding_dim, p.activation_bytes, p.concat_bytes
    if p.casts and config.interaction == "dot":
        eb = cb
    out_bytes = eb if config.interaction == "dot" else cb
    moved = 3 * local_batch * (f * d * cb * 2 + config.interaction_output_dim * out_bytes * 2)
    if config.interaction == "dot" and not p.casts:
        moved += local_batch * f * d * p.input_cast_bytes(cb)  # the concatenation cast for the GEMMs
    seconds = moved / hw.hbm_bw
    if config.interaction == "dot":
        pairs = config.interaction_output_dim - config.bottom_mlp[-1]
        seconds += 2 * gemm_time(hw, local_batch * f, f, d, gdt)  # X X^T and the (G + G^T) X backward
        seconds += gemm_time(hw, local_batch, pairs, f * f, gdt) + gemm_time(
            hw, local_batch, f * f, pairs, gdt
        )
        seconds += local_batch * f * f * eb * 4 / hw.hbm_bw  # G + G^T
    return Work(seconds, moved)


def dense_optimizer(config: DLRMConfig, hw: Hardware, dtype: str) -> Work:
    """Adagrad over every MLP parameter: a few streaming passes at ``hbm_bw`` over the weights and
    their state as stored (fp32 master weights under AMP), plus the loss-scale pass over the
    gradients where the precision has one (AMP fp16's unscale + inf check)."""
    p = precision(dtype)
    moved = config.dense_parameters * (p.weight_bytes * _ADAGRAD_PASSES + p.loss_scale_bytes_per_grad())
    return Work(moved / hw.hbm_bw, moved)


def overhead(config: DLRMConfig, hw: Hardware, world_size: int, model_parallel: bool,
             plan: Plan | None = None, implementation: str = "torchrec") -> float:  # fmt: skip
    """Host time to launch the step's operators (``op_overhead_s`` each; :func:`op_count` of
    ``plan`` in ``implementation``) plus ``step_overhead_s``."""
    ops = op_count(config, world_size, model_parallel, plan, implementation)
    return ops * hw.op_overhead_s + hw.step_overhead_s


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
    rows: float = 0.0  #: rows this shard holds


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
    shards by their share of the rank's lookups. On several ranks, one more access per
    data-parallel shard follows the plan's: the update of every row (:func:`_every_row_update`)."""
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
    row_bytes = [d * precision(dtype).embedding_bytes for d in dims]
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
    out = [
        ShardAccess(s, f, d, rb, b, n, float(u), h, c, float(r))
        for s, f, d, rb, b, n, u, h, c, r in zip(
            shards, fracs, dims, row_bytes, served, lookups, distinct, llc, hits, rows, strict=True
        )
    ]
    return out + _every_row_update(out, plan.world_size)


def _every_row_update(accesses: list[ShardAccess], world: int) -> list[ShardAccess]:
    """What our data-parallel tables add on ``world > 1`` ranks (recnotebooks.dist's
    ``ShardedEmbeddingBagCollection.sync_data_parallel_gradients``): the replica's dense gradient
    is all-reduced (the ``all_reduce`` component), then recorded back by a forward and backward
    over **every** row of each table, each its own bag (a rank's data-parallel tables padded to
    its largest one's rows: that many bags each), and the optimizer updates every row. One
    access per data-parallel shard with every row looked up once and distinct (no last-level
    cache: each row is touched once). The dense gradient's materialisation (one pass over the
    rows) is not priced; the batch's own distinct-row update, which this replaces, still is."""
    if world <= 1:
        return []
    dp = [a for a in accesses if a.shard.sharding == "data_parallel"]
    bags: dict[int, float] = {}
    for a in dp:
        bags[a.shard.rank] = max(bags.get(a.shard.rank, 0.0), a.rows)
    return [
        ShardAccess(
            a.shard,
            a.row_fraction,
            a.dim,
            a.row_bytes,
            bags[a.shard.rank],
            a.rows,
            a.rows,
            0.0,
            a.cache_hit_rate,
        )  # fmt: skip
        for a in dp
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
        remote += rows[s.table] * share * (dim * precision(dtype).embedding_bytes + state_bytes)
    return math.ceil(remote / PARAMETER_SERVER.host_mem_bytes) if remote > 0 else 0


# ----- collectives ---------------------------------------------------------------------------
def nic_per_device(hw: Hardware, gpus: int) -> float:
    """A GPU reaches the network through its own PCIe link (GPUDirect RDMA), sharing the node's
    NICs with the other GPUs in use; a CPU node has all of them."""
    return min(hw.nic_bw / gpus, hw.host_link_bw) if hw.kind == "gpu" else hw.nic_bw


def all_to_all_bytes(config: DLRMConfig, plan: Plan, local_batch: float, dtype: str) -> list[float]:
    """Per rank: bytes the step's all-to-alls put on its link (bag lengths and ids forward,
    pooled embeddings forward, their gradients backward; each collective counted by the larger
    of what the rank sends and receives), from :func:`recnotebooks.perf.traffic.collective_bytes`."""
    rows = traffic.collective_bytes(config, plan, local_batch, dtype=dtype, dense=False)
    return traffic.volumes(rows, plan.world_size)["all_to_all"]


def _collective(volume: float, world: int, gpus: int, hw: Hardware, nic: float, steps: int) -> float:
    """Seconds to move ``volume`` bytes per device: the share to devices in this node over NVLink,
    the rest over this device's share of the node's NICs, plus ``steps`` latencies."""
    if world <= 1:
        return 0.0
    inside = (gpus - 1) / (world - 1)
    return (
        max(volume * inside / hw.intra_node_bw, volume * (1 - inside) / nic) + steps * hw.collective_latency_s
    )


def all_to_all(volume: float, world: int, gpus: int, hw: Hardware, nic: float,
               calls: int = A2A_CALLS_PER_STEP) -> float:  # fmt: skip
    """The step's all-to-alls (``calls`` of them, :data:`A2A_CALLS` of the implementation;
    pairwise: ``world - 1`` latencies each)."""
    if volume <= 0:  # nothing to exchange when every table is data-parallel
        return 0.0
    return _collective(volume, world, gpus, hw, nic, steps=calls * (world - 1))


def all_reduce(volume: float, world: int, gpus: int, hw: Hardware, nic: float) -> float:
    """Ring all-reduce of the data-parallel gradients: ``volume`` bytes per device (``2(p-1)/p * S``
    of ``S`` bytes: :func:`recnotebooks.perf.traffic.collective_bytes`), ``2(p-1)`` latencies."""
    return _collective(volume, world, gpus, hw, nic, steps=2 * (world - 1))


def overhead_of_remote_rows(hw: Hardware) -> float:
    """A rank with rows on a parameter server waits for two round trips (lookup and update)."""
    return 2 * hw.collective_latency_s
