"""Public DLRMs as presets, each with its source, and how their sources train them.

:data:`PRESETS` (pick one with :func:`preset`) are the models of the papers and benchmarks the
notebooks follow (Criteo Kaggle and Terabyte, MLPerf's DLRM and DLRM-DCNv2, the seed paper's RM1-RM3);
:data:`PRESET_TRAINING` says how each source trains its model. :func:`architecture_config` is the
model the Architecture Explorer's sliders describe. Each is a
:class:`~recnotebooks.config.model.DLRMConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from recnotebooks.checks import check_choice, check_int
from recnotebooks.config.model import DCN_DEFAULTS, MAX_POOLING, MAX_WIDTH, DLRMConfig, TableConfig

__all__ = [
    "CRITEO_KAGGLE_CARDINALITIES",
    "CRITEO_TERABYTE_CARDINALITIES",
    "MLPERF_DCNV2_MULTI_HOT_SIZES",
    "PRESETS",
    "PRESET_TRAINING",
    "architecture_config",
    "multi_hot_tables",
    "preset",
    "preset_names",
    "preset_training",
]


# ----- presets: public models, each with its source ---------------------------------------
# Criteo Kaggle (Display Advertising Challenge) cardinalities C1..C26, no frequency threshold: the
# distinct values per feature that the dlrm repo's preprocessing finds (https://github.com/facebookresearch/dlrm).
CRITEO_KAGGLE_CARDINALITIES = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27,
    14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)  # fmt: skip
# Criteo Terabyte (1TB Click Logs) cardinalities with MLPerf's 40M cap per table (MLPerf Training DLRM
# reference, https://github.com/mlcommons/training).
CRITEO_TERABYTE_CARDINALITIES = (
    40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10,
    2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36,
)  # fmt: skip


# MLPerf Training's DLRM-DCNv2 multi-hot sizes: lookups per sample of each of the 26 tables, 214 in
# all, fixed per table (the reference's --multi_hot_sizes, in its README:
# https://github.com/mlcommons/training/blob/master/recommendation_v2/torchrec_dlrm/README.MD).
MLPERF_DCNV2_MULTI_HOT_SIZES = (
    3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1,
)  # fmt: skip


def _tables(rows: Sequence[int], pooling: float = 1.0, prefix: str = "C") -> tuple[TableConfig, ...]:
    return tuple(TableConfig(f"{prefix}{i + 1}", int(r), pooling) for i, r in enumerate(rows))


def multi_hot_tables(rows: Sequence[int], sizes: Sequence[int], prefix: str = "C") -> tuple[TableConfig, ...]:
    """Tables ``<prefix>1, <prefix>2, ...`` of ``rows[i]`` rows, each sample looking up ``sizes[i]``
    rows of table ``i`` (a multi-hot feature: ``pooling_factor`` = its size; draw the bags with the
    synthetic data's ``"fixed"`` distribution for exactly that many). Every size must be a whole
    number >= 1 and there must be one per table."""
    rows, sizes = tuple(rows), tuple(sizes)
    if len(sizes) != len(rows):
        raise ValueError(f"sizes must have one multi-hot size per table ({len(rows)}), got {len(sizes)}")
    sizes = tuple(check_int(f"sizes[{i}]", n, lo=1, hi=int(MAX_POOLING)) for i, n in enumerate(sizes))
    return tuple(
        TableConfig(f"{prefix}{i + 1}", int(r), float(n))
        for i, (r, n) in enumerate(zip(rows, sizes, strict=True))
    )


def _dlrm(
    name: str,
    dense: int,
    tables: tuple[TableConfig, ...],
    dim: int,
    bottom: tuple[int, ...],
    top: tuple[int, ...],
    interaction: str = "dot",
    dcn_layers: int = DCN_DEFAULTS["dcn_layers"],
    dcn_rank: int = DCN_DEFAULTS["dcn_rank"],
) -> DLRMConfig:
    """The preset ``name``: ``dense`` features, ``tables``, embedding ``dim``, the ``bottom`` and
    ``top`` MLPs' widths, the ``interaction`` (and a ``"dcn"`` one's cross layers and rank)."""
    return DLRMConfig(
        dense, tables, dim, bottom, top, interaction, name=name, dcn_layers=dcn_layers, dcn_rank=dcn_rank
    )


def _criteo_presets() -> list[DLRMConfig]:
    """One-hot DLRMs of Criteo's click logs, and one small enough to train to a useful AUC in
    seconds on a laptop CPU (``tiny``)."""
    tb, kaggle = CRITEO_TERABYTE_CARDINALITIES, CRITEO_KAGGLE_CARDINALITIES
    return [
        _dlrm("tiny", 13, _tables((1000, 5000, 20000, 500, 100, 10000, 2000, 50000)), 16, (64, 16),
              (64, 32, 1)),
        # The dlrm repo's Criteo Kaggle and Terabyte configs (https://github.com/facebookresearch/dlrm).
        _dlrm("criteo_kaggle", 13, _tables(kaggle), 16, (512, 256, 64, 16), (512, 256, 1)),
        _dlrm("criteo_terabyte", 13, _tables(tuple(min(r, 10_000_000) for r in tb)), 64, (512, 256, 64),
              (512, 512, 256, 1)),
        # MLPerf Training v1 DLRM (https://github.com/mlcommons/training).
        _dlrm("mlperf_v1", 13, _tables(tb), 128, (512, 256, 128), (1024, 1024, 512, 256, 1)),
    ]  # fmt: skip


def _dlrm_paper_presets() -> list[DLRMConfig]:
    """The DLRM paper's benchmark config (Naumov et al. 2019, https://arxiv.org/abs/1906.00091)."""
    tables = _tables((1_000_000,) * 8, 100.0, "T")
    return [_dlrm("dlrm_benchmark", 512, tables, 64, (512, 512, 64), (1024, 1024, 1024, 1))]


