"""Compiled row kernels of the fused embeddings: one serial pass that shifts each table's ids
into the fused weight's row space and checks their range (:func:`shift_ids`), the range check
alone (:func:`first_out_of_range`), and transparent huge pages for big tables
(:func:`advise_huge_pages`).

Written with Numba as plain loops. The torch path they replace (in
:class:`recnotebooks.nn.embedding.EmbeddingBagCollection` and the sharded collection) is
several tensor passes: a ``repeat_interleave`` of each table's offset added to the ids, and
two comparisons over all ids for the range check. Measured here (BENCHMARKS.md): the shift
went from 1.1 to 0.6-0.8 ms at pooling 20, the range check from 0.60 to 0.20 ms on 164k ids.
Both return ``None`` where they cannot run (not on the CPU, an index dtype other than
int32/int64): the caller then uses the torch ops.
"""

from __future__ import annotations

import ctypes
import sys

import torch
from numba import njit

__all__ = ["shift_ids", "first_out_of_range", "advise_huge_pages"]

_MADV_HUGEPAGE = 14  # linux/mman.h
_HUGE = 2 << 20


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
    ``(None, -1)`` where the one-pass CPU kernel cannot run (not on the CPU, an
    index dtype other than int32/int64): the caller then uses torch ops."""
    if vals.device.type != "cpu" or vals.dtype not in (torch.int32, torch.int64):
        return None, -1
    out = torch.empty_like(vals)
    as_np = [t.to(torch.int64).numpy() for t in (starts, num_rows, row_offsets)]
    bad = _shift_ids(vals.contiguous().numpy(), *as_np, check, out.numpy())
    return out, int(bad)


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
    if vals.device.type != "cpu" or vals.dtype not in (torch.int32, torch.int64):
        return None
    as_np = [t.to(torch.int64).numpy() for t in (starts, num_rows)]
    return int(_first_out_of_range(vals.contiguous().numpy(), *as_np))


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
