"""Interactions and MLPs against naive loops (the DCN's against its formula and TorchRec's module)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.data.synthetic import SyntheticCriteo
from recnotebooks.nn import (
    DLRM,
    MLP,
    CatInteraction,
    DCNInteraction,
    DotInteraction,
    LowRankCrossNet,
    make_interaction,
)
from recnotebooks.train import TrainConfig, Trainer


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


# ----- DCN-V2's low-rank cross network ------------------------------------------------------------
def cross_reference(x0: torch.Tensor, vs: list, ws: list, bs: list) -> torch.Tensor:
    """DCN-V2's formula, sample by sample and element by element (Wang et al. 2021, eq. of the
    low-rank cross layer): ``x_{l+1}[i] = x_0[i] * (sum_j W[i, j] sum_k V[j, k] x_l[k] + b[i]) + x_l[i]``."""
    out = []
    for s in range(x0.shape[0]):
        x = x0[s]
        for v, w, b in zip(vs, ws, bs, strict=True):
            low = torch.stack([sum(v[j, k] * x[k] for k in range(v.shape[1])) for j in range(v.shape[0])])
            full = torch.stack([sum(w[i, j] * low[j] for j in range(w.shape[1])) for i in range(w.shape[0])])
            x = x0[s] * (full + b) + x
        out.append(x)
    return torch.stack(out)


def _cross_weights(net: LowRankCrossNet) -> tuple[list, list, list]:
    return ([d.weight for d in net.down], [u.weight for u in net.up], [u.bias for u in net.up])


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(1, 3),
    t=st.integers(1, 3),
    d=st.integers(1, 3),
    dd=st.integers(1, 4),
    layers=st.integers(1, 3),
    rank=st.integers(1, 4),
    seed=st.integers(0, 1000),
)
def test_dcn_interaction_matches_the_formula_forward_and_backward(b, t, d, dd, layers, rank, seed):
    width = dd + t * d
    rank = min(rank, width)
    g = torch.Generator().manual_seed(seed)
    inter = DCNInteraction(width, layers, rank, dtype=torch.float64, generator=g)
    with torch.no_grad():  # TorchRec starts the biases at zero: make them count here
        for u in inter.cross.up:
            u.bias.copy_(torch.randn(width, generator=g, dtype=torch.float64))
    dense = torch.randn(b, dd, generator=g, dtype=torch.float64, requires_grad=True)
    sparse = torch.randn(b, t, d, generator=g, dtype=torch.float64, requires_grad=True)
    out = inter(dense, sparse)
    x0 = torch.cat([dense] + [sparse[:, k] for k in range(t)], dim=1)  # [dense, e_1, ..., e_T]
    ref = cross_reference(x0, *_cross_weights(inter.cross))
    torch.testing.assert_close(out, ref)
    assert out.shape == (b, width)
    up = torch.randn(out.shape, generator=g, dtype=torch.float64)
    wrt = (dense, sparse, *inter.parameters())
    got = torch.autograd.grad((out * up).sum(), wrt)
    want = torch.autograd.grad((ref * up).sum(), wrt)
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e)


def test_dcn_gradcheck():
    net = LowRankCrossNet(5, 2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(net, (x,))


def test_dcn_equals_torchrecs_low_rank_cross_net():
    """The peer: TorchRec's LowRankCrossNet with our weights gives our output."""
    crossnet = pytest.importorskip("torchrec.modules.crossnet")
    ours = LowRankCrossNet(12, 3, 4, generator=torch.Generator().manual_seed(2))
    theirs = crossnet.LowRankCrossNet(in_features=12, num_layers=3, low_rank=4)
    with torch.no_grad():
        for k in range(3):
            theirs.V_kernels[k].copy_(ours.down[k].weight)
            theirs.W_kernels[k].copy_(ours.up[k].weight)
            theirs.bias[k].copy_(torch.randn(12))
            ours.up[k].bias.copy_(theirs.bias[k])
    x = torch.randn(5, 12)
    torch.testing.assert_close(ours(x), theirs(x))


def test_dcn_initialisation_is_torchrecs():
    """Xavier-normal V and W (std sqrt(2 / (width + rank))), zero biases; one generator, one draw."""
    width, rank = 600, 120
    net = LowRankCrossNet(width, 2, rank, generator=torch.Generator().manual_seed(3))
    std = (2 / (width + rank)) ** 0.5
    for p in [*(d.weight.detach() for d in net.down), *(u.weight.detach() for u in net.up)]:
        assert float(p.mean()) == pytest.approx(0.0, abs=0.02 * std)
        assert float(p.std()) == pytest.approx(std, rel=0.02)
    assert all(float(u.bias.detach().abs().max()) == 0 for u in net.up)
    again = LowRankCrossNet(width, 2, rank, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), again.parameters(), strict=True))
    assert net.down[0].weight.shape == (rank, width) and net.up[0].weight.shape == (width, rank)


def test_make_interaction_builds_each_kind_and_refuses_others():
    assert isinstance(make_interaction("dcn", 3, width=10, dcn_layers=2, dcn_rank=4), DCNInteraction)
    assert isinstance(make_interaction("cat", 3), CatInteraction)
    with pytest.raises(ValueError, match="width"):
        make_interaction("dcn", 3)
    with pytest.raises(ValueError, match="'dot', 'cat' or 'dcn'"):
        make_interaction("sum", 3)
    for kwargs, field in (({"num_layers": 0}, "num_layers"), ({"rank": 0}, "rank"), ({"width": 0}, "width")):
        with pytest.raises(ValueError, match=field):
            LowRankCrossNet(**{"width": 4, "num_layers": 1, "rank": 2, **kwargs})
    inter = DCNInteraction(10, 1, 2)
    with pytest.raises(ValueError, match="width 10"):
        inter(torch.randn(2, 3), torch.randn(2, 2, 2))


def test_a_dcn_dlrm_learns_the_synthetic_teacher():
    """Trained on the synthetic stream, the DCN model's loss falls and its held-out AUC beats chance."""
    cfg = DLRMConfig(
        13,
        tuple(TableConfig(f"t{i}", 2000, float(i + 1)) for i in range(6)),
        8,
        (32, 8),
        (32, 1),
        interaction="dcn",
        dcn_layers=2,
        dcn_rank=8,
    )
    tc = TrainConfig(steps=150, progress=False, eval_batches=4, time_phases=False)
    train = SyntheticCriteo(cfg, 512, seed=0)
    evals = SyntheticCriteo(cfg, 512, seed=0, split="eval")
    res = Trainer(DLRM(cfg, seed=0), train, evals, tc, device="cpu").fit()
    first, last = sum(res.losses[:10]) / 10, sum(res.losses[-10:]) / 10
    assert last < first - 0.05, (first, last)
    assert res.auc is not None and res.auc > 0.7, res.auc
