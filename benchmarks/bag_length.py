"""The bag-length effect of CPU embedding gathers: the same lookups pooled in short and long bags.

Uniform random rows of a 64 MB table, 2^20 lookups per call, ``torch.nn.functional.embedding_bag``
(what our forward calls) in bags of 1 to 128, for rows of 64 to 512 bytes: the milliseconds per
call (median of 9 after a warm-up), and a least-squares fit ``lookups x g + bags x c`` (the rows'
bandwidth and a per-bag cost; the residual says how far one line is from the data). The cost
model's ``Hardware.bag_seconds_per_byte`` is the per-bag cost of bags of 1 against bags of 128 of
256 B rows (``recnotebooks.measure.calibrate._bag_cost``), per byte of the row.

Run: ``python benchmarks/bag_length.py``.
"""

from __future__ import annotations

import time

import numpy as np
import torch

LOOKUPS = 2**20
TABLE_BYTES = 64 * 2**20
BAGS = (1, 2, 4, 8, 16, 32, 64, 128)


def median_seconds(fn, reps: int = 9) -> float:  # type: ignore[no-untyped-def]
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main() -> None:
    print(f"torch threads {torch.get_num_threads()}; {LOOKUPS:,} lookups of a {TABLE_BYTES >> 20} MB table")
    print("row     " + "".join(f"{'bag ' + str(b):>10}" for b in BAGS) + "   per bag (1 vs 128)")
    for dim in (16, 32, 64, 128):
        w = torch.randn(TABLE_BYTES // (dim * 4), dim)
        ids = torch.randint(0, w.shape[0], (LOOKUPS,))
        times = []
        for bag in BAGS:
            offs = torch.arange(0, LOOKUPS, bag)
            times.append(
                median_seconds(
                    lambda o=offs, i=ids, w=w: torch.nn.functional.embedding_bag(i, w, o, mode="sum")
                )
            )
        per_bag = (times[0] - times[-1]) / (LOOKUPS - LOOKUPS / BAGS[-1])
        print(
            f"{dim * 4:>4} B " + "".join(f"{t * 1e3:8.1f} ms" for t in times) + f"   {per_bag * 1e9:.0f} ns"
        )


if __name__ == "__main__":
    main()
