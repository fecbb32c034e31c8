"""Per-iteration cost model: a DLRM on some hardware, placement and parallelism → time per rank.

:func:`estimate` breaks one training step down per rank into the components the seed
paper reasons with (every number here is **modeled**):

* ``data_loading`` (host reads the batch), ``host_to_device`` (PCIe copy of the inputs);
* ``embedding_forward`` (row gathers + pooling) and ``embedding_backward`` (pooled
  gradients, grouping lookups by row, and the fused optimizer's read-modify-write of each
  *distinct* row and its state) — traffic counts dimension, dtype, pooling and the unique
  ids a Zipf-skewed batch touches, at the bandwidth of where the rows live (device memory,
  host DRAM over PCIe as UVM does, a device cache with a hit rate, or a parameter server
  across the network);
* ``bottom_mlp``, ``interaction``, ``top_mlp`` (forward and backward GEMMs; GEMM time
  uses an efficiency curve over the GEMM's shape, so small, skinny GEMMs waste a GPU) and
  ``dense_optimizer``;
* ``all_to_all`` (model-parallel pooled embeddings and their gradients, plus the ids) and
  ``all_reduce`` (data-parallel gradients), ring/pairwise formulas over NVLink inside a
  node and the NICs across nodes;
* ``overhead``: operators launched x per-operator host cost (a sharded step launches more:
  distribution of ids and pooled embeddings, DDP's reducer), plus a fixed per-step cost.

Derived: step time with and without compute/communication overlap, throughput, device
busy fraction, achieved FLOP/s over peak, device-memory bandwidth utilisation, energy per
million samples. Memory per device comes from :mod:`recnotebooks.perf.memory`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from recnotebooks.config import DLRMConfig
from recnotebooks.perf.access import expected_unique_many, hit_rate_many
from recnotebooks.perf.hardware import DTYPE_BYTES, Hardware, hardware
from recnotebooks.perf.memory import MemoryReport, memory_report
from recnotebooks.perf.plan import PLACEMENTS, Plan, single_device_plan

__all__ = ["A2A_CALLS_PER_STEP", "COMPONENTS", "COMPUTE", "COMMUNICATION", "CostResult", "estimate", "gemm_time",
           "op_count", "UVM_EFFICIENCY"]  # fmt: skip

COMPONENTS = ("data_loading", "host_to_device", "embedding_forward", "embedding_backward", "bottom_mlp",
              "interaction", "top_mlp", "dense_optimizer", "all_to_all", "all_reduce", "overhead")  # fmt: skip
COMPUTE = (
    "embedding_forward",
    "embedding_backward",
    "bottom_mlp",
    "interaction",
    "top_mlp",
    "dense_optimizer",
)
COMMUNICATION = ("host_to_device", "all_to_all", "all_reduce")
#: Random row reads over PCIe through unified memory reach about a tenth of the link's
#: bandwidth (TorchRec planner constant, REFERENCE.md §5; its UVM example: 0.62 s vs 0.06 s
#: per iteration with a cache in HBM).
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


def op_count(config: DLRMConfig, world_size: int = 1, model_parallel: bool = False) -> int:
    """Operators launched by one training step of our DLRM (independent of table count).

    With ``world_size > 1`` the dense part is data-parallel (DDP's gradient reducer adds
    operators per parameter tensor); ``model_parallel`` adds the input and output
    distribution of sharded embeddings (all-to-alls, split bookkeeping, host syncs).
    """
    _pos_int("world_size", world_size)
    layers = len(config.bottom_mlp) + len(config.top_mlp)
    ops = _OPS_BASE + _OPS_PER_LAYER * layers + (_OPS_DOT if config.interaction == "dot" else 0)
    if world_size > 1:
        ops += _OPS_DDP_BASE + _OPS_DDP_PER_TENSOR * 2 * layers  # a weight and a bias per layer
        if model_parallel:
            ops += _OPS_DIST_BASE + _OPS_DIST_PER_RANK * world_size + _DIST_SYNCS
    return ops


def gemm_time(hw: Hardware, m: float, n: float, k: float, dtype: str = "fp32") -> float:
    """Seconds for an (m x k) @ (k x n) GEMM: ``2mnk / (peak * max_eff * prod d/(d+h))``."""
    h = hw.gemm_half_dim
    eff = hw.gemm_max_efficiency * (m / (m + h)) * (n / (n + h)) * (k / (k + h))
    return 2.0 * m * n * k / (hw.flops(dtype) * eff)


@dataclass
class CostResult:
    """Modeled cost of one training step; ``per_rank[r][component]`` in seconds."""

    config: str
    hardware: str
    world_size: int
    nodes: int
    batch_size: int
    dtype: str
    per_rank: list[dict[str, float]]
    step_time: float
    step_time_overlap: float
    throughput: float
    throughput_overlap: float
    busy_fraction: float
    flops_efficiency: float
    hbm_utilisation: float
    joules_per_million_samples: float
    memory: MemoryReport
    notes: list[str] = field(default_factory=list)
    source: str = "modeled"

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def slowest_rank(self) -> int:
        return max(range(self.world_size), key=lambda r: sum(self.per_rank[r].values()))

    def breakdown(self) -> dict[str, float]:
        """Components of the slowest rank (what bounds the step)."""
        return dict(self.per_rank[self.slowest_rank])

    def table(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows ``{rank, component, seconds, share, source="modeled", **extra}``."""
        rows = []
        for r, comp in enumerate(self.per_rank):
            tot = sum(comp.values()) or 1.0
            rows += [{"rank": r, "component": c, "seconds": v, "share": v / tot, "source": self.source,
                      "hardware": self.hardware, **extra} for c, v in comp.items()]  # fmt: skip
        return rows

    def summary(self) -> dict[str, object]:
        """Headline numbers as plain data (JSON-ready)."""
        return {
            "config": self.config, "hardware": self.hardware, "world_size": self.world_size, "nodes": self.nodes,
            "batch_size": self.batch_size, "dtype": self.dtype, "source": self.source,
            "step_time_s": self.step_time, "step_time_overlap_s": self.step_time_overlap,
            "throughput": self.throughput, "throughput_overlap": self.throughput_overlap,
            "busy_fraction": self.busy_fraction, "flops_efficiency": self.flops_efficiency,
            "hbm_utilisation": self.hbm_utilisation, "joules_per_million_samples": self.joules_per_million_samples,
            "fits": self.fits, "reasons": list(self.memory.reasons), "breakdown_s": self.breakdown(),
            "memory_per_device_bytes": [d["total"] for d in self.memory.device], "notes": list(self.notes),
        }  # fmt: skip


