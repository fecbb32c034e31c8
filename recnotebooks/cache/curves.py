"""One table's id trace and its hit rate against cache size per policy: **simulated**.

What notebook 03's Cache Explorer (:mod:`recnotebooks.viz.cache`) shows as simulated, computed
here and kept between calls (keyed by what it depends on), so that moving a slider replays one
point only:

* :func:`cache_trace` and :func:`cache_profile` — one bounded Zipf stream
  (:func:`~recnotebooks.cache.simulate.zipf_trace`), its first
  :data:`~recnotebooks.cache.hot.PROFILE_SHARE` the profile sample a static hot set is chosen
  from (as FAE does: Adnan et al., VLDB 2022), the rest the trace every policy replays;
* :func:`hit_rate_curves` — hit rate against cache size for LRU (one pass of stack distances,
  Mattson et al. 1970), LFU, the static hot set, N-way set-associative LRU (FBGEMM's default
  cache is 32-way LRU) and Belady's OPT (Belady 1966), the upper bound no policy beats;
* :func:`opt_hit_rate` — OPT at one size; :func:`simulate_policy` — one policy at one size, as
  lookups one by one or as training steps.
"""

from __future__ import annotations

import functools

import numpy as np

from recnotebooks.cache.hot import PROFILE_SHARE, static_hit_curve
from recnotebooks.cache.policies import CachePolicy
from recnotebooks.cache.simulate import SimResult, lru_mrc, opt_mrc, simulate, zipf_trace
from recnotebooks.checks import check_int

__all__ = [
    "CURVE_FRACTIONS",
    "FEW_FRACTIONS",
    "POLICY_NAMES",
    "POOLING",
    "TRACE_IDS",
    "cache_capacity",
    "cache_profile",
    "cache_trace",
    "curve_row",
    "first_touches",
    "hit_rate_curves",
    "opt_hit_rate",
    "simulate_policy",
]

#: Cache sizes (fractions of the table's rows) the LRU, OPT and static curves are simulated at.
CURVE_FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
#: The sizes of the LFU and set-associative curves (one replay each; the current size is added).
FEW_FRACTIONS = (0.001, 0.01, 0.1, 0.5)
#: Lookups of the table per sample: a training step of ``b`` samples is ``b * POOLING`` ids of the trace.
POOLING = 5
#: Length of the id trace (one id per lookup of one table).
TRACE_IDS = 200_000
#: How each policy is named in the curves' rows (and on the charts).
POLICY_NAMES = {
    "lru": "LRU",
    "lfu": "LFU",
    "static": "static hot set",
    "setassoc": "set-assoc LRU",
    "opt": "OPT",
}


def cache_capacity(fraction: float, num_rows: int, policy: str = "lru", ways: int = 32) -> int:
    """Slots of a cache holding ``fraction`` of ``num_rows`` rows (at least one); a set-associative
    cache rounds to a whole number of sets of ``ways`` slots (at least one set)."""
    rows = check_int("num_rows", num_rows, lo=1)
    cap = max(1, min(rows, round(fraction * rows)))
    if policy == "setassoc":
        cap = max(ways, round(cap / ways) * ways)
        while cap > rows:
            cap -= ways
    return cap


