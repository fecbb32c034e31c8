"""Checkpoint files: written with a SHA-256 checksum, read all or nothing.

:meth:`recnotebooks.train.Trainer.save` writes a plain-data dict with ``torch.save``;
:func:`add_checksum` stores the SHA-256 of everything in it (every tensor's dtype, shape and
bytes, and every other value's ``repr``, keys in sorted order), and :func:`read_checkpoint`
loads it back with ``weights_only=True`` and recomputes that digest, so a truncated, empty,
foreign or bit-flipped file is refused with a ``ValueError`` naming the file instead of
loading silently corrupted weights. :func:`check_tensors` and :func:`check_dense_optimizer`
compare a checkpoint's tensors with the receiving model and optimizer *before* anything
is copied, which is what lets the trainer load all or nothing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from recnotebooks.checks import check_device, check_float, check_steps, check_writable_file, show

__all__ = [
    "FORMAT",
    "add_checksum",
    "state_digest",
    "read_checkpoint",
    "check_tensors",
    "check_dense_optimizer",
    "check_writable",
    "check_fields",
]

FORMAT = "recnotebooks.checkpoint.v2"
_OLD_FORMATS = ("recnotebooks.checkpoint.v1",)  # no checksum: loaded with a warning
_REQUIRED = ("config", "model", "dense_optimizer", "sparse_optimizer", "step", "history", "data")


def _feed(h: Any, value: object) -> None:
    """Hash ``value`` canonically (dict keys sorted, tensors by dtype, shape and bytes)."""
    if isinstance(value, torch.Tensor):
        t = value.detach().to("cpu").contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(value, Mapping):
        h.update(b"{")
        for k in sorted(value, key=repr):
            h.update(repr(k).encode() + b":")
            _feed(h, value[k])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[" if isinstance(value, list) else b"(")
        for v in value:
            _feed(h, v)
            h.update(b",")
        h.update(b"]")
    else:
        h.update(repr(value).encode())


def state_digest(state: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a checkpoint dict, ignoring its ``checksum`` field."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in state.items() if k != "checksum"})
    return h.hexdigest()


def add_checksum(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with ``format`` set to :data:`FORMAT` and its ``checksum`` field filled."""
    state = {**state, "format": FORMAT}
    state["checksum"] = state_digest(state)
    return state


def read_checkpoint(path: str | os.PathLike[str], device: torch.device | str = "cpu") -> dict[str, Any]:
    """Load and verify a checkpoint file; every failure is a ``ValueError`` naming the file.

    Raises ``FileNotFoundError`` if there is no such file. Returns the state dict, whose
    required fields are present and whose checksum matches (a v1 file, which has none, loads
    with a ``RuntimeWarning``).
    """
    device = check_device("device", device)  # a bad device is not a damaged file
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint {str(p)!r} does not exist (or is not a file)")
    size = p.stat().st_size
    if size == 0:
        raise ValueError(f"checkpoint {str(p)!r} is empty (0 bytes): not a recnotebooks checkpoint")
    try:
        state = torch.load(p, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a damaged file
        raise ValueError(
            f"checkpoint {str(p)!r} ({size:,} bytes) cannot be read: it is truncated, corrupted or not a "
            f"checkpoint written by Trainer.save ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
        ) from None
    fmt = state.get("format") if isinstance(state, dict) else None
    if fmt != FORMAT and fmt not in _OLD_FORMATS:
        raise ValueError(f"{str(p)!r} is not a recnotebooks checkpoint (format {fmt!r}, expected {FORMAT!r})")
    missing = [k for k in _REQUIRED if k not in state]
    if missing:
        raise ValueError(f"checkpoint {str(p)!r} lacks the field(s) {missing}")
    if fmt == FORMAT:
        digest = state_digest(state)
        if state.get("checksum") != digest:
            raise ValueError(
                f"checkpoint {str(p)!r} is corrupted: its SHA-256 checksum "
                f"{str(state.get('checksum'))[:16]}… does not match its contents ({digest[:16]}…); "
                "the file was damaged after it was written"
            )
    else:
        import warnings

        warnings.warn(
            f"checkpoint {str(p)!r} has format {fmt!r}, which carries no checksum: corruption cannot be "
            "detected; save it again to add one",
            RuntimeWarning,
            stacklevel=3,
        )
    return state


def check_tensors(what: str, saved: object, expected: Mapping[str, torch.Tensor], path: str) -> None:
    """Raise ``ValueError`` unless ``saved`` has exactly ``expected``'s keys, shapes and dtypes."""
    if not isinstance(saved, Mapping):
        raise ValueError(f"checkpoint {path!r}: {what} must be a dict of tensors, got {type(saved).__name__}")
    extra, lost = sorted(set(saved) - set(expected)), sorted(set(expected) - set(saved))
    if extra or lost:
        raise ValueError(f"checkpoint {path!r}: {what} has unexpected keys {extra[:5]} and lacks {lost[:5]}")
    for k, ref in expected.items():
        t = saved[k]
        if not isinstance(t, torch.Tensor) or t.shape != ref.shape or t.dtype != ref.dtype:
            got = f"{t.dtype} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(
                f"checkpoint {path!r}: {what}[{k!r}] must be a {ref.dtype} tensor of shape "
                f"{tuple(ref.shape)}, got {got}"
            )


