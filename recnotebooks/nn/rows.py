"""Row kernels behind the fused embeddings: segment ids, shifting ids into the fused
weight's rows, grouping lookups by row, gathering/scattering embedding rows, and huge
pages for big tables.

Grouping has a CPU fast path: one NumPy SIMD sort of packed (row, position) keys is several
times faster than ``torch.sort`` with indices on CPU. Transparent huge pages cut the TLB
misses of random row access into multi-GB tables. The fast optimizer update itself lives in
:mod:`recnotebooks.nn.fused`; ``gather_rows``/``scatter_rows`` serve the plain torch path
(CUDA, other dtypes, no Numba).
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import torch

__all__ = ["segment_ids", "shift_ids", "first_out_of_range", "group_by_row", "gather_rows", "scatter_rows",
           "advise_huge_pages"]  # fmt: skip

try:  # optional accelerator
    from numba import njit
except ImportError:  # pragma: no cover - exercised when numba is absent
    njit = None

_MADV_HUGEPAGE = 14  # linux/mman.h
_HUGE = 2 << 20


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


if njit is not None:

    @njit(cache=True)
    def _shift_ids(vals, starts, num_rows, row_offsets, check, out):  # pragma: no cover - compiled
        """``out[j] = vals[j] + row_offsets[t]`` for the ids ``starts[t]:starts[t+1]`` of
        table ``t``; returns the first id out of its table's range, or -1. One serial pass
        (no thread pool), vectorised: the range check is folded into the add loop."""
        for t in range(num_rows.shape[0]):
            a, z, n, off = starts[t], starts[t + 1], num_rows[t], row_offsets[t]
            outside = False
            for j in range(a, z):
                v = vals[j]
                outside |= (v < 0) | (v >= n)
                out[j] = v + off
            if check and outside:
                for j in range(a, z):
                    if vals[j] < 0 or vals[j] >= n:
                        return j
        return -1


def shift_ids(
    vals: torch.Tensor,
    starts: torch.Tensor,
    num_rows: torch.Tensor,
    row_offsets: torch.Tensor,
    check: bool = True,
) -> tuple[torch.Tensor | None, int]:
    """Ids of table ``t`` (``vals[starts[t]:starts[t+1]]``) shifted by ``row_offsets[t]``
    into one fused weight's row space, in ``vals``' dtype, and the position of the first id
    outside ``0..num_rows[t]-1`` (-1 if none, or if ``check`` is false). Returns
    ``(None, -1)`` where the one-pass CPU kernel cannot run (no Numba, not on the CPU, an
    index dtype other than int32/int64): the caller then uses torch ops."""
    if njit is None or vals.device.type != "cpu" or vals.dtype not in (torch.int32, torch.int64):
        return None, -1
    out = torch.empty_like(vals)
    as_np = [t.to(torch.int64).numpy() for t in (starts, num_rows, row_offsets)]
    bad = _shift_ids(vals.contiguous().numpy(), *as_np, check, out.numpy())
    return out, int(bad)


if njit is not None:

    @njit(cache=True)
    def _first_out_of_range(vals, starts, num_rows):  # pragma: no cover - compiled
        """The first ``j`` in ``starts[t]:starts[t+1]`` with ``vals[j]`` outside ``0..num_rows[t]-1``,
        or -1: one serial read-only pass, the exact position found only when a table has one."""
        for t in range(num_rows.shape[0]):
            a, z, n = starts[t], starts[t + 1], num_rows[t]
            outside = False
            for j in range(a, z):
                v = vals[j]
                outside |= (v < 0) | (v >= n)
            if outside:
                for j in range(a, z):
                    if vals[j] < 0 or vals[j] >= n:
                        return j
        return -1


def first_out_of_range(vals: torch.Tensor, starts: torch.Tensor, num_rows: torch.Tensor) -> int | None:
    """The position of the first id of table ``t`` (``vals[starts[t]:starts[t+1]]``) outside
    ``0..num_rows[t]-1``, or -1 if every id is in range; ``None`` where the one-pass CPU kernel
    cannot run (as :func:`shift_ids`): the caller then checks with torch ops."""
    if njit is None or vals.device.type != "cpu" or vals.dtype not in (torch.int32, torch.int64):
        return None
    as_np = [t.to(torch.int64).numpy() for t in (starts, num_rows)]
    return int(_first_out_of_range(vals.contiguous().numpy(), *as_np))


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


def gather_rows(weight: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``weight[rows]`` for int64 ``rows`` (a new tensor)."""
    return weight.detach().index_select(0, rows)


def scatter_rows(weight: torch.Tensor, rows: torch.Tensor, values: torch.Tensor) -> None:
    """``weight[rows] = values`` in place, for distinct int64 ``rows``."""
    weight.detach().index_copy_(0, rows, values.to(weight.dtype))


def advise_huge_pages(t: torch.Tensor) -> bool:
    """Ask Linux to back a large CPU tensor with transparent huge pages (before first touch).

    Random row lookups into a multi-GB table miss the TLB on nearly every row with 4 KiB
    pages; 2 MiB pages make the page table reach fit in the TLB. A no-op (returns False)
    off Linux, on GPU tensors, or when the kernel refuses.
    """
    if not sys.platform.startswith("linux") or t.device.type != "cpu":
        return False
    nbytes = t.numel() * t.element_size()
    start = (t.data_ptr() + _HUGE - 1) & ~(_HUGE - 1)
    end = (t.data_ptr() + nbytes) & ~(_HUGE - 1)
    if end - start < _HUGE:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_HUGEPAGE) == 0
    except (OSError, AttributeError):
        return False
