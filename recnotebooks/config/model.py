"""Model configuration: :class:`DLRMConfig`, :class:`TableConfig` and the sizes they imply.

A ``DLRMConfig`` describes a DLRM (Naumov et al. 2019) the way the seed paper (Acun et al.,
HPCA 2021) varies it: number of dense features, embedding tables (rows and pooling factor,
i.e. lookups per sample), embedding dimension, bottom and top MLP widths, the feature
interaction and the batch-independent quantities the efficiency model needs (parameter
counts, FLOPs per sample, embedding bytes per sample). Its memory is the model's
(:func:`recnotebooks.perf.memory.memory_footprint`).

MLP widths list layer *outputs* after the input width, as the papers' model tables do, so
``bottom_mlp=(512, 256, 64)`` with 13 dense features is the dlrm repo's ``13-512-256-64``
(https://github.com/facebookresearch/dlrm, which writes the input width first). The public
models, each with its source, are in :mod:`recnotebooks.config.presets`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from recnotebooks.checks import check_bool, check_choice, check_float, check_int, check_str, show

__all__ = [
    "DCN_DEFAULTS",
    "CACHE_REPLACEMENT_POLICIES",
    "DENSE_OPTIMIZERS",
    "INTERACTIONS",
    "POOLINGS",
    "SPARSE_OPTIMIZERS",
    "DLRMConfig",
    "TableConfig",
    "parse_mlp",
    "state_floats_per_parameter",
    "state_floats_per_row",
]

INTERACTIONS = ("dot", "cat", "dcn")
POOLINGS = ("sum", "mean")
#: Optimizer state of each sparse (embedding) optimizer, in fp32 floats ``(per row, per element)``:
#: plain SGD keeps none; row-wise Adagrad (FBGEMM's, :class:`recnotebooks.nn.optim.RowWiseAdagrad`)
#: one sum of squared gradients per row; exact Adagrad (``torch.optim.Adagrad``'s update on the
#: rows looked up, :class:`recnotebooks.nn.optim.ExactAdagrad`) one per element: a second table the
#: size of the table. The one home of the sparse optimizers' names: ``nn.optim`` implements them,
#: ``train`` trains with them, ``perf`` prices their state (this module is the one all three may
#: import).
_SPARSE_STATE_FLOATS = {"sgd": (0, 0), "rowwise_adagrad": (1, 0), "adagrad": (0, 1)}
#: The sparse optimizers there are (:func:`recnotebooks.nn.optim.make_sparse_optimizer`).
SPARSE_OPTIMIZERS = tuple(_SPARSE_STATE_FLOATS)
#: Optimizer state of each dense (MLP) optimizer, in floats per parameter: Adagrad's sum of
#: squares, Adam's two moments.
_DENSE_STATE_FLOATS = {"sgd": 0, "adagrad": 1, "adam": 2}
#: The dense optimizers there are (``torch.optim``'s, as
#: :func:`recnotebooks.nn.optim.make_dense_optimizer` builds them).
DENSE_OPTIMIZERS = tuple(_DENSE_STATE_FLOATS)
#: The cache replacement policies there are, by name: the one home of their names.
#: ``cache.policies.CachePolicy`` runs each (``cache.policies.POLICIES``); a plan's cached tables
#: and the hit-rate model know all but ``"lfu_cached"`` (``plan.CACHE_POLICIES``). Here because
#: ``cache`` and ``plan`` may both import this module and not each other.
CACHE_REPLACEMENT_POLICIES = ("lru", "lfu", "lfu_cached", "static", "setassoc")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
#: Most rows a table may have: 2^48 (an id still fits an int64 index after the fused
#: collection adds its table's row offset, and row counts stay exact as floats).
MAX_TABLE_ROWS = 2**48
#: Most lookups per table per sample; bigger values are typos (1e30 overflowed int64).
MAX_POOLING = 1e6
#: Widest MLP layer, dense input or embedding dimension allowed (2^20: a 2^20 x 2^20
#: layer is already 4 TiB of fp32 weights).
MAX_WIDTH = 2**20
#: Most cross layers of a ``"dcn"`` interaction (DCN-V2's papers and MLPerf use 2-4).
MAX_DCN_LAYERS = 64
#: Most bytes of one table element or one id (``dtype_bytes``, ``index_bytes``): 16, a complex128 or
#: an int128; :func:`recnotebooks.perf.memory.memory_footprint` takes the same range.
MAX_ELEMENT_BYTES = 16
#: The cross network's defaults (MLPerf's DLRM-DCNv2: 3 layers of rank 512).
DCN_DEFAULTS = {"dcn_layers": 3, "dcn_rank": 512}


def state_floats_per_row(sparse_optimizer: str, embedding_dim: float) -> float:
    """Floats of optimizer state ``sparse_optimizer`` keeps per embedding row ``embedding_dim``
    wide: 0 for ``"sgd"``, 1 for ``"rowwise_adagrad"``, ``embedding_dim`` for ``"adagrad"`` (exact,
    one per element). ``embedding_dim`` is a number > 0 (a column-wise shard's share of a row may
    be fractional in the cost model). Another optimizer name raises ``ValueError`` naming it and
    the names allowed (:data:`SPARSE_OPTIMIZERS`).

    >>> [state_floats_per_row(name, 128) for name in SPARSE_OPTIMIZERS]
    [0.0, 1.0, 128.0]
    """
    per_row, per_element = _SPARSE_STATE_FLOATS[
        check_choice("sparse_optimizer", sparse_optimizer, SPARSE_OPTIMIZERS)
    ]
    dim = check_float("embedding_dim", embedding_dim, lo=0.0, lo_open=True)
    return per_row + per_element * dim


def state_floats_per_parameter(dense_optimizer: str) -> int:
    """Floats of optimizer state ``dense_optimizer`` keeps per dense parameter (one of
    :data:`DENSE_OPTIMIZERS`; another name raises ``ValueError`` naming it)."""
    return _DENSE_STATE_FLOATS[check_choice("dense_optimizer", dense_optimizer, DENSE_OPTIMIZERS)]


@dataclass(frozen=True)
class TableConfig:
    """One embedding table: ``num_rows`` rows, ``pooling_factor`` mean lookups per sample."""

    name: str
    num_rows: int
    pooling_factor: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(
                f"TableConfig.name must be an identifier-like string (letters, digits, _ . -), "
                f"got {show(self.name)}"
            )
        rows = check_int(f"TableConfig({self.name}).num_rows", self.num_rows, lo=1, hi=MAX_TABLE_ROWS)
        pool = check_float(
            f"TableConfig({self.name}).pooling_factor", self.pooling_factor, lo=0.0, hi=MAX_POOLING
        )
        object.__setattr__(self, "num_rows", rows)
        object.__setattr__(self, "pooling_factor", pool)


def parse_mlp(spec: str | Sequence[int], name: str = "mlp") -> tuple[int, ...]:
    """Parse an MLP given as ``"512-256-64"`` or a sequence of ints into layer widths.

    A string holds positive ints in ASCII digits ``0-9`` joined by ``-`` (full-width ``"５１２"``
    or superscript digits are refused, though Python's ``int()`` reads some of them), each in
    ``[1, MAX_WIDTH]``."""
    if isinstance(spec, str):
        parts = [p.strip() for p in spec.strip().split("-")]
        if not spec.strip() or any(not (p.isascii() and p.isdigit()) for p in parts):
            raise ValueError(
                f"{name} must look like '512-256-64' (positive ints in ASCII digits 0-9 joined by '-'), "
                f"got {show(spec)}"
            )
        widths = tuple(int(p) for p in parts)
    else:
        widths = tuple(spec)
    if not widths:
        raise ValueError(f"{name} must have at least one layer, got {spec!r}")
    return tuple(check_int(f"{name}[{i}]", w, lo=1, hi=MAX_WIDTH) for i, w in enumerate(widths))


@dataclass(frozen=True)
class DLRMConfig:
    """Architecture of a DLRM; validated on construction.

    Args:
        num_dense: dense (continuous) input features.
        tables: embedding tables (sparse features), one bag per table and sample.
        embedding_dim: width of every embedding row.
        bottom_mlp: bottom MLP layer outputs after ``num_dense`` inputs.
        top_mlp: top MLP layer outputs; the last must be 1 (the click logit).
        interaction: ``"dot"`` (pairwise dot products, DLRM), ``"cat"`` (concatenation) or
            ``"dcn"`` (DCN-V2's low-rank cross network over the concatenation, as MLPerf's
            DLRM-DCNv2: ``x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l``).
        interaction_self: for ``"dot"``, include each feature's dot with itself.
        pooling: ``"sum"`` or ``"mean"`` pooling of a bag's rows.
        name: label used in tables and charts.
        dcn_layers: for ``"dcn"``, the number of cross layers, in ``[1, MAX_DCN_LAYERS]``.
        dcn_rank: for ``"dcn"``, the rank ``r`` of each cross matrix ``W_l V_l`` (``V_l``: width
            -> r, ``W_l``: r -> width), in ``[1, width]`` where width is
            ``bottom_mlp[-1] + num_tables * embedding_dim`` (beyond it the factorisation is no
            longer low-rank). With another interaction both must keep their defaults (3 and 512):
            a changed value would have no effect, so it is refused rather than ignored.
    """

    num_dense: int
    tables: tuple[TableConfig, ...]
    embedding_dim: int
    bottom_mlp: tuple[int, ...]
    top_mlp: tuple[int, ...]
    interaction: str = "dot"
    interaction_self: bool = False
    pooling: str = "sum"
    name: str = "custom"
    dcn_layers: int = DCN_DEFAULTS["dcn_layers"]
    dcn_rank: int = DCN_DEFAULTS["dcn_rank"]

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_dense", check_int("num_dense", self.num_dense, lo=1, hi=MAX_WIDTH))
        if not isinstance(self.tables, (tuple, list)) or len(self.tables) == 0:
            raise ValueError(f"tables must be a non-empty sequence of TableConfig, got {self.tables!r}")
        for i, t in enumerate(self.tables):
            if not isinstance(t, TableConfig):
                raise TypeError(f"tables[{i}] must be a TableConfig, got {type(t).__name__}")
        object.__setattr__(self, "tables", tuple(self.tables))
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"tables must have unique names, duplicated: {dup}")
        dim = check_int("embedding_dim", self.embedding_dim, lo=1, hi=MAX_WIDTH)
        object.__setattr__(self, "embedding_dim", dim)
        object.__setattr__(self, "bottom_mlp", parse_mlp(self.bottom_mlp, "bottom_mlp"))
        object.__setattr__(self, "top_mlp", parse_mlp(self.top_mlp, "top_mlp"))
        check_choice("interaction", self.interaction, INTERACTIONS)
        check_choice("pooling", self.pooling, POOLINGS)
        object.__setattr__(self, "interaction_self", check_bool("interaction_self", self.interaction_self))
        if self.top_mlp[-1] != 1:
            raise ValueError(f"top_mlp must end in 1 (the click logit), got {self.top_mlp!r}")
        if self.interaction == "dot" and self.bottom_mlp[-1] != self.embedding_dim:
            raise ValueError(
                "bottom_mlp must end in embedding_dim for the dot interaction: "
                f"got bottom_mlp[-1]={self.bottom_mlp[-1]}, embedding_dim={self.embedding_dim}"
            )
        check_str("name", self.name, nonempty=False)
        self._check_dcn()

    def _check_dcn(self) -> None:
        """The cross network's layers and rank: in range for ``"dcn"``, at their defaults otherwise."""
        layers = check_int("dcn_layers", self.dcn_layers, lo=1, hi=MAX_DCN_LAYERS)
        rank = check_int("dcn_rank", self.dcn_rank, lo=1, hi=MAX_WIDTH)
        object.__setattr__(self, "dcn_layers", layers)
        object.__setattr__(self, "dcn_rank", rank)
        if self.interaction != "dcn":
            for field, default in DCN_DEFAULTS.items():
                if getattr(self, field) != default:
                    raise ValueError(
                        f"{field}={getattr(self, field)} applies to interaction='dcn' only (with "
                        f"interaction={self.interaction!r} it must keep its default, {default})"
                    )
            return
        width = self.interaction_output_dim
        if rank > width:
            raise ValueError(
                f"dcn_rank must be in [1, {width}] (the cross layers' width, bottom_mlp[-1] + num_tables x "
                f"embedding_dim = {self.bottom_mlp[-1]} + {self.num_tables} x {self.embedding_dim}: a rank "
                f"beyond it is no longer low-rank), got {rank}"
            )

    # ----- shapes -------------------------------------------------------------------
    @property
    def num_tables(self) -> int:
        return len(self.tables)

    @property
    def table_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tables)

    @property
    def total_rows(self) -> int:
        return sum(t.num_rows for t in self.tables)

    @property
    def num_interaction_features(self) -> int:
        """Vectors entering the interaction: the bottom MLP output plus one per table."""
        return self.num_tables + 1

    @property
    def interaction_output_dim(self) -> int:
        """Width of the top MLP input (for ``"dcn"``, the cross layers' width too: the
        concatenation ``bottom_mlp[-1] + num_tables * embedding_dim``)."""
        f, d = self.num_interaction_features, self.embedding_dim
        if self.interaction in ("cat", "dcn"):
            return self.bottom_mlp[-1] + self.num_tables * d
        pairs = f * (f + 1) // 2 if self.interaction_self else f * (f - 1) // 2
        return d + pairs

    def mlp_layers(self, which: str) -> list[tuple[int, int]]:
        """(in, out) widths of each linear layer of the ``"bottom"`` or ``"top"`` MLP."""
        if check_choice("which", which, ("bottom", "top")) == "bottom":
            ins, outs = self.num_dense, self.bottom_mlp
        else:
            ins, outs = self.interaction_output_dim, self.top_mlp
        layers = []
        for o in outs:
            layers.append((ins, o))
            ins = o
        return layers

    # ----- parameters ---------------------------------------------------------------
    @property
    def cross_parameters(self) -> int:
        """Weights and biases of a ``"dcn"`` interaction's cross layers (0 for another): per
        layer ``V`` (width x rank), ``W`` (rank x width) and ``b`` (width)."""
        if self.interaction != "dcn":
            return 0
        w, r = self.interaction_output_dim, self.dcn_rank
        return self.dcn_layers * (2 * w * r + w)

    @property
    def dense_parameters(self) -> int:
        """MLP weights and biases, and the cross layers' (:attr:`cross_parameters`)."""
        mlps = sum(i * o + o for w in ("bottom", "top") for i, o in self.mlp_layers(w))
        return mlps + self.cross_parameters

    @property
    def sparse_parameters(self) -> int:
        """Embedding-table entries (rows x dim)."""
        return self.total_rows * self.embedding_dim

    @property
    def parameters(self) -> int:
        return self.dense_parameters + self.sparse_parameters

    # ----- work per sample ----------------------------------------------------------
    @property
    def lookups_per_sample(self) -> float:
        return sum(t.pooling_factor for t in self.tables)

    def flops_per_sample(self) -> dict[str, dict[str, float]]:
        """FLOPs per sample by component and pass (multiply-add = 2 FLOPs).

        Backward of a linear layer is 2x forward (input and weight gradients), except the
        first bottom layer, whose input (the dense features) needs no gradient. A ``"dcn"``
        cross layer of width ``w`` and rank ``r`` is two GEMMs (``2wr`` FLOPs each) and three
        elementwise ops on ``w`` (bias add, product with ``x_0``, residual add) forward, and
        twice that backward (its input ``x_0`` needs a gradient: the embeddings'). Embedding
        forward counts the pooling adds; embedding backward counts the scatter of the pooled
        gradient into each looked-up row; the optimizer update is counted as memory traffic
        (see :meth:`embedding_bytes_per_sample`), not FLOPs.
        """
        d = self.embedding_dim

        def mlp(which: str) -> dict[str, float]:
            fwd = bwd = 0.0
            for k, (i, o) in enumerate(self.mlp_layers(which)):
                f = 2.0 * i * o
                fwd += f
                bwd += f if (which == "bottom" and k == 0) else 2 * f
            return {"forward": fwd, "backward": bwd}

        f = self.num_interaction_features
        inter_fwd = 2.0 * f * f * d if self.interaction == "dot" else 0.0  # batched X X^T
        if self.interaction == "dcn":  # per cross layer: x V^T, (.) W^T; + b, * x_0, + x_l
            w, r = self.interaction_output_dim, self.dcn_rank
            inter_fwd = self.dcn_layers * (2.0 * w * r * 2 + 3.0 * w)
        emb_fwd = self.lookups_per_sample * d
        return {
            "embedding": {"forward": emb_fwd, "backward": emb_fwd},
            "bottom_mlp": mlp("bottom"),
            "interaction": {"forward": inter_fwd, "backward": 2 * inter_fwd},
            "top_mlp": mlp("top"),
        }

    def total_flops_per_sample(self) -> float:
        """Forward plus backward FLOPs per sample, all components."""
        return sum(v for c in self.flops_per_sample().values() for v in c.values())

    def embedding_bytes_per_sample(self, dtype_bytes: int = 4, index_bytes: int = 8) -> dict[str, float]:
        """Bytes moved per sample by the embeddings.

        ``forward``: rows read plus indices; ``backward``: pooled gradient written per table
        and rows read-modified-written by the sparse SGD update (upper bound: assumes every
        lookup is a distinct row). ``dtype_bytes`` (of a table element) and ``index_bytes`` (of
        an id) are whole numbers of bytes in ``[1, 16]`` (:data:`MAX_ELEMENT_BYTES`); anything else
        raises ``TypeError``/``ValueError`` naming the parameter (a negative size once gave
        negative byte counts).
        """
        dtype_bytes = check_int("dtype_bytes", dtype_bytes, lo=1, hi=MAX_ELEMENT_BYTES)
        index_bytes = check_int("index_bytes", index_bytes, lo=1, hi=MAX_ELEMENT_BYTES)
        rows = self.lookups_per_sample * self.embedding_dim * dtype_bytes
        fwd = rows + self.lookups_per_sample * index_bytes
        bwd = self.num_tables * self.embedding_dim * dtype_bytes + 2 * rows
        return {"forward": fwd, "backward": bwd}

    def arithmetic_intensity(self) -> float:
        """Total FLOPs per embedding byte per sample (low = memory bound)."""
        b = self.embedding_bytes_per_sample()
        return self.total_flops_per_sample() / max(b["forward"] + b["backward"], 1.0)

    # ----- variants -----------------------------------------------------------------
    def replace(self, **changes: object) -> DLRMConfig:
        """A validated copy with fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def with_max_rows(self, max_rows: int) -> DLRMConfig:
        """A copy with every table capped at ``max_rows`` rows (as MLPerf caps Terabyte)."""
        max_rows = check_int("max_rows", max_rows, lo=1)
        tables = tuple(dataclasses.replace(t, num_rows=min(t.num_rows, max_rows)) for t in self.tables)
        return self.replace(tables=tables)

    def with_rows_scale(self, rows_scale: float) -> DLRMConfig:
        """A copy with every table's rows multiplied by ``rows_scale`` (rounded, at least 1 row),
        named ``"<name> x<rows_scale> rows"``: the same model with bigger (or smaller) tables."""
        rows_scale = check_float("rows_scale", rows_scale, lo=0, lo_open=True)
        if rows_scale == 1:
            return self
        largest = max(t.num_rows for t in self.tables)
        if largest * rows_scale > MAX_TABLE_ROWS:
            raise ValueError(
                f"rows_scale must be <= {MAX_TABLE_ROWS / largest:g} for {self.name} (its largest table has "
                f"{largest:,} rows, at most {MAX_TABLE_ROWS:,} allowed), got {rows_scale:g}"
            )
        tables = tuple(
            dataclasses.replace(t, num_rows=max(1, round(t.num_rows * rows_scale))) for t in self.tables
        )
        return self.replace(tables=tables, name=f"{self.name} x{rows_scale:g} rows")

    def summary(self) -> dict[str, object]:
        """Plain-data summary for tables, JSON and charts."""
        fl = self.flops_per_sample()
        return {
            "name": self.name,
            "num_dense": self.num_dense,
            "num_tables": self.num_tables,
            "total_rows": self.total_rows,
            "embedding_dim": self.embedding_dim,
            "lookups_per_sample": self.lookups_per_sample,
            "bottom_mlp": "-".join(map(str, (self.num_dense, *self.bottom_mlp))),
            "top_mlp": "-".join(map(str, (self.interaction_output_dim, *self.top_mlp))),
            "interaction": self.interaction,
            "dcn": f"{self.dcn_layers} layers, rank {self.dcn_rank}" if self.interaction == "dcn" else None,
            "dense_parameters": self.dense_parameters,
            "sparse_parameters": self.sparse_parameters,
            "flops_per_sample": {k: v["forward"] + v["backward"] for k, v in fl.items()},
            "embedding_bytes_per_sample": self.embedding_bytes_per_sample(),
        }
