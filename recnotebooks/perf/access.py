"""Embedding access statistics under Zipf skew, in closed form (fast enough for sweeps).

Row popularity follows a bounded Zipf law: the ``i``-th most popular of ``N`` rows is
looked up with probability ``p_i = i^-s / H(N, s)``, each lookup drawn independently (the
independent reference model). Two questions drive embedding cost:

* :func:`expected_unique`: how many *distinct* rows do ``n`` lookups touch? (The backward
  and the optimizer update each distinct row once.) With Poisson draws,
  ``E[U] = sum_i 1 - exp(-n p_i)``.
* :func:`hit_rate` / :func:`cache_rows_for_hit_rate`: what share of lookups does a device
  cache of ``C`` rows serve, by replacement policy (:data:`CACHE_POLICIES`)?

  - ``"static"`` and ``"lfu"``: the cache holds the ``C`` hottest rows, serving
    ``H(C, s) / H(N, s)`` of lookups: the best any cache can do without knowing the future
    order (FAE's pinned hot set, Adnan et al., VLDB 2022, https://arxiv.org/abs/2103.00686;
    an LFU that counts every row, as FBGEMM's does, converges to it).
  - ``"lru"``: Che's approximation (Che, Tung and Wang, "Hierarchical Web caching systems:
    modeling, design and experimental results", IEEE JSAC 2002): a row stays cached for a
    *characteristic time* ``T`` after its last lookup, where ``T`` solves
    ``sum_i (1 - exp(-p_i T)) = C`` (the rows looked up within ``T`` fill the cache), and
    the hit rate is ``sum_i p_i (1 - exp(-p_i T))``. Fricker, Robert and Roberts ("A versatile
    and accurate approximation for LRU cache performance", ITC 2012,
    https://arxiv.org/abs/1202.3974) explain why it is accurate down to small caches.
  - ``"setassoc"``: ``C / W`` sets of ``W`` ways, a row hashed to one set, LRU inside each
    set (FBGEMM's default cache: 32 ways). A lookup of row ``i`` hits iff fewer than ``W``
    *distinct other rows of its set* were looked up since its previous lookup, an
    exponential time ``tau`` of rate ``p_i`` earlier. Hashing puts each other row ``k`` in
    that set with probability ``1/S`` (``S = C / W`` sets), independently of whether it was
    looked up within ``tau`` (probability ``1 - exp(-p_k tau)``), so the count is a sum of
    independent Bernoulli variables of probability ``(1 - exp(-p_k tau)) / S``: a binomial
    per rank bin, convolved (truncated at ``W``). The hit rate is
    ``sum_i p_i E[P(count(tau) < W)]``: exact for independent lookups and a random hash,
    averaged over hashes. Its shortfall from ``"lru"`` of the same ``C`` rows is the
    conflict misses: a set that drew more hot rows than its share evicts them early.

Sums over ranks are evaluated on log-spaced rank bins (exact for small tables), so a
table costs a few microseconds whatever its size (a set-associative one a few milliseconds).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from recnotebooks.checks import check_choice, check_float, check_int
from recnotebooks.plan import CACHE_POLICIES  # the policies the model knows, defined with the plan types

__all__ = [
    "CACHE_POLICIES",
    "expected_unique",
    "hit_rate",
    "cache_rows_for_hit_rate",
    "expected_unique_many",
    "hit_rate_many",
    "lru_characteristic_time",
]

_BINS = 64
#: Points of the log-spaced time grid the set-associative model integrates over.
_TAU_POINTS = 240


@functools.lru_cache(maxsize=4096)
def _probs(n_rows: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    """Bin sizes and per-row probability of each bin's representative rank."""
    r, m = _bins(n_rows)
    w = r ** (-s)
    return m, w / float((w * m).sum())


