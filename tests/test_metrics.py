"""Metrics against naive definitions."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.metrics import auc, click_metrics, logloss, normalized_entropy


def naive_auc(s: list[float], y: list[int]) -> float:
    pos = [a for a, b in zip(s, y, strict=True) if b == 1]
    neg = [a for a, b in zip(s, y, strict=True) if b == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1)), min_size=2, max_size=40).filter(
        lambda xs: 0 < sum(b for _, b in xs) < len(xs)
    )
)
def test_auc_matches_pairwise_definition(pairs):
    s = [a / 5 for a, _ in pairs]
    y = [b for _, b in pairs]
    assert auc(torch.tensor(s), torch.tensor(y)) == pytest.approx(naive_auc(s, y))


def test_logloss_and_ne():
    p = torch.tensor([0.9, 0.2, 0.6, 0.1])
    y = torch.tensor([1.0, 0.0, 1.0, 0.0])
    ll = -(math.log(0.9) + math.log(0.8) + math.log(0.6) + math.log(0.9)) / 4
    assert logloss(p, y) == pytest.approx(ll)
    assert normalized_entropy(p, y) == pytest.approx(ll / math.log(2))
    base = torch.full((4,), 0.5)
    assert normalized_entropy(base, y) == pytest.approx(1.0)
    m = click_metrics(p, y)
    assert m["auc"] == 1.0 and m["samples"] == 4


def test_metric_validation():
    with pytest.raises(ValueError, match="both classes"):
        auc(torch.tensor([0.1, 0.2]), torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        logloss(torch.tensor([0.1]), torch.tensor([2]))
    with pytest.raises(ValueError, match="probabilities"):
        logloss(torch.tensor([1.5]), torch.tensor([1]))
    with pytest.raises(ValueError, match="NaN"):
        auc(torch.tensor([float("nan"), 0.1]), torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="equally long"):
        auc(torch.tensor([0.1]), torch.tensor([1, 0]))
