"""DLRMConfig validation, presets and derived sizes against hand computation."""

from __future__ import annotations

import pytest
import torch

from recnotebooks.config import PRESETS, DLRMConfig, TableConfig, parse_mlp, preset
from recnotebooks.nn import DLRM
from recnotebooks.perf.memory import memory_footprint


def small(**kw) -> DLRMConfig:
    args = dict(
        num_dense=3,
        tables=(TableConfig("a", 10, 2.0), TableConfig("b", 5)),
        embedding_dim=4,
        bottom_mlp=(8, 4),
        top_mlp=(6, 1),
    )
    args.update(kw)
    return DLRMConfig(**args)


@pytest.mark.parametrize(
    "field,value,exc",
    [
        ("num_dense", 0, ValueError),
        ("num_dense", 2.5, TypeError),
        ("num_dense", True, TypeError),
        ("tables", (), ValueError),
        ("tables", ("a",), TypeError),
        ("tables", (TableConfig("a", 1), TableConfig("a", 2)), ValueError),
        ("embedding_dim", -1, ValueError),
        ("bottom_mlp", (8, 0), ValueError),
        ("bottom_mlp", "8-x", ValueError),
        ("bottom_mlp", (8, 5), ValueError),  # dot needs bottom output == embedding_dim
        ("top_mlp", (6, 2), ValueError),
        ("top_mlp", (), ValueError),
        ("interaction", "sum", ValueError),
        ("interaction_self", "yes", TypeError),
        ("pooling", "max", ValueError),
        ("name", 3, TypeError),
    ],
)
def test_invalid_fields_raise_naming_the_field(field, value, exc):
    with pytest.raises(exc, match=field):
        small(**{field: value})


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"name": "a", "num_rows": 0}, "num_rows"),
        ({"name": "a", "num_rows": 10, "pooling_factor": -1.0}, "pooling_factor"),
        ({"name": "a", "num_rows": 10, "pooling_factor": float("nan")}, "pooling_factor"),
        ({"name": "bad name", "num_rows": 10}, "name"),
    ],
)
def test_table_validation(kwargs, field):
    with pytest.raises((ValueError, TypeError), match=field):
        TableConfig(**kwargs)


def test_parse_mlp():
    assert parse_mlp("512-256-64") == (512, 256, 64)
    with pytest.raises(ValueError, match="top"):
        parse_mlp("", "top")


def test_derived_sizes_by_hand():
    c = small()
    # top input: dot over F=3 features, no self: 3 pairs + dense 4 = 7
    assert c.interaction_output_dim == 7
    assert c.dense_parameters == (3 * 8 + 8) + (8 * 4 + 4) + (7 * 6 + 6) + (6 * 1 + 1)
    assert c.sparse_parameters == 15 * 4
    assert c.lookups_per_sample == 3.0
    fl = c.flops_per_sample()
    assert fl["bottom_mlp"]["forward"] == 2 * (3 * 8 + 8 * 4)
    assert fl["bottom_mlp"]["backward"] == 2 * 3 * 8 + 4 * 8 * 4  # first layer: weight grad only
    assert fl["top_mlp"]["backward"] == 2 * fl["top_mlp"]["forward"]
    assert fl["interaction"]["forward"] == 2 * 3 * 3 * 4
    assert fl["embedding"]["forward"] == 3 * 4
    assert c.embedding_bytes_per_sample()["forward"] == 3 * 4 * 4 + 3 * 8
    mem = memory_footprint(c, "rowwise_adagrad", "adagrad", batch_size=2)
    assert mem["embedding_optimizer_state"] == 15 * 4
    assert mem["dense_optimizer_state"] == c.dense_parameters * 4
    assert mem["total"] == sum(v for k, v in mem.items() if k != "total")
    cat = small(interaction="cat", bottom_mlp=(8, 5))
    assert cat.interaction_output_dim == 5 + 2 * 4
    selfdot = small(interaction_self=True)
    assert selfdot.interaction_output_dim == 4 + 6


def test_parameter_counts_match_model():
    c = small()
    m = DLRM(c)
    dense = sum(p.numel() for p in m.dense_parameters())
    assert dense == c.dense_parameters
    assert m.embeddings.weight.numel() == c.sparse_parameters


def test_presets_are_valid_and_match_reference_sizes():
    assert set(PRESETS) >= {"tiny", "criteo_kaggle", "criteo_terabyte", "mlperf_v1",
                            "dlrm_benchmark", "rm1", "rm2", "rm3"}  # fmt: skip
    kaggle = preset("criteo_kaggle")
    assert kaggle.total_rows == 33_762_577  # the 26 Kaggle cardinalities of the dlrm repo, summed
    assert abs(kaggle.sparse_parameters * 4 / 1e9 - 2.16) < 0.01
    ml = preset("mlperf_v1")
    assert abs(ml.sparse_parameters * 4 / 1e9 - 104.54) < 0.5
    assert preset("rm3").mlp_layers("bottom")[0] == (2560, 2560)
    with pytest.raises(ValueError, match="preset"):
        preset("nope")
    assert preset("tiny", embedding_dim=16).name == "tiny"


def test_with_max_rows():
    c = preset("criteo_kaggle").with_max_rows(1000)
    assert max(t.num_rows for t in c.tables) == 1000
    with pytest.raises(ValueError, match="max_rows"):
        c.with_max_rows(0)


@pytest.mark.parametrize("scale", [0.1, 1, 3, 100])
def test_with_rows_scale_multiplies_every_table(scale: float):
    base = preset("rm2")
    c = base.with_rows_scale(scale)
    assert [t.num_rows for t in c.tables] == [max(1, round(t.num_rows * scale)) for t in base.tables]
    assert [t.pooling_factor for t in c.tables] == [t.pooling_factor for t in base.tables]
    assert c.name == ("rm2" if scale == 1 else f"rm2 x{scale:g} rows")
    assert small().with_rows_scale(1e-9).total_rows == 2  # at least one row per table


@pytest.mark.parametrize(
    ("scale", "exc"),
    [(0, ValueError), (-1, ValueError), (float("nan"), ValueError), (1e30, ValueError), (True, TypeError),
     ("2", TypeError)],
)  # fmt: skip
def test_with_rows_scale_rejects_bad_scales(scale: object, exc: type[Exception]):
    with pytest.raises(exc, match="rows_scale"):
        preset("rm2").with_rows_scale(scale)  # type: ignore[arg-type]


def test_tiny_model_forward_shape():
    m = DLRM(preset("tiny"))
    from recnotebooks.sparse import JaggedBatch

    jb = JaggedBatch.from_lists({k: [[0], [1, 2]] for k in m.config.table_names})
    out = m(torch.randn(2, 13), jb)
    assert out.shape == (2,)
    with pytest.raises(ValueError, match="num_dense"):
        m(torch.randn(2, 5), jb)
