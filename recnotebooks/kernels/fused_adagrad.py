"""The Adagrads' fused kernel: lookups bucketed by row, each row's gradient summed once,
then its accumulators and weights updated (the picture is in :mod:`recnotebooks.kernels.fused`).
Row-wise Adagrad keeps one accumulator per row, exact Adagrad one per element: the state is a
``(rows, 1)`` or a ``(rows, dim)`` array, and only the update of a row differs.

Four phases, each split into ``nchunk`` chunks: count the lookups of each bucket per
chunk of bags, turn the counts into start positions (serial, small), scatter the lookups
into bucket order (a stable counting sort), and update each chunk of buckets. The phases
run on PyTorch's OpenMP threads (:mod:`recnotebooks.kernels.omp`) with a barrier between them,
or on Numba's with ``prange``. Both run the same chunk functions in the same order, so no
result depends on the thread count; the two compiled versions may round their fast-math
multiply-adds apart (a few float32 ulps, tested).

Needs Numba: imported by :mod:`recnotebooks.kernels.fused` only when Numba is installed.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import carray, cfunc, njit, prange, types

from recnotebooks.kernels.omp import (
    address,
    call_int,
    call_void,
    f32_ptr,
    i32_ptr,
    i64_ptr,
    run_on_openmp,
    torch_openmp,
)

__all__ = ["bucket_shift", "group_lookups", "adagrad"]

# the argument block of an OpenMP launch (see adagrad): 25 entries, then the
# runtime's omp_get_thread_num, omp_get_num_threads and GOMP_barrier
_TID, _NT, _BARRIER = 25, 26, 27
_NARGS = 28


def bucket_shift(total_rows: int) -> int:
    """Buckets span ``2**shift`` rows: 4096 (a 16 KiB slot map, in L1/L2), more on tables
    so large that there would be over ~4096 buckets to scan per step."""
    return max(12, int(total_rows).bit_length() - 12)


@njit(cache=True)
def _count_chunk(ids, offsets, shift, c, step, counts):  # pragma: no cover - compiled
    """``counts[c, bucket]``: lookups of chunk ``c`` of bags (``step`` bags) per bucket."""
    cc = counts[c]
    for b in range(c * step, min(offsets.shape[0] - 1, (c + 1) * step)):
        for k in range(offsets[b], offsets[b + 1]):
            cc[ids[k] >> shift] += 1


@njit(cache=True)
def _bucket_starts(counts, start, bucket_start):  # pragma: no cover - compiled
    """Where each bucket starts in sorted order, and where each chunk's part of it starts."""
    pos = 0
    for bk in range(counts.shape[1]):
        bucket_start[bk] = pos
        for c in range(counts.shape[0]):
            start[c, bk] = pos
            pos += counts[c, bk]
    bucket_start[counts.shape[1]] = pos


@njit(cache=True)
def _scatter_chunk(ids, offsets, coef, has_coef, shift, c, step, start, row, bag, cf):  # pragma: no cover
    """Chunk ``c``'s lookups into bucket order: each one's row, bag and coefficient."""
    cursor = start[c].copy()
    for b in range(c * step, min(offsets.shape[0] - 1, (c + 1) * step)):
        for k in range(offsets[b], offsets[b + 1]):
            bk = ids[k] >> shift
            p = cursor[bk]
            cursor[bk] = p + 1
            row[p] = ids[k]
            bag[p] = b
            if has_coef:
                cf[p] = coef[k]


