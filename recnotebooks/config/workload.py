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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from recnotebooks.checks import check_choice, check_float, check_int, check_type
from recnotebooks.config.model import DENSE_OPTIMIZERS, SPARSE_OPTIMIZERS, DLRMConfig

__all__ = ["Workload", "DTYPES", "DEFAULT_ZIPF_EXPONENT"]

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
