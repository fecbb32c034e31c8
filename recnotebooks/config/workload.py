"""A training workload as one value: the model, the global batch, the precision, the data's
skew and the optimizers.

The same step settings travel together through the cost model
(:func:`recnotebooks.perf.estimate`, :func:`recnotebooks.perf.memory_report`), the planners and a
rank's training. :class:`Workload` spells them once, checks them once, and is frozen, so a
function that takes one cannot change what its caller asked for.

>>> from recnotebooks.config import Workload, preset
>>> w = Workload(preset("tiny"), batch_size=2048, dtype="bf16")
>>> w.batch_size, w.dtype, w.sparse_optimizer
(2048, 'bf16', 'rowwise_adagrad')
>>> w.replace(batch_size=4096).batch_size
4096

The older form, kept for one release: a function that takes a workload also takes a
:class:`~recnotebooks.config.DLRMConfig` followed by the step's settings as keywords
(``estimate(config, hw, batch_size=2048, dtype="bf16")``); :func:`workload_from` turns either
into the one :class:`Workload` (giving a Workload *and* those keywords is a ``TypeError``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recnotebooks.checks import check_choice, check_float, check_int, check_type
from recnotebooks.config.model import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS, DLRMConfig

__all__ = ["Workload", "DTYPES", "DEFAULT_ZIPF_EXPONENT", "OLDER_KEYWORDS", "OlderDefault", "workload_from"]

#: The precisions a step can run in, by name: pure fp32, TF32 GEMMs over fp32 storage, pure
#: bf16 or fp16, and autocast (AMP) fp16 or bf16 over fp32 master weights. What each costs
#: (bytes, GEMM rate, extra passes) is modeled in :mod:`recnotebooks.perf.precision`.
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "amp_fp16", "amp_bf16")

#: The Zipf exponent of the ids when none is given: the skew of Criteo's categorical ids
#: (fit by :func:`recnotebooks.data.skew.fit_zipf_exponent`; 0 is uniform).
DEFAULT_ZIPF_EXPONENT = 1.05


@dataclass(frozen=True)
class Workload:
    """What one training step does, independent of where it runs.

    Attributes:
        config: the model.
        batch_size: the global batch (samples per step over every device), >= 1.
        dtype: the precision, one of :data:`DTYPES`.
        zipf_exponent: the skew of the ids (Zipf exponent, >= 0; 0 is uniform).
        sparse_optimizer: the embedding tables' optimizer, one of
            :data:`~recnotebooks.config.SPARSE_OPTIMIZERS`.
        dense_optimizer: the MLPs' optimizer, one of :data:`~recnotebooks.config.DENSE_OPTIMIZERS`.

    Raises ``TypeError``/``ValueError`` naming the field when a value is not allowed.
    """

    config: DLRMConfig
    batch_size: int
    dtype: str = "fp32"
    zipf_exponent: float = DEFAULT_ZIPF_EXPONENT
    sparse_optimizer: str = "rowwise_adagrad"
    dense_optimizer: str = "adagrad"

    def __post_init__(self) -> None:
        check_type("config", self.config, DLRMConfig, "a DLRMConfig")
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, lo=1))
        check_choice("dtype", self.dtype, DTYPES)
        object.__setattr__(self, "zipf_exponent", check_float("zipf_exponent", self.zipf_exponent, lo=0))
        check_choice("sparse_optimizer", self.sparse_optimizer, SPARSE_OPTIMIZERS)
        check_choice("dense_optimizer", self.dense_optimizer, DENSE_OPTIMIZERS)

    def replace(self, **changes: object) -> Workload:
        """The same workload with ``changes`` (field names; checked again)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(
                f"Workload.replace got unknown field(s) {unknown}; allowed: "
                f"{[f.name for f in dataclasses.fields(self)]}"
            )
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


#: The keywords of the older form: a :class:`~recnotebooks.config.Workload`'s fields after ``config``.
OLDER_KEYWORDS = ("batch_size", "dtype", "zipf_exponent", "sparse_optimizer", "dense_optimizer")


class OlderDefault:
    """The default of an older-form parameter that a signature spells out (``memory_footprint``'s
    positional optimizers): it shows as its value (``'rowwise_adagrad'``) and counts as not given,
    so a :class:`~recnotebooks.config.Workload` may stand in its place."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


def workload_from(
    first: object,
    older: Mapping[str, object],
    caller: str,
    defaults: Mapping[str, object] | None = None,
    batch_size: object = None,
) -> Workload:
    """The :class:`~recnotebooks.config.Workload` ``caller`` models: ``first`` when it is one (then
    ``older`` must be empty), else one built from ``first`` (a DLRMConfig) and the older form's
    keywords ``older`` (any of :data:`OLDER_KEYWORDS`; an :class:`OlderDefault` counts as not
    given, ``defaults`` fill in what is not given), with ``batch_size`` where the older form gives
    the batch positionally (``None``: not given). ``TypeError`` names an unknown keyword, a
    Workload mixed with keywords, and a first argument that is neither; ``ValueError``/``TypeError``
    from the Workload name a bad value."""
    given = {k: v for k, v in older.items() if not isinstance(v, OlderDefault)}
    if batch_size is not None:
        given["batch_size"] = batch_size
    unknown = sorted(set(given) - set(OLDER_KEYWORDS))
    if unknown:
        raise TypeError(f"{caller}() got unexpected keyword argument(s) {unknown}; the step's settings are "
                        f"{list(OLDER_KEYWORDS)}")  # fmt: skip
    if isinstance(first, Workload):
        if given:
            raise TypeError(
                f"{caller}() takes a Workload, or a DLRMConfig with the keywords {list(OLDER_KEYWORDS)}, "
                f"not both: got a Workload and {sorted(given)}; change the Workload (workload.replace(...))"
            )
        return first
    if not isinstance(first, DLRMConfig):
        raise TypeError(f"config must be a DLRMConfig (or a Workload), got {type(first).__name__}")
    settings: dict[str, Any] = {**(defaults or {}), **given}
    if "batch_size" not in settings:
        raise TypeError(f"{caller}() with a DLRMConfig needs batch_size= (or give it a Workload)")
    return Workload(first, **settings)
