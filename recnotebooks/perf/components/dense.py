"""The dense part of one modeled step, the same on every rank (every number **modeled**).

:func:`data_loading` and :func:`host_to_device` (the batch in host DRAM and over PCIe),
:func:`mlp` (bottom and top towers), :func:`interaction` (with :func:`cross_layers` for DCN) and
:func:`dense_optimizer`, built on
:func:`gemm_time`. What ``dtype`` means (bytes of activations and weights, the GEMM rate, the
casts and loss scaling of mixed precision) is read from its row of
:data:`recnotebooks.perf.precision.PRECISIONS`. Memory bandwidths count bytes read plus bytes
written, as the spec sheets do.
"""

from __future__ import annotations

from dataclasses import dataclass

from recnotebooks.checks import check_choice
from recnotebooks.config import DENSE_OPTIMIZERS, DLRMConfig
from recnotebooks.perf.components.ops import HUGECTR
from recnotebooks.perf.hardware import Hardware
from recnotebooks.perf.precision import precision
from recnotebooks.perf.traffic import INDEX_BYTES

__all__ = ["Work", "cross_layers", "data_loading", "dense_optimizer", "gemm_time", "host_to_device",
           "input_bytes_per_sample", "interaction", "mlp"]  # fmt: skip

#: Bytes touched per element by the elementwise tail of one MLP layer: bias + ReLU forward
#: (read + write), ReLU backward (2 reads + a write), bias gradient (a read).
_MLP_ELEMENTWISE_PASSES = 7
#: Passes over each ``(batch, width)`` tensor of one cross layer's elementwise ops: forward the
#: product with ``x_0`` and the residual sum (two reads and a write each: 6; the bias add is in the
#: GEMM); backward the product's two gradients (3 each), ``x_0``'s gradient accumulated over
#: the layers (3), ``x_l``'s residual and GEMM gradients summed (3) and the bias gradient (a read).
_CROSS_ELEMENTWISE_PASSES = 19
#: Passes over each dense parameter of one update by ``torch.optim``'s single-tensor path (the
#: one it takes on CPUs), reads and writes counted: SGD ``add_`` (3); Adagrad ``addcmul_`` on the
#: state, ``sqrt``, ``add_`` eps, ``addcdiv_`` on the weight (11); Adam ``lerp_`` on the first
#: moment, ``mul_`` and ``addcmul_`` on the second, ``sqrt``, ``div``, ``add_`` eps, ``addcdiv_``
#: on the weight (18). The operators the same updates launch are in :mod:`.ops`.
_OPTIMIZER_PASSES = {"sgd": 3, "adagrad": 11, "adam": 18}


@dataclass(frozen=True)
class Work:
    """Seconds of one component and the device-memory bytes it moves (for bandwidth use)."""

    seconds: float
    device_bytes: float


def gemm_time(hw: Hardware, m: float, n: float, k: float, dtype: str = "fp32") -> float:
    """Seconds for an (m x k) @ (k x n) GEMM: ``2mnk / (peak * max_eff * prod d/(d+h))``, at the
    peak of the precision's GEMM type (``amp_fp16`` GEMMs run at the fp16 tensor-core peak)."""
    h = hw.gemm_half_dim
    eff = hw.gemm_max_efficiency * (m / (m + h)) * (n / (n + h)) * (k / (k + h))
    return 2.0 * m * n * k / (hw.flops(precision(dtype).gemm) * eff)


def input_bytes_per_sample(config: DLRMConfig) -> float:
    """Bytes of one sample's inputs: dense features, ids, per-table lengths and the label."""
    return 4 * config.num_dense + INDEX_BYTES * config.lookups_per_sample + 4 * config.num_tables + 4


def data_loading(config: DLRMConfig, hw: Hardware, local_batch: float) -> float:
    """The host reads and writes the batch once in its DRAM (``host_mem_bw``)."""
    return local_batch * input_bytes_per_sample(config) * 2 / hw.host_mem_bw


