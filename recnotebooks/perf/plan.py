"""Sharding plans (:class:`Plan`, :class:`TableShard`, :class:`ShardGeometry`), re-exported.

The plan types live in :mod:`recnotebooks.plan`, which both the cost model (this package)
and the sharding code (``recnotebooks.distributed``) import, so that ``dist`` never imports the
cost model. Every public name stays importable from here (``recnotebooks.perf.Plan``,
``recnotebooks.perf.plan.TableShard``, ...).
"""

from __future__ import annotations

from recnotebooks.plan import *  # noqa: F403
from recnotebooks.plan import __all__ as __all__