def _pos_int(name: str, v: object, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return v


def estimate(
    config: DLRMConfig,
    hw: Hardware | str = "this_machine",
    *,
    batch_size: int,
    gpus: int = 1,
    nodes: int = 1,
    plan: Plan | None = None,
    placement: str = "hbm",
    cache_hit_rate: float | None = None,
    dtype: str = "fp32",
    zipf_exponent: float = 1.05,
    sparse_optimizer: str = "rowwise_adagrad",
    dense_optimizer: str = "adagrad",
) -> CostResult:
    """Model one training step of ``config`` at global ``batch_size`` on ``gpus`` x ``nodes``.

    Without ``plan``, one device holds every table at ``placement`` (with
    ``cache_hit_rate`` for ``"cache"``); several devices get the planner's greedy
    table-wise plan when it fits, else its cost-based plan (which splits rows, and moves
    what fits nowhere behind a cache). Raises ``ValueError`` naming the bad argument; a plan that does not
    fit in memory still returns numbers, with ``fits=False`` and the reasons.
    """
    if not isinstance(config, DLRMConfig):
        raise TypeError(f"config must be a DLRMConfig, got {type(config).__name__}")
    hw = hardware(hw) if isinstance(hw, str) else hw
    if not isinstance(hw, Hardware):
        raise TypeError(f"hw must be a Hardware or a preset name, got {type(hw).__name__}")
    _pos_int("batch_size", batch_size)
    _pos_int("gpus", gpus)
    _pos_int("nodes", nodes)
    if gpus > hw.devices:
        raise ValueError(f"gpus must be <= {hw.devices} (devices per {hw.name} node), got {gpus}")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {list(DTYPE_BYTES)}, got {dtype!r}")
    hw.flops(dtype)
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {list(PLACEMENTS)}, got {placement!r}")
    if placement == "cache" and (cache_hit_rate is None or not 0 <= cache_hit_rate <= 1):
        raise ValueError(f"cache_hit_rate must be in [0, 1] with placement='cache', got {cache_hit_rate!r}")
    world = gpus * nodes
    if batch_size < world:
        raise ValueError(f"batch_size must be >= the number of devices ({world}), got {batch_size}")
    if plan is None:
        if world == 1:
            plan = single_device_plan(config, placement, cache_hit_rate)
        else:
            plan = _default_plan(config, hw, world, placement, cache_hit_rate, batch_size, dtype)
    if plan.world_size != world:
        raise ValueError(f"plan is for {plan.world_size} ranks but gpus x nodes = {world}")
    plan.check(config)
    eb = DTYPE_BYTES[dtype]
    local_b = batch_size / world
    tables = {t.name: t for t in config.tables}
    notes: list[str] = []

    # ----- per-sample quantities shared by every rank ---------------------------------------
    in_bytes = 4 * config.num_dense + INDEX_BYTES * config.lookups_per_sample + 4 * config.num_tables + 4
    data = local_b * in_bytes * 2 / hw.host_mem_bw
    h2d = local_b * in_bytes / hw.host_link_bw if hw.kind == "gpu" else 0.0
    mlp_bytes = 0.0

    def mlp(which: str) -> float:
        nonlocal mlp_bytes
        t = 0.0
        for j, (i, o) in enumerate(config.mlp_layers(which)):
            t += gemm_time(hw, local_b, o, i, dtype)  # forward
            if not (which == "bottom" and j == 0):
                t += gemm_time(hw, local_b, i, o, dtype)  # input gradient
            t += gemm_time(hw, i, o, local_b, dtype)  # weight gradient
            ew = local_b * o * eb * 7  # bias + ReLU forward (r+w), ReLU backward (2r+w), bias grad (r)
            mlp_bytes += ew
            t += ew / hw.hbm_bw
        return t

    bottom, top = mlp("bottom"), mlp("top")
    f, d = config.num_interaction_features, config.embedding_dim
    cat_bytes = local_b * f * d * eb * 2 + local_b * config.interaction_output_dim * eb * 2
    inter = cat_bytes * 3 / hw.hbm_bw
    if config.interaction == "dot":  # as our DotInteraction runs it: bmm X X^T, then a 0/1 selection GEMM
        pairs = config.interaction_output_dim - config.bottom_mlp[-1]
        inter += 2 * gemm_time(hw, local_b * f, f, d, dtype)  # X X^T and the (G + G^T) X backward
        inter += gemm_time(hw, local_b, pairs, f * f, dtype) + gemm_time(hw, local_b, f * f, pairs, dtype)
        inter += local_b * f * f * eb * 4 / hw.hbm_bw  # G + G^T
    mlp_bytes += cat_bytes * 3
    p = config.dense_parameters
    # torch.optim.Adagrad's update makes ~11 passes over each parameter (addcmul_ on the state,
    # sqrt, add_ eps, addcdiv_ on the weight: reads and writes counted)
    dense_opt = p * eb * 11 / hw.hbm_bw
    sharded = world > 1 and any(sh.sharding != "data_parallel" for sh in plan.shards)
    overhead = op_count(config, world, sharded) * hw.op_overhead_s + hw.step_overhead_s

    # ----- embeddings per rank -----------------------------------------------------------------
    per_rank: list[dict[str, float]] = []
    hbm_bytes_rank: list[float] = []
    dp_bytes = 0.0
    mp_dims = 0.0  # pooled width of model-parallel tables summed over all ranks (for receives)
    for s in plan.shards:
        if s.sharding != "data_parallel":
            mp_dims += config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0)
        elif s.rank == 0:
            dp_bytes += tables[s.table].num_rows * config.embedding_dim * eb
    # A device reaches the network through its own PCIe link (GPUDirect RDMA), sharing the
    # node's NICs with the other devices in use.
    nic_per_dev = min(hw.nic_bw / gpus, hw.host_link_bw) if hw.kind == "gpu" else hw.nic_bw
    # Access statistics of every shard in one vectorised evaluation: distinct rows touched and
    # the share of lookups that hit the last-level cache (hot rows of a skewed table).
    shards = plan.shards
    state = 4.0 if sparse_optimizer == "rowwise_adagrad" else 0.0
    frac_of = [s.row_fraction if s.sharding == "row_wise" else 1.0 for s in shards]
    rows_of = [max(1, int(tables[s.table].num_rows * f)) for s, f in zip(shards, frac_of, strict=True)]
    look_of = [_served(s, local_b, batch_size) * tables[s.table].pooling_factor * f
               for s, f in zip(shards, frac_of, strict=True)]  # fmt: skip
    uniq_of = expected_unique_many(look_of, rows_of, zipf_exponent) if shards else []
    by_rank: dict[int, list[int]] = {}
    for i, s in enumerate(shards):
        by_rank.setdefault(s.rank, []).append(i)
    llc_of = [0.0] * len(shards)
    if hw.llc_bytes > 0 and hw.llc_speedup > 1 and shards:
        cached = []
        for i, s in enumerate(shards):
            total = sum(look_of[j] / frac_of[j] for j in by_rank[s.rank]) or 1.0
            rb_i = config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0) * eb
            cached.append(hw.llc_bytes * (look_of[i] / frac_of[i]) / total / (rb_i + state))
        llc_of = list(hit_rate_many(cached, rows_of, zipf_exponent))
    for r in range(world):
        mine = by_rank.get(r, [])
        fwd = bwd = 0.0
        hbm_b = mlp_bytes + p * eb * 11
        send = ids_in = 0.0
        my_dims = 0.0
        rpc = False
        for i in mine:
            s = shards[i]
            t = tables[s.table]
            dim = config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0)
            rb = dim * eb
            served = local_b if s.sharding == "data_parallel" else float(batch_size)
            frac, lookups, uniq = frac_of[i], look_of[i], float(uniq_of[i])
            row_traffic_f = lookups * rb
            row_traffic_b = uniq * (rb + state) * 2
            local = (
                served * rb * 2 + lookups * INDEX_BYTES + lookups * rb
            )  # pooled out/grad, ids, grad per lookup
            gbw = hw.hbm_bw * hw.gather_efficiency * rb / (rb + hw.gather_half_row_bytes)
            gbw /= (1 - llc_of[i]) + llc_of[i] / hw.llc_speedup  # hot rows hit the last-level cache
            place = s.placement if hw.kind == "gpu" or s.placement == "remote" else "hbm"
            sort = lookups / hw.sort_rate
            if place == "hbm":
                fwd += row_traffic_f / gbw
                bwd += row_traffic_b / gbw
                hbm_b += row_traffic_f + row_traffic_b
            elif place == "host":
                uvm = hw.host_link_bw * UVM_EFFICIENCY
                fwd += row_traffic_f / uvm
                bwd += row_traffic_b / uvm
            elif place == "cache":  # hits from device memory; misses read like UVM (no faster than "host")
                h = float(s.cache_hit_rate or 0.0)
                uvm = hw.host_link_bw * UVM_EFFICIENCY
                fwd += h * row_traffic_f / gbw + (1 - h) * row_traffic_f / uvm
                bwd += h * row_traffic_b / gbw + (1 - h) * row_traffic_b / uvm
                hbm_b += h * (row_traffic_f + row_traffic_b)
            else:  # remote parameter server pools rows itself and ships pooled vectors
                net = (served * rb + lookups * INDEX_BYTES) / nic_per_dev
                ps = row_traffic_f / (hw.host_mem_bw * hw.gather_efficiency)
                fwd += max(net, ps)
                # the server groups the lookups by row too, before its row-wise update
                bwd += max(
                    served * rb / nic_per_dev, row_traffic_b / (hw.host_mem_bw * hw.gather_efficiency) + sort
                )
                rpc = True
                local = served * rb * 2
            fwd += (served * rb + lookups * INDEX_BYTES) / hw.hbm_bw
            bwd += (served * rb + lookups * rb) / hw.hbm_bw + (sort if place != "remote" else 0.0)
            hbm_b += local
            if s.sharding != "data_parallel" and world > 1:
                if s.sharding == "row_wise":  # reduce-scatter of partial pooled vectors
                    send += batch_size * rb * (world - 1) / world
                else:
                    send += (batch_size - local_b) * rb
                ids_in += (batch_size - local_b) * t.pooling_factor * frac * INDEX_BYTES
                my_dims += dim
        comp = dict.fromkeys(COMPONENTS, 0.0)
        comp.update(data_loading=data, host_to_device=h2d, embedding_forward=fwd, embedding_backward=bwd,
                    bottom_mlp=bottom, interaction=inter, top_mlp=top, dense_optimizer=dense_opt,
                    overhead=overhead + (2 * hw.collective_latency_s if rpc else 0.0))  # fmt: skip
        if world > 1:
            recv = local_b * (mp_dims - my_dims) * eb
            vol = 2 * max(send, recv) + ids_in  # forward + backward, plus the ids
            if vol > 0:  # nothing to exchange when every table is data-parallel
                comp["all_to_all"] = _collective(vol, world, gpus, nodes, hw, nic_per_dev,
                                                 steps=A2A_CALLS_PER_STEP * (world - 1))  # fmt: skip
            grad = p * eb + dp_bytes
            comp["all_reduce"] = _collective(2 * grad * (world - 1) / world, world, gpus, nodes, hw, nic_per_dev,
                                             steps=2 * (world - 1))  # fmt: skip
        per_rank.append(comp)
        hbm_bytes_rank.append(hbm_b)

    # ----- derived ------------------------------------------------------------------------------
    serial = [sum(c.values()) for c in per_rank]
    overlap = [max(sum(c[k] for k in COMPUTE) + c["overhead"], sum(c[k] for k in COMMUNICATION), c["data_loading"])
               for c in per_rank]  # fmt: skip
    step, step_o = max(serial), max(overlap)
    busy = sum(sum(c[k] for k in COMPUTE) for c in per_rank) / (world * step)
    flops = config.total_flops_per_sample() * batch_size
    mem = memory_report(config, hw, plan, batch_size, gpus=gpus, dtype=dtype, sparse_optimizer=sparse_optimizer,
                        dense_optimizer=dense_optimizer, zipf_exponent=zipf_exponent)  # fmt: skip
    power = world * hw.power_w + nodes * hw.host_power_w
    if not mem.fits:
        notes.append("does not fit: " + "; ".join(mem.reasons))
    for v in (step, step_o):
        if not math.isfinite(v) or v <= 0:
            raise ValueError(
                f"the model produced a step time of {v!r}; check the hardware numbers of {hw.name}"
            )
    return CostResult(
        config=config.name, hardware=hw.name, world_size=world, nodes=nodes, batch_size=batch_size, dtype=dtype,
        per_rank=per_rank, step_time=step, step_time_overlap=step_o, throughput=batch_size / step,
        throughput_overlap=batch_size / step_o, busy_fraction=busy,
        flops_efficiency=flops / step / (world * hw.flops(dtype)),
        hbm_utilisation=max(hbm_bytes_rank) / step / hw.hbm_bw,
        joules_per_million_samples=power * step / batch_size * 1e6, memory=mem, notes=notes,
    )  # fmt: skip


