"""Row helpers of the embeddings: segment ids and grouping lookups by row (the plain torch
path of the backward).

Grouping has a CPU fast path: one NumPy SIMD sort of packed (row, position) keys is several
times faster than ``torch.sort`` with indices on CPU. The compiled one-pass kernels (shifting
ids into the fused weight's rows, range checks) and huge pages for big tables live in
:mod:`recnotebooks.kernels.rows`; the fused optimizer update in :mod:`recnotebooks.kernels.fused`.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["segment_ids", "group_by_row"]


def segment_ids(offsets: torch.Tensor, n: int) -> torch.Tensor:
    """Segment number of each of ``n`` elements given ``offsets`` (len segments+1, from 0).

    Empty segments are skipped correctly. Equivalent to
    ``repeat_interleave(arange(segments), diff(offsets))`` but a count-and-cumsum, which is
    several times faster on CPU.
    """
    marks = torch.zeros(n + 1, dtype=torch.int32, device=offsets.device)
    inner = offsets[1:-1].long()
    marks.index_add_(0, inner, torch.ones_like(inner, dtype=torch.int32))
    return torch.cumsum(marks[:n], 0, dtype=torch.int32)


def group_by_row(ids: torch.Tensor, bags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sort lookups by row id: returns ``(rows, counts, order)``.

    ``rows`` are the distinct row ids ascending, ``counts`` how many lookups hit each, and
    ``order`` the lookup positions sorted by row (stable within a row is not guaranteed).
    On CPU the (row, position) pairs are packed into one int64 key and sorted with NumPy's
    SIMD sort instead of an argsort.
    """
    n = ids.numel()
    if ids.device.type == "cpu" and n < 2**32 and (n == 0 or int(ids.max()) < 2**31):
        key = ids.to(torch.int64).bitwise_left_shift(32).bitwise_or_(torch.arange(n, dtype=torch.int64))
        key = torch.from_numpy(np.sort(key.numpy()))
        sorted_ids = key.bitwise_right_shift(32)
        order = key.bitwise_and_(0xFFFFFFFF)
    else:
        sorted_ids, order = torch.sort(ids.to(torch.int64))
    rows, counts = torch.unique_consecutive(sorted_ids, return_counts=True)
    return rows, counts, order
