"""Skewed id access: Zipf sampling over huge tables, id scattering and Zipf fitting.

Real recommendation traffic is heavily skewed: a few ids (popular items, frequent users) are
looked up far more often than the rest. The usual model is a bounded **Zipf** law over the
rows of a table: the id of popularity rank ``k`` (``0`` = most popular) is drawn with
probability ``P(k) = (k + 1)^-s / Z`` for ``k = 0 .. n_rows - 1``, exponent ``s > 0``.
Criteo has no published exponent (its ids are known to be heavily skewed, some rows accessed
~10,000x more than others: Adnan et al., FAE, VLDB 2022, https://arxiv.org/abs/2103.00686);
0.8-1.2 is a modelling assumption, and
:func:`fit_zipf_exponent` estimates it from real counts.

Three tools:

* :class:`ZipfSampler` / :func:`zipf_ranks` draw ranks in O(size) time and O(1) memory in
  ``n_rows`` (tables of 40M rows need no 40M-entry array). Popular ranks are sampled
  *exactly* from a small cumulative table; the long tail uses the continuous (midpoint)
  approximation ``P(k) ~ integral of x^-s over [k + 0.5, k + 1.5]``, inverted in closed
  form, whose relative error is below ``s (s + 1) / (24 k^2)``, i.e. about 1e-9 where used.
* :func:`scatter_ids` maps ranks to ids by a cheap bijection, so hot ids are spread over the
  table (as hashed Criteo ids are) instead of being rows ``0..k``.
* :func:`fit_zipf_exponent`: maximum-likelihood exponent from per-id counts.

Plus :func:`hash32`, the integer hash behind the hash-based (counter-based) sampling of
:mod:`recnotebooks.data.synthetic`.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from recnotebooks.checks import check_float, check_int

__all__ = [
    "MAX_ROWS",
    "MAX_EXPONENT",
    "ZipfSampler",
    "zipf_ranks",
    "scatter_ids",
    "scatter_params",
    "affine_mod",
    "hash32",
    "fmod_exact",
    "i32",
    "FLOAT_MOD_MAX",
    "fit_zipf_exponent",
]

MAX_ROWS = 2**32  # ids fit 32-bit hashing (Criteo hashes categories to 32 bits)
FLOAT_MOD_MAX = 94_906_265  # largest n with n^2 < 2^53
_MAX_HEAD = 65536  # ranks sampled exactly at most
_BUCKETS = 65536  # guide-table buckets for the exact head
MAX_EXPONENT = 20.0  # largest Zipf exponent accepted


def _tail_mass(s: float, a: float, b: float) -> float:
    """``integral_a^b x^-s dx`` computed stably (also for ``s`` at or near 1)."""
    if b <= a:
        return 0.0
    c = 1.0 - s
    lr = math.log(b / a)
    if c == 0.0:
        return lr
    return a**c * math.expm1(c * lr) / c


class ZipfSampler:
    """Bounded Zipf sampler for one exponent, shared by tables of any size.

    The head (ranks ``0 .. head-1``) is sampled exactly with a *guide table*: the head's
    cumulative mass is cut into ``65536`` equal buckets; ``head`` is chosen so that every head
    rank is at least one bucket wide, hence a bucket holds at most one rank boundary and one
    comparison finds the rank (two gathers, no binary search). Ranks ``>= head`` come from the
    closed-form inverse of the tail integral. Tables smaller than ``head`` just never reach
    past their last rank. Use :meth:`get` to share cached instances.
    """

    def __init__(self, exponent: float, device: torch.device | str = "cpu") -> None:
        s = check_float("exponent", exponent, lo=0.0, hi=MAX_EXPONENT, lo_open=True)
        self.exponent = s
        self.device = torch.device(device)
        k = np.arange(1, _MAX_HEAD + 1, dtype=np.float64)
        w = k**-s
        cum = np.cumsum(w)
        # Largest head with min weight >= head mass / buckets (w decreasing, cum increasing).
        head = int(np.count_nonzero(w * _BUCKETS >= cum))
        self.head = max(head, 1)
        self._cum = cum[: self.head]  # float64, exact head CDF (unnormalised)
        self.head_mass = float(self._cum[-1])
        edges = np.arange(_BUCKETS, dtype=np.float64) * (self.head_mass / _BUCKETS)
        lo = np.searchsorted(self._cum, edges, side="right").clip(max=self.head - 1)
        bound = self._cum[lo]
        # Sentinel bucket: anything at or beyond the head mass maps to rank ``head``.
        lo, bound = np.append(lo, self.head), np.append(bound, np.inf)
        self._lo = torch.as_tensor(lo, dtype=torch.float64, device=self.device)
        self._bound = torch.as_tensor(bound, dtype=torch.float64, device=self.device)
        self._a = self.head + 0.5  # tail integral starts at x = head + 1 - 0.5 (x = rank + 1)

    @staticmethod
    @lru_cache(maxsize=64)
    def get(exponent: float, device: str = "cpu") -> ZipfSampler:
        """Cached sampler (about 1.5 MB each) for ``exponent`` on ``device``."""
        return ZipfSampler(exponent, device)

    def mass(self, n_rows: int) -> float:
        """Normaliser ``Z(n_rows) = sum_k (k + 1)^-s`` (exact head, integral tail)."""
        n = check_int("n_rows", n_rows, lo=1, hi=MAX_ROWS)
        if n <= self.head:
            return float(self._cum[n - 1])
        return self.head_mass + _tail_mass(self.exponent, self._a, n + 0.5)

    def ranks_from_uniform(
        self, u: torch.Tensor, mass: float | torch.Tensor, n_rows: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        """Ranks (int64) for float64 uniforms ``u`` in [0, 1): the inverse CDF, vectorised.

        ``mass`` is ``self.mass(n_rows)``; it (and ``n_rows``) may be a tensor broadcasting
        against ``u`` so that one call serves many tables. Ranks are clamped to
        ``n_rows - 1`` when ``n_rows`` is given (without it, rounding can yield ``n_rows``
        for ``u`` within about 1e-16 of 1).
        """
        rank = self.ranks_float(u * mass).to(torch.int64)
        if n_rows is None:
            return rank
        if isinstance(n_rows, torch.Tensor):
            return torch.minimum(rank, n_rows - 1)
        return rank.clamp_(max=n_rows - 1)

    def ranks_float(self, x: torch.Tensor) -> torch.Tensor:
        """Ranks as exact float64 integers for ``x = u * mass`` (overwrites ``x``).

        Head and tail are both computed for every element and *added*, with no branch or
        select: the guide-table rank saturates at ``head`` beyond the head mass, and the tail
        part is exactly 0 below it.
        """
        j = (x * (_BUCKETS / self.head_mass)).clamp_(max=_BUCKETS).to(torch.int32).view(-1)
        rank = self._lo.index_select(0, j).view(x.shape)
        rank += x >= self._bound.index_select(0, j).view(x.shape)
        # Tail: solve integral_a^y t^-s dt = x - head_mass for y; rank = floor(y - 0.5).
        c = 1.0 - self.exponent
        if c == 0.0:
            y = x.sub_(self.head_mass).clamp_(min=0.0).exp_()
        else:  # y / a = (1 + c a^-c (x - head_mass))^(1/c), clamped to 1 inside the head
            k = c * self._a**-c
            z = x.mul_(k).add_(1.0 - k * self.head_mass)
            z = z.clamp_(min=1.0) if c > 0 else z.clamp_(min=1e-300, max=1.0)
            y = z.log_().mul_(1.0 / c).exp_()
        rank += y.mul_(self._a).sub_(0.5 + self.head).floor_()
        return rank


def zipf_ranks(
    n_rows: int, exponent: float, size: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``size`` iid ranks in ``0 .. n_rows-1`` with ``P(k) ~ (k + 1)^-exponent`` (int64).

    Rank 0 is the most popular. Works for ``exponent`` below, at and above 1 and for tables
    up to ``MAX_ROWS`` rows with O(size) time and no ``n_rows``-sized memory. The result is
    on the generator's device (CPU if ``generator`` is None).
    """
    n = check_int("n_rows", n_rows, lo=1, hi=MAX_ROWS)
    s = check_float("exponent", exponent, lo=0.0, hi=MAX_EXPONENT, lo_open=True)
    size = check_int("size", size, lo=0)
    device = generator.device if generator is not None else torch.device("cpu")
    u = torch.rand(size, dtype=torch.float64, generator=generator, device=device)
    sampler = ZipfSampler.get(s, str(device))
    return sampler.ranks_from_uniform(u, sampler.mass(n), n)