def _bins(n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Representative ranks and bin sizes covering 1..n_rows."""
    if n_rows <= _BINS:
        r = np.arange(1, n_rows + 1, dtype=np.float64)
        return r, np.ones_like(r)
    edges = np.unique(np.round(np.geomspace(1, n_rows + 1, _BINS + 1)).astype(np.int64))
    lo, hi = edges[:-1].astype(np.float64), edges[1:].astype(np.float64)
    return np.sqrt(lo * (hi - 1).clip(min=lo)), hi - lo


def _check(n_rows: int, s: float) -> None:
    check_int("n_rows", n_rows, lo=1)
    check_float("zipf_exponent", s, lo=0)


def _check_many(n_rows: Sequence[int], s: float) -> None:
    """The checks of :func:`_check` for many tables: the exponent once, then every row
    count (plain ints >= 1 pass at a glance; anything else gets the full check and message)."""
    check_float("zipf_exponent", s, lo=0)
    if not all(type(n) is int and n >= 1 for n in n_rows):
        for n in n_rows:
            check_int("n_rows", n, lo=1)


def _check_policy(policy: str, ways: int) -> tuple[str, int]:
    return check_choice("policy", policy, CACHE_POLICIES), check_int("ways", ways, lo=1)


def expected_unique(n_lookups: float, n_rows: int, zipf_exponent: float = 1.05) -> float:
    """Expected distinct rows touched by ``n_lookups`` Zipf draws over ``n_rows`` rows."""
    _check(n_rows, zipf_exponent)
    if not math.isfinite(n_lookups) or n_lookups < 0:
        raise ValueError(f"n_lookups must be a finite number >= 0, got {n_lookups!r}")
    if n_lookups == 0:
        return 0.0
    m, p = _probs(int(n_rows), float(zipf_exponent))
    u = float((m * -np.expm1(-n_lookups * p)).sum())
    return min(u, float(n_rows), float(n_lookups))


# ----- the policies, on binned probabilities (rows m, per-row probability p; 2-D: tables x bins) -----
def _hottest(m: np.ndarray, p: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Share of lookups on the ``k`` hottest rows (``"static"``, ``"lfu"``), uniform within a bin."""
    w = p * m
    cum = np.cumsum(m, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = np.where(m > 0, np.clip((k[:, None] - (cum - m)) / np.where(m > 0, m, 1), 0.0, 1.0), 0.0)
    return (w * inside).sum(axis=1) / w.sum(axis=1)


def _che_time(m: np.ndarray, p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Che's characteristic time ``T`` per table: ``sum_i (1 - exp(-p_i T)) = c`` (``0 < c < N``),
    by bisection on ``log T`` (the left side grows with ``T``; ``c <= T`` because it is
    at most ``sum_i p_i T = T``, and ``N (1 - exp(-p_min T)) >= c`` bounds it above)."""
    n = m.sum(axis=1)
    p_min = np.where(m > 0, p, np.inf).min(axis=1)
    lo = np.log(c)
    hi = np.log(-np.log1p(-c / n) / p_min * 1.01 + c)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        filled = (m * -np.expm1(-p * np.exp(mid)[:, None])).sum(axis=1)
        lo, hi = np.where(filled < c, mid, lo), np.where(filled < c, hi, mid)
    return np.exp(0.5 * (lo + hi))


def _lru(m: np.ndarray, p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Che's LRU hit rate ``sum_i p_i (1 - exp(-p_i T))`` for caches of ``0 < c < N`` rows."""
    t = _che_time(m, p, c)
    return (m * p * -np.expm1(-p * t[:, None])).sum(axis=1)


@functools.lru_cache(maxsize=1024)
def _setassoc(n_rows: int, s: float, c: float, ways: int) -> float:
    """Set-associative LRU hit rate (see the module docstring): ``c / ways`` sets of ``ways``."""
    m, p = _probs(n_rows, s)
    sets = c / ways
    if sets <= 1.0:  # one set: a fully associative LRU of c rows
        return float(_lru(m[None], p[None], np.array([c]))[0])
    t_che = float(_che_time(m[None], p[None], np.array([c]))[0])
    tau = t_che * np.geomspace(1e-6, 1e3, _TAU_POINTS)
    # P(count < ways) at each tau: count = sum over bins of Binomial(m_j, pi_j(tau)), truncated
    q = -np.expm1(-np.outer(tau, p)) / sets  # (tau, bins): P(a given other row is in the set and seen)
    pmf = np.zeros((len(tau), ways))
    pmf[:, 0] = 1.0
    x = np.arange(ways - 1, dtype=np.float64)
    for j in range(len(m)):
        qj = q[:, j : j + 1]
        ratio = (m[j] - x) / (x + 1) * qj / (1 - qj)  # b[x+1] / b[x] of Binomial(m_j, q_j)
        b = np.exp(m[j] * np.log1p(-qj)) * np.concatenate(
            [np.ones((len(tau), 1)), np.cumprod(np.clip(ratio, 0.0, None), axis=1)], axis=1
        )
        out = np.zeros_like(pmf)
        for y in range(ways):
            out[:, y:] += pmf[:, y : y + 1] * b[:, : ways - y]
        pmf = out
    f = pmf.sum(axis=1)  # P(fewer than `ways` distinct other rows of the set since the last lookup)
    f_mid = np.concatenate([[1.0], 0.5 * (f[:-1] + f[1:]), [f[-1]]])
    # E[f(tau)] for tau ~ Exp(p_j), f piecewise constant between grid points: exact in the kernel
    edges = np.concatenate([[0.0], tau, [np.inf]])
    kernel = -np.diff(np.exp(-np.outer(p, edges)), axis=1)  # (bins, intervals): P(tau in interval)
    return float((m * p * (kernel @ f_mid)).sum())


def _policy_hit(
    m: np.ndarray, p: np.ndarray, k: np.ndarray, n_rows: Sequence[int], s: float, policy: str, ways: int
) -> np.ndarray:
    """Hit rate per table (rows of ``m``/``p``) of caches of ``k`` rows under ``policy``."""
    n = np.asarray(n_rows, dtype=np.float64)
    out = np.where(k >= n, 1.0, 0.0)
    part = (k > 0) & (k < n)
    if not part.any():
        return out
    if policy in ("static", "lfu"):
        out[part] = _hottest(m[part], p[part], k[part])
    elif policy == "lru":
        out[part] = _lru(m[part], p[part], k[part])
    else:
        for i in np.flatnonzero(part):
            out[i] = _setassoc(int(n_rows[i]), s, float(k[i]), ways)
    return out


def hit_rate(
    cached_rows: float,
    n_rows: int,
    zipf_exponent: float = 1.05,
    policy: str = "static",
    ways: int = 32,
) -> float:
    """Fraction of lookups served by a cache of ``cached_rows`` rows under ``policy`` (one of
    :data:`CACHE_POLICIES`; ``ways`` for ``"setassoc"``): by default the share of the
    ``cached_rows`` hottest rows. See the module docstring for each policy's model."""
    _check(n_rows, zipf_exponent)
    policy, ways = _check_policy(policy, ways)
    cached_rows = check_float("cached_rows", cached_rows, lo=0)
    m, p = _probs(int(n_rows), float(zipf_exponent))
    k = np.array([min(cached_rows, float(n_rows))])
    return float(_policy_hit(m[None], p[None], k, [int(n_rows)], float(zipf_exponent), policy, ways)[0])


def lru_characteristic_time(cached_rows: float, n_rows: int, zipf_exponent: float = 1.05) -> float:
    """Che's characteristic time of an LRU cache of ``cached_rows`` rows, in lookups: a row not
    looked up for this long has been evicted (``inf`` when the whole table fits)."""
    _check(n_rows, zipf_exponent)
    c = check_float("cached_rows", cached_rows, lo=0, lo_open=True)
    if c >= n_rows:
        return math.inf
    m, p = _probs(int(n_rows), float(zipf_exponent))
    return float(_che_time(m[None], p[None], np.array([c]))[0])


def cache_rows_for_hit_rate(
    target: float,
    n_rows: int,
    zipf_exponent: float = 1.05,
    policy: str = "static",
    ways: int = 32,
) -> float:
    """Fewest rows a cache must hold to serve ``target`` of lookups under ``policy`` (the
    inverse of :func:`hit_rate`): by default read off the cumulative mass of the rank bins;
    for ``"lru"`` and ``"setassoc"`` by bisection on the cache size."""
    _check(n_rows, zipf_exponent)
    policy, ways = _check_policy(policy, ways)
    if not (isinstance(target, (int, float)) and 0.0 <= target <= 1.0):
        raise ValueError(f"cache_hit_rate must be in [0, 1], got {target!r}")
    if target <= 0:
        return 0.0
    if target >= 1:
        return float(n_rows)
    m, p = _probs(int(n_rows), float(zipf_exponent))
    if policy not in ("static", "lfu"):
        return _bisect_rows(float(target), int(n_rows), float(zipf_exponent), policy, ways)
    mass = p * m  # lookups served by each bin of ranks, hottest first
    cum = np.cumsum(mass) / mass.sum()
    i = min(int(np.searchsorted(cum, target)), len(cum) - 1)  # first bin whose end reaches the target
    before = float(cum[i - 1]) if i > 0 else 0.0
    rows_before = float(m[:i].sum())
    frac = (target - before) / max(
        float(cum[i]) - before, 1e-300
    )  # uniform within a bin, as hit_rate assumes
    return min(float(n_rows), rows_before + frac * float(m[i]))


def _bisect_rows(target: float, n_rows: int, s: float, policy: str, ways: int) -> float:
    """Smallest cache (to 0.1% of its size) whose modeled hit rate reaches ``target``."""
    lo = cache_rows_for_hit_rate(target, n_rows, s)  # no policy beats the hottest rows
    if hit_rate(lo, n_rows, s, policy, ways) >= target:
        return lo
    hi = float(n_rows)
    while hi - lo > max(1.0, 1e-3 * hi):
        mid = math.sqrt(lo * hi) if lo > 0 else hi / 2
        lo, hi = (mid, hi) if hit_rate(mid, n_rows, s, policy, ways) < target else (lo, mid)
    return hi


@functools.lru_cache(maxsize=256)
def _stacked(n_rows: tuple[int, ...], s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bin sizes, probabilities and cumulative bin ends for several tables, padded to
    ``_BINS`` columns (empty bins have size 0)."""
    k = _BINS
    m = np.zeros((len(n_rows), k))
    p = np.zeros((len(n_rows), k))
    for i, n in enumerate(n_rows):
        mi, pi = _probs(n, s)
        m[i, : len(mi)], p[i, : len(pi)] = mi, pi
    return m, p, np.cumsum(m, axis=1)


def expected_unique_many(
    n_lookups: Sequence[float], n_rows: Sequence[int], zipf_exponent: float = 1.05
) -> np.ndarray:
    """:func:`expected_unique` for many tables at once (one vectorised evaluation)."""
    _check_many(n_rows, zipf_exponent)
    m, p, _ = _stacked(tuple(int(n) for n in n_rows), float(zipf_exponent))
    lk = np.asarray(n_lookups, dtype=np.float64)
    if lk.shape != (len(n_rows),) or not np.all(np.isfinite(lk)) or np.any(lk < 0):
        raise ValueError(f"n_lookups must be {len(n_rows)} finite numbers >= 0, got {n_lookups!r}")
    u = (m * -np.expm1(-lk[:, None] * p)).sum(axis=1)
    return np.minimum(np.minimum(u, np.asarray(n_rows, dtype=np.float64)), lk)


def hit_rate_many(
    cached_rows: Sequence[float],
    n_rows: Sequence[int],
    zipf_exponent: float = 1.05,
    policy: str = "static",
    ways: int = 32,
) -> np.ndarray:
    """:func:`hit_rate` for many tables at once (one vectorised evaluation; set-associative
    caches are evaluated table by table, each result remembered)."""
    _check_many(n_rows, zipf_exponent)
    policy, ways = _check_policy(policy, ways)
    rows = tuple(int(n) for n in n_rows)
    m, p, _ = _stacked(rows, float(zipf_exponent))
    k = np.minimum(np.asarray(cached_rows, dtype=np.float64), np.asarray(rows, dtype=np.float64))
    if k.shape != (len(rows),) or np.any(~np.isfinite(k)) or np.any(k < 0):
        raise ValueError(f"cached_rows must be {len(rows)} finite numbers >= 0, got {cached_rows!r}")
    return _policy_hit(m, p, k, rows, float(zipf_exponent), policy, ways)
