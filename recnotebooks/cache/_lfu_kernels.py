"""LFU kernels of :mod:`recnotebooks.cache.policies` (serial ``@njit``, GIL released).

Frequency buckets (Shah, Mitra and Matani 2010, "An O(1) algorithm for implementing the LFU
cache eviction scheme"): the resident slots of one count form a bucket, a list in the order
of their last access (least recent at the head); the buckets form a list in increasing count.
The victim is the head of the first bucket: minimum count, least recent among those. A hit
moves a slot from bucket ``c`` to ``c + 1`` (the next bucket or a new one), O(1). A miss of
``lfu_cached`` enters with count 1, in front, O(1); a miss of ``lfu`` (counts kept for every
row, FBGEMM's LFU) enters at its remembered count, found by walking the buckets from the
smallest count up (a few steps on skewed traces, where such rows are cold).

Protection: slots touched at or after ``protect_from`` were touched after every other slot of
their bucket, so they sit at its tail; a bucket whose head is protected is protected whole and
the victim search skips it.

``link`` is ``(capacity + 1, 8)`` int64, one 64-byte record per index (row ``capacity`` is the
sentinel bucket); columns: 0/1 previous/next slot in its bucket (-1: none), 2 bucket of a slot
(sentinel: head of the free list of bucket nodes, -1 if empty), 3/4 first/last slot of a
bucket (sentinel: nodes never used yet start here), 5/6 previous/next bucket (circular through
the sentinel, whose next is the smallest count), 7 count of a bucket.
"""

from __future__ import annotations

import numpy as np
from numba import njit

LFU, LFU_CACHED = 1, 2
FIELDS = 8  # columns of ``link``


def new_link(cap: int) -> np.ndarray:
    """Empty buckets for ``cap`` slots: the sentinel alone in the bucket list, no node used."""
    link = np.full((cap + 1, FIELDS), -1, np.int64)
    link[cap, 5] = link[cap, 6] = cap
    link[cap, 3] = 0
    return link


@njit(cache=True, inline="always")
def _new_bucket_after(link, a, cap, c):  # pragma: no cover - compiled
    """A node of count ``c`` from the free list (or never used) linked after bucket ``a``."""
    b = link[cap, 2]
    if b >= 0:
        link[cap, 2] = link[b, 6]
    else:
        b = link[cap, 3]
        link[cap, 3] = b + 1
    n = link[a, 6]
    link[b, 5], link[b, 6] = a, n
    link[a, 6] = b
    link[n, 5] = b
    link[b, 3] = link[b, 4] = -1
    link[b, 7] = c
    return b


@njit(cache=True, inline="always")
def _free_bucket(link, b, cap):  # pragma: no cover - compiled
    p, n = link[b, 5], link[b, 6]
    link[p, 6] = n
    link[n, 5] = p
    link[b, 6] = link[cap, 2]
    link[cap, 2] = b


@njit(cache=True, inline="always")
def _append(link, b, s):  # pragma: no cover - compiled
    t = link[b, 4]
    link[s, 0], link[s, 1], link[s, 2] = t, -1, b
    if t >= 0:
        link[t, 1] = s
    else:
        link[b, 3] = s
    link[b, 4] = s


@njit(cache=True, inline="always")
def _remove(link, s):  # pragma: no cover - compiled
    """Take ``s`` out of its bucket; True when the bucket is left empty."""
    b, p, n = link[s, 2], link[s, 0], link[s, 1]
    if p >= 0:
        link[p, 1] = n
    else:
        link[b, 3] = n
    if n >= 0:
        link[n, 0] = p
    else:
        link[b, 4] = p
    return link[b, 3] < 0


