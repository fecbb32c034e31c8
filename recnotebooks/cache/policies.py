"""Cache replacement policies shared by the cached embedding collection and the trace simulator.

One :class:`CachePolicy` decides, batch by batch, which embedding rows live in a fixed
number of device *slots*. Training calls :meth:`CachePolicy.admit` with the distinct rows
of a batch; the simulator calls :meth:`CachePolicy.replay` on a stream of ids. Both run
the same Numba kernels on plain NumPy arrays, so a simulated hit rate is the one training sees.

Policies (``POLICIES``):

* ``"lru"``: least recently used, O(1) per access (a doubly linked list in two arrays,
  most recent at the head; a request-by-request replay keeps the same order in a queue of
  stamped accesses, cheaper per request). Fully associative.
* ``"lfu"``: least frequently used, a count kept for every row whether cached or not (as
  FBGEMM's LFU cache keeps ``lfu_state`` for all rows); ``"lfu_cached"`` counts only while a
  row is cached and forgets the count on eviction (libCacheSim's ``LFU``). The victim is
  the unprotected slot of minimum count, ties broken by least recent access (frequency
  buckets, Shah, Mitra and Matani 2010: O(1) per access for ``lfu_cached`` and per hit for
  ``lfu``). Counts grow by one per batch holding the row (per request when replaying with
  ``batch_size=1``).
* ``"setassoc"``: N-way set-associative with LRU inside a set, FBGEMM's default layout
  (``split_table_batched_embeddings``: 32 ways, sets = capacity / ways). A row's set is
  ``fmix64(row) % sets``, the 64-bit finalizer of Austin Appleby's MurmurHash3 (the hash
  FBGEMM's ``cache_slot`` uses). A set full of protected rows sends the row to ``bypass``.
* ``"static"``: a fixed hot set (FAE, Adnan et al., VLDB 2022: rows chosen from a
  frequency profile of a data sample) pinned in slots; other rows always ``bypass``.

Protection: every slot carries the ``epoch`` of the last batch that used it. A victim must
have a stamp ``< protect_from``; with ``protect_from = epoch`` only the current batch is
safe, with ``epoch - 1`` the batch still training while the next one is prefetched is too.
Inside one call the hits are stamped first, then misses are placed, so a row of the batch
is never evicted to make room for another. Fully associative policies raise
``ValueError`` (naming the minimum capacity) when the protected rows and the batch do not
fit; nothing is changed then.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

from recnotebooks.cache import _kernels as K
from recnotebooks.cache import _lfu_kernels as KF
from recnotebooks.cache import _lru_kernels as KL
from recnotebooks.checks import check_choice, check_int, check_type, show
from recnotebooks.config import CACHE_REPLACEMENT_POLICIES

__all__ = ["POLICIES", "Admission", "CachePolicy", "ReplayCounts", "set_of_rows"]

#: The policies (their names' one home: :data:`recnotebooks.config.CACHE_REPLACEMENT_POLICIES`);
#: a policy's place here is its kind's number in the kernels.
POLICIES = CACHE_REPLACEMENT_POLICIES
_KIND = {p: i for i, p in enumerate(POLICIES)}
_STATE = ("slot_of", "row_of", "stamp", "link", "count", "last", "meta")


@dataclass
class Admission:
    """What :meth:`CachePolicy.admit` did to the rows of one batch (positions index ``rows``)."""

    slots: np.ndarray  # int64 (n,): slot of each row after the call, -1 for bypass rows
    hit: np.ndarray  # bool (n,): resident before the call
    miss_idx: np.ndarray  # int64: positions of rows that missed and were admitted
    victims: np.ndarray  # int64 (len(miss_idx),): row evicted for each, -1 if the slot was free
    bypass_idx: np.ndarray  # int64: positions of rows not admitted (static cold, set overflow)


@dataclass(frozen=True)
class ReplayCounts:
    """Counts of one :meth:`CachePolicy.replay`. ``misses`` include ``bypass`` (a bypassed row
    is a miss that was not admitted); ``hits + misses == requests``."""

    requests: int
    hits: int
    misses: int
    evictions: int
    bypass: int


def set_of_rows(rows: np.ndarray, sets: int) -> np.ndarray:
    """The set of each row in a set-associative cache: ``fmix64(row) % sets`` (MurmurHash3)."""
    h = np.asarray(rows, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xC4CEB9FE1A85EC53)
        h ^= h >> np.uint64(33)
    return (h % np.uint64(sets)).astype(np.int64)


def check_ids(name: str, ids: object, num_rows: int | None = None) -> np.ndarray:
    """``ids`` as a 1-D int64 array of ids in ``[0, num_rows)`` (TypeError for a non-integer dtype)."""
    if isinstance(ids, torch.Tensor):
        ids = ids.detach().cpu().numpy()
    check_type(name, ids, (np.ndarray, list, tuple), "a 1-D integer array of ids")
    arr = np.asarray(ids)
    if arr.size == 0:
        arr = arr.astype(np.int64)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be an integer array of ids, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(arr.shape)}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0:
            raise ValueError(f"{name} must hold ids >= 0, got {lo} at position {int(np.argmin(arr))}")
        if num_rows is not None and hi >= num_rows:
            pos = int(np.argmax(arr >= num_rows))
            raise ValueError(f"{name} must hold ids in [0, {num_rows}), got {hi} (first bad id {arr[pos]})")
    return arr


@njit(cache=True)
def _first_duplicate(slot_of, rows):  # pragma: no cover - compiled
    """Position of the first repeated row in ``rows`` or -1; marks ``slot_of`` and restores it."""
    dup = -1
    n = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        s = slot_of[r]
        if s <= -2:
            dup = i
            break
        slot_of[r] = -3 - s if s >= 0 else -2
        n += 1
    for i in range(n):
        r = rows[i]
        s = slot_of[r]
        slot_of[r] = -1 if s == -2 else -3 - s
    return dup


class CachePolicy:
    """Which rows of a ``num_rows``-row table occupy ``capacity`` slots, and what to evict.

    Args:
        policy: one of ``POLICIES``.
        num_rows: rows of the table (or of all tables in one global row space).
        capacity: slots, ``1..num_rows``.
        ways: slots per set for ``"setassoc"`` (must divide ``capacity``); ignored otherwise.
        hot_rows: the pinned rows of ``"static"`` (distinct ids in ``[0, num_rows)``, at most
            ``capacity``); required for it, refused for the others.

    State (NumPy arrays, read-only to callers): ``slot_of`` (row -> slot or -1) and ``row_of``
    (slot -> row or -1), plus per-policy arrays. ``state_dict`` holds them as tensors.
    """

    def __init__(
        self,
        policy: str,
        num_rows: int,
        capacity: int,
        *,
        ways: int = 32,
        hot_rows: np.ndarray | None = None,
    ) -> None:
        self.policy = check_choice("policy", policy, POLICIES)
        self.num_rows = check_int("num_rows", num_rows, lo=1)
        self.capacity = check_int("capacity", capacity, lo=1, hi=self.num_rows)
        self.ways = check_int("ways", ways, lo=1) if self.policy == "setassoc" else 1
        if self.policy == "setassoc" and self.capacity % self.ways:
            raise ValueError(
                f"ways must divide capacity for policy 'setassoc', got ways={ways} and "
                f"capacity={self.capacity} (use a capacity that is a multiple of {ways})"
            )
        if self.policy != "static" and hot_rows is not None:
            raise ValueError(f"hot_rows is only used by policy 'static', got policy {self.policy!r}")
        cap, rows = self.capacity, self.num_rows
        idx = np.int32 if rows < 2**31 - 2 else np.int64
        self.slot_of = np.full(rows, -1, idx)
        self.row_of = np.full(cap, -1, idx)
        self.stamp = np.full(cap, -(2**62), np.int64)  # epoch of the last batch using each slot
        empty = np.zeros(0, np.int64)
        lfu = self.policy in ("lfu", "lfu_cached")
        # link: lru [prev, next] of a list with a sentinel at index capacity; lfu frequency buckets
        self.link = np.zeros((2, cap + 1) if self.policy == "lru" else (2, 0), idx)
        if lfu:
            self.link = KF.new_link(cap)
        self.count = np.zeros(rows if self.policy == "lfu" else cap if lfu else 0, np.int64)
        self.last = np.zeros(cap, np.int64) if self.policy == "setassoc" else empty
        # meta: [slots used, access clock, last epoch seen, ways]
        self.meta = np.array([0, 0, -(2**62), self.ways], np.int64)
        if self.policy == "lru":
            self.link[:, cap] = cap  # empty list: the sentinel points at itself
        if self.policy == "static":
            if hot_rows is None:
                raise ValueError(
                    "hot_rows is required for policy 'static': the pinned rows (e.g. the capacity most "
                    "frequent rows of a profile trace)"
                )
            hot = check_ids("hot_rows", hot_rows, rows)
            if len(hot) > cap:
                raise ValueError(f"hot_rows must hold at most capacity={cap} rows, got {len(hot)}")
            if len(np.unique(hot)) != len(hot):
                raise ValueError("hot_rows must hold distinct rows, got repeats")
            self.slot_of[hot] = np.arange(len(hot))
            self.row_of[: len(hot)] = hot
            self.meta[0] = len(hot)

    def __repr__(self) -> str:
        extra = f", ways={self.ways}" if self.policy == "setassoc" else ""
        return f"CachePolicy({self.policy!r}, num_rows={self.num_rows}, capacity={self.capacity}{extra})"

    @property
    def resident(self) -> int:
        """Number of rows resident now."""
        return int(np.count_nonzero(self.row_of >= 0))

    def _state(self) -> tuple:
        return (self.slot_of, self.row_of, self.stamp, self.link, self.count, self.last, self.meta)

    def admit(self, rows: np.ndarray, epoch: int, protect_from: int) -> Admission:
        """Make the distinct ``rows`` of one batch resident (where the policy allows).

        ``epoch`` (non-decreasing across calls) stamps every row of the batch; victims are
        slots stamped before ``protect_from`` (``<= epoch``). Raises ``ValueError`` for
        repeated or out-of-range rows and, for ``lru``/``lfu``, when the batch and the
        protected rows need more slots than ``capacity`` (the message names the minimum).
        """
        rows = check_ids("rows", rows, self.num_rows)
        epoch = check_int("epoch", epoch, lo=int(self.meta[2]) if self.meta[2] > -(2**62) else None)
        protect_from = check_int("protect_from", protect_from, hi=epoch)
        dup = _first_duplicate(self.slot_of, rows)
        if dup >= 0:
            raise ValueError(
                f"rows must be distinct (unique the batch first), got row {rows[dup]} twice "
                f"(second at position {dup})"
            )
        n = len(rows)
        slots, hit = np.empty(n, np.int64), np.zeros(n, np.bool_)
        miss_idx, victims, bypass_idx = (np.empty(n, np.int64) for _ in range(3))
        out = (slots, hit, miss_idx, victims, bypass_idx)
        status, nm, nb = K.admit(_KIND[self.policy], self._state(), rows, epoch, protect_from, out)
        if status < 0:
            raise ValueError(
                f"capacity={self.capacity} slots are too few for this batch: its {n} distinct rows, plus "
                f"the rows of batches still in use (awaiting their optimizer step, or prefetched), "
                f"need capacity >= {-status} (policy {self.policy!r}); rows in use are never evicted, "
                "so give this table more slots (CacheConfig capacity, or min_rows for small tables)"
            )
        return Admission(slots, hit, miss_idx[:nm].copy(), victims[:nm].copy(), bypass_idx[:nb].copy())

    def replay(
        self, trace: np.ndarray, batch_size: int = 1, hit_out: np.ndarray | None = None
    ) -> ReplayCounts:
        """Replay ``trace`` (int64 ids) through this policy, continuing from its current state.

        ``batch_size=1``: request by request (libCacheSim's semantics). ``batch_size=k``: the
        trace in batches of ``k`` ids, each admitted like a training batch (its distinct
        rows, in ascending order as the cached collection admits them, protected while it is
        placed; a repeat inside a batch is a hit). ``hit_out`` (bool, ``len(trace)``) receives
        each request's hit flag.
        """
        trace = check_ids("trace", trace, self.num_rows)
        batch_size = check_int("batch_size", batch_size, lo=1, hi=2**63 - 1)  # int64 in the kernels
        record = hit_out is not None
        if record and (
            not isinstance(hit_out, np.ndarray) or hit_out.dtype != np.bool_ or hit_out.shape != trace.shape
        ):
            raise ValueError(f"hit_out must be a bool array of shape {trace.shape}, got {show(hit_out)}")
        out = hit_out if record else np.zeros(0, np.bool_)
        epoch0 = int(self.meta[2]) + 1 if self.meta[2] > -(2**62) else 0
        if self.policy == "lru" and batch_size == 1:
            key = np.empty(self.num_rows, np.int32 if len(trace) < 2**30 - 1 else np.int64)  # scratch
            res = KL.lru_replay1(self._state(), trace, epoch0, record, out, key)
        elif self.policy in ("lfu", "lfu_cached") and batch_size == 1:
            res = KF.lfu_replay1(_KIND[self.policy], self._state(), trace, epoch0, record, out)
        elif self.policy == "setassoc" and batch_size == 1:
            res = K.setassoc_replay1(self._state(), trace, epoch0, record, out)
        elif self.policy == "static" and batch_size == 1:
            res = K.static_replay1(self._state(), trace, epoch0, record, out)
        else:
            res = K.replay_batches(_KIND[self.policy], self._state(), trace, batch_size, epoch0, record, out)
        hits, misses, evictions, bypass, status = (int(x) for x in res)
        if status < 0:
            raise ValueError(
                f"capacity={self.capacity} slots are too few for batch_size={batch_size}: a batch "
                f"has {-status} distinct rows (policy {self.policy!r} needs capacity >= {-status})"
            )
        return ReplayCounts(len(trace), hits, misses, evictions, bypass)

    def state_dict(self) -> dict[str, object]:
        """The policy's configuration and state as ints, strings and tensors (``weights_only`` safe)."""
        state: dict[str, object] = {
            "policy": self.policy,
            "num_rows": self.num_rows,
            "capacity": self.capacity,
            "ways": self.ways,
        }
        for name in _STATE:
            state[name] = torch.from_numpy(getattr(self, name).copy())
        return state

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore a :meth:`state_dict` of a policy with the same policy, rows, capacity and ways."""
        check_type("state", state, dict, "a dict from CachePolicy.state_dict()")
        for key in ("policy", "num_rows", "capacity", "ways"):
            if state.get(key) != getattr(self, key):
                raise ValueError(
                    f"state[{key!r}] must match this policy's {key}={getattr(self, key)!r}, "
                    f"got {show(state.get(key))}"
                )
        for name in _STATE:
            mine = getattr(self, name)
            value = state.get(name)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != mine.shape:
                raise ValueError(f"state[{name!r}] must be a tensor of shape {mine.shape}, got {show(value)}")
            mine[...] = value.numpy().astype(mine.dtype, copy=False)