def _mix64(*parts: int) -> int:
    """SplitMix64-style hash of integers to a 64-bit int (pure Python, for seeds and salts)."""
    h = 0x9E3779B97F4A7C15
    for p in parts:
        h = (h ^ (int(p) & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 31
        h = (h + 0x9E3779B97F4A7C15) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 29
    return h


def scatter_params(n_rows: int, salt: int) -> tuple[int, int]:
    """``(a, b)`` of the bijection ``rank -> (a * rank + b) mod n_rows`` for ``salt``.

    ``a`` is coprime with ``n_rows`` (so the map is a permutation) and close to a
    salt-jittered golden ratio of ``n_rows``, which spreads consecutive ranks evenly.
    """
    n = check_int("n_rows", n_rows, lo=1, hi=MAX_ROWS)
    salt = check_int("salt", salt)
    if n <= 2:
        return (1, _mix64(salt, 1) % n)
    h = _mix64(salt, 0)
    frac = 0.6180339887498949 + 0.1 * ((h >> 11) / 2.0**53 - 0.5)
    a = min(max(int(n * frac), 1), n - 1)
    while math.gcd(a, n) != 1:
        a = a + 1 if a + 1 < n else 1
    return a, _mix64(salt, 1) % n


def scatter_ids(ranks: torch.Tensor, n_rows: int, salt: int) -> torch.Tensor:
    """Map ranks ``0..n_rows-1`` to ids by the bijection of :func:`scatter_params` (int64)."""
    a, b = scatter_params(n_rows, salt)
    if not isinstance(ranks, torch.Tensor) or ranks.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"ranks must be an int32/int64 tensor, got {type(ranks).__name__}")
    r = ranks.to(torch.int64)
    if r.numel() and (int(r.min()) < 0 or int(r.max()) >= n_rows):
        raise ValueError(f"ranks must be in [0, {n_rows - 1}], got min {int(r.min())}, max {int(r.max())}")
    return affine_mod(r, a, b, n_rows)


def affine_mod(
    r: torch.Tensor,
    a: int | torch.Tensor,
    b: int | torch.Tensor,
    n: int | torch.Tensor,
    n_max: int | None = None,
) -> torch.Tensor:
    """``(a * r + b) mod n`` for ``0 <= a, b, r < n <= 2^32`` without overflow.

    int64 ``r``: below ``2^31`` the product fits int64 directly; above, ``a`` is split into
    16-bit halves. float64 ``r`` (exact integers, for speed: int64 division is slow) needs
    ``n_max <= FLOAT_MOD_MAX``, where ``n_max^2 < 2^53`` makes ``floor(p / n)`` exact.
    ``n_max`` (an upper bound of ``n``) saves a reduction when ``n`` is a tensor.
    """
    big = n_max if n_max is not None else (int(n.max()) if isinstance(n, torch.Tensor) else n)
    if r.is_floating_point():
        if big > FLOAT_MOD_MAX:
            raise ValueError(f"float affine_mod needs n <= {FLOAT_MOD_MAX}, got {big}")
        return fmod_exact(r * a + b, n)
    if big <= 2**31:
        return (r * a + b).remainder_(n)
    a_hi, a_lo = a >> 16, a & 0xFFFF
    return ((r * a_hi).remainder_(n) * 65536 + r * a_lo + b).remainder_(n)


def i32(k: int) -> int:
    """Low 32 bits of the Python int ``k`` as a signed int32 value (for tensor keys)."""
    k &= 0xFFFFFFFF
    return k - (1 << 32) if k >= (1 << 31) else k


def hash32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (a bijection) of an int32 tensor; returns a new int32 tensor.

    Counter-based randomness: ``hash32(key-mixed counter)`` is a random-looking number that
    any element, batch or device can recompute independently (the idea behind Philox in
    cuRAND/JAX). Three xorshift-multiply rounds (T. Mueller's constants); multiplies wrap
    modulo 2^32 and logical right shifts are emulated with masks (int32 shifts are
    arithmetic), so results are bit-identical everywhere.
    """
    x = x ^ ((x >> 16) & 0xFFFF)
    x.mul_(0x45D9F3B)
    x ^= (x >> 16) & 0xFFFF
    x.mul_(0x45D9F3B)
    x ^= (x >> 16) & 0xFFFF
    return x


def fmod_exact(x: torch.Tensor, m: torch.Tensor | float) -> torch.Tensor:
    """``x mod m`` for non-negative float64 integers below 2^53: exact, and on CPU much faster
    than int64 ``remainder`` (integer division is slow)."""
    m = torch.as_tensor(m, dtype=x.dtype, device=x.device)
    return torch.addcmul(x, torch.div(x, m).floor_(), m, value=-1.0)


def _zipf_mean_log(s: float, n: int, logk_head: np.ndarray) -> float:
    """``E[log k]`` under the bounded Zipf on ranks ``1..n`` (exact head, integral tail)."""
    w = np.exp(-s * logk_head)
    z0, z1 = float(w.sum()), float((w * logk_head).sum())
    m = logk_head.size
    if n > m:  # midpoint integrals over [m + 0.5, n + 0.5], Simpson's rule in log-space
        lu = np.linspace(math.log(m + 0.5), math.log(n + 0.5), 4097)
        e = np.exp((1.0 - s) * lu)
        h = (lu[-1] - lu[0]) / 4096
        sw = np.ones_like(lu)
        sw[1:-1:2], sw[2:-1:2] = 4.0, 2.0
        z0 += h / 3 * float((sw * e).sum())
        z1 += h / 3 * float((sw * e * lu).sum())
    return z1 / z0


def fit_zipf_exponent(counts: torch.Tensor | np.ndarray, n_rows: int | None = None) -> float:
    """Maximum-likelihood Zipf exponent from per-id occurrence counts.

    Sort the counts descending to get rank frequencies ``f_1 >= f_2 >= ...``; under the
    bounded Zipf law on ranks ``1..N`` the log-likelihood is
    ``-s * sum_k f_k log k - F log Z_N(s)`` with ``F = sum f``. Setting its derivative to zero
    gives the score equation ``E_s[log k] = sum_k f_k log k / F``: the model's mean log-rank
    must match the data's. ``E_s[log k]`` falls monotonically with ``s``, so bisection finds
    the unique root (clipped to ``[0, 20]``).

    Args:
        counts: occurrences per id (any order; zeros allowed), e.g. ``torch.bincount(ids)``
            or a real Criteo column's value counts.
        n_rows: support size ``N``; ids never seen count as zero-frequency ranks. Defaults
            to ``len(counts)``. Give the table size when ``counts`` lists only seen ids.

    Ranking ids by their *observed* counts slightly flattens the curve where counts are
    small (ties and noise in the tail), so fit on plenty of samples per distinct id.
    """
    if isinstance(counts, torch.Tensor):
        counts = counts.detach().cpu().numpy()
    c = np.asarray(counts, dtype=np.float64).ravel()
    if c.size == 0 or not np.all(np.isfinite(c)) or c.min() < 0:
        raise ValueError("counts must be a non-empty array of finite values >= 0")
    f = np.sort(c[c > 0])[::-1]
    if f.size == 0:
        raise ValueError("counts must contain at least one positive count")
    n = int(c.size) if n_rows is None else check_int("n_rows", n_rows, lo=1, hi=MAX_ROWS)
    if f.size > n:
        raise ValueError(f"n_rows must be >= the number of ids with a positive count ({f.size}), got {n}")
    if n < 2:
        raise ValueError(f"n_rows (or len(counts)) must be >= 2 to fit an exponent, got {n}")
    data_mean_log = float((f * np.log(np.arange(1, f.size + 1))).sum() / f.sum())
    logk = np.log(np.arange(1, min(n, _MAX_HEAD) + 1, dtype=np.float64))
    lo, hi = 0.0, MAX_EXPONENT
    if _zipf_mean_log(lo, n, logk) <= data_mean_log:
        return lo
    if _zipf_mean_log(hi, n, logk) >= data_mean_log:
        return hi
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if _zipf_mean_log(mid, n, logk) > data_mean_log:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
