"""LRU kernels of :mod:`recnotebooks.cache.policies` (serial ``@njit``, GIL released).

State (see :mod:`recnotebooks.cache._kernels`): ``link`` is ``[prev, next]`` of a doubly linked
list of the resident slots, most recent first, with a sentinel at index ``capacity``.

Batches (:func:`admit_lru`) move hits to the head of the list, O(1) each. A request-by-request
replay (:func:`lru_replay1`) keeps the same order another way, cheaper per request. Each access
gets a key (its position in the trace; the rows resident before the replay get -m..-1, least
recent first) and each row remembers the key of its last access. The queue of accesses is the
trace itself: its first live entry (a position still its row's last access) is the least recent
row. In LRU a row is resident exactly when its last access is newer than the last access
evicted, so a hit is one read and one write of the row's key, and a miss walks the queue from
where the previous eviction stopped ("lazy deletion" of queue entries, the trace as the queue).
The list and the stamps are rebuilt from the live entries at the end, so both paths leave the
same state.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def unlink(link, s):  # pragma: no cover - compiled
    p, n = link[0, s], link[1, s]
    link[1, p] = n
    link[0, n] = p


@njit(cache=True, inline="always")
def push_front(link, s, head):  # pragma: no cover - compiled
    n = link[1, head]
    link[1, s] = n
    link[0, s] = head
    link[0, n] = s
    link[1, head] = s


@njit(cache=True, nogil=True)
def admit_lru(S, rows, epoch, pf, res):  # pragma: no cover - compiled
    """Hits move to the head, stamped; misses take a free slot or the (unprotected) tail."""
    slot_of, row_of, stamp, link, count, last, meta = S
    slots, hit, miss_idx, victims, bypass_idx = res
    cap = row_of.shape[0]
    for i in range(rows.shape[0]):  # pass 1: hits move to the head, stamped
        s = slot_of[rows[i]]
        if s >= 0:
            hit[i] = True
            slots[i] = s
            unlink(link, s)
            push_front(link, s, cap)
            stamp[s] = epoch
    used, nm = meta[0], 0
    for i in range(rows.shape[0]):  # pass 2: misses take a free slot or the tail
        if hit[i]:
            continue
        r = rows[i]
        v = -1
        if used < cap:
            s = used
            used += 1
        else:
            s = link[0, cap]  # least recent; unprotected, as need() checked
            v = row_of[s]
            slot_of[v] = -1
            unlink(link, s)
        row_of[s] = r
        slot_of[r] = s
        push_front(link, s, cap)
        stamp[s] = epoch
        slots[i] = s
        miss_idx[nm] = i
        victims[nm] = v
        nm += 1
    meta[0] = used
    return nm


@njit(cache=True, nogil=True)
def lru_replay1(S, trace, epoch0, record, out, key):  # pragma: no cover - compiled
    """LRU request by request, O(1) amortized each: (hits, misses, evictions, bypass=0, status=0).
    ``key`` is scratch, one entry per row (int32 when every key fits, for a smaller footprint)."""
    slot_of, row_of, stamp, link, count, last, meta = S
    cap = row_of.shape[0]
    used = meta[0]
    n = trace.shape[0]
    # keys: the resident rows, least recent first, get -m..-1; request t gets key t
    m = used
    init_rows = np.empty(m, np.int64)
    init_stamp = np.empty(m, np.int64)
    s = link[0, cap]
    i = 0
    while s != cap:
        init_rows[i] = row_of[s]
        init_stamp[i] = stamp[s]
        i += 1
        s = link[0, s]
    key[:] = -(2**30)
    for i in range(m):
        key[init_rows[i]] = i - m
    gone = -(2**30)  # key of the last evicted access: a row is resident iff its key > gone
    q, hits = -m, 0  # next queue position (key) to look at for the least recent row
    for t in range(n):
        r = trace[t]
        hit = key[r] > gone
        key[r] = t
        if record:
            out[t] = hit
        if hit:
            hits += 1
            continue
        if used < cap:
            s = used
            used += 1
        else:
            while True:  # the first live queue entry is the least recent row
                v = init_rows[q + m] if q < 0 else trace[q]
                if key[v] == q:
                    break
                q += 1
            gone = q
            q += 1
            s = slot_of[v]
            slot_of[v] = -1
        row_of[s] = r
        slot_of[r] = s
    ev = max(0, (n - hits) - (used - meta[0]))
    link[0, cap] = cap
    link[1, cap] = cap
    while q < n:  # rebuild the list and stamps from the live entries, least recent first
        v = init_rows[q + m] if q < 0 else trace[q]
        if key[v] == q:
            s = slot_of[v]
            stamp[s] = init_stamp[q + m] if q < 0 else epoch0 + q
            push_front(link, s, cap)
        q += 1
    meta[0] = used
    if n > 0:
        meta[2] = epoch0 + n - 1
    return hits, n - hits, ev, 0, 0
