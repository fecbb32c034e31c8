"""What a cross layer learns: explicit feature crosses, shown on a toy (:func:`learn_planted_cross`).

One cross layer of DCN-V2 (:class:`~recnotebooks.nn.interaction.LowRankCrossNet`, ``W = U V`` at
full rank here) maps ``x_0`` to ``x_1 = x_0 * (W x_0 + b) + x_0``, so feature ``i`` of its output is::

    x_1[i] = x_0[i] * (W[i,0] x_0[0] + W[i,1] x_0[1] + W[i,2] x_0[2] + b[i]) + x_0[i]
           = sum_j W[i,j] x_0[i] x_0[j]  +  (b[i] + 1) x_0[i]

every product of two input features, each with a weight of its own. A linear layer on top (the
top MLP's first layer, weights ``w``) gives the click logit ``sum_ij w[i] W[i,j] x_i x_j + ...``:
the model's coefficient on the cross ``x_i x_j`` is ``w[i] W[i,j] + w[j] W[j,i]`` (``w[i] W[i,i]``
on ``x_i^2``). Each further layer multiplies by ``x_0`` once more: ``l`` layers make products of
up to ``l + 1`` features (:func:`cross_degree`).

:func:`learn_planted_cross` trains one cross layer and a linear readout on synthetic clicks whose
logit is one planted product, ``strength * x_a * x_b`` of three standard-normal features, and
reads the learned coefficient of every product (:class:`PlantedCross`): it concentrates on the
planted pair. A linear model on the features alone cannot learn it at all (AUC 0.5).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
from torch import nn

from recnotebooks.checks import check_float, check_int, check_steps
from recnotebooks.nn.interaction import LowRankCrossNet
from recnotebooks.text import wrap_paragraph
from recnotebooks.threads import use_threads

__all__ = ["PlantedCross", "cross_coefficients", "cross_degree", "learn_planted_cross", "planted_cross_data"]


def _names(features: int) -> list[str]:
    return [f"x{i + 1}" for i in range(features)]


def planted_cross_data(
    samples: int, *, features: int = 3, pair: tuple[int, int] = (0, 2), strength: float = 2.0, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``samples`` rows of ``features`` standard-normal features ``(samples, features)`` and 0/1
    clicks drawn with probability ``sigmoid(strength * x[pair[0]] * x[pair[1]])``: the only
    signal is the planted cross (float64, deterministic in ``seed``)."""
    n = check_int("samples", samples, lo=2, hi=10**6)
    f = check_int("features", features, lo=2, hi=16)
    a, b = _check_pair(pair, f)
    s = check_float("strength", strength, lo=0.0, hi=100.0)
    g = torch.Generator().manual_seed(check_int("seed", seed, lo=0))
    x = torch.randn(n, f, generator=g, dtype=torch.float64)
    p = torch.sigmoid(s * x[:, a] * x[:, b])
    return x, (torch.rand(n, generator=g, dtype=torch.float64) < p).to(torch.float64)


def _check_pair(pair: object, features: int) -> tuple[int, int]:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"pair must be two feature indices (a, b), got {pair!r}")
    a = check_int("pair[0]", pair[0], lo=0, hi=features - 1)
    b = check_int("pair[1]", pair[1], lo=0, hi=features - 1)
    if a == b:
        raise ValueError(f"pair must name two different features (a cross), got {pair!r}")
    return min(a, b), max(a, b)


@dataclass(frozen=True)
class PlantedCross:
    """What one cross layer learned on :func:`planted_cross_data` (:func:`learn_planted_cross`).

    ``coefficients`` maps each product ``(i, j)``, ``i <= j``, to the learned logit's coefficient
    on ``x_i x_j``; ``pair`` is the planted one and ``strength`` its true coefficient; ``auc`` the
    trained model's on fresh samples and ``linear_auc`` a linear model's on the same (no crosses)."""

    features: int
    pair: tuple[int, int]
    strength: float
    coefficients: dict[tuple[int, int], float]
    auc: float
    linear_auc: float
    samples: int
    steps: int

    @property
    def planted(self) -> float:
        """The learned coefficient on the planted product."""
        return self.coefficients[self.pair]

    @property
    def largest_other(self) -> float:
        """The largest coefficient (in size) on any other product."""
        return max(abs(v) for k, v in self.coefficients.items() if k != self.pair)

    def name(self, i: int, j: int) -> str:
        """``"x1·x3"``, ``"x2²"``: a product's name (features counted from 1)."""
        n = _names(self.features)
        return f"{n[i]}²" if i == j else f"{n[i]}·{n[j]}"

    def rows(self) -> list[dict[str, object]]:
        """Tidy rows ``{row, column, product, coefficient, planted, source="measured"}``, one per
        product ``x_i x_j`` (``i <= j``; ``row``/``column``: the two features' names)."""
        names = _names(self.features)
        return [
            {"row": names[i], "column": names[j], "product": self.name(i, j), "coefficient": c,
             "planted": (i, j) == self.pair, "source": "measured"}
            for (i, j), c in self.coefficients.items()
        ]  # fmt: skip

    def describe(self) -> str:
        """The result in words."""
        cross = self.name(*self.pair)
        text = (
            f"planted: {self.strength:g}·{cross}; learned: {self.planted:.2f} on {cross}, "
            f"at most {self.largest_other:.2f} on any other product. Held-out AUC {self.auc:.3f} with the "
            f"cross layer, {self.linear_auc:.3f} for a linear model on the same features."
        )
        return wrap_paragraph(text)


