"""Click-prediction metrics: log loss, AUC and normalized entropy (NE).

NE (He et al. 2014, used across Meta's recommendation papers) is the log loss divided by
the entropy of the background click rate: 1.0 means no better than always predicting the
average rate; lower is better.
"""

from __future__ import annotations

import math

import torch

from recnotebooks.checks import check_type

__all__ = ["logloss", "auc", "normalized_entropy", "click_metrics"]

_EPS = 1e-7


def _check(pred: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    check_type("pred", pred, torch.Tensor, "a torch.Tensor")
    check_type("labels", labels, torch.Tensor, "a torch.Tensor")
    pred, labels = pred.detach().flatten().double().cpu(), labels.detach().flatten().double().cpu()
    if pred.numel() != labels.numel() or pred.numel() == 0:
        raise ValueError(
            f"pred and labels must be non-empty and equally long, got {pred.numel()} and {labels.numel()}"
        )
    bad = ~((labels == 0) | (labels == 1))
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise ValueError(f"labels must be 0 or 1, got labels[{i}]={labels[i].item():g}")
    if not bool(torch.isfinite(pred).all()):
        i = int(torch.nonzero(~torch.isfinite(pred))[0])
        raise ValueError(f"pred must be finite (no NaN or inf), got pred[{i}]={pred[i].item()}")
    return pred, labels


def logloss(prob: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean binary cross-entropy of probabilities ``prob`` (clipped to [1e-7, 1-1e-7])."""
    p, y = _check(prob, labels)
    if bool(((p < 0) | (p > 1)).any()):
        raise ValueError("prob must be probabilities in [0, 1]; apply torch.sigmoid to logits")
    p = p.clamp(_EPS, 1 - _EPS)
    return float(-(y * p.log() + (1 - y) * (1 - p).log()).mean())


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve via the rank-sum (Mann–Whitney) formula; ties get mid-ranks."""
    s, y = _check(scores, labels)
    pos = float(y.sum())
    neg = y.numel() - pos
    if pos == 0 or neg == 0:
        raise ValueError(f"AUC needs both classes, got {int(pos)} positives and {int(neg)} negatives")
    uniq, inverse, counts = torch.unique(s, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    mid_rank = ends - (counts.double() - 1) / 2  # 1-based average rank of each tie group
    ranks = mid_rank[inverse]
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def normalized_entropy(prob: torch.Tensor, labels: torch.Tensor) -> float:
    """Log loss divided by the entropy of the labels' click rate."""
    _, y = _check(prob, labels)
    p = float(y.mean())
    if p in (0.0, 1.0):
        raise ValueError("normalized entropy needs both classes in labels")
    h = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    return logloss(prob, labels) / h


def click_metrics(prob: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """``{"logloss", "auc", "ne", "click_rate", "samples"}`` of one evaluation."""
    return {
        "logloss": logloss(prob, labels),
        "auc": auc(prob, labels),
        "ne": normalized_entropy(prob, labels),
        "click_rate": float(labels.double().mean()),
        "samples": int(labels.numel()),
    }
