"""The ``recnb`` argument parser: every subcommand and option, and the argparse types that read
numbers in ASCII digits (:func:`recnotebooks.checks.parse_int` / ``parse_float``).

The tree: ``train`` (:func:`add_train_parser`: run, architecture, optimisation, data and
distributed options), ``doctor``, ``cost`` and ``plan`` (:func:`add_model_parsers`: the model,
the placement and the precision and optimizers priced), ``calibrate`` and ``validate``
(:func:`add_measure_parsers`) and ``cache-sim`` (:func:`add_cache_sim_parser`). What an option
means once read is :mod:`recnotebooks.commands.settings`'.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from recnotebooks.checks import MAX_STEPS, parse_float, parse_int, show

from .settings import (
    CURVE_POINTS,
    DEFAULT_STEPS,
    EVAL_FRACTION,
    MAX_BATCH,
    MAX_DIM,
    MAX_IDS,
    MAX_TABLES,
    MAX_WORLD_SIZE,
    TRAIN_DEFAULTS,
)

__all__ = [
    "add_cache_sim_parser",
    "add_measure_parsers",
    "add_model_parsers",
    "add_train_parser",
    "build_parser",
    "float_arg",
    "int_arg",
]

Subparsers = argparse._SubParsersAction  # the type of add_subparsers()'s value
#: ``--device`` of the measuring commands.
DEVICES = "cpu, cuda or cuda:N"


# ----- argparse types: numbers in ASCII digits ------------------------------------------------
def int_arg(name: str, lo: int = 1, hi: int | None = None) -> Callable[[str], int]:
    """argparse type: an int in ``[lo, hi]`` written in ASCII digits
    (:func:`recnotebooks.checks.parse_int`)."""

    def parse(text: str) -> int:
        try:
            return parse_int(name, text, lo=lo, hi=hi)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def float_arg(
    name: str, lo: float = 0.0, hi: float | None = None, lo_open: bool = True
) -> Callable[[str], float]:
    """argparse type: a finite number in the range (default > 0), ASCII only, via
    :func:`recnotebooks.checks.parse_float`."""

    def parse(text: str) -> float:
        try:
            return parse_float(name, text, lo=lo, hi=hi, lo_open=lo_open)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _capacity(text: str) -> int | float:
    """``cache-sim --capacity``: rows (``100000``) or a fraction of the rows (``0.1``), in ASCII digits."""
    try:
        return parse_int("--capacity", text, lo=1)
    except ValueError:
        pass
    try:
        return parse_float("--capacity", text, lo=0.0, hi=1.0, lo_open=True)
    except ValueError:
        raise argparse.ArgumentTypeError(
            "--capacity must be rows (an int >= 1) or a fraction of the rows in (0, 1], in ASCII digits, "
            f"got {show(text)}"
        ) from None


def _cache_rows(text: str) -> float:
    """``cost --cache-rows``: rows per table (an int >= 1) or a fraction of each table's rows in (0, 1],
    in ASCII digits (``int()`` and ``float()`` also read other scripts' digits)."""
    try:
        value = float(text) if text.isascii() else float("nan")
    except ValueError:
        value = float("nan")
    whole = value.is_integer() and "." not in text and "e" not in text.lower()
    if not (whole and value >= 1) and not (0 < value <= 1):
        raise argparse.ArgumentTypeError(
            "--cache-rows must be rows (an int >= 1) or a fraction of each table's rows in (0, 1], "
            f"in ASCII digits, got {text!r}"
        )
    return int(text) if whole else value


# ----- the tree -------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The ``recnb`` argument parser (train, doctor, cost, plan, calibrate, validate, cache-sim)."""
    p = argparse.ArgumentParser(prog="recnb", description="recnotebooks: DLRM training efficiency")
    sub = p.add_subparsers(dest="command", required=True)
    add_train_parser(sub)
    d = sub.add_parser("doctor", help="versions, devices, threads, and whether the notebooks will work")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    add_model_parsers(sub)
    add_measure_parsers(sub)
    add_cache_sim_parser(sub)
    return p


# ----- train ----------------------------------------------------------------------------------
def add_train_parser(sub: Subparsers) -> argparse.ArgumentParser:
    """Add ``train`` to ``sub`` and return its parser (its option groups in the order of ``--help``)."""
    t = sub.add_parser(
        "train", help="train a DLRM on synthetic Criteo-like data or Criteo files; report measurements"
    )
    _run_options(t)
    _architecture_options(t.add_argument_group("architecture overrides (dlrm repo notation)"))
    _optimisation_options(t.add_argument_group("optimisation"))
    _data_options(t.add_argument_group("data and checkpoints"))
    t.add_argument("--json", action="store_true", help="print one JSON object")
    _distributed_options(
        t.add_argument_group("distributed (hybrid-parallel: sharded embeddings, data-parallel MLPs)")
    )
    return t


def _run_options(t: argparse.ArgumentParser) -> None:
    """The preset, the steps and their batch, the seed, the device and the precision."""
    from recnotebooks.config import HSTU_PRESETS, PRESET_TRAINING, preset_names

    trained = ", ".join(PRESET_TRAINING)
    t.add_argument(
        "--preset",
        choices=[*preset_names(), *HSTU_PRESETS],
        help=f"model preset (default tiny; criteo_kaggle with --data); {trained} bring their source's batch "
        "size, optimizers and learning rates (config.PRESET_TRAINING), which options given here override; "
        f"{', '.join(HSTU_PRESETS)} are generative recommenders (HSTU) trained on the synthetic listening "
        "log with their own settings (config.hstu.HSTU_PRESET_TRAINING)",
    )
    t.add_argument(
        "--steps",
        type=int_arg("--steps", hi=MAX_STEPS),
        help=f"total steps, at most {MAX_STEPS:,} (a resumed run counts its own); default "
        f"{DEFAULT_STEPS}, or the preset's",
    )
    t.add_argument(
        "--batch-size",
        type=int_arg("--batch-size", hi=MAX_BATCH),
        help=f"samples per step (default {TRAIN_DEFAULTS['batch_size']}, or the preset's)",
    )
    t.add_argument("--seed", type=int_arg("--seed", 0, 2**63 - 1), default=0)
    t.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda[:N]")
    t.add_argument(
        "--dtype",
        choices=["fp32", "bf16", "fp16"],
        default="fp32",
        help="bf16: autocast, fp32 master weights (fp16 is refused: no loss scaling)",
    )


def _architecture_options(g: argparse._ArgumentGroup) -> None:
    """The model's shape in the dlrm repo's notation, over the preset's."""
    from recnotebooks.config import INTERACTIONS, MAX_DCN_LAYERS, MAX_POOLING, MAX_TABLE_ROWS, MAX_WIDTH

    g.add_argument(
        "--tables", type=int_arg("--tables", hi=MAX_TABLES), help="number of tables (all --rows rows)"
    )
    g.add_argument("--rows", type=int_arg("--rows", hi=MAX_TABLE_ROWS), help="rows per table")
    g.add_argument("--dim", type=int_arg("--dim", hi=MAX_DIM), help="embedding dimension")
    g.add_argument(
        "--pooling",
        type=float_arg("--pooling", hi=MAX_POOLING),
        help="lookups per table per sample, every table (a whole number: the bags have fixed sizes)",
    )
    g.add_argument("--bottom", help="bottom MLP incl. input width, e.g. 13-512-256-64")
    g.add_argument("--top", help="top MLP outputs, e.g. 512-512-256-1 (input width is derived)")
    g.add_argument("--interaction", choices=list(INTERACTIONS))
    g.add_argument(
        "--dcn-layers",
        type=int_arg("--dcn-layers", hi=MAX_DCN_LAYERS),
        help="cross layers of --interaction dcn (default 3, or the preset's)",
    )
    g.add_argument(
        "--dcn-rank",
        type=int_arg("--dcn-rank", hi=MAX_WIDTH),
        help="rank of the cross layers of --interaction dcn, at most their width (default 512, or "
        "the preset's)",
    )
    g.add_argument("--max-rows", type=int_arg("--max-rows", hi=MAX_TABLE_ROWS), help="cap every table's rows")


def _optimisation_options(o: argparse._ArgumentGroup) -> None:
    """The optimizers and learning rates (defaults: the preset's, else TRAIN_DEFAULTS), the
    evaluation and the ids' skew."""
    from recnotebooks.config import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS

    helps = {
        "--sparse-optimizer": "embedding optimizer, on the rows looked up: sgd (no state), rowwise_adagrad "
        "(one fp32 per row), adagrad (exact: one fp32 per element, a second table the size of the tables)",
        "--dense-optimizer": "MLP optimizer (torch.optim): sgd, adagrad (one float per parameter), "
        "adam (two)",
    }
    for flag, choices in (
        ("--sparse-optimizer", SPARSE_OPTIMIZERS),
        ("--sparse-lr", None),
        ("--dense-optimizer", DENSE_OPTIMIZERS),
        ("--dense-lr", None),
    ):
        key = flag[2:].replace("-", "_")
        kind = {"choices": choices} if choices else {"type": float_arg(flag)}
        what = helps.get(flag, flag[2:].replace("-", " "))
        o.add_argument(flag, **kind, help=f"{what}; default {TRAIN_DEFAULTS[key]}, or the preset's")
    o.add_argument(
        "--clip-grad-norm",
        type=float_arg("--clip-grad-norm"),
        help="clip the dense gradients to this total norm before each dense step (MLPerf's DLRMv4: 1.0); "
        "default none, or the preset's",
    )
    o.add_argument(
        "--eval-batches",
        type=int_arg("--eval-batches", hi=MAX_STEPS),
        default=10,
        help="held-out batches evaluated after training (AUC, log loss, NE); the same batches "
        "with --world-size/--distributed",
    )
    o.add_argument("--zipf", type=float_arg("--zipf"), help="Zipf exponent of id popularity (synthetic data)")


def _data_options(d: argparse._ArgumentGroup) -> None:
    """Criteo files instead of synthetic data, their held-out share, checkpoints."""
    d.add_argument(
        "--data",
        nargs="+",
        metavar="PATH",
        help="Criteo Kaggle/Terabyte TSV file(s), plain or .gz, instead of synthetic data",
    )
    d.add_argument(
        "--eval-fraction",
        type=float_arg("--eval-fraction", hi=0.5),
        help=f"share of --data batches held out for evaluation, spread evenly (default {EVAL_FRACTION})",
    )
    d.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="save a checkpoint here at the end (and every N steps): a file, or with --world-size/"
        "--distributed a folder of shards",
    )
    d.add_argument(
        "--checkpoint-every",
        type=int_arg("--checkpoint-every", hi=MAX_STEPS),
        metavar="N",
        help="with --checkpoint: also save every N steps",
    )
    d.add_argument(
        "--resume",
        metavar="PATH",
        help="continue from a checkpoint saved by --checkpoint (a file, or a folder of shards saved on "
        "any number of ranks)",
    )


