"""The command line's arguments resolved once into a frozen settings value per command.

:func:`resolve` reads the parsed arguments (argparse's ``Namespace``, never changed) and returns
one frozen dataclass: :class:`TrainSettings` (the preset's model with the architecture overrides,
and the batch size, optimizers and learning rates taken from the command line, else the preset's
training settings, else :data:`TRAIN_DEFAULTS`), :class:`ModelSettings` (``cost``, ``plan``),
:class:`MeasureSettings` (``calibrate``, ``validate``), :class:`CacheSimSettings` or
:class:`DoctorSettings`. A setting the command cannot use is refused here, as a
:class:`CLIError` naming the option, before anything runs.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the config is imported when a command resolves
    from recnotebooks.config import DLRMConfig, HSTUConfig

__all__ = [
    "TRAIN_DEFAULTS",
    "CLIError",
    "CacheSimSettings",
    "DoctorSettings",
    "MeasureSettings",
    "ModelSettings",
    "Settings",
    "TrainSettings",
    "as_given",
    "config_from_args",
    "preset_name",
    "resolve",
    "train_settings",
    "training_settings",
]

#: Largest ``train --batch-size`` (2^24 samples; the memory check usually refuses sooner).
MAX_BATCH = 2**24
#: Most ``--tables``: the dot interaction's ``X X^T`` takes batch x F^2 floats (8 GB at 1000 tables,
#: batch 2048); the memory check refuses sooner where that does not fit.
MAX_TABLES = 10_000
#: Widest ``--dim``.
MAX_DIM = 2**14
#: Default ``--eval-fraction`` of ``--data`` batches held out.
EVAL_FRACTION = 0.1
#: ``recnb train``'s settings where neither the command line nor the preset's training settings
#: (:data:`recnotebooks.config.PRESET_TRAINING`) give one.
TRAIN_DEFAULTS: dict[str, Any] = {
    "batch_size": 1024,
    "sparse_optimizer": "rowwise_adagrad",
    "sparse_lr": 0.05,
    "dense_optimizer": "adagrad",
    "dense_lr": 0.02,
}
#: ``recnb train --steps`` where neither the command line nor the preset's training settings give it
#: (a DLRM preset's never do; an HSTU preset's may).
DEFAULT_STEPS = 400
#: Most devices (``--gpus`` x ``--nodes``) a plan or estimate is made for: a plan has a row
#: per table and rank and the model is evaluated rank by rank, so 1,024 ranks (128 eight-GPU
#: nodes) answer within seconds to a few tens of seconds here; larger clusters are refused.
MAX_WORLD_SIZE = 1024
#: Longest ``cache-sim --ids`` trace.
MAX_IDS = 2**31
#: Sizes of ``cache-sim --curve``.
CURVE_POINTS = 12


class CLIError(Exception):
    """A user error: printed as one line, exit status 2 (:attr:`exit_code`: another status, for the
    errors a subclass is)."""

    exit_code = 2


# ----- train -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainSettings:
    """``recnb train``'s arguments, resolved: the model, the training settings (:func:`training_settings`)
    and every other option as given (``None`` where left out)."""

    preset: str
    config: DLRMConfig | HSTUConfig
    steps: int
    batch_size: int
    sparse_optimizer: str
    sparse_lr: float
    dense_optimizer: str
    dense_lr: float
    pooling: str
    seed: int
    device: str
    dtype: str
    eval_batches: int
    zipf: float | None
    data: tuple[str, ...] | None
    eval_fraction: float | None
    checkpoint: str | None
    checkpoint_every: int | None
    resume: str | None
    world_size: int | None
    distributed: bool
    sharding: str | None
    json: bool
    #: the dense gradients' clipping norm (``None``: none)
    clip_grad_norm: float | None = None
    command: str = "train"

    @property
    def generative(self) -> bool:
        """Whether the model is a generative recommender (an :class:`HSTUConfig`)."""
        return type(self.config).__name__ == "HSTUConfig"

    @property
    def parallel(self) -> bool:
        """Whether the run is hybrid-parallel (``--world-size``, ``--distributed`` or ``--sharding``)."""
        return bool(self.world_size or self.distributed or self.sharding)


def preset_name(args: argparse.Namespace) -> str:
    """``--preset``, else ``criteo_kaggle`` with ``--data``, else ``tiny``."""
    if getattr(args, "preset", None):
        return args.preset
    return "criteo_kaggle" if getattr(args, "data", None) else "tiny"


def training_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``recnb train``'s batch size, optimizers, learning rates and bag-size distribution: each
    option given on the command line, else the preset's (:data:`recnotebooks.config.PRESET_TRAINING`),
    else :data:`TRAIN_DEFAULTS`; with ``pooling``, the synthetic bags' distribution. ``args`` is
    not changed."""
    from recnotebooks.config import preset_training

    settings = {"pooling": "fixed", **TRAIN_DEFAULTS, **preset_training(preset_name(args))}
    for key in TRAIN_DEFAULTS:
        if getattr(args, key, None) is not None:
            settings[key] = getattr(args, key)
    return {k: settings[k] for k in (*TRAIN_DEFAULTS, "pooling")}


