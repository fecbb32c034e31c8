"""The calibration's HSTU timings (:mod:`recnotebooks.measure.calibrate` runs them on a CPU):
what an HSTU step on this machine costs beyond its GEMMs and passes over bytes, each priced by
:mod:`recnotebooks.perf.hstu` where it is slower than its bytes.

* :func:`rab_seconds`: the relative attention bias of the bucketed kernel
  (:mod:`recnotebooks.kernels.jagged_attention`), per query-key pair: its index built once a
  step (each pair's distance and log2 time-gap bucket, as
  :meth:`~recnotebooks.nn.hstu.RelativeAttentionBias.bucket_index` builds it), and in each layer
  the lookup of each pair's bias from the table and its gradient's scatter-add back into it.
  Timed on one bucket of :data:`RAB_HISTORIES` histories of :data:`RAB_LENGTH` events of the
  synthetic listening log (their real timestamps).
* :func:`rab_padded_seconds`: the same bias as a padded stack computes it
  (:meth:`~recnotebooks.nn.hstu.RelativeAttentionBias.batched`, in each layer: every pair's
  log2 time-gap bucket in float64, the lookups, their gradients scattered back into the
  position and time weights), per query-key pair, on the same histories.
* :func:`hstu_overhead_pairs` and :func:`hstu_op_overhead`: the host cost of one operator of an
  HSTU step, measured as ``op_overhead_s`` is for a DLRM: two stacks that differ only in depth
  (1 and 3 layers of width 8 on histories of 3 to 17 events: no real work), their step times
  measured back to back, the median difference over the operators the two extra layers add
  (:func:`recnotebooks.perf.hstu.step_operators`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
import torch

from recnotebooks.config.hstu import hstu_preset
from recnotebooks.kernels import jagged_attention
from recnotebooks.measure.hstu import capped_hstu, hstu_batch, measure_hstu_step
from recnotebooks.nn.hstu import RelativeAttentionBias
from recnotebooks.perf.hstu import step_operators

__all__ = ["RAB_HISTORIES", "RAB_LENGTH", "OVERHEAD_LENGTHS", "rab_seconds", "rab_padded_seconds",
           "hstu_overhead_pairs", "hstu_op_overhead"]  # fmt: skip

#: The bucket :func:`rab_seconds` times: 8 histories of 128 events, 131,072 query-key pairs (a
#: bucket of a small HSTU step; its index fits a CPU's L2 and L3 as a step's buckets do).
RAB_HISTORIES, RAB_LENGTH = 8, 128
#: The histories of :func:`hstu_overhead_pairs`' two stacks: four buckets, a few pairs each.
OVERHEAD_LENGTHS = (3, 5, 9, 17)
#: The depths of :func:`hstu_overhead_pairs`' two stacks.
OVERHEAD_DEPTHS = (1, 3)


#: Untimed calls before :func:`_median_seconds` times any: the first few calls of the bias's
#: index took 8-75 ms instead of 0.3 (fresh memory for its buffers), so one warm-up call left a
#: median of two or three calls 100-500x too slow.
WARM_UP_CALLS = 5
#: The fewest timed calls :func:`_median_seconds` takes, whatever ``reps`` says (each well under
#: a millisecond).
MIN_REPS = 9


def _median_seconds(fn: Callable[[], object], reps: int) -> float:
    """Median wall seconds of at least :data:`MIN_REPS` (or ``reps``) calls of ``fn`` after
    :data:`WARM_UP_CALLS` untimed ones."""
    for _ in range(WARM_UP_CALLS):
        fn()
    ts = []
    for _ in range(max(reps, MIN_REPS)):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def _rab_bucket() -> tuple[jagged_attention.Bucket, RelativeAttentionBias]:
    """The bucket the bias's timings run on (:data:`RAB_HISTORIES` histories of
    :data:`RAB_LENGTH` events of the synthetic log) and a bias of ``hstu_small``'s."""
    config = hstu_preset("hstu_small")
    batch = hstu_batch(capped_hstu(config, 1_000), [RAB_LENGTH] * RAB_HISTORIES)
    return jagged_attention.plan(batch.offsets, batch.timestamps).buckets[0], RelativeAttentionBias(
        config.max_len
    )


def rab_seconds(reps: int) -> tuple[float, float]:
    """``(per layer, index)``: seconds per query-key pair of one layer's bias lookup and its
    gradient, and of building the bias's index once a step (see the module docstring)."""
    bucket, bias = _rab_bucket()
    table, index_of = bias.lookup(timed=True)
    table = table.detach()
    pairs = RAB_HISTORIES * bucket.p * bucket.p
    index = _median_seconds(lambda: index_of(dataclasses.replace(bucket, derived={})), reps)
    flat = index_of(bucket).reshape(-1)
    grad = torch.randn(pairs)

    def lookup_and_gradient() -> None:
        table.index_select(0, flat)
        torch.zeros(table.numel()).index_add_(0, flat, grad)

    return _median_seconds(lookup_and_gradient, reps) / pairs, index / pairs


def rab_padded_seconds(reps: int) -> float:
    """Seconds per query-key pair of one layer's bias as a padded stack computes it, forward and
    backward (see the module docstring)."""
    bucket, bias = _rab_bucket()
    assert bucket.times is not None
    grad = torch.randn(len(bucket.n), bucket.p, bucket.p)

    def build_and_gradient() -> None:
        bias.batched(bucket.times, bucket.n, bucket.p).backward(grad)

    return _median_seconds(build_and_gradient, reps) / grad.numel()


def hstu_overhead_pairs(reps: int) -> list[tuple[float, float]]:
    """Seconds per step of the two small stacks (:data:`OVERHEAD_DEPTHS` layers), measured back
    to back ``reps`` times (a slow moment slows a pair, not the difference of the median pair)."""
    small = capped_hstu(hstu_preset("hstu_small"), 1_000).replace(dim=8, heads=1, top_mlp=(8,))

    def seconds(layers: int) -> float:
        m = measure_hstu_step(small.replace(num_layers=layers), list(OVERHEAD_LENGTHS), time_budget_s=0.1,
                              max_steps=100)  # fmt: skip
        return m.seconds_per_step

    return [(seconds(OVERHEAD_DEPTHS[0]), seconds(OVERHEAD_DEPTHS[1])) for _ in range(reps)]


def hstu_op_overhead(pairs: list[tuple[float, float]]) -> float:
    """Seconds per operator of an HSTU step: the median difference of ``pairs``
    (:func:`hstu_overhead_pairs`) over the operators the deeper stack adds."""
    if not pairs:
        raise ValueError("pairs must hold at least one (shallow, deep) pair of step times, got []")
    shallow, deep = (step_operators(d, list(OVERHEAD_LENGTHS)) for d in OVERHEAD_DEPTHS)
    return max(0.0, float(np.median([b - a for a, b in pairs]))) / (deep - shallow)
