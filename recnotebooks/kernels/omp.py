"""Run a compiled kernel on PyTorch's own OpenMP threads.

PyTorch runs its CPU operators on an OpenMP thread team. After each parallel operator its
worker threads keep spinning for a few milliseconds, waiting for the next one (libgomp's
default ``GOMP_SPINCOUNT``). A Numba kernel that runs on Numba's own thread pool right
after a PyTorch operator shares the cores with those spinning workers. Measured here (2
cores), the SGD kernel of :mod:`recnotebooks.kernels.fused` took 11.3 ms after a GEMM and
7.4 ms after a pause, on the same lookups.

The fix is to hand the kernel to PyTorch's OpenMP runtime itself, through
``GOMP_parallel``, the call that compilers emit for ``#pragma omp parallel``. The
kernel then runs on those same workers, so there is no second pool to compete with. A
kernel for :func:`run_on_openmp` is a Numba ``cfunc`` of signature ``void(voidptr)``, whose
argument points at an int64 block of array addresses and sizes. Inside it,
:func:`call_int` and :func:`call_void` call the runtime's ``omp_get_thread_num``,
``omp_get_num_threads`` and ``GOMP_barrier`` by address, and the ``*_ptr`` intrinsics
turn addresses back into pointers for ``numba.carray``.

:func:`torch_openmp` finds the runtime: the GNU OpenMP library that PyTorch's Linux wheels
ship beside ``libtorch_cpu``, or the only libgomp mapped into this process. Elsewhere (a
macOS or Windows build, or several candidate runtimes) it returns None, and callers use
their Numba ``prange`` version instead. ``RECNB_TORCH_OMP=0`` turns this off.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

__all__ = ["OpenMPRuntime", "torch_openmp", "run_on_openmp", "address"]

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@dataclass(frozen=True)
class OpenMPRuntime:
    """PyTorch's OpenMP runtime: the library path and the entry points kernels call."""

    path: str
    parallel: ctypes._CFuncPtr  # GOMP_parallel(fn, data, num_threads, flags)
    thread_num: int  # address of omp_get_thread_num
    num_threads: int  # address of omp_get_num_threads
    barrier: int  # address of GOMP_barrier


def _mapped_libgomp() -> list[str]:
    """Paths of the libgomp files mapped into this process (Linux ``/proc/self/maps``)."""
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []
    paths = {ln.split(maxsplit=5)[5] for ln in lines if len(ln.split(maxsplit=5)) == 6}
    return sorted(p for p in paths if Path(p).name.startswith("libgomp"))


@functools.cache
def torch_openmp() -> OpenMPRuntime | None:
    """PyTorch's GNU OpenMP runtime, or None where it cannot be identified safely."""
    if os.environ.get("RECNB_TORCH_OMP", "1") == "0" or intrinsic is None:
        return None
    if not sys.platform.startswith("linux") or not torch.backends.openmp.is_available():
        return None
    bundled = sorted((Path(torch.__file__).parent / "lib").glob("libgomp*.so*"))
    mapped = _mapped_libgomp()
    if bundled:
        path = str(bundled[0])
    elif len(mapped) == 1:
        path = mapped[0]
    else:
        return None
    try:
        lib = ctypes.CDLL(path)  # already loaded by libtorch_cpu: the same handle
        parallel = lib.GOMP_parallel
        addrs = [
            ctypes.cast(getattr(lib, f), ctypes.c_void_p).value
            for f in ("omp_get_thread_num", "omp_get_num_threads", "GOMP_barrier")
        ]
    except (OSError, AttributeError):
        return None
    parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    parallel.restype = None
    return OpenMPRuntime(path, parallel, *addrs)  # type: ignore[arg-type]


def address(a: np.ndarray | None) -> int:
    """The data address of a NumPy array (0 for None), for an argument block."""
    return 0 if a is None else int(a.ctypes.data)


def run_on_openmp(rt: OpenMPRuntime, kernel_address: int, args: np.ndarray, num_threads: int) -> None:
    """Run ``kernel(args)`` on ``num_threads`` threads of PyTorch's OpenMP team (the calling
    thread is thread 0); returns when every thread has finished. ``args`` (int64) and the
    arrays it points to must stay alive for the call, which releases the GIL."""
    if args.dtype != np.int64 or not args.flags.c_contiguous:
        raise TypeError("args must be a C-contiguous int64 array")
    rt.parallel(ctypes.c_void_p(kernel_address), ctypes.c_void_p(args.ctypes.data), num_threads, 0)


@intrinsic
def call_int(typingctx, fn_address):  # pragma: no cover - compiled
    """Call ``int f(void)`` at ``fn_address`` (an int64); returns its value as int64."""

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(32), [])
        value = builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [])
        return builder.sext(value, ir.IntType(64))

    return types.int64(types.int64), codegen


@intrinsic
def call_void(typingctx, fn_address):  # pragma: no cover - compiled
    """Call ``void f(void)`` at ``fn_address`` (an int64)."""

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.VoidType(), [])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [])
        return context.get_dummy_value()

    return types.void(types.int64), codegen


def _pointer_intrinsic(nbtype, irtype):
    @intrinsic
    def as_pointer(typingctx, addr):  # pragma: no cover - compiled
        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], irtype.as_pointer())

        return types.CPointer(nbtype)(types.int64), codegen

    return as_pointer


f32_ptr = _pointer_intrinsic(types.float32, ir.FloatType())
i32_ptr = _pointer_intrinsic(types.int32, ir.IntType(32))
i64_ptr = _pointer_intrinsic(types.int64, ir.IntType(64))
u8_ptr = _pointer_intrinsic(types.uint8, ir.IntType(8))
