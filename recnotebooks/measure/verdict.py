"""Whether a measured comparison passed, and why not: one verdict for ``recnb validate``,
``recnb validate --distributed`` and ``recnb calibrate`` (and the notebooks that run them).

A number measured on a shared machine can miss its target for reasons that have nothing to do
with the model: other programs kept the cores busy, or the machine ran slower during the
measurements than when it was calibrated. A :class:`Verdict` says which, beside the number, so a
failed run never reads as a result::

    NOT PASSED: MAPE 103.0% (target <= 15%), Spearman 0.70 (target >= 0.9), 5 configs
      - MAPE 103.0% is above the target of 15%
      - the machine ran slower than when calibrated: speed probe 65.6 GFLOP/s against 88.8 (0.74x)
      - a quick run: 5 configs, fewer than the 10 a verdict needs

``passed`` is ``True`` (every target met, the machine steady), ``False`` (a reason above) or
``None`` when nothing failed but the run is too small to judge (a quick run's few configs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from recnotebooks.measure.cores import APART_HANDOFF, cores_apart
from recnotebooks.text import REPORT_CHARS, wrap_report

__all__ = [
    "APART_HANDOFF",
    "PROBE_TOLERANCE",
    "Verdict",
    "busy_reason",
    "apart",
    "placement_reason",
    "probe_reason",
    "target_reasons",
    "verdict",
]

#: How far the machine's speed during a run may be from its calibrated speed (the speed probes'
#: ratio, GEMM or copy) before the comparison is no test of the model: 15%, the single-process
#: validation's MAPE target (a machine that much slower alone would use up the error allowed).
PROBE_TOLERANCE = 0.15


@dataclass(frozen=True)
class Verdict:
    """Whether a measured comparison ``passed`` (``None``: too small to judge, nothing failed)
    and ``why_not``: every reason, in words (empty when it passed)."""

    passed: bool | None
    why_not: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``"PASSED"``, ``"NOT PASSED"`` or ``"NOT JUDGED"``."""
        return {True: "PASSED", False: "NOT PASSED", None: "NOT JUDGED"}[self.passed]

    def lines(self, headline: str, width: int = REPORT_CHARS) -> list[str]:
        """The verdict first, then ``headline`` (the numbers), then one line per reason, each
        wrapped at word boundaries within ``width`` characters (:func:`~recnotebooks.text.wrap_report`)."""
        return wrap_report(
            "\n".join([f"{self.label}: {headline}", *(f"  - {why}" for why in self.why_not)]), width
        )

    def to_dict(self) -> dict[str, object]:
        """``{"passed", "verdict", "why_not"}`` as the ``--json`` outputs carry them."""
        return {"passed": self.passed, "verdict": self.label, "why_not": list(self.why_not)}


def verdict(failed: Iterable[str], too_small: Iterable[str] = ()) -> Verdict:
    """A :class:`Verdict` from reasons that fail the run (``failed``) and reasons it cannot be
    judged (``too_small``): ``False`` with any of the first, else ``None`` with any of the
    second, else ``True``."""
    hard, soft = tuple(failed), tuple(too_small)
    return Verdict(False if hard else None if soft else True, hard + soft)


def target_reasons(
    mape: float, spearman: float, configs: int, targets: Mapping[str, float], quick: bool = False
) -> tuple[list[str], list[str]]:
    """``(failed, too_small)`` reasons of a MAPE and a Spearman over ``configs`` configs against
    ``targets`` (``{"mape", "spearman", "configs"}``)."""
    failed, small = [], []
    if not mape <= targets["mape"]:  # NaN fails too
        failed.append(f"MAPE {mape:.1%} is above the target of {targets['mape']:.0%}")
    if not spearman >= targets["spearman"]:
        failed.append(f"Spearman {spearman:.2f} is below the target of {targets['spearman']:g}")
    if configs < targets["configs"]:
        what = "a quick run: " if quick else ""
        small.append(f"{what}{configs} configs, fewer than the {targets['configs']:.0f} a verdict needs")
    return failed, small


def probe_reason(run: Mapping[str, float] | None, reference: Mapping[str, float] | None) -> str:
    """Why the machine's speed during a run (``run``, a speed probe: ``gflops``, ``copy_bw``) is
    no test of a model calibrated at ``reference``: either figure more than
    :data:`PROBE_TOLERANCE` away from it (``""`` when within, or when either is missing)."""
    if not run or not reference:
        return ""
    words, ratios = [], []
    for key, unit, scale in (("gflops", "GFLOP/s", 1.0), ("copy_bw", "GB/s of copy", 1e-9)):
        now, ref = run.get(key), reference.get(key)
        if not now or not ref:
            continue
        ratio = now / ref
        if abs(ratio - 1) > PROBE_TOLERANCE:
            words.append(f"{now * scale:.1f} {unit} against {ref * scale:.1f} ({ratio:.2f}x)")
            ratios.append(ratio)
    if not words:
        return ""
    how = "slower" if max(ratios) < 1 else "faster" if min(ratios) > 1 else "at another speed"
    return (
        f"the machine ran {how} than when calibrated (more than {PROBE_TOLERANCE:.0%} off): speed "
        f"probe {'; '.join(words)}"
    )


def apart(probe: Mapping[str, float]) -> float | None:
    """The reading of ``probe`` (its ``handoff``, or ``handoff_after`` taken after a measurement)
    at or above :data:`APART_HANDOFF`, the highest if both are: the threads' cores shared no
    cache; ``None`` when neither is (or the probe has none: a GPU's, an older calibration's)."""
    high = [probe[k] for k in ("handoff", "handoff_after") if cores_apart(probe.get(k))]
    return max(high) if high else None


def placement_reason(probe: Mapping[str, float], reference: Mapping[str, float] | None) -> str:
    """Why a measurement is not of the machine that was calibrated though its speed is: its
    probe read the threads' cores sharing no cache (:func:`apart`) where the calibration's
    ``reference`` read them sharing one (``""`` otherwise, or when the reference has no
    ``handoff``: a machine whose threads never share a cache is calibrated as it is)."""
    ref, now = (reference or {}).get("handoff"), apart(probe)
    if not ref or cores_apart(ref) or now is None:
        return ""
    return (
        f"its threads ran on cores that shared no cache, unlike when calibrated: a pass reading "
        f"another thread's writes took {now:.1f}x one reading its own, against {ref:.1f}x then"
    )


def busy_reason(reliability: Sequence[tuple[str, str]], what: str = "configs") -> str:
    """Why measurements cannot be trusted: ``reliability`` holds ``(name, reason)`` per
    measurement (``reason`` ``""`` for a reliable one; :func:`recnotebooks.timing.reliability`'s
    words); ``""`` when every one is reliable."""
    shaky = [(n, r) for n, r in reliability if r]
    if not shaky:
        return ""
    first = f"{shaky[0][0]}: {shaky[0][1]}"
    more = f"; {len(shaky) - 1} more" if len(shaky) > 1 else ""
    return (
        f"{len(shaky)} of {len(reliability)} {what} NOT RELIABLE, measured on a busy or erratic "
        f"machine ({first}{more})"
    )
