"""Sharding plans as plain data: which rank holds which part of which table, and where.

A :class:`Plan` is what the planner (:mod:`recnotebooks.perf.planner`) produces, the cost and
memory models read, and the sharding code (``recnotebooks.distributed``) executes. It lives in a
package of its own, so that ``distributed`` can execute plans without importing the cost model:

* :mod:`recnotebooks.plan.shards`: the :class:`Plan`, its shards (:class:`TableShard`: sharding
  and placement) and their exact geometry (:class:`ShardGeometry`, :func:`split_counts`);
* :mod:`recnotebooks.plan.schemes`: plans built as TorchRec's ``sharding_plan`` builds them, by
  scheme (:func:`table_wise`, :func:`row_wise`, :func:`column_wise`, :func:`data_parallel`,
  :func:`combine`, :func:`round_robin`, :func:`named_plan`) and placement
  (:func:`single_device_plan`, :func:`behind_cache`).
"""

from recnotebooks.plan.schemes import (
    NAMED_PLANS,
    behind_cache,
    column_wise,
    combine,
    data_parallel,
    mixed_plan,
    named_plan,
    round_robin,
    row_wise,
    single_device_plan,
    table_wise,
)
from recnotebooks.plan.shards import (
    CACHE_POLICIES,
    MAX_RANKS,
    PLACEMENTS,
    SHARDINGS,
    Plan,
    ShardGeometry,
    TableShard,
    split_counts,
)

__all__ = [
    "CACHE_POLICIES",
    "MAX_RANKS",
    "SHARDINGS",
    "PLACEMENTS",
    "ShardGeometry",
    "TableShard",
    "Plan",
    "NAMED_PLANS",
    "behind_cache",
    "column_wise",
    "combine",
    "data_parallel",
    "mixed_plan",
    "named_plan",
    "round_robin",
    "row_wise",
    "single_device_plan",
    "split_counts",
    "table_wise",
]
