"""The components of one modeled training step, one small function each (every number **modeled**).

:func:`recnotebooks.perf.cost.estimate` adds these up per rank. Each function is a few lines
of bytes over a bandwidth or FLOPs over a throughput, with the :class:`Hardware` field it uses:

* the dense part, the same on every rank (:mod:`.dense`): :func:`data_loading`,
  :func:`host_to_device`, :func:`mlp` (bottom and top towers), :func:`interaction` (a DCN's
  :func:`cross_layers` within it),
  :func:`dense_optimizer`; and the host's :func:`overhead` (:mod:`.ops`: :func:`op_count`);
* the embeddings of one shard: :func:`shard_access` (:mod:`.lookups`: lookups, distinct rows and
  last-level cache hits under Zipf skew), then one function per placement of its rows
  (:mod:`.embeddings`) — :func:`embedding_in_hbm`, :func:`embedding_in_host` (UVM over PCIe),
  :func:`embedding_in_cache` (a device cache in front of host DRAM),
  :func:`embedding_on_parameter_server` (a remote server pools rows and ships pooled vectors;
  :func:`parameter_servers` counts the servers a plan needs) and
  :func:`embedding_pooled_by_host` (the host's own CPUs do that, as on Zion);
* the collectives (:mod:`.collectives`): :func:`all_to_all_seconds` (model-parallel pooled
  embeddings, their gradients and the ids) and :func:`all_reduce_seconds` (data-parallel gradients),
  as NCCL prices and picks them on the GPUs its model covers (:mod:`.nccl`, :func:`nccl_fabric`;
  :func:`all_reduce_priced` and :func:`all_to_all_priced` say which algorithm and why), else by an
  α-β formula (a CPU node's gloo).

Memory bandwidths count bytes read plus bytes written, as the spec sheets do. What ``dtype``
means (bytes of activations, weights and tables, the GEMM rate, the casts and loss scaling of
mixed precision) is read from its row of :data:`recnotebooks.perf.precision.PRECISIONS`.

This package re-exports the public names of its modules (``from recnotebooks.perf import
components as C`` then ``C.gemm_time``); a private helper is read from its own module. Each
function reads the names it calls from its own module: to patch one for every caller, patch it
there (``recnotebooks.perf.components.dense.gemm_time``).
"""

from __future__ import annotations

from recnotebooks.perf.components.collectives import (
    A2A_CALLS,
    A2A_CALLS_PER_STEP,
    EXPOSED_COMMUNICATION,
    HIERARCHICAL,
    NCCL_GPUS,
    CollectivePrice,
    all_reduce_priced,
    all_reduce_seconds,
    all_to_all_bytes,
    all_to_all_priced,
    all_to_all_seconds,
    domain_ranks,
    hierarchical_all_to_all_priced,
    hierarchical_all_to_all_seconds,
    nccl_fabric,
    nic_per_device,
    peers_over_pcie,
)
from recnotebooks.perf.components.dense import (
    Work,
    cross_layers,
    data_loading,
    dense_optimizer,
    gemm_time,
    host_to_device,
    input_bytes_per_sample,
    interaction,
    mlp,
)
from recnotebooks.perf.components.embeddings import (
    INDEX_BYTES,
    PARAMETER_SERVER,
    UVM_EFFICIENCY,
    Embedding,
    embedding_in_cache,
    embedding_in_hbm,
    embedding_in_host,
    embedding_on_parameter_server,
    embedding_pooled_by_host,
    embedding_shard,
    gather_bandwidth,
    parameter_servers,
    uvm_bandwidth,
)
from recnotebooks.perf.components.lookups import ShardAccess, cache_hit_rates, shard_access
from recnotebooks.perf.components.ops import (
    HUGECTR_DTYPES,
    IMPLEMENTATIONS,
    SHARD_OPS,
    SHARDED_OPS,
    op_count,
    overhead,
    overhead_of_remote_rows,
    sharded_extra_ops,
    sharded_op_terms,
)

__all__ = ["A2A_CALLS", "A2A_CALLS_PER_STEP", "EXPOSED_COMMUNICATION", "HIERARCHICAL", "HUGECTR_DTYPES",
           "IMPLEMENTATIONS",
           "INDEX_BYTES", "PARAMETER_SERVER", "hierarchical_all_to_all_seconds",
           "UVM_EFFICIENCY", "Embedding",
           "SHARDED_OPS", "SHARD_OPS", "ShardAccess", "Work", "all_reduce_seconds", "cache_hit_rates",
           "all_to_all_seconds", "all_to_all_bytes", "cross_layers", "data_loading",
           "dense_optimizer", "domain_ranks",
           "embedding_in_cache", "embedding_in_hbm", "embedding_in_host", "embedding_on_parameter_server",
           "embedding_pooled_by_host", "embedding_shard", "gather_bandwidth", "gemm_time", "host_to_device",
           "input_bytes_per_sample", "interaction", "mlp", "nic_per_device", "op_count", "overhead",
           "peers_over_pcie", "CollectivePrice", "NCCL_GPUS", "all_reduce_priced", "all_to_all_priced",
           "hierarchical_all_to_all_priced", "nccl_fabric",
           "overhead_of_remote_rows", "parameter_servers", "shard_access", "sharded_extra_ops",
           "sharded_op_terms",
           "uvm_bandwidth"]  # fmt: skip
