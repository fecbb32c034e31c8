"""The HSTU model against what others published (:mod:`recnotebooks.published.hstu`).

For each published point, :func:`hstu_setup` builds what :func:`~recnotebooks.perf.hstu.hstu_step`
needs to price it -- the matching model preset, hardware preset and history lengths -- from what
the source says, with **no constant fitted to any point**; :func:`compare_hstu` gives two tidy
rows per point (``source`` ``"published"`` and ``"modeled"``, the same ``metric``), their ratio
(modeled / published) and ``speed_ratio`` (the model's speed over the run's: above 1, the model
is faster -- the ratio for a rate, its inverse for a time).

How each metric is modeled:

* ``TFLOPS per GPU`` / ``TFLOPS`` (recsys-examples): the source's own FLOP count
  (:func:`recsys_examples_flops`, ``PERF_ANALYSIS.md`` section 1.6 -- GEMMs 3x forward,
  attention 3.5x, the context tokens and the causal half as it counts them) over the modeled step
  time, so the ratio is the step times' ratio. The lengths: :func:`~recnotebooks.perf.hstu.zipf_lengths`
  ``(32, 1.2, 4096)``, each ``2 S + 3`` tokens, on each GPU -- the same batch on every GPU, as a
  perfectly balanced shuffler would make it; the runs without the shuffler (PR #340's baseline,
  exp0) wait for the GPU with the longest histories, which the model does not price.
* ``step ms``: the modeled step time.
* ``tokens per s`` (generative-recommenders #530, a forward pass of the layer stack alone): the
  stack's terms (projections, attention, pointwise, overhead) with ``backward=False``, 2,048
  candidates a history attending to the history and themselves (``num_targets``), the user
  histories spread evenly over ``[0, 2,048)`` events (mean 1,024, as the issue says; the
  issue gives no distribution: an assumption).

The model prices attention as GEMMs at the hardware's GEMM efficiency: a kernel that runs
attention far below its GEMMs' rate (the Triton baselines; the CUTLASS backward at 34% MFU in
``PERF_ANALYSIS.md``) is where the model is too fast. :func:`breakdown_rows` puts the published
GPU-time breakdown (``PERF_ANALYSIS.md`` section 2.2) and issue #530's kernel mix beside the
modeled components.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recnotebooks.config.hstu import HSTUConfig, hstu_preset
from recnotebooks.perf.hstu import HSTUStep, hstu_step, zipf_lengths
from recnotebooks.published.hstu import (
    ANALYSIS_BREAKDOWN_MS,
    HSTU_POINTS,
    ISSUE_530_KERNEL_MIX,
    PublishedHSTUPoint,
)

__all__ = ["HSTUSetup", "hstu_setup", "compare_hstu", "recsys_examples_flops", "breakdown_rows", "STACK"]

#: The terms of the layer stack alone (no tables, no top MLP, no collectives).
STACK = ("projections", "attention", "pointwise", "overhead")
#: recsys-examples' contextual tokens at the head of each history (``PERF_ANALYSIS.md`` 1.4).
_CONTEXT = 3
#: recsys-examples' table width (``NetworkArgs.item_embedding_dim``).
_RE_EMBEDDING_DIM = 128


@dataclass(frozen=True)
class HSTUSetup:
    """How the model prices one published point: ``config`` on ``lengths`` (tokens of each history
    on one device) with the keywords ``step_kwargs`` of :func:`~recnotebooks.perf.hstu.hstu_step`;
    ``stack_only``: the metric times the layer stack alone; ``why``: the choices in words."""

    config: HSTUConfig
    lengths: list[int]
    step_kwargs: dict[str, Any]
    stack_only: bool
    why: str


def recsys_examples_flops(
    tokens: Sequence[int], config: HSTUConfig | None = None, context: int = _CONTEXT
) -> float:
    """FLOPs of one training step as recsys-examples counts them (``PERF_ANALYSIS.md`` section 1.6):
    for each history of ``T`` tokens, ``L x 3 x 2 T H (4 N D)`` (U V Q K), ``L x 3 x 2 T (N D) H``
    (the output projection) and ``L x 3.5 x (4 N T^2 D - 2 N (T - C)^2 D)`` (attention), with ``H``
    the hidden size, ``L`` layers, ``N`` heads of ``D``, ``C`` context tokens (their small
    elementwise term left out)."""
    cfg = config or hstu_preset("recsys_examples")
    h, n, d, layers = cfg.dim, cfg.heads, cfg.head_dims[0], cfg.num_layers
    total = 0.0
    for t in tokens:
        gemms = layers * 3 * 2 * t * h * (4 * n * d) + layers * 3 * 2 * t * (n * d) * h
        total += gemms + layers * 3.5 * (4 * n * t * t * d - 2 * n * (t - context) ** 2 * d)
    return total


def hstu_setup(point: PublishedHSTUPoint) -> HSTUSetup:
    """The model's setup for ``point`` (module docstring): its preset, lengths and keywords."""
    config = hstu_preset(point.model)
    common = {"gpus": point.gpus, "nodes": point.nodes, "dtype": "bf16"}
    if point.model == "recsys_examples":
        if "fixed" in point.lengths:
            events, why = [2048] * point.batch_per_gpu, "the fixed shape: 32 histories of 4,099 tokens a GPU"
        else:
            events = zipf_lengths(point.batch_per_gpu, 1.2, 4096)
            why = "Zipf(1.2) quantiles, 32 a GPU, the same on every GPU (balanced)"
        lengths = [2 * s + _CONTEXT for s in events]
        kwargs = {**common, "embedding_dim": _RE_EMBEDDING_DIM}
        return HSTUSetup(config, lengths, kwargs, False, why + "; tables of width 128, fused attention")
    if point.model == "dlrm_v3":
        candidates = 2048
        lengths = [
            candidates + round((i + 0.5) / point.batch_per_gpu * 2048) for i in range(point.batch_per_gpu)
        ]
        kwargs = {**common, "backward": False, "num_targets": candidates}
        why = "forward of the stack alone; 2,048 candidates + user histories even on [0, 2,048) (assumed)"
        return HSTUSetup(config, lengths, kwargs, True, why)
    raise ValueError(f"point.model must be 'recsys_examples' or 'dlrm_v3', got {point.model!r}")