def _distributed_options(m: argparse._ArgumentGroup) -> None:
    """Local ranks or one rank of a torchrun job, and how the tables are sharded."""
    m.add_argument(
        "--world-size", type=int_arg("--world-size"), metavar="N", help="train on N local CPU ranks"
    )
    m.add_argument("--distributed", action="store_true", help="train as one rank of a torchrun job")
    m.add_argument(
        "--sharding",
        choices=["table_wise", "row_wise", "column_wise", "data_parallel"],
        help="how every table is sharded (default table_wise, round-robin)",
    )


# ----- cost and plan: the model's commands ----------------------------------------------------
def add_model_parsers(sub: Subparsers) -> None:
    """Add ``cost``, ``plan`` and ``hstu`` to ``sub``."""
    from recnotebooks.perf.components.ops import IMPLEMENTATIONS
    from recnotebooks.perf.job_planner import MLPERF_STRATEGY
    from recnotebooks.perf.planner import STRATEGIES

    c = sub.add_parser(
        "cost", help="modeled step time, throughput, utilisation and memory on a hardware preset"
    )
    _model_options(c)
    c.add_argument(
        "--strategy",
        default="greedy",
        choices=(*STRATEGIES, MLPERF_STRATEGY),
        help="plan for several devices (mlperf: the sharding the model prices MLPerf's runs with, every "
        "table in HBM)",
    )
    _implementation_option(c, IMPLEMENTATIONS)
    pl = sub.add_parser("plan", help="assign tables to devices and placements; explain the plan")
    _model_options(pl)
    pl.add_argument(
        "--strategy",
        default="cost",
        choices=(*STRATEGIES, MLPERF_STRATEGY),
        help="planner strategy (default cost; mlperf: the sharding the model prices MLPerf's runs with)",
    )
    pl.add_argument(
        "--explain",
        action="store_true",
        help="explain the plan, MODELED: each rank's cost terms and storage, the imbalance, the critical "
        "path, and why each table went where it went (the costs the planner compared)",
    )
    pl.add_argument("--table", default=None, metavar="NAME", help="with --explain: why this table alone")
    _implementation_option(pl, IMPLEMENTATIONS, " (with --explain)")
    from .model import add_hstu_parser

    add_hstu_parser(sub)


