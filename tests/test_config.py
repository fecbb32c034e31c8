"""DLRMConfig validation, presets and derived sizes against hand computation."""

from __future__ import annotations

import pytest
import torch
from _values import bad

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
        preset("rm2").with_rows_scale(bad(scale))


def test_tiny_model_forward_shape():
    m = DLRM(preset("tiny"))
    from recnotebooks.sparse import JaggedBatch

    jb = JaggedBatch.from_lists({k: [[0], [1, 2]] for k in m.config.table_names})
    out = m(torch.randn(2, 13), jb)
    assert out.shape == (2,)
    with pytest.raises(ValueError, match="num_dense"):
        m(torch.randn(2, 5), jb)


# ----- DLRM-DCNv2: the cross network's fields, sizes and presets -----------------------------------
def dcn(**kw) -> DLRMConfig:
    return small(interaction="dcn", dcn_layers=2, dcn_rank=3, bottom_mlp=(8, 5), **kw)


def test_dcn_sizes_by_hand():
    c = dcn()
    w = 5 + 2 * 4  # bottom output + 2 tables x dim 4
    assert c.interaction_output_dim == w == 13
    mlps = (3 * 8 + 8) + (8 * 5 + 5) + (13 * 6 + 6) + (6 * 1 + 1)
    assert c.cross_parameters == 2 * (w * 3 + 3 * w + w)  # V, W, b per layer
    assert c.dense_parameters == mlps + c.cross_parameters
    fl = c.flops_per_sample()
    assert fl["interaction"]["forward"] == 2 * (2 * w * 3 + 2 * 3 * w + 3 * w)  # two GEMMs, three elementwise
    assert fl["interaction"]["backward"] == 2 * fl["interaction"]["forward"]
    assert fl["top_mlp"]["forward"] == 2 * (13 * 6 + 6 * 1)
    assert small(interaction="cat", bottom_mlp=(8, 5)).cross_parameters == 0
    assert c.summary()["dcn"] == "2 layers, rank 3" and small().summary()["dcn"] is None
    # activations kept for backward: per layer V x (rank) and W(Vx)+b (width), each layer's output
    # but the last (the interaction output, counted once)
    fp = memory_footprint(c, batch_size=2)
    fp_cat = memory_footprint(small(interaction="cat", bottom_mlp=(8, 5)), batch_size=2)
    assert fp["activations"] - fp_cat["activations"] == 2 * 4 * (2 * (3 + w) + w)


def test_dcn_parameters_match_the_torch_module():
    for c in (dcn(), preset("dcnv2_small")):
        m = DLRM(c)
        assert sum(p.numel() for p in m.dense_parameters()) == c.dense_parameters
        assert sum(p.numel() for p in m.interaction.parameters()) == c.cross_parameters


def test_mlperf_dcnv2_is_mlperfs_model():
    """The model of MLPerf Training's DLRM-DCNv2 reference (mlcommons/training,
    recommendation_v2/torchrec_dlrm), counted by hand."""
    c = preset("mlperf_dcnv2")
    sizes = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)
    assert [t.pooling_factor for t in c.tables] == list(sizes) and c.lookups_per_sample == 214
    assert [t.num_rows for t in c.tables] == [t.num_rows for t in preset("mlperf_v1").tables]
    assert max(t.num_rows for t in c.tables) == 40_000_000 and c.num_tables == 26
    assert (c.embedding_dim, c.bottom_mlp, c.top_mlp) == (128, (512, 256, 128), (1024, 1024, 512, 256, 1))
    assert (c.interaction, c.dcn_layers, c.dcn_rank) == ("dcn", 3, 512)
    w = 128 + 26 * 128
    assert c.interaction_output_dim == w == 3456
    assert c.cross_parameters == 3 * (2 * 3456 * 512 + 3456) == 10_627_200
    mlps = (13 * 512 + 512 + 512 * 256 + 256 + 256 * 128 + 128) + (
        3456 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 512 + 512 + 512 * 256 + 256 + 256 + 1
    )
    assert c.dense_parameters == mlps + 10_627_200 == 16_044_545
    fl = c.flops_per_sample()
    assert fl["interaction"]["forward"] == 3 * (4 * 3456 * 512 + 3 * 3456) == 21_264_768
    assert fl["embedding"]["forward"] == 214 * 128
    # the cross layers are most of the dense compute
    dense = sum(fl[k]["forward"] + fl[k]["backward"] for k in ("bottom_mlp", "interaction", "top_mlp"))
    assert 0.6 < (fl["interaction"]["forward"] + fl["interaction"]["backward"]) / dense < 0.7
    b = c.embedding_bytes_per_sample()
    assert b["forward"] == 214 * 128 * 4 + 214 * 8


