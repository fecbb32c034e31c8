"""Fused row-wise optimizer kernels: gradient reduction and update in one pass.

GPU embedding libraries (FBGEMM's table-batched embeddings, used by TorchRec) never build
a weight gradient: their backward kernel walks the lookups grouped by row, sums each
row's gradient in registers and applies the optimizer to that row at once. This module is
that kernel for CPUs, written as a readable loop and compiled with Numba:

    for each distinct row r (in parallel):
        g = sum over lookups k of r: coef[k] * pooled_grad[bag[k]]
        SGD:              w[r] -= lr * g
        row-wise Adagrad: s[r] += mean(g**2);  w[r] -= lr * g / (sqrt(s[r]) + eps)

Each row is read and written once and no (rows x dim) gradient is materialised. When
Numba is not installed, or the weights are not float32 on the CPU, :func:`fused_update`
returns False and the optimizers fall back to the unfused torch path (same results up to
float rounding; the tests check both).
"""

from __future__ import annotations

import os

import numpy as np
import torch

from recnotebooks.nn.embedding import LookupGroups

__all__ = ["fused_update", "fused_available"]

try:  # optional accelerator
    import numba
    from numba import njit, prange
except ImportError:  # pragma: no cover - exercised when numba is absent
    numba = None

ENABLED = os.environ.get("RECNB_FUSED", "1") != "0"


def fused_available() -> bool:
    """True when the Numba kernel can run (installed and not disabled by RECNB_FUSED=0)."""
    return numba is not None and ENABLED


if numba is not None:

    @njit(parallel=True, cache=True)
    def _kernel(
        w, grad, rows, seg, order, bags, coef, has_coef, lr, state, adagrad, eps, nchunk
    ):  # pragma: no cover
        n_rows = rows.shape[0]
        dim = w.shape[1]
        step = (n_rows + nchunk - 1) // nchunk
        for c in prange(nchunk):
            acc = np.empty(dim, dtype=np.float32)
            for u in range(c * step, min(n_rows, (c + 1) * step)):
                acc[:] = 0.0
                for k in range(seg[u], seg[u + 1]):
                    p = order[k]
                    b = bags[p]
                    if has_coef:
                        cf = coef[p]
                        for d in range(dim):
                            acc[d] += cf * grad[b, d]
                    else:
                        for d in range(dim):
                            acc[d] += grad[b, d]
                r = rows[u]
                if adagrad:
                    sq = np.float32(0.0)
                    for d in range(dim):
                        sq += acc[d] * acc[d]
                    s = state[r] + sq / dim
                    state[r] = s
                    scale = lr / (np.sqrt(s) + eps)
                else:
                    scale = lr
                for d in range(dim):
                    w[r, d] -= scale * acc[d]


def fused_update(
    weight: torch.Tensor,
    groups: LookupGroups,
    lr: float,
    state: torch.Tensor | None = None,
    eps: float = 0.0,
) -> bool:
    """Apply SGD (``state=None``) or row-wise Adagrad (``state`` = per-row accumulator) to
    the rows in ``groups``; returns False (doing nothing) when the kernel cannot run."""
    if not fused_available() or weight.device.type != "cpu" or weight.dtype != torch.float32:
        return False
    if groups.grad.dtype != torch.float32 or not weight.is_contiguous():
        return False
    coef = groups.coef
    has_coef = coef is not None
    coef_np = coef.to(torch.float32).contiguous().numpy() if has_coef else np.zeros(1, np.float32)
    st = state.numpy() if state is not None else np.zeros(1, np.float32)
    threads = max(1, torch.get_num_threads())
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    _kernel(
        weight.detach().numpy(), groups.grad.numpy(), groups.rows.numpy(), groups.seg.numpy(),
        groups.order.numpy(), groups.bags.numpy(), coef_np, has_coef, np.float32(lr), st,
        state is not None, np.float32(eps), 4 * threads,
    )  # fmt: skip
    return True
