"""Interactions and MLPs against naive loops."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.nn import MLP, CatInteraction, DotInteraction


def naive_dot(dense: torch.Tensor, sparse: torch.Tensor, self_interaction: bool) -> torch.Tensor:
    b, t, _ = sparse.shape
    rows = []
    for s in range(b):
        feats = [dense[s]] + [sparse[s, k] for k in range(t)]
        vals = [x for x in dense[s]]
        for i in range(len(feats)):
            for j in range(i + (1 if self_interaction else 0)):
                vals.append(torch.dot(feats[i], feats[j]))
        rows.append(torch.stack(vals))
    return torch.stack(rows)


@given(
    b=st.integers(1, 4),
    t=st.integers(1, 5),
    d=st.integers(1, 6),
    self_interaction=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_dot_interaction_matches_naive_loops(b, t, d, self_interaction, seed):
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(b, d, generator=g, dtype=torch.float64, requires_grad=True)
    sparse = torch.randn(b, t, d, generator=g, dtype=torch.float64, requires_grad=True)
    inter = DotInteraction(t + 1, self_interaction)
    out = inter(dense, sparse)
    ref = naive_dot(dense, sparse, self_interaction)
    torch.testing.assert_close(out, ref)
    assert out.shape[1] == d + inter.num_pairs
    up = torch.randn(out.shape, generator=g, dtype=torch.float64)
    gd, gs = torch.autograd.grad((out * up).sum(), (dense, sparse))
    rd, rs = torch.autograd.grad((ref * up).sum(), (dense, sparse))
    torch.testing.assert_close(gd, rd)
    torch.testing.assert_close(gs, rs)


def test_dot_interaction_gradcheck():
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    from recnotebooks.nn.interaction import pairwise_dots

    for self_interaction in (True, False):
        assert torch.autograd.gradcheck(lambda x, s=self_interaction: pairwise_dots(x, s), (x,))


def test_cat_interaction():
    dense = torch.randn(2, 3)
    sparse = torch.randn(2, 4, 5)
    out = CatInteraction()(dense, sparse)
    ref = torch.stack([torch.cat([dense[s]] + [sparse[s, k] for k in range(4)]) for s in range(2)])
    torch.testing.assert_close(out, ref)


def test_dot_interaction_validation():
    with pytest.raises(ValueError, match="num_features"):
        DotInteraction(1)


def test_mlp_matches_manual_layers():
    torch.manual_seed(0)
    mlp = MLP(5, (7, 3), final_relu=False)
    x = torch.randn(4, 5)
    l1, l2 = mlp[0], mlp[2]
    ref = torch.relu(x @ l1.weight.T + l1.bias) @ l2.weight.T + l2.bias
    torch.testing.assert_close(mlp(x), ref)
    with pytest.raises(ValueError, match="widths"):
        MLP(5, ())
    with pytest.raises(ValueError, match="in_features"):
        MLP(0, (3,))
