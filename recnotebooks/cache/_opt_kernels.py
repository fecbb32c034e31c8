"""Numba kernels of :func:`recnotebooks.cache.simulate.opt_mrc`: Belady's OPT at every cache size
up to ``max_size`` in one pass, as a histogram of OPT stack distances (serial ``@njit``: safe
from any thread). The distance of a request is the smallest capacity at which OPT (demand
admission, as ``opt_replay``) hits it; OPT is a stack algorithm, so it hits at every larger one.

:func:`opt_stack_distances_cascade` is the textbook method (Mattson, Gecsei, Slutz and Traiger
1970, "Evaluation techniques for storage hierarchies", IBM Systems Journal 9(2)): one stack, with
priority = time of next use (sooner = higher); on a request of the row at depth ``d`` it goes to
the top and a *carry*, starting as the old top, walks down: at each depth the row with the sooner
next use stays, the other becomes the carry, which lands at ``d``. O(depth) per request; kept
as the independent reference of the tests.

:func:`opt_stack_distances` (the one :func:`opt_hits` runs) works on reuse intervals instead and
needs no next-use pass. The request at ``t`` of a row last requested at ``p`` is a hit at
capacity ``c`` iff at every time ``s`` in ``(p, t)`` fewer than ``c - 1`` earlier hit intervals
cover ``s`` (the row requested at ``s`` holds the last slot); deciding intervals in order of
their ends is optimal (the OPTgen view of Belady's rule: Jain and Lin 2016, "Back to the future:
leveraging Belady's algorithm for improved cache replacement", ISCA). Every query and update is
a suffix of time ending now, so for capacity ``c`` only the last time at which at most ``k``
slots were free matters, ``k = 0..c-2``; these ``c - 1`` times are nested across capacities (those
of ``c + 1`` are those of ``c`` plus one, ``e[c]``). One array ``e[1..max_size-1]`` thus holds the
state of every capacity: the distance is ``1 + `` the first ``i`` with ``e[i] <= p`` (1 for an
immediate repeat); then ``e[i] = t - 1`` and, to its right, each value in ``(r, p]`` (``r``: the
value last displaced) takes ``r`` and becomes the next ``r``, until ``r`` is the largest value
``<= p``: the values of ``e`` change by that one out and ``t - 1`` in, kept in a 64-ary bit tree
that gives the largest value ``<= p`` at once. A min/max tree over ``e`` finds the first ``i``
and the next value in ``(r, p]`` when it is not among the next few places. Ties between rows
never used again cannot change a hit count (OPT's hit count is the optimum; a cache holding
such rows evicts one, which is irrelevant), so both kernels equal ``opt_replay`` exactly at
every size (tested).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from recnotebooks.cache._sim_kernels import NEVER, next_use, opt_replay
from recnotebooks.cache.policies import check_ids
from recnotebooks.checks import check_choice, show


@njit(cache=True, nogil=True)
def opt_stack_distances_cascade(trace, nxt, pos, max_size):  # pragma: no cover - compiled
    """Histogram of OPT stack distances, ``hist[d]`` for ``d`` in ``1..max_size`` (``hist[0]``:
    requests deeper than ``max_size`` or first requests). ``nxt``: each request's next use
    (:func:`~recnotebooks.cache._sim_kernels.next_use`); ``pos`` (num_rows,): all -1 on entry,
    each row's depth (0-based) in the cut stack or -1."""
    m = max_size
    srow = np.empty(m, np.int64)
    skey = np.empty(m, np.int64)
    hist = np.zeros(m + 1, np.int64)
    size = 0
    for t in range(trace.shape[0]):
        r, k = trace[t], nxt[t]
        d = pos[r]
        if d >= 0:
            hist[d + 1] += 1
        else:
            hist[0] += 1
            d = size  # a new depth at the bottom, or m: the carry falls off the cut stack
            if size < m:
                size += 1
        if d == 0:  # a hit at the top, or the first request of all
            srow[0], skey[0] = r, k
            pos[r] = 0
            continue
        crow, ckey = srow[0], skey[0]
        srow[0], skey[0] = r, k
        pos[r] = 0
        i = 1
        while i < d and ckey != NEVER:
            if skey[i] > ckey:  # the row here is used later: it goes down, the carry stays
                srow[i], crow = crow, srow[i]
                skey[i], ckey = ckey, skey[i]
                pos[srow[i]] = i
            i += 1
        if d < m:
            srow[d], skey[d] = crow, ckey
            pos[crow] = d
        else:
            pos[crow] = -1
    return hist


