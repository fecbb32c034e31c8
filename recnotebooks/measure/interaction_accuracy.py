"""What DLRM-DCNv2's cross network buys over DLRM's dot interaction in accuracy, measured here.

:func:`compare_interactions` trains a DLRM-DCNv2 preset (``dcnv2_small`` by default) and its
**dot sibling** (:func:`dot_sibling`: the same tables, MLPs and optimizers, DLRM's pairwise dot
products in place of the cross layers) on identical synthetic batches from identical seeds for
the same number of steps, and evaluates both on the same held-out samples::

    dense ─ bottom MLP ─┐                      ┌─ dot products of every pair ─┐
                        ├─ [x, e_1 ... e_26] ──┤                              ├─ top MLP ─ click
    26 tables ── pool ──┘                      └─ 3 cross layers (DCN-V2) ────┘

It also scores the hidden teacher that labelled the data (:class:`~recnotebooks.data.teacher.Teacher`)
on the same held-out samples: the AUC a perfect model would reach. How far apart two AUCs must be
before an evaluation of this size can tell them apart is :func:`auc_standard_error`'s (Hanley and
McNeil's standard error of an AUC).

What it can and cannot say: the data come from a teacher whose pair term is exactly the dot
products of per-id vectors that DLRM's interaction computes (its form may favour DLRM), its
crosses are of degree 2, and a few hundred small steps are early in training. A difference here
says little about Criteo, where DCN-V2's authors measured theirs (Wang et al. 2021).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from recnotebooks.checks import check_int, check_steps, check_type
from recnotebooks.config import DLRMConfig, preset, preset_training
from recnotebooks.data import SyntheticCriteo
from recnotebooks.metrics import auc
from recnotebooks.nn import DLRM
from recnotebooks.text import wrap_paragraph
from recnotebooks.train import TrainConfig, Trainer, TrainResult

__all__ = [
    "EVAL_BATCHES",
    "MODELS",
    "InteractionComparison",
    "auc_standard_error",
    "compare_interactions",
    "dot_sibling",
]

#: Held-out batches both models are scored on (16 x 512 = 8,192 samples for ``dcnv2_small``).
EVAL_BATCHES = 16
#: The two models' names, by interaction.
MODELS = {"dcn": "DLRM-DCNv2 (cross network)", "dot": "DLRM (dot interaction)"}


def dot_sibling(config: DLRMConfig) -> DLRMConfig:
    """``config`` with DLRM's dot interaction in place of its cross network: the same tables,
    embedding dim, bottom and top MLP widths (the top MLP's input narrows to the dense vector and
    the pair products). ``config`` must be a ``"dcn"`` model whose bottom MLP ends in the
    embedding dim (the dot products need equal widths), as MLPerf's and ``dcnv2_small`` do."""
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    if config.interaction != "dcn":
        raise ValueError(f"config must have interaction='dcn', got {config.interaction!r} ({config.name})")
    if config.bottom_mlp[-1] != config.embedding_dim:
        raise ValueError(
            f"config's bottom MLP must end in its embedding dim for the dot interaction, got "
            f"bottom_mlp[-1]={config.bottom_mlp[-1]} and embedding_dim={config.embedding_dim} ({config.name})"
        )
    return config.replace(interaction="dot", dcn_layers=3, dcn_rank=512, name=f"{config.name} (dot)")


def auc_standard_error(auc_value: float, positives: int, negatives: int) -> float:
    """Hanley and McNeil's (1982) standard error of an AUC of ``auc_value`` measured on
    ``positives`` clicks and ``negatives`` non-clicks: how much the AUC of the same model would
    vary over other held-out samples of that size (an approximation: exact for exponentially
    distributed scores, somewhat high for normal ones).

    >>> round(auc_standard_error(0.75, 2000, 6000), 4)
    0.0068
    """
    a = float(auc_value)
    if not 0.0 <= a <= 1.0 or math.isnan(a):
        raise ValueError(f"auc_value must be in [0, 1], got {auc_value!r}")
    n1, n0 = check_int("positives", positives, lo=1), check_int("negatives", negatives, lo=1)
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    return math.sqrt((a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0))


