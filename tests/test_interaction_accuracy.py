"""DLRM vs DLRM-DCNv2 trained here on the same data (notebook 01 §6): the dot sibling is the same
model but for its interaction, both see identical batches, and the AUC's standard error agrees with
a simulation."""

from __future__ import annotations

import math

import _values
import pytest
import torch

from recnotebooks.config import DLRMConfig, TableConfig, preset
from recnotebooks.data import SyntheticCriteo
from recnotebooks.measure.interaction_accuracy import (
    MODELS,
    auc_standard_error,
    compare_interactions,
    dot_sibling,
)
from recnotebooks.metrics import auc


def test_the_dot_sibling_differs_only_in_its_interaction() -> None:
    dcn = preset("dcnv2_small")
    dot = dot_sibling(dcn)
    assert (dot.interaction, dcn.interaction) == ("dot", "dcn")
    for field in ("tables", "num_dense", "embedding_dim", "bottom_mlp", "top_mlp", "pooling"):
        assert getattr(dot, field) == getattr(dcn, field), field
    assert dot.interaction_output_dim == 16 + 27 * 26 // 2  # the dense vector and 351 pair products
    assert dot.cross_parameters == 0 and dot.dense_parameters < dcn.dense_parameters


def test_both_models_see_identical_batches() -> None:
    dcn = preset("dcnv2_small")
    for split in ("train", "eval"):
        a = SyntheticCriteo(dcn, 8, seed=0, split=split).batch(3)
        b = SyntheticCriteo(dot_sibling(dcn), 8, seed=0, split=split).batch(3)
        assert torch.equal(a.dense, b.dense) and torch.equal(a.labels, b.labels)
        assert torch.equal(a.sparse.values, b.sparse.values) and torch.equal(
            a.sparse.lengths, b.sparse.lengths
        )


def test_only_a_dcn_model_with_matching_widths_has_a_dot_sibling() -> None:
    with pytest.raises(ValueError, match="interaction='dcn'"):
        dot_sibling(preset("tiny"))
    odd = DLRMConfig(2, (TableConfig("a", 10),), 4, (8,), (1,), interaction="dcn", dcn_rank=4)
    with pytest.raises(ValueError, match="bottom MLP must end in its embedding dim"):
        dot_sibling(odd)
    with pytest.raises(TypeError, match="config must be a DLRMConfig"):
        dot_sibling(_values.bad("dcnv2_small"))


def test_the_auc_standard_error_matches_a_simulation() -> None:
    """Hanley and McNeil's formula against the spread of AUCs over 400 independent draws of 300
    clicks and 900 non-clicks scored by a fixed model (binormal scores with AUC about 0.76)."""
    g = torch.Generator().manual_seed(0)
    aucs = []
    for _ in range(400):
        pos, neg = torch.randn(300, generator=g) + 1.0, torch.randn(900, generator=g)
        aucs.append(auc(torch.cat([pos, neg]).sigmoid(), torch.cat([torch.ones(300), torch.zeros(900)])))
    mean = sum(aucs) / len(aucs)
    sd = math.sqrt(sum((a - mean) ** 2 for a in aucs) / (len(aucs) - 1))
    # an approximation, a little high for binormal scores (it is exact for exponential ones)
    assert 0.9 * sd < auc_standard_error(mean, 300, 900) < 1.3 * sd
    assert auc_standard_error(0.75, 2000, 6000) < auc_standard_error(0.75, 200, 600)  # more samples, less
    for bad, exc in ((1.5, ValueError), (float("nan"), ValueError)):
        with pytest.raises(exc, match="auc_value"):
            auc_standard_error(bad, 10, 10)
    with pytest.raises(ValueError, match="positives"):
        auc_standard_error(0.7, 0, 10)


def test_a_short_comparison_reports_both_models_and_the_teacher() -> None:
    c = compare_interactions(2, eval_batches=1)
    assert set(c.results) == {"dcn", "dot"} and c.steps == 2 and c.batch_size == 512
    assert c.eval_samples == 512 and c.positives > 0 and c.negatives > 0
    assert c.difference == pytest.approx(c.auc["dcn"] - c.auc["dot"])
    assert 0.8 < c.teacher_auc < 1.0  # the labels come from the teacher: it ranks them best
    assert [r["model"] for r in c.rows()] == [MODELS["dcn"], MODELS["dot"]]
    text = c.takeaway()
    assert all(len(line) <= 100 for line in text.splitlines())
    flat = " ".join(text.split())
    assert f"{MODELS['dcn']} {c.auc['dcn']:.3f}" in flat and f"{MODELS['dot']} {c.auc['dot']:.3f}" in flat
    assert f"scores {c.teacher_auc:.3f}" in flat and "(MEASURED)" in flat


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [({"steps": 0}, ValueError, "steps must be"),
     ({"steps": 1, "preset_name": "tiny"}, ValueError, "preset with training settings"),
     ({"steps": 1, "preset_name": "nope"}, ValueError, "preset must be one of"),
     ({"steps": 1, "eval_batches": 0}, ValueError, "eval_batches must be")],
)  # fmt: skip
def test_bad_comparisons_are_named(kwargs: dict, exc: type, words: str) -> None:
    with pytest.raises(exc) as err:
        compare_interactions(**kwargs)
    assert words in str(err.value)