BIG = np.int64(2**62)

try:  # Numba's LLVM ctlz intrinsic (not a public API: a plain binary search if it moves)
    from numba.cpython.unsafe.numbers import leading_zeros
except ImportError:  # pragma: no cover - depends on the Numba version

    @njit(cache=True, nogil=True, inline="always")
    def leading_zeros(x):  # pragma: no cover - compiled
        """Leading zero bits of a non-zero uint64."""
        n, s = 0, 32
        while s:
            if (x >> np.uint64(64 - s)) == 0:
                n += s
                x <<= np.uint64(s)
            s >>= 1
        return n


@njit(cache=True, nogil=True, inline="always")
def _set_bit(bits, off, levels, v):  # pragma: no cover - compiled
    """Add ``v`` to a 64-ary bit tree (``bits[off[l]:]``: level ``l``, a bit per word below)."""
    for lev in range(levels):
        i = off[lev] + (v >> 6)
        was = bits[i]
        bits[i] = was | (np.uint64(1) << np.uint64(v & 63))
        if was:
            return
        v >>= 6


@njit(cache=True, nogil=True, inline="always")
def _clear_bit(bits, off, levels, v):  # pragma: no cover - compiled
    for lev in range(levels):
        i = off[lev] + (v >> 6)
        bits[i] &= ~(np.uint64(1) << np.uint64(v & 63))
        if bits[i]:
            return
        v >>= 6


@njit(cache=True, nogil=True, inline="always")
def _pred(bits, off, levels, x):  # pragma: no cover - compiled
    """The largest member ``<= x`` of the bit tree, or -1."""
    lev, v = 0, x
    while True:
        if lev == levels or v < 0:
            return -1
        word = bits[off[lev] + (v >> 6)] & (np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(63 - (v & 63)))
        if word:
            v = ((v >> 6) << 6) | (63 - leading_zeros(word))
            break
        v, lev = (v >> 6) - 1, lev + 1
    while lev > 0:
        lev -= 1
        v = (v << 6) | (63 - leading_zeros(bits[off[lev] + v]))
    return v


@njit(cache=True, nogil=True, inline="always")
def _first_in(tree, leaves, cur, lo, hi):  # pragma: no cover - compiled
    """The first leaf ``j >= cur`` whose value is in ``(lo, hi]``, or -1 (node ``k``:
    ``tree[2k]`` the min, ``tree[2k + 1]`` the max of its leaves; a node is entered only if
    its range can hold such a value)."""
    node = cur + leaves
    while True:
        if tree[2 * node] <= hi and tree[2 * node + 1] > lo:
            if node >= leaves:
                return node - leaves
            node = 2 * node
            continue
        while node & 1:
            node >>= 1
        if node == 0:
            return -1
        node += 1


