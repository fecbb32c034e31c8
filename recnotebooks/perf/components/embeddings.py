"""One shard's embedding work at its placement (every number **modeled**).

One function per placement of a shard's rows (what it touches: :mod:`.lookups`):
:func:`embedding_in_hbm`, :func:`embedding_in_host` (UVM over PCIe), :func:`embedding_in_cache`
(a device cache in front of host DRAM), :func:`embedding_on_parameter_server` (a remote
:data:`PARAMETER_SERVER` pools rows and ships pooled vectors; :func:`parameter_servers` counts
the servers a plan needs) and :func:`embedding_pooled_by_host` (the host's own CPUs do that, as
on Zion); :func:`embedding_shard` picks one and adds the device's own pooling work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from recnotebooks.config import DLRMConfig, state_floats_per_row
from recnotebooks.perf import traffic
from recnotebooks.perf.components.lookups import ShardAccess
from recnotebooks.perf.hardware import HARDWARE, Hardware
from recnotebooks.perf.precision import precision
from recnotebooks.plan import Plan

__all__ = ["INDEX_BYTES", "PARAMETER_SERVER", "UVM_EFFICIENCY", "Embedding", "embedding_in_cache",
           "embedding_in_hbm", "embedding_in_host", "embedding_on_parameter_server",
           "embedding_pooled_by_host", "embedding_shard", "gather_bandwidth", "parameter_servers",
           "update_bandwidth", "uvm_bandwidth"]  # fmt: skip

#: Random row reads over PCIe through unified memory reach about a tenth of the link's
#: bandwidth (TorchRec's planner constant for UVM; its UVM example ran 0.62 s vs 0.06 s per
#: iteration with a cache in HBM: github.com/pytorch/torchrec, torchrec/distributed/planner/constants.py).
UVM_EFFICIENCY = 0.1
INDEX_BYTES = traffic.INDEX_BYTES  #: an id as our sharded step sends it (int64)
#: A sparse parameter server is one node of the CPU training cluster (dual-socket Skylake-SP):
#: its DRAM holds the remote tables, its CPUs pool and update rows, its power counts.
PARAMETER_SERVER: Hardware = HARDWARE["cpu_cluster"]


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
    return _from_memory(hw, row_bytes) / _llc_time_share(llc_hit_rate, hw.llc_speedup)


def update_bandwidth(hw: Hardware, row_bytes: float, llc_hit_rate: float = 0.0) -> float:
    """The sparse optimizer's read-modify-writes of distinct rows (and their state): the
    gather's bandwidth from memory at ``update_efficiency`` of it, faster by
    ``hw.update_cache_speedup`` for the rows in the last-level cache."""
    bw = _from_memory(hw, row_bytes) * hw.update_efficiency
    return bw / _llc_time_share(llc_hit_rate, hw.update_cache_speedup)


def _from_memory(hw: Hardware, row_bytes: float) -> float:
    return hw.hbm_bw * hw.gather_efficiency * row_bytes / (row_bytes + hw.gather_half_row_bytes)


def _llc_time_share(hit_rate: float, speedup: float) -> float:
    """Time of traffic with ``hit_rate`` of it from a cache ``speedup`` times faster, over all from memory."""
    return (1 - hit_rate) + hit_rate / speedup


def uvm_bandwidth(hw: Hardware) -> float:
    """Random row reads of host DRAM over PCIe through unified memory (``UVM_EFFICIENCY`` of the link)."""
    return hw.host_link_bw * UVM_EFFICIENCY


def _row_traffic(a: ShardAccess) -> tuple[float, float]:
    """Bytes of rows read forward (one per lookup) and read + written backward (each distinct
    row and its optimizer state, ``a.state_bytes``, once: the fused optimizer; exact Adagrad's
    state is as wide as the row)."""
    return a.lookups * a.row_bytes, a.distinct_rows * (a.row_bytes + a.state_bytes) * 2


def _pooling_work(a: ShardAccess, hw: Hardware, sort: float) -> Embedding:
    """What any placement adds on the device: ids in and pooled vectors out forward; pooled
    gradients and a gradient per lookup backward, and grouping the lookups by row (``sort``).
    Forward, each bag (one per served sample) costs its row bytes x ``hw.bag_seconds_per_byte``."""
    bags = a.served * a.row_bytes * hw.bag_seconds_per_byte
    forward = (a.served * a.row_bytes + a.lookups * INDEX_BYTES) / hw.hbm_bw + bags
    backward = (a.served * a.row_bytes + a.lookups * a.row_bytes) / hw.hbm_bw + sort
    moved = a.served * a.row_bytes * 2 + a.lookups * INDEX_BYTES + a.lookups * a.row_bytes
    return Embedding(forward, backward, moved)


def embedding_in_hbm(a: ShardAccess, hw: Hardware) -> Embedding:
    """Rows in device memory (a CPU node's own DRAM), gathered at :func:`gather_bandwidth`;
    backward each distinct row and its state are updated at :func:`update_bandwidth`."""
    fwd, bwd = _row_traffic(a)
    gather, update = (
        gather_bandwidth(hw, a.row_bytes, a.llc_hit_rate),
        update_bandwidth(hw, a.row_bytes, a.llc_hit_rate),
    )
    return Embedding(fwd / gather, bwd / update, fwd + bwd)


def embedding_in_host(a: ShardAccess, hw: Hardware) -> Embedding:
    """Rows in host DRAM read by the device over PCIe, as UVM does (:func:`uvm_bandwidth`)."""
    fwd, bwd = _row_traffic(a)
    return Embedding(fwd / uvm_bandwidth(hw), bwd / uvm_bandwidth(hw), 0.0)


def embedding_in_cache(a: ShardAccess, hw: Hardware) -> Embedding:
    """Rows in host DRAM behind a device cache: the share ``h`` of row traffic that hits
    (``a.cache_hit_rate``) is gathered from device memory like :func:`embedding_in_hbm`; each
    miss costs what :func:`embedding_in_host` pays for a row, a random read over PCIe."""
    fwd, bwd = _row_traffic(a)
    h = a.cache_hit_rate
    bw, uvm = gather_bandwidth(hw, a.row_bytes, a.llc_hit_rate), uvm_bandwidth(hw)
    backward = h * bwd / update_bandwidth(hw, a.row_bytes, a.llc_hit_rate) + (1 - h) * bwd / uvm
    return Embedding(h * fwd / bw + (1 - h) * fwd / uvm, backward, h * (fwd + bwd))


def _pooled_by_cpus(a: ShardAccess, link_bw: float, gather_bw: float, sort_s: float) -> Embedding:
    """Rows pooled by CPUs next to their DRAM (gathering at ``gather_bw``), pooled vectors
    sent over a link of ``link_bw`` (forward: with the ids); backward the pooled gradients come
    back, the CPUs group the lookups by row (``sort_s``) and update their rows."""
    fwd_rows, bwd_rows = _row_traffic(a)
    forward = max((a.served * a.row_bytes + a.lookups * INDEX_BYTES) / link_bw, fwd_rows / gather_bw)
    backward = max(a.served * a.row_bytes / link_bw, bwd_rows / gather_bw + sort_s)
    return Embedding(forward, backward, 0.0)


def embedding_on_parameter_server(a: ShardAccess, nic: float, servers: float = 1.0) -> Embedding:
    """Rows on remote parameter servers (:data:`PARAMETER_SERVER` nodes), which pool them
    themselves and ship pooled vectors over this device's share of the network (``nic``
    bytes/s). ``servers`` is this rank's share of them (the plan's servers over the ranks
    that use them): their DRAM and CPUs serve every rank's lookups."""
    ps = PARAMETER_SERVER
    gather_bw = ps.host_mem_bw * ps.gather_efficiency * servers
    rows = _pooled_by_cpus(a, nic, gather_bw, a.lookups / (ps.sort_rate * servers))
    return Embedding(rows.forward, rows.backward, 0.0, remote=True)


