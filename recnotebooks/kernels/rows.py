"""Compiled row kernels of the fused embeddings: one pass that shifts each table's ids into the
fused weight's row space and checks their range (:func:`shift_ids`; serial below
:data:`PARALLEL_SHIFT_IDS` ids, above it on PyTorch's OpenMP threads), the range check
alone (:func:`first_out_of_range`). Transparent huge pages for big tables are the host memory's
(:func:`recnotebooks.kernels.allocator.advise_huge_pages`).

Written with Numba as plain loops. The torch path they replace (in
:class:`recnotebooks.nn.embedding.EmbeddingBagCollection` and the sharded collection) is
several tensor passes: a ``repeat_interleave`` of each table's offset added to the ids, and
two comparisons over all ids for the range check. Measured here (BENCHMARKS.md): the shift
went from 1.1 to 0.6-0.8 ms at pooling 20, the range check from 0.60 to 0.20 ms on 164k ids.
Both return ``None`` where they cannot run (not on the CPU, an index dtype other than
int32/int64): the caller then uses the torch ops.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import carray, cfunc, njit, types

from recnotebooks.kernels.omp import address, call_int, i32_ptr, i64_ptr, run_on_openmp, torch_openmp

__all__ = ["shift_ids", "first_out_of_range"]


@njit(cache=True)
def _shift_range(vals, starts, num_rows, row_offsets, check, out, j0, j1):  # pragma: no cover - compiled
    """``out[j] = vals[j] + row_offsets[t]`` for the ids ``j0:j1`` (each in its table ``t``'s
    ``starts[t]:starts[t+1]``); returns the first of them out of its table's range, or -1.
    Vectorised: the range check is folded into the add loop."""
    for t in range(num_rows.shape[0]):
        a, z = max(starts[t], j0), min(starts[t + 1], j1)
        if a >= z:
            continue
        n, off = num_rows[t], row_offsets[t]
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


@njit(cache=True)
def _shift_ids(vals, starts, num_rows, row_offsets, check, out):  # pragma: no cover - compiled
    """:func:`_shift_range` over all the ids: one serial pass (no thread pool)."""
    return _shift_range(vals, starts, num_rows, row_offsets, check, out, 0, vals.shape[0])


#: the argument block of the OpenMP launch of the shift (see :func:`shift_ids`)
_S_VALS, _S_N, _S_STARTS, _S_T, _S_ROWS, _S_OFFS, _S_OUT, _S_BAD, _S_CHECK, _S_ITEM = range(10)
_S_TID, _S_NT, _S_NARGS = 10, 11, 12
#: below this many ids one thread shifts them (a team's start costs more than it saves)
PARALLEL_SHIFT_IDS = 65536

try:  # compiled at import: where Numba cannot build it, the serial pass is used

    @cfunc(types.void(types.voidptr), cache=True)
    def _shift_omp(data):  # pragma: no cover - compiled
        """One thread's share of :func:`_shift_range` on PyTorch's OpenMP team (an equal slice
        of the ids each); its first id out of range goes to ``bad[thread]``."""
        a = carray(data, (_S_NARGS,), np.int64)
        n, nt, tid, T = a[_S_N], call_int(a[_S_NT]), call_int(a[_S_TID]), a[_S_T]
        chunk = (n + nt - 1) // nt
        j0, j1 = min(n, tid * chunk), min(n, (tid + 1) * chunk)
        starts, rows = carray(i64_ptr(a[_S_STARTS]), (T + 1,)), carray(i64_ptr(a[_S_ROWS]), (T,))
        offs, bad = carray(i64_ptr(a[_S_OFFS]), (T,)), carray(i64_ptr(a[_S_BAD]), (nt,))
        check = a[_S_CHECK] == 1
        if a[_S_ITEM] == 4:
            v32, o32 = carray(i32_ptr(a[_S_VALS]), (n,)), carray(i32_ptr(a[_S_OUT]), (n,))
            bad[tid] = _shift_range(v32, starts, rows, offs, check, o32, j0, j1)
        else:
            v64, o64 = carray(i64_ptr(a[_S_VALS]), (n,)), carray(i64_ptr(a[_S_OUT]), (n,))
            bad[tid] = _shift_range(v64, starts, rows, offs, check, o64, j0, j1)
except Exception:  # pragma: no cover - a Numba/llvmlite that cannot compile it
    _shift_omp = None


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
    v = vals.contiguous().numpy()
    st, rows, offs = (t.to(torch.int64).contiguous().numpy() for t in (starts, num_rows, row_offsets))
    rt, threads = torch_openmp(), torch.get_num_threads()
    if _shift_omp is None or rt is None or threads < 2 or v.shape[0] < PARALLEL_SHIFT_IDS:
        return out, int(_shift_ids(v, st, rows, offs, check, out.numpy()))
    # on PyTorch's own OpenMP threads, as the fused optimizer runs (kernels.omp: no second pool)
    o, bad = out.numpy(), np.full(threads, -1, np.int64)
    args = np.array(
        [
            address(v),
            v.shape[0],
            address(st),
            rows.shape[0],
            address(rows),
            address(offs),
            address(o),
            address(bad),
            int(check),
            v.dtype.itemsize,
            rt.thread_num,
            rt.num_threads,
        ],
        np.int64,
    )
    run_on_openmp(rt, _shift_omp.address, args, threads)
    found = bad[bad >= 0]
    return out, int(found.min()) if found.size else -1


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
