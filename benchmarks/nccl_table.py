"""NCCL's own cost model beside published nccl-tests figures: per system and message size, the
algorithm/protocol the model ran (forced where the published run forced one), the modeled and the
published bus bandwidth, and the error. Every figure is **modeled** beside **published**; nothing
is measured here and nothing is fitted (:mod:`recnotebooks.perf.nccl_tests`).

    python benchmarks/nccl_table.py            # sizes from 1 MiB, the target's range
    python benchmarks/nccl_table.py --all      # and the small messages
"""

from __future__ import annotations

import argparse

from recnotebooks.checks import format_bytes
from recnotebooks.perf.components.nccl import NCCL_RELEASE
from recnotebooks.perf.nccl_tests import nccl_tests_table
from recnotebooks.published.nccl_tests import NCCL_TESTS

TARGET = 0.25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="include sizes below 1 MiB")
    args = parser.parse_args()
    rows = nccl_tests_table(1.0 if args.all else float(1 << 20))
    print(
        f"NCCL {NCCL_RELEASE} tuning model (its pick), NVLS as its kernels run (the run's release) "
        "vs published nccl-tests all_reduce bus bandwidth (GB/s)"
    )
    print(f"{'system':24s} {'ranks':>5s} {'size':>10s} {'algorithm/protocol':30s} {'modeled':>8s} "
          f"{'published':>9s} {'error':>7s} {'us model':>9s} {'us publ.':>9s}")  # fmt: skip
    for r in rows:
        algo = f"{r.algorithm}/{r.protocol}" + (" (forced)" if r.forced else "")
        flag = "" if abs(r.error) <= TARGET or r.nbytes < (1 << 20) else "  > 25%"
        print(f"{r.key:24s} {r.ranks:5d} {format_bytes(r.nbytes):>10s} {algo:30s} {r.modeled_busbw:8.1f} "
              f"{r.published_busbw:9.1f} {r.error:+7.0%} {r.modeled_seconds * 1e6:9.1f} "
              f"{r.published_seconds * 1e6:9.1f}{flag}")  # fmt: skip
    big = [r for r in rows if r.nbytes >= (1 << 20)]
    hits = sum(abs(r.error) <= TARGET for r in big)
    print(f"\nwithin {TARGET:.0%} at >= 1 MiB: {hits} of {len(big)} sizes")
    print("\nsources:")
    for t in NCCL_TESTS:
        print(f"  {t.key}: {t.system}; NCCL {t.nccl}; {t.date}; {t.source}")


if __name__ == "__main__":
    main()
