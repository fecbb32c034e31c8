"""Slot storage of :class:`~recnotebooks.cache.store.CacheStore` (private).

:class:`SlotStore` is the half of the cache store that moves rows and saves state:

* the device slot buffer (``capacity`` slots, then staging slots for rows a policy does not
  keep) and the optimizer row states that travel with their rows (:class:`RowState`);
* copies host -> slots (misses, staged rows) and slots -> host (dirty victims, staged rows
  at the end of their step, ``flush``), each counted in the statistics;
* the collection's ``state_dict`` / ``load_state_dict`` (tensors only, so checkpoints load with
  ``weights_only=True``) and ``.to(device)`` / ``.double()``, which move the slots while the
  full tables stay in host memory (:meth:`SlotStore.save_state`, :meth:`SlotStore.load_state`,
  :meth:`SlotStore.move`; the collection calls them as a :class:`~recnotebooks.nn.rows.RowStore`).

It is the base of :class:`~recnotebooks.cache.store.CacheStore`, whose constructor sets the
attributes listed in the class body.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from recnotebooks.cache.policies import CachePolicy
from recnotebooks.cache.stats import CacheStats

__all__ = ["RowState", "SlotStore"]


@dataclass
class RowState:
    """One per-row optimizer state (e.g. row-wise Adagrad's accumulator; exact Adagrad's, a row of them)."""

    host: torch.Tensor  # (total_rows,) on the host, or (total_rows, width)
    store: torch.Tensor  # (slots + staging,) on the device, or (slots + staging, width)
    view: torch.Tensor  # the tensor handed to the optimizer: store[:slots in use]


_NUMPY_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)


def _copy_rows(dst: torch.Tensor, dst_idx: np.ndarray, src: torch.Tensor, src_idx: np.ndarray) -> None:
    """``dst[dst_idx] = src[src_idx]`` along dim 0. Host to host it is one NumPy gather and
    scatter (a few thousand rows: no round trip through the intra-op thread pool); to or from
    a device, a gather on the source's side, one copy, a scatter on the destination's side
    (host -> device copies are queued; device -> host ones complete before the host reads)."""
    if dst.device.type == src.device.type == "cpu" and dst.dtype == src.dtype and dst.dtype in _NUMPY_DTYPES:
        dst.numpy()[dst_idx] = src.numpy()[src_idx]
        return
    rows = src.index_select(0, torch.from_numpy(src_idx).to(src.device))
    rows = rows.to(dst.device, non_blocking=dst.device.type != "cpu")
    dst.index_copy_(0, torch.from_numpy(dst_idx).to(dst.device), rows)


class SlotStore:
    """Slot buffer, row movement, state dict and device moves of a cache store."""

    # defined by CacheStore's constructor
    weight: torch.nn.Parameter
    embedding_dim: int
    num_tables: int
    capacity: int
    policies: list[CachePolicy]
    stats: CacheStats
    _lock: threading.RLock
    _host: torch.Tensor  # (total_rows, dim): the full tables, on the host
    _wstore: torch.Tensor  # (capacity + staging, dim): the slots, on the device
    _dirty: np.ndarray  # bool per slot: may differ from its host row
    _staged: np.ndarray  # global rows in the staging slots, in slot order
    _states: dict[str, RowState]
    _state_bytes: int
    _table_offsets: np.ndarray
    _row_base: np.ndarray
    _slot_base: np.ndarray
    _live: list[int]
    _epoch: int
    _hold_prefetch: bool
    _prefetched: deque[Any]  # CacheStore's prefetched batches (store imports this module, not back)
    _stream: torch.cuda.Stream | None
    # a method of CacheStore
    new_row_state: Callable[..., torch.Tensor]

    # ----- views and storage ------------------------------------------------------------
    def _set_views(self, n: int) -> None:
        """Point ``weight`` and every row state's view at the first ``n`` slots."""
        self.weight.data = self._wstore[:n]
        for st in self._states.values():
            st.view.data = st.store[:n]

    def _reserve(self, n: int) -> None:
        """Grow the slot storage (the staging part) to at least ``n`` slots."""
        have = self._wstore.shape[0]
        if n <= have:
            return
        size = max(n, self.capacity + 2 * (have - self.capacity))
        new = torch.zeros(size, self.embedding_dim, device=self._wstore.device, dtype=self._wstore.dtype)
        new[:have] = self._wstore
        self._wstore = new
        for st in self._states.values():
            s = torch.zeros((size, *st.store.shape[1:]), dtype=st.store.dtype, device=st.store.device)
            s[:have] = st.store
            st.store = s
        self._dirty = np.concatenate([self._dirty, np.zeros(size - have, np.bool_)])

    def _resident(self) -> tuple[np.ndarray, np.ndarray]:
        """(slots, global rows) of every resident row."""
        slots, rows = [], []
        for p, pol in enumerate(self.policies):
            s = np.flatnonzero(pol.row_of >= 0)
            slots.append(s + self._slot_base[p])
            rows.append(pol.row_of[s].astype(np.int64) + self._row_base[p])
        return np.concatenate(slots), np.concatenate(rows)

    def _load_resident(self) -> None:
        """Copy every resident row (and its states) from the host tables into its slot."""
        slots, rows = self._resident()
        if len(slots):
            self._to_slots(slots, rows)
        self._dirty[:] = False

    # ----- data movement ----------------------------------------------------------------
    def _row_bytes(self) -> int:
        return self.embedding_dim * self._wstore.element_size() + self._state_bytes

    def _per_table(self, rows: np.ndarray) -> np.ndarray:
        """How many of the global ``rows`` fall in each table."""
        tab = np.searchsorted(self._table_offsets, rows, side="right") - 1
        return np.bincount(tab, minlength=self.num_tables).astype(np.int64)

    def _to_slots(self, slots: np.ndarray, rows: np.ndarray) -> None:
        """Copy host ``rows`` (and their states) into ``slots``."""
        _copy_rows(self._wstore, slots, self._host, rows)
        for st in self._states.values():
            _copy_rows(st.store, slots, st.host, rows)

    def _to_host(self, slots: np.ndarray, rows: np.ndarray) -> None:
        """Write ``slots`` (and their states) back to host ``rows``; counts the write-backs."""
        _copy_rows(self._host, rows, self._wstore, slots)
        for st in self._states.values():
            _copy_rows(st.host, rows, st.store, slots)
        per = self._per_table(rows)
        self.stats.add("writebacks", per)
        self.stats.add("bytes_d2h", per * self._row_bytes())

    def _fill_misses(self, rows: np.ndarray, slots: np.ndarray, victims: np.ndarray) -> None:
        """Rows admitted on a miss into ``slots``, evicting global rows ``victims`` (-1: a free
        slot): dirty victims are written back first, then the rows copied in."""
        if not len(rows):
            return
        ev = victims >= 0
        self.stats.add("evictions", self._per_table(victims[ev]))
        wb = ev & self._dirty[slots]
        if wb.any():
            self._to_host(slots[wb], victims[wb])
        self._to_slots(slots, rows)
        self._dirty[slots] = False
        self.stats.add("bytes_h2d", self._per_table(rows) * self._row_bytes())

    def _stage(self, rows: np.ndarray) -> np.ndarray:
        """Copy rows the policy does not keep into staging slots for this step; their slots."""
        start = self.capacity + len(self._staged)
        self._reserve(start + len(rows))
        sl = np.arange(start, start + len(rows))
        self._to_slots(sl, rows)
        self._dirty[sl] = False
        self._staged = np.concatenate([self._staged, rows])
        self._set_views(self.capacity + len(self._staged))
        self.stats.add("bytes_h2d", self._per_table(rows) * self._row_bytes())
        return sl

    def _release_staging(self) -> None:
        """Write back the staged rows that may have changed and free their slots."""
        k = len(self._staged)
        if k:
            sl = np.arange(self.capacity, self.capacity + k)
            d = self._dirty[sl]
            if d.any():
                self._to_host(sl[d], self._staged[d])
            self._dirty[sl] = False
            self._staged = np.zeros(0, np.int64)
        if self.weight.shape[0] != self.capacity:
            self._set_views(self.capacity)

    # ----- state dict -------------------------------------------------------------------
    def save_state(self, destination: dict[str, torch.Tensor], prefix: str) -> None:
        """Slots (``weight``), their dirty bits, the host tables, every row state (host and
        slots), the epoch and each policy's state: tensors only (``weights_only`` loads), a
        consistent snapshot (copied under the lock, so a prefetch thread cannot change it).
        Prefetches then wait for the next forward: tensors serialized after this snapshot (an
        optimizer's row-state view over the slots, in a ``Trainer`` checkpoint) still match it."""
        with self._lock:
            self._hold_prefetch = True
            if self._stream is not None:  # rows a prefetch copied in on the side stream are read after it
                torch.cuda.current_stream(self._wstore.device).wait_stream(self._stream)
            if not self._live:
                self._release_staging()
            cap = self.capacity  # copies: a prefetch thread may change the live tensors after this
            destination[prefix + "weight"] = self._wstore[:cap].detach().clone()
            destination[prefix + "dirty"] = torch.from_numpy(self._dirty[:cap].copy())
            destination[prefix + "host_weight"] = self._host.clone()
            destination[prefix + "epoch"] = torch.tensor(self._epoch, dtype=torch.int64)
            for name, st in self._states.items():
                destination[prefix + f"row_state.{name}.host"] = st.host.clone()
                destination[prefix + f"row_state.{name}.slots"] = st.store[:cap].detach().clone()
            for i, pol in enumerate(self.policies):
                for k, v in pol.state_dict().items():
                    if isinstance(v, torch.Tensor):
                        destination[prefix + f"policy.{i}.{k}"] = v

    def load_state(
        self,
        state_dict: dict[str, torch.Tensor],
        prefix: str,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """Restore what :meth:`save_state` wrote, all or nothing: keys and shapes are checked first
        (reported in ``missing_keys``, ``unexpected_keys``, ``error_msgs``); the collection has
        dropped its pending gradients."""
        for key in state_dict:  # row states of an optimizer not created yet: registered here
            if key.startswith(prefix + "row_state.") and key.endswith(".host"):
                name = key[len(prefix + "row_state.") : -len(".host")]
                if name not in self._states:
                    t = state_dict[key]
                    width = (
                        int(t.shape[1])
                        if isinstance(t, torch.Tensor) and t.dim() == 2 and t.shape[1]
                        else None
                    )
                    self.new_row_state(name, 0.0, t.dtype, width)
        expected: dict[str, torch.Tensor] = {}
        self.save_state(expected, prefix)
        missing_keys.extend(k for k in expected if k not in state_dict)
        unexpected_keys.extend(k for k in state_dict if k.startswith(prefix) and k not in expected)
        bad = [
            f"{k}: {tuple(state_dict[k].shape)} {state_dict[k].dtype}, expected {tuple(v.shape)} {v.dtype}"
            for k, v in expected.items()
            if k in state_dict
            and (
                not isinstance(state_dict[k], torch.Tensor)
                or state_dict[k].shape != v.shape
                or state_dict[k].dtype != v.dtype
            )
        ]
        if bad:
            error_msgs.append(f"cached embedding state does not fit this cache: {bad[:3]}")
        if bad or any(k not in state_dict for k in expected):
            return
        with torch.no_grad(), self._lock:
            self._load_tensors(state_dict, prefix)

    def _load_tensors(self, state_dict: dict[str, torch.Tensor], prefix: str) -> None:
        """Restore a checked state dict (see :meth:`save_state`)."""
        self._live.clear()
        self._prefetched.clear()
        self._staged = np.zeros(0, np.int64)
        self._set_views(self.capacity)
        cap = self.capacity
        self._host.copy_(state_dict[prefix + "host_weight"])
        self._wstore[:cap].copy_(state_dict[prefix + "weight"])
        self._dirty[:] = False
        self._dirty[:cap] = state_dict[prefix + "dirty"].cpu().numpy()
        self._epoch = int(state_dict[prefix + "epoch"])
        for name, st in self._states.items():
            st.host.copy_(state_dict[prefix + f"row_state.{name}.host"])
            st.store[:cap].copy_(state_dict[prefix + f"row_state.{name}.slots"])
        for i, pol in enumerate(self.policies):
            ps = {k: v for k, v in pol.state_dict().items() if not isinstance(v, torch.Tensor)}
            n = len(prefix + f"policy.{i}.")
            ps.update(
                {k[n:]: v.cpu() for k, v in state_dict.items() if k.startswith(prefix + f"policy.{i}.")}
            )
            pol.load_state_dict(ps)

    # the collection's state dict, as a RowStore (recnotebooks.nn.rows) gives it
    def save_to_state_dict(
        self, module: torch.nn.Module, destination: dict[str, Any], prefix: str, keep_vars: bool
    ) -> None:
        """The collection's ``state_dict``: :meth:`save_state` (copies, whatever ``keep_vars``)."""
        self.save_state(destination, prefix)

    def load_from_state_dict(
        self, module: torch.nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any
    ) -> None:
        """The collection's ``load_state_dict`` (``args``: the rest of torch's arguments):
        :meth:`load_state`."""
        _metadata, _strict, missing_keys, unexpected_keys, error_msgs = args
        self.load_state(state_dict, prefix, missing_keys, unexpected_keys, error_msgs)

    # ----- device moves -----------------------------------------------------------------
    def move(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """``.to(device)`` / ``.double()`` of the collection (``fn``, after the collection's own
        parameters): the slots and their states move; the tables stay on the host."""
        w = self.weight
        if w.device != self._wstore.device or w.dtype != self._wstore.dtype:
            with self._lock:
                self._wstore = fn(self._wstore)
                dev = self._wstore.device
                self._host = self._host.to(self._wstore.dtype)
                if dev.type == "cuda" and not self._host.is_pinned():
                    self._host = self._host.pin_memory()
                for st in self._states.values():
                    st.store = st.store.to(dev)
                    st.view.data = st.store[: st.view.shape[0]]
                self._stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None
                self._set_views(self.capacity + len(self._staged))
