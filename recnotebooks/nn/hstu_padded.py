"""HSTU on **padded** batches: the common way, the same model as :mod:`recnotebooks.nn.hstu`.

A padded implementation stores every history of a batch at the batch's longest length ``N``:
``(B, N, dim)`` tokens, one masked attention over all of them (``(B, heads, N, N)`` weights,
the padding and the future masked to zero). It computes what the jagged layers compute at the
real positions and throws the rest away: the projections see ``B x N`` tokens instead of
``sum n_b``, the attention ``B x N^2`` products instead of ``sum n_b^2``. It is here so that a
measurement (:func:`recnotebooks.measure.hstu.measure_hstu_step` with ``padded=True``) and the
speed benchmark (``benchmarks/hstu_step.py``) can time the common way on the *same weights*.

:func:`padded_layer` runs one :class:`~recnotebooks.nn.hstu.HSTULayer` on a padded batch,
:func:`padded_stack` an :class:`~recnotebooks.nn.hstu.HSTU`, and :func:`to_padded` turns a
jagged ``(L, ...)`` tensor into its padded ``(B, N, ...)`` form (zeros at the padding).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from recnotebooks.nn.hstu import HSTU, HSTULayer

__all__ = ["padded_layer", "padded_stack", "to_padded", "valid_positions"]


def valid_positions(lengths: torch.Tensor, n: int) -> torch.Tensor:
    """``(B, n)`` booleans: position ``i`` of history ``b`` is a real event (``i < lengths[b]``)."""
    return torch.arange(n, device=lengths.device)[None, :] < lengths[:, None]


def to_padded(values: torch.Tensor, offsets: torch.Tensor, n: int) -> torch.Tensor:
    """The jagged ``values`` (``(L, ...)``, histories delimited by ``offsets``) padded to ``n``
    positions a history: ``(B, n, ...)``, zeros where a history has no event."""
    lengths = offsets[1:] - offsets[:-1]
    valid = valid_positions(lengths, n)
    index = torch.where(valid, offsets[:-1, None] + torch.arange(n, device=offsets.device)[None, :], 0)
    if len(values) == 0:
        return values.new_zeros((len(lengths), n, *values.shape[1:]))
    out = values[index]
    mask = valid.reshape(*valid.shape, *([1] * (values.ndim - 1)))
    return out * mask.to(out.dtype) if out.is_floating_point() else torch.where(mask, out, 0)


def padded_layer(
    layer: HSTULayer, xp: torch.Tensor, lengths: torch.Tensor, tp: torch.Tensor | None = None
) -> torch.Tensor:
    """One HSTU layer on a padded ``(B, N, dim)`` batch with ``layer``'s weights: ``lengths``
    ``(B,)`` real events a history, ``tp`` ``(B, N)`` their timestamps (or ``None``). Rows at
    padded positions hold values nobody reads."""
    b, n, _ = xp.shape
    h, dq, dv = layer.heads, layer.qk_dim, layer.v_dim
    u, v, q, k = F.silu(layer.uvqk(F.layer_norm(xp, [layer.dim], eps=layer.eps))).split(
        [h * dv, h * dv, h * dq, h * dq], dim=-1
    )
    scores = torch.einsum("bihd,bjhd->bhij", q.reshape(b, n, h, dq), k.reshape(b, n, h, dq)) / math.sqrt(dq)
    if layer.bias is not None:
        scores = scores + layer.bias.batched(tp, lengths, n)[:, None]
    i = torch.arange(n, device=xp.device)
    mask = (i[None, :, None] >= i[None, None, :]) & (i[None, None, :] < lengths[:, None, None])
    weights = F.silu(scores) * (mask[:, None] / layer.max_len)
    attn = torch.einsum("bhij,bjhd->bihd", weights, v.reshape(b, n, h, dv)).reshape(b, n, h * dv)
    return xp + layer.out(F.layer_norm(attn, [h * dv], eps=layer.eps) * u)


def padded_stack(
    stack: HSTU, xp: torch.Tensor, lengths: torch.Tensor, tp: torch.Tensor | None = None
) -> torch.Tensor:
    """Every layer of ``stack`` on a padded batch (see :func:`padded_layer`)."""
    for layer in stack.layers:
        xp = padded_layer(layer, xp, lengths, tp)
    return xp
