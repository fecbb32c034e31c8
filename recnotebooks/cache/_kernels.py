"""Numba kernels of :mod:`recnotebooks.cache.policies` (serial ``@njit``, GIL released).

Every kernel works on the policy's state arrays, in this order::

    slot_of (num_rows,)  row -> slot, -1 when not resident
    row_of  (capacity,)  slot -> row, -1 when empty
    stamp   (capacity,)  epoch of the last batch that used the slot (protection)
    link    lru: (2, capacity + 1) [prev, next] of a list, most recent first (``_lru_kernels``);
            lfu: (7, capacity + 1) frequency buckets (``_lfu_kernels``); else empty
    count   lfu: (num_rows,) per row; lfu_cached: (capacity,) per slot; else empty
    last    (capacity,)  setassoc: access clock of the slot's last use; else empty
    meta    (4,)         [slots used, access clock, last epoch seen, ways]

Policy kinds are the positions in ``POLICIES``: 0 lru, 1 lfu, 2 lfu_cached, 3 static, 4 setassoc.
This module holds the batch entry point (:func:`admit`), the batched replay, and the
set-associative and static kernels; LRU and LFU have their own modules.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from recnotebooks.cache._lfu_kernels import LFU, LFU_CACHED, admit_lfu
from recnotebooks.cache._lru_kernels import admit_lru

LRU, STATIC, SETASSOC = 0, 3, 4


@njit(cache=True, inline="always")
def fmix64(r):  # pragma: no cover - compiled
    """MurmurHash3's 64-bit finalizer (Austin Appleby), as FBGEMM's ``cache_slot`` hashes rows."""
    h = np.uint64(r)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@njit(cache=True, nogil=True)
def _need(S, rows, pf):  # pragma: no cover - compiled
    """Slots a fully associative policy needs for ``rows`` while rows stamped ``>= pf`` stay:
    0 when free slots suffice (no eviction needed)."""
    slot_of, row_of, stamp, _, _, _, meta = S
    cap = row_of.shape[0]
    used = meta[0]
    nm = 0
    for i in range(rows.shape[0]):
        if slot_of[rows[i]] < 0:
            nm += 1
    if used + nm <= cap:
        return 0
    if pf > meta[2]:  # nothing stamped at or after pf: only this batch is protected
        return rows.shape[0]
    prot = 0
    for s in range(used):
        if stamp[s] >= pf:
            prot += 1
    extra = 0
    for i in range(rows.shape[0]):
        s = slot_of[rows[i]]
        if s >= 0 and stamp[s] < pf:
            extra += 1
    return prot + extra + nm


@njit(cache=True, nogil=True)
def _admit_setassoc(S, rows, epoch, pf, res):  # pragma: no cover - compiled
    slot_of, row_of, stamp, link, count, last, meta = S
    slots, hit, miss_idx, victims, bypass_idx = res
    cap = row_of.shape[0]
    ways = meta[3]
    sets = np.uint64(cap // ways)
    clock = meta[1]
    for i in range(rows.shape[0]):  # pass 1: hits
        s = slot_of[rows[i]]
        if s >= 0:
            hit[i] = True
            slots[i] = s
            last[s] = clock
            clock += 1
            stamp[s] = epoch
    nm, nb = 0, 0
    for i in range(rows.shape[0]):  # pass 2: an empty way, else the LRU unprotected way
        if hit[i]:
            continue
        r = rows[i]
        base = np.int64(fmix64(r) % sets) * ways
        best, best_last = -1, np.int64(2**62)
        for j in range(ways):
            s = base + j
            if row_of[s] < 0:
                best = s
                break
            if stamp[s] < pf and last[s] < best_last:
                best, best_last = s, last[s]
        if best < 0:
            slots[i] = -1
            bypass_idx[nb] = i
            nb += 1
            continue
        v = row_of[best]
        if v >= 0:
            slot_of[v] = -1
        else:
            meta[0] += 1
        row_of[best] = r
        slot_of[r] = best
        last[best] = clock
        clock += 1
        stamp[best] = epoch
        slots[i] = best
        miss_idx[nm] = i
        victims[nm] = v
        nm += 1
    meta[1] = clock
    return nm, nb


@njit(cache=True, nogil=True)
def admit(kind, S, rows, epoch, pf, res):  # pragma: no cover - compiled
    """One batch of distinct ``rows``: returns (status, misses admitted, bypassed);
    status ``-need`` (nothing changed) when a fully associative policy lacks slots."""
    slot_of, row_of, stamp, _, _, _, meta = S
    slots, hit, _, _, bypass_idx = res
    nm, nb = 0, 0
    if kind in (LRU, LFU, LFU_CACHED):
        need = _need(S, rows, pf)
        if need > row_of.shape[0]:
            return -need, 0, 0
    if kind == LRU:
        nm = admit_lru(S, rows, epoch, pf, res)
    elif kind in (LFU, LFU_CACHED):
        nm = admit_lfu(kind, S, rows, epoch, pf, res)
    elif kind == SETASSOC:
        nm, nb = _admit_setassoc(S, rows, epoch, pf, res)
    else:  # static: hot rows hit, the others bypass
        for i in range(rows.shape[0]):
            s = slot_of[rows[i]]
            if s >= 0:
                hit[i] = True
                slots[i] = s
                stamp[s] = epoch
            else:
                slots[i] = -1
                bypass_idx[nb] = i
                nb += 1
    meta[2] = epoch
    return 0, nm, nb


@njit(cache=True, nogil=True)
def replay_batches(kind, S, trace, k, epoch0, record, out):  # pragma: no cover - compiled
    """Any policy, the trace in batches of ``k`` ids admitted like training batches (each
    batch's distinct rows in ascending order, as ``torch.unique`` gives them to the cached
    collection):
    (hits, misses incl. bypass, evictions, bypass, status: ``-need`` if a batch does not fit)."""
    slot_of, row_of, stamp, link, count, last, meta = S
    n = trace.shape[0]
    urows, upos = np.empty(k, np.int64), np.empty(k, np.int64)
    slots, hit = np.empty(k, np.int64), np.zeros(k, np.bool_)
    miss_idx, victims, bypass_idx = np.empty(k, np.int64), np.empty(k, np.int64), np.empty(k, np.int64)
    hits, misses, ev, byp = 0, 0, 0, 0
    epoch = epoch0
    for lo in range(0, n, k):
        hi = min(n, lo + k)
        nu = 0
        for t in range(lo, hi):  # distinct rows in first-occurrence order (marks slot_of, restored)
            r = trace[t]
            s = slot_of[r]
            if s <= -2:
                continue
            urows[nu] = r
            upos[nu] = t
            nu += 1
            slot_of[r] = -3 - s if s >= 0 else -2
        for j in range(nu):
            s = slot_of[urows[j]]
            slot_of[urows[j]] = -1 if s == -2 else -3 - s
        order = np.argsort(urows[:nu])  # admitted in row order, as the cached collection does
        urows[:nu] = urows[:nu][order]
        upos[:nu] = upos[:nu][order]
        hit[:nu] = False
        u = (slots[:nu], hit[:nu], miss_idx, victims, bypass_idx)
        status, nm, nb = admit(kind, S, urows[:nu], epoch, epoch, u)
        if status < 0:
            return hits, misses, ev, byp, status
        misses += nm + nb
        hits += (hi - lo) - nm - nb
        byp += nb
        for j in range(nm):
            if victims[j] >= 0:
                ev += 1
        if record:
            out[lo:hi] = True
            for j in range(nu):
                out[upos[j]] = hit[j]
        epoch += 1
    return hits, misses, ev, byp, 0


@njit(cache=True, nogil=True)
def setassoc_replay1(S, trace, epoch0, record, out):  # pragma: no cover - compiled
    """Set-associative LRU request by request; the same set search as ``_admit_setassoc``."""
    slot_of, row_of, stamp, link, count, last, meta = S
    cap = row_of.shape[0]
    ways = meta[3]
    sets = np.uint64(cap // ways)
    clock = meta[1]
    hits, ev = 0, 0
    n = trace.shape[0]
    for t in range(n):
        r = trace[t]
        s = slot_of[r]
        h = s >= 0
        if h:
            hits += 1
        else:
            base = np.int64(fmix64(r) % sets) * ways
            s, best_last = base, np.int64(2**62)
            for j in range(ways):
                c = base + j
                if row_of[c] < 0:
                    s = c
                    break
                if last[c] < best_last:
                    s, best_last = c, last[c]
            v = row_of[s]
            if v >= 0:
                slot_of[v] = -1
                ev += 1
            else:
                meta[0] += 1
            row_of[s] = r
            slot_of[r] = s
        last[s] = clock
        clock += 1
        stamp[s] = epoch0 + t
        if record:
            out[t] = h
    meta[1] = clock
    if n > 0:
        meta[2] = epoch0 + n - 1
    return hits, n - hits, ev, 0, 0


@njit(cache=True, nogil=True)
def static_replay1(S, trace, epoch0, record, out):  # pragma: no cover - compiled
    """Static hot set request by request: a membership test; cold rows bypass."""
    slot_of, row_of, stamp, link, count, last, meta = S
    hits = 0
    n = trace.shape[0]
    for t in range(n):
        s = slot_of[trace[t]]
        if record:
            out[t] = s >= 0
        if s >= 0:
            hits += 1
            stamp[s] = epoch0 + t
    if n > 0:
        meta[2] = epoch0 + n - 1
    return hits, n - hits, 0, n - hits, 0
