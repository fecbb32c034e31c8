"""Sparse optimizers for :class:`~recnotebooks.nn.EmbeddingBagCollection`.

They read and write only the rows looked up since the last step (the rows returned by
``EmbeddingBagCollection.row_gradients``, each with its gradient summed over the batch's
lookups of it), never the whole table — the property that makes huge embedding tables
trainable.

* :class:`SparseSGD`: ``w[r] -= lr * g[r]``.
* :class:`RowWiseAdagrad`: one accumulator per row (as FBGEMM's row-wise Adagrad),
  ``s[r] += mean(g[r]**2)``; ``w[r] -= lr * g[r] / (sqrt(s[r]) + eps)``.
* :class:`ExactAdagrad`: one accumulator per element, ``s[r] += g[r]**2``;
  ``w[r] -= lr * g[r] / (sqrt(s[r]) + eps)``, element by element: ``torch.optim.Adagrad``'s
  update, which MLPerf's DLRM-DCNv2 reference applies to its tables (TorchRec runs it as FBGEMM's
  ``EXACT_ADAGRAD``; https://github.com/mlcommons/training/blob/master/recommendation_v2/torchrec_dlrm/dlrm_main.py).
  Its state is the size of the table: ``embedding_dim`` floats per row where row-wise Adagrad
  keeps one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from recnotebooks.checks import check_bool, check_choice, check_float
from recnotebooks.config import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS
from recnotebooks.kernels import fused
from recnotebooks.nn.embedding import EmbeddingBagCollection, PendingLookups

__all__ = [
    "SparseOptimizer",
    "SparseSGD",
    "RowWiseAdagrad",
    "ExactAdagrad",
    "make_sparse_optimizer",
    "make_dense_optimizer",
    "ADAM_SETTINGS",
]


def _check_lr(lr: object) -> float:
    return check_float("lr", lr, lo=0.0, lo_open=True)


class SparseOptimizer:
    """Base class: applies recorded row gradients of one embedding collection."""

    def __init__(self, collection: EmbeddingBagCollection, lr: float) -> None:
        if not isinstance(collection, EmbeddingBagCollection):
            raise TypeError(f"collection must be an EmbeddingBagCollection, got {type(collection).__name__}")
        self.collection = collection
        self.lr = _check_lr(lr)

    @torch.no_grad()
    def step(self, count_rows: bool = True) -> int | None:
        """Apply the gradients recorded since the last step; returns the rows updated, or
        None with ``count_rows=False``.

        The update is :meth:`_update` (plain torch, the formula above) on the distinct rows
        touched and their summed gradients. Where :func:`recnotebooks.kernels.fused.can_run`
        says so (float32 weights on a CPU), the same update runs instead as one fused kernel
        over the lookups, without building the row gradients; the results agree up to float
        rounding. Counting the rows costs fused SGD a second pass over the ids (about a sixth
        of its time at pooling 20), so the trainer passes ``count_rows=False``.
        """
        count_rows = check_bool("count_rows", count_rows)
        p = self.collection.pending_lookups()  # None: nothing was looked up since the last step
        if p is not None and fused.can_run(
            self.collection.weight, p.ids, p.offsets, p.coef, p.grad, self._state()
        ):
            return self._fused_step(p, count_rows)  # the fast path: one pass over the lookups
        rg = self.collection.row_gradients()  # rg.rows (R,): the distinct rows touched; rg.grads (R, D)
        self._update(rg.rows, rg.grads)
        self.collection.clear_gradients()
        return int(rg.rows.numel()) if count_rows else None

    def _state(self) -> torch.Tensor | None:
        """The optimizer's state the fused kernel updates beside the weights (SGD has none)."""
        return None

    def _fused_step(self, p: PendingLookups, count_rows: bool) -> int | None:
        """:meth:`step` through the fused kernel (:func:`recnotebooks.kernels.fused.fused_step`)."""
        rows = self._fused(p, count_rows)
        self.collection.clear_gradients()
        return rows if count_rows else None

    def _fused(self, p: PendingLookups, count_rows: bool) -> int | None:
        w = self.collection.weight
        return fused.fused_step(w, p.ids, p.offsets, p.coef, p.grad, self.lr, count_rows=count_rows)

    def zero_grad(self) -> None:
        self.collection.clear_gradients()

    def _update(self, rows: torch.Tensor, grads: torch.Tensor) -> None:
        raise NotImplementedError

    kind = "base"

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "lr": self.lr}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("kind") != self.kind:
            got = state.get("kind") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"state is for sparse optimizer {got!r}, not {self.kind!r}")
        self.lr = _check_lr(state["lr"])


