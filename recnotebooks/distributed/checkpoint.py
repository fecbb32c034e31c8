"""Sharded checkpoints that reshard: a hybrid-parallel DLRM saved by N ranks, loaded by M.

``recnb train --world-size N --checkpoint DIR`` (or ``--distributed`` under torchrun) saves every
rank's embedding shards, the sparse optimizer's accumulators, the dense replica and its optimizer,
the step, the data position and each rank's random state with ``torch.distributed.checkpoint``
(DCP), the format TorchRec's sharded modules save in; ``--resume DIR`` loads it under any plan on
any number of ranks, or in one process (:func:`read_single`).

**The format.** ``DIR`` is a DCP checkpoint (``.metadata`` and one ``__R_0.distcp`` file per rank
``R``) and a manifest, :data:`MANIFEST` (JSON: no pickle). Every tensor has a *global* name, the
same under every plan; each rank writes the blocks it holds at their global offsets:

* ``tables.<T>.weight`` (rows x dim): a table-wise shard is one block, a row-wise shard a block of
  rows, a column-wise shard a block of columns; a data-parallel table is written once, by rank 0;
* ``tables.<T>.momentum``: exact Adagrad's accumulators (rows x dim), blocked as the weight;
  row-wise Adagrad's (rows x P): one column per column piece of the plan that saved it (``P = 1``
  unless the table was column-wise, whose shards keep an accumulator each, see
  :mod:`~recnotebooks.distributed.sharded`); SGD has none;
* ``dense.<name>``: the dense replica (the single-process DLRM's names, ``bottom_mlp.0.weight``...)
  and ``dense_optimizer.<i>.<name>``: its optimizer's state tensors of parameter ``i``, written once;
* ``rng.<R>``: rank ``R``'s torch generator state.

The manifest holds the model's config, the plan, the step, every step's loss, the data position,
both optimizers' names and hyper-parameters, the column pieces of row-wise accumulators and the
SHA-256 of every file.

**Resharding.** A rank loading under another plan asks DCP for the blocks it holds *now*; DCP's
planner reads from each saved block the part that overlaps (a rank reads its rows, never whole
tables). A row-wise accumulator loaded into a column piece made of whole saved pieces is their
column-weighted mean: exactly the accumulator that piece would hold (one piece of all columns is
the single-process accumulator). A piece cut finer than any saved one gets the saved piece's value,
an approximation (column-wise tables under row-wise Adagrad differ from one process anyway).

**All or nothing.** Every rank writes into ``DIR.tmp``; after they all finished, rank 0 writes the
manifest, renames ``DIR`` to ``DIR.old``, ``DIR.tmp`` to ``DIR`` and deletes ``DIR.old``. A crash
before the rename leaves ``DIR`` as it was; between the two renames, :func:`resolve` loads
``DIR.old``. Loading checks the manifest (format, model, table layout, optimizers) and the checksum
of every file (each rank checks a share), reads into new tensors and copies them into the model
only when every rank has read its part: a bad checkpoint is the same ``ValueError`` on every rank,
and nothing changed. A folder that holds anything but a checkpoint is never replaced.

**Why DCP.** It is torch's own format for sharded state (TorchRec's, FSDP's): every rank writes its
file in parallel, the metadata records each block's global offsets, and its planner reshards on
load, reading only the overlapping parts. Its tensors load with ``weights_only=True``; its
``.metadata`` file is a pickle, read here by an unpickler that admits only DCP's metadata classes
(:class:`SafeReader`), and only after its checksum matched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import shutil
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner
from torch.distributed.checkpoint.metadata import (
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import LoadPlan, SavePlan, TensorWriteData, WriteItem, WriteItemType
from torch.distributed.checkpoint.planner_helpers import create_read_items_for_chunk_list

from ..checks import check_writable_dir, show
from ..nn.optim import ExactAdagrad, RowWiseAdagrad
from .sharded import LocalShard

__all__ = [
    "FORMAT",
    "MANIFEST",
    "SafeReader",
    "check_manifest",
    "check_target",
    "dense_info",
    "fold_pieces",
    "has_checkpoint",
    "load_global",
    "load_sharded",
    "read_manifest",
    "read_single",
    "resolve",
    "save_sharded",
    "single_to_global",
    "verify_files",
]

FORMAT = "recnotebooks.dist_checkpoint.v1"
#: The manifest's file name inside a checkpoint folder (its presence marks a checkpoint).
MANIFEST = "recnb_manifest.json"
_METADATA = ".metadata"


# ----- the folder -------------------------------------------------------------------------------
def check_target(path: str | os.PathLike[str]) -> Path:
    """``path`` as a ``Path`` once a sharded checkpoint can be saved there (before training): a new
    or empty folder, or an earlier checkpoint; writable (:func:`recnotebooks.checks.check_writable_dir`)."""
    return check_writable_dir("checkpoint", path, marker=MANIFEST)


def has_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (or the ``.old`` copy a save interrupted between its renames left) holds a
    sharded checkpoint."""
    p = Path(path)
    return (p / MANIFEST).is_file() or (p.with_name(p.name + ".old") / MANIFEST).is_file()


