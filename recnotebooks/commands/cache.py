"""``recnb cache-sim``: a Zipf trace through a cache policy (or OPT), optionally the miss-ratio
curves. SIMULATED numbers: :mod:`recnotebooks.cache.simulate` replays the trace."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from recnotebooks.checks import check_float

from .parser import add_cache_sim_parser
from .report import Report, emit, printer
from .settings import CURVE_POINTS, CacheSimSettings, CLIError, as_given

__all__ = ["add_cache_sim_parser", "cache_sim", "run", "run_cache_sim"]


def cache_sim(args: CacheSimSettings | argparse.Namespace) -> dict[str, Any]:
    """The ``cache-sim`` result as a dict (raises ``ValueError`` for bad settings); ``args`` are
    the settings, or the parsed arguments of ``cache-sim``."""
    from recnotebooks.cache.simulate import simulate, zipf_trace

    s = args if isinstance(args, CacheSimSettings) else as_given(CacheSimSettings, args)
    check_float("--alpha", s.alpha, lo=0.0, hi=10.0)
    if s.policy != "setassoc" and s.ways != 32:
        raise ValueError(f"--ways applies to --policy setassoc, not {s.policy!r}")
    if isinstance(s.capacity, int) and s.capacity > s.rows:
        raise ValueError(f"--capacity must be at most --rows={s.rows}, got {s.capacity}")
    trace = zipf_trace(s.rows, s.ids, s.alpha, seed=s.seed)
    r = simulate(trace, s.policy, s.capacity, num_rows=s.rows, ways=s.ways, batch_size=s.batch_size)
    row_bytes = 4 * s.dim
    out: dict[str, Any] = {
        "command": "cache-sim", **r.rows()[0], "alpha": s.alpha, "dim": s.dim,
        "bytes_host_to_device": r.misses * row_bytes,
        "bytes_note": "misses x row bytes (fp32); write-backs of dirty victims are not known in a trace "
                      "simulation (they depend on training updating the rows)",
    }  # fmt: skip
    if s.curve:
        out |= _miss_ratio_curves(trace, s.rows)
    return out


def _miss_ratio_curves(trace: np.ndarray, rows: int) -> dict[str, Any]:
    """LRU's and OPT's miss ratios at :data:`CURVE_POINTS` log-spaced cache sizes."""
    from recnotebooks.cache.simulate import lru_mrc, opt_mrc

    sizes = np.unique(np.geomspace(1, rows, CURVE_POINTS).round().astype(np.int64))
    lru, opt = lru_mrc(trace, rows), opt_mrc(trace, sizes, rows)
    curve = [
        {
            "capacity": int(c),
            "cache_fraction": int(c) / rows,
            "lru_miss_ratio": lru.at(int(c)),
            "opt_miss_ratio": opt.at(int(c)),
            "source": "simulated",
        }
        for c in sizes
    ]
    return {"curve": curve, "curve_seconds": {"lru_all_sizes": lru.seconds, "opt": opt.seconds}}


def cache_sim_lines(r: dict[str, Any]) -> Iterator[str]:
    """``recnb cache-sim``'s text."""
    yield (
        f"SIMULATED: {r['policy']} cache of {r['capacity']:,} rows ({r['cache_fraction']:.2%} of "
        f"{r['num_rows']:,}), Zipf({r['alpha']:g}) trace of {r['requests']:,} ids, "
        f"batch size {r['batch_size']}"
    )
    yield (
        f"  hit rate      {r['hit_rate']:.4f}   ({r['hits']:,} hits, {r['misses']:,} misses, "
        f"{r['evictions']:,} evictions, {r['bypass']:,} bypassed)"
    )
    if r["policy"] == "setassoc":
        yield (
            f"  conflict misses {r['conflict_misses']:,} ({r['ways']} ways; a fully associative LRU "
            "hits them)"
        )
    yield f"  speed         {r['ids_per_s'] / 1e6:.1f}M ids/s"
    yield f"  bytes moved   {r['bytes_host_to_device'] / 1e6:,.1f} MB host->device (dim {r['dim']}, fp32)"
    yield f"  - {r['bytes_note']}"
    if "curve" in r:
        yield "  miss-ratio curve:   capacity   fraction        LRU        OPT"
        for c in r["curve"]:
            yield (
                f"                   {c['capacity']:>10,} {c['cache_fraction']:>10.4%} "
                f"{c['lru_miss_ratio']:>10.4f} {c['opt_miss_ratio']:>10.4f}"
            )


def run(s: CacheSimSettings) -> Report:
    """``recnb cache-sim``: its report; bad settings are a :class:`CLIError`."""
    try:
        return Report(cache_sim(s), printer(cache_sim_lines))
    except (ValueError, TypeError) as e:
        raise CLIError(str(e)) from None


def run_cache_sim(args: argparse.Namespace) -> int:
    """Run ``recnb cache-sim`` from its parsed arguments: prints the report (or JSON); 2 and a
    one-line message on bad settings."""
    s = as_given(CacheSimSettings, args)
    try:
        report = run(s)
    except CLIError as e:
        print(f"recnb cache-sim: error: {e}", file=sys.stderr)
        return 2
    return emit(report, s.json)