def _dcnv2_presets() -> list[DLRMConfig]:
    """MLPerf Training's DLRM-DCNv2 (v3.0 on) and its CPU-sized sibling."""
    tb, sizes = CRITEO_TERABYTE_CARDINALITIES, MLPERF_DCNV2_MULTI_HOT_SIZES
    # Criteo 1TB's 26 tables capped at 40M rows, multi-hot (214 lookups per sample), dim 128, bottom
    # 13-512-256-128, 3 low-rank cross layers of rank 512 over the 3,456-wide concatenation, top
    # 1024-1024-512-256-1 (the reference's README's run command: --interaction_type=dcn
    # --dcn_num_layers=3 --dcn_low_rank_dim=512, as its
    # https://github.com/mlcommons/training/blob/master/recommendation_v2/torchrec_dlrm/dlrm_main.py
    # builds TorchRec's DLRM_DCN).
    mlperf = _dlrm(
        "mlperf_dcnv2", 13, multi_hot_tables(tb, sizes), 128, (512, 256, 128), (1024, 1024, 512, 256, 1),
        interaction="dcn", dcn_layers=3, dcn_rank=512,
    )  # fmt: skip
    # Its CPU-sized sibling: the same 26 multi-hot tables (214 lookups per sample) and 3 cross
    # layers, with the rows capped at 10,000 and every width an eighth (dim 16, rank 64 of 432):
    # trains a few hundred steps here in seconds.
    small = _dlrm(
        "dcnv2_small", 13, multi_hot_tables(tuple(min(r, 10_000) for r in tb), sizes), 16, (64, 32, 16),
        (128, 128, 64, 32, 1), interaction="dcn", dcn_layers=3, dcn_rank=64,
    )  # fmt: skip
    return [mlperf, small]


#: RM1-RM3 of DeepRecSys (Gupta et al., ISCA 2020, https://arxiv.org/abs/2001.02772): name, dense
#: features, tables, rows per table, lookups per table, embedding dim, bottom and top MLPs.
_DEEPRECSYS = (
    ("rm1", 128, 8, 4_000_000, 80.0, 32, (128, 64, 32), (256, 64, 1)),
    ("rm2", 256, 32, 500_000, 120.0, 64, (256, 128, 64), (128, 64, 1)),
    ("rm3", 2560, 10, 2_000_000, 20.0, 32, (2560, 1024, 256, 32), (512, 256, 1)),
)


def _deeprecsys_presets() -> list[DLRMConfig]:
    """:data:`_DEEPRECSYS`'s models: their features concatenated (``interaction="cat"``)."""
    return [
        _dlrm(name, dense, _tables((rows,) * n, pooling, "T"), dim, bottom, top, interaction="cat")
        for name, dense, n, rows, pooling, dim, bottom, top in _DEEPRECSYS
    ]


_FAMILIES = (_criteo_presets, _dlrm_paper_presets, _dcnv2_presets, _deeprecsys_presets)

PRESETS: Mapping[str, DLRMConfig] = {cfg.name: cfg for family in _FAMILIES for cfg in family()}

