"""Row helpers of the embeddings: segment ids and grouping lookups by row (the plain torch
path of the backward), and :class:`RowStore`, what an embedding collection asks of the store
that holds its rows.

Grouping has a CPU fast path: one NumPy SIMD sort of packed (row, position) keys is several
times faster than ``torch.sort`` with indices on CPU. The compiled one-pass kernels (shifting
ids into the fused weight's rows, range checks) and huge pages for big tables live in
:mod:`recnotebooks.kernels.rows`; the fused optimizer update in :mod:`recnotebooks.kernels.fused`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from recnotebooks.checks import check_fits_memory, check_int
from recnotebooks.sparse import JaggedBatch

__all__ = ["MemoryRows", "RowStore", "segment_ids", "group_by_row"]


def segment_ids(offsets: torch.Tensor, n: int) -> torch.Tensor:
    """Segment number of each of ``n`` elements given ``offsets`` (len segments+1, from 0).

    Empty segments are skipped correctly. Equivalent to
    ``repeat_interleave(arange(segments), diff(offsets))`` but a count-and-cumsum, which is
    several times faster on CPU.
    """
    marks = torch.zeros(n + 1, dtype=torch.int32, device=offsets.device)
    inner = offsets[1:-1].long()
    marks.index_add_(0, inner, torch.ones_like(inner, dtype=torch.int32))
    return torch.cumsum(marks[:n], 0, dtype=torch.int32)


def group_by_row(ids: torch.Tensor, bags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sort lookups by row id: returns ``(rows, counts, order)``.

    ``rows`` are the distinct row ids ascending, ``counts`` how many lookups hit each, and
    ``order`` the lookup positions sorted by row (stable within a row is not guaranteed).
    On CPU the (row, position) pairs are packed into one int64 key and sorted with NumPy's
    SIMD sort instead of an argsort.
    """
    n = ids.numel()
    if ids.device.type == "cpu" and n < 2**32 and (n == 0 or int(ids.max()) < 2**31):
        key = ids.to(torch.int64).bitwise_left_shift(32).bitwise_or_(torch.arange(n, dtype=torch.int64))
        key = torch.from_numpy(np.sort(key.numpy()))
        sorted_ids = key.bitwise_right_shift(32)
        order = key.bitwise_and_(0xFFFFFFFF)
    else:
        sorted_ids, order = torch.sort(ids.to(torch.int64))
    rows, counts = torch.unique_consecutive(sorted_ids, return_counts=True)
    return rows, counts, order