def host_to_device(config: DLRMConfig, hw: Hardware, local_batch: float) -> float:
    """The batch crosses the device's PCIe link (``host_link_bw``); nothing to copy on a CPU."""
    return local_batch * input_bytes_per_sample(config) / hw.host_link_bw if hw.kind == "gpu" else 0.0


def mlp(
    config: DLRMConfig, hw: Hardware, which: str, local_batch: float, dtype: str, fused: bool = False
) -> Work:
    """Forward and backward GEMMs of the ``"bottom"`` or ``"top"`` tower, plus each layer's
    elementwise tail at ``hbm_bw`` (the bottom tower's first layer needs no input gradient).
    Under mixed precision, the casts at ``hbm_bw``: each weight to half and its gradient back,
    and the tower's input where it arrives wider (fp32 dense features; a ``"cat"`` interaction's
    fp32 concatenation). ``fused``: the bias and ReLU run in the GEMMs' epilogues (HugeCTR's,
    :data:`~recnotebooks.perf.components.ops.HUGECTR`'s ``mlp_passes`` passes instead of 7)."""
    p = precision(dtype)
    passes = HUGECTR["mlp_passes"] if fused else _MLP_ELEMENTWISE_PASSES
    layers = config.mlp_layers(which)
    top_input = p.activation_bytes if config.interaction == "dot" else p.concat_bytes
    arrives = 4 if which == "bottom" else top_input  # fp32 dense features into the bottom tower
    casts = local_batch * layers[0][0] * p.input_cast_bytes(arrives)
    seconds, moved = casts / hw.hbm_bw, casts
    for j, (i, o) in enumerate(layers):
        seconds += gemm_time(hw, local_batch, o, i, dtype)  # forward
        if not (which == "bottom" and j == 0):
            seconds += gemm_time(hw, local_batch, i, o, dtype)  # input gradient
        seconds += gemm_time(hw, i, o, local_batch, dtype)  # weight gradient
        elementwise = local_batch * o * p.activation_bytes * passes
        elementwise += (i + 1) * o * p.cast_bytes_per_weight()  # the weight and bias casts
        moved += elementwise
        seconds += elementwise / hw.hbm_bw
    return Work(seconds, moved)


def interaction(
    config: DLRMConfig, hw: Hardware, local_batch: float, dtype: str, fused: bool = False
) -> Work:
    """Concatenating the features (three passes over inputs and outputs), and for ``"dot"``
    the batched GEMMs ``X X^T`` and, backward, ``(G + G^T) X``, the pairs gathered from the
    ``F x F`` products and scattered back into both triangles (memory passes), as our
    DotInteraction and the dlrm and TorchRec implementations do; for ``"dcn"`` the cross
    layers (:func:`cross_layers`).
    The features' concatenation is in the widest of its inputs' types (``concat_bytes``: fp32
    under AMP, as ``torch.cat`` promotes), cast to half for the GEMMs (and back backward);
    the output in the activations' type."""
    p = precision(dtype)
    if config.interaction == "dcn":
        inputs, width = config.num_interaction_features * config.embedding_dim, config.interaction_output_dim
        moved = (
            3 * local_batch * (inputs + width) * 2 * p.concat_bytes
        )  # x_0 stays in the concatenation's type
        cross = cross_layers(config, hw, local_batch, dtype, fused)
        return Work(moved / hw.hbm_bw + cross.seconds, moved + cross.device_bytes)
    # under AMP the dot interaction runs in fp32 (autocast covers the MLPs only, as NVIDIA's DLRM
    # and our DotInteraction do): fp32 GEMMs, fp32 output
    gdt = "fp32" if p.casts and config.interaction == "dot" else dtype
    f, d, eb, cb = config.num_interaction_features, config.embedding_dim, p.activation_bytes, p.concat_bytes
    if p.casts and config.interaction == "dot":
        eb = cb
    out_bytes = eb if config.interaction == "dot" else cb
    moved = 3 * local_batch * (f * d * cb * 2 + config.interaction_output_dim * out_bytes * 2)
    if config.interaction == "dot" and not p.casts:
        moved += local_batch * f * d * p.input_cast_bytes(cb)  # the concatenation cast for the GEMMs
    if config.interaction == "dot":
        # X X^T written and read, G zeroed and read: four passes over F x F; the pairs' gather
        # (read, write) and scatter-add into both triangles (the gradient twice: read, write
        # and add): ten passes over P
        pairs = config.interaction_output_dim - config.bottom_mlp[-1]
        moved += local_batch * (4 * f * f + 10 * pairs) * eb
        gemms = 2 * gemm_time(hw, local_batch * f, f, d, gdt)  # X X^T and the (G + G^T) X backward
        return Work(moved / hw.hbm_bw + gemms, moved)
    return Work(moved / hw.hbm_bw, moved)


