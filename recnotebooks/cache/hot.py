"""FAE's hot embeddings: hot lookups against all-hot samples (simulated).

FAE (Adnan et al., "High-performance training by exploiting hot-embeddings in recommendation
systems", VLDB 2022) profiles a small sample of the training data, keeps the rows looked up most
often (the *hot embeddings*) replicated on every GPU and trains a sample there only when **every**
lookup of that sample is hot; the other samples go the slow way, through the full tables. So what
matters to FAE is not the share of lookups the hot rows serve (a cache's hit rate) but the share of
samples all of whose lookups they serve, which falls about as the hit rate to the power of the
lookups per sample. :func:`hot_sample_fraction` measures both on a bounded Zipf stream
(:func:`recnotebooks.cache.simulate.zipf_trace`); :func:`hot_sample_curve` gives tidy rows over
lookups per sample; :func:`static_hit_curve` gives a static hot set's hit rate at many sizes from
one pass over a trace. Everything here is **simulated**.
"""

from __future__ import annotations

import numpy as np

from recnotebooks.cache.policies import check_ids
from recnotebooks.cache.simulate import zipf_trace
from recnotebooks.checks import check_float, check_fraction, check_int, check_type

__all__ = ["PROFILE_SHARE", "hot_sample_curve", "hot_sample_fraction", "static_hit_curve"]

#: The share of the data FAE profiles to choose its hot rows from (a 5% sample).
PROFILE_SHARE = 0.05


def hot_sample_fraction(
    num_rows: int,
    alpha: float,
    hot_fraction: float,
    lookups_per_sample: int,
    num_samples: int = 50_000,
    profile_share: float = PROFILE_SHARE,
    seed: int = 0,
) -> dict[str, float]:
    """FAE's two views of a static hot set, simulated on ``num_samples`` samples of
    ``lookups_per_sample`` bounded Zipf(``alpha``) lookups each of one table of ``num_rows`` rows.

    The hot rows are the ``hot_fraction`` most frequent rows (at least one) of a profile of the first
    ``profile_share`` of the samples (ties to the lower row); the other samples are counted.
    Returns ``lookup_hit_rate`` (the share of lookups the hot rows serve), ``all_hot_samples`` (the
    share of samples whose every lookup hits them: only those train on the GPU replicas alone),
    ``independent_estimate`` (``lookup_hit_rate ** lookups_per_sample``: what independent lookups
    would give), ``hot_rows`` and ``lookups_per_sample``.
    """

    num_rows = check_int("num_rows", num_rows, lo=1)
    alpha = check_float("alpha", alpha, lo=0.0, hi=10.0)
    hot_fraction = check_fraction("hot_fraction", hot_fraction, lo_open=True)
    n = check_int("lookups_per_sample", lookups_per_sample, lo=1)
    num_samples = check_int("num_samples", num_samples, lo=2)
    profile_share = check_fraction("profile_share", profile_share, lo_open=True, hi_open=True)
    seed = check_int("seed", seed, lo=0)
    n_profile = max(1, int(num_samples * profile_share))
    if n_profile >= num_samples:
        raise ValueError(
            f"profile_share={profile_share} of num_samples={num_samples} leaves no sample to count; "
            "allowed: fewer profile samples than num_samples"
        )
    ids = zipf_trace(num_rows, num_samples * n, alpha=alpha, seed=seed).reshape(num_samples, n)
    k = max(1, round(hot_fraction * num_rows))
    counts = np.bincount(ids[:n_profile].ravel(), minlength=num_rows)
    hot = np.zeros(num_rows, dtype=bool)
    hot[np.argsort(-counts, kind="stable")[:k]] = True
    hits = hot[ids[n_profile:]]
    rate = float(hits.mean())
    return {
        "lookup_hit_rate": rate,
        "all_hot_samples": float(hits.all(axis=1).mean()),
        "independent_estimate": rate**n,
        "hot_rows": float(k),
        "lookups_per_sample": float(n),
    }


def hot_sample_curve(
    num_rows: int = 100_000,
    alpha: float = 1.05,
    hot_fraction: float = 0.05,
    lookups: tuple[int, ...] = (1, 2, 5, 10, 26, 50),
) -> list[dict[str, object]]:
    """:func:`hot_sample_fraction` at each number of ``lookups`` per sample: tidy rows
    (``lookups_per_sample``, ``share``, ``what``: "lookups served by hot rows" / "samples with
    every lookup hot"), ``source="simulated"``."""
    check_type("lookups", lookups, (list, tuple), "a tuple of lookups per sample")
    rows: list[dict[str, object]] = []
    for i, n in enumerate(lookups):
        n = check_int(f"lookups[{i}]", n, lo=1)
        f = hot_sample_fraction(num_rows, alpha, hot_fraction, n)
        for what, key in (
            ("lookups served by hot rows", "lookup_hit_rate"),
            ("samples with every lookup hot", "all_hot_samples"),
        ):
            rows.append({"lookups_per_sample": n, "share": f[key], "what": what, "source": "simulated"})
    return rows


def static_hit_curve(trace: np.ndarray, profile: np.ndarray, num_rows: int, sizes: list[int]) -> list[float]:
    """Hit rate on ``trace`` of a static hot set (FAE's) of each of ``sizes`` rows: the most
    frequent rows of ``profile``, ties to the lower row (as
    :func:`recnotebooks.cache.config.hot_rows_from_counts` picks them; rows the profile never saw are
    never hot). All sizes from one pass: a row's rank in the profile decides from which size it is hot."""

    num_rows = check_int("num_rows", num_rows, lo=1)
    trace, profile = check_ids("trace", trace, num_rows), check_ids("profile", profile, num_rows)
    check_type("sizes", sizes, (list, tuple), "a list of cache sizes in rows")
    sizes = [check_int(f"sizes[{i}]", k, lo=1) for i, k in enumerate(sizes)]
    freq = np.bincount(profile, minlength=num_rows)
    order = np.argsort(-freq, kind="stable")
    rank = np.full(num_rows, num_rows, np.int64)
    seen = int(np.count_nonzero(freq))
    rank[order[:seen]] = np.arange(seen)
    counts = np.cumsum(np.bincount(rank[trace], minlength=num_rows + 1))
    return [float(counts[min(k, num_rows) - 1]) / max(1, len(trace)) for k in sizes]