def _default_plan(config: DLRMConfig, hw: Hardware, world: int, placement: str, hit: float | None,
                  batch_size: int, dtype: str) -> Plan:  # fmt: skip
    from recnotebooks.perf.planner import RESERVE, plan_tables, table_bytes

    if config.num_tables >= world:
        plan = plan_tables(config, hw, world, strategy="greedy", placement=placement, cache_hit_rate=hit,
                           batch_size=batch_size, dtype=dtype)  # fmt: skip
        sizes = table_bytes(config, dtype)
        load = [sum(sizes[s.table] for s in plan.on_rank(r)) for r in range(world)]
        if placement != "hbm" or max(load) <= hw.hbm_bytes * (1 - RESERVE):
            return plan
    return plan_tables(config, hw, world, strategy="cost", placement=placement, cache_hit_rate=hit,
                       batch_size=batch_size, dtype=dtype)  # fmt: skip


def _served(s: object, local_b: float, batch_size: int) -> float:
    return local_b if getattr(s, "sharding", "") == "data_parallel" else float(batch_size)


def _collective(bytes_: float, world: int, gpus: int, nodes: int, hw: Hardware, nic_per_dev: float,
                steps: int) -> float:  # fmt: skip
    """Seconds to move ``bytes_`` per device: the share to devices in this node over NVLink,
    the rest over this device's share of the node's NICs, plus ``steps`` latencies."""
    if world <= 1:
        return 0.0
    inside = (gpus - 1) / (world - 1)
    t_in = bytes_ * inside / hw.intra_node_bw
    t_out = bytes_ * (1 - inside) / nic_per_dev
    return max(t_in, t_out) + steps * hw.collective_latency_s
