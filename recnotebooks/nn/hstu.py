"""HSTU: the Hierarchical Sequential Transduction Unit of generative recommenders (Zhai et al.,
"Actions Speak Louder than Words", ICML 2024, https://arxiv.org/abs/2402.17152), the layer
MLPerf Training's DLRMv4 stacks.

A generative recommender reads each user's history as a sequence of tokens (one embedding
per event) and predicts, at every position, the next action. The histories have different
lengths, so a batch is **jagged**: ``values`` holds every token of every user one after the
other, ``(L, dim)``, and ``offsets`` (``B + 1`` running sums of the lengths) says where each
user's history starts; user ``b``'s tokens are ``values[offsets[b]:offsets[b + 1]]``. No
padding is stored or computed.

One HSTU layer, for the tokens ``x`` of one history of ``n`` events (Section 3.1 of the paper)::

    U, V, Q, K = split(silu(LayerNorm(x) W1 + b1))          one projection, four outputs
    A[i, j]    = silu(alpha Q_i . K_j + rab(i, j)) / N       for j <= i (causal), else 0
    y          = x + W2 (LayerNorm(A V) * U) + b2            gated by U, plus the residual

per head (``heads`` of them, each with its own slices of Q, K, V and U). There is no softmax:
the attention weights are pointwise, each divided by ``N``, the configured maximum history
length (as the paper's code does), so a token's output does not depend on the other histories
in its batch or on how long they are. ``alpha`` is ``1 / sqrt(qk_dim)``. ``rab`` is the
relative attention bias: a learned weight per distance ``i - j`` in positions plus a learned
weight per log2-spaced bucket of the time between event ``j`` and the event position ``i``
predicts (the next event's timestamp; the last event's own for the last position).

The causal mask is what makes the cost ``sum_u n_u^2 / 2`` rather than ``n_u^2``: position
``i`` attends to ``i + 1`` positions. The cost of a batch is set by the **distribution** of
history lengths, not its mean: one user with 4,096 events costs as much attention as 256
users with 256.

This file is the readable path: :func:`hstu_attention` loops over the histories of the batch,
one small attention per user, in plain PyTorch. The fast path, one guarded early return at its
top, runs histories of like length as one batch (:mod:`recnotebooks.kernels.jagged_attention`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from recnotebooks.checks import (
    check_int,
    check_jagged_offsets,
    check_jagged_timestamps,
    check_module_device,
    show,
)
from recnotebooks.kernels import jagged_attention
from recnotebooks.kernels.jagged_attention import padded_length

__all__ = ["HSTU", "HSTULayer", "RelativeAttentionBias", "hstu_attention", "time_buckets"]

#: Number of log2-spaced time-gap buckets of the relative attention bias: gaps of 0-1 s,
#: 2-3 s, 4-7 s, ... up to 2^31 s (about 68 years) and beyond in the last.
TIME_BUCKETS = 32


def time_buckets(gaps: torch.Tensor, num_buckets: int = TIME_BUCKETS) -> torch.Tensor:
    """The bucket of each time gap (seconds): ``floor(log2(max(|gap|, 1)))``, at most
    ``num_buckets`` (so ``num_buckets + 1`` buckets in all)."""
    g = gaps.abs().to(torch.float64).clamp_(min=1)  # clamped as floats: a CPU's int64 clamp is slow
    return g.log2_().floor_().clamp_(max=num_buckets).to(torch.int64)


def _take(weight: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``weight[index]`` for a 1-D ``weight``, through ``gather`` (whose backward, a scatter-add,
    is several times faster on a CPU than indexing's for many indices into few weights)."""
    return weight.gather(0, index.reshape(-1)).view(index.shape)