def resolve(path: str | os.PathLike[str]) -> Path:
    """The checkpoint folder to load: ``path``, or ``path.old`` where a save was interrupted between
    its two renames. ``ValueError`` naming the path when neither holds a checkpoint."""
    p = Path(path)
    for where in (p, p.with_name(p.name + ".old")):
        if (where / MANIFEST).is_file():
            return where
    if p.is_dir():
        raise ValueError(
            f"resume {str(p)!r} holds no sharded checkpoint (no {MANIFEST}); give a folder written by "
            "--checkpoint, or a single-process checkpoint file"
        )
    raise ValueError(
        f"resume {str(p)!r} does not exist; give a folder written by --checkpoint (or a single-process "
        "checkpoint file written by recnb train --checkpoint)"
    )


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of the checkpoint at ``path`` (:func:`resolve`), checked for its format and
    fields; ``ValueError`` naming the folder otherwise."""
    where = resolve(path)
    try:
        info = json.loads((where / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"checkpoint {str(where)!r}: its {MANIFEST} cannot be read: {e}") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        got = info.get("format") if isinstance(info, dict) else type(info).__name__
        raise ValueError(f"checkpoint {str(where)!r} has format {got!r}, expected {FORMAT!r}")
    need = ("config", "step", "losses", "data", "sparse_optimizer", "dense_optimizer", "pieces", "files")
    missing = [k for k in need if k not in info]
    if missing:
        raise ValueError(f"checkpoint {str(where)!r}: its {MANIFEST} lacks {missing}")
    info["path"] = str(where)
    return info


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_files(info: Mapping[str, Any], rank: int = 0, world: int = 1) -> str:
    """Why the files of the checkpoint do not match its manifest (this rank's share of them: every
    ``world``-th from ``rank``), or ``""``."""
    where = Path(info["path"])
    files = info["files"]
    present = sorted(p.name for p in where.iterdir() if p.name != MANIFEST)
    if sorted(files) != present:
        lost, extra = sorted(set(files) - set(present)), sorted(set(present) - set(files))
        return f"checkpoint {str(where)!r} is incomplete or mixed: missing {lost[:5]}, unexpected {extra[:5]}"
    for name in sorted(files)[rank::world]:
        if _sha256(where / name) != files[name]:
            size = (where / name).stat().st_size
            return (
                f"checkpoint {str(where)!r} is corrupted: {name} ({size:,} bytes) does not match its "
                "SHA-256 in the manifest (truncated or damaged after it was written)"
            )
    return ""


# ----- DCP's metadata, read safely --------------------------------------------------------------
_SAFE = {
    ("torch.distributed.checkpoint.metadata", n)
    for n in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
              "TensorProperties", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING")
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.distributed.checkpoint.filesystem", "_StoragePrefix"),
    ("torch", "Size"), ("torch.serialization", "_get_layout"), ("collections", "OrderedDict"),
    ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"),
}  # fmt: skip


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP's metadata classes, torch sizes and dtypes: nothing else (no code runs)."""

    def find_class(self, module: str, name: str) -> Any:
        dtype = module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)
        if (module, name) not in _SAFE and not dtype:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a checkpoint's metadata")
        return super().find_class(module, name)


class SafeReader(dcp.FileSystemReader):
    """DCP's file reader, with its ``.metadata`` pickle read by an unpickler that admits only DCP's
    metadata classes (the tensors themselves DCP loads with ``weights_only=True``)."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        with open(Path(self.path) / _METADATA, "rb") as f:
            metadata = _MetadataUnpickler(f).load()
        if not isinstance(metadata, Metadata):
            raise ValueError(f"{_METADATA} holds a {type(metadata).__name__}, not DCP's Metadata")
        if getattr(metadata, "storage_meta", None) is not None:
            metadata.storage_meta.load_id = self.load_id
        return metadata


# ----- blocks: what a rank holds of each global tensor --------------------------------------------
@dataclass(frozen=True)
class _Block:
    """This rank's block of the global tensor ``fqn`` (of ``size``) at ``offsets``."""

    fqn: str
    offsets: tuple[int, ...]
    size: tuple[int, ...]
    tensor: torch.Tensor


