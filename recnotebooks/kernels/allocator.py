"""Host memory for training steps: freed memory kept for the next step (glibc's ``malloc`` told to
reuse what a step frees, :func:`keep_freed_memory`), and big tables backed by huge pages
(:func:`advise_huge_pages`).

An HSTU step allocates its attention scores and weights afresh in every layer of every step,
``(b, heads, P, P)`` blocks per bucket (:mod:`recnotebooks.kernels.jagged_attention`): some
10 MB a step for the 8 Yambda-shaped histories ``recnb validate`` measures. glibc's ``malloc``
gives the free memory at the top of its heap back to the kernel once it exceeds a *trim
threshold*, which its own rule sets to twice the largest block it has mapped and freed so far
(glibc ``malloc/malloc.c``, ``__libc_free``: ``mp_.mmap_threshold = chunksize (p);
mp_.trim_threshold = 2 * mp_.mmap_threshold``): a few MB here. So every step gave the last
step's memory back and faulted it in again, page by page: measured here (one thread, the 8
histories, ``resource.getrusage``) 1,500-2,600 minor page faults and 2-6 ms of kernel time in
a step of 22-27 ms of CPU, and what a fault costs depends on the host's own state, which the
calibration's microbenchmarks (warm buffers) never see.

:func:`keep_freed_memory` sets both thresholds where glibc's rule stops raising them
(``mallopt``, documented in ``mallopt(3)``): ``M_MMAP_THRESHOLD`` to 32 MiB
(``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit systems, ``4 * 1024 * 1024 * sizeof(long)``) and
``M_TRIM_THRESHOLD`` to twice that. Blocks up to 32 MiB then come from the heap, and up to 64 MiB
left free at its top stay there for the next step: the same step takes 0-100 faults and no
kernel time (``tests/test_allocator.py`` counts them). Setting only the trim threshold would
be worse: either setting switches glibc's rule off, and the mapping threshold would stay at its
first 128 KiB (measured: 8,700-9,400 faults a step). PyTorch's CPU performance tuning guide
advises an allocator that reuses memory (jemalloc or TCMalloc, preloaded) for the same reason;
this is the same effect from glibc's own allocator, with nothing to install or preload.

:func:`advise_huge_pages` asks Linux (``madvise(MADV_HUGEPAGE)``) to back a big table with 2 MiB
pages before it is first touched: random row lookups into a multi-GB table otherwise miss the
TLB on nearly every row.

It acts once a process (the setting is the process's), only where the C library is glibc
(elsewhere, macOS or musl, it does nothing and returns ``False``), and costs memory the process keeps
instead of returning: at most 64 MiB of free heap beyond what it last used. The bucketed
attention (the fused path) applies it, and so does every measurement of a step
(:mod:`recnotebooks.measure`), so that all measured numbers are taken under one allocator.
"""

from __future__ import annotations

import ctypes
import os
import sys

import torch

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "advise_huge_pages", "keep_freed_memory"]

#: Blocks up to this size come from the heap (glibc's ``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit).
MMAP_THRESHOLD = 32 * 2**20
#: Free memory up to this size at the heap's top is kept (glibc's rule: twice the above).
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
# malloc.h's parameter numbers for mallopt
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3

_applied: bool | None = None

_MADV_HUGEPAGE = 14  # linux/mman.h
_HUGE = 2 << 20


def _glibc() -> ctypes.CDLL | None:
    """The process's C library where it is glibc (its ``mallopt`` takes the parameters above)."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (AttributeError, OSError, ValueError):  # not glibc, or no confstr (Windows)
        return None
    lib = ctypes.CDLL(None)
    return lib if hasattr(lib, "mallopt") else None


def keep_freed_memory() -> bool:
    """Tell glibc's ``malloc`` to keep the memory a step frees for the next one (see the module
    docstring); once a process, later calls return at once. Returns whether the setting is in
    force: ``False`` where the C library is not glibc or refused it."""
    global _applied
    if _applied is None:
        lib = _glibc()
        _applied = bool(
            lib is not None
            and lib.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
            and lib.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        )
    return _applied


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