#: ``recnb train``'s options a generative recommender's run does not take: the DLRM's
#: architecture, Criteo files and several ranks (it trains in one process on the synthetic
#: listening log, :class:`recnotebooks.data.listening.SyntheticListening`).
NOT_FOR_HSTU = ("tables", "rows", "dim", "pooling", "bottom", "top", "interaction", "dcn_layers",
                "dcn_rank", "max_rows", "data", "eval_fraction", "zipf", "world_size", "distributed",
                "sharding")  # fmt: skip


def hstu_train_settings(args: argparse.Namespace, name: str) -> TrainSettings:
    """``recnb train --preset NAME`` of a generative recommender (:data:`recnotebooks.config.HSTU_PRESETS`):
    each option given, else the preset's (:data:`recnotebooks.config.hstu.HSTU_PRESET_TRAINING`),
    else :data:`TRAIN_DEFAULTS`; an option of :data:`NOT_FOR_HSTU` is refused, naming it."""
    from recnotebooks.config.hstu import hstu_preset, hstu_preset_training

    extra = [a for a in NOT_FOR_HSTU if getattr(args, a, None) not in (None, False)]
    if extra:
        flags = ", ".join("--" + a.replace("_", "-") for a in extra)
        raise CLIError(
            f"{flags}: not for --preset {name}, a generative recommender trained in one process on the "
            "synthetic listening log (its model is the preset's); leave them out"
        )
    values = {**TRAIN_DEFAULTS, "pooling": "fixed", "steps": DEFAULT_STEPS, "clip_grad_norm": None,
              **hstu_preset_training(name)}  # fmt: skip
    for key in (*TRAIN_DEFAULTS, "steps", "clip_grad_norm"):
        if getattr(args, key, None) is not None:
            values[key] = getattr(args, key)
    _check_optimizers(name, values)
    config = hstu_preset(name)
    _check_listening_tables(name, config)
    resolved = {**values, "preset": name, "config": config, "data": None}
    given = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(TrainSettings) if f.name not in resolved
    }
    return TrainSettings(**given, **resolved)


def _check_listening_tables(name: str, config: HSTUConfig) -> None:
    """Refuse a generative recommender whose tables the synthetic listening log does not have."""
    from recnotebooks.data.listening import TABLES, USER_TABLE

    events, context = [t.name for t in config.event_tables], list(config.context)
    if sorted(events) != sorted(TABLES) or not set(context) <= {USER_TABLE}:
        raise CLIError(
            f"--preset {name} reads the tables {events} per event and {context} per history, which the "
            f"synthetic listening log recnb train draws does not have (it has {list(TABLES)} per event "
            f"and {USER_TABLE!r} per history); price it with the cost model, train hstu_small here"
        )