#: How a preset is trained where its source says (the settings ``recnb train --preset NAME`` starts
#: from; options given on the command line win). Keys: ``batch_size`` (global), ``sparse_optimizer``
#: and ``dense_optimizer`` (names of :data:`SPARSE_OPTIMIZERS` / :data:`DENSE_OPTIMIZERS`),
#: ``sparse_lr`` and ``dense_lr``, and ``pooling`` (the synthetic data's bag-size distribution:
#: ``"fixed"`` for multi-hot tables, exactly ``pooling_factor`` lookups per table and sample).
#: ``adagrad_eps``, ``lr_warmup_steps`` and ``batch_size_multi_node`` are the source's settings
#: recorded for the reader and the cost model: the trainer here has no warm-up (MLPerf's reference
#: has none either) and its own Adagrad epsilons (the tables' 1e-8, as MLPerf's; the dense part's
#: torch.optim.Adagrad default, 1e-10).
PRESET_TRAINING: Mapping[str, Mapping[str, object]] = {
    # MLPerf's DLRM-DCNv2: exact (element-wise) Adagrad on the tables and Adagrad on the dense part,
    # eps 1e-8, no warm-up or decay (the reference's ADAGRAD_EPS and --lr_warmup_steps in its
    # dlrm_main.py, https://github.com/mlcommons/training/tree/master/recommendation_v2/torchrec_dlrm);
    # one learning rate, 0.004 at 55,296 (0.0034 at 135,168), as MLPerf's reference convergence points
    # were run (opt_base_learning_rate, recnotebooks.published.convergence) and NVIDIA's logs record it (the
    # reference README's command, at another batch, uses 0.005); the global
    # batch of NVIDIA's v3.0 submissions: 55,296 on one 8-GPU node (8 x 6,912, its 1x8x6912 config),
    # 135,168 on 8 nodes (8 x 8 x 2,112, its 8x8x2112 config, learning rate 0.0034 there), in
    # https://github.com/mlcommons/training_results_v3.0/tree/main/NVIDIA/benchmarks/dlrm_dcnv2
    "mlperf_dcnv2": {
        "batch_size": 55_296,
        "sparse_optimizer": "adagrad",
        "sparse_lr": 0.004,
        "dense_optimizer": "adagrad",
        "dense_lr": 0.004,
        "pooling": "fixed",
        "adagrad_eps": 1e-8,
        "lr_warmup_steps": 0,
        "batch_size_multi_node": 135_168,
    },
    # Its CPU-sized sibling: the same optimizers, learning rate and fixed multi-hot bags at a batch a
    # laptop trains (300 steps: held-out AUC about 0.76 on the synthetic data, measured here; the
    # trainer's default dense rate, 0.02, makes Adagrad's first step blow the cross layers' loss up).
    "dcnv2_small": {
        "batch_size": 512,
        "sparse_optimizer": "adagrad",
        "sparse_lr": 0.005,
        "dense_optimizer": "adagrad",
        "dense_lr": 0.005,
        "pooling": "fixed",
    },
}


def preset_training(name: str) -> dict[str, object]:
    """The training settings of preset ``name`` in :data:`PRESET_TRAINING` (a copy; empty for a
    preset whose source sets none); an unknown name raises ``ValueError`` naming it."""
    return dict(PRESET_TRAINING.get(check_choice("preset", name, preset_names()), {}))


def architecture_config(
    num_dense: int = 13,
    num_tables: int = 8,
    rows_per_table: int = 10**6,
    embedding_dim: int = 32,
    pooling: float = 1,
    bottom_width: int = 256,
    bottom_depth: int = 3,
    top_width: int = 256,
    top_depth: int = 3,
    interaction: str = "dot",
) -> DLRMConfig:
    """The :class:`DLRMConfig` the explorer's sliders describe.

    The bottom MLP has ``bottom_depth`` layers, ``bottom_width`` wide, the last of width
    ``embedding_dim`` (the dot interaction needs it); the top MLP ``top_depth`` layers,
    the last of width 1 (the click logit).
    """
    for name, v in (("bottom_depth", bottom_depth), ("top_depth", top_depth), ("num_tables", num_tables)):
        check_int(name, v, lo=1, hi=MAX_WIDTH)
    tables = tuple(TableConfig(f"t{i}", rows_per_table, pooling) for i in range(num_tables))
    return DLRMConfig(
        num_dense=num_dense,
        tables=tables,
        embedding_dim=embedding_dim,
        bottom_mlp=(bottom_width,) * (bottom_depth - 1) + (embedding_dim,),
        top_mlp=(top_width,) * (top_depth - 1) + (1,),
        interaction=interaction,
        name="explorer",
    )


def preset_names() -> list[str]:
    return list(PRESETS)


def preset(name: str, **overrides: object) -> DLRMConfig:
    """A preset config by name (see :data:`PRESETS`), optionally with fields replaced."""
    cfg = PRESETS[check_choice("preset", name, preset_names())]
    return cfg.replace(**overrides) if overrides else cfg
