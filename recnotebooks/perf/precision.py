"""What each training precision means to the cost model, in one table (:data:`PRECISIONS`).

The model's ``dtype`` argument names one row. Each row says, per class of tensor, how many
bytes an element takes and which tensor-core rate the GEMMs run at, plus the passes mixed
precision adds to a step:

* ``"fp32"``: everything in fp32, GEMMs at the fp32 (CUDA-core) peak.
* ``"tf32"``: fp32 storage everywhere, GEMMs at the TF32 tensor-core peak (where a device
  has none, as the V100, at its fp32 peak): ``torch.backends.cuda.matmul.allow_tf32``.
* ``"fp16"`` / ``"bf16"``: *pure* half precision (``model.half()``): every tensor, table,
  weight and optimizer state in 2 bytes, no casts, no loss scaling. An idealised lower
  bound; nobody trains a DLRM this way, but it is what the model priced "mixed precision"
  as before AMP was modeled.
* ``"amp_fp16"`` / ``"amp_bf16"``: automatic mixed precision as it runs under PyTorch's
  ``torch.autocast`` (:data:`AMP_SOURCES`): the MLPs' GEMMs at the half type's tensor-core
  rate, their outputs (activations) in half; the dot interaction in fp32 (autocast covers the
  MLPs only, as NVIDIA's DLRM; in bf16 its dot products lost the learning signal here); fp32
  master weights, fp32 gradients of them and fp32 optimizer state (the dense optimizer reads
  and writes fp32); each step every GEMM weight is read in fp32 and written as a half copy,
  and its half gradient cast back to fp32; ``torch.cat`` of half MLP outputs with fp32
  embeddings promotes to fp32; embedding tables, pooled
  embeddings and their all-to-alls in fp32 (TorchRec's and NVIDIA's DLRM default); gradients
  all-reduced in fp32. fp16 adds the loss-scale pass (unscale + inf check over the dense
  gradients, ``torch.amp.GradScaler``); bf16 needs none.

Components of :mod:`recnotebooks.perf.components` read the row (:func:`precision`), never
compare dtype names. ``DTYPE_BYTES`` of :mod:`recnotebooks.perf.hardware` is the ``storage``
column: bytes of a table row, a pooled embedding and a gradient on the wire.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = [
    "AMP_SOURCES",
    "LOSS_SCALE_PASSES",
    "PRECISIONS",
    "Precision",
    "precision",
    "precision_names",
    "precision_table",
]

#: Where the AMP row comes from (public documentation and code).
AMP_SOURCES = {
    "autocast": "PyTorch AMP: ops that autocast to lower precision (linear, matmul, bmm, ...) and ops that "
    "promote to the widest input type (cat, stack, ...); https://pytorch.org/docs/stable/amp.html",
    "grad_scaler": "torch.amp.GradScaler: unscale_ multiplies every gradient by 1/scale and checks for "
    "inf/NaN (one fused pass per gradient) before the optimizer step; https://pytorch.org/docs/stable/amp.html",
    "torchrec_tables": "TorchRec's embedding tables are fp32 unless data_type is set: BaseEmbeddingConfig."
    "data_type = DataType.FP32 (torchrec/modules/embedding_configs.py, https://github.com/pytorch/torchrec); "
    "its fused kernels are not autocast ops, so autocast leaves them fp32",
    "nvidia_dlrm": "NVIDIA DLRM for PyTorch, README of its first release (April 2020): 'We use mixed "
    "precision training with static loss scaling for the bottom and top MLPs while embedding tables are "
    "stored in FP32 format' (apex AMP O2 over the two MLPs, static loss scale 8192, fp32 nn.Embedding "
    "tables); https://github.com/NVIDIA/DeepLearningExamples/tree/master/PyTorch/Recommendation/DLRM",
}


@dataclass(frozen=True)
class Precision:
    """What one precision means for the bytes, GEMM rate and extra passes of a training step.

    Args:
        name: the ``dtype`` name the model takes.
        gemm: the key of ``Hardware.peak_flops`` the GEMMs run at (``"tf32"`` falls back to fp32).
        activation_bytes: an activation element (MLP and interaction outputs, their gradients).
        weight_bytes: a dense (MLP) parameter as stored and updated: the master weight, its
            gradient and each optimizer state element.
        embedding_bytes: an embedding-table element, a pooled embedding and its gradient.
        storage: bytes per element of what is stored and sent: tables, pooled embeddings on the
            wire, all-reduced gradients (``DTYPE_BYTES``).
        casts: each step reads every GEMM weight in ``weight_bytes`` and writes a copy in
            ``activation_bytes`` (and casts its gradient back), and casts the fp32 inputs of a
            GEMM to half.
        loss_scale: the unscale + inf check pass over the dense gradients (fp16 under AMP).
        description: one line for tables.
    """

    name: str
    gemm: str
    activation_bytes: int
    weight_bytes: int
    embedding_bytes: int
    casts: bool = False
    loss_scale: bool = False
    description: str = ""

    @property
    def storage(self) -> int:
        """Bytes per element of the tables, pooled embeddings and gradients on the wire."""
        return max(self.embedding_bytes, self.weight_bytes)

    @property
    def concat_bytes(self) -> int:
        """The interaction's ``torch.cat`` of MLP output and embeddings: the widest input type."""
        return max(self.activation_bytes, self.embedding_bytes)

    def cast_bytes_per_weight(self) -> int:
        """Bytes each GEMM weight element costs in casts per step: the fp32 weight read and its
        half copy written forward, the half gradient read and its fp32 copy written backward."""
        return 2 * (self.weight_bytes + self.activation_bytes) if self.casts else 0

    def input_cast_bytes(self, from_bytes: int) -> int:
        """Bytes per element of casting a ``from_bytes`` GEMM input to the GEMM's half type
        (forward) and its gradient back (backward); 0 when it already is that type."""
        same = from_bytes == self.activation_bytes
        return 0 if same or not self.casts else 2 * (from_bytes + self.activation_bytes)

    def loss_scale_bytes_per_grad(self) -> int:
        """Bytes per dense-gradient element of the loss-scale pass (0 without loss scaling)."""
        return LOSS_SCALE_PASSES * self.weight_bytes if self.loss_scale else 0

    def summary(self) -> dict[str, object]:
        """Plain data for a table."""
        return dataclasses.asdict(self) | {"storage": self.storage}