def train_settings(args: argparse.Namespace) -> TrainSettings:
    """``recnb train``'s arguments resolved once, refusing options that would have no effect (in
    the order the command has always checked them: the run's options, the model, the optimizers)."""
    from recnotebooks.config import HSTU_PRESETS

    name = preset_name(args)
    if name in HSTU_PRESETS:
        return hstu_train_settings(args, name)
    values = training_settings(args)
    if args.world_size or args.distributed or args.sharding:
        if args.dtype != "fp32":
            raise CLIError(
                f"--dtype {args.dtype} applies to single-process training, not --world-size/"
                "--distributed/--sharding runs (they train in fp32)"
            )
        if args.clip_grad_norm is not None:
            raise CLIError(
                f"--clip-grad-norm {args.clip_grad_norm:g} applies to single-process training, not "
                "--world-size/--distributed/--sharding runs (they do not clip)"
            )
    else:
        _check_train_options(args)
    config = config_from_args(args)
    _check_optimizers(name, values)
    resolved = {**values, "preset": name, "config": config, "steps": args.steps or DEFAULT_STEPS,
                "data": None if args.data is None else tuple(args.data)}  # fmt: skip
    given = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(TrainSettings) if f.name not in resolved
    }
    return TrainSettings(**given, **resolved)


def _check_train_options(args: argparse.Namespace) -> None:
    """Refuse options that would otherwise be silently ignored."""
    if args.data is None:
        if args.eval_fraction is not None:
            raise CLIError(
                f"--eval-fraction needs --data PATH (synthetic data has its own eval stream), "
                f"got {args.eval_fraction}"
            )
    elif args.zipf is not None:
        raise CLIError(
            f"--zipf applies to synthetic data only; with --data the ids come from the files, "
            f"got --zipf {args.zipf}"
        )
    if args.checkpoint_every is not None and args.checkpoint is None:
        raise CLIError(f"--checkpoint-every {args.checkpoint_every} needs --checkpoint PATH")


def _check_optimizers(preset: str, values: dict[str, Any]) -> None:
    """Refuse a preset's optimizer this version does not have (the command line's are checked by
    argparse), naming the preset and the option that overrides it."""
    from recnotebooks.config import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS

    for key, known in (("sparse_optimizer", SPARSE_OPTIMIZERS), ("dense_optimizer", DENSE_OPTIMIZERS)):
        if values[key] not in known:
            raise CLIError(
                f"preset {preset}'s {key} {values[key]!r} is not one of {list(known)} "
                f"here; give --{key.replace('_', '-')} NAME"
            )


def _mlp_changes(args: argparse.Namespace) -> dict[str, Any]:
    """``--bottom`` and ``--top`` as the config's fields."""
    from recnotebooks.config import parse_mlp

    changes: dict[str, Any] = {}
    try:
        if args.bottom is not None:
            widths = parse_mlp(args.bottom, "--bottom")
            if len(widths) < 2:
                raise CLIError(f"--bottom must include the input width and >= 1 layer, got {args.bottom!r}")
            changes["num_dense"], changes["bottom_mlp"] = widths[0], widths[1:]
        if args.top is not None:
            changes["top_mlp"] = parse_mlp(args.top, "--top")
    except ValueError as e:
        raise CLIError(str(e)) from None
    return changes


def _interaction_changes(args: argparse.Namespace) -> dict[str, Any]:
    """``--interaction`` and the cross layers' ``--dcn-layers`` and ``--dcn-rank``."""
    from recnotebooks.config import DCN_DEFAULTS

    changes: dict[str, Any] = {}
    if args.interaction:
        changes["interaction"] = args.interaction
        if args.interaction != "dcn":  # a DCN preset's cross layers go with its interaction
            changes.update(DCN_DEFAULTS)
    for flag in ("dcn_layers", "dcn_rank"):
        if getattr(args, flag, None) is not None:
            changes[flag] = getattr(args, flag)
    return changes


def _table_changes(args: argparse.Namespace, cfg: DLRMConfig) -> dict[str, Any]:
    """``--tables``, ``--rows`` and ``--pooling`` as the config's tables."""
    from recnotebooks.config import TableConfig

    if args.pooling is not None and (args.pooling < 1 or args.pooling != int(args.pooling)):
        raise CLIError(
            f"--pooling must be a whole number of lookups >= 1 (recnb train draws fixed bag sizes: every "
            f"sample looks up exactly that many rows of each table), got {args.pooling:g}"
        )
    if not (args.tables or args.rows or args.pooling is not None):
        return {}
    tables = cfg.tables
    n = args.tables or len(tables)
    rows = args.rows or (tables[0].num_rows if args.tables else None)
    pool = args.pooling if args.pooling is not None else tables[0].pooling_factor
    if rows is None:
        return {"tables": tuple(dataclasses.replace(t, pooling_factor=pool) for t in tables)}
    return {"tables": tuple(TableConfig(f"T{i + 1}", rows, pool) for i in range(n))}


