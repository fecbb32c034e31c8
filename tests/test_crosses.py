"""What a cross layer learns (notebook 01 §6): the products it weighs, read against an independent
reference (finite differences of the network itself), the degree of its output, the planted cross it
finds, and the chart that draws it."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from recnotebooks.nn.crosses import (
    cross_coefficients,
    cross_degree,
    learn_planted_cross,
    planted_cross_data,
)
from recnotebooks.nn.interaction import LowRankCrossNet


@settings(max_examples=20, deadline=None)
@given(features=st.integers(2, 5), rank=st.integers(1, 5), seed=st.integers(0, 10**6))
def test_the_coefficients_are_the_networks_own(features: int, rank: int, seed: int) -> None:
    """The logit of one cross layer and a readout is a quadratic in x; its coefficient on x_i x_j is
    the mixed second difference L(e_i + e_j) - L(e_i) - L(e_j) + L(0) (on x_i^2: half of
    L(2 e_i) - 2 L(e_i) + L(0)), computed here from the network's outputs alone."""
    g = torch.Generator().manual_seed(seed)
    cross = LowRankCrossNet(features, 1, min(rank, features), dtype=torch.float64, generator=g)
    readout = nn.Linear(features, 1, dtype=torch.float64)
    with torch.no_grad():
        cross.up[0].bias.copy_(torch.randn(features, generator=g, dtype=torch.float64))
        readout.weight.copy_(torch.randn(1, features, generator=g, dtype=torch.float64))

    def logit(x: torch.Tensor) -> float:
        with torch.no_grad():
            return float(readout(cross(x[None]))[0, 0])

    e, zero = torch.eye(features, dtype=torch.float64), torch.zeros(features, dtype=torch.float64)
    coef = cross_coefficients(cross, readout)
    assert set(coef) == set(itertools.combinations_with_replacement(range(features), 2))
    for i, j in coef:
        if i == j:
            ref = (logit(2 * e[i]) - 2 * logit(e[i]) + logit(zero)) / 2
        else:
            ref = logit(e[i] + e[j]) - logit(e[i]) - logit(e[j]) + logit(zero)
        assert coef[i, j] == pytest.approx(ref, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("layers", [1, 2, 3, 4])
def test_l_layers_make_products_of_l_plus_one_features(layers: int) -> None:
    assert cross_degree(layers) == layers + 1


def test_one_cross_layer_finds_the_planted_cross() -> None:
    found = learn_planted_cross(pair=(2, 0), strength=1.5, seed=3)  # any pair, any strength
    assert found.pair == (0, 2) and found.planted == pytest.approx(1.5, abs=0.1)
    assert found.largest_other < 0.15 and found.auc > found.linear_auc + 0.15
    assert abs(found.linear_auc - 0.5) < 0.03  # a linear model cannot see a product of two features
    rows = found.rows()
    assert len(rows) == 6 and [r["product"] for r in rows if r["planted"]] == ["x1·x3"]
    assert {r["source"] for r in rows} == {"measured"}


def test_the_data_carry_only_the_planted_cross() -> None:
    x, y = planted_cross_data(20_000, pair=(0, 1), strength=3.0)
    assert x.shape == (20_000, 3) and set(y.unique().tolist()) == {0.0, 1.0}
    product = x[:, 0] * x[:, 1]
    assert float(y[product > 1].mean()) > 0.9 and float(y[product < -1].mean()) < 0.1
    assert abs(float(y[x[:, 2] > 1].mean()) - 0.5) < 0.05  # the third feature says nothing
    assert torch.equal(planted_cross_data(10, seed=4)[0], planted_cross_data(10, seed=4)[0])


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [({"pair": (1, 1)}, ValueError, "two different features"),
     ({"pair": (0, 3)}, ValueError, "pair[1] must be an int in [0, 2], got 3"),
     ({"pair": 2}, TypeError, "pair must be two feature indices"),
     ({"features": 1}, ValueError, "features must be an int in [2, 16]"),
     ({"strength": -1.0}, ValueError, "strength must be"),
     ({"samples": 1}, ValueError, "samples must be")],
)  # fmt: skip
def test_bad_toys_are_named(kwargs: dict, exc: type, words: str) -> None:
    with pytest.raises(exc) as err:
        planted_cross_data(**{"samples": 100, **kwargs})
    assert words in str(err.value)


def test_the_coefficients_refuse_other_networks() -> None:
    with pytest.raises(ValueError, match="one-layer LowRankCrossNet"):
        cross_coefficients(LowRankCrossNet(3, 2, 3), nn.Linear(3, 1))
    with pytest.raises(ValueError, match=r"nn.Linear\(3, 1\)"):
        cross_coefficients(LowRankCrossNet(3, 1, 3), nn.Linear(4, 1))


def test_the_chart_draws_every_product_and_outlines_the_planted_one() -> None:
    from recnotebooks.viz.charts import chart_rows
    from recnotebooks.viz.crosses import cross_weights_chart

    found = learn_planted_cross(steps=50)
    spec = cross_weights_chart(found.rows(), detail="a toy").to_dict()  # schema-validated
    assert len(chart_rows(spec)) == 6
    assert spec["title"]["subtitle"][0].startswith("MEASURED on this machine")
    outline = spec["layer"][1]
    assert outline["mark"]["stroke"] == "black" and outline["transform"] == [{"filter": "datum.planted"}]
    with pytest.raises(ValueError, match="coefficient"):
        cross_weights_chart([{"row": "x1", "column": "x2", "product": "x1·x2", "coefficient": float("nan")}])
