"""``recnb train`` in one process: train, evaluate, report measured throughput and phases.

It trains a DLRM on synthetic data or, with ``--data``, on Criteo TSV files (a deterministic
held-out split, :class:`~recnotebooks.data.split.HeldOutSplit`), or a generative recommender
(``--preset hstu_small``) on the synthetic listening log (its eval split: held-out users), saves
(``--checkpoint``) and resumes (``--resume``) runs, and refuses a run that cannot fit in memory
before anything is allocated. Several ranks: :mod:`recnotebooks.commands.distributed`; the text of
both: :func:`train_lines`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .report import Report, printer
from .settings import EVAL_FRACTION, CLIError, TrainSettings

if TYPE_CHECKING:  # annotations only: the command imports what it runs when it runs
    import torch

    from recnotebooks.train import Trainer

__all__ = ["measured", "run", "train_lines", "trainer"]


def run(s: TrainSettings) -> Report:
    """``recnb train`` in one process: its report (a dict) and its text."""
    return Report(train(s), printer(train_lines))


def _check_memory(s: TrainSettings, device: torch.device) -> None:
    """Refuse a run whose weights, optimizer state, interaction buffers and one batch's
    activations (twice: values and gradients) would not fit in 80% of free memory."""
    from recnotebooks.doctor import available_memory_bytes
    from recnotebooks.perf.memory import memory_footprint

    cfg = s.config
    if s.generative:  # the tables with one state float a row at most, the dense part with Adam's two
        tables = cfg.embedding_parameters * 4 + sum(t.num_rows for t in cfg.tables) * 4
        parts = {"embedding_tables": tables, "dense_weights": 4 * cfg.dense_parameters * 4}
    else:
        fp = memory_footprint(cfg, s.sparse_optimizer, s.dense_optimizer, batch_size=s.batch_size)
        parts = {k: v for k, v in fp.items() if k != "total"}
        parts["activations"] *= 2
        parts["dense_weights"] *= 2  # and their gradients
    need = sum(parts.values())
    have = available_memory_bytes(device)
    if have is not None and need > 0.8 * have:
        big = sorted(parts.items(), key=lambda kv: -kv[1])[:2]
        what = ", ".join(f"{k} {v / 2**30:,.1f} GiB" for k, v in big)
        raise CLIError(
            f"model {cfg.name!r} ({len(cfg.tables)} tables, batch size {s.batch_size}) needs about "
            f"{need / 2**30:,.1f} GiB ({what}) but {device} has {have / 2**30:.1f} GiB available; "
            "use --max-rows N to cap table sizes, fewer --tables or a smaller --batch-size"
        )


def _synthetic_data(s: TrainSettings) -> tuple[Any, Any, dict[str, Any]]:
    """Synthetic train and eval streams (``--zipf``: the ids' skew)."""
    from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo

    skew = {"zipf_exponent": s.zipf} if s.zipf else {}
    data_cfg = SyntheticConfig(pooling=s.pooling, **skew)
    train, evals = (SyntheticCriteo(s.config, s.batch_size, data_cfg, seed=s.seed, split=split)
                    for split in ("train", "eval"))  # fmt: skip
    return train, evals, {"source": "synthetic", "zipf_exponent": data_cfg.zipf_exponent}


def _criteo_data(s: TrainSettings, paths: tuple[str, ...]) -> tuple[Any, Any, dict[str, Any]]:
    """A held-out split of the ``--data`` files (the train reader comes back in the info)."""
    from recnotebooks.data.criteo import NUM_CATEGORICAL, NUM_DENSE, CriteoReader
    from recnotebooks.data.split import HeldOutSplit

    cfg = s.config
    if cfg.num_tables != NUM_CATEGORICAL or cfg.num_dense != NUM_DENSE:
        raise CLIError(
            f"--data needs a model with {NUM_CATEGORICAL} tables and {NUM_DENSE} dense features (Criteo), "
            f"got {cfg.num_tables} tables and {cfg.num_dense} dense features ({cfg.name!r}); use --preset "
            "criteo_kaggle or criteo_terabyte, with --max-rows N to cap the tables"
        )
    try:
        # train drops a last partial batch (every step has --batch-size samples); eval keeps it
        readers = [CriteoReader(list(paths), cfg, s.batch_size, drop_last=last) for last in (True, False)]
    except (FileNotFoundError, ValueError) as e:
        raise CLIError(f"--data: {e}") from None
    fraction = EVAL_FRACTION if s.eval_fraction is None else s.eval_fraction
    info = {"source": "criteo", "files": [str(p) for p in readers[0].paths], "eval_fraction": fraction,
            "reader": readers[0]}  # fmt: skip
    return HeldOutSplit(readers[0], fraction, "train"), HeldOutSplit(readers[1], fraction, "eval"), info


def _listening_data(s: TrainSettings) -> tuple[Any, Any, dict[str, Any]]:
    """The synthetic listening log's train and eval splits (disjoint users), seeded by ``--seed``,
    with the user as context when the model reads it."""
    from recnotebooks.data.listening import USER_TABLE, ListeningConfig, SyntheticListening

    log = ListeningConfig(seed=s.seed, user_context=USER_TABLE in s.config.context)
    train, evals = (SyntheticListening(log, s.batch_size, split) for split in ("train", "eval"))
    return train, evals, {"source": "synthetic_listening", "eval": "held-out users"}


def trainer(s: TrainSettings, device: torch.device) -> tuple[Trainer, dict[str, Any]]:
    """The run's :class:`~recnotebooks.train.Trainer` (resumed from ``--resume``) and what its data is."""
    import torch

    from recnotebooks.nn import DLRM
    from recnotebooks.nn.generative import HSTURanker
    from recnotebooks.train import TrainConfig, Trainer

    tc = TrainConfig(steps=s.steps, sparse_optimizer=s.sparse_optimizer, sparse_lr=s.sparse_lr,
                     dense_optimizer=s.dense_optimizer, dense_lr=s.dense_lr, eval_batches=s.eval_batches,
                     progress=not s.json and sys.stderr.isatty(), dtype=s.dtype,
                     clip_grad_norm=s.clip_grad_norm)  # fmt: skip
    if s.generative:
        train, evals, info = _listening_data(s)
    else:
        train, evals, info = _synthetic_data(s) if s.data is None else _criteo_data(s, s.data)
    torch.manual_seed(s.seed)
    model = (HSTURanker if s.generative else DLRM)(s.config, device=device, seed=s.seed)
    t = Trainer(model, train, evals, tc, device=device)
    if s.resume is not None:
        try:
            _resume(t, s.resume)
        except (FileNotFoundError, ValueError) as e:
            raise CLIError(f"--resume: {e}") from None
        if t.step >= s.steps:
            raise CLIError(
                f"--steps {s.steps} must exceed the {t.step} steps the checkpoint "
                f"{s.resume!r} has already done (--steps counts all steps)"
            )
    return t, info


def _resume(t: Trainer, path: str) -> None:
    """Load ``--resume``: a checkpoint file, or a sharded checkpoint's folder (saved by
    ``--world-size N`` / ``--distributed`` on any number of ranks) read whole."""
    from pathlib import Path

    from recnotebooks.distributed.checkpoint import has_checkpoint, read_single

    if Path(path).is_file() or not (Path(path).is_dir() or has_checkpoint(path)):
        t.load(path)
        return
    t.load_state(read_single(path), path)


def _skipped_lines(reader: object) -> str:
    """Why a --data run found no usable lines, if the reader skipped some."""
    st = getattr(reader, "stats", None)
    if st is None or not st.skipped:
        return ""
    line, reason = st.first_skips[0]
    return (
        f" ({st.skipped:,} of {st.lines_read:,} lines of --data were malformed; first, line {line}: {reason})"
    )


def train(s: TrainSettings) -> dict[str, Any]:
    """Train, evaluate, and return the measured report (:func:`recnotebooks.run_report.train_report`)."""
    from recnotebooks.run_report import train_report
    from recnotebooks.train import resolve_device

    try:
        device = resolve_device(s.device)
    except ValueError as e:
        raise CLIError(str(e)) from None
    _check_memory(s, device)
    try:
        t, info = trainer(s, device)
    except (ValueError, TypeError) as e:
        raise CLIError(str(e)) from None
    start, reader = t.step, info.pop("reader", None)
    try:
        res = t.fit(s.steps, checkpoint=s.checkpoint, checkpoint_every=s.checkpoint_every or 0)
    except (ValueError, TypeError, FloatingPointError) as e:
        raise CLIError(str(e) + _skipped_lines(reader)) from None
    if reader is not None:  # counts of the train reader's current pass over the files
        st = reader.stats
        info |= {"lines_read": st.lines_read, "lines_skipped": st.skipped, "first_skips": st.first_skips}
    return train_report(
        command="train", source="measured", preset=s.preset, config=s.config.summary(), device=res.device,
        world_size=1, backend=None, rank=0, sharding=None, plan=None, dtype=s.dtype, comm=[], data=info,
        resumed_from=s.resume, resumed_at_step=start if s.resume else None, checkpoint=s.checkpoint,
        **measured(res),
    )  # fmt: skip


#: What a run measured, under the same names in a training result (one process or a rank's) and
#: in the report.
MEASURED = ("threads", "busy", "reliability", "steps", "batch_size", "samples_per_s", "seconds_per_step",
            "auc", "logloss", "ne", "losses", "phases", "tokens_per_s", "tokens_per_step")  # fmt: skip


def measured(res: object) -> dict[str, Any]:
    """The fields of :data:`MEASURED` of a training result, for the report (the tokens ``None``
    where a result has none: a DLRM's ranks)."""
    return {k: getattr(res, k, None) if k.startswith("tokens") else getattr(res, k) for k in MEASURED}


def train_lines(r: dict[str, Any]) -> Iterator[str]:
    """``recnb train``'s text, one process or several ranks."""
    c = r["config"]
    yield _model_line(c)
    ranks = r["backend"] is not None  # several ranks (--world-size, --distributed)
    yield from _ranks_lines(r) if ranks else _where_lines(r)
    tokens = "" if r.get("tokens_per_s") is None else f"  {r['tokens_per_s']:,.0f} tokens/s"
    ms = r["seconds_per_step"] * 1e3
    yield f"  throughput  {r['samples_per_s']:,.0f} samples/s{tokens}  ({ms:.2f} ms/step)"
    from recnotebooks.run_report import report_lines

    yield from report_lines(r)
    total = sum(r["phases"].values()) or 1.0
    yield "  phase breakdown (ms/step, this rank):" if ranks else "  phase breakdown (ms/step):"
    for k, v in r["phases"].items():
        yield f"    {k:<18} {v * 1e3:8.2f}  {100 * v / total:5.1f}%"
    if ranks:
        sent = sum(row["bytes_sent"] for row in r["comm"])
        yield f"  comm        {sent:,} bytes sent by all ranks over {_steps_run(r)}"


def _steps_run(r: dict[str, Any]) -> str:
    """The steps this run trained: ``N steps``, or after a resume ``N steps (a-b)``."""
    start, steps = r.get("resumed_at_step") or 0, r["steps"]
    return f"{steps} steps" if not start else f"{steps - start} steps ({start + 1}-{steps})"


def _model_line(c: dict[str, Any]) -> str:
    """The model in one line: a DLRM's tables and MLPs, or a generative recommender's stack."""
    if c.get("kind") == "hstu":
        context = f", context {c['context']}" if c["context"] else ""
        return (
            f"{c['name']}: {c['num_tables']} tables, {c['total_rows']:,} rows, dim {c['embedding_dim']}"
            f"{context}, HSTU {c['num_layers']} layers x {c['heads']} heads, histories to {c['max_len']}, "
            f"top {c['top_mlp']}"
        )
    return (
        f"{c['name']}: {c['num_tables']} tables, {c['total_rows']:,} rows, dim {c['embedding_dim']}, "
        f"bottom {c['bottom_mlp']}, top {c['top_mlp']}, {c['interaction']}"
        + (f" ({c['dcn']})" if c.get("dcn") else "")
    )


def _where_lines(r: dict[str, Any]) -> Iterator[str]:
    """One process: the device, the data files, the checkpoint read and written."""
    d = r["data"]
    what = f" histories (~{r['tokens_per_step']:,.0f} events)" if r.get("tokens_per_step") is not None else ""
    yield (
        f"measured on {r['device']} ({r['threads']} threads, {r['dtype']}): {_steps_run(r)} of "
        f"{r['batch_size']}{what}"
    )
    if d["source"] == "synthetic_listening":
        yield "  data        synthetic listening log; eval on held-out users"
    yield from _criteo_lines(d)
    yield from _checkpoint_lines(r)


def _checkpoint_lines(r: dict[str, Any]) -> Iterator[str]:
    """The checkpoint resumed from and the one saved (one process's file, or ranks' folder)."""
    if r["resumed_from"]:
        yield f"  resumed     from {r['resumed_from']} at step {r['resumed_at_step']}"
    if r["checkpoint"]:
        yield f"  checkpoint  saved to {r['checkpoint']}"


def _criteo_lines(d: dict[str, Any]) -> Iterator[str]:
    """The ``--data`` files, their held-out share and the lines skipped (none on synthetic data)."""
    if d["source"] == "criteo":
        files = ", ".join(d["files"])
        yield (
            f"  data        {files}: {d['eval_fraction']:.0%} of batches held out for eval; "
            f"{d['lines_skipped']:,} of {d['lines_read']:,} lines skipped in this pass"
        )


def _ranks_lines(r: dict[str, Any]) -> Iterator[str]:
    """Several ranks: how many, their backend and sharding, and which rank this is."""
    yield (
        f"measured on {r['world_size']} rank(s) ({r['backend']}, {r['sharding']} embeddings, this is rank "
        f"{r['rank']}): {_steps_run(r)} of {r['batch_size']} (global batch)"
    )
    yield from _criteo_lines(r["data"])
    yield from _checkpoint_lines(r)