def _auc(score: torch.Tensor, y: torch.Tensor) -> float:
    """Probability that a click scores above a non-click (ties count half)."""
    pos, neg = score[y == 1], score[y == 0]
    greater = (pos[:, None] > neg[None, :]).double().mean()
    ties = (pos[:, None] == neg[None, :]).double().mean()
    return float(greater + 0.5 * ties)


def _fit(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float) -> None:
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.BCEWithLogitsLoss()
    with use_threads(1):  # tensors this small gain nothing from threads, and a busy machine costs them
        for _ in range(steps):  # full batch: the toy is tiny
            opt.zero_grad()
            loss_fn(model(x).squeeze(1), y).backward()
            opt.step()


def learn_planted_cross(
    *,
    features: int = 3,
    pair: tuple[int, int] = (0, 2),
    strength: float = 2.0,
    samples: int = 4096,
    steps: int = 300,
    lr: float = 0.05,
    seed: int = 0,
) -> PlantedCross:
    """Train one cross layer (``width = rank = features``) and a linear readout on
    :func:`planted_cross_data` (full batch, Adam, ``steps`` steps; float64, deterministic in
    ``seed``) and read the learned coefficient of every product (see the module docstring). The
    AUCs are on ``samples`` fresh samples; ``linear_auc`` is a linear model trained the same way."""
    f = check_int("features", features, lo=2, hi=16)
    steps = check_steps("steps", steps)
    rate = check_float("lr", lr, lo=0.0, lo_open=True, hi=10.0)
    x, y = planted_cross_data(samples, features=f, pair=pair, strength=strength, seed=seed)
    x_new, y_new = planted_cross_data(samples, features=f, pair=pair, strength=strength, seed=seed + 1)
    g = torch.Generator().manual_seed(seed)
    cross = LowRankCrossNet(f, 1, f, dtype=torch.float64, generator=g)
    readout = nn.Linear(f, 1, dtype=torch.float64)
    with torch.no_grad():
        readout.weight.copy_(torch.randn(1, f, generator=g, dtype=torch.float64) / math.sqrt(f))
        readout.bias.zero_()
    model = nn.Sequential(cross, readout)
    _fit(model, x, y, steps, rate)
    linear = nn.Linear(f, 1, dtype=torch.float64)
    _fit(linear, x, y, steps, rate)
    with torch.no_grad():
        auc, linear_auc = _auc(model(x_new)[:, 0], y_new), _auc(linear(x_new)[:, 0], y_new)
    coef = cross_coefficients(cross, readout)
    return PlantedCross(f, _check_pair(pair, f), float(strength), coef, auc, linear_auc, int(samples), steps)


def cross_coefficients(cross: LowRankCrossNet, readout: nn.Linear) -> dict[tuple[int, int], float]:
    """The coefficient of each product ``x_i x_j`` (``i <= j``) in the logit ``readout(cross(x))``
    of a one-layer cross network: ``w[i] W[i,j] + w[j] W[j,i]`` (``w[i] W[i,i]`` for ``i == j``),
    with ``W = U V`` the layer's cross matrix and ``w`` the readout's weights (module docstring)."""
    if not isinstance(cross, LowRankCrossNet) or cross.num_layers != 1:
        raise ValueError(f"cross must be a one-layer LowRankCrossNet, got {cross!r}")
    if not isinstance(readout, nn.Linear) or readout.in_features != cross.width or readout.out_features != 1:
        raise ValueError(f"readout must be an nn.Linear({cross.width}, 1), got {readout!r}")
    with torch.no_grad():
        w_cross = cross.up[0].weight @ cross.down[0].weight  # (f, f): W = U V
        m = readout.weight[0, :, None] * w_cross  # m[i, j] = w[i] W[i, j]: the logit's weight on x_i x_j
        return {(i, j): float(m[i, j] + m[j, i]) if i != j else float(m[i, i])
                for i, j in itertools.combinations_with_replacement(range(cross.width), 2)}  # fmt: skip


def cross_degree(layers: int, *, features: int = 3, seed: int = 0) -> int:
    """The degree, in the inputs, of a random ``layers``-layer cross network's output (its highest
    product of input features): the output on ``t * x`` is a polynomial in ``t``, whose degree
    is the last finite difference that is not zero (float64, on a random ``x``). It is
    ``layers + 1``: each layer multiplies by ``x_0`` once more."""
    n = check_int("layers", layers, lo=1, hi=8)
    f = check_int("features", features, lo=1, hi=16)
    g = torch.Generator().manual_seed(check_int("seed", seed, lo=0))
    net = LowRankCrossNet(f, n, f, dtype=torch.float64, generator=g)
    with torch.no_grad():
        for layer in net.up:
            layer.bias.copy_(torch.randn(f, generator=g, dtype=torch.float64))
        x = torch.randn(f, generator=g, dtype=torch.float64)
        values = torch.stack([net((t * x)[None])[0] for t in torch.arange(n + 4, dtype=torch.float64)])
    degree = 0
    for k in range(1, n + 4):
        values = values[1:] - values[:-1]  # the k-th finite difference: zero beyond the degree
        if float(values.abs().max()) > 1e-6 * float(values.abs().max() + 1):
            degree = k
    return degree
