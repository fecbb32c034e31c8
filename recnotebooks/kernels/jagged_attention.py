"""HSTU's attention over jagged histories, fast: histories of like length run as one batch.

The readable path (:func:`recnotebooks.nn.hstu.hstu_attention`) runs one small attention per
history: exact, no padding, but one round of operator calls per user, which on a CPU costs
more than the arithmetic for short histories. A padded implementation (the common way) pads
every history to the longest and runs one big batch: few calls, but at Yambda-shaped lengths
(median 54, mean 96, a tail to 512) most of its ``B N^2`` attention products are padding.

:func:`bucketed_attention` does both halves of the job well: it sorts histories into
**buckets** whose padded length ``P`` is the history's length rounded up to a step of at
least 8 and at most a quarter of the length (so a bucket pads at most about 25%), gathers
each bucket's tokens into ``(b, P, heads, d)`` tensors, runs the attention of the whole bucket
in three batched operations, and scatters the outputs back to the jagged rows. The buckets are
planned once a batch (:func:`plan`) and every layer of a stack runs on them, as it reuses what
they derive once (the relative bias's time buckets). A batch takes
about ``4 log2(longest / 8)`` buckets, whatever its size. Results equal the readable path's
up to float rounding (``tests/test_hstu.py`` runs both); ``RECNB_FUSED=0`` switches it off, as
it does the fused optimizers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

__all__ = ["Bucket", "BucketPlan", "bucketed_attention", "buckets", "can_run", "plan"]

#: Shortest padding step: lengths are rounded up to a multiple of at least this.
MIN_STEP = 8


def can_run(q: torch.Tensor) -> bool:
    """Whether :func:`bucketed_attention` runs: it is on (``RECNB_FUSED`` is not ``0``) and the
    batch has tokens."""
    return os.environ.get("RECNB_FUSED", "1") != "0" and q.shape[0] > 0


def padded_length(n: int) -> int:
    """``n`` rounded up to a multiple of ``max(MIN_STEP, 2^floor(log2 n) / 4)``."""
    step = max(MIN_STEP, (1 << max(n, 1).bit_length() - 1) // 4)
    return -(-n // step) * step


def buckets(lengths: list[int]) -> dict[int, list[int]]:
    """Padded length -> the histories (indices into ``lengths``) padded to it; empty
    histories are in none."""
    out: dict[int, list[int]] = {}
    for b, n in enumerate(lengths):
        if n:
            out.setdefault(padded_length(n), []).append(b)
    return out


@dataclass
class Bucket:
    """The histories of one padded length ``p``: their lengths ``n`` ``(b,)``, the row of each
    of their tokens ``tok`` ``(b, P)`` (padding points at row 0), ``flat`` (the same, flat),
    ``valid`` (the real tokens), their ``times`` ``(b, P)`` (or ``None``), and ``derived``: what
    the layers compute from these once and share (a relative bias's time buckets)."""

    p: int
    n: torch.Tensor
    tok: torch.Tensor
    flat: torch.Tensor
    valid: torch.Tensor
    times: torch.Tensor | None
    derived: dict[object, torch.Tensor] = field(default_factory=dict)


@dataclass
class BucketPlan:
    """A batch's histories bucketed once, for every layer of a stack: the buckets, the rows
    their real tokens fill (in that order) and the causal mask of the longest."""

    buckets: list[Bucket]
    rows: torch.Tensor
    causal: torch.Tensor


def plan(offsets: torch.Tensor, timestamps: torch.Tensor | None = None) -> BucketPlan:
    """The buckets of the histories ``offsets`` delimits (see the module docstring)."""
    lengths = offsets[1:] - offsets[:-1]
    out, rows = [], []
    for p, members in buckets(lengths.tolist()).items():
        index = torch.tensor(members, device=offsets.device)
        n = lengths[index]
        pos = torch.arange(p, device=offsets.device)
        valid = pos[None, :] < n[:, None]  # (b, P)
        tok = torch.where(valid, offsets[index][:, None] + pos[None, :], 0)
        flat = tok.reshape(-1)  # index_select: its backward (index_add) is the fast one on a CPU
        times = None if timestamps is None else timestamps.index_select(0, flat).view(tok.shape)
        out.append(Bucket(p, n, tok, flat, valid, times))
        rows.append(tok[valid])
    size = padded_length(int(lengths.max())) if len(lengths) else 0
    causal = torch.ones(size, size, device=offsets.device).tril()
    empty = torch.zeros(0, dtype=torch.int64, device=offsets.device)
    return BucketPlan(out, torch.cat(rows) if rows else empty, causal)


def bucketed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    batch: BucketPlan,
    max_len: int,
    bias: Callable[[Bucket], torch.Tensor] | None = None,
) -> torch.Tensor:
    """:func:`recnotebooks.nn.hstu.hstu_attention`, bucket by bucket (see the module docstring),
    over the buckets of :func:`plan`. ``bias(bucket)`` gives a bucket's ``(b, P, P)`` relative
    bias (:meth:`recnotebooks.nn.hstu.RelativeAttentionBias.for_bucket`)."""
    alpha = 1.0 / math.sqrt(q.shape[-1])
    values = []
    for b in batch.buckets:
        qb, kb, vb = (t.index_select(0, b.flat).view(*b.tok.shape, *t.shape[1:]) for t in (q, k, v))
        scores = torch.einsum("bihd,bjhd->bhij", qb, kb) * alpha
        if bias is not None:
            scores = scores + bias(b)[:, None]
        # a kept row i < n reads keys j <= i < n only: the causal mask keeps out the padding too
        weights = F.silu(scores) * (batch.causal[: b.p, : b.p] / max_len)
        values.append(torch.einsum("bhij,bjhd->bihd", weights, vb)[b.valid])
    result = v.new_zeros(q.shape[0], v.shape[1], v.shape[2])
    if not values:
        return result
    return result.index_copy(0, batch.rows, torch.cat(values))