class RowStore(Protocol):
    """Where an :class:`~recnotebooks.nn.EmbeddingBagCollection`'s rows live: the collection holds
    one as ``rows``. :class:`MemoryRows` keeps every row in ``weight``;
    a cache's :class:`~recnotebooks.cache.store.CacheStore` keeps the tables on the host and
    ``weight`` is its device slots. The collection's one fused lookup reads ``weight`` at the
    indices :meth:`lookup` gives, and the sparse optimizers update ``weight`` and the row states
    at those indices."""

    #: the rows the fused lookup reads and the optimizers update (every row, or device slots)
    weight: nn.Parameter

    def lookup(self, ids: torch.Tensor, batch: JaggedBatch, grad: bool, live: list[int]) -> torch.Tensor:
        """Indices into ``weight`` of a batch's global row ``ids`` (``grad``: the lookup records a
        gradient; ``live``: the stamps of the forwards still waiting for their step)."""
        ...

    @property
    def stamp(self) -> int | None:
        """The stamp of the last lookup that recorded a gradient (``None``: nothing to protect)."""
        ...

    def forward_done(self) -> None:
        """After a forward that records no gradient."""
        ...

    def step_done(self) -> None:
        """The step that used the looked-up rows has ended."""
        ...

    def new_row_state(
        self, name: str, fill: float, dtype: torch.dtype = torch.float32, width: int | None = None
    ) -> torch.Tensor:
        """A per-row optimizer state over ``weight``'s rows, filled with ``fill``."""
        ...

    def table_weight(self, k: int) -> torch.Tensor:
        """Table ``k``'s rows."""
        ...

    def write_rows(self, chunks: Iterable[tuple[int, torch.Tensor]]) -> None:
        """Write every row, from ``(first row, rows)`` chunks in order (the initial tables)."""
        ...

    def reload(self) -> None:
        """The tables' rows were written from outside (through :meth:`table_weight`)."""
        ...

    def save_to_state_dict(
        self, module: nn.Module, destination: dict[str, Any], prefix: str, keep_vars: bool
    ) -> None:
        """The collection's ``state_dict`` entries (``module``: the collection)."""
        ...

    def load_from_state_dict(
        self, module: nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any
    ) -> None:
        """Restore what :meth:`save_to_state_dict` wrote (``args``: the rest of torch's
        ``Module._load_from_state_dict`` arguments: metadata, strict, missing and unexpected keys,
        error messages)."""
        ...

    def move(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """After the collection's ``.to(device)`` / ``.double()`` moved its parameters with ``fn``."""
        ...

    def describe(self) -> str:
        """The store in words, for the collection's ``repr`` (``""``: nothing to add)."""
        ...


class MemoryRows:
    """Every row in one ``weight`` on the device: the plain :class:`RowStore`.
    A lookup's indices are the global rows; the weight is a parameter of the collection, saved
    and moved by torch as any module's."""

    stamp = None  # no lookup needs protecting until its step

    def __init__(self, weight: nn.Parameter, table_offsets: Sequence[int]) -> None:
        self.weight = weight
        self.table_offsets = list(table_offsets)  # table k's rows: table_offsets[k]..table_offsets[k + 1]

    def lookup(self, ids: torch.Tensor, batch: JaggedBatch, grad: bool, live: list[int]) -> torch.Tensor:
        return ids

    def forward_done(self) -> None:
        pass

    def step_done(self) -> None:
        pass

    def new_row_state(
        self, name: str, fill: float, dtype: torch.dtype = torch.float32, width: int | None = None
    ) -> torch.Tensor:
        """A per-row optimizer state filled with ``fill``: one value per row (``width=None``, e.g.
        row-wise Adagrad's accumulator, shape ``(rows,)``) or ``width`` values per row (e.g. exact
        Adagrad's, one per element: ``(rows, embedding_dim)``)."""
        rows = self.weight.shape[0]
        shape = (rows,) if width is None else (rows, check_int("width", width, lo=1))
        check_fits_memory(  # exact Adagrad's state is as large as an fp32 weight: checked first
            f"the optimizer state {name!r} ({rows:,} rows x {width or 1}, {dtype})",
            rows * (width or 1) * dtype.itemsize,
            self.weight.device,
            hint="row-wise Adagrad keeps one value per row (rowwise_adagrad), or cap the rows",
        )
        return torch.full(shape, float(fill), dtype=dtype, device=self.weight.device)

    def table_weight(self, k: int) -> torch.Tensor:
        return self.weight.detach()[self.table_offsets[k] : self.table_offsets[k + 1]]

    @torch.no_grad()
    def write_rows(self, chunks: Iterable[tuple[int, torch.Tensor]]) -> None:
        for lo, rows in chunks:
            self.weight[lo : lo + rows.shape[0]].copy_(rows)

    def reload(self) -> None:
        pass  # the rows written are the weight's own

    def save_to_state_dict(
        self, module: nn.Module, destination: dict[str, Any], prefix: str, keep_vars: bool
    ) -> None:
        nn.Module._save_to_state_dict(module, destination, prefix, keep_vars)

    def load_from_state_dict(
        self, module: nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any
    ) -> None:
        nn.Module._load_from_state_dict(module, state_dict, prefix, *args)

    def move(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        pass  # torch moved the weight, the collection's parameter

    def describe(self) -> str:
        return ""
