"""Row kernels behind the fused embeddings: segment ids, grouping lookups by row, and
gathering/scattering embedding rows.

Each has a CUDA path (plain torch ops) and a CPU path tuned for the 2-core laptops this
course runs on: NumPy's vectorised sort and row take/put are several times faster than
the generic ``torch.sort`` with indices and ``index_select``/``index_copy_`` on CPU, and
transparent huge pages cut the TLB misses of random row access into multi-GB tables.
Every function returns the same values on either path (the tests check both).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

__all__ = [
    "segment_ids", "group_by_row", "gather_rows", "scatter_rows", "update_rows", "advise_huge_pages",
]  # fmt: skip

_POOL: ThreadPoolExecutor | None = None
_PARALLEL_MIN = 1 << 14  # below this many elements, threads cost more than they save
_BLOCK = 2048  # rows per read-modify-write block (about 0.5 MiB at dim 64)


def _workers() -> int:
    return max(1, torch.get_num_threads())


def _pool() -> ThreadPoolExecutor:
    """Worker threads for NumPy kernels (they release the GIL); sized like torch's pool."""
    global _POOL
    if _POOL is None or _POOL._max_workers != _workers():  # noqa: SLF001
        _POOL = ThreadPoolExecutor(max_workers=_workers(), thread_name_prefix="recnb-rows")
    return _POOL


def _chunks(n: int) -> list[slice]:
    if n == 0:
        return [slice(0, 0)]
    k = _workers() if n >= _PARALLEL_MIN else 1
    step = -(-n // k)
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _parallel(fn: Callable[[slice], object], n: int) -> list[object]:
    parts = _chunks(n)
    if len(parts) == 1:
        return [fn(parts[0])]
    return list(_pool().map(fn, parts))

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


def _numpy_ok(weight: torch.Tensor) -> bool:
    return weight.device.type == "cpu" and weight.dtype in (torch.float32, torch.float64) and weight.is_contiguous()


def gather_rows(weight: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``weight[rows]`` for int64 ``rows`` (a new tensor)."""
    if _numpy_ok(weight):
        w, r = weight.detach().numpy(), rows.numpy()
        out = np.empty((r.size, w.shape[1]), dtype=w.dtype)
        _parallel(lambda s: np.take(w, r[s], axis=0, out=out[s]), r.size)
        return torch.from_numpy(out)
    return weight.detach().index_select(0, rows)


def scatter_rows(weight: torch.Tensor, rows: torch.Tensor, values: torch.Tensor) -> None:
    """``weight[rows] = values`` in place, for distinct int64 ``rows``."""
    if _numpy_ok(weight) and values.dtype == weight.dtype:
        w, r, v = weight.detach().numpy(), rows.numpy(), values.contiguous().numpy()

        def put(s: slice) -> None:
            w[r[s]] = v[s]

        _parallel(put, r.size)
    else:
        weight.detach().index_copy_(0, rows, values.to(weight.dtype))


def update_rows(
    weight: torch.Tensor,
    rows: torch.Tensor,
    grads: torch.Tensor,
    update: Callable[[np.ndarray, np.ndarray, slice], None],
    fallback: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Read-modify-write the distinct ``rows`` of ``weight`` with their gradient rows.

    CPU float weights: each worker thread gathers a chunk of rows, applies
    ``update(chunk_rows, chunk_grads, chunk_slice)`` in place (NumPy arrays) and writes the
    chunk back while it is still in cache. Elsewhere: ``weight[rows] = fallback(weight[rows],
    grads)`` with torch ops.
    """
    if _numpy_ok(weight) and grads.dtype == weight.dtype:
        w, r, g = weight.detach().numpy(), rows.numpy(), grads.contiguous().numpy()

        def work(part: slice) -> None:
            # small blocks: a block's rows are still in cache when written back
            for lo in range(part.start, part.stop, _BLOCK):
                s = slice(lo, min(lo + _BLOCK, part.stop))
                x = np.take(w, r[s], axis=0)
                update(x, g[s], s)
                w[r[s]] = x

        _parallel(work, r.size)
    else:
        new = fallback(weight.detach().index_select(0, rows), grads.to(weight.dtype))
        weight.detach().index_copy_(0, rows, new.to(weight.dtype))


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