#: Passes per dense-gradient element of GradScaler's fused unscale + inf check (a read and a write).
LOSS_SCALE_PASSES = 2

PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", "fp32", 4, 4, 4, description="fp32 everywhere, GEMMs at the fp32 peak"),
        Precision("tf32", "tf32", 4, 4, 4, description="fp32 storage, GEMMs at the TF32 tensor-core peak"),
        Precision("bf16", "bf16", 2, 2, 2, description="pure bf16 (model.half-style): every byte in half"),
        Precision("fp16", "fp16", 2, 2, 2, description="pure fp16 (model.half()): every byte in half"),
        Precision(
            "amp_fp16",
            "fp16",
            2,
            4,
            4,
            casts=True,
            loss_scale=True,
            description="autocast fp16: half GEMMs and activations, fp32 master weights, optimizer "
            "state and tables, casts each step, loss scaling",
        ),
        Precision(
            "amp_bf16",
            "bf16",
            2,
            4,
            4,
            casts=True,
            description="autocast bf16: half GEMMs and activations, fp32 master weights, optimizer "
            "state and tables, casts each step, no loss scaling",
        ),
    )
}


def precision_names() -> list[str]:
    """The ``dtype`` names the model takes."""
    return list(PRECISIONS)


def precision(dtype: str) -> Precision:
    """The :class:`Precision` row of ``dtype`` (a ``ValueError`` lists the names)."""
    if not isinstance(dtype, str) or dtype not in PRECISIONS:
        raise ValueError(f"dtype must be one of {precision_names()}, got {dtype!r}")
    return PRECISIONS[dtype]


def precision_table() -> list[dict[str, object]]:
    """One row per precision (for a notebook table): bytes, GEMM rate key, extra passes."""
    return [p.summary() for p in PRECISIONS.values()]