def test_dcnv2_small_has_the_same_shape_on_a_cpu_scale():
    big, s = preset("mlperf_dcnv2"), preset("dcnv2_small")
    assert [t.pooling_factor for t in s.tables] == [t.pooling_factor for t in big.tables]
    assert s.interaction == "dcn" and s.dcn_layers == big.dcn_layers and s.num_tables == big.num_tables
    assert s.sparse_parameters * 4 < 20e6 and s.dense_parameters < 1e6


@pytest.mark.parametrize(
    "kw,needle",
    [
        ({"dcn_layers": 0}, "dcn_layers must be an int in \\[1, 64\\]"),
        ({"dcn_layers": 65}, "dcn_layers"),
        ({"dcn_layers": 2.0}, "dcn_layers"),
        ({"dcn_rank": 0}, "dcn_rank"),
        ({"dcn_rank": 14}, "dcn_rank must be in \\[1, 13\\].*got 14"),  # beyond the width: not low-rank
        ({"dcn_rank": 2**21}, "dcn_rank"),
    ],
)
def test_dcn_fields_out_of_range_are_refused_naming_them(kw, needle):
    with pytest.raises((ValueError, TypeError), match=needle):
        small(interaction="dcn", bottom_mlp=(8, 5), **{"dcn_layers": 2, "dcn_rank": 3, **kw})


def test_dcn_fields_changed_without_dcn_are_refused_not_ignored():
    with pytest.raises(ValueError, match="dcn_rank=64 applies to interaction='dcn' only.*default, 512"):
        small(dcn_rank=64)
    with pytest.raises(ValueError, match="dcn_layers=2 applies to interaction='dcn' only"):
        small(interaction="cat", dcn_layers=2)
    assert small(dcn_layers=3, dcn_rank=512).interaction == "dot"  # the defaults are fine
    assert preset("dcnv2_small").replace(interaction="cat", dcn_rank=512).cross_parameters == 0


def test_multi_hot_tables_refuse_sizes_that_are_not_whole_positive_lookups():
    from recnotebooks.config import multi_hot_tables

    t = multi_hot_tables((10, 20), (3, 1), prefix="T")
    assert [(x.name, x.num_rows, x.pooling_factor) for x in t] == [("T1", 10, 3.0), ("T2", 20, 1.0)]
    with pytest.raises(ValueError, match=r"sizes\[1\] must be an int in \[1, .*got 0"):
        multi_hot_tables((10, 20), (3, 0))
    with pytest.raises(ValueError, match=r"sizes\[0\].*got -2"):
        multi_hot_tables((10, 20), (-2, 1))
    with pytest.raises(TypeError, match=r"sizes\[0\]"):
        multi_hot_tables((10,), (2.5,))
    with pytest.raises(ValueError, match="one multi-hot size per table \\(2\\), got 1"):
        multi_hot_tables((10, 20), (3,))