@njit(cache=True, nogil=True)
def touch(kind, S, s, r):  # pragma: no cover - compiled
    """A hit on slot ``s`` (row ``r``): its count grows by one and it moves to the next bucket."""
    slot_of, row_of, stamp, link, count, last, meta = S
    cap = row_of.shape[0]
    b = link[s, 2]
    c = count[r] if kind == LFU else count[s]
    nb = link[b, 6]
    follows = nb != cap and link[nb, 7] == c + 1
    if kind == LFU:
        count[r] = c + 1
    else:
        count[s] = c + 1
    if link[b, 3] == s and link[b, 4] == s:  # alone in its bucket
        if follows:
            _remove(link, s)
            _free_bucket(link, b, cap)
            _append(link, nb, s)
        else:  # the bucket itself now holds count c + 1
            link[b, 7] = c + 1
        return
    _remove(link, s)
    _append(link, nb if follows else _new_bucket_after(link, b, cap, c + 1), s)


@njit(cache=True, nogil=True)
def place(kind, S, s, c):  # pragma: no cover - compiled
    """Put slot ``s``, of count ``c`` and accessed just now, at the tail of bucket ``c``."""
    slot_of, row_of, stamp, link, count, last, meta = S
    cap = row_of.shape[0]
    b = link[cap, 6]
    while b != cap and link[b, 7] < c:
        b = link[b, 6]
    if b == cap or link[b, 7] != c:
        b = _new_bucket_after(link, link[b, 5], cap, c)
    _append(link, b, s)


@njit(cache=True, nogil=True)
def evict(S, pf):  # pragma: no cover - compiled
    """Take out the least recent slot of the smallest count among slots stamped before ``pf``."""
    slot_of, row_of, stamp, link, count, last, meta = S
    cap = row_of.shape[0]
    b = link[cap, 6]
    while stamp[link[b, 3]] >= pf:  # a protected head: the whole bucket is protected
        b = link[b, 6]
    s = link[b, 3]
    if _remove(link, s):
        _free_bucket(link, b, cap)
    slot_of[row_of[s]] = -1
    return s


@njit(cache=True, nogil=True)
def admit_lfu(kind, S, rows, epoch, pf, res):  # pragma: no cover - compiled
    """Hits count and are stamped first; misses take a free slot or the minimum unprotected one."""
    slot_of, row_of, stamp, link, count, last, meta = S
    slots, hit, miss_idx, victims, bypass_idx = res
    cap = row_of.shape[0]
    for i in range(rows.shape[0]):
        r = rows[i]
        s = slot_of[r]
        if s >= 0:
            hit[i] = True
            slots[i] = s
            touch(kind, S, s, r)
            stamp[s] = epoch
    used, nm = meta[0], 0
    for i in range(rows.shape[0]):
        if hit[i]:
            continue
        r = rows[i]
        v = -1
        if used < cap:
            s = used
            used += 1
        else:
            s = evict(S, pf)
            v = row_of[s]
        row_of[s] = r
        slot_of[r] = s
        stamp[s] = epoch
        _enter(kind, S, s, r)
        slots[i] = s
        miss_idx[nm] = i
        victims[nm] = v
        nm += 1
    meta[0] = used
    return nm


@njit(cache=True, inline="always")
def _enter(kind, S, s, r):  # pragma: no cover - compiled
    count = S[4]
    if kind == LFU:
        count[r] += 1
        place(kind, S, s, count[r])
    else:
        count[s] = 1
        place(kind, S, s, 1)


@njit(cache=True, nogil=True)
def lfu_replay1(kind, S, trace, epoch0, record, out):  # pragma: no cover - compiled
    """LFU (either kind) request by request, the steps of ``admit_lfu`` with one row a batch."""
    slot_of, row_of, stamp, link, count, last, meta = S
    cap = row_of.shape[0]
    used = meta[0]
    hits, ev = 0, 0
    n = trace.shape[0]
    for t in range(n):
        r = trace[t]
        s = slot_of[r]
        if record:
            out[t] = s >= 0
        if s >= 0:
            hits += 1
            touch(kind, S, s, r)
        else:
            if used < cap:
                s = used
                used += 1
            else:
                s = evict(S, epoch0 + t)
                ev += 1
            row_of[s] = r
            slot_of[r] = s
            _enter(kind, S, s, r)
        stamp[s] = epoch0 + t
    meta[0] = used
    if n > 0:
        meta[2] = epoch0 + n - 1
    return hits, n - hits, ev, 0, 0
