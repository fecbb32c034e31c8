"""LRU kernels of :mod:`recnotebooks.cache.policies` (serial ``@njit``, GIL released).

State (see :mod:`recnotebooks.cache._kernels`): ``link`` is ``[prev, next]`` of a doubly linked
list of the resident slots, most recent first, with a sentinel at index ``capacity``.

Batches (:func:`admit_lru`) move hits to the head of the list, O(1) each. A request-by-request
replay (:func:`lru_replay1`) uses the same order kept another way, cheaper per request: every
access appends ``(slot, stamp)`` to a queue and stamps the slot; the front of the queue, once
its stale entries (a slot stamped again since) are dropped, is the least recent slot. A hit is
then one read and two writes, none of them dependent on another. The queue holds at most twice
the capacity (stale entries are squeezed out when it fills) and the list is rebuilt from it at
the end, so both paths leave the same state. ("Lazy deletion" of priority-queue entries.)
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
def _squeeze(qs, qk, stamp, front, back):  # pragma: no cover - compiled
    """Move the live queue entries (slot still stamped with the entry's key) to the start."""
    j = 0
    for i in range(front, back):
        if stamp[qs[i]] == qk[i]:
            qs[j] = qs[i]
            qk[j] = qk[i]
            j += 1
    return j


@njit(cache=True, nogil=True)
def lru_replay1(S, trace, epoch0, record, out):  # pragma: no cover - compiled
    """LRU request by request, O(1) amortized each: (hits, misses, evictions, bypass=0, status=0)."""
    slot_of, row_of, stamp, link, count, last, meta = S
    cap = row_of.shape[0]
    used = meta[0]
    n = trace.shape[0]
    size = min(2 * cap + 1024, cap + n + 1)
    qs, qk = np.empty(size, slot_of.dtype), np.empty(size, np.int64)
    back = 0
    s = link[0, cap]
    while s != cap:  # the list, least recent first, is the initial queue
        qs[back] = s
        qk[back] = stamp[s]
        back += 1
        s = link[0, s]
    front, hits, ev = 0, 0, 0
    for t in range(n):
        r = trace[t]
        s = slot_of[r]
        key = epoch0 + t
        if record:
            out[t] = s >= 0
        if s >= 0:
            hits += 1
        else:
            if used < cap:
                s = used
                used += 1
            else:
                while True:  # drop stale entries: the first live one is the least recent slot
                    s = qs[front]
                    front += 1
                    if stamp[s] == qk[front - 1]:
                        break
                slot_of[row_of[s]] = -1
                ev += 1
            row_of[s] = r
            slot_of[r] = s
        stamp[s] = key
        if back == size:
            back = _squeeze(qs, qk, stamp, front, back)
            front = 0
        qs[back] = s
        qk[back] = key
        back += 1
    back = _squeeze(qs, qk, stamp, front, back)
    link[0, cap] = cap
    link[1, cap] = cap
    for i in range(back):  # rebuild the list: the last live entry is the most recent
        push_front(link, qs[i], cap)
    meta[0] = used
    if n > 0:
        meta[2] = epoch0 + n - 1
    return hits, n - hits, ev, 0, 0