def test_preset_training_settings_are_mlperfs_and_name_known_optimizers():
    from recnotebooks.config import DENSE_OPTIMIZERS, PRESET_TRAINING, SPARSE_OPTIMIZERS, preset_training

    ml = preset_training("mlperf_dcnv2")
    assert ml["batch_size"] == 55_296 == 8 * 6912 and ml["batch_size_multi_node"] == 135_168 == 64 * 2112
    assert (ml["sparse_optimizer"], ml["dense_optimizer"], ml["pooling"]) == ("adagrad", "adagrad", "fixed")
    # 0.004: the learning rate of MLPerf's reference convergence points at 55,296
    assert (ml["sparse_lr"], ml["dense_lr"], ml["adagrad_eps"], ml["lr_warmup_steps"]) == (
        0.004,
        0.004,
        1e-8,
        0,
    )
    assert preset_training("tiny") == {}
    with pytest.raises(ValueError, match="preset"):
        preset_training("nope")
    for name, s in PRESET_TRAINING.items():
        assert name in PRESETS
        assert s["sparse_optimizer"] in SPARSE_OPTIMIZERS, name
        assert s["dense_optimizer"] in DENSE_OPTIMIZERS and s["pooling"] == "fixed", name
        assert all(t.pooling_factor == int(t.pooling_factor) >= 1 for t in PRESETS[name].tables)


def test_multi_hot_batches_are_sized_by_their_lookups():
    """A batch of dcnv2_small holds 214 int64 ids per sample (and a length per table), as the
    memory model counts its inputs."""
    c = preset("dcnv2_small")
    fp = memory_footprint(c, batch_size=10)
    assert fp["batch_inputs"] == 10 * (8 * (214 + 26) + 4 * (13 + 1))
    assert c.embedding_bytes_per_sample()["backward"] == 26 * 16 * 4 + 2 * 214 * 16 * 4


# ----- sizes of an element and an id: whole bytes in [1, 16], refused otherwise (issue 37) ----------
@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [({"dtype_bytes": -4}, ValueError, "dtype_bytes must be an int in [1, 16], got -4"),
     ({"dtype_bytes": 0}, ValueError, "dtype_bytes must be an int in [1, 16], got 0"),
     ({"dtype_bytes": 32}, ValueError, "dtype_bytes must be an int in [1, 16], got 32"),
     ({"dtype_bytes": 2.0}, TypeError, "dtype_bytes must be an int in [1, 16], got 2.0 (float)"),
     ({"dtype_bytes": True}, TypeError, "dtype_bytes must be an int"),
     ({"dtype_bytes": "4"}, TypeError, "dtype_bytes must be an int"),
     ({"index_bytes": -8}, ValueError, "index_bytes must be an int in [1, 16], got -8"),
     ({"index_bytes": float("nan")}, TypeError, "index_bytes must be an int")],
)  # fmt: skip
def test_embedding_bytes_refuse_sizes_that_are_not_bytes(kwargs, exc, words):
    with pytest.raises(exc) as err:
        preset("tiny").embedding_bytes_per_sample(**kwargs)
    assert words in str(err.value)


def test_embedding_bytes_count_each_element_and_id_size():
    """Every allowed size gives the byte counts of the formula, by hand (fp16 rows, int32 ids...)."""
    c = DLRMConfig(2, (TableConfig("a", 10, 2.0), TableConfig("b", 5, 1.0)), 4, (4,), (1,))
    for dtype_bytes, index_bytes in ((1, 4), (2, 4), (4, 8), (16, 16)):
        b = c.embedding_bytes_per_sample(dtype_bytes, index_bytes)
        rows = 3 * 4 * dtype_bytes  # 3 lookups of 4-wide rows
        assert b == {"forward": rows + 3 * index_bytes, "backward": 2 * 4 * dtype_bytes + 2 * rows}
        assert min(b.values()) > 0


@pytest.mark.parametrize(("which", "exc"), [("middle", ValueError), (None, ValueError), ("Top", ValueError)])
def test_mlp_layers_names_the_part(which, exc):
    with pytest.raises(exc, match=r"which must be one of \['bottom', 'top'\]"):
        preset("tiny").mlp_layers(which)