def _implementation_option(p: argparse.ArgumentParser, choices: tuple[str, ...], when: str = "") -> None:
    """``--implementation``: whose sharded step the model prices (``cost``; ``plan --explain``)."""
    p.add_argument(
        "--implementation",
        default="torchrec",
        choices=choices,
        help=f"whose training step is priced{when}: torchrec (default: TorchRec's eager step; on one device, "
        "ours), recnotebooks (our sharded step), hugectr (NVIDIA's CUDA-graphed step, as MLPerf's "
        "DLRM-DCNv2 submissions ran it: tables in HBM, fp32, tf32 or amp_fp16)",
    )


def _model_options(p: argparse.ArgumentParser) -> None:
    """The options ``cost`` and ``plan`` share, in the order of ``--help``."""
    _job_options(p)
    _placement_options(p)
    _precision_and_optimizer_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _job_options(p: argparse.ArgumentParser) -> None:
    """The model, the hardware, how many devices and the global batch."""
    from recnotebooks.config import preset_names
    from recnotebooks.perf.hardware import hardware_names

    p.add_argument("--preset", default="criteo_kaggle", choices=preset_names(), help="model preset")
    p.add_argument("--hardware", default="dgx_a100", choices=hardware_names(), help="hardware preset")
    p.add_argument(
        "--gpus",
        type=int_arg("--gpus", hi=MAX_WORLD_SIZE),
        default=1,
        help="devices per node (default 1)",
    )
    p.add_argument("--nodes", type=int_arg("--nodes", hi=MAX_WORLD_SIZE), default=1, help="nodes (default 1)")
    p.add_argument(
        "--batch-size", type=int_arg("--batch-size", hi=2**40), default=8192, help="global batch size"
    )


