"""The rows of an exact software embedding cache: :class:`CacheStore`.

A :class:`~recnotebooks.cache.cached.CachedEmbeddingBagCollection` is an embedding collection
that holds one: the full tables live in host memory (pinned when CUDA is present); ``weight`` —
the parameter the sparse optimizers and the fused kernel update — is a buffer of *slots* on the
device. Per batch (the structure of FBGEMM's ``split_table_batched_embeddings`` UVM cache,
its ``lxu_cache_populate`` / ``lxu_cache_lookup`` pair, in plain PyTorch and NumPy):

    ids -> global rows -> distinct rows -> CachePolicy.admit per table (or one shared policy)
        -> dirty victims written back (slot -> host, with their optimizer state)
        -> misses copied in (host -> slot, with their optimizer state)
        -> rows the policy does not keep (static cold rows, full sets) staged for this batch
    ids -> slots, then the collection's one fused embedding_bag over the slot buffer.

The pending gradients therefore hold slot ids and the optimizer updates land in slots.
Rows still needed are never evicted: every admission stamps its rows with an epoch and
may only evict slots stamped before the oldest batch still in use (its forward done, its
optimizer step not yet; or prefetched and not yet consumed — FBGEMM locks prefetched rows
the same way). Staged rows are written back when the step that used them ends
(:meth:`CacheStore.step_done`, from the collection's ``clear_gradients``, which every sparse
optimizer step calls). A dirty bit per slot (set for every row looked up with gradients
enabled) makes write-backs exact: a row is written back only if it may have changed since it
was loaded. The slot buffer, the row copies, the state dict and device moves live in
:mod:`recnotebooks.cache._cached_state`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from recnotebooks.cache._cached_state import RowState, SlotStore
from recnotebooks.cache.config import CacheConfig
from recnotebooks.cache.policies import CachePolicy
from recnotebooks.cache.stats import CacheStats
from recnotebooks.checks import check_fits_memory, check_int
from recnotebooks.kernels.allocator import advise_huge_pages
from recnotebooks.nn.embedding import initial_rows
from recnotebooks.sparse import JaggedBatch

__all__ = ["CacheStore"]

_NONE = np.zeros(0, np.int64)
_NP_INDEX = {torch.int32: np.int32, torch.int64: np.int64}


@dataclass
class _Prefetched:
    batch: JaggedBatch
    epoch: int


@dataclass
class _Placed:
    slots: np.ndarray  # slot of each distinct row
    hit: np.ndarray
    bypass: np.ndarray
    misses: np.ndarray  # positions admitted on a miss
    victims: np.ndarray  # global rows evicted (-1: free slot)


def _distinct(ids: torch.Tensor, inverse: bool) -> tuple[np.ndarray, np.ndarray, torch.Tensor | None]:
    """The sorted distinct rows of ``ids`` (int64, on the host) and, if ``inverse``, the
    distinct row of each id: on the host, and on the ids' device when that is an accelerator
    (else None). On the host NumPy's ``unique`` (single-threaded, about 2.5x faster than
    ``torch.unique`` on a batch of 16k ids here); on a device ``torch.unique``."""
    if ids.device.type == "cpu":
        out = np.unique(ids.numpy(), return_inverse=inverse)
        u, inv = out if inverse else (out, _NONE)
        return u.astype(np.int64, copy=False), inv.reshape(-1), None
    if not inverse:
        return torch.unique(ids).cpu().numpy().astype(np.int64, copy=False), _NONE, None
    u, inv_t = torch.unique(ids, sorted=True, return_inverse=True)
    return u.cpu().numpy().astype(np.int64, copy=False), inv_t.view(-1).cpu().numpy(), inv_t.view(-1)


class CacheStore(SlotStore):
    """The rows of a cached collection: full tables on the host, ``capacity`` device slots (see
    the module docstring). :class:`~recnotebooks.cache.cached.CachedEmbeddingBagCollection` holds one
    and hands it the global ids of each lookup; ``weight`` (the slots) is the parameter the
    collection's fused lookup reads and the sparse optimizers update.

    Args:
        host: the full tables, ``(total_rows, dim)`` on the host (the uncached collection's
            initial weight); the store keeps it (pinned when the slots are on a CUDA device).
        keys: the table names; ``table_offsets``: each table's first global row, then the total.
        cache: the :class:`~recnotebooks.cache.config.CacheConfig`.
        device: where the slots live.
        hot: ``"static"`` only: the pinned rows of each policy (:func:`~recnotebooks.cache.config.hot_sets`).
    """

    def __init__(
        self,
        host: torch.Tensor,
        keys: tuple[str, ...],
        table_offsets: np.ndarray,
        cache: CacheConfig,
        caps: Sequence[int],
        device: torch.device,
        hot: Sequence[np.ndarray | None],
    ) -> None:
        self.cache = cache
        self.keys = keys
        self.num_tables = len(keys)
        self.total_rows, self.embedding_dim = int(host.shape[0]), int(host.shape[1])
        self._lock = threading.RLock()
        self._table_offsets = table_offsets
        self._row_base = np.array([0, self.total_rows]) if cache.shared else table_offsets
        self._slot_base = np.concatenate([[0], np.cumsum(caps)]).astype(np.int64)
        self.capacity = int(self._slot_base[-1])
        self.policies = [
            CachePolicy(
                cache.policy,
                int(self._row_base[i + 1] - self._row_base[i]),
                c,
                ways=cache.ways,
                hot_rows=hot[i],
            )
            for i, c in enumerate(caps)
        ]
        self._host = host.pin_memory() if device.type == "cuda" else host
        dtype = host.dtype
        self._wstore = torch.empty(
            self.capacity + cache.staging_rows, self.embedding_dim, device=device, dtype=dtype
        )
        advise_huge_pages(self._wstore)  # before the first touch, as the uncached weight does
        self._wstore.zero_()
        #: the slots: the parameter of the collection that holds this store
        self.weight = nn.Parameter(self._wstore[: self.capacity])
        self._dirty = np.zeros(self._wstore.shape[0], np.bool_)
        self._staged = np.zeros(0, np.int64)  # global rows in the staging slots, in slot order
        self._states: dict[str, RowState] = {}
        self._epoch = 0
        self._live: list[int] = []  # stamps of forwards whose optimizer step is still to come
        self._prefetched: deque[_Prefetched] = deque()
        self._hold_prefetch = False  # set by a state_dict snapshot until the next forward
        self._stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.stats = CacheStats(keys, cache.policy)
        self._state_bytes = 0
        self._stamp: int | None = None
        self._load_resident()

    def new_row_state(
        self, name: str, fill: float, dtype: torch.dtype = torch.float32, width: int | None = None
    ) -> torch.Tensor:
        """A per-row optimizer state over the slots — one value per row (``width=None``) or
        ``width`` (exact Adagrad: one per element) — whose host copy (the same per table row)
        travels with its row; a new state of an existing name starts again from ``fill``."""
        tail = () if width is None else (check_int("width", width, lo=1),)
        what = (
            f"the optimizer state {name!r} ({self.total_rows:,} rows x {width or 1}, {dtype}) in host memory"
        )
        check_fits_memory(what, self.total_rows * (width or 1) * dtype.itemsize)
        with self._lock:
            host = torch.full((self.total_rows, *tail), float(fill), dtype=dtype)
            if self._wstore.device.type == "cuda":
                host = host.pin_memory()
            store = torch.full(
                (self._wstore.shape[0], *tail), float(fill), dtype=dtype, device=self._wstore.device
            )
            view = torch.empty(0, dtype=dtype, device=store.device)
            view.data = store[: self.weight.shape[0]]
            self._states[name] = RowState(host, store, view)
            self._state_bytes = sum(
                st.host[:1].numel() * st.host.element_size() for st in self._states.values()
            )
            return view

    # ----- admission -------------------------------------------------------------------
    def _place(
        self, uniq: np.ndarray, epoch: int, protect_from: int, prefetch: bool, resident_first: bool
    ) -> _Placed:
        """Admit the sorted distinct global rows ``uniq``; move rows; stage bypassed ones
        (unless ``prefetch``: a prefetch leaves them to the forward). ``resident_first``: a
        prefetched batch's resident rows are looked up, not admitted (and counted) again."""
        n = len(uniq)
        pl = _Placed(np.full(n, -1, np.int64), np.zeros(n, np.bool_), np.zeros(n, np.bool_), _NONE, _NONE)
        todo = self._find_staged(uniq, pl)
        bounds = np.searchsorted(uniq, self._row_base)
        miss_pos, miss_slots, victims = [], [], []
        try:
            for p, pol in enumerate(self.policies):
                lo, hi = int(bounds[p]), int(bounds[p + 1])
                idx = np.arange(lo, hi)[todo[lo:hi]] if lo < hi else _NONE
                if len(idx):
                    m, s, v = self._admit_table(p, pol, uniq, idx, epoch, protect_from, resident_first, pl)
                    miss_pos.append(m)
                    miss_slots.append(s)
                    victims.append(v)
        finally:  # even if a table's admission failed, the tables admitted so far are made consistent
            pl.misses = np.concatenate(miss_pos) if miss_pos else _NONE
            pl.victims = np.concatenate(victims) if victims else _NONE
            slots = np.concatenate(miss_slots) if miss_slots else _NONE
            self._fill_misses(uniq[pl.misses], slots, pl.victims)
        if not prefetch and pl.bypass.any():
            b = np.flatnonzero(pl.bypass)
            pl.slots[b] = self._stage(uniq[b])
        return pl

    def _find_staged(self, uniq: np.ndarray, pl: _Placed) -> np.ndarray:
        """Rows staged for a step still to come keep their staging slot (a hit); returns the
        mask of rows still to admit."""
        todo = np.ones(len(uniq), np.bool_)
        if len(self._staged):
            order = np.argsort(self._staged)
            pos = np.minimum(np.searchsorted(self._staged, uniq, sorter=order), len(order) - 1)
            found = self._staged[order[pos]] == uniq
            pl.slots[found] = self.capacity + order[pos[found]]
            pl.hit[found], todo[found] = True, False
        return todo

    def _admit_table(
        self,
        p: int,
        pol: CachePolicy,
        uniq: np.ndarray,
        idx: np.ndarray,
        epoch: int,
        protect_from: int,
        resident_first: bool,
        pl: _Placed,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Admit the rows ``uniq[idx]`` of policy ``p``, filling ``pl``; returns the positions
        admitted on a miss, their slots and the global rows they evict (-1: a free slot)."""
        local = uniq[idx] - self._row_base[p]
        sbase = self._slot_base[p]
        if resident_first:
            s = pol.slot_of[local]
            res = s >= 0
            pl.slots[idx[res]], pl.hit[idx[res]] = s[res] + sbase, True
            idx, local = idx[~res], local[~res]
            if not len(idx):
                return _NONE, _NONE, _NONE
        a = pol.admit(local, epoch, protect_from)
        got = a.slots >= 0
        pl.slots[idx[got]] = a.slots[got] + sbase
        pl.hit[idx] = a.hit
        pl.bypass[idx[a.bypass_idx]] = True
        victims = np.where(a.victims >= 0, a.victims + self._row_base[p], -1)
        return idx[a.miss_idx], a.slots[a.miss_idx] + sbase, victims

    def _protect_from(self, epoch: int) -> int:
        return min([epoch, *self._live, *(e.epoch for e in self._prefetched)])

    # ----- lookup and prefetch -----------------------------------------------------------
    def lookup(self, ids: torch.Tensor, batch: JaggedBatch, grad: bool, live: list[int]) -> torch.Tensor:
        """Slot ids of a batch's global row ``ids``, after making every row resident (or staged).
        ``grad``: the lookup records a gradient (its rows become dirty, its stamp is live until
        :meth:`step_done`); ``live``: the stamps of the collection's forwards still waiting for
        their step. The stamp of this lookup is then :attr:`stamp` (``None`` without ``grad``)."""
        if ids.numel() == 0:
            self._stamp = None
            return ids
        uniq, inv, inverse = _distinct(ids, inverse=True)
        with self._lock:
            if self._stream is not None:
                torch.cuda.current_stream(self._wstore.device).wait_stream(self._stream)
            self._live = list(live)
            if not self._live:
                self._release_staging()
            self._hold_prefetch = False
            entry = self._take_prefetched(batch)
            self._epoch += 1
            stamp = entry.epoch if entry is not None else self._epoch
            pf = min(stamp, self._protect_from(self._epoch))
            placed = self._place(uniq, self._epoch, pf, False, entry is not None)
            if grad:
                self._dirty[placed.slots] = True
                self._live.append(stamp)
            self._stamp = stamp if grad else None
            tab = np.searchsorted(self._table_offsets, uniq, side="right") - 1
            self.stats.count_call(batch, tab, placed.hit, placed.bypass, inv, self.cache.policy == "setassoc")
        if inverse is None:  # on the host: one NumPy gather
            return torch.from_numpy(placed.slots[inv].astype(_NP_INDEX[ids.dtype], copy=False))
        slot_u = torch.from_numpy(placed.slots).to(ids.device)
        return slot_u.index_select(0, inverse).to(ids.dtype)

    @property
    def stamp(self) -> int | None:
        """The stamp of the last :meth:`lookup` that recorded a gradient (else ``None``): the
        collection tags that forward's pending gradient with it."""
        return self._stamp

    def forward_done(self) -> None:
        """After a forward that records no gradient: with no step to come, its staged rows are freed."""
        with self._lock:
            if not self._live:
                self._release_staging()

    def _take_prefetched(self, batch: JaggedBatch) -> _Prefetched | None:
        for i, e in enumerate(self._prefetched):
            if e.batch is batch or (e.batch.values is batch.values and e.batch.lengths is batch.lengths):
                for _ in range(i):
                    self._prefetched.popleft()  # prefetched batches that were skipped
                return self._prefetched.popleft()
        return None

    def prefetch(self, ids: torch.Tensor, batch: JaggedBatch) -> int:
        """Admit a coming batch's rows (its global ``ids``) now, without evicting any row still in
        use; its lookup then finds them resident. Returns the misses brought in (0 when the cache
        cannot take the batch now, or a ``state_dict`` snapshot holds prefetches until the next
        lookup: that lookup then admits it). Safe from a second thread."""
        uniq = _distinct(ids, inverse=False)[0]
        with self._lock:
            if self._hold_prefetch:  # a checkpoint is being written: its forward admits the batch
                return 0
            self._epoch += 1
            pf = self._protect_from(self._epoch)
            ctx = torch.cuda.stream(self._stream) if self._stream is not None else None
            if self._stream is not None:  # rows written by queued kernels are read after them
                self._stream.wait_stream(torch.cuda.current_stream(self._wstore.device))
            try:
                if ctx is not None:
                    with ctx:
                        placed = self._place(uniq, self._epoch, pf, True, False)
                else:
                    placed = self._place(uniq, self._epoch, pf, True, False)
            except ValueError:  # too few unprotected slots now: the forward will admit it
                return 0
            self._prefetched.append(_Prefetched(batch, self._epoch))
            while len(self._prefetched) > 2 * self.cache.prefetch_depth + 4:
                self._prefetched.popleft()
            self.stats.add("prefetch_calls", 1)
            self.stats.add("prefetched_misses", self._per_table(uniq[placed.misses]))
            return int(len(placed.misses))

    def cancel_prefetch(self) -> None:
        """Forget prefetched batches not yet looked up (their rows stay, unprotected)."""
        with self._lock:
            self._prefetched.clear()

    def step_done(self) -> None:
        """The step that used the looked-up rows has ended (the collection's ``clear_gradients``):
        no stamp is live any more, and staged rows are written back and freed."""
        with self._lock:
            self._live.clear()
            self._release_staging()

    # ----- host tables ------------------------------------------------------------------
    @torch.no_grad()
    def flush(self) -> int:
        """Write every dirty slot back to the host tables; returns the rows written. Rows of a
        forward whose optimizer step is still to come stay dirty (the step will change them)."""
        with self._lock:
            slots, rows = self._resident()
            k = len(self._staged)
            slots = np.concatenate([slots, np.arange(self.capacity, self.capacity + k)])
            rows = np.concatenate([rows, self._staged])
            d = self._dirty[slots]
            if d.any():
                self._to_host(slots[d], rows[d])
            if not self._live:
                self._dirty[slots] = False
            return int(d.sum())

    def full_weight(self) -> torch.Tensor:
        """All tables (``total_rows x dim``, on the host) after a :meth:`flush`."""
        self.flush()
        return self._host

    def full_row_state(self, name: str) -> torch.Tensor:
        """The host copy of a row state (e.g. ``"momentum"``), its values for every row, after a flush."""
        if name not in self._states:
            raise KeyError(f"no row state {name!r}; registered: {sorted(self._states)}")
        self.flush()
        return self._states[name].host

    def table_weight(self, k: int) -> torch.Tensor:
        """Table ``k``'s rows from the host tables (after a flush)."""
        w = self.full_weight()
        return w[int(self._table_offsets[k]) : int(self._table_offsets[k + 1])]

    def reset(self, seed: int | None = 0) -> None:
        """Re-initialise the host tables as the uncached collection would
        (:func:`~recnotebooks.nn.embedding.initial_rows`), and reload the slots."""
        self.write_rows(initial_rows(np.diff(self._table_offsets).tolist(), self.embedding_dim, seed))

    @torch.no_grad()
    def write_rows(self, chunks: Iterable[tuple[int, torch.Tensor]]) -> None:
        """Write the host tables from ``(first row, rows)`` chunks (e.g. the initial tables), and
        reload the slots."""
        with self._lock:
            for lo, rows in chunks:
                self._host[lo : lo + rows.shape[0]].copy_(rows)
            self.reload()

    @torch.no_grad()
    def reload(self) -> None:
        """The host tables were written from outside (e.g. a sharded collection's blocks): forget
        staged rows and reload every resident slot from them."""
        with self._lock:
            self._staged = np.zeros(0, np.int64)
            self._set_views(self.capacity)
            self._load_resident()

    def describe(self) -> str:
        """Policy and size, for the collection's ``repr``."""
        c = self.cache
        size = f"shared_rows={c.shared_rows}" if c.shared else f"capacity={c.capacity}"
        return f"policy={c.policy!r}, {size}, slots={self.capacity}"
