"""GPU embedding caches: hot rows in a fixed number of device slots over full tables in host
memory, exact for training, and a trace simulator that runs the same policies.

* :class:`CacheConfig` — policy, capacity (rows or a fraction per table, or one shared
  budget), ways, prefetch depth.
* :func:`embedding_collection` — the one factory of a collection's storage: every row on the
  device, or the tables on the host behind a device cache (used by ``DLRM``'s callers and the
  sharded engine for a plan's ``"hbm"`` and ``"cache"`` placements).
* :class:`CachedEmbeddingBagCollection` — the :class:`~recnotebooks.nn.EmbeddingBagCollection`
  holding a :class:`CacheStore` (host tables, device slots), with its
  contract (``forward(JaggedBatch)``, the sparse optimizers, the fused kernel, ``DLRM``,
  ``Trainer``) over a cache; :class:`PrefetchingIterator` brings the next batches in early;
  :class:`CacheStats` counts what moved (``source="measured"``).
* :class:`CachePolicy` — LRU, LFU (counts for every row, as FBGEMM, or only while cached, as
  libCacheSim), static hot set (FAE), N-way set-associative (FBGEMM's layout): one
  implementation for training and simulation.
* :func:`simulate`, :func:`lru_mrc`, :func:`opt_mrc` — replay id streams, Belady's OPT,
  miss-ratio curves (``source="simulated"``).

Example::

    from recnotebooks import preset
    from recnotebooks.cache import CacheConfig, CachedEmbeddingBagCollection
    from recnotebooks.nn import DLRM

    cfg = preset("tiny")
    emb = CachedEmbeddingBagCollection.for_model(cfg, CacheConfig(policy="lru", capacity=0.05))
    model = DLRM(cfg, embeddings=emb)      # trains exactly like DLRM(cfg), 5% of rows on the device
"""

from recnotebooks.cache.cached import CachedEmbeddingBagCollection, embedding_collection
from recnotebooks.cache.config import CacheConfig
from recnotebooks.cache.policies import POLICIES, Admission, CachePolicy
from recnotebooks.cache.prefetch import PrefetchingIterator
from recnotebooks.cache.simulate import (
    SIM_POLICIES,
    MissRatioCurve,
    SimResult,
    lru_mrc,
    opt_mrc,
    simulate,
    trace_ids,
    zipf_trace,
)
from recnotebooks.cache.stats import CacheStats
from recnotebooks.cache.store import CacheStore

__all__ = [
    "POLICIES",
    "SIM_POLICIES",
    "Admission",
    "CacheConfig",
    "CachePolicy",
    "CacheStats",
    "CacheStore",
    "CachedEmbeddingBagCollection",
    "MissRatioCurve",
    "PrefetchingIterator",
    "SimResult",
    "lru_mrc",
    "embedding_collection",
    "opt_mrc",
    "simulate",
    "trace_ids",
    "zipf_trace",
]
