"""The configuration of a generative recommender: :class:`HSTUConfig`.

Where a DLRM pools a bag of ids per table for each *sample*, a generative recommender looks
up one id per table for each *event* of a user's history (a track, its album, its artist)
and sums them into one token of width ``dim``; a stack of HSTU layers
(:mod:`recnotebooks.nn.hstu`) reads the tokens in order, and a top MLP turns each position's
output into the logit of the next action. The history length plays the part DLRM's pooling
factor plays: the work per sample grows with it, the attention's with its square.

>>> from recnotebooks.config import TableConfig
>>> cfg = HSTUConfig((TableConfig("item", 1000), TableConfig("artist", 50)), dim=32, num_layers=2, heads=2)
>>> cfg.embedding_parameters, cfg.head_dims
(33696, (16, 16))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from recnotebooks.checks import check_bool, check_int, check_str, check_type, show
from recnotebooks.config.model import TableConfig, parse_mlp

__all__ = [
    "HSTUConfig",
    "HSTU_PRESETS",
    "ACTIONS",
    "hstu_preset",
    "DLRMV4_TABLES",
    "DLRMV4_SOURCE",
    "DLRMV4_TABLES_SOURCE",
    "HSTU_PRESET_TRAINING",
    "hstu_preset_training",
]

#: What a token says about the event before it, as the model reads it: no event before
#: (the first of a history), an event not liked, an event liked (``listen_plus``).
ACTIONS = ("none", "not_liked", "liked")


@dataclass(frozen=True)
class HSTUConfig:
    """A generative recommender: embedding tables (one lookup each per event), the HSTU stack
    and the top MLP.

    Attributes:
        tables: one :class:`TableConfig` per id of an event (their ``pooling_factor`` is 1:
            one lookup per event).
        context: names of tables looked up once per *history*, not per event (a user's id,
            their crosses: the "contextual features" of MLPerf's DLRMv4, one token each at the
            head of the history, through a linear map of its own: ``dim x dim`` weights and
            ``dim`` biases a context table, counted in :attr:`dense_parameters`); the rest are
            looked up for every event.
        dim: the token width, every table's embedding dimension (MLPerf's DLRMv4: 512).
        num_layers: HSTU layers (DLRMv4: 5).
        heads: attention heads; must divide ``dim`` (DLRMv4: 4).
        qk_dim, v_dim: query/key and value columns a head (default ``dim // heads``; DLRMv4: 128).
        max_len: the longest history in events (DLRMv4: 4,096); the stack reads up to
            :attr:`sequence_len` tokens, the contextual ones with them, and its attention
            divides by that.
        relative_bias: add the relative attention bias by position and time gap.
        top_mlp: hidden widths of the MLP from a position's output to its logit.
        name: what to call it.
    """

    tables: tuple[TableConfig, ...]
    context: tuple[str, ...] = ()
    dim: int = 64
    num_layers: int = 2
    heads: int = 2
    qk_dim: int | None = None
    v_dim: int | None = None
    max_len: int = 512
    relative_bias: bool = True
    top_mlp: tuple[int, ...] = (64,)
    name: str = "custom"

    def __post_init__(self) -> None:
        tables = tuple(self.tables) if isinstance(self.tables, (list, tuple)) else None
        if not tables or any(not isinstance(t, TableConfig) for t in tables):
            raise TypeError(f"tables must be a non-empty sequence of TableConfig, got {show(self.tables)}")
        if len({t.name for t in tables}) != len(tables):
            raise ValueError(f"table names must be unique, got {[t.name for t in tables]}")
        object.__setattr__(self, "tables", tables)
        context = tuple(self.context) if isinstance(self.context, (list, tuple)) else None
        names = [t.name for t in tables]
        if context is None or any(c not in names for c in context) or len(set(context)) != len(context):
            raise ValueError(
                f"context must name tables of this config ({names}), each once, got {show(self.context)}"
            )
        if len(context) == len(names):
            raise ValueError("context must leave at least one table looked up per event")
        object.__setattr__(self, "context", context)
        dim = check_int("dim", self.dim, lo=1, hi=65_536)
        heads = check_int("heads", self.heads, lo=1)
        if dim % heads:
            raise ValueError(f"heads must divide dim ({dim}), got heads={heads}")
        check_int("num_layers", self.num_layers, lo=1, hi=1_000)
        for name in ("qk_dim", "v_dim"):
            value = getattr(self, name)
            object.__setattr__(self, name, dim // heads if value is None else check_int(name, value, lo=1))
        check_int("max_len", self.max_len, lo=1, hi=1_048_576)
        check_bool("relative_bias", self.relative_bias)
        object.__setattr__(self, "top_mlp", parse_mlp(self.top_mlp, "top_mlp"))
        check_str("name", self.name)

    @property
    def head_dims(self) -> tuple[int, int]:
        """``(qk_dim, v_dim)`` of a head."""
        return int(self.qk_dim or 0), int(self.v_dim or 0)

    @property
    def sequence_len(self) -> int:
        """The longest sequence the HSTU stack reads: :attr:`max_len` events and a contextual
        token per :attr:`context` table ahead of them (the reference's ``max_seq_len`` plus its
        ``max_contextual_seq_len``)."""
        return self.max_len + len(self.context)

    @property
    def event_tables(self) -> tuple[TableConfig, ...]:
        """The tables looked up once per event (all but :attr:`context`)."""
        return tuple(t for t in self.tables if t.name not in self.context)

    @property
    def embedding_parameters(self) -> int:
        """Rows times ``dim`` over the tables, plus the action embedding (one row per action)."""
        return (sum(t.num_rows for t in self.tables) + len(ACTIONS)) * self.dim

    @property
    def layer_parameters(self) -> int:
        """Weights and biases of one HSTU layer: the U, V, Q, K projection, the output
        projection, and the relative bias (a weight per distance and per time bucket)."""
        qk, v = self.head_dims
        h = self.heads
        uvqk = (self.dim + 1) * (2 * h * v + 2 * h * qk)
        out = (h * v + 1) * self.dim
        bias = self.sequence_len + 33 if self.relative_bias else 0  # 33: nn.hstu.TIME_BUCKETS + 1
        return uvqk + out + bias

    @property
    def dense_parameters(self) -> int:
        """Every parameter outside the tables: the HSTU layers, the top MLP and the contextual
        tokens' linear maps (``(dim + 1) x dim`` a context table)."""
        widths = (self.dim, *self.top_mlp, 1)
        mlp = sum((a + 1) * b for a, b in zip(widths[:-1], widths[1:], strict=True))
        context = len(self.context) * (self.dim + 1) * self.dim
        return self.num_layers * self.layer_parameters + mlp + context

    def summary(self) -> dict[str, object]:
        """Plain-data summary for tables, JSON and reports (``kind``: ``"hstu"``)."""
        return {
            "kind": "hstu", "name": self.name, "num_tables": len(self.tables),
            "total_rows": sum(t.num_rows for t in self.tables), "embedding_dim": self.dim,
            "context": list(self.context), "num_layers": self.num_layers, "heads": self.heads,
            "head_dims": list(self.head_dims), "max_len": self.max_len,
            "top_mlp": "-".join(map(str, (self.dim, *self.top_mlp, 1))),
            "dense_parameters": self.dense_parameters, "embedding_parameters": self.embedding_parameters,
        }  # fmt: skip

    def replace(self, **changes: object) -> HSTUConfig:
        """The same model with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _small() -> HSTUConfig:
    """A generative recommender a laptop trains in a minute on the synthetic listening log
    (:class:`recnotebooks.data.SyntheticListening` with its default catalogue)."""
    tables = (TableConfig("item", 100_000), TableConfig("album", 10_000), TableConfig("artist", 2_000))
    return HSTUConfig(tables, dim=64, num_layers=2, heads=2, max_len=512, top_mlp=(64,), name="hstu_small")


#: MLPerf Training's DLRMv4 reference as read: mlcommons/training pull request #889 at its head of
#: 2026-08-08, the README's model section and settings table (this address) and the tables its
#: configs build for Yambda-5B (:data:`DLRMV4_TABLES_SOURCE`).
DLRMV4_SOURCE = "https://github.com/mlcommons/training/blob/a67b8459467c551c08f8566d68a8e4e1659e6bd7/recommendation_v4/README.MD"
DLRMV4_TABLES_SOURCE = (
    "https://github.com/mlcommons/training/blob/a67b8459467c551c08f8566d68a8e4e1659e6bd7/"
    "recommendation_v4/generative_recommenders/dlrm_v4/configs.py"
)
#: Its tables (rows each, every one of dim 512): the listened item, its artist and album, the
#: user, and seven hashed crosses of them with the hour and the organic flag.
DLRMV4_TABLES = {
    "item_id": 9_390_624, "artist_id": 1_293_395, "album_id": 3_367_692, "uid": 1_000_001,
    "user_x_artist": 100_000_000, "user_x_album": 40_000_000, "user_x_hour": 24_000_000,
    "item_x_hour": 40_000_000, "artist_x_hour": 32_000_000, "user_x_is_organic": 2_000_000,
    "user_x_artist_x_hour": 40_000_000,
}  # fmt: skip


def _dlrmv4() -> HSTUConfig:
    """MLPerf's DLRMv4 (:data:`DLRMV4_SOURCE`): the 11 tables of :data:`DLRMV4_TABLES` (293,051,712
    rows of dim 512: 150 B parameters, 600 GB in fp32; the item, artist and album looked up per event,
    the user and the seven crosses once per history), an HSTU stack of dim 512 with 4 heads of
    128 query/key and 128 value columns over histories of up to 4,096 events, and the prediction
    head's ``512 -> 512 -> 1``. The layers: 3, as the reference's settings table and its gin file
    set ``HSTU_NUM_LAYERS`` at that head (its configs' own default, and the issue that asked for
    this model, say 5; ``replace(num_layers=5)`` prices that). The contextual tokens' linear maps
    (the reference's ``ContextualPreprocessor``) are counted; left out here, priced by neither the
    model nor this config: the content MLP and positional encoder of that preprocessor, the item
    MLP and the timestamp postprocessor (small dense layers beside the stack)."""
    tables = tuple(TableConfig(name, rows) for name, rows in DLRMV4_TABLES.items())
    context = tuple(n for n in DLRMV4_TABLES if n not in ("item_id", "artist_id", "album_id"))
    return HSTUConfig(tables, context, dim=512, num_layers=3, heads=4, qk_dim=128, v_dim=128, max_len=4096,
                      top_mlp=(512,), name="dlrmv4")  # fmt: skip


#: Generative recommenders by name: MLPerf's DLRMv4 and a sibling a laptop trains.
HSTU_PRESETS = {"hstu_small": _small, "dlrmv4": _dlrmv4}


#: How ``recnb train --preset NAME`` trains a generative recommender where the command line does
#: not say (its options win): histories a batch, steps, the optimizers and learning rates, and the
#: dense gradients' clipping norm. The optimizers are MLPerf's DLRMv4 pairing, row-wise Adagrad on
#: the tables and Adam on the rest (betas 0.95/0.999, eps 1e-8, gradients clipped to norm 1.0: the
#: reference's gin file, https://github.com/mlcommons/training/blob/a67b8459467c551c08f8566d68a8e4e1659e6bd7/recommendation_v4/generative_recommenders/dlrm_v4/train/gin/yambda_5b.gin);
#: its learning rates (1e-6 both, warmed up over 24,000 steps, at 8,192 histories a batch) are
#: for 5 B events, so ``hstu_small``'s are this project's: 0.05 on the tables, 2e-3 on the dense
#: part, no warm-up, chosen here on the synthetic listening log (100 steps of 32 histories: a
#: held-out AUC about 0.75 in under a minute on 2 CPU cores; 1e-6 learns nothing in 100 steps).
HSTU_PRESET_TRAINING: dict[str, dict[str, object]] = {
    "hstu_small": {
        "batch_size": 32,
        "steps": 100,
        "sparse_optimizer": "rowwise_adagrad",
        "sparse_lr": 0.05,
        "dense_optimizer": "adam",
        "dense_lr": 2e-3,
        "clip_grad_norm": 1.0,
    },
    "dlrmv4": {
        "batch_size": 1024,  # per rank (the gin file's BATCH_SIZE)
        "sparse_optimizer": "rowwise_adagrad",
        "sparse_lr": 1e-6,
        "dense_optimizer": "adam",
        "dense_lr": 1e-6,
        "clip_grad_norm": 1.0,
    },
}


def hstu_preset_training(name: str) -> dict[str, object]:
    """The training settings of :data:`HSTU_PRESETS` model ``name`` (a copy; see
    :data:`HSTU_PRESET_TRAINING`)."""
    hstu_preset(name)  # checks the name
    return dict(HSTU_PRESET_TRAINING.get(name, {}))


def hstu_preset(name: str) -> HSTUConfig:
    """The :data:`HSTU_PRESETS` model ``name``."""
    check_type("name", name, str, "a preset name")
    if name not in HSTU_PRESETS:
        raise ValueError(f"name must be one of {sorted(HSTU_PRESETS)}, got {name!r}")
    return HSTU_PRESETS[name]()


#: NVIDIA recsys-examples' HSTU end-to-end training benchmark as its documents describe it at
#: 43465aea (``examples/hstu/training/benchmark/E2E_BENCHMARK.md`` and ``PERF_ANALYSIS.md``, the
#: gin of ``scripts/generate_gin_config.py``).
RECSYS_EXAMPLES_SOURCE = "https://github.com/NVIDIA/recsys-examples/blob/43465aea/examples/hstu/training/benchmark/E2E_BENCHMARK.md"


def _recsys_examples() -> HSTUConfig:
    """NVIDIA recsys-examples' benchmark model (:data:`RECSYS_EXAMPLES_SOURCE`): hidden size 1,024,
    8 HSTU layers of 4 heads of 256 (query/key and value), the prediction head ``[512, 8]``;
    tables of dim 128 (``item`` 50 M rows and ``action`` 100 per token -- the benchmark
    interleaves an item token and an action token per event, so a history of ``S`` events is
    ``2 S + 3`` tokens; ``user_id`` 50 M, ``user_age`` 100 and ``item_category_l1`` 50 once a
    history). Kept as this config can say it: every token looks up one row (``item`` here, a
    stand-in for the item or action row it looks up), ``action`` is priced once a history, the
    tables' width 128 is :func:`~recnotebooks.perf.hstu.hstu_step`'s ``embedding_dim`` (this config
    counts them at ``dim``), no relative bias (not in its layer's settings), and its 8 task heads
    are one head here."""
    rows = {"item": 50_000_000, "action": 100, "user_id": 50_000_000, "user_age": 100, "item_category_l1": 50}
    tables = tuple(TableConfig(name, n) for name, n in rows.items())
    context = ("action", "user_id", "user_age", "item_category_l1")
    return HSTUConfig(tables, context, dim=1024, num_layers=8, heads=4, qk_dim=256, v_dim=256,
                      max_len=2 * 4096 + 3, relative_bias=False, top_mlp=(512, 8),
                      name="recsys_examples")  # fmt: skip


def _dlrm_v3() -> HSTUConfig:
    """meta-recsys/generative-recommenders' ``dlrm_v3`` stack at its configs' defaults (5 layers of
    4 heads, query/key and value 128, dim 512), as its issue #530 benchmarks it: DLRMv4's
    tables (:func:`_dlrmv4`) with the 5 layers its configs name."""
    return _dlrmv4().replace(num_layers=5, name="dlrm_v3")


HSTU_PRESETS.update({"recsys_examples": _recsys_examples, "dlrm_v3": _dlrm_v3})
