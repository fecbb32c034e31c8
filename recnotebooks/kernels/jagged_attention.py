"""HSTU's attention over jagged histories, fast: histories of like length run as one batch.

The readable path (:func:`recnotebooks.nn.hstu.hstu_attention`) runs one small attention per
history: exact, no padding, but one round of operator calls per user, which on a CPU costs
more than the arithmetic for short histories. A padded implementation (the common way) pads
every history to the longest and runs one big batch: few calls, but at Yambda-shaped lengths
(median 54, mean 96, a tail to 512) most of its ``B N^2`` attention products are padding.

:func:`bucketed_attention` does both halves of the job well: it sorts histories into
**buckets** whose padded length ``P`` is the history's length rounded up to a step of at
least 8 and at most a quarter of the length (so a bucket pads at most about 25%), gathers
the tokens of every bucket at once into ``(b, heads, P, d)`` blocks (one ``index_select`` a
tensor), runs the attention of each bucket in a few batched operations, and gathers the
outputs back to the jagged rows; all of it one autograd node (:class:`JaggedAttention`), whose
backward gathers the gradients back the same way (``index_select``, not a scatter). The
buckets are planned
once a batch (:func:`plan`) and every layer of a stack runs on them, as it reuses what they
derive once (the relative bias's lookup index, time buckets included). A batch takes about
``4 log2(longest / 8)`` buckets, whatever its size.

A bucket's attention is ``silu(alpha Q K^T + rab) V / N`` with no pass of its own for what a
readable version multiplies or adds in (:class:`BucketAttention`, an autograd Function with
its own backward): ``alpha`` and ``1 / N`` are the GEMMs' scale factors, the bias is the
score GEMM's addend (``baddbmm``: one lookup into a table of every ``position[d] + time[t]``
sum, :meth:`recnotebooks.nn.hstu.RelativeAttentionBias.lookup`), and the causal mask is
:data:`MASKED` in that table, whose ``silu`` is 0. Its backward keeps the scores and weights
of the forward, takes ``silu``'s derivative in place and the bias's gradient as one
``index_add`` (into one table for all the buckets of a layer). Results equal the readable
path's up to float rounding (``tests/test_hstu.py`` runs both); ``RECNB_FUSED=0`` switches it
off, as it does the fused optimizers. The scores are allocated every step, so the kernel keeps
glibc from handing their memory back between steps (:mod:`recnotebooks.kernels.allocator`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from recnotebooks.kernels.allocator import keep_freed_memory
from recnotebooks.sparse import MIN_STEP, buckets, padded_length  # the bucketing rule's home (perf prices it)

__all__ = [
    "MASKED",
    "MIN_STEP",
    "Bucket",
    "BucketAttention",
    "BucketPlan",
    "JaggedAttention",
    "bucketed_attention",
    "buckets",
    "can_run",
    "log2_buckets",
    "padded_length",
    "plan",
    "silu_backward_",
]

#: What the causal mask adds above the diagonal, in place of a multiply by 0: ``exp(1e30)``
#: overflows to ``inf`` in float32, bfloat16 and float64, so ``silu(-1e30) = -1e30 / (1 + inf)``
#: is 0, and so is its derivative ``sigmoid (1 + s (1 - sigmoid))``: the mask costs no pass.
MASKED = -1e30


def can_run(q: torch.Tensor) -> bool:
    """Whether :func:`bucketed_attention` runs: it is on (``RECNB_FUSED`` is not ``0``), the
    batch has tokens, and their precision holds :data:`MASKED` (not float16's)."""
    on = os.environ.get("RECNB_FUSED", "1") != "0"
    return on and q.shape[0] > 0 and torch.finfo(q.dtype).max > -MASKED


def log2_buckets(gaps: torch.Tensor, num_buckets: int) -> torch.Tensor:
    """:func:`recnotebooks.nn.hstu.time_buckets` read off the float64 exponent bits:
    ``max(|gap|, 1)``, capped at ``2^num_buckets``, is ``m 2^e`` with ``1 <= m < 2``, and
    ``e = floor(log2)`` is bits 52-62 less 1023. Exact (no ``log2`` rounding), one third of
    the time on a CPU."""
    g = gaps.abs().to(torch.float64).clamp_(1, 2.0**num_buckets)
    return g.view(torch.int64).bitwise_right_shift_(52).sub_(1023)


@dataclass
class Bucket:
    """The histories of one padded length ``p``: their lengths ``n`` ``(b,)``, where their
    tokens start in the plan's gathered rows (``start``), their ``times`` ``(b, P)`` (or
    ``None``), and ``derived``: what the layers compute from these once and share (a relative
    bias's time buckets)."""

    p: int
    n: torch.Tensor
    start: int
    times: torch.Tensor | None
    derived: dict[object, torch.Tensor] = field(default_factory=dict)


@dataclass
class BucketPlan:
    """A batch's histories bucketed once, for every layer of a stack: the buckets; ``tokens``,
    the row of each of their ``T`` padded tokens, bucket after bucket, history after history
    (padding points at row 0); for each of the ``L`` rows, the slot where its history starts
    among them (``first``), its position in its history (``col``) and its bucket's length
    (``width``); the additive causal ``mask`` of the longest (0 where ``j <= i``,
    :data:`MASKED` above), and ``derived``: indices the layers derive once (by number of heads)."""

    buckets: list[Bucket]
    tokens: torch.Tensor
    first: torch.Tensor
    col: torch.Tensor
    width: torch.Tensor
    mask: torch.Tensor
    derived: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    padded: dict[int, torch.Tensor] = field(default_factory=dict)

    def head_rows(self, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The gather of ``(L * heads, d)`` rows (token-major) into ``(T * heads, d)`` rows, laid
        out bucket by bucket as ``(b, heads, P, d)``; and its inverse, the ``L * heads`` rows
        back from there."""
        if heads not in self.derived:
            head = torch.arange(heads, device=self.tokens.device)
            gather = [
                (self.tokens[b.start : b.start + len(b.n) * b.p].view(-1, 1, b.p) * heads + head[:, None])
                for b in self.buckets
            ]
            back = heads * self.first + self.col
            slots = (back[:, None] + head[None, :] * self.width[:, None]).reshape(-1)
            self.derived[heads] = (
                torch.cat([g.reshape(-1) for g in gather]) if gather else self.tokens,
                slots,
            )
        return self.derived[heads]

    def padding(self, heads: int) -> torch.Tensor:
        """The rows of :meth:`head_rows`' ``(T * heads, d)`` layout that hold padding (no
        token's: what its inverse leaves out)."""
        if heads not in self.padded:
            real = torch.zeros(len(self.tokens) * heads, dtype=torch.bool, device=self.tokens.device)
            real[self.head_rows(heads)[1]] = True
            self.padded[heads] = (~real).nonzero().squeeze(1)
        return self.padded[heads]


def plan(offsets: torch.Tensor, timestamps: torch.Tensor | None = None) -> BucketPlan:
    """The buckets of the histories ``offsets`` delimits (see the module docstring): every
    padded slot of every bucket at once (its history ``h``, its position ``pos``), each
    bucket a slice of them."""
    lengths = offsets[1:] - offsets[:-1]
    device = offsets.device
    groups = buckets(lengths.tolist())
    order = torch.tensor([m for ms in groups.values() for m in ms], dtype=torch.int64, device=device)
    widths = torch.tensor([p for p, ms in groups.items() for _ in ms], dtype=torch.int64, device=device)
    n, starts = lengths[order], widths.cumsum(0) - widths  # a history's length, its first slot
    h = torch.repeat_interleave(widths)  # the history of each of the T slots
    pos = torch.arange(len(h), device=device) - starts[h]
    valid = pos < n[h]
    tokens = torch.where(valid, offsets[order][h] + pos, 0)
    real = tokens[valid]
    first, col, width = (torch.zeros(int(offsets[-1]), dtype=torch.int64, device=device) for _ in range(3))
    first[real], col[real], width[real] = starts[h][valid], pos[valid], widths[h][valid]
    times = None if timestamps is None else timestamps.index_select(0, tokens)
    out, start, i = [], 0, 0
    for p, members in groups.items():
        b = len(members)
        held = None if times is None else times[start : start + b * p].view(b, p)
        out.append(Bucket(p, n[i : i + b], start, held))
        start, i = start + b * p, i + b
    size = padded_length(int(lengths.max())) if len(lengths) else 0
    mask = torch.full((size, size), MASKED, device=device).triu(1)
    return BucketPlan(out, tokens, first, col, width, mask)


def silu_backward_(grad: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """``grad * silu'(scores)``, written over ``grad`` (one pass, no new buffer)."""
    return torch.ops.aten.silu_backward.grad_input(grad, scores, grad_input=grad)


def _bucket_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    table: torch.Tensor,
    index: torch.Tensor,
    alpha: float,
    inv_n: float,
    out: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One bucket's ``silu(alpha Q K^T + table[index]) V / N`` written into ``out`` (``v``'s
    shape); returns the scores ``S`` and weights ``silu(S)`` its backward reads."""
    b, heads, p, d = q.shape
    scores = torch.empty(b, heads, p, p, dtype=q.dtype, device=q.device)
    scores.copy_(table.index_select(0, index.reshape(-1)).view(index.shape)[:, None])
    scores = scores.view(-1, p, p)
    scores.baddbmm_(q.reshape(-1, p, d), k.reshape(-1, p, d).transpose(1, 2), alpha=alpha)
    weights = F.silu(scores)
    v3 = v.reshape(-1, p, v.shape[-1])
    torch.baddbmm(v3, weights, v3, beta=0, alpha=inv_n, out=out.view(v3.shape))
    return scores, weights


def _bucket_backward(
    saved: tuple[torch.Tensor, ...],
    grad: torch.Tensor,
    alpha: float,
    inv_n: float,
    grads: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    dtable: torch.Tensor | None,
) -> None:
    """:func:`_bucket_forward`'s gradients, written into ``grads`` (``dq, dk, dv``, the shapes of
    ``q, k, v``) and added into ``dtable`` (``None``: not wanted). ``saved``: ``q, k, v``,
    the scores, the weights and the bias index of the forward."""
    q, k, v, scores, weights, index = saved
    b, heads, p, d = q.shape
    g, q3, k3 = grad.reshape(-1, p, v.shape[-1]), q.reshape(-1, p, d), k.reshape(-1, p, d)
    dq, dk, dv = (t.view(-1, p, t.shape[-1]) for t in grads)
    torch.baddbmm(g, weights.transpose(1, 2), g, beta=0, alpha=inv_n, out=dv)
    ds = silu_backward_(
        torch.baddbmm(scores, g, v.reshape(-1, p, v.shape[-1]).transpose(1, 2), beta=0, alpha=inv_n),
        scores,
    )
    torch.baddbmm(q3, ds, k3, beta=0, alpha=alpha, out=dq)
    torch.baddbmm(k3, ds.transpose(1, 2), q3, beta=0, alpha=alpha, out=dk)
    if dtable is None:
        return
    per = ds.view(b, heads, p, p)  # summed over the heads by adds (a CPU's sum(1) is slower)
    per = per[:, 0] if heads == 1 else torch.add(per[:, 0], per[:, 1])
    for head in range(2, heads):
        per.add_(ds.view(b, heads, p, p)[:, head])
    if index.shape[0] == 1:
        per = per.sum(0, keepdim=True)
    # accumulated in the table's precision (float32 for a bfloat16 model's float32 bias)
    dtable.index_add_(0, index.reshape(-1), per.reshape(-1).to(dtable.dtype))


class BucketAttention(torch.autograd.Function):
    """One bucket's ``silu(alpha Q K^T + table[index]) V / N`` with its own backward:
    ``alpha`` and ``1 / N`` are the GEMMs' own scale factors and the bias lookup their addend
    (``baddbmm``), none a pass of its own; the scores ``S`` and weights ``silu(S)`` are kept
    from the forward; ``silu``'s derivative is taken in place in the buffer of ``dA``
    (:func:`silu_backward_`), and the bias's gradient is one ``index_add`` of ``dS`` summed over
    the heads. ``q``, ``k``: ``(b, heads, P, dq)``; ``v``: ``(b, heads, P, dv)``; ``table``:
    1-D, any float dtype (its gradient comes back in it); ``index``: ``(b, P, P)`` or
    ``(1, P, P)`` (shared by the bucket's histories), integers; ``alpha``, ``inv_n``: floats.
    :class:`JaggedAttention` runs the same for every bucket of a batch, in one autograd node."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        table: torch.Tensor,
        index: torch.Tensor,
        alpha: float,
        inv_n: float,
    ) -> torch.Tensor:
        out = torch.empty(v.shape, dtype=v.dtype, device=v.device)
        scores, weights = _bucket_forward(q, k, v, table, index, alpha, inv_n, out)
        ctx.save_for_backward(q, k, v, scores, weights, index)
        ctx.table, ctx.alpha, ctx.inv_n = (table.numel(), table.dtype), alpha, inv_n  # type: ignore[attr-defined]
        return out

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        saved = ctx.saved_tensors  # type: ignore[attr-defined]
        grads = tuple(torch.empty_like(t) for t in saved[:3])
        size, dtype = ctx.table  # type: ignore[attr-defined]
        wanted = ctx.needs_input_grad[3]  # type: ignore[attr-defined]
        dtable = torch.zeros(size, dtype=dtype, device=grad.device) if wanted else None
        _bucket_backward(saved, grad, ctx.alpha, ctx.inv_n, grads, dtable)  # type: ignore[attr-defined]
        return *grads, dtable, None, None, None


def _mask_index(batch: BucketPlan) -> Callable[[Bucket], torch.Tensor]:
    """A bucket's index into ``[0, MASKED]``: the causal mask alone, ``(1, P, P)``."""
    return lambda b: (batch.mask[None, : b.p, : b.p] != 0).to(torch.int32)


class JaggedAttention(torch.autograd.Function):
    """:func:`bucketed_attention`'s work as one autograd node: the gathers of ``q``, ``k``, ``v``
    into the buckets' ``(b, heads, P, d)`` blocks, every bucket's :class:`BucketAttention`, and
    the outputs' gather back to the jagged rows. Its backward writes each bucket's gradients
    into one buffer a tensor and the bias's into one table, and gathers them back to the rows
    the same way (:meth:`BucketPlan.head_rows`' inverse; the output's gradient is gathered into
    the blocks with 0 at padding, :meth:`BucketPlan.padding`): no per-bucket autograd nodes,
    no scatters, no concatenations. Arguments: ``q``, ``k`` ``(L, heads, dq)``, ``v``
    ``(L, heads, dv)``, ``table`` and ``index_of`` as :func:`bucketed_attention`'s ``bias``, the
    plan ``batch``, ``alpha`` and ``inv_n``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        table: torch.Tensor,
        batch: BucketPlan,
        index_of: Callable[[Bucket], torch.Tensor],
        alpha: float,
        inv_n: float,
    ) -> torch.Tensor:
        length, heads, dq = q.shape
        dv = v.shape[-1]
        gather, slots = batch.head_rows(heads)
        # one gather per tensor, into (b, heads, P, d) blocks
        qs, ks, vs = (t.reshape(-1, t.shape[-1]).index_select(0, gather) for t in (q, k, v))
        out = torch.empty(vs.shape, dtype=v.dtype, device=v.device)
        sizes = [len(b.n) * b.p * heads for b in batch.buckets]
        saved, blocks = [], (t.split(sizes) for t in (qs, ks, vs, out))
        for b, qb, kb, vb, ob in zip(batch.buckets, *blocks, strict=True):
            index = index_of(b)
            block = (qb.view(-1, heads, b.p, dq), kb.view(-1, heads, b.p, dq), vb.view(-1, heads, b.p, dv))
            saved.append((*block, *_bucket_forward(*block, table, index, alpha, inv_n, ob), index))
        # saved as autograd saves (freed after the backward, checked against in-place changes)
        ctx.save_for_backward(*(t for bucket in saved for t in bucket))
        ctx.batch, ctx.sizes = batch, sizes  # type: ignore[attr-defined]
        ctx.table, ctx.alpha, ctx.inv_n = (table.numel(), table.dtype), alpha, inv_n  # type: ignore[attr-defined]
        return out.index_select(0, slots).view(length, heads, dv)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        batch, sizes, flat = ctx.batch, ctx.sizes, ctx.saved_tensors  # type: ignore[attr-defined]
        saved = [flat[i : i + 6] for i in range(0, len(flat), 6)]  # q, k, v, scores, weights, index
        length, heads, dv = grad.shape
        dq = saved[0][0].shape[-1]
        gather, slots = batch.head_rows(heads)
        g = grad.reshape(-1, dv).index_select(0, gather).index_fill_(0, batch.padding(heads), 0)
        grads = [torch.empty(len(gather), d, dtype=grad.dtype, device=grad.device) for d in (dq, dq, dv)]
        size, dtype = ctx.table  # type: ignore[attr-defined]
        wanted = ctx.needs_input_grad[3]  # type: ignore[attr-defined]
        dtable = torch.zeros(size, dtype=dtype, device=grad.device) if wanted else None
        for bucket, gb, *blocks in zip(saved, g.split(sizes), *(t.split(sizes) for t in grads), strict=True):
            _bucket_backward(bucket, gb, ctx.alpha, ctx.inv_n, tuple(blocks), dtable)  # type: ignore[attr-defined]
        dq_, dk_, dv_ = (t.index_select(0, slots).view(length, heads, -1) for t in grads)
        return dq_, dk_, dv_, dtable, None, None, None, None


def bucketed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    batch: BucketPlan,
    max_len: int,
    bias: tuple[torch.Tensor, Callable[[Bucket], torch.Tensor]] | None = None,
) -> torch.Tensor:
    """:func:`recnotebooks.nn.hstu.hstu_attention`, bucket by bucket (see the module docstring),
    over the buckets of :func:`plan`. ``bias``: the relative bias as a lookup, a ``table`` and
    ``index_of(bucket)``, its index ``(b, P, P)`` or ``(1, P, P)`` into the table, pointing at
    :data:`MASKED` above the diagonal (:meth:`recnotebooks.nn.hstu.RelativeAttentionBias.lookup`);
    without, the table is ``[0, MASKED]``."""
    if not batch.buckets:
        return v.new_zeros(q.shape[0], q.shape[1], v.shape[-1])
    keep_freed_memory()  # the scores of every step reused, not faulted in anew (kernels/allocator.py)
    table, index_of = bias if bias is not None else (q.new_tensor([0.0, MASKED]), _mask_index(batch))
    out = JaggedAttention.apply(q, k, v, table, batch, index_of, 1.0 / math.sqrt(q.shape[-1]), 1.0 / max_len)
    return out  # type: ignore[no-any-return]
