"""The one validation module: checks every public entry point uses on its inputs.

Each check returns the value normalised (a plain ``int``, ``float``, ``str``...) or raises
a ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, not allowed) whose
message names the parameter, the value given and what is allowed::

    >>> check_int("num_tables", 2.5, lo=1)
    Traceback (most recent call last):
    TypeError: num_tables must be an int >= 1, got 2.5 (float)
    >>> check_float("cache_hit_rate", 1.5, lo=0, hi=1)
    Traceback (most recent call last):
    ValueError: cache_hit_rate must be a finite number in [0, 1], got 1.5

Booleans are never accepted as numbers (``True`` is an ``int`` in Python); NumPy and
0-d torch integer/float scalars are accepted and converted. This module imports nothing
from the rest of the package, so every layer may use it.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, overload

if TYPE_CHECKING:  # annotations only: this module imports torch where a check needs it
    import torch

__all__ = [
    "MAX_STEPS",
    "DataNotFoundError",
    "check_data_path",
    "import_optional",
    "available_memory_bytes",
    "check_bool",
    "check_choice",
    "check_device",
    "check_fits_memory",
    "check_float",
    "check_fraction",
    "check_int",
    "check_multiple",
    "check_enough",
    "check_jagged_offsets",
    "check_jagged_timestamps",
    "check_int_list",
    "check_module_device",
    "check_steps",
    "check_str",
    "check_type",
    "check_writable_file",
    "describe_range",
    "format_bytes",
    "parse_float",
    "parse_int",
    "show",
]

#: Most steps (or batches) a run may be asked for: 10^9. The fastest step here (the tiny
#: preset) takes about a millisecond, so 10^9 steps is over eleven days of training without a
#: pause, and an epoch of Criteo Terabyte's 4.2 billion samples is 4.1 million steps at batch
#: 1024; a larger count is a typo (``--steps 1e30`` would never end), refused rather than run.
MAX_STEPS = 10**9

T = TypeVar("T")


def _kind(value: object) -> str:
    return type(value).__name__


def show(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages (huge inputs stay readable)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e15 else f"{bound:g}"


def describe_range(
    lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False
) -> str:
    """Words for an allowed range: ``">= 1"``, ``"in [0, 1)"``, ``"<= 10"`` or ``""``."""
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {_fmt(lo)}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {_fmt(hi)}"
    return ""


def _scalar(value: object) -> object:
    """A 0-d torch tensor or NumPy scalar as a Python number; anything else unchanged."""
    item = getattr(value, "item", None)
    shape = getattr(value, "shape", None)
    if callable(item) and shape is not None and tuple(shape) == () and not isinstance(value, bool):
        try:
            return item()
        except (TypeError, ValueError, RuntimeError):
            return value
    return value


def check_int(name: str, value: object, *, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an ``int`` within ``[lo, hi]`` (either bound optional).

    Accepts Python and NumPy integers and 0-d integer tensors; rejects ``bool``, floats
    (even ``2.0``: an id or a count given as a float is a mistake worth naming) and strings.
    """
    if type(value) is int and (lo is None or value >= lo) and (hi is None or value <= hi):
        return value  # the common case, on hot paths of the cost model: nothing to convert or say
    allowed = " ".join(x for x in ("an int", describe_range(lo, hi)) if x)
    v = _scalar(value)
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be {allowed}, got {show(value)} ({_kind(value)})")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{name} must be {allowed}, got {show(value)}")
    return v


def check_steps(name: str, value: object, *, lo: int = 1) -> int:
    """A count of steps or batches: an ``int`` in ``[lo, MAX_STEPS]`` (see :data:`MAX_STEPS`)."""
    return check_int(name, value, lo=lo, hi=MAX_STEPS)


