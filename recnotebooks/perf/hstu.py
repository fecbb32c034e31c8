"""One training step of a generative recommender (HSTU), **modeled** from its terms.

Where a DLRM step's work grows with the batch and the pooling factor, an HSTU step's grows with
the *tokens* (every event of every history) and its attention with the **sum of squared
history lengths**: a history of ``n`` events costs ``n (n + 1) / 2`` query-key products a head
under the causal mask (position ``i`` attends to ``i + 1`` positions; a kernel that skips the
masked blocks saves nearly half of the ``n^2`` a full product computes). So the length
*distribution* sets the cost: the same 100,000 tokens as 1,000 histories of 100 or as 100
histories of 1,000 differ tenfold in attention work.

Per device and step, each term a few lines of FLOPs over a rate or bytes over a bandwidth:

* ``projections``: the U, V, Q, K projection and the output projection of every layer
  (:func:`~recnotebooks.perf.components.dense.gemm_time` on ``tokens x dim`` GEMMs), forward
  and backward (two GEMMs each);
* ``attention``: ``Q K^T`` and ``A V`` of every history, forward (two products) and backward
  (four), each history's at the GEMM efficiency of its ``(n, n, head dim)`` shape: the causal
  half with a fused kernel (``attention="fused"``) on a jagged batch; with this package's
  bucketed kernel (``"bucketed"``, :mod:`recnotebooks.kernels.jagged_attention`) the full
  ``P x P`` square of each history's bucket, ``P`` its length padded by the kernel's own rule
  (:func:`recnotebooks.sparse.padded_length`), the mask added, nothing skipped;
* ``pointwise``: the elementwise passes over the tokens (layer norms, SiLU, the gate, the
  residual; :data:`TOKEN_PASSES`) and, for an attention kernel that writes its weights to
  memory (``"bucketed"``, as plain PyTorch does), its passes over every attention weight
  (:func:`score_passes`: the bucketed kernel's :data:`SCORE_PASSES`, a padded stack's
  :data:`PADDED_SCORE_PASSES` and its mask's), its SiLU's at the device's ``silu_seconds`` an
  element where it is slower than the bytes (a CPU: :data:`SILU_SCORE_PASSES`), and the
  relative attention bias of such a kernel
  (its index once a step, each pair's lookup and gradient a layer: :func:`_bias_seconds`, at
  ``rab_index_seconds`` and ``rab_seconds`` where a CPU calibrated them; a padded stack's all
  three in each layer, at ``rab_padded_seconds``);
* ``top_mlp``: the MLP from each position to its logit;
* ``embeddings``: one row per event table per token (and per contextual table per history)
  gathered, and each distinct row updated (row-wise Adagrad), priced as a DLRM's embeddings are
  (:func:`~recnotebooks.perf.components.embeddings.embedding_shard`: the same embedding bag,
  each lookup a bag of one);
* ``all_to_all``: each token's embeddings sent to the device of its history and the
  gradients back, the tables sharded row-wise over every device (the priced collectives of
  :mod:`recnotebooks.perf.components.collectives`);
* ``all_reduce``: the dense gradients; ``optimizer``: Adam over the dense parameters;
* ``overhead``: the operators a step launches (:func:`step_operators`: with the bucketed kernel,
  counted per layer and per bucket) times the per-operator host cost (with the bucketed kernel
  ``Hardware.hstu_op_cost_s``: its operators cost a CPU more than an MLP's).

A forward pass alone (``backward=False``, inference or a forward benchmark) keeps a third of
the GEMM and attention work, the forward's share of the passes, the gather only, the all-to-all
one way, and no all-reduce or optimizer. Ranking histories that end in ``num_targets`` candidates
(dlrm_v3, MLPerf's DLRMv4 reference) let each candidate attend to the history before it and to
itself only: ``u (u + 1) / 2 + t u + t`` pairs for ``u`` history events and ``t`` candidates.

A padded batch (``padded=True``, the common way) computes every history at the batch's longest
length: its GEMMs see ``histories x longest`` tokens and its attention the full ``longest^2``
products of each (a masked einsum skips nothing). Model FLOPs (for MFU) count the work the model
needs: the jagged tokens and the causal half, forward and backward.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from recnotebooks.checks import check_bool, check_choice, check_int, check_int_list, check_type
from recnotebooks.config import DEFAULT_ZIPF_EXPONENT, DTYPES
from recnotebooks.config.hstu import HSTUConfig
from recnotebooks.perf.components.collectives import (
    all_reduce_seconds,
    all_to_all_seconds,
    domain_ranks,
    nic_per_device,
)
from recnotebooks.perf.components.dense import gemm_time
from recnotebooks.perf.components.embeddings import embedding_shard
from recnotebooks.perf.components.lookups import accesses
from recnotebooks.perf.hardware import Hardware, hardware
from recnotebooks.perf.precision import precision
from recnotebooks.plan import TableShard
from recnotebooks.sparse import buckets, padded_length

__all__ = ["HSTUStep", "hstu_step", "lognormal_lengths", "zipf_lengths", "attention_products", "model_flops",
           "causal_saving", "padding_waste", "score_passes", "step_operators", "ATTENTIONS",
           "COMPONENTS"]  # fmt: skip

#: The terms of one modeled HSTU step, in the order charts stack them.
COMPONENTS = ("projections", "attention", "pointwise", "top_mlp", "embeddings", "all_to_all", "all_reduce",
              "optimizer", "overhead")  # fmt: skip
#: Elementwise passes over a layer's token tensors, each a read or a write of ``tokens x dim``
#: elements (modeling assumption, counted from the layer's formula): forward the input layer
#: norm (2), SiLU over U, V, Q, K (2, of four widths: counted as 8), the output layer norm (2),
#: the gate (3) and the residual (3); backward about twice as many.
TOKEN_PASSES = 3 * (2 + 8 + 2 + 3 + 3)
#: Passes over every attention weight of this package's bucketed kernel, which writes them to
#: memory, each a read or a write of ``(b, heads, P, P)`` elements (counted from
#: :class:`~recnotebooks.kernels.jagged_attention.BucketAttention`'s operators; the mask is in
#: its table): forward the scores written, the GEMM's addend read and written, SiLU read and
#: written, the weights read by ``A V`` (6); backward the weights read for ``dV``, ``dA``
#: written, SiLU's derivative reading ``dA`` and the scores and writing, ``dS`` read for ``dQ``
#: and for ``dK`` (7). ``tests/test_perf_hstu_bucketed.py`` counts them again. A fused
#: (flash-style) kernel keeps the weights on chip and makes none.
SCORE_PASSES = 13
#: The same for a padded stack (:func:`recnotebooks.nn.hstu_padded.padded_layer`, plain
#: PyTorch): forward the scores written, divided by ``sqrt(d)`` (read, write), SiLU (2),
#: multiplied by the mask (2), read by ``A V`` (8); backward ``dA`` written and the weights read
#: for ``dV`` (2), the multiply's gradient (2), SiLU's derivative (3), the division's (2), read for
#: ``dQ`` and ``dK`` (2) (11).
PADDED_SCORE_PASSES = 19
#: A padded stack's passes over each query-key pair ``(B, N, N)`` for its mask (a float weight
#: per pair, shared by the heads; in units of a weight's pass): the booleans built (a quarter: one
#: byte), read and divided into the weights (1.25), read by the multiply forward and backward (2).
PADDED_MASK_PAIR_PASSES = 3.5
#: With the relative attention bias: each pair's bias read into the scores (both kernels; its
#: index, lookup and gradient are priced apart, :func:`_bias_seconds`), and in a padded stack
#: the add itself, a read and a write of every weight (the bucketed kernel adds it in the GEMM).
BIAS_READ_PAIR_PASSES, PADDED_BIAS_ADD_PASSES = 1.0, 2.0
#: Of either kernel's passes over the weights, the SiLU's own (forward: read, write; backward:
#: read the gradient and the input, write): where the device evaluates SiLU slower than it moves its
#: bytes (a CPU: ``Hardware.silu_seconds``), these are priced by that instead.
SILU_SCORE_PASSES = 5
#: Operators a layer launches in a step (forward and backward) with a fused attention kernel
#: (modeling assumption, counted from the layer's formula as an eager PyTorch step runs it), and
#: those of the rest of the step.
OPS_PER_LAYER, OPS_PER_STEP = 60, 80
#: Operators of one training step of this package's HSTU ranker (as
#: :func:`recnotebooks.measure.hstu.measure_hstu_step` trains it: forward, the loss, backward,
#: row-wise Adagrad on the tables, Adam on the rest) with the bucketed attention
#: (:mod:`recnotebooks.kernels.jagged_attention`) on ``b`` buckets of
#: :func:`recnotebooks.sparse.buckets`: ``step + step_per_bucket b`` (the batch's plan, the
#: embeddings, the top MLP, the optimizers) plus, a layer, ``layer + layer_per_bucket b``.
#: Counted (not fitted to any timing) with torch.profiler, top-level aten operators as
#: :func:`recnotebooks.perf.components.ops.op_count` counts a DLRM's (whose steps calibrate
#: ``op_overhead_s``), of ``hstu_small`` at 1, 2 and 3 layers on histories in 1, 2, 4 and 8
#: buckets (torch 2.13, 2026-12-05), counted again after the kernel's second round
#: (``BucketAttention``): 1 to 3 layers, 1, 3 and 4 buckets, and after its third
#: (``JaggedAttention``, one autograd node a layer, and the plan's slots computed at once):
#: 1 to 3 layers, 1, 3, 4 and 8 buckets;
#: every count within one operator of these constants but 3 layers on 1 bucket (two) (a
#: history's span picks the gaps' dtype, which adds or drops one;
#: ``tests/test_perf_hstu_bucketed.py`` counts them again). Counted with the relative
#: attention bias on (``HSTUConfig.relative_bias``), whose lookups are among them.
BUCKETED_OPS = {"step": 235, "step_per_bucket": 41, "layer": 141, "layer_per_bucket": 42}
#: The same for a padded batch (:func:`recnotebooks.nn.hstu_padded.padded_stack`, one masked
#: attention over every history at the longest length), counted alike at 1 and 2 layers.
PADDED_OPS = {"step": 159, "layer": 200}
#: The attention implementations :func:`hstu_step` prices: ``"fused"``, a flash-style kernel
#: (the weights stay on chip; on jagged batches it skips the masked blocks, computing the causal
#: half); ``"bucketed"``, this package's (:mod:`recnotebooks.kernels.jagged_attention`, or on a
#: padded batch :func:`~recnotebooks.nn.hstu_padded.padded_stack`): every history computed as
#: the full square of its bucket's padded length, the weights written to memory and passed over,
#: operators launched per bucket (:data:`BUCKETED_OPS`, :data:`PADDED_OPS`).
ATTENTIONS = ("fused", "bucketed")
#: Bytes a query-key pair of the relative attention bias moves in one layer of the bucketed kernel
#: (modeling assumption, counted from :class:`~recnotebooks.kernels.jagged_attention.BucketAttention`):
#: forward its int32 index read and its bias written, backward the gradient and the index read
#: again for the scatter-add into the (cached) table.
RAB_BYTES = 16
#: Bytes a pair of the bias's index moves when it is built (modeling assumption, counted from
#: :meth:`~recnotebooks.nn.hstu.RelativeAttentionBias.bucket_index`: the gaps written, clamped,
#: their exponents read off, the position offsets added and the result narrowed to int32).
RAB_INDEX_BYTES = 40
#: Bytes a query-key pair of the bias moves in one layer of a padded stack (modeling assumption,
#: counted from :meth:`~recnotebooks.nn.hstu.RelativeAttentionBias.batched`, which runs in each
#: layer): forward the int64 gaps written (8), their ``abs``, float64 copy, clamp, ``log2``,
#: ``floor``, clamp and int64 copy read and written (16 each, 112), the time weights gathered
#: (12) and the position weights added (12); backward the gradient and the index read for the
#: scatter-add into the time weights (12).
PADDED_RAB_BYTES = 156
#: Bytes of one fp32 element (the bias and its gradient are float32 whatever the model's dtype).
ACTIVATION_BYTES_FP32 = 4
#: Passes of Adam over each dense parameter (fp32 state): the moments, the square root, the update.
ADAM_PASSES = 18


@dataclass
class HSTUStep:
    """One modeled HSTU step on one device of ``devices``.

    ``seconds``: per component (:data:`COMPONENTS`); ``tokens`` and ``histories`` per device;
    ``model_flops``: the model's FLOPs per device and step (jagged, causal half, forward and
    backward, or the forward alone where ``backward`` is false); ``source`` is always ``"modeled"``."""

    config: HSTUConfig
    hw: Hardware
    devices: int
    histories: int
    tokens: int
    padded: bool
    seconds: dict[str, float] = field(default_factory=dict)
    model_flops: float = 0.0
    source: str = "modeled"
    backward: bool = True

    @property
    def step_seconds(self) -> float:
        return sum(self.seconds.values())

    @property
    def tokens_per_s(self) -> float:
        """Tokens a second over every device."""
        return self.tokens * self.devices / self.step_seconds

    @property
    def tflops_per_device(self) -> float:
        return self.model_flops / self.step_seconds / 1e12

    def mfu(self, dtype: str = "bf16") -> float:
        """Model FLOPs utilisation: :attr:`model_flops` / (:attr:`step_seconds` x the device's peak
        at ``dtype``) -- the work the model needs, not the work a padded batch does."""
        return self.model_flops / self.step_seconds / self.hw.flops(precision(dtype).gemm)

    @property
    def dominant(self) -> str:
        """The component that takes the longest."""
        return max(self.seconds, key=self.seconds.__getitem__)

    def rows(self) -> list[dict[str, object]]:
        """Tidy rows: one per component, with ``seconds`` and ``share``."""
        total = self.step_seconds
        return [{"component": c, "seconds": s, "share": s / total, "source": self.source}
                for c, s in self.seconds.items()]  # fmt: skip


def lognormal_lengths(count: int, median: float, mean: float, longest: int) -> list[int]:
    """``count`` history lengths at the quantiles ``(i + 0.5) / count`` of a log-normal law with
    this ``median`` and ``mean`` (Yambda's shape: median 2.7k, mean 4.8k events), each at least 1
    and at most ``longest``: the length distribution without the noise of a draw."""
    count = check_int("count", count, lo=1, hi=10_000_000)
    if not 0 < median <= mean:
        raise ValueError(f"median and mean must satisfy 0 < median <= mean, got {median}, {mean}")
    sigma = math.sqrt(2 * math.log(mean / median))
    nd = statistics.NormalDist().inv_cdf
    return [
        min(longest, max(1, round(median * math.exp(sigma * nd((i + 0.5) / count))))) for i in range(count)
    ]


def zipf_lengths(count: int, alpha: float, longest: int, shortest: int = 1) -> list[int]:
    """``count`` history lengths at the quantiles ``(i + 0.5) / count`` of a Zipf law
    ``P(k) ~ k^-alpha`` (``k >= 1``) shifted to start at ``shortest`` and clamped at ``longest``
    (the mass beyond it lands on ``longest``), as NVIDIA recsys-examples' benchmark draws its
    sequence lengths (``RandomDistribution`` zipf, ``examples/commons/datasets/hstu_batch.py``
    at 43465aea): the distribution without the noise of a draw."""
    count = check_int("count", count, lo=1, hi=10_000_000)
    longest = check_int("longest", longest, lo=1)
    shortest = check_int("shortest", shortest, lo=1, hi=longest)
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 1 < alpha < 100:
        raise ValueError(f"alpha must be a number in (1, 100), got {alpha!r}")
    weights = [k**-alpha for k in range(1, longest - shortest + 1)]
    far = len(weights) + 10_000  # zeta(alpha): the sum, then the tail by its midpoint integral
    total = sum(weights) + sum(k**-alpha for k in range(len(weights) + 1, far + 1))
    total += (far + 0.5) ** (1 - alpha) / (alpha - 1)
    cdf = list(itertools.accumulate(w / total for w in weights))
    return [shortest + bisect.bisect_left(cdf, (i + 0.5) / count) for i in range(count)]


def attention_products(lengths: Sequence[int], causal: bool = True, num_targets: int = 0) -> float:
    """Query-key pairs a head computes over these histories: ``sum n (n + 1) / 2`` under the
    causal mask, ``sum n^2`` without it. With ``num_targets`` candidates at the end of each history
    (causal only), a candidate attends to the ``u = n - t`` events before them and to itself:
    ``u (u + 1) / 2 + t u + t``."""
    if not causal:
        return float(sum(n * n for n in lengths))
    total = 0
    for n in lengths:
        t = min(num_targets, n)
        u = n - t
        total += u * (u + 1) // 2 + t * u + t
    return float(total)


def causal_saving(lengths: Sequence[int]) -> float:
    """The share of the attention's query-key products that the causal mask saves a kernel that
    skips the masked blocks: ``1 - sum n (n + 1) / 2 / sum n^2`` -- just under a half
    (``1/2 - 1/(2n)`` for one history of ``n``; nothing for histories of one event)."""
    full = attention_products(lengths, causal=False)
    if not full:
        raise ValueError("lengths must hold at least one history with events")
    return 1.0 - attention_products(lengths) / full


def padding_waste(lengths: Sequence[int]) -> tuple[float, float]:
    """What padding every history to the longest wastes: ``(tokens, attention)``, the shares of a
    padded batch's tokens (``1 - sum n / (B N)``) and of its full products (``1 - sum n (n + 1) / 2
    / (B N^2)``: the padding and the masked half together) that the model does not need."""
    if not lengths or not max(lengths):
        raise ValueError("lengths must hold at least one history with events")
    b, longest = len(lengths), max(lengths)
    return 1.0 - sum(lengths) / (b * longest), 1.0 - attention_products(lengths) / (b * longest**2)


def hstu_step(
    config: HSTUConfig,
    hw: Hardware | str,
    lengths: Sequence[int],
    *,
    gpus: int = 1,
    nodes: int = 1,
    dtype: str = "bf16",
    padded: bool = False,
    fused_attention: bool = True,
    attention: str | None = None,
    backward: bool = True,
    num_targets: int = 0,
    embedding_dim: int | None = None,
) -> HSTUStep:
    """Model one training step of ``config`` on each of ``gpus x nodes`` devices, each training
    the histories of ``lengths`` (events each, at most ``config.max_len``; see the module
    docstring for the terms). ``padded``: every history computed at the longest's length.
    ``attention``: the attention implementation priced, one of :data:`ATTENTIONS`: ``"fused"``
    (a flash-style kernel: the weights stay on chip, the masked blocks skipped) or
    ``"bucketed"`` (this package's: full squares of each bucket's padded length, the weights
    written to memory, operators per bucket); ``None``: ``fused_attention`` says which (``True``:
    ``"fused"``, ``False``: ``"bucketed"``). ``backward=False``: the forward pass alone.
    ``num_targets``: candidates at the end of each history, attending to the history and
    themselves only. ``embedding_dim``: the tables' width where it differs from the stack's
    ``dim`` (a model that projects its embeddings up; default ``config.dim``)."""
    check_type("config", config, HSTUConfig, "an HSTUConfig")
    hw = hardware(hw)
    seq = lengths.tolist() if hasattr(lengths, "tolist") else lengths  # a NumPy array or a tensor: a list
    lengths = check_int_list("lengths", seq, lo=0, hi=config.max_len)
    if not lengths or not sum(lengths):
        raise ValueError("lengths must hold at least one history with events")
    gpus, nodes = check_int("gpus", gpus, lo=1, hi=hw.devices), check_int("nodes", nodes, lo=1)
    check_choice("dtype", dtype, DTYPES)
    padded, fused_attention = check_bool("padded", padded), check_bool("fused_attention", fused_attention)
    kernel = _attention_kind(attention, fused_attention)
    backward = check_bool("backward", backward)
    num_targets = check_int("num_targets", num_targets, lo=0, hi=config.max_len)
    edim = config.dim if embedding_dim is None else check_int("embedding_dim", embedding_dim, lo=1, hi=65_536)
    run = [max(lengths)] * len(lengths) if padded else lengths
    # the lengths whose squares the attention computes: a bucketed kernel's padded bucket lengths
    square = [padded_length(n) for n in run if n] if kernel == "bucketed" and not padded else run
    step = HSTUStep(config, hw, gpus * nodes, len(lengths), sum(lengths), padded, backward=backward)
    ops = step_operators(config.num_layers, lengths, attention=kernel, padded=padded)
    fused = kernel == "fused"
    shape = _Shape(run, square, gpus, nodes, dtype, padded, fused, backward, num_targets, edim, ops)
    step.seconds = _terms(config, hw, shape)
    step.model_flops = model_flops(config, lengths, backward=backward, num_targets=num_targets)
    return step


def _attention_kind(attention: str | None, fused_attention: bool) -> str:
    """``attention`` checked, or the kind ``fused_attention`` names."""
    if attention is None:
        return "fused" if fused_attention else "bucketed"
    check_choice("attention", attention, ATTENTIONS)
    if attention == "fused" and not fused_attention:
        raise ValueError("attention='fused' contradicts fused_attention=False: give one of the two")
    return attention


def step_operators(
    num_layers: int, lengths: Sequence[int], *, attention: str = "bucketed", padded: bool = False
) -> float:
    """Operators one training step launches (what ``overhead`` prices at the hardware's
    ``op_overhead_s``): with a ``"fused"`` attention :data:`OPS_PER_STEP` + :data:`OPS_PER_LAYER`
    a layer; with this package's ``"bucketed"`` one, :data:`BUCKETED_OPS` for the buckets of
    ``lengths`` (:func:`recnotebooks.sparse.buckets`), or on a ``padded`` batch :data:`PADDED_OPS`."""
    layers = check_int("num_layers", num_layers, lo=1)
    check_choice("attention", attention, ATTENTIONS)
    if attention == "fused":
        return float(OPS_PER_STEP + OPS_PER_LAYER * layers)
    if padded:
        return float(PADDED_OPS["step"] + PADDED_OPS["layer"] * layers)
    b, o = len(buckets(list(lengths))), BUCKETED_OPS
    return float(o["step"] + o["step_per_bucket"] * b + layers * (o["layer"] + o["layer_per_bucket"] * b))


def model_flops(
    config: HSTUConfig, lengths: Sequence[int], *, backward: bool = True, num_targets: int = 0
) -> float:
    """The model's FLOPs of one step over these histories: GEMMs on the jagged tokens and the
    attention's causal half (:func:`attention_products`), forward and backward (3x forward; the
    forward alone where ``backward`` is false)."""
    qk, v = config.head_dims
    h, t = config.heads, sum(lengths)
    per_token = 2 * config.dim * (2 * h * v + 2 * h * qk) + 2 * h * v * config.dim
    widths = (config.dim, *config.top_mlp, 1)
    mlp = sum(2 * a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    attention = 2 * attention_products(lengths, num_targets=num_targets) * h * (qk + v)
    return (3.0 if backward else 1.0) * (config.num_layers * (t * per_token + attention) + t * mlp)


@dataclass(frozen=True)
class _Shape:
    """What :func:`_terms` prices besides the model and the hardware: ``run``, the lengths the
    GEMMs compute; ``square``, those whose full squares the attention computes (unless
    ``fused``: then the causal part of ``run``'s); ``ops``, the operators of a step."""

    run: list[int]
    square: list[int]
    gpus: int
    nodes: int
    dtype: str
    padded: bool
    fused: bool
    backward: bool
    targets: int
    embedding_dim: int
    ops: float


def _terms(config: HSTUConfig, hw: Hardware, s: _Shape) -> dict[str, float]:
    p, dtype, run = precision(s.dtype), s.dtype, s.run
    qk, v = config.head_dims
    h, t, layers = config.heads, float(sum(run)), config.num_layers
    passes = 3 if s.backward else 1  # GEMMs: forward, and two more backward
    width = 2 * h * v + 2 * h * qk
    projections = passes * (
        gemm_time(hw, t, width, config.dim, dtype) + gemm_time(hw, t, config.dim, h * v, dtype)
    )
    causal = s.fused and not s.padded  # a padded einsum or an unfused kernel masks, computing every pair
    targets = s.targets if causal else 0
    attention = passes * sum(
        _attention_time(hw, n, h, qk, v, dtype, causal=causal, targets=targets)
        for n in (run if s.fused else s.square)
        if n
    )
    widths = (config.dim, *config.top_mlp, 1)
    mlp = passes * sum(gemm_time(hw, t, b, a, dtype) for a, b in zip(widths[:-1], widths[1:], strict=True))
    share = 1.0 if s.backward else 1 / 3  # the forward's share of the elementwise passes
    pairs = attention_products(s.square, causal=False)  # a head's query-key pairs, computed in full
    passes = score_passes(h, s.padded, config.relative_bias)
    scores = 0.0 if s.fused else _score_seconds(hw, h * pairs, p.activation_bytes, passes)  # weights written
    bias = _bias_seconds(hw, pairs, h, layers, s) if config.relative_bias and not s.fused else 0.0
    pointwise = share * (
        layers * (TOKEN_PASSES * t * config.dim * p.activation_bytes / hw.hbm_bw + scores) + bias
    )
    lookups = t * len(config.event_tables) + len(run) * len(config.context)  # contextual: once a history
    table_bytes = lookups * s.embedding_dim * p.embedding_bytes
    embeddings = _embedding_seconds(config, hw, s, t, len(run))
    world, nic = s.gpus * s.nodes, nic_per_device(hw, s.gpus)
    domain = domain_ranks(hw, s.gpus, s.nodes)  # over NVLink: a node, or the trays of an NVL72 rack
    ways = 2 if s.backward else 1  # the embeddings out, their gradients back
    a2a = all_to_all_seconds(ways * table_bytes * (world - 1) / world, world, domain, hw, nic, calls=ways)
    dense_bytes = config.dense_parameters * p.weight_bytes
    reduce = all_reduce_seconds(2 * (world - 1) / world * dense_bytes, world, domain, hw, nic)
    optimizer = ADAM_PASSES * config.dense_parameters * 4 / hw.hbm_bw
    if not s.backward:
        reduce = optimizer = 0.0
    overhead = share * s.ops * (hw.op_overhead_s if s.fused else hw.hstu_op_cost_s) + hw.step_overhead_s
    return {"projections": layers * projections, "attention": layers * attention, "pointwise": pointwise,
            "top_mlp": mlp, "embeddings": embeddings, "all_to_all": a2a, "all_reduce": reduce,
            "optimizer": optimizer, "overhead": overhead}  # fmt: skip


def _embedding_seconds(config: HSTUConfig, hw: Hardware, s: _Shape, tokens: float, histories: int) -> float:
    """The tables' work on one device, priced as a DLRM's embeddings are
    (:func:`~recnotebooks.perf.components.embeddings.embedding_shard`; the same operator, an
    embedding bag, looks them up): every event a bag of one row from each event table, every
    history one from each contextual table; each table sharded row-wise over the devices (one
    device: whole), in device memory; the rows gathered at their size's efficiency and each bag
    written, backward each lookup's gradient, the lookups grouped by row and each distinct row
    (Zipf's :data:`~recnotebooks.config.DEFAULT_ZIPF_EXPONENT`, as the synthetic log draws ids)
    updated with its row-wise Adagrad state, MLPerf's optimizer for DLRMv4's tables."""
    world = s.gpus * s.nodes
    frac = 1.0 / world
    sharding = "row_wise" if world > 1 else "table_wise"
    context = [(tbl, float(histories)) for tbl in config.tables if tbl.name in config.context]
    tables = [(tbl, tokens) for tbl in config.event_tables] + context
    shards = [TableShard(tbl.name, 0, sharding, "hbm", row_fraction=frac) for tbl, _ in tables]
    rows = [max(1, int(tbl.num_rows * frac)) for tbl, _ in tables]
    lookups = [n for _, n in tables]  # every device's share of the rows this one holds: its own count
    dims = [s.embedding_dim] * len(tables)
    zipf, opt = DEFAULT_ZIPF_EXPONENT, "rowwise_adagrad"
    found = accesses(shards, rows, lookups, lookups, dims, hw, zipf, s.dtype, opt)
    nic = nic_per_device(hw, s.gpus)
    work = [embedding_shard(a, hw, nic, s.gpus) for a in found]
    return sum(w.forward + (w.backward if s.backward else 0.0) for w in work)


def score_passes(heads: int, padded: bool, relative_bias: bool) -> float:
    """Passes of one layer's step over every attention weight of a kernel that writes them to
    memory, in units of a read or a write of all ``(b, heads, P, P)`` weights: this package's
    bucketed kernel's (:data:`SCORE_PASSES`) or a padded stack's (:data:`PADDED_SCORE_PASSES`,
    and its mask's passes over the ``heads`` times fewer pairs), with the relative bias read into
    the scores (and added, padded) where the model has one."""
    heads = check_int("heads", heads, lo=1)
    padded, relative_bias = check_bool("padded", padded), check_bool("relative_bias", relative_bias)
    pair = (PADDED_MASK_PAIR_PASSES if padded else 0.0) + (BIAS_READ_PAIR_PASSES if relative_bias else 0.0)
    weight = SCORE_PASSES
    if padded:
        weight = PADDED_SCORE_PASSES + (PADDED_BIAS_ADD_PASSES if relative_bias else 0.0)
    return weight + pair / heads


def _score_seconds(hw: Hardware, elements: float, element_bytes: float, passes: float) -> float:
    """``passes`` (:func:`score_passes`) of one layer's step over ``elements`` attention weights
    written to memory, each at ``hbm_bw``; the SiLU's forward and backward
    (:data:`SILU_SCORE_PASSES` of them) at the device's ``silu_seconds`` an element where that
    is slower (a CPU evaluating its exponential)."""
    per_pass = elements * element_bytes / hw.hbm_bw
    silu = max(SILU_SCORE_PASSES * per_pass, 2 * elements * hw.silu_seconds)  # its forward and backward
    return (passes - SILU_SCORE_PASSES) * per_pass + silu


def _bias_seconds(hw: Hardware, pairs: float, heads: int, layers: int, s: _Shape) -> float:
    """The relative attention bias of a step whose kernel writes its weights to memory, over
    ``pairs`` query-key pairs a head. The bucketed kernel builds its index once a step
    (:data:`RAB_INDEX_BYTES` a pair, or ``hw.rab_index_seconds``) and, a layer, looks each pair
    up and scatter-adds its gradient into the table (:data:`RAB_BYTES`, or ``hw.rab_seconds``);
    a padded stack builds, looks up and scatters back in each layer
    (:data:`PADDED_RAB_BYTES`, or ``hw.rab_padded_seconds``). Either way the gradient is summed
    over the heads (three passes a head beyond the first). Each at the calibrated cost where it
    is slower than its bytes. Forward and backward: :func:`_terms` keeps the forward's share
    for a forward pass alone."""
    per_byte = 1.0 / hw.hbm_bw
    heads_sum = 3 * (heads - 1) * ACTIVATION_BYTES_FP32 * per_byte
    if s.padded:
        return pairs * layers * (max(PADDED_RAB_BYTES * per_byte, hw.rab_padded_seconds or 0.0) + heads_sum)
    index = max(RAB_INDEX_BYTES * per_byte, hw.rab_index_seconds or 0.0)
    lookup = max(RAB_BYTES * per_byte, hw.rab_seconds or 0.0)
    return pairs * (index + layers * (lookup + heads_sum))


def _attention_time(
    hw: Hardware, n: int, heads: int, qk: int, v: int, dtype: str, causal: bool, targets: int = 0
) -> float:
    """Forward ``Q K^T`` and ``A V`` of one history of ``n`` events, every head, at the GEMM
    efficiency of its shape; the causal half (less the pairs among candidates) where the kernel
    skips the masked blocks."""
    share = attention_products([n], num_targets=targets) / (n * n) if causal else 1.0
    return heads * share * (gemm_time(hw, n, n, qk, dtype) + gemm_time(hw, n, v, n, dtype))