# fastmath: lets LLVM vectorise the row loops (their arrays cannot alias, which Numba
# cannot prove) and fuse multiply-adds. error_model="numpy": a float division is not checked
# for a zero divisor (eps > 0 rules one out), so exact Adagrad's per-element division and
# square root vectorise too (with Python's check they stayed scalar: ~2.5x slower per row).
@njit(cache=True, fastmath=True, error_model="numpy")
def _update_chunk(
    w, grad, bucket_start, row, bag, cf, has_cf, shift, lr, state, eps, c, step
):  # pragma: no cover
    """Adagrad for the buckets of chunk ``c`` (``step`` buckets): each distinct row's gradient
    summed in lookup order in a small slot map, then, with one accumulator per row (``state``
    ``(rows, 1)``: row-wise) ``s[r] += mean(g**2)``, ``w[r] -= lr * g / (sqrt(s[r]) + eps)``, or
    with one per element (``(rows, dim)``: exact) the same element by element. Returns the rows."""
    nb, dim = bucket_start.shape[0] - 1, w.shape[1]
    exact = state.shape[1] > 1  # (with dim 1 the two updates are one)
    most = 0  # lookups in this chunk's largest bucket: bounds its distinct rows
    for bk in range(c * step, min(nb, (c + 1) * step)):
        most = max(most, bucket_start[bk + 1] - bucket_start[bk])
    slot_of = np.full(1 << shift, -1, np.int32)  # row - base -> slot; -1: not seen yet
    rows = np.empty(min(most, 1 << shift), np.int64)
    acc = np.empty((min(most, 1 << shift), dim), np.float32)
    touched = 0
    for bk in range(c * step, min(nb, (c + 1) * step)):
        base = bk << shift
        nd = 0
        for j in range(bucket_start[bk], bucket_start[bk + 1]):
            q = row[j] - base
            s = slot_of[q]
            bj = bag[j]
            k = cf[j] if has_cf else np.float32(1.0)
            if s < 0:  # the row's first lookup starts its sum
                s = nd
                slot_of[q] = s
                rows[nd] = row[j]
                nd += 1
                for d in range(dim):
                    acc[s, d] = k * grad[bj, d]
            else:
                for d in range(dim):
                    acc[s, d] += k * grad[bj, d]
        for s in range(nd):
            r = rows[s]
            slot_of[r - base] = -1
            if exact:  # s[r, d] += g[d]**2; w[r, d] -= lr * g[d] / (sqrt(s[r, d]) + eps)
                for d in range(dim):  # one array written per loop: each vectorises (one loop
                    state[r, d] += acc[s, d] * acc[s, d]  # writing both ran 2.5x slower)
                for d in range(dim):
                    acc[s, d] = lr * acc[s, d] / (np.sqrt(state[r, d]) + eps)  # the row's step
                for d in range(dim):
                    w[r, d] -= acc[s, d]
                continue
            sq = np.float32(0.0)  # float32 throughout: a float64 scale would make the
            for d in range(dim):  # update loop float64
                sq += acc[s, d] * acc[s, d]
            st = state[r, 0] + sq / np.float32(dim)
            state[r, 0] = st
            scale = lr / (np.sqrt(st) + eps)
            for d in range(dim):
                w[r, d] -= scale * acc[s, d]
        touched += nd
    return touched


@njit(parallel=True, cache=True)
def _group_prange(
    ids, offsets, coef, has_coef, shift, counts, start, bucket_start, row, bag, cf
):  # pragma: no cover - compiled
    """The first three phases (the counting sort) on Numba's threads."""
    nchunk = counts.shape[0]
    step = (offsets.shape[0] - 1 + nchunk - 1) // nchunk
    for c in prange(nchunk):
        _count_chunk(ids, offsets, shift, c, step, counts)
    _bucket_starts(counts, start, bucket_start)
    for c in prange(nchunk):
        _scatter_chunk(ids, offsets, coef, has_coef, shift, c, step, start, row, bag, cf)


