"""``recnb cache-sim`` moved to :mod:`recnotebooks.commands.cache` (the command line's one home);
its names stay importable from here for one release."""

from __future__ import annotations

from recnotebooks.commands.cache import add_cache_sim_parser, cache_sim, run_cache_sim
from recnotebooks.commands.settings import CURVE_POINTS, MAX_IDS

__all__ = ["add_cache_sim_parser", "cache_sim", "run_cache_sim", "CURVE_POINTS", "MAX_IDS"]
