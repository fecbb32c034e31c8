"""Measured statistics of a cached embedding collection: :class:`CacheStats`.

Counted per table and in total (all counts are *measured* on the run that made them):

* ``calls``: forwards (admissions on the critical path); ``prefetch_calls``: prefetches.
* ``requested``: ids looked up; ``unique``: distinct rows per call, summed.
* ``hits`` / ``misses``: distinct rows resident / not resident when their forward began
  (a row brought in by a prefetch counts as a hit: its copy was off the critical path);
  ``misses`` include ``bypass``: rows the policy did not keep (static cold rows, and for a
  set-associative cache the ``conflict_misses``: a set full of protected rows).
* ``prefetched_misses``: misses a prefetch took off the critical path.
* ``evictions``, ``writebacks`` (dirty rows copied back to the host table), and the bytes
  moved host -> device and device -> host (rows plus their optimizer state).
* ``lookup_hits``: ids (not distinct rows) that hit, for the per-lookup hit rate; and, over
  samples, FAE's fraction of samples *all* of whose lookups hit (Adnan et al., VLDB 2022:
  a sample is trained on the GPU alone only if all its embeddings are hot).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recnotebooks.sparse import JaggedBatch

__all__ = ["CacheStats", "FIELDS"]

FIELDS = (
    "calls",
    "prefetch_calls",
    "requested",
    "unique",
    "hits",
    "misses",
    "bypass",
    "conflict_misses",
    "prefetched_misses",
    "evictions",
    "writebacks",
    "bytes_h2d",
    "bytes_d2h",
    "lookup_hits",
)
_COL = {f: i for i, f in enumerate(FIELDS)}


class CacheStats:
    """Counters of a cache, one row per table (``names``); see the module docstring."""

    def __init__(self, names: Sequence[str], policy: str = "") -> None:
        self.names = tuple(names)
        self.policy = policy
        self.counts = np.zeros((len(self.names), len(FIELDS)), np.int64)
        self.samples = 0
        self.all_hit_samples = 0

    def reset(self) -> None:
        """Set every counter to zero."""
        self.counts[:] = 0
        self.samples = self.all_hit_samples = 0

    def add(self, field: str, per_table: np.ndarray | int) -> None:
        """Add ``per_table`` (one count per table; an ``int`` is added to every table, as for
        ``calls``: each call visits every table)."""
        col = _COL[field]
        if isinstance(per_table, (int, np.integer)):
            self.counts[:, col] += int(per_table)
        else:
            self.counts[:, col] += np.asarray(per_table, np.int64)

    def add_samples(self, samples: int, all_hit: int) -> None:
        """Count ``samples`` samples of which ``all_hit`` had every lookup hit."""
        self.samples += int(samples)
        self.all_hit_samples += int(all_hit)

    def count_call(
        self,
        batch: JaggedBatch,
        table: np.ndarray,
        hit: np.ndarray,
        bypass: np.ndarray,
        inverse: np.ndarray,
        conflicts: bool,
    ) -> None:
        """Count one forward: ``table``, ``hit`` and ``bypass`` per distinct row (sorted),
        ``inverse`` (host int array) the distinct row of each id; ``conflicts``: bypasses are
        conflict misses. Vectorised in NumPy: per-bag miss counts from one cumulative sum."""
        t, b = len(self.names), batch.batch_size
        unique = np.bincount(table, minlength=t)
        hits = np.bincount(table, weights=hit, minlength=t).astype(np.int64)
        byp = np.bincount(table, weights=bypass, minlength=t).astype(np.int64)
        cs = np.zeros(len(inverse) + 1, np.int64)  # missed lookups so far
        np.cumsum(~hit[inverse], out=cs[1:])
        off = batch.offsets().cpu().numpy()
        bag_miss = (cs[off[1:]] - cs[off[:-1]]).reshape(t, b)  # bags are key-major: table x sample
        lengths = np.diff(off[::b]).astype(np.int64)  # ids per table
        self.add("calls", 1)
        self.add("requested", lengths)
        self.add("unique", unique)
        self.add("hits", hits)
        self.add("misses", unique - hits)
        self.add("bypass", byp)
        if conflicts:
            self.add("conflict_misses", byp)
        self.add("lookup_hits", lengths - bag_miss.sum(1))
        # FAE: a sample is all-hit when none of its lookups (in any table) missed
        self.add_samples(b, int(np.count_nonzero(bag_miss.sum(0) == 0)))

    def table(self, name: str) -> dict[str, int]:
        """The counters of one table."""
        return dict(zip(FIELDS, (int(x) for x in self.counts[self.names.index(name)]), strict=True))

    def total(self) -> dict[str, int]:
        """The counters summed over tables (``calls`` counts forwards, not table visits)."""
        tot = self.counts.sum(0)
        out = dict(zip(FIELDS, (int(x) for x in tot), strict=True))
        for f in ("calls", "prefetch_calls"):
            out[f] = int(self.counts[:, _COL[f]].max()) if len(self.names) else 0
        return out

    @staticmethod
    def _rates(c: dict[str, int]) -> dict[str, float]:
        uniq, req = c["unique"], c["requested"]
        return {
            "hit_rate": c["hits"] / uniq if uniq else 0.0,
            "miss_ratio": c["misses"] / uniq if uniq else 0.0,
            "lookup_hit_rate": c["lookup_hits"] / req if req else 0.0,
        }

    @property
    def hit_rate(self) -> float:
        """Distinct-row hit rate over all calls."""
        return self._rates(self.total())["hit_rate"]

    @property
    def lookup_hit_rate(self) -> float:
        """Per-lookup (per-id) hit rate over all calls."""
        return self._rates(self.total())["lookup_hit_rate"]

    @property
    def all_hit_sample_fraction(self) -> float:
        """FAE's fraction of samples whose every lookup hit."""
        return self.all_hit_samples / self.samples if self.samples else 0.0

    def rows(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows for charts: one per table and one with ``table="total"``, each with
        every counter, ``hit_rate``, ``miss_ratio``, ``lookup_hit_rate``, the policy and
        ``source="measured"`` (the total row also has ``all_hit_sample_fraction``)."""
        out: list[dict[str, object]] = []
        for name in self.names:
            c = self.table(name)
            r = self._rates(c)
            out.append({"table": name, "policy": self.policy, **c, **r, "source": "measured", **extra})
        c = self.total()
        r = self._rates(c)
        out.append(
            {
                "table": "total",
                "policy": self.policy,
                **c,
                **r,
                "samples": self.samples,
                "all_hit_sample_fraction": self.all_hit_sample_fraction,
                "source": "measured",
                **extra,
            }
        )
        return out

    def __repr__(self) -> str:
        t = self.total()
        return (
            f"CacheStats(policy={self.policy!r}, calls={t['calls']}, hit_rate={self.hit_rate:.3f}, "
            f"lookup_hit_rate={self.lookup_hit_rate:.3f}, misses={t['misses']}, writebacks={t['writebacks']})"
        )
