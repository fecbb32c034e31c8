"""The saved calibration of this machine: its file, where it lives and how it is read back.

``recnb calibrate`` (:mod:`recnotebooks.measure.calibrate`) stores the fitted ``this_machine`` as
JSON, with the speed probe taken beside it, one file per device kind: :func:`calibration_path`
says where (``~/.cache/recnotebooks``, or ``$RECNB_CALIBRATION``), :func:`check_calibration_path`
refuses a path no file can be written to before minutes of measuring, :func:`load_probe` reads
the probe back, :func:`load_rounds` what each of the calibration's rounds read (so that a
``recnb validate --saved`` run can say it, as a run that calibrates does) and
:func:`calibration_threads` the threads they ran on; a file that cannot
be read is ignored with a warning naming it (the uncalibrated defaults are used then).
:data:`COLLECTIVE_FIELDS` are the fields ``recnb calibrate --collectives`` fits, their sources
marked by :data:`COLLECTIVES_SOURCE`. The :class:`~recnotebooks.perf.hardware.Hardware` inside
is written and read by :func:`~recnotebooks.perf.hardware.save_calibration` and
:func:`~recnotebooks.perf.hardware.load_calibration`, beside :func:`~recnotebooks.perf.hardware.hardware`,
since ``hardware("this_machine")`` loads it: this module imports nothing of the model, so the arrow
between the two points one way.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections import Counter
from pathlib import Path

from recnotebooks.checks import check_writable_file

__all__ = [
    "COLLECTIVE_FIELDS",
    "COLLECTIVES_SOURCE",
    "calibration_path",
    "check_calibration_path",
    "calibration_threads",
    "load_probe",
    "load_rounds",
]

#: The fields ``recnb calibrate --collectives`` fits (a plain calibration keeps a saved fit of
#: them), and how each one's source begins once it has measured them here.
COLLECTIVE_FIELDS = ("collective_latency_s", "intra_node_bw", "sharded_op_overhead_s")
COLLECTIVES_SOURCE = "calibrated here by recnb calibrate --collectives"


def calibration_path(kind: str = "cpu") -> Path:
    """Where the calibration of this machine's CPU (``kind="cpu"``) or GPU (``"gpu"``) is
    stored; ``$RECNB_CALIBRATION`` overrides the CPU one's path (a GPU one sits beside it)."""
    if kind not in ("cpu", "gpu"):
        raise ValueError(f"kind must be 'cpu' or 'gpu', got {kind!r}")
    env = os.environ.get("RECNB_CALIBRATION")
    cpu = Path(env) if env else Path.home() / ".cache" / "recnotebooks" / "this_machine.json"
    return cpu if kind == "cpu" else cpu.with_name(cpu.stem + "_gpu" + cpu.suffix)


def _path_name(path: str | Path | None) -> str:
    """How an error names the calibration file: ``path`` when given, else the environment variable."""
    return (
        "path"
        if path
        else ("RECNB_CALIBRATION" if os.environ.get("RECNB_CALIBRATION") else "calibration path")
    )


def check_calibration_path(path: str | Path | None = None, kind: str = "cpu") -> Path:
    """The file :func:`~recnotebooks.perf.hardware.save_calibration` would write (``path``, else
    :func:`calibration_path`), once a file can be written there: ``ValueError`` naming ``path`` (or
    ``RECNB_CALIBRATION``), its value and why when it is a directory, sits under a file, or cannot
    be created. The ``recnb calibrate`` and ``recnb validate`` commands check it before minutes of
    measuring."""
    p = Path(path) if path else calibration_path(kind)
    return check_writable_file(_path_name(path), p, example="this_machine.json")


def _load(path: str | Path | None, kind: str = "cpu") -> dict:
    """The saved file as a dict: ``{}`` when there is none, and a warning naming the file when
    it cannot be read (the uncalibrated defaults are used then)."""
    p = Path(path) if path else calibration_path(kind)
    if not p.exists():
        blocker = next((f for f in p.parents if f.exists()), None)
        if blocker is not None and not blocker.is_dir():  # it can never exist: say so once
            _ignored(p, f"{str(blocker)!r} is a file, not a folder", stacklevel=4)
        return {}
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        d = f"not readable JSON ({type(e).__name__}: {e})"
    if not isinstance(d, dict):
        _ignored(p, d if isinstance(d, str) else f"not a JSON object ({type(d).__name__})", stacklevel=4)
        return {}
    return d | {"_path": p}


def _ignored(path: Path, why: str, stacklevel: int = 3) -> None:
    why = why if len(why) <= 160 else why[:159] + "…"
    warnings.warn(
        f"ignoring the saved calibration {path}: {why}; using the uncalibrated defaults "
        "(run `recnb calibrate` to write a new one)",
        stacklevel=stacklevel,
    )


def load_probe(path: str | Path | None = None, kind: str = "cpu") -> dict[str, float] | None:
    """The speed probe saved with the calibration (see :func:`recnotebooks.measure.calibrate.probe`),
    or None when there is none or its speeds are not finite positive numbers."""
    p = _load(path, kind).get("probe")
    speeds = [p.get("gflops"), p.get("copy_bw")] if isinstance(p, dict) else [None]
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf for v in speeds)
    return p if ok else None


def load_rounds(path: str | Path | None = None, kind: str = "cpu") -> list[dict[str, object]] | None:
    """What each round of the saved calibration read (``per_round`` of
    :func:`recnotebooks.measure.calibrate.fit_calibration`: its speed probe, operator costs, load
    and whether it was left out), or None when the file has none (saved before they were kept)
    or they are not a list of JSON objects."""
    r = _load(path, kind).get("rounds")
    return r if isinstance(r, list) and r and all(isinstance(x, dict) for x in r) else None


def calibration_threads(path: str | Path | None = None, kind: str = "cpu") -> int | None:
    """The CPU threads the saved calibration's rounds ran on (the count most of them used), or
    None when the file keeps no rounds or they recorded none. A step measured on fewer threads
    (the thread policy lowers them on a busy machine) is slower than the model fitted to them."""
    counts = []
    for r in load_rounds(path, kind) or []:
        load = r.get("load")
        n = load.get("threads") if isinstance(load, dict) else None
        if isinstance(n, (int, float)) and not isinstance(n, bool) and 1 <= n <= 1024 and n == int(n):
            counts.append(int(n))
    return Counter(counts).most_common(1)[0][0] if counts else None
