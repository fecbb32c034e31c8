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
in three batched operations, and scatters the outputs back to the jagged rows. A batch takes
about ``4 log2(longest / 8)`` buckets, whatever its size. Results equal the readable path's
up to float rounding (``tests/test_hstu.py`` runs both); ``RECNB_FUSED=0`` switches it off, as
it does the fused optimizers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import torch
import torch.nn.functional as F

__all__ = ["bucketed_attention", "buckets", "can_run"]

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


def bucketed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    offsets: torch.Tensor,
    max_len: int,
    bias: Callable[[torch.Tensor | None, torch.Tensor, int], torch.Tensor] | None = None,
    timestamps: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`recnotebooks.nn.hstu.hstu_attention`, bucket by bucket (see the module docstring).

    ``bias(padded_timestamps or None, lengths, P)`` gives a bucket's ``(b, P, P)`` relative
    bias (:meth:`recnotebooks.nn.hstu.RelativeAttentionBias.batched`)."""
    alpha = 1.0 / math.sqrt(q.shape[-1])
    lengths = offsets[1:] - offsets[:-1]
    rows, values = [], []
    longest = int(lengths.max())
    causal = torch.ones(padded_length(longest), padded_length(longest), device=q.device).tril() / max_len
    for p, members in buckets(lengths.tolist()).items():
        index = torch.tensor(members, device=offsets.device)
        n = lengths[index]
        pos = torch.arange(p, device=offsets.device)
        valid = pos[None, :] < n[:, None]  # (b, P)
        tok = torch.where(valid, offsets[index][:, None] + pos[None, :], 0)
        flat = tok.reshape(-1)  # index_select: its backward (index_add) is the fast one on a CPU
        qb, kb, vb = (t.index_select(0, flat).view(*tok.shape, *t.shape[1:]) for t in (q, k, v))
        scores = torch.einsum("bihd,bjhd->bhij", qb, kb) * alpha
        if bias is not None:
            times = None if timestamps is None else timestamps.index_select(0, flat).view(tok.shape)
            scores = scores + bias(times, n, p)[:, None]
        # a kept row i < n reads keys j <= i < n only: the causal mask keeps out the padding too
        weights = F.silu(scores) * causal[:p, :p]
        out = torch.einsum("bhij,bjhd->bihd", weights, vb)
        rows.append(tok[valid])
        values.append(out[valid])
    result = v.new_zeros(q.shape[0], v.shape[1], v.shape[2])
    if not rows:
        return result
    return result.index_copy(0, torch.cat(rows), torch.cat(values))