def padded_time_buckets(
    timestamps: torch.Tensor,
    lengths: torch.Tensor,
    num_buckets: int,
    bucket_of: Callable[[torch.Tensor, int], torch.Tensor] = time_buckets,
) -> torch.Tensor:
    """:func:`time_buckets` of ``t_next(i) - t(j)`` for ``b`` histories padded to ``P``
    (``timestamps`` ``(b, P)``, ``lengths`` ``(b,)``): ``(b, P, P)``; ``t_next(i)`` is the next
    event's time, the last real event's own from there on. ``bucket_of``: how (the fast path
    passes :func:`recnotebooks.kernels.jagged_attention.log2_buckets`)."""
    p = timestamps.shape[1]
    last = (lengths - 1).clamp(min=0)[:, None]
    target = torch.cat([timestamps[:, 1:], timestamps[:, -1:]], dim=1)
    i = torch.arange(p, device=timestamps.device)[None, :]
    target = torch.where(i >= last, timestamps.gather(1, last).expand_as(timestamps), target)
    return bucket_of(target[:, :, None] - timestamps[:, None, :], num_buckets)


def _padded_gaps(timestamps: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``t_next(i) - t(j)`` for ``b`` histories padded to ``P`` (``timestamps`` ``(b, P)``):
    ``(b, P, P)``, in ``timestamps``' dtype (:func:`padded_time_buckets` before bucketing)."""
    return padded_time_buckets(timestamps, lengths, 0, lambda gaps, _: gaps)


class RelativeAttentionBias(nn.Module):
    """``rab(i, j)`` of one layer: ``position[i - j] + time[bucket(t_next(i) - t(j))]``.

    ``position`` has one weight per distance ``0 .. max_len - 1`` (a causal layer never looks
    ahead); ``time`` one per :func:`time_buckets` bucket. Both start at ``N(0, 0.02)`` as in the
    paper's code."""

    def __init__(
        self, max_len: int, num_buckets: int = TIME_BUCKETS, generator: torch.Generator | None = None
    ):
        super().__init__()
        self.max_len = check_int("max_len", max_len, lo=1)
        self.num_buckets = check_int("num_buckets", num_buckets, lo=1)
        self.position = nn.Parameter(torch.empty(self.max_len).normal_(0, 0.02, generator=generator))
        self.time = nn.Parameter(torch.empty(self.num_buckets + 1).normal_(0, 0.02, generator=generator))
        self._offset_cache: dict[tuple[int, int, torch.device], torch.Tensor] = {}  # _offsets'

    def forward(self, timestamps: torch.Tensor | None, n: int) -> torch.Tensor:
        """The ``(n, n)`` bias of one history of ``n`` events with these ``timestamps`` (or
        positions alone when ``None``). Entries above the diagonal are never used."""
        bias = self.positions(n)
        return bias if timestamps is None else bias + self.times(timestamps)

    def positions(self, n: int) -> torch.Tensor:
        """``position[i - j]`` for ``i, j < n`` (0 above the diagonal's distance): the same
        for every history, so the top-left ``(m, m)`` block is a shorter history's."""
        i = torch.arange(n, device=self.position.device)
        return _take(
            self.position, (i[:, None] - i[None, :]).clamp(min=0, max=self.max_len - 1)
        )  # padding: any

    def batched(self, timestamps: torch.Tensor | None, lengths: torch.Tensor, p: int) -> torch.Tensor:
        """The ``(b, P, P)`` bias of ``b`` histories padded to ``P`` (``timestamps`` ``(b, P)``
        or ``None``, ``lengths`` ``(b,)``); entries at padded positions are never used."""
        bias = self.positions(p).expand(len(lengths), p, p)
        if timestamps is None:
            return bias
        return bias + _take(self.time, padded_time_buckets(timestamps, lengths, self.num_buckets))

    def lookup(self, timed: bool) -> tuple[torch.Tensor, Callable[[jagged_attention.Bucket], torch.Tensor]]:
        """:meth:`batched` for the buckets of a plan of
        :func:`recnotebooks.kernels.jagged_attention.plan`, as a lookup: a ``table`` of every
        ``position[d] + time[t]`` sum (``position[d]`` alone if not ``timed``) followed by
        ``padded_length(max_len) + width``
        :data:`~recnotebooks.kernels.jagged_attention.MASKED` entries, built once a step, and
        ``index_of(bucket)``: the index ``(b, P, P)`` (``(1, P, P)`` untimed) of each entry
        into it, above the diagonal into the masked ones, computed once a batch (the layers
        sharing the plan share it). The masked entries are many, one a distance above the
        diagonal, so that the gradient's ``index_add`` does not add half of every bucket's
        entries into one address, each add waiting for the one before (measured here: 2.6 ms
        against 1.5 ms a layer for the longest bucket of ``benchmarks/hstu_step.py``)."""
        table, width = self.position, 1
        if timed:
            table, width = (self.position[:, None] + self.time).flatten(), self.num_buckets + 1
        masked = table.new_full((padded_length(self.max_len) + width,), jagged_attention.MASKED)
        return torch.cat([table, masked]), self.bucket_index

    def bucket_index(self, bucket: jagged_attention.Bucket) -> torch.Tensor:
        """The index of :meth:`lookup`'s table for one bucket, kept in ``bucket.derived``."""
        key = ("relative_bias", self.max_len, self.num_buckets)
        if key not in bucket.derived:
            bucket.derived[key] = self._bucket_index(bucket)
        return bucket.derived[key]

    def _bucket_index(self, bucket: jagged_attention.Bucket) -> torch.Tensor:
        """Where :meth:`lookup`'s table is read: ``d * (num_buckets + 1) + t`` (``d``
        alone without timestamps), ``max_len * (num_buckets + 1) + j - i - 1 + t`` above the
        diagonal (a masked entry; :meth:`_offsets`). The gaps ``t_next(i) - t(j)`` are taken in
        float32 where exact (a history's events spanning under 2^24 s, about 194 days, counted
        from its first), else in float64 (timestamps under 2^53), else in int64; their buckets
        are read off the floats' exponent bits
        (:func:`~recnotebooks.kernels.jagged_attention.log2_buckets`; no ``abs``: where used,
        ``j <= i``, the gaps are non-negative)."""
        p = bucket.p
        if bucket.times is None:
            return self._offsets(p, 1, 0)[:p, :p].contiguous()[None]
        width, times = self.num_buckets + 1, bucket.times
        if times.is_floating_point():
            buckets = jagged_attention.log2_buckets(_padded_gaps(times, bucket.n), self.num_buckets)
            return buckets.add_(self._offsets(p, width, 0)[:p, :p]).to(torch.int32)
        pad = torch.arange(p, device=times.device)[None, :] >= bucket.n[:, None]
        rel = (times - times[:, :1]).masked_fill_(pad, 0)
        span = int(rel.max()) if rel.numel() else 0
        for dtype, bits, mantissa, top in (
            (torch.float32, torch.int32, 23, 127),
            (torch.float64, torch.int64, 52, 1023),
        ):
            if span < 2 ** (mantissa + 1):
                gaps = _padded_gaps(rel.to(dtype), bucket.n).clamp_(1, 2.0 ** min(self.num_buckets, top))
                exponent = gaps.view(bits).bitwise_right_shift_(mantissa)
                return exponent.add_(self._offsets(p, width, top)[:p, :p]).to(torch.int32)
        buckets = padded_time_buckets(times, bucket.n, self.num_buckets)
        return buckets.add_(self._offsets(p, width, 0)[:p, :p]).to(torch.int32)

    def _offsets(self, p: int, width: int, top: int) -> torch.Tensor:
        """``min(i - j, max_len - 1) * width - top`` for ``j <= i``, ``max_len * width + j - i - 1
        - top`` above the diagonal (a masked entry a distance: see :meth:`lookup`): int32, at
        least ``(p, p)`` (its top-left block is a shorter bucket's), kept between batches (the
        largest seen, at most ``padded_length(max_len)^2`` entries)."""
        key = (width, top, self.position.device)
        have = self._offset_cache.get(key)
        if have is None or len(have) < p:
            i = torch.arange(p, dtype=torch.int32, device=self.position.device)
            d = i[:, None] - i[None, :]
            beyond = (-1 - d).add_(self.max_len * width)  # above the diagonal: a masked entry a distance
            have = torch.where(d < 0, beyond, d.clamp(max=self.max_len - 1).mul_(width)).sub_(top)
            self._offset_cache[key] = have
        return have

    def times(self, timestamps: torch.Tensor) -> torch.Tensor:
        """``time[bucket(t_next(i) - t(j))]`` of one history: ``t_next(i)`` is the timestamp of
        the event position ``i`` predicts (the next one; the last event's own for the last)."""
        target = torch.cat([timestamps[1:], timestamps[-1:]])
        return _take(self.time, time_buckets(target[:, None] - timestamps[None, :], self.num_buckets))


def hstu_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    offsets: torch.Tensor,
    max_len: int,
    bias: RelativeAttentionBias | None = None,
    timestamps: torch.Tensor | None = None,
    plan: jagged_attention.BucketPlan | None = None,
) -> torch.Tensor:
    """HSTU's pointwise causal attention over jagged histories, one history at a time.

    ``q``, ``k``: ``(L, heads, qk_dim)``; ``v``: ``(L, heads, v_dim)``; ``offsets``: ``(B + 1,)``.
    Returns ``(L, heads, v_dim)``: for each history ``silu(alpha Q K^T + rab) / max_len`` under
    the causal mask, times ``V``."""
    if plan is None:  # called on its own (a layer of a stack passes the plan of a checked batch)
        _check_attention(q, k, v, offsets, max_len, timestamps)
    if jagged_attention.can_run(q):  # the same, histories of like length batched: kernels/
        batch = plan if plan is not None else jagged_attention.plan(offsets, timestamps)
        timed = bool(batch.buckets) and batch.buckets[0].times is not None
        return jagged_attention.bucketed_attention(
            q, k, v, batch, max_len, None if bias is None else bias.lookup(timed)
        )
    alpha = 1.0 / math.sqrt(q.shape[-1])
    bounds = list(zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True))
    longest = max(end - start for start, end in bounds)
    causal = torch.ones(longest, longest, device=q.device, dtype=q.dtype).tril() / max_len  # 1/N where j <= i
    positions = bias.positions(longest) if bias is not None else None
    out = []
    for start, end in bounds:
        n = end - start
        scores = torch.einsum("ihd,jhd->hij", q[start:end], k[start:end]) * alpha
        if bias is not None and positions is not None:
            scores = scores + positions[:n, :n]
            if timestamps is not None:
                scores = scores + bias.times(timestamps[start:end])
        out.append(torch.einsum("hij,jhd->ihd", F.silu(scores) * causal[:n, :n], v[start:end]))
    return torch.cat(out)


