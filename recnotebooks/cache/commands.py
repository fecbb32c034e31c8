"""``recnb cache-sim``: a Zipf trace through a cache policy (or OPT), optionally the miss-ratio curves."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from recnotebooks.checks import check_float, parse_float, parse_int, show

__all__ = ["add_cache_sim_parser", "cache_sim", "run_cache_sim"]

MAX_IDS = 2**31
CURVE_POINTS = 12


def _int(name: str, lo: int = 1, hi: int | None = None) -> Callable[[str], int]:
    """argparse type: an int in ``[lo, hi]`` in ASCII digits (:func:`recnotebooks.checks.parse_int`)."""

    def parse(text: str) -> int:
        try:
            return parse_int(name, text, lo=lo, hi=hi)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _capacity(text: str) -> int | float:
    """``--capacity``: rows (``100000``) or a fraction of the rows (``0.1``), in ASCII digits."""
    try:
        return parse_int("--capacity", text, lo=1)
    except ValueError:
        pass
    try:
        return parse_float("--capacity", text, lo=0.0, hi=1.0, lo_open=True)
    except ValueError:
        raise argparse.ArgumentTypeError(
            "--capacity must be rows (an int >= 1) or a fraction of the rows in (0, 1], in ASCII digits, "
            f"got {show(text)}"
        ) from None


def _alpha(text: str) -> float:
    """``--alpha``: a Zipf exponent in [0, 10] (ASCII)."""
    try:
        return parse_float("--alpha", text, lo=0.0, hi=10.0)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_cache_sim_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add ``cache-sim`` to ``subparsers`` and return its parser."""
    from recnotebooks.cache.simulate import SIM_POLICIES

    p = subparsers.add_parser(
        "cache-sim",
        help="simulated hit rate of an embedding cache on a Zipf trace (LRU, LFU, static, set-assoc, OPT)",
    )
    p.add_argument("--rows", type=_int("--rows", hi=2**28), default=1_000_000, help="table rows (default 1M)")
    p.add_argument(
        "--ids", type=_int("--ids", hi=MAX_IDS), default=1_000_000, help="trace length (default 1M)"
    )
    p.add_argument("--alpha", type=_alpha, default=1.05, help="Zipf exponent of the trace (default 1.05)")
    p.add_argument("--policy", default="lru", choices=SIM_POLICIES, help="replacement policy (default lru)")
    p.add_argument(
        "--capacity", type=_capacity, default=0.1, help="cache rows, or a fraction of --rows (default 0.1)"
    )
    p.add_argument(
        "--ways", type=_int("--ways", hi=MAX_IDS), default=32, help="ways of --policy setassoc (default 32)"
    )
    p.add_argument(
        "--batch-size",
        type=_int("--batch-size", hi=MAX_IDS),
        default=1,
        help="ids per admitted batch (default 1)",
    )
    p.add_argument("--seed", type=_int("--seed", lo=0), default=0, help="trace seed (default 0)")
    p.add_argument(
        "--dim", type=_int("--dim", hi=2**14), default=64, help="embedding dim for bytes moved (fp32)"
    )
    p.add_argument(
        "--curve", action="store_true", help=f"LRU and OPT miss ratios at {CURVE_POINTS} log-spaced sizes"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def cache_sim(args: argparse.Namespace) -> dict[str, Any]:
    """The ``cache-sim`` result as a dict (raises ``ValueError`` for bad settings)."""
    from recnotebooks.cache.simulate import lru_mrc, opt_mrc, simulate, zipf_trace

    check_float("--alpha", args.alpha, lo=0.0, hi=10.0)
    if args.policy != "setassoc" and args.ways != 32:
        raise ValueError(f"--ways applies to --policy setassoc, not {args.policy!r}")
    if isinstance(args.capacity, int) and args.capacity > args.rows:
        raise ValueError(f"--capacity must be at most --rows={args.rows}, got {args.capacity}")
    trace = zipf_trace(args.rows, args.ids, args.alpha, seed=args.seed)
    r = simulate(
        trace, args.policy, args.capacity, num_rows=args.rows, ways=args.ways, batch_size=args.batch_size
    )
    row_bytes = 4 * args.dim
    out: dict[str, Any] = {
        "command": "cache-sim", **r.rows()[0], "alpha": args.alpha, "dim": args.dim,
        "bytes_host_to_device": r.misses * row_bytes,
        "bytes_note": "misses x row bytes (fp32); write-backs of dirty victims are not known in a trace "
                      "simulation (they depend on training updating the rows)",
    }  # fmt: skip
    if args.curve:
        sizes = np.unique(np.geomspace(1, args.rows, CURVE_POINTS).round().astype(np.int64))
        lru, opt = lru_mrc(trace, args.rows), opt_mrc(trace, sizes, args.rows)
        out["curve"] = [
            {
                "capacity": int(c),
                "cache_fraction": int(c) / args.rows,
                "lru_miss_ratio": lru.at(int(c)),
                "opt_miss_ratio": opt.at(int(c)),
                "source": "simulated",
            }
            for c in sizes
        ]
        out["curve_seconds"] = {"lru_all_sizes": lru.seconds, "opt": opt.seconds}
    return out


def _print(r: dict[str, Any]) -> None:
    print(
        f"SIMULATED: {r['policy']} cache of {r['capacity']:,} rows ({r['cache_fraction']:.2%} of "
        f"{r['num_rows']:,}), Zipf({r['alpha']:g}) trace of {r['requests']:,} ids, "
        f"batch size {r['batch_size']}"
    )
    print(
        f"  hit rate      {r['hit_rate']:.4f}   ({r['hits']:,} hits, {r['misses']:,} misses, "
        f"{r['evictions']:,} evictions, {r['bypass']:,} bypassed)"
    )
    if r["policy"] == "setassoc":
        print(
            f"  conflict misses {r['conflict_misses']:,} ({r['ways']} ways; a fully associative LRU "
            "hits them)"
        )
    print(f"  speed         {r['ids_per_s'] / 1e6:.1f}M ids/s")
    print(f"  bytes moved   {r['bytes_host_to_device'] / 1e6:,.1f} MB host->device (dim {r['dim']}, fp32)")
    print(f"  - {r['bytes_note']}")
    if "curve" in r:
        print("  miss-ratio curve:   capacity   fraction        LRU        OPT")
        for c in r["curve"]:
            print(
                f"                   {c['capacity']:>10,} {c['cache_fraction']:>10.4%} "
                f"{c['lru_miss_ratio']:>10.4f} {c['opt_miss_ratio']:>10.4f}"
            )


def run(
    args: argparse.Namespace, error: type[Exception]
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], None]]:
    """``recnb cache-sim`` for :mod:`recnotebooks.cli`: the result and its printer; bad
    settings raise ``error`` (the CLI prints it as one line and exits 2)."""
    try:
        return cache_sim(args), _print
    except (ValueError, TypeError) as e:
        raise error(str(e)) from None


def run_cache_sim(args: argparse.Namespace) -> int:
    """Run ``recnb cache-sim``: prints the report (or JSON); 2 and a one-line message on bad settings."""
    try:
        result = cache_sim(args)
    except (ValueError, TypeError) as e:
        print(f"recnb cache-sim: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        _print(result)
    return 0