@njit(cache=True, nogil=True)
def opt_stack_distances(trace, num_rows, max_size):  # pragma: no cover - compiled
    """Histogram of OPT stack distances: ``hist[d]`` for ``d`` in ``1..max_size``, ``hist[0]``
    the requests that miss at every size up to ``max_size`` (first requests included)."""
    m = max_size
    leaves = 2
    while leaves < m:
        leaves *= 2
    tree = np.empty(4 * leaves, np.int64)
    for j in range(leaves):  # e[0] and the padding never match; e[1..m-1] start before time 0
        v = -1 if 1 <= j < m else BIG
        tree[2 * (leaves + j)], tree[2 * (leaves + j) + 1] = v, (v if v != BIG else -BIG)
    for node in range(leaves - 1, 0, -1):
        tree[2 * node] = min(tree[4 * node], tree[4 * node + 2])
        tree[2 * node + 1] = max(tree[4 * node + 1], tree[4 * node + 3])
    n = trace.shape[0]
    levels, words = 1, (n >> 6) + 1  # the values of e that are times >= 0, as a bit tree
    while words > 1:
        levels, words = levels + 1, (words >> 6) + 1
    off = np.zeros(levels + 1, np.int64)
    words = (n >> 6) + 1
    for lev in range(levels):
        off[lev + 1] = off[lev] + words
        words = (words >> 6) + 1
    bits = np.zeros(off[levels], np.uint64)
    last = np.full(num_rows, -1, np.int64)
    hist = np.zeros(m + 1, np.int64)
    changed = np.empty(m + 1, np.int64)
    for t in range(n):
        x = trace[t]
        p = last[x]
        last[x] = t
        if p < 0 or p == t - 1:
            hist[0 if p < 0 else 1] += 1
            continue
        i = _first_in(tree, leaves, 1, -BIG, p)
        if i < 0:
            hist[0] += 1
            continue
        hist[i + 1] += 1
        top = _pred(bits, off, levels, p)  # the chain below ends at the largest value <= p
        if top >= 0:  # (-1: only the start values -1 are <= p)
            _clear_bit(bits, off, levels, top)
        _set_bit(bits, off, levels, t - 1)
        node = i + leaves
        r = tree[2 * node]
        tree[2 * node] = tree[2 * node + 1] = t - 1
        changed[0] = node
        k = 1
        j = i + 1
        while r != top:
            stop = min(j + 4, m)  # the next match is often a neighbour: look before the tree
            while j < stop and not (r < tree[2 * (j + leaves)] <= p):
                j += 1
            if j == stop:
                j = _first_in(tree, leaves, j, r, p)
            node = j + leaves
            r, tree[2 * node] = tree[2 * node], r
            tree[2 * node + 1] = tree[2 * node]
            changed[k] = node
            k += 1
            j += 1
        while changed[0] > 1:  # the searches above only read nodes right of every change: now
            q, prev = 0, -1  # refresh the changed leaves' ancestors, one level at a time
            for a in range(k):
                par = changed[a] >> 1
                if par != prev:
                    tree[2 * par] = min(tree[4 * par], tree[4 * par + 2])
                    tree[2 * par + 1] = max(tree[4 * par + 1], tree[4 * par + 3])
                    changed[q] = par
                    q += 1
                    prev = par
            k = q
    return hist


OPT_METHODS = ("auto", "stack", "replay")
Sizes = Sequence[int] | np.ndarray | None  # the sizes of an OPT miss-ratio curve (None: every size)
#: ``method="auto"`` takes the one pass from this many sizes on (measured here: the pass costs as
#: much as 20 to 70 single-size heap replays on a 1M-id Zipf(0.9) trace, up to 1e4 or 1e5 rows).
STACK_FROM_SIZES = 64


def opt_hits(ids: np.ndarray, num_rows: int, sizes: Sizes, method: str) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct capacities of ``sizes`` (each in ``[1, num_rows]``; ``None``: every size up
    to the distinct rows of ``ids``) and OPT's hits at each: one pass of
    :func:`opt_stack_distances` up to the largest (``"stack"``), one heap replay per size
    (``"replay"``), or the pass from :data:`STACK_FROM_SIZES` sizes on or for ``sizes=None``
    (``"auto"``). ``ids``: a checked trace of ids in ``[0, num_rows)``."""
    method = check_choice("method", method, OPT_METHODS)
    if sizes is None:
        grid = np.arange(1, max(len(np.unique(ids)), 1) + 1, dtype=np.int64)
        method = "stack" if method == "auto" else method
    else:
        arr = check_ids("sizes", sizes)
        if not arr.size or arr.min() < 1 or arr.max() > num_rows:
            raise ValueError(
                f"sizes must be a non-empty list of capacities in [1, {num_rows}], got {show(sizes)}"
            )
        grid = np.unique(arr)
    if method == "stack" or (method == "auto" and len(grid) >= STACK_FROM_SIZES):
        hist = opt_stack_distances(ids, num_rows, int(grid[-1]))
        return grid, np.cumsum(hist[1:])[grid - 1]
    nxt = next_use(ids, num_rows)
    pos, none = np.full(num_rows, -1, np.int32 if num_rows < 2**31 else np.int64), np.zeros(0, np.bool_)
    hits = np.empty(len(grid), np.int64)
    for j, c in enumerate(grid):
        pos[:] = -1
        hits[j] = opt_replay(ids, nxt, pos, int(c), False, none)[0]
    return grid, hits