def _placement_options(p: argparse.ArgumentParser) -> None:
    """Where the tables live, and the caches in front of host memory."""
    from recnotebooks.perf.access import CACHE_POLICIES
    from recnotebooks.plan import PLACEMENTS

    p.add_argument("--placement", default="hbm", choices=PLACEMENTS, help="where tables live (default hbm)")
    p.add_argument(
        "--cache-hit-rate",
        type=float_arg("--cache-hit-rate", lo=0.0, hi=1.0, lo_open=False),
        default=None,
        help="hit rate of --placement cache (and of --strategy cost's fallback caches)",
    )
    p.add_argument(
        "--cache-rows",
        type=_cache_rows,
        default=None,
        metavar="R|F",
        help="device cache slots per table for --placement cache, as rows (int) or a fraction of each "
        "table's rows; the model computes the hit rate for --cache-policy (instead of --cache-hit-rate)",
    )
    p.add_argument("--cache-policy", default="lru", choices=CACHE_POLICIES, help="policy of --cache-rows")
    p.add_argument(
        "--cache-ways",
        type=int_arg("--cache-ways", hi=4096),
        default=32,
        help="ways of --cache-policy setassoc (default 32, FBGEMM's)",
    )


def _precision_and_optimizer_options(p: argparse.ArgumentParser) -> None:
    """The precision and the optimizers whose state is sized and priced."""
    from recnotebooks.config import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS
    from recnotebooks.perf.precision import precision_names

    amp = "fp32, tf32, pure bf16/fp16, amp_fp16/amp_bf16 (autocast: fp32 weights)"
    p.add_argument("--dtype", default="fp32", choices=precision_names(), help=amp)
    p.add_argument(
        "--sparse-optimizer",
        default="rowwise_adagrad",
        choices=SPARSE_OPTIMIZERS,
        help="embedding optimizer whose fp32 state is sized and priced: sgd (none), rowwise_adagrad "
        "(one float per row), adagrad (exact: one per element)",
    )
    p.add_argument(
        "--dense-optimizer",
        default="adagrad",
        choices=DENSE_OPTIMIZERS,
        help="MLP optimizer whose state is sized: sgd (none), adagrad (a float a weight), adam (two)",
    )