@functools.lru_cache(maxsize=8)
def _stream(num_rows: int, alpha: float, num_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """(profile, trace): one bounded Zipf stream (ranks scattered over rows), its first
    :data:`~recnotebooks.cache.hot.PROFILE_SHARE` part (FAE's 5%) the profile sample a static hot set
    is chosen from, the rest the trace every policy replays. Read-only and kept."""

    n_profile = max(1, int(num_ids * PROFILE_SHARE))
    stream = zipf_trace(num_rows, n_profile + num_ids, alpha=alpha, seed=0)
    stream.flags.writeable = False
    return stream[:n_profile], stream[n_profile:]


def cache_trace(num_rows: int, alpha: float, num_ids: int = TRACE_IDS) -> np.ndarray:
    """One table's id stream (``num_ids`` bounded Zipf ids over ``num_rows`` rows), read-only and kept."""
    return _stream(num_rows, alpha, num_ids)[1]


def cache_profile(num_rows: int, alpha: float, num_ids: int = TRACE_IDS) -> np.ndarray:
    """The profile sample taken before :func:`cache_trace` (FAE's 5% as long), from the same law."""
    return _stream(num_rows, alpha, num_ids)[0]


def first_touches(trace: np.ndarray) -> float:
    """Share of a trace's lookups that touch their row for the first time (compulsory misses)."""
    return float(len(np.unique(trace))) / max(1, len(trace))


def simulate_policy(
    policy: str,
    trace: np.ndarray,
    capacity: int,
    num_rows: int,
    ways: int,
    profile: np.ndarray,
    batch_size: int = 1,
) -> SimResult:
    """``trace`` replayed through ``policy`` with ``capacity`` slots
    (:func:`~recnotebooks.cache.simulate.simulate`): ``"setassoc"`` with ``ways`` slots per set,
    ``"static"`` pinning the hot rows of ``profile``; ``batch_size`` ids at a time (a training
    step's lookups; 1: one by one). **Simulated**."""

    extra = {"ways": ways} if policy == "setassoc" else {"profile": profile} if policy == "static" else {}
    return simulate(trace, policy, capacity, num_rows=num_rows, batch_size=batch_size, **extra)


def curve_row(
    policy: str, fraction: float, capacity: int, num_rows: int, hit_rate: float
) -> dict[str, object]:
    """One point of a policy's curve: ``cache_percent`` the size asked for, ``capacity`` the slots
    it gives (whole sets for set-assoc), ``cache_fraction`` their share of the rows."""
    return {
        "policy": POLICY_NAMES[policy],
        "capacity": capacity,
        "cache_fraction": capacity / num_rows,
        "cache_percent": 100 * fraction,
        "hit_rate": hit_rate,
        "miss_ratio": 1 - hit_rate,
        "source": "simulated",
    }


@functools.lru_cache(maxsize=32)
def hit_rate_curves(
    num_rows: int, alpha: float, ways: int = 32, num_ids: int = TRACE_IDS
) -> tuple[dict, ...]:
    """Hit rate against cache size per policy: tidy rows, ``source="simulated"``, kept per setting
    (``cache_percent``: the size asked for; ``capacity``: the slots it gives, whole sets for set-assoc).
    LRU (one pass of stack distances), OPT (Belady's rule) and the static hot set (one pass over
    profile ranks) at every size of :data:`CURVE_FRACTIONS`; LFU and set-associative LRU with
    ``ways`` (a replay per size) at :data:`FEW_FRACTIONS`."""

    trace, profile = cache_trace(num_rows, alpha, num_ids), cache_profile(num_rows, alpha, num_ids)
    rows: list[dict[str, object]] = []

    def add(policy: str, fraction: float, capacity: int, miss: float) -> None:
        row = curve_row(policy, fraction, capacity, num_rows, 1.0 - float(miss))
        rows.append({**row, "miss_ratio": float(miss)})  # the miss ratio as simulated, not 1 - hit rate

    every = {f: cache_capacity(f, num_rows) for f in CURVE_FRACTIONS}  # x: the size asked for, in % of rows
    lru = lru_mrc(trace, num_rows=num_rows)
    opt = opt_mrc(trace, sorted(set(every.values())), num_rows=num_rows)
    for f, c in every.items():
        add("lru", f, c, lru.at(c))
    for f in FEW_FRACTIONS:
        c = cache_capacity(f, num_rows)
        add("lfu", f, c, simulate_policy("lfu", trace, c, num_rows, ways, profile).miss_ratio)
    static = static_hit_curve(trace, profile, num_rows, list(every.values()))
    for (f, c), h in zip(every.items(), static, strict=True):
        add("static", f, c, 1.0 - h)
    for f in FEW_FRACTIONS:
        c = cache_capacity(f, num_rows, "setassoc", ways)
        replay = CachePolicy("setassoc", num_rows, c, ways=ways).replay(trace)
        add("setassoc", f, c, replay.misses / len(trace))
    for f, c in every.items():
        add("opt", f, c, opt.at(c))
    return tuple(rows)


@functools.lru_cache(maxsize=64)
def opt_hit_rate(num_rows: int, alpha: float, capacity: int, num_ids: int = TRACE_IDS) -> float:
    """Belady's OPT with exactly ``capacity`` slots on :func:`cache_trace`: the most any policy with
    as many slots can serve. **Simulated**, kept per setting."""

    trace = cache_trace(num_rows, alpha, num_ids)
    capacity = check_int("capacity", capacity, lo=1)
    return 1.0 - float(opt_mrc(trace, [capacity], num_rows=num_rows).at(capacity))