class HSTULayer(nn.Module):
    """One HSTU layer on jagged histories of tokens of width ``dim`` (see the module docstring).

    ``heads`` attention heads, each with ``qk_dim`` query/key and ``v_dim`` value/gate
    columns (both ``dim // heads`` unless given); ``max_len`` the longest history allowed (the
    attention's divisor ``N``); ``relative_bias`` adds :class:`RelativeAttentionBias`."""

    def __init__(
        self,
        dim: int,
        heads: int,
        max_len: int,
        *,
        qk_dim: int | None = None,
        v_dim: int | None = None,
        relative_bias: bool = True,
        eps: float = 1e-6,
        device: torch.device | str | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.dim = check_int("dim", dim, lo=1)
        self.heads = check_int("heads", heads, lo=1)
        if self.dim % self.heads:
            raise ValueError(f"heads must divide dim ({self.dim}), got heads={self.heads}")
        self.max_len = check_int("max_len", max_len, lo=1)
        self.qk_dim = check_int("qk_dim", qk_dim if qk_dim is not None else dim // heads, lo=1)
        self.v_dim = check_int("v_dim", v_dim if v_dim is not None else dim // heads, lo=1)
        device = check_module_device("device", device)
        self.eps = eps
        hv, hq = self.heads * self.v_dim, self.heads * self.qk_dim
        self.uvqk = nn.Linear(self.dim, 2 * hv + 2 * hq)  # U, V, Q, K in one GEMM
        self.out = nn.Linear(hv, self.dim)
        for linear in (self.uvqk, self.out):
            nn.init.xavier_uniform_(linear.weight, generator=generator)
            nn.init.zeros_(linear.bias)
        self.bias = RelativeAttentionBias(self.max_len, generator=generator) if relative_bias else None
        self.to(device)

    def forward(
        self,
        x: torch.Tensor,
        offsets: torch.Tensor,
        timestamps: torch.Tensor | None = None,
        plan: jagged_attention.BucketPlan | None = None,
    ) -> torch.Tensor:
        """``x``: ``(L, dim)`` tokens of ``B`` histories; ``offsets``: ``(B + 1,)``;
        ``timestamps``: ``(L,)`` seconds, non-decreasing within each history (or ``None``);
        ``plan``: the fast path's buckets of this batch, when a stack planned them once."""
        if plan is None:  # called on its own: check the batch (a stack checked it and planned once)
            _check_batch(x, offsets, timestamps, self.dim, self.max_len)
        hv, hq = self.heads * self.v_dim, self.heads * self.qk_dim
        u, v, q, k = F.silu(self.uvqk(F.layer_norm(x, [self.dim], eps=self.eps))).split(
            [hv, hv, hq, hq], dim=1
        )
        attn = hstu_attention(
            q.reshape(-1, self.heads, self.qk_dim),
            k.reshape(-1, self.heads, self.qk_dim),
            v.reshape(-1, self.heads, self.v_dim),
            offsets,
            self.max_len,
            self.bias,
            timestamps,
            plan,
        ).reshape(-1, hv)
        return x + self.out(F.layer_norm(attn, [hv], eps=self.eps) * u)


class HSTU(nn.Module):
    """A stack of ``num_layers`` :class:`HSTULayer` (MLPerf's DLRMv4: 5 layers, 4 heads,
    ``dim`` 512, 128 columns a head, histories up to 4,096 events).

    ``forward(x, offsets, timestamps)`` checks the jagged batch once (``offsets`` monotone from
    0 to ``len(x)``, no history longer than ``max_len``, ``timestamps`` one per token and
    non-decreasing within each history) and runs the layers; the output has ``x``'s shape."""

    def __init__(
        self,
        dim: int,
        num_layers: int,
        heads: int,
        max_len: int,
        *,
        qk_dim: int | None = None,
        v_dim: int | None = None,
        relative_bias: bool = True,
        device: torch.device | str | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        num_layers = check_int("num_layers", num_layers, lo=1)
        self.layers = nn.ModuleList(
            HSTULayer(dim, heads, max_len, qk_dim=qk_dim, v_dim=v_dim, relative_bias=relative_bias,
                      device=device, generator=generator)
            for _ in range(num_layers)
        )  # fmt: skip
        self.dim, self.max_len = self.layers[0].dim, self.layers[0].max_len

    def forward(
        self, x: torch.Tensor, offsets: torch.Tensor, timestamps: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``(L, dim)`` tokens of the histories ``offsets`` delimits -> ``(L, dim)``."""
        _check_batch(x, offsets, timestamps, self.dim, self.max_len)
        plan = jagged_attention.plan(offsets, timestamps) if jagged_attention.can_run(x) else None
        for layer in self.layers:
            x = layer(x, offsets, timestamps, plan)
        return x


def _check_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    offsets: torch.Tensor,
    max_len: int,
    timestamps: torch.Tensor | None,
) -> None:
    max_len = check_int("max_len", max_len, lo=1)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.ndim != 3 or not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point (L, heads, head_dim) tensor, got {show(t)}")
    if k.shape != q.shape or v.shape[:2] != q.shape[:2]:
        raise ValueError(
            f"q, k and v must hold the same tokens and heads (q and k one shape), got {tuple(q.shape)}, "
            f"{tuple(k.shape)} and {tuple(v.shape)}"
        )
    check_jagged_offsets("offsets", offsets, len(q), max_length=max_len)
    if timestamps is not None:
        check_jagged_timestamps("timestamps", timestamps, offsets)


def _check_batch(
    x: torch.Tensor, offsets: torch.Tensor, timestamps: torch.Tensor | None, dim: int, max_len: int
) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[1] != dim or not x.is_floating_point():
        raise ValueError(f"x must be a floating-point (L, {dim}) tensor of tokens, got {show(x)}")
    check_jagged_offsets("offsets", offsets, len(x), max_length=max_len)
    if timestamps is not None:
        check_jagged_timestamps("timestamps", timestamps, offsets)
