"""Fused sparse optimizer kernels: grouping, gradient reduction and update in one pass.

GPU embedding libraries (FBGEMM's table-batched embeddings, used by TorchRec) never build
a weight gradient: their backward kernel walks the lookups grouped by row, sums each
row's gradient in registers and applies the optimizer to that row at once. This module is
that kernel for CPUs, written as readable loops and compiled with Numba. Adagrad (row-wise
or exact) needs each row's summed gradient:

    split the lookups into buckets of 2**shift consecutive rows (a stable counting sort)
    for each bucket (in parallel):
        for each of its lookups k, in order:   (a small map gives each distinct row a slot)
            g[slot of row k] += coef[k] * pooled_grad[bag[k]]
        for each distinct row r of the bucket:
            row-wise: s[r] += mean(g**2);  w[r] -= lr * g / (sqrt(s[r]) + eps)
            exact:    s[r] += g**2;        w[r] -= lr * g / (sqrt(s[r]) + eps)   (per element)

The counting sort replaces a global sort of all lookups: a bucket's slot map and gradient
sums stay in cache, and each table row is read and written once. A row's gradient is
summed in lookup order, so results do not depend on the thread count.

SGD is linear, so it needs no per-row sum and no sort:

    for each range of rows (in parallel; no two ranges share a row):
        for each lookup k hitting the range, in order:
            prefetch the row of lookup k + 16
            w[ids[k]] -= lr * coef[k] * pooled_grad[bag[k]]

It reads the pooled gradient in order, and the prefetches (as FBGEMM's CPU embedding
kernels issue them) let the random row accesses overlap. Inside a training step at pooling
20 (327,680 lookups) it took 0.8-0.9x the bucketed kernel's time (BENCHMARKS.md). Where
the caller asks for it, a one-bit-per-row scratch map counts the distinct rows updated, in
a second pass over the ids (about a sixth of the kernel's time at pooling 20, so the
trainer does not ask). The Adagrads' kernel is in :mod:`recnotebooks.kernels.fused_adagrad`.

Both kernels run on PyTorch's own OpenMP threads (:mod:`recnotebooks.kernels.omp`). Run on
Numba's thread pool straight after the backward, they shared the two cores with PyTorch's
still-spinning workers, and SGD's took 1.5-1.65 times as long at pooling 20
(BENCHMARKS.md). Where they cannot run (:func:`can_run`: switched off, or weights not
float32 on the CPU) the optimizers take the readable torch path instead (same results up to
float rounding; the tests check both).
"""

from __future__ import annotations

import os
import threading

import numpy as np
import torch

from recnotebooks.kernels.omp import address, run_on_openmp, torch_openmp

__all__ = ["can_run", "fused_step", "fused_available"]

import numba
from llvmlite import ir
from numba import carray, cfunc, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from recnotebooks.kernels.fused_adagrad import adagrad
from recnotebooks.kernels.omp import call_int, call_void, f32_ptr, i32_ptr, i64_ptr, u8_ptr

if "NUMBA_THREADING_LAYER" not in os.environ:
    # Numba's OpenMP layer loads a second OpenMP runtime beside PyTorch's: each one's
    # threads spin after its parallel region and steal the cores the other needs next
    # (several ms per kernel on a 2-core laptop). Numba's own work queue does not spin.
    # Set NUMBA_THREADING_LAYER to choose otherwise (the work queue does not allow
    # parallel kernels launched from several Python threads at once).
    numba.config.THREADING_LAYER = "workqueue"

ENABLED = os.environ.get("RECNB_FUSED", "1") != "0"
PREFETCH_AHEAD = 16  # lookups between a row's prefetch and its update (8-32 measured alike)
_BLOCK_BAGS = 256  # SGD: bags per block whose row range decides which threads visit it
_seen = np.zeros(0, np.uint8)  # SGD's distinct-row bit map, grown on demand, left all zero
_SEEN_LOCK = threading.Lock()
_NO_SEEN = np.zeros(1, np.uint8)  # what an uncounted SGD step passes: its kernel never reads it
# the SGD kernel's argument block for an OpenMP launch (see _sgd): 21 entries, then
# the runtime's omp_get_thread_num, omp_get_num_threads and GOMP_barrier
_TID, _NT, _BARRIER = 21, 22, 23
_NARGS = 24


def fused_available() -> bool:
    """True unless the fused kernels are switched off (``RECNB_FUSED=0``)."""
    return ENABLED