def check_float(
    name: str,
    value: object,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """``value`` as a finite ``float`` within the range (open ends with ``lo_open``/``hi_open``)."""
    if type(value) is float or (type(value) is int and abs(value) < 2**63):  # the common case
        f = float(value)
        low_ok = lo is None or f > lo or (f == lo and not lo_open)
        if math.isfinite(f) and low_ok and (hi is None or f < hi or (f == hi and not hi_open)):
            return f
    rng = describe_range(lo, hi, lo_open=lo_open, hi_open=hi_open)
    allowed = "a finite number" + (f" {rng}" if rng else "")
    v = _scalar(value)
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name} must be {allowed}, got {show(value)} ({_kind(value)})")
    try:
        f = float(v)
    except OverflowError:  # a Python int too large for a float
        raise ValueError(f"{name} must be {allowed}, got {show(value)}") from None
    bad = not math.isfinite(f)
    bad = bad or (lo is not None and (f < lo or (lo_open and f == lo)))
    bad = bad or (hi is not None and (f > hi or (hi_open and f == hi)))
    if bad:
        raise ValueError(f"{name} must be {allowed}, got {show(value)}")
    return f


def check_fraction(name: str, value: object, *, lo_open: bool = False, hi_open: bool = False) -> float:
    """A fraction in ``[0, 1]`` (either end open on request)."""
    return check_float(name, value, lo=0.0, hi=1.0, lo_open=lo_open, hi_open=hi_open)


def check_bool(name: str, value: object) -> bool:
    """A real ``bool`` (NumPy ``bool_`` accepted); ``0``/``1`` and strings are refused."""
    v = _scalar(value)
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be True or False, got {show(value)} ({_kind(value)})")
    return v


def check_str(name: str, value: object, *, nonempty: bool = True) -> str:
    """A ``str`` (non-empty, ignoring surrounding spaces, unless ``nonempty=False``)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {show(value)} ({_kind(value)})")
    if nonempty and not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {show(value)}")
    return value


def check_choice(name: str, value: object, allowed: Iterable[T]) -> T:
    """The option of ``allowed`` that ``value`` equals (compared with ``==``, booleans never match
    numbers), typed as the options are: ``check_choice("policy", p, ("lru", "lfu"))`` is a ``str``."""
    options = list(allowed)
    for o in options:
        if isinstance(o, bool) != isinstance(value, bool):
            continue
        try:
            if o == value:
                return o
        except (TypeError, ValueError):  # arrays, tensors: not a valid choice
            continue
    raise ValueError(f"{name} must be one of {options}, got {show(value)}")


def check_multiple(name: str, value: object, of: int, what: str) -> int:
    """``value`` as an ``int >= 1`` that is a multiple of ``of``; ``what`` says why in words
    (``"an NVLink domain holds whole nodes"``)."""
    v = check_int(name, value, lo=1)
    if v % of:
        raise ValueError(f"{name} must be a multiple of {of} ({what}), got {show(value)}")
    return v


def check_enough(name: str, have: int, need: int, what: str) -> int:
    """``have``, a count found in the input (the samples of data files), when it is at least
    ``need``; else a ``ValueError`` naming ``name``, its count and the least allowed; ``what`` says
    what is counted and why that many (``"usable samples: one global batch of ..."``)."""
    if have < need:
        raise ValueError(f"{name} must hold at least {need:,} {what}, got {have:,}")
    return have


_V = TypeVar("_V")
_W = TypeVar("_W")
_X = TypeVar("_X")


@overload
def check_type(name: str, value: object, types: type[_V], what: str) -> _V: ...
@overload
def check_type(name: str, value: object, types: tuple[type[_V], type[_W]], what: str) -> _V | _W: ...
@overload
def check_type(
    name: str, value: object, types: tuple[type[_V], type[_W], type[_X]], what: str
) -> _V | _W | _X: ...
@overload
def check_type(name: str, value: object, types: tuple[type, ...], what: str) -> object: ...
def check_type(name: str, value: object, types: type | tuple[type, ...], what: str) -> object:
    """``value`` if it is an instance of ``types``, typed as one; ``what`` says it in words
    (``"a DLRMConfig"``)."""
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise TypeError(f"{name} must be {what}, got {show(value)} (bool)")
    if not isinstance(value, types):
        raise TypeError(f"{name} must be {what}, got {show(value)} ({_kind(value)})")
    return value


def check_int_list(
    name: str,
    values: object,
    *,
    lo: int | None = None,
    hi: int | None = None,
    min_len: int = 0,
    max_len: int | None = None,
) -> list[int]:
    """A sequence of ints (each in ``[lo, hi]``) as a list, its length in ``[min_len, max_len]``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of ints, got {show(values)} ({_kind(values)})")
    n = len(values)
    if n < min_len or (max_len is not None and n > max_len):
        rng = describe_range(min_len, max_len)
        raise ValueError(f"{name} must have a length {rng}, got {n} item(s): {show(list(values))}")
    return [check_int(f"{name}[{i}]", v, lo=lo, hi=hi) for i, v in enumerate(values)]


