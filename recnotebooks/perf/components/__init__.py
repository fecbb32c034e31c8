"""The components of one modeled training step, one small function each (every number **modeled**).

:func:`recnotebooks.perf.cost.estimate` adds these up per rank. Each function is a few lines
of bytes over a bandwidth or FLOPs over a throughput, with the :class:`Hardware` field it uses:

* the dense part, the same on every rank (:mod:`.dense`): :func:`data_loading`,
  :func:`host_to_device`, :func:`mlp` (bottom and top towers), :func:`interaction`,
  :func:`dense_optimizer`; and the host's :func:`overhead` (:mod:`.ops`: :func:`op_count`);
* the embeddings of one shard: :func:`shard_access` (:mod:`.lookups`: lookups, distinct rows and
  last-level cache hits under Zipf skew), then one function per placement of its rows
  (:mod:`.embeddings`) — :func:`embedding_in_hbm`, :func:`embedding_in_host` (UVM over PCIe),
  :func:`embedding_in_cache` (a device cache in front of host DRAM),
  :func:`embedding_on_parameter_server` (a remote server pools rows and ships pooled vectors;
  :func:`parameter_servers` counts the servers a plan needs) and
  :func:`embedding_pooled_by_host` (the host's own CPUs do that, as on Zion);
* the collectives (:mod:`.collectives`): :func:`all_to_all_seconds` (model-parallel pooled
  embeddings, their gradients and the ids) and :func:`all_reduce_seconds` (data-parallel gradients).

Memory bandwidths count bytes read plus bytes written, as the spec sheets do. What ``dtype``
means (bytes of activations, weights and tables, the GEMM rate, the casts and loss scaling of
mixed precision) is read from its row of :data:`recnotebooks.perf.precision.PRECISIONS`.

This package re-exports every name of its modules, private ones included, so
``from recnotebooks.perf import components as C`` then ``C.gemm_time``, ``C._collective``, ...
keep working. Each function reads the names it calls from its own module: to patch one for
every caller, patch it there (``recnotebooks.perf.components.dense.gemm_time``).
"""

from __future__ import annotations

from recnotebooks.perf.components import collectives, dense, embeddings, lookups, ops
from recnotebooks.perf.components.collectives import (
    A2A_CALLS,
    A2A_CALLS_PER_STEP,
    all_reduce_seconds,
    all_to_all_bytes,
    all_to_all_seconds,
    nic_per_device,
)
from recnotebooks.perf.components.dense import (
    Work,
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
    IMPLEMENTATIONS,
    SHARD_OPS,
    SHARDED_OPS,
    op_count,
    overhead,
    overhead_of_remote_rows,
    sharded_extra_ops,
    sharded_op_terms,
)

__all__ = ["A2A_CALLS", "A2A_CALLS_PER_STEP", "IMPLEMENTATIONS", "INDEX_BYTES", "PARAMETER_SERVER",
           "UVM_EFFICIENCY", "Embedding",
           "SHARDED_OPS", "SHARD_OPS", "ShardAccess", "Work", "all_reduce_seconds", "cache_hit_rates",
           "all_to_all_seconds", "all_to_all_bytes", "data_loading",
           "dense_optimizer",
           "embedding_in_cache", "embedding_in_hbm", "embedding_in_host", "embedding_on_parameter_server",
           "embedding_pooled_by_host", "embedding_shard", "gather_bandwidth", "gemm_time", "host_to_device",
           "input_bytes_per_sample", "interaction", "mlp", "nic_per_device", "op_count", "overhead",
           "overhead_of_remote_rows", "parameter_servers", "shard_access", "sharded_extra_ops",
           "sharded_op_terms",
           "uvm_bandwidth"]  # fmt: skip

# The private names of the single module this package replaced (read through the modules, not
# imported by name: tests/test_layering.py keeps private names from crossing packages).
_collective = collectives._collective
_MLP_ELEMENTWISE_PASSES = dense._MLP_ELEMENTWISE_PASSES
_ADAGRAD_PASSES = dense._ADAGRAD_PASSES
_row_traffic = embeddings._row_traffic
_pooling_work = embeddings._pooling_work
_pooled_by_cpus = embeddings._pooled_by_cpus
_every_row_update = lookups._every_row_update
_OPS_BASE, _OPS_PER_LAYER, _OPS_DOT = ops._OPS_BASE, ops._OPS_PER_LAYER, ops._OPS_DOT
_TORCHREC_DIST_BASE, _TORCHREC_DIST_PER_RANK = ops._TORCHREC_DIST_BASE, ops._TORCHREC_DIST_PER_RANK
_TORCHREC_SYNCS, _TORCHREC_DDP_BASE = ops._TORCHREC_SYNCS, ops._TORCHREC_DDP_BASE
_single_op_count = ops._single_op_count
# and the package names it imported, which ``C.<name>`` reached too
DLRMConfig = dense.DLRMConfig
Hardware, HARDWARE = embeddings.Hardware, embeddings.HARDWARE
Plan, TableShard = ops.Plan, ops.TableShard
precision = dense.precision
traffic = embeddings.traffic
expected_unique_many, hit_rate_many = lookups.expected_unique_many, lookups.hit_rate_many
check_choice, check_int = ops.check_choice, ops.check_int