class SparseSGD(SparseOptimizer):
    """Plain SGD on touched rows only."""

    kind = "sgd"

    def _update(self, rows: torch.Tensor, grads: torch.Tensor) -> None:
        w = self.collection.weight  # (all rows of all tables, D)
        w[rows] -= self.lr * grads.to(w.dtype)  # the touched rows only


class _Adagrad(SparseOptimizer):
    """What both Adagrads share: ``eps``, the accumulator ``momentum`` (FBGEMM's name for it) made
    by the collection (a cached collection moves it with its rows), the fused kernel, the state
    dict. ``lr`` and ``eps`` are finite numbers > 0, ``initial_accumulator_value`` a finite number
    >= 0 (an infinite one would freeze every row: ``lr / sqrt(inf) = 0``); others raise naming them."""

    #: one accumulator per element (a row of them per row), or one per row
    per_element = False

    def __init__(
        self,
        collection: EmbeddingBagCollection,
        lr: float,
        eps: float = 1e-8,
        initial_accumulator_value: float = 0.0,
    ) -> None:
        super().__init__(collection, lr)
        self.eps = check_float("eps", eps, lo=0.0, lo_open=True)
        init = check_float("initial_accumulator_value", initial_accumulator_value, lo=0.0)
        width = collection.embedding_dim if self.per_element else None
        self.momentum = collection.new_row_state("momentum", init, width=width)

    def _state(self) -> torch.Tensor:
        return self.momentum

    def _fused(self, p: PendingLookups, count_rows: bool) -> int | None:
        w = self.collection.weight  # the grouping counts the rows: no extra pass to skip
        return fused.fused_step(w, p.ids, p.offsets, p.coef, p.grad, self.lr, self.momentum, self.eps)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "lr": self.lr, "eps": self.eps, "momentum": self.momentum}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        m = state.get("momentum") if isinstance(state, dict) else None
        if not isinstance(m, torch.Tensor) or m.shape != self.momentum.shape:  # checked before any change
            got = tuple(m.shape) if isinstance(m, torch.Tensor) else type(m).__name__
            raise ValueError(f"momentum must be a tensor of shape {tuple(self.momentum.shape)}, got {got}")
        if m.numel() and not bool(torch.isfinite(m).all() and (m >= 0).all()):
            bad = m[~(torch.isfinite(m) & (m >= 0))][0].item()
            raise ValueError(f"momentum must hold finite numbers >= 0 (sums of squared gradients), got {bad}")
        eps = check_float("eps", state.get("eps"), lo=0.0, lo_open=True)
        super().load_state_dict(state)
        self.eps = eps
        self.momentum.copy_(m)


class RowWiseAdagrad(_Adagrad):
    """Row-wise Adagrad: one squared-gradient accumulator per row (touched rows only): the
    mean of the row's squared gradient, so a row's elements share one step size."""

    kind = "rowwise_adagrad"

    def _update(self, rows: torch.Tensor, grads: torch.Tensor) -> None:
        g = grads.float()  # (R, D): each touched row's summed gradient
        s = self.momentum  # (all rows,): one accumulator per row
        s[rows] += g.square().mean(1)  # s[r] += mean(g[r]**2)
        w = self.collection.weight  # (all rows, D)
        w[rows] -= (self.lr * g / (s[rows].sqrt() + self.eps).unsqueeze(1)).to(w.dtype)