class _BlockSavePlanner(DefaultSavePlanner):
    """DCP's save planner, plus this rank's blocks of the global tensors (written at their offsets)."""

    def __init__(self, blocks: Sequence[_Block]) -> None:
        super().__init__(flatten_state_dict=False, flatten_sharded_tensors=False)
        self.blocks = {(b.fqn, b.offsets): b for b in blocks}

    def create_local_plan(self) -> SavePlan:
        plan = super().create_local_plan()
        items = [
            WriteItem(
                index=MetadataIndex(b.fqn, torch.Size(b.offsets)),
                type=WriteItemType.SHARD,
                tensor_data=TensorWriteData(
                    chunk=ChunkStorageMetadata(torch.Size(b.offsets), b.tensor.size()),
                    properties=TensorProperties.create_from_tensor(b.tensor),
                    size=torch.Size(b.size),
                ),
            )
            for b in self.blocks.values()
        ]
        self.plan = dataclasses.replace(plan, items=[*plan.items, *items])
        return self.plan

    def lookup_object(self, index: MetadataIndex) -> Any:
        key = (index.fqn, tuple(index.offset or ()))
        if key in self.blocks:
            return self.blocks[key].tensor.contiguous()
        return super().lookup_object(index)


class _BlockLoadPlanner(DefaultLoadPlanner):
    """DCP's load planner, plus the blocks this rank holds now: DCP reads into each the overlapping
    parts of the saved blocks (the resharding)."""

    def __init__(self, blocks: Sequence[_Block]) -> None:
        super().__init__(flatten_state_dict=False, flatten_sharded_tensors=False)
        self.blocks: dict[str, list[_Block]] = {}
        for b in blocks:
            self.blocks.setdefault(b.fqn, []).append(b)

    def create_local_plan(self) -> LoadPlan:
        plan = super().create_local_plan()
        assert self.metadata is not None
        items = list(plan.items)
        for fqn, blocks in self.blocks.items():
            md = self.metadata.state_dict_metadata[fqn]
            assert isinstance(md, TensorStorageMetadata)
            chunks = [ChunkStorageMetadata(torch.Size(b.offsets), b.tensor.size()) for b in blocks]
            items += create_read_items_for_chunk_list(fqn, md, chunks)
        return dataclasses.replace(plan, items=items)

    def lookup_tensor(self, index: MetadataIndex) -> torch.Tensor:
        if index.fqn in self.blocks:
            return self.blocks[index.fqn][index.index or 0].tensor
        return super().lookup_tensor(index)


def _pieces(model: Any) -> dict[str, list[list[int]]]:
    """Per table, the column pieces ``[offset, end)`` of its shards under ``model``'s plan."""
    emb = model.embeddings
    geometry = emb.plan.geometry(_plan_config(emb))
    out: dict[str, set[tuple[int, int]]] = {t.name: set() for t in emb.tables}
    for i, s in enumerate(emb.plan.shards):
        g = geometry[i]
        out[s.table].add((g.col_offset, g.col_offset + g.col_count))
    return {k: [list(p) for p in sorted(v)] for k, v in out.items()}


def _plan_config(emb: Any) -> Any:
    from .sharded import plan_config

    return plan_config(emb.tables, emb.embedding_dim, emb.pooling)


def _shard_state(sparse_opt: Any, s: LocalShard) -> tuple[Any, torch.Tensor | None]:
    """The sparse optimizer of shard ``s`` and its accumulator rows (a view), ``None`` for SGD."""
    opt = sparse_opt.optimizers[s.collection]
    if not isinstance(opt, RowWiseAdagrad | ExactAdagrad):
        return opt, None
    ebc = sparse_opt.model.collections[s.collection]
    lo, hi = int(ebc.row_offsets[s.slot]), int(ebc.row_offsets[s.slot + 1])
    return opt, opt.momentum[lo:hi]


