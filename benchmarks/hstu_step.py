"""HSTU on jagged histories against a padded implementation of the same model, at Yambda-shaped
history lengths (issue 39, item 4).

The histories: ``--batch`` (64) drawn by :class:`recnotebooks.data.SyntheticListening`
(log-normal lengths with Yambda's shape scaled by 1/50: median 57, mean 100, longest 512; 6,391
events). The stack: two HSTU layers at ``--shape``'s widths, ``hstu_small``'s (dim 64, 2 heads of
32, the preset a laptop trains) or MLPerf's DLRMv4's (dim 512, 4 heads of 128,
``recnotebooks.config.hstu``), with the relative bias by position and time. A step is the stack's
forward and backward (the gradient of a fixed weighted sum of its outputs) on token embeddings
given beforehand. Timed in one process, in an order that alternates between rounds (MEASURED):

* ``jagged``: ours, histories of like length batched (``recnotebooks.kernels.jagged_attention``);
* ``readable``: ours, one history at a time (``RECNB_FUSED=0``'s path);
* ``padded``: the common way, every history padded to the batch's longest, one masked attention
  over ``(B, N, dim)`` tensors (``recnotebooks.nn.hstu_padded``, written from the paper's formula;
  its outputs are checked equal to ours before timing);
* ``bound``: the step's GEMMs (the U, V, Q, K and output projections) and its attention products
  (``Q K^T`` and ``A V`` of every bucket), forward and backward, alone on tensors prepared
  beforehand: what the step cannot do without.

Targets: padded / jagged >= 1.5x; jagged / bound <= 1.3x, judged at DLRMv4's widths, the model
the issue is about. At ``hstu_small``'s widths the step stays 1.4-1.6x its bound: a score's
passes (the bias added, SiLU and its derivative, the bias's gradient) cost the same at any width,
while the GEMMs that make and read it do as much work as a head has columns, four times less at
32 than at 128. BENCHMARKS.md holds the figures; docs/benchmarks-log.md every run and what was
tried.

Modes: the default (two threads, wall clock; each round read for the cores' placement before and
after it, ``recnotebooks.measure.cores.handoff``, and the medians taken over the rounds whose
cores shared a cache); ``--breakdown`` (the figure of record: one thread, CPU time, so that other
work on the machine does not inflate it; what the jagged step spends over its bound, by
ablation); ``--buckets`` (each bucket's attention against the bound's products for the same
bucket, and what the bound leaves out: a layer's token passes and the batch's plan); ``--quick``
(a smoke run). Run: ``python benchmarks/hstu_step.py --breakdown --shape dlrmv4 --rounds 11``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
import types
from collections.abc import Callable

import torch
import torch.nn.functional as F

from recnotebooks.data.listening import ListeningConfig, SyntheticListening
from recnotebooks.kernels import jagged_attention
from recnotebooks.kernels.jagged_attention import buckets
from recnotebooks.measure.cores import APART_HANDOFF, handoff
from recnotebooks.nn.hstu import HSTU
from recnotebooks.nn.hstu_padded import padded_layer, to_padded

#: The layers' widths, ``(dim, heads, columns a head)``: ``hstu_small``'s (the preset a laptop
#: trains), and MLPerf's DLRMv4's (``recnotebooks.config.hstu``: dim 512, 4 heads of 128), both
#: two layers on the same histories.
SHAPES = {"hstu_small": (64, 2, 32), "dlrmv4": (512, 4, 128)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=64, help="histories a step")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--breakdown", action="store_true", help="what the jagged step spends over its bound")
    p.add_argument("--buckets", action="store_true", help="each bucket's attention against its bound")
    p.add_argument("--shape", choices=sorted(SHAPES), default="hstu_small", help="the layers' widths")
    args = p.parse_args()
    if args.quick:
        args.batch, args.rounds = 16, 2
    torch.manual_seed(0)
    log = SyntheticListening(ListeningConfig(), args.batch)
    b = log.batch(0)
    dim, heads, head_dim = SHAPES[args.shape]
    model = HSTU(dim, num_layers=2, heads=heads, max_len=512, qk_dim=head_dim, v_dim=head_dim)
    x = torch.randn(b.num_tokens, dim)
    w = torch.randn(b.num_tokens, dim)
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
    widths = f"{args.shape}'s widths (dim {dim}, {heads} heads of {head_dim}), two layers"
    if args.buckets or args.breakdown:
        print(f"{widths}; {args.batch} histories, {b.num_tokens:,} events")
    if args.buckets:
        by_bucket(model, x, w, b.offsets, b.timestamps, args.rounds)
        return
    if args.breakdown:
        breakdown(model, x, w, b.offsets, b.timestamps, bound, args.rounds)
        return
    variants: dict[str, Callable[[], None]] = {"jagged": jagged, "readable": readable, "padded": padded,
                                                "bound": bound}  # fmt: skip
    times: dict[str, list[float]] = {k: [] for k in variants}
    for f in variants.values():
        f()  # warm-up
    apart: list[bool] = []  # each round: the cores read sharing no cache before or after it
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        before = handoff(3)
        for name in order:
            t0 = time.perf_counter()
            variants[name]()
            times[name].append(time.perf_counter() - t0)
        apart.append(max(before, handoff(3)) >= APART_HANDOFF)
    # the rounds with the cores sharing a cache, where any were (a VM's host may place them apart)
    kept = [i for i, a in enumerate(apart) if not a] or list(range(args.rounds))
    med = {k: statistics.median(v[i] for i in kept) for k, v in times.items()}
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
        "rounds_apart": sum(apart), "rounds_kept": len(kept),
        "jagged_over_bound_all_rounds": statistics.median(times["jagged"])
        / statistics.median(times["bound"]),
        "apart": apart, "jagged_ms": [1e3 * t for t in times["jagged"]],
        "bound_ms": [1e3 * t for t in times["bound"]],
    }  # fmt: skip
    out["shape"] = args.shape
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{widths}; {args.batch} histories, {b.num_tokens:,} events (median "
          f"{out['median_length']:.0f}, mean {out['mean_length']:.0f}, longest {n}); padding would be "
          f"{out['padding_share']:.0%} "
          "of a padded batch")  # fmt: skip
    for k, s in out["ms"].items():  # type: ignore[union-attr]
        print(f"  {k:9s} {s['median']:8.1f} ms  ({s['min']:.1f}-{s['max']:.1f})  MEASURED")
    print(f"padded / jagged {out['padded_over_jagged']:.2f}x (target >= 1.5x); readable / jagged "
          f"{out['readable_over_jagged']:.2f}x; jagged / bound {out['jagged_over_bound']:.2f}x "
          f"(target <= 1.3x, judged at dlrmv4's widths); load {out['load_1min']:.1f} on "
          f"{os.cpu_count()} cores; medians of {len(kept)} rounds, {sum(apart)} left out: the cores "
          "shared no cache")  # fmt: skip


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


def breakdown(
    model: HSTU,
    x: torch.Tensor,
    w: torch.Tensor,
    offsets: torch.Tensor,
    timestamps: torch.Tensor,
    bound: Callable[[], None],
    rounds: int,
) -> None:
    """The jagged step's time over its bound, by ablation in one process: the step, then with
    its plan made beforehand, then also without the silu of the scores (identity) or without
    the relative bias. One thread, CPU time of this process (what other loads on the machine
    do not inflate), the least of ``rounds``."""
    torch.set_num_threads(1)
    made = jagged_attention.plan(offsets, timestamps)

    def step(plan: jagged_attention.BucketPlan | None = None) -> None:
        y = x.clone().requires_grad_(True)
        if plan is None:
            out = model(y, offsets, timestamps)
        else:
            out = y
            for layer in model.layers:
                out = layer(out, offsets, timestamps, plan)
        (out * w).sum().backward()

    def no_silu() -> None:
        real = jagged_attention.F, jagged_attention.silu_backward_
        jagged_attention.F = types.SimpleNamespace(silu=lambda t: t)  # type: ignore[assignment]
        jagged_attention.silu_backward_ = lambda grad, scores: grad
        try:
            step(made)
        finally:
            jagged_attention.F, jagged_attention.silu_backward_ = real

    def no_bias() -> None:
        biases = [layer.bias for layer in model.layers]
        for layer in model.layers:
            layer.bias = None
        try:
            step(made)
        finally:
            for layer, bias in zip(model.layers, biases, strict=True):
                layer.bias = bias

    variants = {"step": step, "planned": lambda: step(made), "no_silu": no_silu, "no_bias": no_bias,
                "bound": bound}  # fmt: skip
    m = _least_cpu(variants, rounds)
    parts = {"the batch's checks and plan (buckets, time buckets, bias index)": m["step"] - m["planned"],
             "silu of the scores, forward and backward": m["planned"] - m["no_silu"],
             "the relative bias: its lookup, add and gradient": m["planned"] - m["no_bias"]}  # fmt: skip
    parts["the rest: gathers, the layers' (L, dim) elementwise work, autograd"] = (
        m["step"] - m["bound"] - sum(parts.values())
    )
    print(f"jagged step {m['step']:.1f} ms, bound {m['bound']:.1f} ms (1 thread, CPU time, least of "
          f"{rounds}): jagged / bound {m['step'] / m['bound']:.2f}x; over the bound, MEASURED:")  # fmt: skip
    for k, v in parts.items():
        print(f"  {v:6.1f} ms  {v / m['bound']:.2f} of the bound  {k}")


def _least_cpu(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Milliseconds of CPU time of each of ``fns``, the least of ``rounds``, in an order that
    alternates between rounds, after two warm-up calls each."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for f in [*fns.values(), *fns.values()]:
        f()
    for r in range(rounds):
        for name in list(fns) if r % 2 == 0 else reversed(list(fns)):
            t0 = time.process_time()
            fns[name]()
            times[name].append(time.process_time() - t0)
    return {k: 1e3 * min(v) for k, v in times.items()}


def by_bucket(
    model: HSTU,
    x: torch.Tensor,
    w: torch.Tensor,
    offsets: torch.Tensor,
    timestamps: torch.Tensor,
    rounds: int,
) -> None:
    """Where the jagged step loses to its bound, part by part (one thread, CPU time, the least of
    ``rounds``): each bucket's attention (the kernel's forward and backward of one layer, with the
    relative bias) against the bound's products for the same bucket (``Q K^T`` and ``A V``,
    forward and backward), each timed alone on data of its own; then what the bound leaves out
    entirely: the batch's checks, plan and bias index (once a step) and one layer's token passes
    (its two layer norms, the projection's SiLU, the gate and the residual, forward and
    backward, with the few sums that give them a gradient)."""
    from recnotebooks.kernels.allocator import keep_freed_memory
    from recnotebooks.nn.hstu import _check_batch

    torch.set_num_threads(1)
    keep_freed_memory()  # as the step does: freed buffers reused, not faulted in anew each call
    made = jagged_attention.plan(offsets, timestamps)
    layer = model.layers[0]
    assert layer.bias is not None
    table, index_of = layer.bias.lookup(True)
    table = table.detach()
    h, dq, dv, length = layer.heads, layer.qk_dim, layer.v_dim, len(x)
    alpha, inv_n = 1 / math.sqrt(dq), 1 / layer.max_len  # the layer's own scale factors
    g = torch.Generator().manual_seed(2)
    rows, total = [], {"step": 0.0, "bound": 0.0}
    for bk in made.buckets:
        n, p = len(bk.n), bk.p
        q, k, v = (torch.randn(n, h, p, e, generator=g) for e in (dq, dq, dv))
        grad, out, index = torch.randn(n, h, p, dv, generator=g), torch.empty(n, h, p, dv), index_of(bk)

        def step(q=q, k=k, v=v, grad=grad, out=out, index=index) -> None:  # type: ignore[no-untyped-def]
            scores, weights = jagged_attention._bucket_forward(q, k, v, table, index, alpha, inv_n, out)
            grads = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
            saved = (q, k, v, scores, weights, index)
            jagged_attention._bucket_backward(saved, grad, alpha, inv_n, grads, torch.zeros(table.numel()))

        def bound(q=q, v=v) -> None:  # type: ignore[no-untyped-def]
            qq, vv = q.clone().requires_grad_(True), v.clone().requires_grad_(True)
            (qq @ qq.transpose(-1, -2) @ vv).sum().backward()

        m = _least_cpu({"step": step, "bound": bound}, rounds)
        rows.append((p, n, n * h * p * p, m["step"], m["bound"]))
        total = {k: total[k] + m[k] for k in total}
    proj, attn = torch.randn(length, 2 * h * dv + 2 * h * dq), torch.randn(length, h * dv)
    split = [h * dv, h * dv, h * dq, h * dq]

    def token_passes() -> None:
        xx, pp, aa = (t.clone().requires_grad_(True) for t in (x, proj, attn))
        u, *rest = F.silu(pp).split(split, dim=1)
        y = xx + F.layer_norm(aa, [h * dv], eps=layer.eps) * u
        normed = F.layer_norm(xx, [layer.dim], eps=layer.eps)
        (normed.sum() + (y * w).sum() + sum(t.sum() for t in rest)).backward()

    def their_sums() -> None:  # what token_passes spends on its own sums and clones
        xx, pp, aa = (t.clone().requires_grad_(True) for t in (x, proj, attn))
        (xx.sum() + (xx * w).sum() + pp.sum() + aa.sum()).backward()

    def batch_prep() -> None:
        _check_batch(x, offsets, timestamps, model.dim, model.max_len)
        for bk in jagged_attention.plan(offsets, timestamps).buckets:
            index_of(bk)

    m = _least_cpu({"tokens": token_passes, "sums": their_sums, "prep": batch_prep}, rounds)
    print("one layer's attention, bucket by bucket (1 thread, CPU time, least of "
          f"{rounds}), MEASURED:")  # fmt: skip
    for p, n, elems, s, bnd in sorted(rows):
        print(f"  P {p:4d}  {n:3d} histories  {elems:9,d} weights  kernel {s:7.3f} ms  bound {bnd:7.3f} ms  "
              f"{s / bnd:.2f}x")  # fmt: skip
    print(f"  all buckets: kernel {total['step']:.1f} ms, bound {total['bound']:.1f} ms: "
          f"{total['step'] / total['bound']:.2f}x")  # fmt: skip
    print(f"one layer's token passes, forward and backward: {m['tokens'] - m['sums']:.1f} ms "
          f"({m['tokens']:.1f} less {m['sums']:.1f} for their sums); the batch's checks, plan and "
          f"bias index: {m['prep']:.1f} ms a step")  # fmt: skip


if __name__ == "__main__":
    main()