@dataclass(frozen=True)
class InteractionComparison:
    """Both models' held-out metrics after the same training (:func:`compare_interactions`).

    ``results`` maps ``"dcn"`` and ``"dot"`` to their :class:`~recnotebooks.train.TrainResult`;
    ``teacher_auc`` is the hidden teacher's AUC on the same held-out samples; ``positives`` and
    ``negatives`` count their labels."""

    preset: str
    steps: int
    batch_size: int
    results: dict[str, TrainResult]
    teacher_auc: float
    positives: int
    negatives: int

    @property
    def auc(self) -> dict[str, float]:
        """Held-out AUC of each model, by interaction."""
        return {k: float(r.auc) for k, r in self.results.items()}  # type: ignore[arg-type]

    @property
    def difference(self) -> float:
        """DLRM-DCNv2's AUC less DLRM's (positive: the cross network scored higher)."""
        return self.auc["dcn"] - self.auc["dot"]

    @property
    def standard_error(self) -> float:
        """The larger of the two AUCs' standard errors (:func:`auc_standard_error`): how much
        either AUC would move on another draw of held-out samples of this size."""
        return max(auc_standard_error(a, self.positives, self.negatives) for a in self.auc.values())

    @property
    def eval_samples(self) -> int:
        return self.positives + self.negatives

    def rows(self) -> list[dict[str, object]]:
        """Tidy rows ``{model, interaction, auc, logloss, dense_parameters, steps, source}``."""
        return [
            {
                "model": MODELS[k],
                "interaction": k,
                "auc": float(r.auc),  # type: ignore[arg-type]
                "logloss": float(r.logloss),  # type: ignore[arg-type]
                "steps": r.steps,
                "source": "measured",
            }
            for k, r in self.results.items()
        ]

    def takeaway(self) -> str:
        """The comparison in words, wrapped at word boundaries (:func:`~recnotebooks.text.wrap_paragraph`)."""
        a, d, se = self.auc, self.difference, self.standard_error
        ahead = MODELS["dcn" if d > 0 else "dot"].split(" (")[0]
        verdict = (
            f"{ahead} ahead by {abs(d):.4f}, less than the sampling error of either AUC on these samples "
            f"({se:.4f}): too close to call on this evaluation"
            if abs(d) < se
            else f"{ahead} ahead by {abs(d):.3f}, {abs(d) / se:.1f}x either AUC's sampling error ({se:.3f})"
        )
        lines = [
            f"Held-out AUC after {self.steps} steps of batch {self.batch_size} on the same batches, both "
            f"scored on the same {self.eval_samples:,} samples (MEASURED): {MODELS['dcn']} "
            f"{a['dcn']:.3f}, {MODELS['dot']} {a['dot']:.3f}; {verdict}.",
            f"The teacher that labelled the data scores {self.teacher_auc:.3f} on them: both models are "
            "still far from what the data allow.",
        ]
        return wrap_paragraph("\n".join(lines))


def _train(
    config: DLRMConfig, how: dict[str, object], steps: int, seed: int, eval_batches: int
) -> TrainResult:
    """``config`` trained as its preset's source trains it (:func:`~recnotebooks.config.preset_training`)."""
    batch = int(how["batch_size"])  # type: ignore[call-overload]
    return Trainer(
        DLRM(config, seed=seed),
        SyntheticCriteo(config, batch, seed=seed),
        SyntheticCriteo(config, batch, seed=seed, split="eval"),
        TrainConfig(
            steps=steps,
            sparse_optimizer=str(how["sparse_optimizer"]),
            sparse_lr=float(how["sparse_lr"]),  # type: ignore[arg-type]
            dense_optimizer=str(how["dense_optimizer"]),
            dense_lr=float(how["dense_lr"]),  # type: ignore[arg-type]
            eval_batches=eval_batches,
            progress=False,
        ),
        device="cpu",
    ).fit()


def compare_interactions(
    steps: int, *, preset_name: str = "dcnv2_small", seed: int = 0, eval_batches: int = EVAL_BATCHES
) -> InteractionComparison:
    """Train ``preset_name`` (a DLRM-DCNv2 preset with training settings,
    :data:`~recnotebooks.config.PRESET_TRAINING`) and its :func:`dot_sibling` for ``steps`` steps
    each on identical batches (the same stream seed: the streams depend on the tables and dense
    features only), from weights drawn with the same ``seed``, and score both and the teacher on
    the same ``eval_batches`` held-out batches. On the CPU (seconds per hundred steps for
    ``dcnv2_small``)."""
    steps = check_steps("steps", steps)
    seed = check_int("seed", seed, lo=0)
    eval_batches = check_int("eval_batches", eval_batches, lo=1, hi=1000)
    how = preset_training(preset_name)
    if not how:
        raise ValueError(f"preset_name must be a preset with training settings, got {preset_name!r}")
    dcn = preset(preset_name)
    results = {
        k: _train(c, how, steps, seed, eval_batches) for k, c in (("dcn", dcn), ("dot", dot_sibling(dcn)))
    }
    held_out = SyntheticCriteo(dcn, int(how["batch_size"]), seed=seed, split="eval")  # type: ignore[call-overload]
    logits, labels = [], []
    for i, b in enumerate(held_out):
        if i >= eval_batches:
            break
        logits.append(held_out.teacher_logits(b))
        labels.append(b.labels)
    y = torch.cat(labels)
    positives = int(y.sum())
    return InteractionComparison(
        preset=preset_name,
        steps=steps,
        batch_size=int(how["batch_size"]),  # type: ignore[call-overload]
        results=results,
        teacher_auc=auc(torch.sigmoid(torch.cat(logits)), y),
        positives=positives,
        negatives=int(y.numel()) - positives,
    )