def config_from_args(args: argparse.Namespace) -> DLRMConfig:
    """The preset named by ``--preset`` with the architecture overrides applied."""
    from recnotebooks.config import preset

    cfg = preset(preset_name(args))
    changes = _mlp_changes(args)
    if args.dim:
        changes["embedding_dim"] = args.dim
    changes |= _interaction_changes(args)
    changes |= _table_changes(args, cfg)
    if changes:
        changes["name"] = f"{cfg.name}+overrides"
        if args.dim and "bottom_mlp" not in changes and changes.get("interaction", cfg.interaction) == "dot":
            changes["bottom_mlp"] = (*cfg.bottom_mlp[:-1], args.dim)
    try:
        cfg = cfg.replace(**changes) if changes else cfg
        if args.max_rows:
            cfg = cfg.with_max_rows(args.max_rows)
    except (ValueError, TypeError) as e:
        hint = " (--dcn-layers, --dcn-rank)" if str(e).startswith(("dcn_layers", "dcn_rank")) else ""
        raise CLIError(str(e) + hint) from None
    return cfg


# ----- the other commands: their options as given ----------------------------------------------
@dataclass(frozen=True)
class ModelSettings:
    """``recnb cost`` and ``recnb plan``: the job priced (``implementation``: whose step ``cost`` prices,
    and ``plan --explain`` explains; ``explain`` and ``table`` are ``plan``'s only)."""

    command: str
    preset: str
    hardware: str
    gpus: int
    nodes: int
    batch_size: int
    placement: str
    cache_hit_rate: float | None
    cache_rows: int | float | None
    cache_policy: str
    cache_ways: int
    dtype: str
    sparse_optimizer: str
    dense_optimizer: str
    strategy: str
    json: bool
    implementation: str = "torchrec"
    explain: bool = False
    table: str | None = None


@dataclass(frozen=True)
class MeasureSettings:
    """``recnb calibrate`` (``--collectives``) and ``recnb validate`` (``--saved``, ``--distributed``)."""

    command: str
    device: str
    quick: bool = False
    collectives: bool = False
    saved: bool = False
    distributed: bool = False
    json: bool = False
    repeats: int | None = None  # validate's passes over the sweep (None: validate.REPEATS)


@dataclass(frozen=True)
class CacheSimSettings:
    """``recnb cache-sim``: the trace, the cache and the bytes a miss moves."""

    rows: int
    ids: int
    alpha: float
    policy: str
    capacity: int | float
    ways: int
    batch_size: int
    seed: int
    dim: int
    curve: bool
    json: bool = False
    command: str = "cache-sim"


@dataclass(frozen=True)
class DoctorSettings:
    """``recnb doctor``."""

    json: bool = False
    command: str = "doctor"


#: The resolved arguments of any command.
Settings = TrainSettings | ModelSettings | MeasureSettings | CacheSimSettings | DoctorSettings
_AS_GIVEN: dict[str, type] = {
    "cost": ModelSettings,
    "plan": ModelSettings,
    "hstu": ModelSettings,
    "calibrate": MeasureSettings,
    "validate": MeasureSettings,
    "cache-sim": CacheSimSettings,
    "doctor": DoctorSettings,
}


def as_given(kind: type, args: argparse.Namespace) -> Any:
    """``kind`` (a settings dataclass) filled from ``args``' attributes of the same names; a field
    ``args`` lacks keeps its default."""
    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(kind) if hasattr(args, f.name)}
    return kind(**fields)


def resolve(args: argparse.Namespace) -> Settings:
    """The parsed arguments of any ``recnb`` command as its frozen settings (``args`` unchanged)."""
    if args.command == "train":
        return train_settings(args)
    return as_given(_AS_GIVEN[args.command], args)