@njit(parallel=True, cache=True)
def _adagrad_prange(  # pragma: no cover - compiled
    w, grad, ids, offsets, coef, has_coef, shift, lr, state, eps, scratch, touched
):
    """The four phases on Numba's threads. ``scratch``: the counting sort's arrays that
    :func:`adagrad` allocates, ``(counts, start, bucket_start, row, bag, cf)``;
    ``touched`` stays apart (a prange loop's writes to an array unpacked from a tuple were
    lost)."""
    counts, start, bucket_start, row, bag, cf = scratch
    nchunk = counts.shape[0]
    _group_prange(ids, offsets, coef, has_coef, shift, counts, start, bucket_start, row, bag, cf)
    bstep = (bucket_start.shape[0] - 1 + nchunk - 1) // nchunk
    for c in prange(nchunk):
        touched[c] = _update_chunk(
            w, grad, bucket_start, row, bag, cf, has_coef, shift, lr, state, eps, c, bstep
        )


@njit(cache=True)
def _adagrad_team(  # pragma: no cover - compiled
    w, grad, ids, offsets, coef, has_coef, shift, lr, state, eps, scratch, touched, a
):
    """The four phases as one thread of an OpenMP team, a barrier after each of the first three."""
    counts, start, bucket_start, row, bag, cf = scratch
    tid, nt = call_int(a[_TID]), call_int(a[_NT])
    nchunk = counts.shape[0]
    step = (offsets.shape[0] - 1 + nchunk - 1) // nchunk
    for c in range(tid, nchunk, nt):
        _count_chunk(ids, offsets, shift, c, step, counts)
    call_void(a[_BARRIER])
    if tid == 0:
        _bucket_starts(counts, start, bucket_start)
    call_void(a[_BARRIER])
    for c in range(tid, nchunk, nt):
        _scatter_chunk(ids, offsets, coef, has_coef, shift, c, step, start, row, bag, cf)
    call_void(a[_BARRIER])
    if a[12] == 0:  # no accumulator: group only (the calibration times this)
        return
    bstep = (bucket_start.shape[0] - 1 + nchunk - 1) // nchunk
    for c in range(tid, nchunk, nt):
        touched[c] = _update_chunk(
            w, grad, bucket_start, row, bag, cf, has_coef, shift, lr, state, eps, c, bstep
        )


try:  # compiled at import: where Numba cannot build it, only Numba's own pool is used

    @cfunc(types.void(types.voidptr), cache=True)
    def _adagrad_omp(data):  # pragma: no cover - compiled
        """Entry point for :func:`recnotebooks.kernels.omp.run_on_openmp`: unpacks the argument block
        written by :func:`adagrad` and runs :func:`_adagrad_team` (int32 or int64 ids)."""
        a = carray(data, (_NARGS,), np.int64)
        nids, nbags, dim, nchunk, nb = a[6], a[4], a[2], a[13], a[14]
        w, grad = carray(f32_ptr(a[0]), (a[1], dim)), carray(f32_ptr(a[3]), (nbags, dim))
        coef, cf = carray(f32_ptr(a[9]), (a[10],)), carray(f32_ptr(a[22]), (a[10],))
        scalars = carray(f32_ptr(a[11]), (2,))
        state = carray(f32_ptr(a[12]), (a[1], a[24]))
        counts, start = carray(i64_ptr(a[15]), (nchunk, nb)), carray(i64_ptr(a[16]), (nchunk, nb))
        bucket_start, touched = carray(i64_ptr(a[17]), (nb + 1,)), carray(i64_ptr(a[23]), (nchunk,))
        bag = carray(i32_ptr(a[21]), (nids,))
        shift, has_coef = a[18], a[19] == 1
        if a[8] == 4:
            ids32, offs32 = carray(i32_ptr(a[5]), (nids,)), carray(i32_ptr(a[7]), (nbags + 1,))
            row32 = carray(i32_ptr(a[20]), (nids,))
            lr, eps = scalars[0], scalars[1]
            scratch = (counts, start, bucket_start, row32, bag, cf)
            _adagrad_team(w, grad, ids32, offs32, coef, has_coef, shift, lr, state, eps, scratch, touched, a)
        else:
            ids64, offs64 = carray(i64_ptr(a[5]), (nids,)), carray(i64_ptr(a[7]), (nbags + 1,))
            row64 = carray(i64_ptr(a[20]), (nids,))
            lr, eps = scalars[0], scalars[1]
            scratch = (counts, start, bucket_start, row64, bag, cf)
            _adagrad_team(w, grad, ids64, offs64, coef, has_coef, shift, lr, state, eps, scratch, touched, a)
