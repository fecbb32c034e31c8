"""Numba kernels of :mod:`recnotebooks.cache.simulate`: next use, Belady's OPT, LRU stack
distances and bounded-Zipf sampling (serial ``@njit``: safe from any thread).

* OPT (Belady 1966, "A study of replacement algorithms for a virtual-storage computer"):
  a max-heap of the cached rows keyed by their next use.
* Stack distances (Mattson, Gecsei, Slutz and Traiger 1970, "Evaluation techniques for
  storage hierarchies"): the LRU stack distance of a reuse is one plus the number of distinct
  rows touched since the row's previous access. Each row's last access time carries a mark;
  the distinct rows since time ``p`` are the marks after ``p``, counted by a Fenwick tree
  (Fenwick 1994, "A new data structure for cumulative frequency tables"). When the time
  window fills, the live marks (one per distinct row) are renumbered in order (compaction),
  so the tree spans about twice the distinct rows instead of the whole trace.
* Zipf sampling: the inverse CDF with a guide table (Chen and Asau 1974, "On generating
  random variates from an empirical distribution"): ``guide[j]`` is the first rank whose
  cumulative probability exceeds ``j / m``, so a uniform ``u`` starts its search there and
  takes about one step on average; the rank found is exactly ``searchsorted(cdf, u, "right")``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

NEVER = np.int64(2**62)  # next use of a row never requested again


@njit(cache=True, nogil=True)
def next_use(trace, num_rows):  # pragma: no cover - compiled
    """For each request, the time of the next request of the same row (``NEVER`` if none)."""
    n = trace.shape[0]
    seen = np.full(num_rows, NEVER, np.int64)
    nxt = np.empty(n, np.int64)
    for t in range(n - 1, -1, -1):
        nxt[t] = seen[trace[t]]
        seen[trace[t]] = t
    return nxt


@njit(cache=True, nogil=True)
def opt_replay(trace, nxt, pos, cap, record, out):  # pragma: no cover - compiled
    """Belady's OPT with demand admission: on a miss with a full cache evict the cached row
    whose next use is farthest (a max-heap on next use; ``pos``: each row's place in it, all
    -1 on entry). Returns (hits, evictions)."""
    key, row = np.empty(cap, np.int64), np.empty(cap, np.int64)
    size, hits, ev = 0, 0, 0
    for t in range(trace.shape[0]):
        r, k = trace[t], nxt[t]
        i = pos[r]
        if record:
            out[t] = i >= 0
        if i >= 0:  # hit: its next use moves later, so it rises in the max-heap
            hits += 1
        elif size < cap:
            i = size
            size += 1
        else:  # evict the root, put the new row there and sink it
            ev += 1
            pos[row[0]] = -1
            i = 0
            while True:
                c = 2 * i + 1
                if c >= size:
                    break
                if c + 1 < size and key[c + 1] > key[c]:
                    c += 1
                if key[c] <= k:
                    break
                key[i], row[i] = key[c], row[c]
                pos[row[i]] = i
                i = c
            key[i], row[i] = k, r
            pos[r] = i
            continue
        while i > 0 and key[(i - 1) >> 1] < k:
            p = (i - 1) >> 1
            key[i], row[i] = key[p], row[p]
            pos[row[i]] = i
            i = p
        key[i], row[i] = k, r
        pos[r] = i
    return hits, ev


@njit(cache=True, nogil=True)
def _build(tree, marks):  # pragma: no cover - compiled
    """The Fenwick tree of ``marks`` ones at positions ``0..marks-1``, in linear time."""
    window = tree.shape[0] - 1
    tree[:] = 0
    for i in range(1, window + 1):
        if i <= marks:
            tree[i] += 1
        up = i + (i & -i)
        if up <= window:
            tree[up] += tree[i]


@njit(cache=True, nogil=True)
def lru_stack_distances(trace, last, at):  # pragma: no cover - compiled
    """Histogram of LRU stack distances (1 = most recent) and the distinct rows, in one pass.
    ``last`` (num_rows,): all -1 on entry, each row's last time slot; ``at`` (window,): the row
    accessed at each time slot, with window > the distinct rows (ideally twice)."""
    n, num_rows, window = trace.shape[0], last.shape[0], at.shape[0]
    tree = np.zeros(window + 1, np.int32)
    hist = np.zeros(num_rows + 2, np.int64)
    distinct, now, live = 0, 0, 0
    for t in range(n):
        if now == window:  # compaction: renumber the live marks 0.. in time order
            j = 0
            for i in range(window):
                r = at[i]
                if last[r] == i:
                    at[j] = r
                    last[r] = j
                    j += 1
            _build(tree, j)
            now = j
        r = trace[t]
        p = last[r]
        if p < 0:
            distinct += 1
            live += 1
        else:
            s, i = 0, p + 1
            while i > 0:  # marks at or before p
                s += tree[i]
                i -= i & -i
            hist[live - s + 1] += 1
            i = p + 1
            while i <= window:
                tree[i] -= 1
                i += i & -i
        i = now + 1
        while i <= window:
            tree[i] += 1
            i += i & -i
        at[now] = r
        last[r] = now
        now += 1
    return hist[: distinct + 1], distinct


@njit(cache=True, nogil=True)
def zipf_ranks(cdf, u):  # pragma: no cover - compiled
    """``min(searchsorted(cdf, u, side="right"), len(cdf) - 1)`` for each uniform ``u``, via a
    guide table of ``len(cdf)`` entries (``cdf`` increasing, last entry 1)."""
    m = cdf.shape[0]
    guide = np.empty(m + 1, np.int64)
    k = 0
    for j in range(m + 1):  # guide[j]: first rank with cdf > j / m
        x = j / m
        while k < m and cdf[k] <= x:
            k += 1
        guide[j] = k
    out = np.empty(u.shape[0], np.int64)
    for i in range(u.shape[0]):
        x = u[i]
        k = guide[max(min(int(x * m), m) - 1, 0)]  # one entry back: safe against rounding of x * m
        while k < m and cdf[k] <= x:
            k += 1
        out[i] = min(k, m - 1)
    return out