# ----- calibrate and validate: measured here --------------------------------------------------
def add_measure_parsers(sub: Subparsers) -> None:
    """Add ``calibrate`` and ``validate`` to ``sub``."""
    cal = sub.add_parser("calibrate", help="microbenchmark this machine and save the fitted 'this_machine'")
    cal.add_argument("--quick", action="store_true", help="fewer repetitions")
    cal.add_argument("--device", default="cpu", help=f"{DEVICES} (default cpu)")
    cal.add_argument(
        "--collectives",
        action="store_true",
        help="also time all-to-all and all-reduce over gloo on 2 and 4 local ranks "
        "(~20-40 s) and fit collective_latency_s and intra_node_bw, and our sharded "
        "step's host cost per operator on one rank (sharded_op_overhead_s)",
    )
    cal.add_argument("--json", action="store_true", help="print one JSON object")
    v = sub.add_parser("validate", help="modeled vs measured step time over a sweep of architectures here")
    v.add_argument("--quick", action="store_true", help="5 configs instead of the full sweep")
    v.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="passes over the sweep, each config's median taken (1 to 100; default 10: fewer read "
        "noisier on a shared machine; not with --distributed)",
    )
    v.add_argument(
        "--saved", action="store_true", help="use the saved calibration instead of calibrating now"
    )
    v.add_argument("--device", default="cpu", help=f"{DEVICES} (default cpu)")
    v.add_argument(
        "--distributed",
        action="store_true",
        help="sharded training on 2 and 4 local gloo ranks vs the model (step and collective "
        "time, >= 8 plans; ~90 s, --quick ~40 s); calibrates the collectives now",
    )
    v.add_argument("--json", action="store_true", help="print one JSON object")


# ----- cache-sim: simulated -------------------------------------------------------------------
def add_cache_sim_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """Add ``cache-sim`` to ``subparsers`` and return its parser."""
    from recnotebooks.cache.simulate import SIM_POLICIES

    p = subparsers.add_parser(
        "cache-sim",
        help="simulated hit rate of an embedding cache on a Zipf trace (LRU, LFU, static, set-assoc, OPT)",
    )
    p.add_argument(
        "--rows", type=int_arg("--rows", hi=2**28), default=1_000_000, help="table rows (default 1M)"
    )
    p.add_argument(
        "--ids", type=int_arg("--ids", hi=MAX_IDS), default=1_000_000, help="trace length (default 1M)"
    )
    p.add_argument(
        "--alpha",
        type=float_arg("--alpha", hi=10.0, lo_open=False),
        default=1.05,
        help="Zipf exponent of the trace (default 1.05)",
    )
    p.add_argument("--policy", default="lru", choices=SIM_POLICIES, help="replacement policy (default lru)")
    p.add_argument(
        "--capacity", type=_capacity, default=0.1, help="cache rows, or a fraction of --rows (default 0.1)"
    )
    p.add_argument(
        "--ways",
        type=int_arg("--ways", hi=MAX_IDS),
        default=32,
        help="ways of --policy setassoc (default 32)",
    )
    p.add_argument(
        "--batch-size",
        type=int_arg("--batch-size", hi=MAX_IDS),
        default=1,
        help="ids per admitted batch (default 1)",
    )
    p.add_argument("--seed", type=int_arg("--seed", lo=0), default=0, help="trace seed (default 0)")
    p.add_argument(
        "--dim", type=int_arg("--dim", hi=2**14), default=64, help="embedding dim for bytes moved (fp32)"
    )
    p.add_argument(
        "--curve", action="store_true", help=f"LRU and OPT miss ratios at {CURVE_POINTS} log-spaced sizes"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p
