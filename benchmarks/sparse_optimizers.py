"""Sparse optimizers: the fused CPU kernels against the readable torch path, for SGD, row-wise
Adagrad and exact (element-wise) Adagrad.

One ``EmbeddingBagCollection`` (the issue's tables: 8 x 1M rows x dim 64) and one optimizer of
each kind on it. Each timed step first records a step's pooled gradients (a forward and
backward over one of a few ``SyntheticCriteo`` batches, Zipf-skewed ids; untimed), then times
``step(count_rows=False)`` as the trainer calls it: through the fused Numba kernel
(``recnotebooks.kernels.fused``) or through the torch path (``row_gradients()`` and the class's
``_update``, ``RECNB_FUSED=0``'s path). Every round times every optimizer on both paths, in an
order that alternates between rounds, all in this process, so the machine's noise hits each
alike; the figures are medians (and ranges) over rounds of each round's times and ratios.

Run: ``python benchmarks/sparse_optimizers.py`` (pooling 1 and 20, batch 2048). ``--quick``
shrinks it for a smoke run; ``--rows`` lowers the memory it takes (the weight, plus exact
Adagrad's state of the same size).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import recnotebooks.kernels.fused as fused
from recnotebooks.config import SPARSE_OPTIMIZERS, DLRMConfig, TableConfig
from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo
from recnotebooks.nn import EmbeddingBagCollection
from recnotebooks.nn.optim import make_sparse_optimizer

OPTIMIZERS = SPARSE_OPTIMIZERS
PATHS = ("fused", "torch")


def _spread(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def run(pooling: float, args: argparse.Namespace) -> dict[str, object]:
    tables = tuple(TableConfig(f"T{i + 1}", args.rows, pooling) for i in range(args.tables))
    cfg = DLRMConfig(13, tables, args.dim, (args.dim,), (1,), name=f"bench_L{pooling:g}")
    data = SyntheticCriteo(cfg, args.batch_size, SyntheticConfig(zipf_exponent=args.zipf), seed=0)
    batches = [data.batch(i).sparse for i in range(args.distinct_batches)]
    ebc = EmbeddingBagCollection(tables, args.dim, seed=0)
    opts = {name: make_sparse_optimizer(name, ebc, 0.01) for name in OPTIMIZERS}
    gen = torch.Generator().manual_seed(0)
    upstream = [torch.randn(args.batch_size, len(tables), args.dim, generator=gen) for _ in batches]
    enabled = fused.ENABLED

    def step(name: str, path: str, i: int) -> float:
        k = i % len(batches)
        (ebc(batches[k]) * upstream[k]).sum().backward()  # the step's pooled gradients, untimed
        fused.ENABLED = path == "fused"
        try:
            t0 = time.perf_counter()
            opts[name].step(count_rows=False)
            return time.perf_counter() - t0
        finally:
            fused.ENABLED = enabled

    pairs = [(n, p) for n in OPTIMIZERS for p in PATHS]
    for i in range(args.warmup):
        for n, p in pairs:
            step(n, p, i)
    times: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
    for r in range(args.rounds):
        for n, p in pairs if r % 2 == 0 else pairs[::-1]:
            times[(n, p)].append(step(n, p, args.warmup + r))
    ids = ebc.global_ids(batches[0]).long()
    out: dict[str, object] = {
        "pooling": pooling,
        "lookups": int(ids.numel()),
        "distinct_rows": int(torch.unique(ids).numel()),
    }
    for n in OPTIMIZERS:
        f, t = times[(n, "fused")], times[(n, "torch")]
        out[n] = {
            "fused_ms": _spread([1e3 * x for x in f]),
            "torch_ms": _spread([1e3 * x for x in t]),
            "torch_over_fused": _spread([b / a for a, b in zip(f, t, strict=True)]),
        }
    for p in PATHS:  # what the state of one float per element costs over one per row, per path
        ex, rw = times[("adagrad", p)], times[("rowwise_adagrad", p)]
        out[f"exact_over_rowwise_{p}"] = _spread([a / b for a, b in zip(ex, rw, strict=True)])
    return out


def _fmt(s: dict[str, float], unit: str = "") -> str:
    return f"{s['median']:.2f}{unit} ({s['min']:.2f}-{s['max']:.2f})"


def report(rows: list[dict], args: argparse.Namespace) -> None:  # type: ignore[type-arg]
    print(
        f"{args.tables} tables x {args.rows:,} rows x dim {args.dim}, batch {args.batch_size}, "
        f"zipf {args.zipf}; "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}; {args.rounds} interleaved rounds; "
        "median (range) over rounds; MEASURED"
    )
    for r in rows:
        print(
            f"\npooling {r['pooling']:g}: {r['lookups']:,} lookups, "
            f"{r['distinct_rows']:,} distinct rows per step"
        )
        print(f"  {'optimizer':<16} {'fused ms':>22} {'torch path ms':>24} {'torch / fused':>22}")
        for n in OPTIMIZERS:
            x = r[n]
            print(
                f"  {n:<16} {_fmt(x['fused_ms']):>22} {_fmt(x['torch_ms']):>24} "
                f"{_fmt(x['torch_over_fused'], 'x'):>22}"
            )
        print(
            f"  exact / row-wise Adagrad: fused {_fmt(r['exact_over_rowwise_fused'], 'x')}, "
            f"torch path {_fmt(r['exact_over_rowwise_torch'], 'x')}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--poolings", type=float, nargs="+", default=[1.0, 20.0])
    p.add_argument("--tables", type=int, default=8)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=2048)
    p.add_argument("--zipf", type=float, default=1.05, help="id popularity skew of the synthetic data")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--distinct-batches", type=int, default=4)
    p.add_argument("--threads", type=int, default=None, help="torch (and Numba) threads; default: torch's")
    p.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.rows, args.batch_size, args.rounds, args.warmup, args.distinct_batches = 10_000, 256, 3, 1, 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    rows = [run(L, args) for L in args.poolings]
    if args.json:
        out = {
            "machine": {"threads": torch.get_num_threads(), "torch": torch.__version__},
            "config": vars(args),
            "results": rows,
        }
        print(json.dumps(out, indent=2))
    else:
        report(rows, args)


if __name__ == "__main__":
    main()