class ExactAdagrad(_Adagrad):
    """Exact Adagrad: one squared-gradient accumulator per element (touched rows only), the
    update ``torch.optim.Adagrad`` makes (no ``lr_decay``, no ``weight_decay``) on the rows looked
    up; a row no lookup touched keeps its weights and state, as under ``torch.optim.Adagrad``
    with a zero gradient. The state is a float per element: the size of the table."""

    kind = "adagrad"
    per_element = True

    def _update(self, rows: torch.Tensor, grads: torch.Tensor) -> None:
        g = grads.float()  # (R, D): each touched row's summed gradient
        s = self.momentum  # (all rows, D): one accumulator per element
        s[rows] += g.square()  # s[r, d] += g[r, d]**2
        w = self.collection.weight  # (all rows, D)
        w[rows] -= (self.lr * g / (s[rows].sqrt() + self.eps)).to(w.dtype)


def make_sparse_optimizer(name: str, collection: EmbeddingBagCollection, lr: float) -> SparseOptimizer:
    """``"sgd"`` -> :class:`SparseSGD`, ``"rowwise_adagrad"`` -> :class:`RowWiseAdagrad`,
    ``"adagrad"`` -> :class:`ExactAdagrad`: the names of
    :data:`recnotebooks.config.SPARSE_OPTIMIZERS` (another raises ``ValueError``)."""
    name = check_choice("name", name, SPARSE_OPTIMIZERS)
    _check_lr(lr)
    return _BY_NAME[name](collection, lr)


#: Each name of :data:`~recnotebooks.config.SPARSE_OPTIMIZERS` -> its class (its ``kind``).
_BY_NAME: dict[str, type[SparseOptimizer]] = {c.kind: c for c in (SparseSGD, RowWiseAdagrad, ExactAdagrad)}


def make_dense_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """The dense (MLP) optimizer ``name``: ``torch.optim``'s SGD (``"sgd"``), Adagrad
    (``"adagrad"``) or Adam (``"adam"``, with :data:`ADAM_SETTINGS`, MLPerf's DLRMv4's) over
    ``params`` with learning rate ``lr`` and their defaults otherwise; the names of
    :data:`recnotebooks.config.DENSE_OPTIMIZERS` (another raises ``ValueError`` naming
    ``dense_optimizer``). The one place the trainer, a rank's training and the measurements
    build one. Gradient clipping is the trainer's (``TrainConfig.clip_grad_norm``)."""
    name = check_choice("dense_optimizer", name, DENSE_OPTIMIZERS)
    return _DENSE_BY_NAME[name](list(params), lr=lr, **_DENSE_SETTINGS.get(name, {}))


#: Adam as MLPerf's DLRMv4 sets it for the dense part: betas (0.95, 0.999), eps 1e-8, no weight
#: decay (``dense_optimizer_factory_and_class`` in its gin file,
#: https://github.com/mlcommons/training/blob/a67b8459467c551c08f8566d68a8e4e1659e6bd7/recommendation_v4/generative_recommenders/dlrm_v4/train/gin/yambda_5b.gin,
#: mlcommons/training PR #889), which also clips the dense gradients to norm 1.0 (its
#: ``grad_clip_norm``). torch's defaults differ only in ``beta1`` (0.9).
ADAM_SETTINGS: dict[str, Any] = {"betas": (0.95, 0.999), "eps": 1e-8, "weight_decay": 0.0}
_DENSE_SETTINGS: dict[str, dict[str, Any]] = {"adam": ADAM_SETTINGS}

#: Each name of :data:`~recnotebooks.config.DENSE_OPTIMIZERS` -> its ``torch.optim`` class.
_DENSE_BY_NAME: dict[str, type[torch.optim.Optimizer]] = {
    "sgd": torch.optim.SGD,
    "adagrad": torch.optim.Adagrad,
    "adam": torch.optim.Adam,
}