except Exception:  # pragma: no cover - a Numba/llvmlite that cannot compile it
    _adagrad_omp = None


def adagrad(w, grad, ids, offsets, coef, has_coef, lr, state, eps, threads):
    """Adagrad on NumPy views (float32 ``w``, ``grad``, ``state``, ``coef``, which is a dummy
    of length 1 when ``has_coef`` is false; int32 or int64 ``ids`` and ``offsets``): row-wise
    with ``state`` of shape ``(rows,)`` or ``(rows, 1)``, exact (one accumulator per element)
    with ``state`` of ``w``'s shape; on PyTorch's OpenMP threads where it can, else on Numba's.
    Returns the distinct rows updated. ``state=None`` only groups the lookups (the calibration
    times that) and returns 0."""
    if state is not None:
        state = state.reshape(w.shape[0], -1)  # a view: the row-wise state as one column
    nchunk, shift = 4 * threads, bucket_shift(w.shape[0])
    nb, nids = (w.shape[0] >> shift) + 1, ids.shape[0]
    counts, start = np.zeros((nchunk, nb), np.int64), np.empty((nchunk, nb), np.int64)
    bucket_start, touched = np.empty(nb + 1, np.int64), np.zeros(nchunk, np.int64)
    row = np.empty(nids, ids.dtype)
    bag = np.empty(
        nids, np.int32 if offsets.shape[0] < 2**31 else np.int64
    )  # int32 halves the sort's traffic
    cf = np.ones(coef.shape[0], np.float32)
    rt = torch_openmp()
    if (
        rt is None
        or _adagrad_omp is None
        or ids.dtype not in (np.int32, np.int64)
        or offsets.dtype != ids.dtype
        or bag.dtype != np.int32
    ):
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        if state is None:
            _group_prange(ids, offsets, coef, has_coef, shift, counts, start, bucket_start, row, bag, cf)
        else:
            scratch = (counts, start, bucket_start, row, bag, cf)
            lr32, eps32 = np.float32(lr), np.float32(eps)
            _adagrad_prange(
                w, grad, ids, offsets, coef, has_coef, shift, lr32, state, eps32, scratch, touched
            )
        return int(touched.sum())
    scalars = np.array([lr, eps], np.float32)
    args = np.array(
        [
            address(w),
            w.shape[0],
            w.shape[1],
            address(grad),
            grad.shape[0],
            address(ids),
            nids,
            address(offsets),
            ids.dtype.itemsize,
            address(coef),
            coef.shape[0],
            address(scalars),
            address(state),
            nchunk,
            nb,
            address(counts),
            address(start),
            address(bucket_start),
            shift,
            int(has_coef),
            address(row),
            address(bag),
            address(cf),
            address(touched),
            1 if state is None else state.shape[1],
            rt.thread_num,
            rt.num_threads,
            rt.barrier,
        ],
        np.int64,
    )
    assert args.shape[0] == _NARGS
    run_on_openmp(rt, _adagrad_omp.address, args, threads)
    return int(touched.sum())


def group_lookups(ids: np.ndarray, offsets: np.ndarray, total_rows: int, threads: int) -> None:
    """The kernel's grouping of ``ids`` (rows ``0..total_rows-1``, bags ``offsets``) by row
    alone, on the threads the step uses, as the calibration times it."""
    w = np.broadcast_to(np.zeros((1, 1), np.float32), (total_rows, 1))  # never read: shapes only
    grad, coef = np.zeros((offsets.shape[0] - 1, 1), np.float32), np.zeros(1, np.float32)
    adagrad(w, grad, ids, offsets, coef, False, 0.0, None, 0.0, threads)