def check_device(name: str, value: object) -> torch.device:
    """A ``torch.device`` from ``"auto"``/``None`` (CUDA when present, else CPU), ``"cpu"``,
    ``"cuda"`` or ``"cuda:N"``; a CUDA device this machine lacks is refused, never run on CPU."""
    import torch

    allowed = "'auto', 'cpu', 'cuda' or 'cuda:N'"
    if value is None or value == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(value, (str, torch.device)):
        raise TypeError(f"{name} must be {allowed}, got {show(value)} ({_kind(value)})")
    try:
        dev = torch.device(value)
    except (RuntimeError, TypeError):
        raise ValueError(f"{name} must be {allowed}, got {value!r}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{name}={str(value)!r} but CUDA is not available here; use 'cpu' or 'auto'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            count = torch.cuda.device_count()
            raise ValueError(f"{name}={str(value)!r}: only {count} CUDA device(s) present")
    elif dev.type != "cpu":
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return dev


# ----- text typed on a command line or in an environment variable -------------------------
def _ascii_number(name: str, text: object, what: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be {what} given as text, got {show(text)} ({_kind(text)})")
    if not text.isascii():  # int("５") and float("１.５") accept other scripts' digits
        raise ValueError(f"{name} must be {what} written with ASCII digits 0-9, got {show(text)}")
    return text


def parse_int(name: str, text: object, *, lo: int | None = None, hi: int | None = None) -> int:
    """An int typed as text (a command-line option, an environment variable) within ``[lo, hi]``.

    Only ASCII digits count (Python's ``int()`` also reads full-width ``"５１２"`` and other
    scripts' digits, which a typed number should not silently be); ``"1e3"`` and ``"2.0"`` are
    not ints. Raises ``ValueError`` naming ``name`` and what is allowed."""
    allowed = " ".join(x for x in ("an int", describe_range(lo, hi)) if x)
    try:
        value = int(_ascii_number(name, text, allowed))
    except ValueError as e:
        if "ASCII" in str(e):
            raise
        raise ValueError(f"{name} must be {allowed}, got {show(text)}") from None
    return check_int(name, value, lo=lo, hi=hi)


def parse_float(
    name: str,
    text: object,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """A finite number typed as text within the range (ASCII only, as :func:`parse_int`)."""
    rng = describe_range(lo, hi, lo_open=lo_open, hi_open=hi_open)
    allowed = "a finite number" + (f" {rng}" if rng else "")
    try:
        value = float(_ascii_number(name, text, allowed))
    except ValueError as e:
        if "ASCII" in str(e):
            raise
        raise ValueError(f"{name} must be {allowed}, got {show(text)}") from None
    return check_float(name, value, lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open)


# ----- files and memory -------------------------------------------------------------------
def _check_inside_a_folder(name: str, p: Path) -> None:
    """``ValueError`` naming ``name`` unless the nearest existing ancestor of ``p`` is a folder."""
    for folder in p.parents:
        if folder.exists():
            if not folder.is_dir():
                raise ValueError(
                    f"{name} {str(p)!r} cannot be written: {str(folder)!r} is a file, not a folder; "
                    "give a path inside a folder"
                )
            return


def check_writable_file(name: str, path: object, *, example: str = "file") -> Path:
    """``path`` as a ``Path`` once a file can be written there: not a directory, no file where
    a folder of it should be; creates its folder and writes, then removes, ``<path>.tmp`` (the
    temporary file an atomic save writes first). Raises ``ValueError`` naming ``name``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path, got {show(path)} ({_kind(path)})")
    p = Path(path)
    if not str(path).strip():
        raise ValueError(f"{name} must be a file path, got {show(path)}")
    if p.is_dir():
        raise ValueError(f"{name} {str(p)!r} is a directory; give a file path such as {str(p / example)!r}")
    _check_inside_a_folder(name, p)
    tmp = p.with_suffix(p.suffix + ".tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(b"")
        tmp.unlink()
    except OSError as e:
        raise ValueError(f"{name} {str(p)!r} cannot be written: {e.strerror or e}") from None
    return p


def check_writable_dir(name: str, path: object, *, marker: str, example: str = "ckpt") -> Path:
    """``path`` as a ``Path`` once a checkpoint folder can be written there: not a file; absent, empty
    or already a checkpoint (holding the file ``marker``: a folder of anything else is never replaced);
    creates its parent and creates, then removes, ``<path>.tmp`` (the folder an atomic save writes
    first). Raises ``ValueError`` naming ``name``, the path and what is allowed."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a folder path, got {show(path)} ({_kind(path)})")
    p = Path(path)
    if not str(path).strip():
        raise ValueError(f"{name} must be a folder path, got {show(path)}")
    if p.exists() and not p.is_dir():
        raise ValueError(
            f"{name} {str(p)!r} is a file; give a folder for the sharded checkpoint such as "
            f"{str(p.with_suffix('')) + '_' + example!r} (a new or empty folder, or an earlier checkpoint)"
        )
    if p.is_dir() and any(p.iterdir()) and not (p / marker).is_file():
        raise ValueError(
            f"{name} {str(p)!r} is a folder that holds other files and no checkpoint ({marker!r}): it is "
            "never replaced; give a new or empty folder, or an earlier checkpoint to overwrite"
        )
    _check_inside_a_folder(name, p)
    tmp = p.with_name(p.name + ".tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if tmp.exists():  # a save that was interrupted: its leftovers are rewritten by the next save
            probe = tmp / ".recnb-probe"
            probe.write_bytes(b"")
            probe.unlink()
        else:
            tmp.mkdir()
            tmp.rmdir()
    except OSError as e:
        raise ValueError(
            f"{name} {str(p)!r} cannot be written: {e.strerror or e} (a sharded checkpoint needs a "
            "writable folder, shared by every rank)"
        ) from None
    return p


class DataNotFoundError(FileNotFoundError, ValueError):
    """A data path that is not there: both a ``FileNotFoundError`` (what ``open`` raises) and a
    ``ValueError`` (a bad argument, as every check here raises), so either ``except`` catches it."""


def check_data_path(name: str, path: object, *, names: Sequence[str] = (), what: str, url: str) -> Path:
    """The data file ``path`` names: ``path`` itself when it is a file, else the first of
    ``names`` inside the folder ``path``. Anything else raises :class:`DataNotFoundError` naming
    ``name``, the path, ``what`` is expected there and ``url``, the page to download it from."""
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise TypeError(f"{name} must be a file or folder path, got {show(path)} ({_kind(path)})")
    p = Path(path)
    if p.is_file():
        return p
    if p.is_dir():
        for candidate in names:
            if (p / candidate).is_file():
                return p / candidate
        inside = f" (a folder holding {' or '.join(names)})" if names else ""
        raise DataNotFoundError(
            f"{name}: the folder {str(p)!r} holds none of {list(names)}; expected {what}{inside}, "
            f"downloaded from {url}"
        )
    raise DataNotFoundError(f"{name}: nothing at {str(p)!r}; expected {what}, downloaded from {url}")


def import_optional(module: str, extra: str, purpose: str) -> object:
    """``import module``, or an ``ImportError`` saying that ``purpose`` needs it and the command
    that installs it (``pip install 'recnotebooks[extra]'``): for the optional dependencies
    pyproject.toml lists as extras."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"{purpose} needs {module.split('.')[0]}, an optional dependency: install it with "
            f"pip install 'recnotebooks[{extra}]' (or pip install {module.split('.')[0]})"
        ) from None


def format_bytes(n: float) -> str:
    """``n`` bytes in words: ``"1.5 GiB"``, ``"3.0 TiB"``, ``"12 bytes"``."""
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} bytes"


def available_memory_bytes(device: torch.device | str | int | None = "cpu") -> int | None:
    """Free memory on ``device`` (host: MemAvailable; CUDA: free device memory; ``None``: torch's
    default device), or None if unknown."""
    import torch

    dev = torch.get_default_device() if device is None else torch.device(device)
    if dev.type == "cuda":
        free, _ = torch.cuda.mem_get_info(dev)
        return int(free)
    if dev.type != "cpu":
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_fits_memory(
    what: str, need: int, device: torch.device | str | int | None = "cpu", *, hint: str = ""
) -> None:
    """Raise ``ValueError`` before allocating when ``need`` bytes exceed the memory ``device``
    has available now (:func:`available_memory_bytes`); the message gives both, in bytes.
    ``what`` names the thing allocated (``"embedding tables (weight)"``), ``hint`` what to change."""
    have = available_memory_bytes(device)
    if have is not None and need > have:
        import torch

        where = str(torch.get_default_device() if device is None else device)
        raise ValueError(
            f"{what} does not fit: it needs {format_bytes(need)} ({need:,} bytes) but {where} has "
            f"{format_bytes(have)} ({have:,} bytes) available" + (f"; {hint}" if hint else "")
        )


def check_module_device(name: str, value: object) -> torch.device | None:
    """A module's ``device`` argument: ``None`` stays ``None`` (torch's default device, as
    ``torch.nn`` modules take it), anything else as :func:`check_device` (``"cudaa"`` or CUDA on a
    machine without it is refused naming ``name``, before torch allocates or raises)."""
    return None if value is None else check_device(name, value)


def check_jagged_offsets(
    name: str, offsets: object, total: int, *, max_length: int | None = None
) -> torch.Tensor:
    """``offsets`` of a jagged batch over ``total`` values: a 1-D integer tensor of ``B + 1 >= 2``
    running sums, from 0 to ``total``, never decreasing; with ``max_length``, no piece longer.
    Returned as it is (int64 or int32); the message names the first offending piece."""
    import torch

    if (
        not isinstance(offsets, torch.Tensor)
        or offsets.ndim != 1
        or offsets.dtype not in (torch.int32, torch.int64)
    ):
        raise TypeError(f"{name} must be a 1-D int32 or int64 tensor, got {show(offsets)} ({_kind(offsets)})")
    if len(offsets) < 2:
        raise ValueError(
            f"{name} must hold at least two entries (an empty batch has nothing to train), got {len(offsets)}"
        )
    first, last = int(offsets[0]), int(offsets[-1])
    if first != 0 or last != total:
        raise ValueError(
            f"{name} must run from 0 to the number of values ({total:,}), got {first:,} .. {last:,}"
        )
    lengths = offsets[1:] - offsets[:-1]
    bad = torch.nonzero(lengths < 0).flatten()
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"{name} must never decrease, got {int(offsets[i]):,} then {int(offsets[i + 1]):,} at {i}"
        )
    if max_length is not None and len(lengths) and int(lengths.max()) > max_length:
        i = int(torch.argmax(lengths))
        raise ValueError(
            f"piece {i} of {name} holds {int(lengths[i]):,} values; at most {max_length:,} are allowed"
        )
    return offsets


def check_jagged_timestamps(name: str, timestamps: object, offsets: torch.Tensor) -> torch.Tensor:
    """``timestamps`` of a jagged batch (its ``offsets`` already checked): a ``(L,)`` tensor,
    one per value, that never decreases *within* a piece (a piece may start earlier than the one
    before it ends). The message names the first piece that goes back and where."""
    import torch

    n = int(offsets[-1])
    if not isinstance(timestamps, torch.Tensor) or timestamps.shape != (n,):
        raise ValueError(f"{name} must be a ({n},) tensor, one per token, got {show(timestamps)}")
    if timestamps.dtype == torch.bool or timestamps.is_complex():
        raise TypeError(f"{name} must hold numbers of seconds, got dtype {timestamps.dtype}")
    steps = timestamps[1:] - timestamps[:-1]
    starts = offsets[1:-1]
    inside = torch.ones_like(steps, dtype=torch.bool)
    inside[starts[(starts > 0) & (starts < n)] - 1] = False  # a new piece may start earlier
    backwards = torch.nonzero(inside & (steps < 0)).flatten()
    if len(backwards):
        pos = int(backwards[0]) + 1
        piece = int(torch.searchsorted(offsets, torch.tensor(pos, device=offsets.device), right=True)) - 1
        raise ValueError(
            f"{name} must not decrease within a history: history {piece} goes from "
            f"{timestamps[pos - 1].item()} to {timestamps[pos].item()} at token {pos}"
        )
    return timestamps
