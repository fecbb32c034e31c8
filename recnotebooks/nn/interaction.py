"""Feature interactions of DLRM: pairwise dot products (:class:`DotInteraction`) or
concatenation (:class:`CatInteraction`)."""

from __future__ import annotations

import torch
from torch import nn

from recnotebooks.checks import check_int

__all__ = ["DotInteraction", "CatInteraction", "make_interaction", "pair_indices", "pairwise_dots"]


class _PairwiseDots(torch.autograd.Function):
    """The pair products ``vec(X X^T)[pairs]`` with a hand-written backward ``dX = (G + G^T) X``.

    ``G + G^T`` is the pooled gradient scattered into both triangles (one ``index_add_``; a
    diagonal pair adds twice). Autograd's generic bmm backward takes slow strided paths on
    CPU; since ``X X^T`` is symmetric, one contiguous batched GEMM gives the input gradient.
    Under autocast the gradient may arrive in bf16 beside fp32 ``X``: the GEMM runs in the
    gradient's dtype.
    """

    @staticmethod
    def forward(ctx, x, pairs, both):  # type: ignore[no-untyped-def]
        b, f, _ = x.shape
        z = torch.bmm(x, x.transpose(1, 2)).view(b, f * f)
        ctx.save_for_backward(x, both)
        return z.index_select(1, pairs)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        x, both = ctx.saved_tensors
        b, f, _ = x.shape
        g = grad.new_zeros(b, f * f).index_add_(1, both, torch.cat([grad, grad], 1))
        return torch.bmm(g.view(b, f, f), x.to(g.dtype)).to(x.dtype), None, None


def pair_indices(num_features: int, self_interaction: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The flat index ``i * F + j`` of each pair ``(i, j)`` of the lower triangle of ``X X^T``
    (strictly lower unless ``self_interaction``) in the dlrm repo's row-major order, and the
    indices of ``(i, j)`` then ``(j, i)`` for the backward's scatter into both triangles."""
    f = check_int("num_features", num_features, lo=2)
    li, lj = torch.tril_indices(f, f, offset=0 if self_interaction else -1)
    pairs = li * f + lj
    return pairs, torch.cat([pairs, lj * f + li])


def pairwise_dots(x: torch.Tensor, self_interaction: bool = False) -> torch.Tensor:
    """Dot products of the lower-triangle feature pairs of ``x`` (B, F, D): ``(B, P)``."""
    return _PairwiseDots.apply(x, *pair_indices(x.shape[1], self_interaction))


class DotInteraction(nn.Module):
    """Dot products between all pairs of the ``F = num_tables + 1`` feature vectors.

    Input: dense ``(B, D)`` (bottom-MLP output) and sparse ``(B, T, D)`` (pooled
    embeddings). Output: ``(B, D + P)``: the dense vector followed by the ``P`` pair
    products of the strictly lower triangle of ``X X^T`` in row-major order
    (``P = F(F-1)/2``), or of the lower triangle with the diagonal
    (``P = F(F+1)/2``) when ``self_interaction`` is true — the dlrm repo's ordering.
    """

    def __init__(self, num_features: int, self_interaction: bool = False) -> None:
        super().__init__()
        num_features = check_int("num_features", num_features, lo=2)
        self.num_features = num_features
        self.self_interaction = self_interaction
        pairs, both = pair_indices(num_features, self_interaction)  # computed once, not every forward
        self.register_buffer("_pairs", pairs, persistent=False)
        self.register_buffer("_both", both, persistent=False)

    @property
    def num_pairs(self) -> int:
        return int(self._pairs.numel())

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled(dense.device.type):  # AMP covers the MLPs only, as NVIDIA's DLRM:
            with torch.autocast(dense.device.type, enabled=False):  # bf16 dot products lose the signal
                return self.forward(dense.float(), sparse.float())
        x = torch.cat([dense.unsqueeze(1), sparse], dim=1)  # (B, F, D)
        return torch.cat([dense, _PairwiseDots.apply(x, self._pairs, self._both)], dim=1)


class CatInteraction(nn.Module):
    """Concatenate the dense vector and all pooled embeddings: ``(B, Dd + T*D)``."""

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        return torch.cat([dense, sparse.reshape(sparse.shape[0], -1)], dim=1)


def make_interaction(kind: str, num_features: int, self_interaction: bool = False) -> nn.Module:
    """``"dot"`` or ``"cat"``."""
    if kind == "dot":
        return DotInteraction(num_features, self_interaction)
    if kind == "cat":
        return CatInteraction()
    raise ValueError(f"interaction must be 'dot' or 'cat', got {kind!r}")