def check_dense_optimizer(saved: object, optimizer: torch.optim.Optimizer, kind: str, path: str) -> None:
    """Raise ``ValueError`` unless ``saved`` is a state dict of an optimizer like ``optimizer``.

    Compares the hyper-parameter names of every parameter group (an Adam state has
    ``betas``, an Adagrad state ``lr_decay``), the parameter count per group, and each
    parameter's state tensors against the parameter's shape.
    """
    if not isinstance(saved, Mapping) or not isinstance(saved.get("param_groups"), list):
        raise ValueError(f"checkpoint {path!r} has no dense optimizer state (expected a {kind} state dict)")
    ours = optimizer.state_dict()["param_groups"]
    groups = saved["param_groups"]
    if len(groups) != len(ours):
        raise ValueError(
            f"checkpoint {path!r}: dense optimizer has {len(groups)} parameter groups, need {len(ours)}"
        )
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for i, (g, o) in enumerate(zip(groups, ours, strict=True)):
        if not isinstance(g, Mapping) or set(g) != set(o):
            keys = sorted(g) if isinstance(g, Mapping) else type(g).__name__
            raise ValueError(
                f"checkpoint {path!r}: dense optimizer state is not a {kind} state (group {i} has {keys}, "
                f"a {kind} group has {sorted(o)}); it was saved with another optimizer"
            )
        if len(g["params"]) != len(o["params"]):
            n, need = len(g["params"]), len(o["params"])
            raise ValueError(
                f"checkpoint {path!r}: dense optimizer group {i} has {n} parameters, need {need}"
            )
    state = saved.get("state", {})
    if not isinstance(state, Mapping):
        raise ValueError(f"checkpoint {path!r}: dense optimizer 'state' must be a dict")
    for idx, st in state.items():
        if not isinstance(idx, int) or not 0 <= idx < len(params) or not isinstance(st, Mapping):
            raise ValueError(f"checkpoint {path!r}: dense optimizer state has a bad entry {idx!r}")
        for name, t in st.items():
            if name != "step" and isinstance(t, torch.Tensor) and t.shape != params[idx].shape:
                raise ValueError(
                    f"checkpoint {path!r}: dense optimizer state[{idx}][{name!r}] has shape "
                    f"{tuple(t.shape)}, its parameter {tuple(params[idx].shape)}"
                )


def check_writable(path: str | os.PathLike[str]) -> None:
    """Raise ``ValueError`` unless a checkpoint can be written at ``path`` (checked before
    training, not after): creates its directory and writes, then removes, the temporary file
    that :meth:`recnotebooks.train.Trainer.save` writes first
    (:func:`recnotebooks.checks.check_writable_file`)."""
    check_writable_file("checkpoint", path, example="run.pt")


def check_fields(
    state: Mapping[str, Any],
    p: str,
    *,
    model: torch.nn.Module,
    sparse_optimizer: Any,
    sparse_kind: str,
    dense_optimizer: torch.optim.Optimizer,
    dense_kind: str,
) -> tuple[int, list[dict[str, float]]]:
    """Check a checkpoint's optimizer states, tensors, step and history against the trainer
    that will receive them (its config is checked by the trainer); returns (step, history)."""
    sparse = state["sparse_optimizer"]
    kind = sparse.get("kind") if isinstance(sparse, dict) else None
    if kind != sparse_kind:
        raise ValueError(
            f"checkpoint {p!r} has sparse optimizer {kind!r} but this trainer uses {sparse_kind!r}"
        )
    check_float(f"checkpoint {p!r}: sparse_optimizer lr", sparse.get("lr"), lo=0, lo_open=True)
    if kind in ("rowwise_adagrad", "adagrad"):  # an accumulator of squared gradients, per row or element
        check_float(f"checkpoint {p!r}: sparse_optimizer eps", sparse.get("eps"), lo=0, lo_open=True)
        check_tensors(
            "sparse_optimizer",
            {"momentum": sparse.get("momentum")},
            {"momentum": sparse_optimizer.momentum},
            p,
        )
        m = sparse["momentum"]
        ok = torch.isfinite(m) & (m >= 0)
        if not bool(ok.all()):  # checked here, before the trainer changes anything
            raise ValueError(
                f"checkpoint {p!r}: sparse_optimizer momentum must hold finite numbers >= 0 "
                f"(sums of squared gradients), got {m[~ok][0].item()}"
            )
    saved_dense = state.get("dense_optimizer_kind", dense_kind)
    if saved_dense != dense_kind:
        raise ValueError(
            f"checkpoint {p!r} has dense optimizer {saved_dense!r} but this trainer uses {dense_kind!r}"
        )
    check_dense_optimizer(state["dense_optimizer"], dense_optimizer, dense_kind, p)
    check_tensors("model", state["model"], model.state_dict(), p)
    step = check_steps(f"checkpoint {p!r}: step", state["step"], lo=0)
    history = state["history"]
    if not isinstance(history, list) or not all(isinstance(r, dict) for r in history):
        raise ValueError(f"checkpoint {p!r}: history must be a list of dicts, got {show(history)}")
    return step, list(history)
