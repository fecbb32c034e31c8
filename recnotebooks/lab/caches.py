"""Exercises of notebook 03 (embedding placement and caches)."""

from __future__ import annotations

from recnotebooks.cache.simulate import lru_mrc
from recnotebooks.perf.access import cache_rows_for_hit_rate, hit_rate
from recnotebooks.viz.cache import POLICY_NAMES, cache_capacity, cache_trace, hit_rate_curves

from .core import amount, exercise, number

#: Exercise 03.size: a table of EX03_ROWS rows, dim 64, fp32 plus row-wise Adagrad's 4 bytes per row,
#: whose cache gets EX03_BUDGET bytes of HBM (Zipf exponent 1.05).
EX03_ROWS, EX03_BUDGET, EX03_ROW_BYTES = 10_000_000, 256e6, 64 * 4 + 4
#: The same number of binary megabytes: what a learner who reads "MB" as MiB divides.
EX03_MIB = 256 * 2**20
MIB_EXCESS = 1 - EX03_BUDGET / EX03_MIB
#: The units, said in the exercise and in its feedback.
UNITS = "MB = 10^6 bytes; MiB = 2^20 bytes"


def _size_key() -> tuple[float, float]:

    rows = EX03_BUDGET // EX03_ROW_BYTES
    return rows, hit_rate(rows, EX03_ROWS, 1.05, policy="lru")


def _target_key() -> float:

    return cache_rows_for_hit_rate(0.9, EX03_ROWS, 1.05, policy="lru")


def _policy_hits() -> dict[str, float]:

    curves = hit_rate_curves(100_000, 0.6)
    return {
        p: next(
            float(r["hit_rate"])
            for r in curves
            if r["policy"] == POLICY_NAMES[p] and r["capacity"] == cache_capacity(0.01, 100_000, p, 32)
        )
        for p in ("lru", "lfu", "static", "setassoc")
    }


def _double_key() -> tuple[float, float]:
    """The miss ratios at 4% and 2% of the rows."""

    curve = lru_mrc(cache_trace(100_000, 1.05), num_rows=100_000)
    return curve.at(4_000), curve.at(2_000)


@exercise(
    "03.size",
    f"""
    A table of 10M rows (dim 64, fp32, plus row-wise Adagrad's 4 bytes per row) gets 256 MB of HBM for its
    cache ({UNITS}). How many rows fit, and what hit rate does an LRU cache of that size serve at Zipf(1.05)?
    Answer (rows, hit_rate).

    A cached row costs its weights and its optimizer state: 64 x 4 + 4 bytes; the budget is 256 x 10^6 bytes.

    Rows = budget // bytes per row. The hit rate of an LRU cache of that many rows is modeled by
    recnotebooks.perf.access.hit_rate(rows, n_rows, zipf_exponent, policy='lru').

    hit_rate(256e6 // 260, 10_000_000, 1.05, policy='lru'): pass both numbers as a tuple.
    """,
    answer=_size_key,
)
def _size(answer: object) -> tuple[bool, str]:
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise TypeError("answer with a pair (rows, hit_rate)")
    rows, hit = number(answer[0], "the rows"), number(answer[1], "the hit rate")
    want, ref = _size_key()
    if abs(rows - want) > 0.01 * want:
        mib = EX03_MIB // EX03_ROW_BYTES
        if abs(rows - mib) <= 0.01 * mib:
            return False, (
                f"{amount(rows)} rows is what 256 MiB holds (256 x 2^20 bytes). The budget is 256 MB, "
                "and MB here is 10^6 bytes, as in the HBM sizes of datasheets: 256 x 10^6 bytes, "
                f"{MIB_EXCESS:.1%} less than 256 MiB."
            )
        return False, f"{amount(rows)} rows is not what 256 MB holds ({UNITS})."
    ok = abs(hit - ref) <= 0.02
    return ok, (
        f"Right: {want:,.0f} rows ({want / EX03_ROWS:.1%} of the table) serve about {ref:.0%} of lookups."
        if ok
        else f"The rows are right; a hit rate of {hit:.3f} is not what LRU serves there."
    )


@exercise(
    "03.target",
    """
    The fewest rows an LRU cache of that 10M-row table needs to serve 90% of lookups at Zipf(1.05) (within
    5%)?

    The hit rate grows with the cache size; find the size where it reaches 0.9.

    recnotebooks.perf.access.cache_rows_for_hit_rate inverts hit_rate; it takes a policy too.

    cache_rows_for_hit_rate(0.9, 10_000_000, 1.05, policy='lru').
    """,
    answer=_target_key,
)
def _target(answer: object) -> tuple[bool, str]:
    rows = number(answer, "the rows")
    want = _target_key()
    ok = abs(rows - want) <= 0.05 * want
    return ok, (
        f"Right: about {want:,.0f} rows, {want * EX03_ROW_BYTES / 1e6:,.0f} MB of HBM."
        if ok
        else ("Too few: that cache serves less than 90%." if rows < want else "More than needed.")
    )


@exercise(
    "03.policy",
    """
    At weak skew (Zipf alpha 0.6) and a cache of 1% of 100k rows, which policy of the Cache Explorer ('lru',
    'lfu', 'static', 'setassoc') serves the most lookups?

    Set the Cache Explorer to skew 0.6 and cache size 1.0%, then read the curves at the ringed size.

    With weak skew recency says little about the future; what a row's count says stays true longer.

    Compare LFU and the static hot set with LRU in the explorer's chart at 1.0%.
    """,
    answer=lambda: max((h := _policy_hits()), key=h.__getitem__),
)
def _policy(answer: object) -> tuple[bool, str]:
    policies = ["lru", "lfu", "static", "setassoc"]
    if answer not in policies:
        raise ValueError(f"answer with one of {policies}")
    hits = _policy_hits()
    best = max(hits, key=hits.__getitem__)
    ok = answer == best
    return ok, (
        f"Right: {hits[best]:.1%} of lookups, against {hits['lru']:.1%} for LRU."
        if ok
        else f"{answer} serves {hits[str(answer)]:.1%}; another policy serves more."
    )


@exercise(
    "03.double",
    """
    An LRU cache of 2% of 100k rows at Zipf(1.05) misses some share of lookups. Predict its miss ratio at
    twice the size (4%) within 0.01, then check it on the miss-ratio curve.

    A miss-ratio curve gives the miss ratio at every cache size; LRU's comes from one pass of stack distances.

    recnotebooks.cache.simulate.lru_mrc(trace) gives it; the explorer's trace is
    recnotebooks.viz.cache.cache_trace(100_000, 1.05).

    lru_mrc(cache_trace(100_000, 1.05)).at(4_000).
    """,
    answer=lambda: _double_key()[0],
)
def _double(answer: object) -> tuple[bool, str]:
    miss = number(answer, "the miss ratio")
    want, half = _double_key()
    ok = abs(miss - want) <= 0.01
    return ok, (
        f"Right: {want:.3f}, down from {half:.3f}: doubling the cache took {1 - want / half:.0%} of the "
        "misses away, not half of them."
        if ok
        else "Not that ratio."
    )
