"""A collection whose rows live behind a device cache, and the one factory that chooses where rows live.

:func:`embedding_collection` is where a collection's storage is chosen: ``cache=None`` gives the
plain :class:`~recnotebooks.nn.EmbeddingBagCollection` (every row in ``weight`` on the device, a
plan's ``"hbm"`` placement); a :class:`~recnotebooks.cache.config.CacheConfig` gives a
:class:`CachedEmbeddingBagCollection`, the same collection holding a
:class:`~recnotebooks.cache.store.CacheStore` (full tables on the host, hot rows in device slots:
a plan's ``"cache"`` placement). ``DLRM(config, embeddings=...)`` takes what it builds, and the
sharded engine (:mod:`recnotebooks.distributed.sharded`) builds each local shard with it.

:class:`CachedEmbeddingBagCollection` is the plain collection with its rows in a store: its
constructor builds the plain collection on the host (the same seed gives the same tables), then
hands those tables to a store, which the collection holds as ``rows`` instead of its
:class:`~recnotebooks.nn.embedding.MemoryRows`; the store's slots become ``weight``. Everything
the collection does with rows goes through its ``rows`` (:class:`~recnotebooks.nn.rows.RowStore`)
— lookups map global rows to slots, row states travel with their rows, ``clear_gradients`` ends
the step, the state dict and device moves are the store's — so this class adds only the cache's
own API (``stats``, ``prefetch``, ``flush``, ``full_weight``...), which is the store's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch

from recnotebooks.cache.config import CacheConfig, hot_sets
from recnotebooks.cache.policies import CachePolicy
from recnotebooks.cache.prefetch import PrefetchingIterator
from recnotebooks.cache.stats import CacheStats
from recnotebooks.cache.store import CacheStore
from recnotebooks.checks import check_fits_memory, check_module_device, check_type
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.nn.embedding import EmbeddingBagCollection
from recnotebooks.sparse import JaggedBatch

__all__ = ["CachedEmbeddingBagCollection", "embedding_collection"]


def embedding_collection(
    tables: Sequence[TableConfig],
    embedding_dim: int,
    cache: CacheConfig | None = None,
    pooling: str = "sum",
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    seed: int | None = 0,
    *,
    hot_rows: Mapping[str, object] | None = None,
    profile: object = None,
) -> EmbeddingBagCollection:
    """An embedding collection whose rows live where ``cache`` says: every row on ``device``
    (``None``: :class:`~recnotebooks.nn.EmbeddingBagCollection`) or the tables on the host behind
    a device cache (a :class:`~recnotebooks.cache.config.CacheConfig`:
    :class:`CachedEmbeddingBagCollection`; ``hot_rows`` / ``profile`` as it takes them). Both
    start from the same weights for the same ``seed`` and train identically.

    Example::

        from recnotebooks import preset
        from recnotebooks.cache import CacheConfig, embedding_collection
        from recnotebooks.nn import DLRM

        cfg = preset("tiny")
        emb = embedding_collection(cfg.tables, cfg.embedding_dim, CacheConfig("lru", capacity=0.05))
        model = DLRM(cfg, embeddings=emb)      # trains exactly like DLRM(cfg)
    """
    if cache is None:
        if hot_rows is not None or profile is not None:
            raise ValueError(
                "hot_rows and profile choose a static cache's rows: give them with cache=CacheConfig"
            )
        return EmbeddingBagCollection(tables, embedding_dim, pooling, device, dtype, seed)
    return CachedEmbeddingBagCollection(
        tables, embedding_dim, cache, pooling, device, dtype, seed, hot_rows=hot_rows, profile=profile
    )


class CachedEmbeddingBagCollection(EmbeddingBagCollection):
    """An :class:`~recnotebooks.nn.EmbeddingBagCollection` whose tables live on the host and
    whose ``weight`` is a device cache of ``capacity`` slots, held in :attr:`store` (see the
    module docstrings here and of :mod:`recnotebooks.cache.store`).

    Args:
        tables, embedding_dim, pooling, dtype, seed: as for the uncached collection (the
            same seed gives the same initial tables).
        cache: the :class:`~recnotebooks.cache.config.CacheConfig`.
        device: where the slots live (the tables stay on the host).
        hot_rows: ``"static"`` only: ``{table: local row ids}`` pinned in its slots.
        profile: ``"static"`` only, instead of ``hot_rows``: batches (a ``JaggedBatch``, a
            ``Batch`` or an iterable of them) or global row ids whose most frequent rows
            become the hot set (FAE's profiling of a data sample).

    ``stats`` (:class:`~recnotebooks.cache.stats.CacheStats`) counts what the cache did.
    """

    def __init__(
        self,
        tables: Sequence[TableConfig],
        embedding_dim: int,
        cache: CacheConfig,
        pooling: str = "sum",
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        seed: int | None = 0,
        *,
        hot_rows: Mapping[str, object] | None = None,
        profile: object = None,
    ) -> None:
        check_type("cache", cache, CacheConfig, "a CacheConfig")
        checked = check_module_device("device", device)
        dev = torch.device("cpu") if checked is None else checked
        caps = cache.capacities(tables)
        slots = int(sum(caps)) + cache.staging_rows
        if isinstance(embedding_dim, int) and isinstance(dtype, torch.dtype):  # else the collection says why
            check_fits_memory(
                f"the cache's device slots ({slots:,} rows x dim {embedding_dim}, {dtype})",
                slots * embedding_dim * dtype.itemsize,
                dev,
                hint="lower the capacity or staging_rows of the CacheConfig",
            )
        if cache.policy != "static" and (hot_rows is not None or profile is not None):
            raise ValueError(f"hot_rows and profile are only used by policy 'static', got {cache.policy!r}")
        # the plain collection, on the host: its weight is the full tables the store keeps
        super().__init__(tables, embedding_dim, pooling, device="cpu", dtype=dtype, seed=seed)
        offs = self.row_offsets.numpy().copy()
        hot = [None] * len(caps)
        if cache.policy == "static":
            hot = hot_sets(self.keys, offs, caps, cache.shared, hot_rows, profile, self.global_ids)
        #: where the rows live (the collection's ``rows``): host tables, device slots, policies, statistics
        self.store = CacheStore(self.weight.detach(), self.keys, offs, cache, caps, dev, hot)
        self._hold_rows(self.store)

    @classmethod
    def for_model(
        cls,
        config: DLRMConfig,
        cache: CacheConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        seed: int = 0,
        **kwargs: object,
    ) -> CachedEmbeddingBagCollection:
        """The cached collection of a DLRM config: pass it as ``DLRM(config, embeddings=...)``
        (with the same ``seed``, the model starts from the uncached model's weights)."""
        check_type("config", config, DLRMConfig, "a DLRMConfig")
        return cls(config.tables, config.embedding_dim, cache, config.pooling, device, dtype, seed, **kwargs)  # type: ignore[arg-type]

    # ----- the cache's API --------------------------------------------------------------
    @property
    def cache(self) -> CacheConfig:
        """The :class:`~recnotebooks.cache.config.CacheConfig`."""
        return self.store.cache

    @property
    def stats(self) -> CacheStats:
        """What the cache did (:class:`~recnotebooks.cache.stats.CacheStats`)."""
        return self.store.stats

    @property
    def policies(self) -> list[CachePolicy]:
        """One policy per table (or one shared)."""
        return self.store.policies

    @property
    def capacity(self) -> int:
        """Device slots kept by the policies (staging slots not counted)."""
        return self.store.capacity

    def prefetch(self, batch: JaggedBatch) -> int:
        """Admit a coming batch's rows now (see :meth:`CacheStore.prefetch`); the misses brought in."""
        return self.store.prefetch(self.global_ids(batch), batch)

    def cancel_prefetch(self) -> None:
        """Forget prefetched batches not yet looked up (their rows stay, unprotected)."""
        self.store.cancel_prefetch()

    def prefetching(self, data: Iterable[object], depth: int | None = None) -> PrefetchingIterator:
        """``data`` wrapped in a :class:`~recnotebooks.cache.prefetch.PrefetchingIterator`
        (``depth`` defaults to ``cache.prefetch_depth``)."""
        return PrefetchingIterator(data, self, self.cache.prefetch_depth if depth is None else depth)

    def flush(self) -> int:
        """Write every dirty slot back to the host tables; the rows written."""
        return self.store.flush()

    def full_weight(self) -> torch.Tensor:
        """All tables (``total_rows x dim``, on the host) after a flush."""
        return self.store.full_weight()

    def full_row_state(self, name: str) -> torch.Tensor:
        """The host copy of a row state (e.g. ``"momentum"``), its values for every row, after a flush."""
        return self.store.full_row_state(name)