def embedding_pooled_by_host(a: ShardAccess, hw: Hardware, gpus: int) -> Embedding:
    """Rows in host DRAM pooled by the host's own CPUs (``host_pools_embeddings``, as on Zion),
    pooled vectors sent over the device's PCIe link. The node's DRAM bandwidth and CPUs are
    shared by its ``gpus`` devices; CPU gathers and sorts run at a :data:`PARAMETER_SERVER`'s
    rates, scaled by the host's DRAM bandwidth (CPU sockets come with memory channels)."""
    ps = PARAMETER_SERVER
    share = hw.host_mem_bw / ps.host_mem_bw / gpus
    gather_bw = hw.host_mem_bw * ps.gather_efficiency / gpus
    return _pooled_by_cpus(a, hw.host_link_bw, gather_bw, a.lookups / (ps.sort_rate * share))


def embedding_shard(
    a: ShardAccess, hw: Hardware, nic: float, gpus: int = 1, servers: float = 1.0
) -> Embedding:
    """One shard's embedding work at its placement (a CPU node keeps non-remote rows in its DRAM);
    ``servers``: this rank's share of the parameter servers (see :func:`embedding_on_parameter_server`)."""
    place = a.shard.placement if hw.kind == "gpu" or a.shard.placement == "remote" else "hbm"
    if place == "remote" or (place == "host" and hw.host_pools_embeddings):
        rows = (
            embedding_on_parameter_server(a, nic, servers)
            if place == "remote"
            else embedding_pooled_by_host(a, hw, gpus)
        )
        local = _pooling_work(a, hw, 0.0)  # ids and pooled vectors on the device; no rows, no sort
        return Embedding(
            rows.forward + local.forward,
            rows.backward + local.backward,
            a.served * a.row_bytes * 2,
            remote=rows.remote,
        )
    placed = {"hbm": embedding_in_hbm, "host": embedding_in_host, "cache": embedding_in_cache}[place]
    rows, local = placed(a, hw), _pooling_work(a, hw, a.lookups / hw.sort_rate)
    if a.update_only:  # no forward: the gradient of every row is given, the optimizer applies it
        moved = a.distinct_rows * (a.row_bytes + a.state_bytes) * 2 + (a.served + a.lookups) * a.row_bytes
        return Embedding(0.0, rows.backward + local.backward, moved)
    return Embedding(
        rows.forward + local.forward, rows.backward + local.backward, rows.device_bytes + local.device_bytes
    )


def parameter_servers(config: DLRMConfig, plan: Plan, dtype: str, sparse_optimizer: str) -> int:
    """:data:`PARAMETER_SERVER` nodes needed to hold the plan's remote rows (and the fp32 state
    ``sparse_optimizer`` keeps for them) in their DRAM; 0 when no rows are remote. A trainer waits
    on them every step, so the energy of its step counts their power too."""
    rows = {t.name: t.num_rows for t in config.tables}
    remote = 0.0
    for s in plan.shards:
        if s.placement != "remote" or (s.sharding == "data_parallel" and s.rank > 0):
            continue  # a data-parallel table is one copy on the servers
        share = s.row_fraction if s.sharding == "row_wise" else 1.0
        dim = config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0)
        state = 4.0 * state_floats_per_row(sparse_optimizer, dim)
        remote += rows[s.table] * share * (dim * precision(dtype).embedding_bytes + state)
    return math.ceil(remote / PARAMETER_SERVER.host_mem_bytes) if remote > 0 else 0