def cross_layers(
    config: DLRMConfig, hw: Hardware, local_batch: float, dtype: str, fused: bool = False
) -> Work:
    """The ``"dcn"`` interaction's cross layers (``x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l`` on
    ``(B, w)``, rank ``r``): per layer the GEMMs ``(B x w)(w x r)`` and ``(B x r)(r x w)`` forward,
    backward both input gradients (``x_0`` needs one: the embeddings and bottom MLP train) and
    both weight gradients (``(w x B)(B x r)``, ``(r x B)(B x w)``), at the precision's GEMM rate
    (autocast covers them, as it covers the MLPs); and the elementwise ops' passes over ``(B, w)``
    at ``hbm_bw`` in the concatenation's type (``x_0`` and ``x_l`` stay in it under AMP). Under
    mixed precision each layer's input cast to half (and its gradient back) and the weight casts.
    ``fused``: the elementwise ops run in the GEMMs' epilogues (HugeCTR's: ``cross_passes`` of
    :data:`~recnotebooks.perf.components.ops.HUGECTR` instead of 19). Zero for another interaction."""
    if config.interaction != "dcn":
        return Work(0.0, 0.0)
    p = precision(dtype)
    b, w, r = local_batch, config.interaction_output_dim, config.dcn_rank
    gemms = (
        gemm_time(hw, b, r, w, dtype)  # V x
        + gemm_time(hw, b, w, r, dtype)  # W (V x) + b
        + gemm_time(hw, b, r, w, dtype)  # grad of V x: G W
        + gemm_time(hw, b, w, r, dtype)  # grad of x_l: (G W) V
        + gemm_time(hw, w, r, b, dtype)  # grad of W: G^T (V x)
        + gemm_time(hw, r, w, b, dtype)  # grad of V: (G W)^T x_l
    )
    moved = b * w * p.concat_bytes * (HUGECTR["cross_passes"] if fused else _CROSS_ELEMENTWISE_PASSES)
    moved += b * w * p.input_cast_bytes(p.concat_bytes)  # x_l cast to half for V's GEMM
    moved += (2 * w * r + w) * p.cast_bytes_per_weight()
    return Work(config.dcn_layers * (gemms + moved / hw.hbm_bw), config.dcn_layers * moved)


def dense_optimizer(config: DLRMConfig, hw: Hardware, dtype: str, optimizer: str = "adagrad") -> Work:
    """``optimizer`` (``"sgd"``, ``"adagrad"`` or ``"adam"``) over every dense parameter: its
    streaming passes at ``hbm_bw`` over the weights and their state as stored (fp32 master weights
    under AMP), plus the loss-scale pass over the gradients where the precision has one (AMP
    fp16's unscale + inf check)."""
    passes = _OPTIMIZER_PASSES[check_choice("optimizer", optimizer, DENSE_OPTIMIZERS)]
    p = precision(dtype)
    moved = config.dense_parameters * (p.weight_bytes * passes + p.loss_scale_bytes_per_grad())
    return Work(moved / hw.hbm_bw, moved)
