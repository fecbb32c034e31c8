"""Embedding access statistics under Zipf skew, in closed form (fast enough for sweeps).

Row popularity follows a bounded Zipf law: the ``i``-th most popular of ``N`` rows is
looked up with probability ``p_i = i^-s / H(N, s)``. Two questions drive embedding cost:

* :func:`expected_unique`: how many *distinct* rows do ``n`` lookups touch? (The backward
  and the optimizer update each distinct row once.) With Poisson draws,
  ``E[U] = sum_i 1 - exp(-n p_i)``.
* :func:`hit_rate` / :func:`cache_rows_for_hit_rate`: a cache holding the ``k`` hottest
  rows serves ``H(k, s) / H(N, s)`` of lookups (the best a frequency-based cache can do).

Sums over ranks are evaluated on log-spaced rank bins (exact for small tables), so a
table costs a few microseconds whatever its size.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from recnotebooks.checks import check_float, check_int

__all__ = ["expected_unique", "hit_rate", "cache_rows_for_hit_rate", "expected_unique_many", "hit_rate_many"]

_BINS = 64


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


def hit_rate(cached_rows: float, n_rows: int, zipf_exponent: float = 1.05) -> float:
    """Fraction of lookups served by a cache holding the ``cached_rows`` hottest rows."""
    _check(n_rows, zipf_exponent)
    if not math.isfinite(cached_rows) or cached_rows < 0:
        raise ValueError(f"cached_rows must be a finite number >= 0, got {cached_rows!r}")
    k = min(cached_rows, n_rows)
    if k >= n_rows:
        return 1.0
    m, p = _probs(int(n_rows), float(zipf_exponent))
    w = p * m
    cum = np.cumsum(m)
    inside = np.clip((k - (cum - m)) / m, 0.0, 1.0)
    return float((w * inside).sum() / w.sum())


def cache_rows_for_hit_rate(target: float, n_rows: int, zipf_exponent: float = 1.05) -> float:
    """Fewest hottest rows a cache must hold to serve ``target`` of lookups (the inverse of
    :func:`hit_rate`, read off the cumulative mass of the rank bins)."""
    _check(n_rows, zipf_exponent)
    if not (isinstance(target, (int, float)) and 0.0 <= target <= 1.0):
        raise ValueError(f"cache_hit_rate must be in [0, 1], got {target!r}")
    if target <= 0:
        return 0.0
    if target >= 1:
        return float(n_rows)
    m, p = _probs(int(n_rows), float(zipf_exponent))
    mass = p * m  # lookups served by each bin of ranks, hottest first
    cum = np.cumsum(mass) / mass.sum()
    i = min(int(np.searchsorted(cum, target)), len(cum) - 1)  # first bin whose end reaches the target
    before = float(cum[i - 1]) if i > 0 else 0.0
    rows_before = float(m[:i].sum())
    frac = (target - before) / max(
        float(cum[i]) - before, 1e-300
    )  # uniform within a bin, as hit_rate assumes
    return min(float(n_rows), rows_before + frac * float(m[i]))


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
    cached_rows: Sequence[float], n_rows: Sequence[int], zipf_exponent: float = 1.05
) -> np.ndarray:
    """:func:`hit_rate` for many tables at once (one vectorised evaluation)."""
    _check_many(n_rows, zipf_exponent)
    m, p, cum = _stacked(tuple(int(n) for n in n_rows), float(zipf_exponent))
    k = np.minimum(np.asarray(cached_rows, dtype=np.float64), np.asarray(n_rows, dtype=np.float64))
    if np.any(~np.isfinite(k)) or np.any(k < 0):
        raise ValueError(f"cached_rows must be finite numbers >= 0, got {cached_rows!r}")
    w = p * m
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = np.where(m > 0, np.clip((k[:, None] - (cum - m)) / np.where(m > 0, m, 1), 0.0, 1.0), 0.0)
    return (w * inside).sum(axis=1) / w.sum(axis=1)
