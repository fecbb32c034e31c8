"""HSTU on jagged histories against a padded implementation of the same model, at Yambda-shaped
history lengths (issue 39, item 4).

The model: an HSTU stack as ``hstu_small`` builds it (dim 64, 2 layers, 2 heads of 32, histories
up to 512 events, the relative bias by position and time), on a batch of ``--batch`` histories
drawn by :class:`recnotebooks.data.SyntheticListening` (log-normal lengths with Yambda's shape
scaled by 1/50: median 54, mean 96, capped at 512). A step is the stack's forward and backward
(the gradient of a fixed weighted sum of its outputs), on token embeddings given beforehand.

Timed, in one process, in an order that alternates between rounds (MEASURED here; medians and
ranges over rounds, the 1-minute load average beside them):

* ``jagged``: ours, histories of like length batched (``recnotebooks.kernels.jagged_attention``);
* ``readable``: ours, one history at a time (``RECNB_FUSED=0``'s path);
* ``padded``: the common way, every history padded to the batch's longest: ``(B, N, dim)``
  tensors, one masked attention over all of them (``recnotebooks.nn.hstu_padded``, written from
  the paper's formula; its outputs are checked equal to ours before timing);
* ``bound``: the step's GEMMs (the U, V, Q, K and output projections, forward and backward) and
  its attention products (``Q K^T`` and ``A V`` of every bucket, forward and backward) alone, on
  tensors prepared beforehand: what the step cannot do without.

Targets: padded / jagged >= 1.5x; jagged / bound <= 1.3x. Run: ``python benchmarks/hstu_step.py``
(``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

import torch

from recnotebooks.data.listening import ListeningConfig, SyntheticListening
from recnotebooks.kernels.jagged_attention import buckets
from recnotebooks.nn.hstu import HSTU
from recnotebooks.nn.hstu_padded import padded_layer, to_padded


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=64, help="histories a step")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.batch, args.rounds = 16, 2
    torch.manual_seed(0)
    log = SyntheticListening(ListeningConfig(), args.batch)
    b = log.batch(0)
    model = HSTU(64, num_layers=2, heads=2, max_len=512)
    x = torch.randn(b.num_tokens, 64)
    w = torch.randn(b.num_tokens, 64)
    n = int(b.lengths.max())
    xp, tp, wp = to_padded(x, b.offsets, n), to_padded(b.timestamps, b.offsets, n), to_padded(w, b.offsets, n)
    valid = torch.arange(n)[None, :] < b.lengths[:, None]

    def jagged() -> None:
        xx = x.clone().requires_grad_(True)
        (model(xx, b.offsets, b.timestamps) * w).sum().backward()

    def readable() -> None:
        os.environ["RECNB_FUSED"] = "0"
        try:
            jagged()
        finally:
            os.environ.pop("RECNB_FUSED")

    def padded() -> None:
        y = xp.clone().requires_grad_(True)
        for layer in model.layers:
            y = padded_layer(layer, y, b.lengths, tp)
        (y * wp).sum().backward()

    with torch.no_grad():  # the padded model is the same model
        y = xp
        for layer in model.layers:
            y = padded_layer(layer, y, b.lengths, tp)
        torch.testing.assert_close(y[valid], model(x, b.offsets, b.timestamps), atol=1e-4, rtol=1e-4)
    bound = make_bound(model, x, b.offsets)
    variants: dict[str, Callable[[], None]] = {"jagged": jagged, "readable": readable, "padded": padded,
                                                "bound": bound}  # fmt: skip
    times: dict[str, list[float]] = {k: [] for k in variants}
    for f in variants.values():
        f()  # warm-up
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            t0 = time.perf_counter()
            variants[name]()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    lengths = b.lengths.double()
    out = {
        "histories": args.batch, "tokens": b.num_tokens, "median_length": float(lengths.median()),
        "mean_length": float(lengths.mean()), "longest": n,
        "padding_share": 1 - b.num_tokens / (args.batch * n),
        "attention_products_padded_over_jagged": args.batch * n * n / float((lengths * lengths).sum()),
        "ms": {k: {"median": 1e3 * m, "min": 1e3 * min(v), "max": 1e3 * max(v)}
               for (k, m), v in zip(med.items(), times.values(), strict=True)},
        "padded_over_jagged": med["padded"] / med["jagged"],
        "readable_over_jagged": med["readable"] / med["jagged"],
        "jagged_over_bound": med["jagged"] / med["bound"],
        "load_1min": os.getloadavg()[0], "threads": torch.get_num_threads(), "rounds": args.rounds,
    }  # fmt: skip
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{args.batch} histories, {b.num_tokens:,} events (median {out['median_length']:.0f}, mean "
          f"{out['mean_length']:.0f}, longest {n}); padding would be {out['padding_share']:.0%} "
          "of a padded batch")  # fmt: skip
    for k, s in out["ms"].items():  # type: ignore[union-attr]
        print(f"  {k:9s} {s['median']:8.1f} ms  ({s['min']:.1f}-{s['max']:.1f})  MEASURED")
    print(f"padded / jagged {out['padded_over_jagged']:.2f}x (target >= 1.5x); readable / jagged "
          f"{out['readable_over_jagged']:.2f}x; jagged / bound {out['jagged_over_bound']:.2f}x "
          f"(target <= 1.3x); load {out['load_1min']:.1f} on {os.cpu_count()} cores")  # fmt: skip


def make_bound(model: HSTU, x: torch.Tensor, offsets: torch.Tensor) -> Callable[[], None]:
    """The step's GEMMs and attention products alone, forward and backward, per layer."""
    lengths = (offsets[1:] - offsets[:-1]).tolist()
    plan = buckets(lengths)
    layer = model.layers[0]
    h, dq, dv = layer.heads, layer.qk_dim, layer.v_dim
    g = torch.Generator().manual_seed(1)
    qs = [torch.randn(len(m), h, p, dq, generator=g) for p, m in plan.items()]
    vs = [torch.randn(len(m), h, p, dv, generator=g) for p, m in plan.items()]

    def bound() -> None:
        for layer in model.layers:
            xx = x.clone().requires_grad_(True)
            proj = layer.uvqk(xx)
            for q, v in zip(qs, vs, strict=True):
                qq, vv = q.requires_grad_(True), v.requires_grad_(True)
                a = qq @ qq.transpose(-1, -2)
                (a @ vv).sum().backward()
            (layer.out(proj[:, : h * dv]) * 1.0).sum().backward()

    return bound


if __name__ == "__main__":
    main()
