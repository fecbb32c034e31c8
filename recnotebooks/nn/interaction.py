"""Feature interactions of DLRM: pairwise dot products (:class:`DotInteraction`),
concatenation (:class:`CatInteraction`) or DCN-V2's low-rank cross network over the
concatenation (:class:`DCNInteraction`, :class:`LowRankCrossNet`)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from recnotebooks.checks import check_fits_memory, check_int, check_module_device, show

__all__ = ["DotInteraction", "CatInteraction", "DCNInteraction", "LowRankCrossNet", "make_interaction",
           "pair_indices", "pairwise_dots"]  # fmt: skip


class _PairwiseDots(torch.autograd.Function):
    """The pair products ``vec(X X^T)[pairs]`` with a hand-written backward ``dX = (G + G^T) X``.

    ``G + G^T`` is the pooled gradient scattered into both triangles (one ``index_add_``; a
    diagonal pair adds twice). Autograd's generic bmm backward takes slow strided paths on
    CPU; since ``X X^T`` is symmetric, one contiguous batched GEMM gives the input gradient.
    Under autocast the gradient may arrive in bf16 beside fp32 ``X``: the GEMM runs in the
    gradient's dtype.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, pairs: torch.Tensor, both: torch.Tensor) -> torch.Tensor:
        b, f, _ = x.shape
        z = torch.bmm(x, x.transpose(1, 2)).view(b, f * f)
        ctx.save_for_backward(x, both)
        return z.index_select(1, pairs)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
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
        return concat_features(dense, sparse)


def concat_features(dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
    """The dense vector ``(B, Dd)`` and the pooled embeddings ``(B, T, D)`` side by side:
    ``(B, Dd + T*D)`` (the cat interaction's output, and DCN's ``x_0``)."""
    return torch.cat([dense, sparse.reshape(sparse.shape[0], -1)], dim=1)


class LowRankCrossNet(nn.Module):
    """DCN-V2's cross network with low-rank cross matrices (Wang et al. 2021,
    https://arxiv.org/abs/2008.13535), on ``(B, width)`` inputs:

        x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l,    l = 0 .. num_layers - 1

    ``V_l`` (``down[l]``: width -> rank, no bias) and ``W_l``, ``b_l`` (``up[l]``: rank -> width)
    factor a ``width x width`` cross matrix at rank ``rank``; ``*`` is the elementwise product.
    Each layer keeps the width, so the output is ``(B, width)``. Initialised as TorchRec's
    ``LowRankCrossNet``: Xavier-normal ``V`` and ``W`` (``N(0, sqrt(2 / (width + rank)))``), zero
    biases; ``generator`` draws them (on the CPU, then copied to ``device``).
    """

    def __init__(
        self,
        width: int,
        num_layers: int,
        rank: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        width = check_int("width", width, lo=1)
        num_layers, rank = check_int("num_layers", num_layers, lo=1), check_int("rank", rank, lo=1)
        device = check_module_device("device", device)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point torch.dtype, got {show(dtype)}")
        params = num_layers * (2 * width * rank + width)
        check_fits_memory(
            f"the cross network ({num_layers} layers of width {width}, rank {rank}: {params:,} parameters, "
            f"{dtype})",
            params * dtype.itemsize,
            device,
            hint="use fewer layers, a lower rank or fewer/narrower features",
        )
        std = math.sqrt(2.0 / (width + rank))  # Xavier normal, as TorchRec
        self.down, self.up = nn.ModuleList(), nn.ModuleList()
        for _ in range(num_layers):
            v = nn.Linear(width, rank, bias=False, device=device, dtype=dtype)
            w = nn.Linear(rank, width, device=device, dtype=dtype)
            with torch.no_grad():
                v.weight.copy_(torch.randn(rank, width, generator=generator) * std)
                w.weight.copy_(torch.randn(width, rank, generator=generator) * std)
                w.bias.zero_()
            self.down.append(v)
            self.up.append(w)
        self.width, self.num_layers, self.rank = width, num_layers, rank

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for v, w in zip(self.down, self.up, strict=True):
            x = x0 * w(v(x)) + x  # (B, width): x_0 * (W (V x) + b) + x
        return x


class DCNInteraction(nn.Module):
    """The DLRM-DCNv2 interaction (MLPerf's, TorchRec's ``DLRM_DCN``): the dense vector and all
    pooled embeddings concatenated, ``x_0 = [dense, e_1, ..., e_T]`` of width
    ``Dd + T*D``, through a :class:`LowRankCrossNet`; output ``(B, Dd + T*D)``."""

    def __init__(
        self,
        width: int,
        num_layers: int,
        rank: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.cross = LowRankCrossNet(width, num_layers, rank, device, dtype, generator)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x0 = concat_features(dense, sparse)  # (B, Dd + T*D)
        if x0.shape[1] != self.cross.width:
            raise ValueError(
                f"dense and sparse must concatenate to the cross network's width {self.cross.width}, got "
                f"dense {tuple(dense.shape)} and sparse {tuple(sparse.shape)} (width {x0.shape[1]})"
            )
        return self.cross(x0)


def make_interaction(
    kind: str,
    num_features: int,
    self_interaction: bool = False,
    *,
    width: int | None = None,
    dcn_layers: int = 3,
    dcn_rank: int = 512,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    generator: torch.Generator | None = None,
) -> nn.Module:
    """``"dot"``, ``"cat"`` or ``"dcn"`` (the last needs ``width``, the concatenation's, and takes
    ``dcn_layers`` cross layers of rank ``dcn_rank``, drawn by ``generator`` on ``device``)."""
    if kind == "dot":
        return DotInteraction(num_features, self_interaction)
    if kind == "cat":
        return CatInteraction()
    if kind == "dcn":
        if width is None:
            raise ValueError(
                "width (bottom_mlp[-1] + num_tables x embedding_dim) is needed for 'dcn', got None"
            )
        return DCNInteraction(width, dcn_layers, dcn_rank, device, dtype, generator)
    raise ValueError(f"interaction must be 'dot', 'cat' or 'dcn', got {kind!r}")