def _table_blocks(
    model: Any, sparse_opt: Any, saved_pieces: Mapping[str, list[list[int]]] | None
) -> list[tuple[_Block, torch.Tensor, tuple[int, int] | None]]:
    """This rank's blocks of the tables and their accumulators: ``(block, where it goes in the model,
    the shard's column piece for a row-wise accumulator)``. Saving (``saved_pieces`` ``None``): the
    blocks are views of the model, a data-parallel table's on rank 0 only. Loading: new tensors to
    read into, every replica of a data-parallel table, a row-wise accumulator's every saved piece."""
    emb, out = model.embeddings, []
    saving = saved_pieces is None
    pieces = _pieces(model) if saving else dict(saved_pieces)
    dim = emb.embedding_dim
    for s, w in emb.shard_weights():
        if saving and s.sharding == "data_parallel" and model.rank != 0:
            continue
        t, g = emb.tables[s.table_index], s.geometry
        at = (g.row_offset, g.col_offset)
        block = w if saving else torch.empty_like(w)
        out.append((_Block(f"tables.{t.name}.weight", at, (t.num_rows, dim), block), w, None))
        opt, state = _shard_state(sparse_opt, s)
        if state is None:
            continue
        fqn = f"tables.{t.name}.momentum"
        if isinstance(opt, ExactAdagrad):
            block = state if saving else torch.empty_like(state)
            out.append((_Block(fqn, at, (t.num_rows, dim), block), state, None))
            continue
        mine = [g.col_offset, g.col_offset + g.col_count]
        n = len(pieces[t.name])
        if saving:
            block = state.unsqueeze(1)
            out.append(
                (_Block(fqn, (g.row_offset, pieces[t.name].index(mine)), (t.num_rows, n), block), state, None)
            )
        else:
            block = torch.empty(g.row_count, n, dtype=state.dtype)
            out.append((_Block(fqn, (g.row_offset, 0), (t.num_rows, n), block), state, (mine[0], mine[1])))
    return out


def fold_pieces(saved: torch.Tensor, pieces: Sequence[Sequence[int]], mine: tuple[int, int]) -> torch.Tensor:
    """A row-wise accumulator for the column piece ``mine`` from the saved pieces' (``saved``: rows x
    pieces): the column-weighted mean of the pieces it overlaps (exact when ``mine`` is a union of
    saved pieces; a finer piece takes the value of the one it lies in)."""
    lo, hi = mine
    weights = torch.tensor([max(0, min(hi, b) - max(lo, a)) for a, b in pieces], dtype=torch.float64)
    if not float(weights.sum()):
        raise ValueError(f"the saved column pieces {list(pieces)} do not cover columns {lo}..{hi - 1}")
    return (saved.to(torch.float64) @ (weights / weights.sum())).to(saved.dtype)


