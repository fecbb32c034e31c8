"""Where a measurement's threads ran: whether their cores share a cache, read in a few
milliseconds (:func:`handoff`), and the rule that reads it (:data:`APART_HANDOFF`,
:func:`cores_apart`).

PyTorch splits an operator's work among its threads, and the next operator often splits its
input differently (a GEMM's operands, a gather's rows, a reduction), so a thread reads what
another thread wrote. Where the two cores share a cache that costs little; where they do not
(two sockets, two core complexes, or a virtual machine whose host places its cores so) each such
line comes from the other core's cache, and every parallel operator's fork and join waits on it.

Measured on the 2-core AMD EPYC VM this package was developed on, whose host placed its two cores
apart for spells of seconds to minutes (2026-12-06, idle; two threads: the median of 50-82
measurements in each state, each read for its cores before and after; one thread: of 5):

=========================  ==============  ===========  =================
step                       cores share L3  cores apart  one thread
=========================  ==============  ===========  =================
HSTU, Yambda-shaped        11.2 ms         15.5 ms      14.3 ms
HSTU, dim 32, 4 layers     18.3 ms         25.7 ms      23.6 ms
DLRM ``tiny``              2.0 ms          3.1 ms       2.6 ms
DLRM ``dcnv2_small``       16.9 ms         21.7 ms      27.9 ms
DLRM ``rm2``               21.9 ms         24.1 ms      37.9 ms
=========================  ==============  ===========  =================

A small step on two threads whose cores share no cache ran *slower* than on one thread; a
GEMM- or memory-heavy one still gained from the second. A 40,000-float ``add_`` took 3.4 us
against 5.3, a 64 x 64 GEMM 6.8 us against 13.4: the fork and join of every parallel operator,
beside the data. The cost model of this machine (:mod:`recnotebooks.measure.calibrate`) prices
neither, so :mod:`~recnotebooks.measure.validate` leaves out measurements so taken and
:class:`~recnotebooks.measure.step.StepMeasurement` says when its threads ran so.
"""

from __future__ import annotations

import statistics
import time

import torch

from recnotebooks.kernels.allocator import keep_freed_memory

__all__ = ["APART_HANDOFF", "HANDOFF_FLOATS", "HANDOFF_PASSES", "apart_words", "cores_apart", "handoff",
           "handoff_reading"]  # fmt: skip

#: The floats :func:`handoff` passes between threads: 1 MB, within a core's L2 cache.
HANDOFF_FLOATS = 2**18
#: Passes a :func:`handoff` reading times, each way.
HANDOFF_PASSES = 20
#: The :func:`handoff` reading from which the threads' cores share no cache: a pass reading
#: another thread's writes at 5x or more the time of one reading its own, lines coming from beyond
#: a shared cache. On the 2-core VM this package was measured on it read 0.9-3.0 while the cores
#: shared a cache and 8.6-13.4 while they did not (the gap's geometric middle is 5.1).
APART_HANDOFF = 5.0


def handoff(reps: int = 5) -> float:
    """How many times longer a pass over 1 MB takes when each of PyTorch's threads reads what
    another thread wrote in the pass before than when it reads what it wrote itself: about
    1-3 where the threads' cores share a cache, 1.0 on one thread.

    Both passes reverse the floats (``flip``), chained :data:`HANDOFF_PASSES` times: the whole
    tensor (each thread's share of the output comes from another thread's share of the input),
    or each thread's row of a ``(threads, n)`` view (its own). The median of ``reps`` chains
    each way, after a warm-up; 5-15 ms in all. On the VM of the module docstring this read
    8.6-13.4 against 0.9-3.0 (the cross pass 210-298 us against 19-58) while the GEMM and copy
    probes read no slower (the copy faster). From :data:`APART_HANDOFF` up the cores share no
    cache: the calibration leaves rounds so taken out of its fit
    (:func:`~recnotebooks.measure.calibrate.fit_calibration`), ``recnb validate`` measurements
    so taken out of its medians, and a measured step says so (:func:`apart_words`).
    """
    threads = torch.get_num_threads()
    if threads < 2:
        return 1.0
    keep_freed_memory()  # the passes' 1 MB outputs reused, not faulted in (kernels/allocator.py)
    x = torch.randn(threads * (HANDOFF_FLOATS // threads))

    def chain(cross: bool) -> float:
        t0 = time.perf_counter()
        y = x
        for _ in range(HANDOFF_PASSES):
            y = y.flip(0) if cross else y.view(threads, -1).flip(1).view(-1)
        return time.perf_counter() - t0

    chain(False), chain(True)  # warm-up
    own = statistics.median(chain(False) for _ in range(max(1, reps)))
    cross = statistics.median(chain(True) for _ in range(max(1, reps)))
    return cross / own


def handoff_reading(device: torch.device, threads: int) -> float | None:
    """The :func:`handoff` reading a measured step on ``threads`` takes after its timed steps,
    while they are still set (``None`` on one thread or a GPU: nothing to read)."""
    return handoff(3) if device.type == "cpu" and threads >= 2 else None


def cores_apart(reading: float | None) -> bool:
    """Whether a :func:`handoff` ``reading`` says the threads' cores share no cache (``None``, no
    reading: one thread or a GPU, false)."""
    return reading is not None and reading >= APART_HANDOFF


def apart_words(reading: float | None, threads: int) -> str:
    """A measured step's note on where its threads ran (``""`` unless :func:`cores_apart`)."""
    if not cores_apart(reading):
        return ""
    return (
        f"its {threads} threads ran on cores that shared no cache (a pass reading another thread's "
        f"writes took {reading:.1f}x one reading its own): there a small step can run slower than on "
        "one thread, and the model of this machine does not price it"
    )