@intrinsic
def _prefetch_row(typingctx, arr, idx):  # pragma: no cover - compiled
    """Ask the CPU to fetch row ``idx`` of a C-contiguous 2-D array into its caches, for
    writing (LLVM's ``llvm.prefetch``, one per 64-byte line of the row)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 2 and arr.layout == "C"):
        return None

    def codegen(context, builder, signature, args):
        aryty, idxty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        cols = cgutils.unpack_tuple(builder, ary.shape)[1]
        row = context.cast(builder, args[1], idxty, types.intp)
        ptr = builder.gep(ary.data, [builder.mul(row, cols)])
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0"
        )
        base = builder.bitcast(ptr, i8p)
        nbytes = builder.mul(cols, context.get_constant(types.intp, aryty.dtype.bitwidth // 8))
        with cgutils.for_range_slice(
            builder, context.get_constant(types.intp, 0), nbytes, context.get_constant(types.intp, 64)
        ) as (off, _):
            builder.call(fn, [builder.gep(base, [off]), i32(1), i32(3), i32(1)])  # write, keep, data
        return context.get_dummy_value()

    return types.void(arr, idx), codegen


@njit(cache=True)
def _block_range(ids, offsets, block, j, lo, hi):  # pragma: no cover - compiled
    """``lo[j]``, ``hi[j]``: lowest and highest row hit by block ``j`` of ``block``
    consecutive bags (an empty block gets an empty range)."""
    nbags = offsets.shape[0] - 1
    a, z = np.int64(np.iinfo(np.int64).max), np.int64(-1)
    for k in range(offsets[j * block], offsets[min(nbags, (j + 1) * block)]):
        a, z = min(a, np.int64(ids[k])), max(z, np.int64(ids[k]))
    lo[j], hi[j] = a, z


@njit(cache=True, fastmath=True)
def _sgd_chunk(  # pragma: no cover - compiled
    w, grad, ids, offsets, cf, has_cf, lr, seen, blo, bhi, c, nchunk, count
):
    """SGD lookup by lookup for chunk ``c``, which owns rows ``[c * span, (c + 1) * span)``
    (span a multiple of 64, so no two chunks share a byte of ``seen``): applies, in
    lookup order, the lookups that hit them, visiting only the blocks of ``_BLOCK_BAGS`` bags
    whose row range ``[blo, bhi]`` meets its own (tables' ids come one table after
    another). With ``count``, returns the distinct rows updated (else 0); leaves its
    bits of ``seen`` (one per row, zero on entry) zero."""
    nrows, dim = w.shape
    block, ahead = _BLOCK_BAGS, PREFETCH_AHEAD  # compile-time constants
    nbags = offsets.shape[0] - 1
    span = ((nrows + nchunk - 1) // nchunk + 63) // 64 * 64
    lo, hi = c * span, min(nrows, (c + 1) * span)
    nd, visited = 0, 0
    for j in range(blo.shape[0]):
        if bhi[j] < lo or blo[j] >= hi:
            continue
        kend = offsets[min(nbags, (j + 1) * block)]
        visited += kend - offsets[j * block]
        for b in range(j * block, min(nbags, (j + 1) * block)):
            for k in range(offsets[b], offsets[b + 1]):
                if k + ahead < kend:
                    rp = ids[k + ahead]
                    if rp >= lo and rp < hi:
                        _prefetch_row(w, rp)
                r = ids[k]
                if r >= lo and r < hi:
                    scale = lr * cf[k] if has_cf else lr
                    for d in range(dim):
                        w[r, d] -= scale * grad[b, d]
        if not count:
            continue
        # distinct rows are counted apart: kept out of the loop above, whose speed is in
        # the overlap of its row accesses
        for k in range(offsets[j * block], kend):
            r = ids[k]
            if r >= lo and r < hi:
                mark = seen[r >> 3]
                bit = np.uint8(1 << (r & 7))
                nd += (mark & bit) == 0
                seen[r >> 3] = mark | bit
    if not count:
        return 0
    if hi - lo <= 64 * visited:  # clearing the chunk's bytes is cheaper than a pass
        seen[lo >> 3 : (hi + 7) >> 3] = 0
    else:
        for j in range(blo.shape[0]):
            if bhi[j] >= lo and blo[j] < hi:
                for k in range(offsets[j * block], offsets[min(nbags, (j + 1) * block)]):
                    r = ids[k]
                    if r >= lo and r < hi:
                        seen[r >> 3] = 0
    return nd


@njit(parallel=True, cache=True)
def _sgd_lookups(w, grad, ids, offsets, cf, has_cf, lr, seen, nchunk, count):  # pragma: no cover
    """The SGD kernel on Numba's threads: the blocks' row ranges, then each chunk."""
    nblk = (offsets.shape[0] - 1 + _BLOCK_BAGS - 1) // _BLOCK_BAGS
    blo, bhi = np.empty(nblk, np.int64), np.empty(nblk, np.int64)
    for j in prange(nblk):
        _block_range(ids, offsets, _BLOCK_BAGS, j, blo, bhi)
    distinct = np.zeros(nchunk, np.int64)
    for c in prange(nchunk):
        distinct[c] = _sgd_chunk(w, grad, ids, offsets, cf, has_cf, lr, seen, blo, bhi, c, nchunk, count)
    return distinct.sum()


@njit(cache=True)
def _sgd_team(
    w, grad, ids, offsets, cf, has_cf, lr, seen, blo, bhi, distinct, nchunk, count, a
):  # pragma: no cover
    """The SGD kernel as one thread of an OpenMP team (``a``: the argument block, whose
    last three entries are the runtime's thread-number, team-size and barrier calls)."""
    tid, nt = call_int(a[_TID]), call_int(a[_NT])
    for j in range(tid, blo.shape[0], nt):
        _block_range(ids, offsets, _BLOCK_BAGS, j, blo, bhi)
    call_void(a[_BARRIER])  # every block's range is known before any chunk starts
    for c in range(tid, nchunk, nt):
        distinct[c] = _sgd_chunk(w, grad, ids, offsets, cf, has_cf, lr, seen, blo, bhi, c, nchunk, count)


try:  # compiled at import: where Numba cannot build it, only Numba's own pool is used

    @cfunc(types.void(types.voidptr), cache=True)
    def _sgd_omp(data):  # pragma: no cover - compiled
        """Entry point for :func:`recnotebooks.kernels.omp.run_on_openmp`: unpacks the argument block
        written by :func:`_sgd` and runs :func:`_sgd_team` (int32 or int64 ids)."""
        a = carray(data, (_NARGS,), np.int64)
        nbags, dim = a[4], a[2]
        w = carray(f32_ptr(a[0]), (a[1], dim))
        grad = carray(f32_ptr(a[3]), (nbags, dim))
        cf = carray(f32_ptr(a[9]), (a[10],))
        lr = carray(f32_ptr(a[11]), (1,))[0]
        seen = carray(u8_ptr(a[12]), (a[13],))
        blo, bhi = carray(i64_ptr(a[14]), (a[16],)), carray(i64_ptr(a[15]), (a[16],))
        distinct = carray(i64_ptr(a[17]), (a[18],))
        has_cf, count = a[19] == 1, a[20] == 1
        if a[8] == 4:
            ids32, offs32 = carray(i32_ptr(a[5]), (a[6],)), carray(i32_ptr(a[7]), (nbags + 1,))
            _sgd_team(w, grad, ids32, offs32, cf, has_cf, lr, seen, blo, bhi, distinct, a[18], count, a)
        else:
            ids64, offs64 = carray(i64_ptr(a[5]), (a[6],)), carray(i64_ptr(a[7]), (nbags + 1,))
            _sgd_team(w, grad, ids64, offs64, cf, has_cf, lr, seen, blo, bhi, distinct, a[18], count, a)
except Exception:  # pragma: no cover - a Numba/llvmlite that cannot compile it
    _sgd_omp = None


def _sgd(w, grad, ids, offsets, coef, has_coef, lr, threads, seen, count):
    """Run the SGD kernel on PyTorch's OpenMP threads where it can (see
    :mod:`recnotebooks.kernels.omp`), else on Numba's (the same results, up to a few float32
    ulps: each compiled version rounds its fast-math multiply-adds its own way)."""
    rt = torch_openmp()
    if rt is None or _sgd_omp is None or ids.dtype not in (np.int32, np.int64) or offsets.dtype != ids.dtype:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        return _sgd_lookups(w, grad, ids, offsets, coef, has_coef, np.float32(lr), seen, threads, count)
    nblk = (offsets.shape[0] - 1 + _BLOCK_BAGS - 1) // _BLOCK_BAGS
    blo, bhi = np.empty(nblk, np.int64), np.empty(nblk, np.int64)
    distinct, lr_box = np.zeros(threads, np.int64), np.array([lr], np.float32)
    args = np.array(
        [
            address(w),
            w.shape[0],
            w.shape[1],
            address(grad),
            grad.shape[0],
            address(ids),
            ids.shape[0],
            address(offsets),
            ids.dtype.itemsize,
            address(coef),
            coef.shape[0],
            address(lr_box),
            address(seen),
            seen.shape[0],
            address(blo),
            address(bhi),
            nblk,
            address(distinct),
            threads,
            int(has_coef),
            int(count),
            rt.thread_num,
            rt.num_threads,
            rt.barrier,
        ],
        np.int64,
    )
    assert args.shape[0] == _NARGS
    run_on_openmp(rt, _sgd_omp.address, args, threads)
    return int(distinct.sum())


def can_run(
    weight: torch.Tensor,
    ids: torch.Tensor,
    offsets: torch.Tensor,
    coef: torch.Tensor | None,
    grad: torch.Tensor,
    state: torch.Tensor | None = None,
) -> bool:
    """Whether :func:`fused_step` runs for these arguments (its own, less ``lr``, ``eps`` and
    ``count_rows``): the kernels are on (``RECNB_FUSED`` is not ``0``); the weight is a contiguous
    float32 CPU tensor; the pooled gradient float32 and ``(bags, dim)``; ``coef``, if any, one
    per lookup; and ``state``, if any (the Adagrads'), a contiguous float32 CPU tensor of one
    accumulator per row (row-wise) or per element (exact), updated in place. Where it is False
    the optimizers take the torch path (:mod:`recnotebooks.nn.optim`): a GPU, fp16 or bf16
    weights, ``RECNB_FUSED=0``."""
    if not fused_available() or weight.device.type != "cpu" or weight.dtype != torch.float32:
        return False
    if grad.dtype != torch.float32 or not weight.is_contiguous():
        return False
    if grad.shape != (offsets.numel() - 1, weight.shape[1]) or (
        coef is not None and coef.numel() != ids.numel()
    ):
        return False  # the kernels size their arrays from these shapes
    return state is None or (
        state.dtype == torch.float32
        and state.device.type == "cpu"
        and state.shape in ((weight.shape[0],), weight.shape)
        and state.is_contiguous()  # updated in place: a copy would lose the update
    )


def fused_step(
    weight: torch.Tensor,
    ids: torch.Tensor,
    offsets: torch.Tensor,
    coef: torch.Tensor | None,
    grad: torch.Tensor,
    lr: float,
    state: torch.Tensor | None = None,
    eps: float = 0.0,
    count_rows: bool = True,
) -> int | None:
    """Apply SGD (``state=None``), row-wise Adagrad (``state``: one accumulator per row, shape
    ``(rows,)``) or exact Adagrad (``state``: one per element, ``weight``'s shape) for lookups
    ``ids`` (global rows) pooled into bags ``offsets`` (``include_last_offset``) whose pooled
    gradient is ``grad``; returns the rows updated, or None (doing nothing) when the kernel
    cannot run. SGD counts them only with ``count_rows`` (a second pass; without it, it returns
    -1); it keeps one scratch bit per row of the largest weight it has seen (12.5 MB per 100M
    rows), allocated once and reused. The Adagrads' grouping counts them for free."""
    if not can_run(weight, ids, offsets, coef, grad, state):
        return None
    if ids.numel() == 0:
        return 0 if count_rows or state is not None else -1
    has_coef = coef is not None
    coef_np = coef.to(torch.float32).contiguous().numpy() if has_coef else np.zeros(1, np.float32)
    threads = max(1, torch.get_num_threads())
    w_np, grad_np = weight.detach().numpy(), grad.contiguous().numpy()
    ids_np, offsets_np = ids.contiguous().numpy(), offsets.contiguous().numpy()
    if state is None and not count_rows:  # SGD, lookup by lookup: no bit map to size or hold
        _sgd(w_np, grad_np, ids_np, offsets_np, coef_np, has_coef, lr, threads, _NO_SEEN, False)
        n = -1
    elif state is None:  # SGD, counting the distinct rows in its bit map
        global _seen
        with _SEEN_LOCK:  # one bit map: the kernel releases the GIL, so steps in two threads wait
            if _seen.shape[0] < (weight.shape[0] >> 3) + 1:
                _seen = np.zeros((weight.shape[0] >> 3) + 1, np.uint8)
            n = _sgd(w_np, grad_np, ids_np, offsets_np, coef_np, has_coef, lr, threads, _seen, True)
    else:  # row-wise or exact Adagrad: bucketed by row, each row's gradient summed first
        n = adagrad(w_np, grad_np, ids_np, offsets_np, coef_np, has_coef, lr, state.numpy(), eps, threads)
    if torch.get_num_threads() != threads:  # numba's first OpenMP launch resets torch's thread count
        torch.set_num_threads(threads)
    return int(n)