def _dense_tensors(model: Any, dense_opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """The dense replica and its optimizer's state tensors under their global names."""
    out = {f"dense.{k}": v for k, v in model.dense.module.state_dict().items()}
    for i, state in dense_opt.state_dict()["state"].items():
        for name, v in state.items():
            if isinstance(v, torch.Tensor):
                out[f"dense_optimizer.{i}.{name}"] = v
    return out


def _json_value(v: Any) -> Any:
    """A hyper-parameter as JSON (tuples as lists; ``repr`` of anything JSON cannot hold)."""
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return v if v is None or isinstance(v, (bool, int, float, str)) else repr(v)


def dense_info(dense_opt: torch.optim.Optimizer, kind: str) -> dict[str, Any]:
    """The dense optimizer's name, parameter groups and non-tensor state (the manifest's)."""
    sd = dense_opt.state_dict()
    other = {
        str(i): {n: _json_value(v) for n, v in st.items() if not isinstance(v, torch.Tensor)}
        for i, st in sd["state"].items()
    }
    groups = [{k: _json_value(v) for k, v in g.items()} for g in sd["param_groups"]]
    return {"kind": kind, "param_groups": groups, "other_state": other}


# ----- ranks agreeing ---------------------------------------------------------------------------
def _agree(error: str) -> None:
    """Every rank's ``error`` (``""``: none) gathered: the first raised as a ``ValueError`` on every
    rank (a barrier too), so no rank waits in a collective another left."""
    errors = [error]
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        errors = [None] * dist.get_world_size()
        dist.all_gather_object(errors, error)
    first = next((e for e in errors if e), "")
    if first:
        raise ValueError(first)


def _rank_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# ----- save -------------------------------------------------------------------------------------
def save_sharded(
    path: str | os.PathLike[str],
    model: Any,
    sparse_opt: Any,
    dense_opt: torch.optim.Optimizer,
    info: Mapping[str, Any],
) -> Path:
    """Save every rank's part of ``model`` and both optimizers at ``path`` (see the module docstring),
    all or nothing; ``info``: the manifest's plain data (config, step, losses, data position,
    optimizers' names). Every rank must call it; returns the folder."""
    final = Path(path)
    tmp, old = final.with_name(final.name + ".tmp"), final.with_name(final.name + ".old")
    rank, world = _rank_world()
    error = ""
    if rank == 0:
        try:
            check_target(final)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        except (OSError, ValueError) as e:
            error = f"checkpoint {str(final)!r} cannot be saved: {e}"
    _agree(error)
    blocks = [b for b, _, _ in _table_blocks(model, sparse_opt, None)]
    plain = {**_dense_tensors(model, dense_opt), f"rng.{rank}": torch.get_rng_state()}
    writer = dcp.FileSystemWriter(tmp, single_file_per_rank=True, sync_files=True, thread_count=1)
    dcp.save(plain, storage_writer=writer, planner=_BlockSavePlanner(blocks))
    mine = {p.name: _sha256(p) for p in sorted(tmp.glob(f"__{rank}_*"))}
    everyone = [mine]
    if world > 1:
        everyone = [None] * world
        dist.all_gather_object(everyone, mine)
    error = ""
    if rank == 0:
        try:
            _publish(final, tmp, old, model, info, everyone)
        except OSError as e:
            error = f"checkpoint {str(final)!r} cannot be saved: {e}"
    _agree(error)
    return final


def _publish(
    final: Path, tmp: Path, old: Path, model: Any, info: Mapping[str, Any], digests: Sequence[Any]
) -> None:
    """Rank 0, once every rank has written: the manifest, then the renames (module docstring)."""
    files = {name: digest for d in digests for name, digest in d.items()}
    files[_METADATA] = _sha256(tmp / _METADATA)
    emb = model.embeddings
    manifest = {
        "format": FORMAT,
        **info,
        "world_size": model.world_size,
        "plan": [dataclasses.asdict(s) for s in emb.plan.shards],
        "tables": [[t.name, t.num_rows] for t in emb.tables],
        "embedding_dim": emb.embedding_dim,
        "pieces": _pieces(model),
        "files": files,
    }
    with open(tmp / MANIFEST, "w") as f:
        json.dump(manifest, f, indent=1, default=_json_value)
        f.flush()
        os.fsync(f.fileno())
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    fd = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the renames themselves survive a crash of the machine
    finally:
        os.close(fd)


# ----- load -------------------------------------------------------------------------------------
def check_manifest(info: Mapping[str, Any], expect: Mapping[str, Any]) -> None:
    """Refuse a checkpoint that does not fit this run: ``expect`` holds this run's ``config`` (plain
    data), ``sparse_optimizer`` and ``dense_optimizer`` names. ``ValueError`` naming the
    checkpoint, what differs and what this run needs."""
    p = info.get("path", "?")
    mine = json.loads(json.dumps(expect["config"], default=_json_value))
    theirs = json.loads(json.dumps(info["config"], default=_json_value))
    if theirs != mine:
        theirs = theirs if isinstance(theirs, dict) else {}
        diff = [k for k in sorted(set(mine) | set(theirs)) if theirs.get(k) != mine.get(k)]
        shown = "; ".join(
            f"{k}: checkpoint {_brief(k, theirs.get(k))}, this run {_brief(k, mine.get(k))}" for k in diff[:3]
        )
        raise ValueError(
            f"checkpoint {p!r} was saved for another model or table layout: its config differs in {diff} "
            f"({shown}); resume with the model it was saved with (the same --preset and table options)"
        )
    for which in ("sparse_optimizer", "dense_optimizer"):
        got = (info[which] or {}).get("kind")
        if got != expect[which]:
            raise ValueError(
                f"checkpoint {p!r} has {which} {got!r} but this run uses {expect[which]!r}; resume with "
                f"--{which.replace('_', '-')} {got}"
            )


def _check_metadata(
    md: Metadata, blocks: Sequence[_Block], plain: Mapping[str, torch.Tensor], p: str
) -> None:
    """Every tensor this rank will read is in the checkpoint with the global size and dtype it needs."""
    need = {b.fqn: (b.size, b.tensor.dtype) for b in blocks}
    need |= {k: (tuple(v.shape), v.dtype) for k, v in plain.items()}
    for fqn, (size, dtype) in need.items():
        md_t = md.state_dict_metadata.get(fqn)
        if not isinstance(md_t, TensorStorageMetadata):
            raise ValueError(f"checkpoint {p!r} lacks the tensor {fqn!r}: it was saved for another model")
        if tuple(md_t.size) != tuple(size) or md_t.properties.dtype != dtype:
            raise ValueError(
                f"checkpoint {p!r}: {fqn!r} is a {md_t.properties.dtype} tensor of shape {tuple(md_t.size)}, "
                f"this run needs {dtype} {tuple(size)} (another model or table layout)"
            )


def _brief(key: str, value: Any) -> str:
    """A config field in a few words (the tables as their rows)."""
    if key == "tables" and isinstance(value, list):
        return "rows " + show([t.get("num_rows") if isinstance(t, dict) else t for t in value], 60)
    return show(value, 60)


def _dense_targets(info: Mapping[str, Any], model: Any, md: Metadata, rank: int) -> dict[str, torch.Tensor]:
    """New tensors to read the dense replica, its optimizer's state and this rank's random state into."""
    out = {f"dense.{k}": torch.empty_like(v) for k, v in model.dense.module.state_dict().items()}
    for fqn, m in md.state_dict_metadata.items():
        if fqn.startswith("dense_optimizer.") and isinstance(m, TensorStorageMetadata):
            out[fqn] = torch.empty(tuple(m.size), dtype=m.properties.dtype)
    rng = f"rng.{rank}" if f"rng.{rank}" in md.state_dict_metadata else None
    if rng is not None:
        m = md.state_dict_metadata[rng]
        assert isinstance(m, TensorStorageMetadata)
        out[rng] = torch.empty(tuple(m.size), dtype=m.properties.dtype)
    return out


def load_sharded(
    path: str | os.PathLike[str],
    model: Any,
    sparse_opt: Any,
    dense_opt: torch.optim.Optimizer,
    expect: Mapping[str, Any],
) -> dict[str, Any]:
    """Load the checkpoint at ``path`` (:func:`resolve`) into this rank's part of ``model`` and both
    optimizers, under this run's plan, all or nothing (module docstring); ``expect`` as for
    :func:`check_manifest`. Every rank must call it; returns the manifest (``step``, ``losses``,
    ``data``...)."""
    rank, world = _rank_world()
    error, info = "", {}
    try:
        info = read_manifest(path)
        check_manifest(info, expect)
        error = verify_files(info, rank, world)
    except ValueError as e:
        error = str(e)
    _agree(error)
    p = info["path"]
    reader = SafeReader(p)
    error = ""
    try:
        md = reader.read_metadata()
        targets = _table_blocks(model, sparse_opt, info["pieces"])
        plain = _dense_targets(info, model, md, rank)
        _check_metadata(md, [b for b, _, _ in targets], plain, p)
    except (ValueError, KeyError, OSError, pickle.UnpicklingError, EOFError) as e:
        error = f"checkpoint {p!r} cannot be read: {e}"
    _agree(error)
    try:
        dcp.load(plain, storage_reader=reader, planner=_BlockLoadPlanner([b for b, _, _ in targets]))
    except Exception as e:  # noqa: BLE001 - DCP gathers every rank's failure into one exception
        raise ValueError(f"checkpoint {p!r} cannot be read: {str(e).splitlines()[0][:300]}") from None
    _agree(_commit_check(targets, info, p) or _check_dense(plain, info, dense_opt))
    _commit(targets, info, (model, sparse_opt, dense_opt), plain, rank)
    return info


def _commit_check(
    targets: Sequence[tuple[_Block, torch.Tensor, Any]], info: Mapping[str, Any], p: str
) -> str:
    """Why what was read cannot be used (a non-finite weight, a negative accumulator), or ``""``."""
    for b, _, _ in targets:
        t = b.tensor
        bad = ~torch.isfinite(t) if b.fqn.endswith(".weight") else ~(torch.isfinite(t) & (t >= 0))
        if bool(bad.any()):
            what = "finite numbers" if b.fqn.endswith(".weight") else "finite numbers >= 0 (sums of squares)"
            return f"checkpoint {p!r}: {b.fqn} must hold {what}, got {t[bad][0].item()}"
    return ""


def _check_dense(
    plain: Mapping[str, torch.Tensor], info: Mapping[str, Any], opt: torch.optim.Optimizer
) -> str:
    """Why the dense optimizer's saved state does not fit ``opt`` (groups, parameters, shapes), or ``""``."""
    p, saved = info.get("path", "?"), info["dense_optimizer"]
    groups = saved.get("param_groups")
    ours = opt.param_groups
    if (
        not isinstance(groups, list)
        or len(groups) != len(ours)
        or any(
            not isinstance(g, dict) or len(g.get("params", ())) != len(o["params"])
            for g, o in zip(groups, ours, strict=False)
        )
    ):
        return f"checkpoint {p!r}: its dense optimizer's parameter groups do not fit this model's"
    params = [q for g in ours for q in g["params"]]
    for k, v in plain.items():
        if not k.startswith("dense_optimizer."):
            continue
        _, i, name = k.split(".", 2)
        if not i.isdigit() or int(i) >= len(params):
            return f"checkpoint {p!r}: its dense optimizer state names parameter {i!r} of {len(params)}"
        if name != "step" and v.shape != params[int(i)].shape:
            shape, got = tuple(params[int(i)].shape), tuple(v.shape)
            return f"checkpoint {p!r}: dense optimizer state {k!r} has shape {got}, its parameter {shape}"
    return ""


@torch.no_grad()
def _commit(
    targets: Sequence[tuple[_Block, torch.Tensor, Any]],
    info: Mapping[str, Any],
    parts: tuple[Any, Any, torch.optim.Optimizer],
    plain: Mapping[str, torch.Tensor],
    rank: int,
) -> None:
    """Copy what every rank has read into the model and both optimizers (``parts``), the sparse
    optimizer's learning rate and ``eps`` too (as the single-process trainer's load does)."""
    model, sparse_opt, dense_opt = parts
    for b, dest, piece in targets:
        src = b.tensor if piece is None else fold_pieces(b.tensor, info["pieces"][b.fqn.split(".")[1]], piece)
        dest.copy_(src)
    model.dense.module.load_state_dict(
        {k[len("dense.") :]: v for k, v in plain.items() if k.startswith("dense.")}
    )
    dense_opt.load_state_dict(_dense_state(info["dense_optimizer"], plain, dense_opt))
    saved = info["sparse_optimizer"]
    for opt in sparse_opt.optimizers:
        opt.lr = float(saved.get("lr", opt.lr))
        if hasattr(opt, "eps"):
            opt.eps = float(saved.get("eps", opt.eps))
    if f"rng.{rank}" in plain:
        torch.set_rng_state(plain[f"rng.{rank}"])


def _dense_state(
    saved: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], opt: torch.optim.Optimizer
) -> dict:
    """A ``torch.optim`` state dict from the manifest's groups and the tensors read."""
    state: dict[int, dict[str, Any]] = {}
    for i, other in saved.get("other_state", {}).items():
        state.setdefault(int(i), {}).update(other)
    for k, v in tensors.items():
        if k.startswith("dense_optimizer."):
            _, i, name = k.split(".", 2)
            state.setdefault(int(i), {})[name] = v
    ours = opt.state_dict()["param_groups"]
    groups = []
    for g, o in zip(saved["param_groups"], ours, strict=False):
        groups.append(
            {k: tuple(v) if isinstance(o.get(k), tuple) and isinstance(v, list) else v for k, v in g.items()}
        )
    return {"state": state, "param_groups": groups}