def _modeled_value(point: PublishedHSTUPoint, setup: HSTUSetup, step: HSTUStep) -> float:
    seconds = sum(step.seconds[c] for c in STACK) if setup.stack_only else step.step_seconds
    if point.metric == "step ms":
        return seconds * 1e3
    if point.metric == "tokens per s":
        return step.tokens * step.devices / seconds
    per_gpu = recsys_examples_flops(setup.lengths, setup.config) / seconds / 1e12
    return per_gpu * (point.devices if point.metric == "TFLOPS" else 1)


def compare_hstu(points: Sequence[PublishedHSTUPoint] = HSTU_POINTS) -> list[dict[str, object]]:
    """Two rows per published point: ``source`` ``"published"`` (its value) and ``"modeled"`` (the
    model's on :func:`hstu_setup`), each with ``label``, ``metric``, ``value``, ``ratio`` (modeled /
    published, on both rows), ``speed_ratio`` (modeled speed / published), ``hardware`` (the
    preset), ``dominant`` (the modeled step's longest term), ``modeled_mfu`` (model FLOPs as
    :mod:`recnotebooks.perf.hstu` counts them),
    ``published_mfu`` (as the source states it, or None) and ``setup`` (the choices in words)."""
    rows: list[dict[str, object]] = []
    for point in points:
        setup = hstu_setup(point)
        step = hstu_step(setup.config, point.preset, setup.lengths, **setup.step_kwargs)
        modeled = _modeled_value(point, setup, step)
        dominant = max(STACK, key=step.seconds.__getitem__) if setup.stack_only else step.dominant
        ratio = modeled / point.value
        speed = 1 / ratio if point.metric == "step ms" else ratio
        base = {"label": point.label, "metric": point.metric, "ratio": ratio, "speed_ratio": speed,
                "hardware": point.preset, "dominant": dominant, "modeled_mfu": step.mfu(),
                "published_mfu": point.mfu or None, "setup": setup.why}  # fmt: skip
        rows.append({**base, "source": "published", "value": point.value})
        rows.append({**base, "source": "modeled", "value": modeled})
    return rows


def breakdown_rows() -> list[dict[str, object]]:
    """Published time shares beside modeled ones, by the model's components: the fixed-shape
    recsys-examples step (``PERF_ANALYSIS.md`` 2.2: ``hstu fwd/bwd`` is attention, the GEMMs are
    projections and the top MLP, ``elementwise`` is pointwise, ``embedding op`` the embeddings,
    NCCL the collectives; idle and the rest left out) and issue #530's forward kernel mix
    (``_addmm_fwd`` projections, ``_hstu_attn_fwd`` attention, the layer norms, dropout and SiLU
    pointwise). Each row: ``point``, ``component``, ``source``, ``share`` (of the listed
    categories), ``seconds`` (where the source gives times)."""
    groups = {
        "recsys-examples fixed shape": (ANALYSIS_BREAKDOWN_MS, {
            "attention": ("hstu fwd/bwd",),
            "projections": ("gemm / uvqk", "gemm / projection", "gemm / others"),
            "pointwise": ("elementwise",), "embeddings": ("embedding op",),
            "collectives": ("nccl(exposed)", "nccl(overlap)")}),
        "generative-recommenders #530 forward": (ISSUE_530_KERNEL_MIX, {
            "attention": ("_hstu_attn_fwd",), "projections": ("_addmm_fwd",),
            "pointwise": ("_ln_mul_dropout_fwd", "silu", "_weighted_layer_norm_fwd")}),
    }  # fmt: skip
    rows: list[dict[str, object]] = []
    for point in HSTU_POINTS:
        if point.label not in groups:
            continue
        published, mapping = groups[point.label]
        setup = hstu_setup(point)
        s = hstu_step(setup.config, point.preset, setup.lengths, **setup.step_kwargs).seconds
        modeled = {"attention": s["attention"], "projections": s["projections"] + s["top_mlp"],
                   "pointwise": s["pointwise"], "embeddings": s["embeddings"],
                   "collectives": s["all_to_all"] + s["all_reduce"]}  # fmt: skip
        pub = {c: sum(published[k] for k in keys) for c, keys in mapping.items()}
        mod = {c: modeled[c] for c in mapping}
        in_ms = published is ANALYSIS_BREAKDOWN_MS
        for source, values in (("published", pub), ("modeled", mod)):
            total = sum(values.values())
            for c, v in values.items():
                sec = (v / 1e3 if in_ms else None) if source == "published" else v
                rows.append({"point": point.label, "component": c, "source": source, "share": v / total,
                             "seconds": sec})  # fmt: skip
    return rows
