"""Hardware for the efficiency model: a preset by name, and this machine's saved calibration.

:class:`Hardware` (one node type, every number checked) is in
:mod:`recnotebooks.perf.hardware_record`; the cited presets (:data:`HARDWARE`) are in
:mod:`recnotebooks.perf.hardware_presets`; both are handed on from here, where the rest of the
package and the notebooks import them. :func:`hardware` picks a preset by name (``this_machine``
with the saved calibration); :func:`save_calibration` and :func:`load_calibration` store it in and
read it from the file of :mod:`recnotebooks.perf.calibration_file`.

Copy and edit a preset in a notebook with ``hardware("dgx_a100").replace(hbm_bytes=80e9)``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from recnotebooks.checks import check_type, show
from recnotebooks.perf.calibration_file import _ignored, _load, _path_name, check_calibration_path
from recnotebooks.perf.hardware_presets import HARDWARE
from recnotebooks.perf.hardware_record import (
    DTYPE_BYTES,
    FIELD_RANGES,
    GB,
    Hardware,
)
from recnotebooks.perf.hardware_record import MAX_DEVICES as MAX_DEVICES  # handed on, as before the split
from recnotebooks.perf.hardware_record import OPTIONAL_FIELDS as OPTIONAL_FIELDS
from recnotebooks.perf.hardware_record import TB as TB

__all__ = ["Hardware", "HARDWARE", "hardware", "hardware_names", "GB", "DTYPE_BYTES", "FIELD_RANGES",
           "save_calibration", "load_calibration", "CALIBRATED_BY", "is_calibrated"]  # fmt: skip

#: What the description of a calibrated machine says (:mod:`recnotebooks.measure.calibrate` writes
#: it); ``this_machine``'s uncalibrated defaults say ``"uncalibrated defaults"`` instead.
CALIBRATED_BY = "calibrated by microbenchmarks (recnb calibrate)"


def is_calibrated(hw: Hardware) -> bool:
    """Whether ``hw`` holds figures measured on this machine by ``recnb calibrate`` (its saved
    calibration, or one just fitted), not a preset's or the uncalibrated defaults."""
    return CALIBRATED_BY in check_type("hw", hw, Hardware, "a Hardware").description


def hardware_names() -> list[str]:
    return list(HARDWARE)


def hardware(name: str | Hardware, **overrides: object) -> Hardware:
    """A hardware preset by name (``this_machine`` includes the saved calibration, if any)."""
    if isinstance(name, Hardware):
        return name.replace(**overrides) if overrides else name
    check_type("hardware", name, str, "a Hardware or a preset name")
    if name not in HARDWARE:
        raise ValueError(f"hardware must be one of {hardware_names()}, got {name!r}")
    hw = HARDWARE[name]
    if name == "this_machine":
        hw = load_calibration() or hw
    return hw.replace(**overrides) if overrides else hw


# ----- the saved calibration of this machine (written by recnotebooks.measure.calibrate) -----
# The file itself (where it lives, reading it, the probe saved with it): perf.calibration_file.
def save_calibration(
    hw: Hardware,
    probe: dict[str, float] | None = None,
    path: str | Path | None = None,
    rounds: list[dict[str, object]] | None = None,
) -> Path:
    """Store ``hw`` (and the speed probe taken with it, and ``rounds``: what each round of the
    calibration read, its ``per_round``) for ``hardware("this_machine")``. Nothing is written
    when ``path`` cannot be (``ValueError``,
    :func:`~recnotebooks.perf.calibration_file.check_calibration_path`), ``rounds`` is not a
    list of dicts (``TypeError``) or holds what JSON cannot (``ValueError``)."""
    check_type("hw", hw, Hardware, "a Hardware")
    saved: dict[str, object] = {"hardware": dataclasses.asdict(hw), "probe": probe}
    if rounds is not None:
        if not (isinstance(rounds, list) and all(isinstance(r, dict) for r in rounds)):
            raise TypeError(f"rounds must be a list of dicts (per_round) or None, got {show(rounds)}")
        try:
            json.dumps(rounds)
        except (TypeError, ValueError) as e:
            raise ValueError(f"rounds must hold JSON figures only, got {show(rounds)}: {e}") from None
        saved["rounds"] = rounds
    p = check_calibration_path(path, hw.kind)
    text = json.dumps(saved, indent=1)
    try:
        p.write_text(text)
    except OSError as e:
        raise ValueError(f"{_path_name(path)} {str(p)!r} cannot be written: {e.strerror or e}") from None
    return p


def load_calibration(path: str | Path | None = None, kind: str = "cpu") -> Hardware | None:
    """The saved calibration of this machine's CPU (or, ``kind="gpu"``, its GPU), or None when
    there is none (or, with a warning, when it is not valid). ``hardware("this_machine")`` is
    the CPU one."""
    d = _load(path, kind)
    if not d:
        return None
    try:
        saved = dict(d["hardware"])
        if kind == "cpu" and "price_per_hour" not in saved:  # saved before presets had prices
            saved["price_per_hour"] = HARDWARE["this_machine"].price_per_hour
        return Hardware(**saved)
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        _ignored(d["_path"], f"{type(e).__name__}: {e}")
        return None