# ----- one process ------------------------------------------------------------------------------
def read_single(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The sharded checkpoint at ``path`` as the single-process trainer's checkpoint dict
    (:meth:`recnotebooks.train.Trainer.save`'s fields, no checksum: checked here instead), read in
    this process without a process group: every table whole, a row-wise accumulator folded into one
    piece of all columns (:func:`fold_pieces`). ``ValueError`` naming the folder."""
    info = read_manifest(path)
    error = verify_files(info)
    if error:
        raise ValueError(error)
    p = info["path"]
    reader = SafeReader(p)
    try:
        md = reader.read_metadata()
        tensors = [(k, m) for k, m in md.state_dict_metadata.items() if isinstance(m, TensorStorageMetadata)]
        full = {k: torch.empty(tuple(m.size), dtype=m.properties.dtype) for k, m in tensors}
        with warnings.catch_warnings():  # "assuming the intent is to load in a single process": it is
            warnings.simplefilter("ignore", UserWarning)
            dcp.load(full, storage_reader=reader, no_dist=True)
    except Exception as e:  # noqa: BLE001 - any failure of a damaged checkpoint
        raise ValueError(f"checkpoint {p!r} cannot be read: {str(e).splitlines()[0][:300]}") from None
    return _as_single(info, full)


def _as_single(info: Mapping[str, Any], full: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    names = [n for n, _ in info["tables"]]
    model = {"embeddings.weight": torch.cat([full[f"tables.{n}.weight"] for n in names])}
    model |= {k[len("dense.") :]: v for k, v in full.items() if k.startswith("dense.")}
    sparse = dict(info["sparse_optimizer"])
    if sparse["kind"] == "rowwise_adagrad":
        dim = info["embedding_dim"]
        parts = [fold_pieces(full[f"tables.{n}.momentum"], info["pieces"][n], (0, dim)) for n in names]
        sparse["momentum"] = torch.cat(parts)
    elif sparse["kind"] == "adagrad":
        sparse["momentum"] = torch.cat([full[f"tables.{n}.momentum"] for n in names])
    dense = info["dense_optimizer"]
    state: dict[int, dict[str, Any]] = {int(i): dict(o) for i, o in dense.get("other_state", {}).items()}
    for k, v in full.items():
        if k.startswith("dense_optimizer."):
            _, i, name = k.split(".", 2)
            state.setdefault(int(i), {})[name] = v
    groups = [{k: tuple(v) if k == "betas" else v for k, v in g.items()} for g in dense["param_groups"]]
    return {
        "config": info["config"],
        "model": model,
        "dense_optimizer_kind": dense["kind"],
        "dtype": "fp32",
        "dense_optimizer": {"state": state, "param_groups": groups},
        "sparse_optimizer": sparse,
        "step": info["step"],
        "history": [{"step": float(i + 1), "loss": float(v)} for i, v in enumerate(info["losses"])],
        "data": info["data"],
    }


def single_to_global(
    state: Mapping[str, Any], tables: Sequence[tuple[str, int]], dim: int
) -> tuple[dict, dict]:
    """A single-process checkpoint dict (read and verified by
    :func:`recnotebooks.checkpoint.read_checkpoint`) as this module's global tensors and manifest:
    ``(tensors, info)``, for :func:`load_global`. ``ValueError`` for fields of the wrong kind."""
    model, sparse = state["model"], dict(state["sparse_optimizer"])
    weight = model.get("embeddings.weight")
    rows = [r for _, r in tables]
    if not isinstance(weight, torch.Tensor) or tuple(weight.shape) != (sum(rows), dim):
        got = tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise ValueError(f"its embeddings.weight is {got}, this model needs {(sum(rows), dim)}")
    full = {f"tables.{n}.weight": w for (n, _), w in zip(tables, weight.split(rows), strict=True)}
    full |= {f"dense.{k}": v for k, v in model.items() if k != "embeddings.weight"}
    momentum = sparse.pop("momentum", None)
    if isinstance(momentum, torch.Tensor):
        parts = momentum.split(rows)
        full |= {f"tables.{n}.momentum": m.reshape(r, -1) for (n, r), m in zip(tables, parts, strict=True)}
    other: dict[str, dict[str, Any]] = {}
    for i, st in state["dense_optimizer"].get("state", {}).items():
        for name, v in st.items():
            if isinstance(v, torch.Tensor):
                full[f"dense_optimizer.{i}.{name}"] = v
            else:
                other.setdefault(str(i), {})[name] = v
    groups = state["dense_optimizer"]["param_groups"]
    info = {
        "path": "?", "config": state["config"], "step": state["step"],
        "losses": [float(h["loss"]) for h in state["history"] if "loss" in h], "data": state["data"],
        "sparse_optimizer": sparse, "pieces": {n: [[0, dim]] for n, _ in tables},
        "dense_optimizer": {"kind": state.get("dense_optimizer_kind", "adagrad"), "param_groups": groups,
                            "other_state": other},
    }  # fmt: skip
    return full, info


def load_global(
    full: Mapping[str, torch.Tensor],
    info: Mapping[str, Any],
    model: Any,
    sparse_opt: Any,
    dense_opt: torch.optim.Optimizer,
) -> None:
    """Load whole tensors (:func:`single_to_global`) into this rank's part of ``model`` and both
    optimizers: each block sliced out, checked, then copied (nothing changes on a ``ValueError``).
    Every rank reads the same file, so every rank raises alike."""
    rank, _ = _rank_world()
    p = info["path"]
    targets = _table_blocks(model, sparse_opt, info["pieces"])
    plain = {f"dense.{k}": torch.empty_like(v) for k, v in model.dense.module.state_dict().items()}
    plain |= {k: v for k, v in full.items() if k.startswith("dense_optimizer.")}
    for b, _, _ in targets:
        src = full.get(b.fqn)
        if src is None or tuple(src.shape) != b.size:
            got = None if src is None else tuple(src.shape)
            raise ValueError(f"checkpoint {p!r}: {b.fqn} is {got}, this run needs {b.size}")
        region = src
        for d, (o, n) in enumerate(zip(b.offsets, b.tensor.shape, strict=True)):
            region = region.narrow(d, o, n)
        b.tensor.copy_(region)
    for k in [k for k in plain if k.startswith("dense.")]:
        src = full.get(k)
        if src is None or src.shape != plain[k].shape:
            raise ValueError(f"checkpoint {p!r}: {k} is missing or of another shape (another model)")
        plain[k].copy_(src)
    error = _commit_check(targets, info, p) or _check_dense(plain, info, dense_opt)
    if error:
        raise ValueError(error)
    _commit(targets, info, (model, sparse_opt, dense_opt), plain, rank)
