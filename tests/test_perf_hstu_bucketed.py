"""The modeled HSTU step of this package's bucketed attention: its operators counted per layer and
per bucket, its attention the full squares of the kernel's padded bucket lengths, its SiLU passes
at a calibrated cost an element, its relative bias and its operators at theirs; the bucketing
rule's one home; the new fields' calibration round trip (an old file still loads)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from recnotebooks import sparse
from recnotebooks.config import TableConfig
from recnotebooks.config.hstu import HSTUConfig
from recnotebooks.kernels import jagged_attention
from recnotebooks.nn.hstu import HSTU
from recnotebooks.nn.hstu_padded import padded_layer, to_padded
from recnotebooks.perf.components.dense import gemm_time
from recnotebooks.perf.hardware import hardware, load_calibration, save_calibration
from recnotebooks.perf.hstu import (
    BIAS_READ_PAIR_PASSES,
    BUCKETED_OPS,
    OPS_PER_LAYER,
    OPS_PER_STEP,
    PADDED_BIAS_ADD_PASSES,
    PADDED_MASK_PAIR_PASSES,
    PADDED_OPS,
    PADDED_RAB_BYTES,
    PADDED_SCORE_PASSES,
    RAB_BYTES,
    RAB_INDEX_BYTES,
    SCORE_PASSES,
    SILU_SCORE_PASSES,
    hstu_step,
    score_passes,
    step_operators,
)

CFG = HSTUConfig((TableConfig("item", 1000),), dim=64, num_layers=2, heads=2, max_len=512, top_mlp=(64,))


def test_the_rule_has_one_home_the_kernel_re_exports() -> None:
    assert jagged_attention.buckets is sparse.buckets
    assert jagged_attention.padded_length is sparse.padded_length
    assert jagged_attention.MIN_STEP == sparse.MIN_STEP == 8
    # steps of max(8, 2^floor(log2 n) / 4): 8 up to 63, then 16, 32, ...
    assert [sparse.padded_length(n) for n in (0, 1, 8, 9, 63, 64, 65, 100, 300, 512)] == [
        0, 8, 8, 16, 64, 64, 80, 112, 320, 512,
    ]  # fmt: skip
    assert sparse.buckets([3, 0, 8, 100, 9, 110]) == {8: [0, 2], 112: [3, 5], 16: [4]}


def test_operators_by_hand() -> None:
    """2 layers on histories in 3 buckets (8, 16, 112): 235 + 41 x 3 + 2 x (141 + 42 x 3)."""
    lengths = [3, 8, 9, 100, 110]
    assert step_operators(2, lengths) == 235 + 41 * 3 + 2 * (141 + 42 * 3)
    assert BUCKETED_OPS == {"step": 235, "step_per_bucket": 41, "layer": 141, "layer_per_bucket": 42}
    assert step_operators(3, lengths, padded=True) == PADDED_OPS["step"] + 3 * PADDED_OPS["layer"]
    assert step_operators(2, lengths, attention="fused") == OPS_PER_STEP + 2 * OPS_PER_LAYER
    with pytest.raises(ValueError, match="attention"):
        step_operators(2, lengths, attention="flash")


def test_overhead_prices_the_counted_operators() -> None:
    hw = hardware("dgx_h100").replace(op_overhead_s=1e-6, step_overhead_s=1e-4)
    lengths = [3, 8, 9, 100, 110]
    step = hstu_step(CFG, hw, lengths, attention="bucketed")
    assert step.seconds["overhead"] == pytest.approx(step_operators(2, lengths) * 1e-6 + 1e-4)
    forward = hstu_step(CFG, hw, lengths, attention="bucketed", backward=False)
    assert forward.seconds["overhead"] == pytest.approx(step_operators(2, lengths) * 1e-6 / 3 + 1e-4)


def test_bucketed_attention_computes_full_squares_of_padded_lengths() -> None:
    """Histories of 100 events run in buckets of 112: their attention is a padded batch's of
    112 (full squares, the mask computed), a fused kernel's the causal half of 100."""
    hw = hardware("dgx_h100")
    bucketed = hstu_step(CFG, hw, [100] * 4, attention="bucketed").seconds["attention"]
    assert bucketed == pytest.approx(hstu_step(CFG, hw, [112] * 4, padded=True).seconds["attention"])
    d = CFG.dim // CFG.heads
    square = CFG.heads * (gemm_time(hw, 112, 112, d, "bf16") + gemm_time(hw, 112, d, 112, "bf16"))
    assert bucketed == pytest.approx(CFG.num_layers * 3 * 4 * square)  # forward and backward, 4 histories
    fused = hstu_step(CFG, hw, [100] * 4).seconds["attention"]
    full = CFG.heads * (gemm_time(hw, 100, 100, d, "bf16") + gemm_time(hw, 100, d, 100, "bf16"))
    assert fused == pytest.approx(CFG.num_layers * 3 * 4 * full * 5050 / 10_000)


def test_silu_passes_at_the_calibrated_cost_an_element() -> None:
    """The score passes at bandwidth, but the SiLU's forward and backward at ``silu_seconds`` an
    element where that is slower: by hand, for 4 histories in buckets of 112, 2 heads, 2 layers."""
    base = hardware("dgx_h100").replace(hbm_bw=1e10)
    lengths = [100] * 4
    weights = CFG.heads * 4 * 112 * 112
    slow = base.replace(silu_seconds=1e-8)
    gap = (
        hstu_step(CFG, slow, lengths, attention="bucketed").seconds["pointwise"]
        - hstu_step(CFG, base, lengths, attention="bucketed").seconds["pointwise"]
    )
    want = CFG.num_layers * (2 * weights * 1e-8 - SILU_SCORE_PASSES * weights * 2 / 1e10)  # bf16: 2 bytes
    assert gap == pytest.approx(want)
    fast = base.replace(silu_seconds=1e-15)  # faster than its bytes: the bytes price it
    assert hstu_step(CFG, fast, lengths, attention="bucketed").seconds == pytest.approx(
        hstu_step(CFG, base, lengths, attention="bucketed").seconds
    )
    assert hstu_step(CFG, slow, lengths).seconds == hstu_step(CFG, base, lengths).seconds  # fused: none
    assert SCORE_PASSES > SILU_SCORE_PASSES


def test_relative_bias_at_the_calibrated_costs_a_pair_by_hand() -> None:
    """The bias of the bucketed kernel, by hand: 4 histories of 100 events in buckets of 112 (2
    heads, 2 layers): its index once a step, each layer's lookup and gradient, the gradient summed
    over the heads; at the calibrated costs where they are slower than the bytes; and each pair's
    bias read into the scores (bf16: 2 bytes). A padded stack builds the index in each layer and
    adds the bias to every weight (a read and a write); a fused kernel prices none; a model
    without the bias none."""
    base = hardware("dgx_h100").replace(hbm_bw=1e10)
    lengths, pairs, b = [100] * 4, 4 * 112 * 112, 1 / 1e10
    slow = base.replace(rab_seconds=1e-8, rab_index_seconds=3e-8)

    def pointwise(hw: object, cfg: HSTUConfig = CFG, **kw: object) -> float:
        return hstu_step(cfg, hw, lengths, attention="bucketed", **kw).seconds["pointwise"]  # type: ignore[arg-type]

    heads_sum = 3 * (CFG.heads - 1) * 4 * b
    read = BIAS_READ_PAIR_PASSES * 2 * b  # the bias read into the scores, a pair and layer
    no_bias = CFG.replace(relative_bias=False)
    assert pointwise(base) - pointwise(base, no_bias) == pytest.approx(
        pairs * (RAB_INDEX_BYTES * b + 2 * (RAB_BYTES * b + heads_sum + read))
    )
    assert pointwise(slow) - pointwise(slow, no_bias) == pytest.approx(
        pairs * (3e-8 + 2 * (1e-8 + heads_sum + read))
    )
    assert pointwise(base.replace(rab_seconds=1e-15)) == pytest.approx(pointwise(base))  # the bytes price it

    def padded(hw: object) -> float:
        on, off = (hstu_step(c, hw, [112] * 4, padded=True, attention="bucketed").seconds["pointwise"]  # type: ignore[arg-type]
                   for c in (CFG, no_bias))  # fmt: skip
        return on - off

    rest = heads_sum + read + PADDED_BIAS_ADD_PASSES * CFG.heads * 2 * b  # read and added to every weight
    assert padded(slow) == pytest.approx(pairs * 2 * (PADDED_RAB_BYTES * b + rest))  # its own bytes
    assert padded(slow.replace(rab_padded_seconds=5e-8)) == pytest.approx(pairs * 2 * (5e-8 + rest))
    assert hstu_step(CFG, slow, lengths).seconds == hstu_step(CFG, base, lengths).seconds  # fused: none
    forward = hstu_step(CFG, slow, lengths, attention="bucketed", backward=False).seconds["pointwise"]
    forward_off = hstu_step(no_bias, slow, lengths, attention="bucketed", backward=False).seconds["pointwise"]
    assert forward - forward_off == pytest.approx((pointwise(slow) - pointwise(slow, no_bias)) / 3)


def test_the_bucketed_steps_operators_at_their_own_host_cost() -> None:
    """``hstu_op_overhead_s`` prices the bucketed kernel's operators where calibrated; a fused
    kernel's (a GPU's) stay at ``op_overhead_s``; unset, ``op_overhead_s`` prices both."""
    hw = hardware("dgx_h100").replace(op_overhead_s=1e-6, step_overhead_s=0.0)
    lengths = [3, 8, 9, 100, 110]
    assert hw.hstu_op_overhead_s is None and hw.hstu_op_cost_s == 1e-6
    own = hw.replace(hstu_op_overhead_s=4e-6)
    assert hstu_step(CFG, own, lengths, attention="bucketed").seconds["overhead"] == pytest.approx(
        step_operators(2, lengths) * 4e-6
    )
    assert hstu_step(CFG, own, lengths).seconds == hstu_step(CFG, hw, lengths).seconds
    for field in ("hstu_op_overhead_s", "rab_seconds", "rab_index_seconds", "rab_padded_seconds"):
        with pytest.raises(ValueError, match=field):
            hw.replace(**{field: -1.0})


def test_the_calibrations_hstu_timings() -> None:
    """The bias's costs a pair are positive and finite (timings: no bound on their size); the
    HSTU operators' cost is the median pair's difference over the operators the deeper stack
    adds, counted by ``step_operators`` (by hand); no pairs is refused."""
    from recnotebooks.measure.calibrate_hstu import (
        OVERHEAD_LENGTHS,
        hstu_op_overhead,
        rab_padded_seconds,
        rab_seconds,
    )

    lookup, index = rab_seconds(2)
    assert 0 < lookup < math.inf and 0 < index < math.inf
    assert 0 < rab_padded_seconds(2) < math.inf
    pairs = [(1.0, 1.5), (1.0, 1.2), (2.0, 2.3)]  # differences 0.5, 0.2, 0.3: the median 0.3
    added = step_operators(3, list(OVERHEAD_LENGTHS)) - step_operators(1, list(OVERHEAD_LENGTHS))
    assert hstu_op_overhead(pairs) == pytest.approx(0.3 / added)
    with pytest.raises(ValueError, match="pairs"):
        hstu_op_overhead([])


def test_the_new_fields_round_trip_and_old_files_read_none(tmp_path: Path) -> None:
    hw = hardware("dgx_h100").replace(name="this_machine", kind="cpu", devices=1, hstu_op_overhead_s=4e-6,
                                      rab_seconds=2e-9, rab_index_seconds=1e-9,
                                      rab_padded_seconds=9e-9)  # fmt: skip
    path = save_calibration(hw, {"gflops": 1.0, "copy_bw": 1.0}, tmp_path / "this_machine.json")
    assert load_calibration(path) == hw
    saved = json.loads(path.read_text())
    for field in ("hstu_op_overhead_s", "rab_seconds", "rab_index_seconds", "rab_padded_seconds"):
        del saved["hardware"][field]  # a file written before the fields existed
    path.write_text(json.dumps(saved))
    old = load_calibration(path)
    assert old is not None
    assert (old.hstu_op_overhead_s, old.rab_seconds, old.rab_index_seconds, old.rab_padded_seconds) == (
        None,
    ) * 4


def test_the_attention_keyword_is_checked() -> None:
    with pytest.raises(ValueError, match="attention"):
        hstu_step(CFG, "dgx_h100", [10], attention="flash")
    with pytest.raises(ValueError, match="contradicts"):
        hstu_step(CFG, "dgx_h100", [10], attention="fused", fused_attention=False)
    a = hstu_step(CFG, "dgx_h100", [10, 30], fused_attention=False).seconds
    assert a == hstu_step(CFG, "dgx_h100", [10, 30], attention="bucketed").seconds


def test_silu_seconds_round_trips_and_old_files_read_zero(tmp_path: Path) -> None:
    hw = hardware("dgx_h100").replace(name="this_machine", kind="cpu", devices=1, silu_seconds=1.5e-9)
    path = save_calibration(hw, {"gflops": 1.0, "copy_bw": 1.0}, tmp_path / "this_machine.json")
    assert load_calibration(path) == hw and load_calibration(path).silu_seconds == 1.5e-9  # type: ignore[union-attr]
    saved = json.loads(path.read_text())
    del saved["hardware"]["silu_seconds"]  # a file written before the field existed
    path.write_text(json.dumps(saved))
    old = load_calibration(path)
    assert old is not None and old.silu_seconds == 0.0
    assert dataclasses.replace(old, silu_seconds=1.5e-9) == hw
    with pytest.raises(ValueError, match="silu_seconds"):
        hw.replace(silu_seconds=-1.0)


def _counted_ops(layers: int, lengths: list[int], padded: bool = False) -> float:
    """Top-level operators of one step of ``measure_hstu_step``'s stepper (the profiler's count,
    as ``tests/test_op_count.py`` counts a DLRM step's), the mean of 2 after 2 warm-up steps."""
    from _train_workers import _profile_steps

    from recnotebooks.config.hstu import hstu_preset
    from recnotebooks.measure.hstu import HSTUStepper, capped_hstu, hstu_batch
    from recnotebooks.nn.generative import HSTURanker
    from recnotebooks.timing import PhaseTimer

    cfg = capped_hstu(hstu_preset("hstu_small").replace(num_layers=layers, dim=16), 100)
    stepper = HSTUStepper(HSTURanker(cfg, seed=0), hstu_batch(cfg, lengths, 0), padded)
    return _profile_steps(lambda _: stepper.train_step(PhaseTimer()))["ops"]


@pytest.mark.parametrize(
    ("layers", "lengths", "padded"),
    [(1, [5, 6], False), (2, [5, 12, 40], False), (2, [5, 12, 40], True)],
)
def test_the_operator_constants_are_what_the_step_launches(
    layers: int, lengths: list[int], padded: bool
) -> None:
    """:data:`BUCKETED_OPS` and :data:`PADDED_OPS` recounted: if the kernel or the layer changes
    its operators, this fails and prints the new count (refit the constants from it)."""
    counted, modeled = _counted_ops(layers, lengths, padded), step_operators(layers, lengths, padded=padded)
    assert abs(counted - modeled) <= 1, (counted, modeled)  # the gaps' dtype: one operator more or less


# ----- the passes over the attention weights, counted from the code -------------------------------
class _Passes(TorchDispatchMode):
    """Reads and writes of ``weights``-sized (``(b, heads, P, P)``) and ``pairs``-sized
    (``(b, P, P)``) tensors by every operator run under it, in units of a float32 pass (a boolean
    counts a quarter). A view or an allocation moves nothing; an ``out=``-style argument and
    ``copy_``'s target are written, not read; ``baddbmm`` with ``beta=0`` does not read its input.
    Each operator is kept with its counts, so that a test can leave out what another term prices."""

    def __init__(self, weights: int, pairs: int) -> None:
        super().__init__()
        self.sizes = {weights: 0, pairs: 1}
        self.ops: list[tuple[str, list[float], list[float]]] = []  # name, reads, writes (weights, pairs)

    def _add(self, into: list[float], t: object) -> None:
        if isinstance(t, torch.Tensor) and t.numel() in self.sizes:
            into[self.sizes[t.numel()]] += t.element_size() / 4

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        schema = func._schema
        alias = schema.returns[0].alias_info if schema.returns else None
        name = func.overloadpacket.__name__
        if (alias is not None and not alias.is_write) or name.startswith("empty") or name == "new_empty":
            return out  # a view, or memory allocated: nothing moved
        reads, writes = [0.0, 0.0], [0.0, 0.0]
        given = dict(zip((a.name for a in schema.arguments), args, strict=False)) | kwargs
        for arg in schema.arguments:
            value = given.get(arg.name)
            written = arg.alias_info is not None and arg.alias_info.is_write
            if written and (arg.name != "self" or name in ("copy_", "fill_", "zero_")):
                continue  # a target: written (counted below), not read
            if arg.name == "self" and name in ("baddbmm", "addmm") and given.get("beta", 1) == 0:
                continue
            for t in value if isinstance(value, (list, tuple)) else [value]:
                self._add(reads, t)
        for t in out if isinstance(out, (list, tuple)) else [out]:
            self._add(writes, t)
        if any(reads) or any(writes):
            self.ops.append((name, reads, writes))
        return out


def _count_passes(padded: bool, bias: bool) -> _Passes:
    """One HSTU layer's forward and backward (3 histories of 40 events, 2 heads: one bucket of 40),
    as the bucketed kernel or the padded stack runs it, under :class:`_Passes`."""
    torch.manual_seed(0)
    layer = HSTU(64, num_layers=1, heads=2, max_len=64, relative_bias=bias).layers[0]
    b, n = 3, 40
    lengths, offsets = torch.full((b,), n), torch.arange(b + 1) * n
    times = torch.cumsum(torch.randint(1, 100, (b * n,)), 0).double()
    x = torch.randn(b * n, 64)
    counter = _Passes(b * 2 * n * n, b * n * n)
    if padded:
        xp = to_padded(x, offsets, n).requires_grad_(True)
        with counter:
            padded_layer(layer, xp, lengths, to_padded(times, offsets, n)).sum().backward()
    else:
        plan = jagged_attention.plan(offsets, times)
        with counter:
            layer(x.requires_grad_(True), offsets, times, plan).sum().backward()
    return counter


def _totals(ops: list[tuple[str, list[float], list[float]]]) -> tuple[float, float]:
    return sum(r[0] + w[0] for _, r, w in ops), sum(r[1] + w[1] for _, r, w in ops)


@pytest.mark.parametrize("padded", [False, True])
def test_the_passes_over_the_weights_are_the_codes(padded: bool) -> None:
    """:data:`SCORE_PASSES`, :data:`PADDED_SCORE_PASSES` and the padded mask's pair passes
    counted again from the operators a layer runs (without the bias); with the bias, the
    operators that touch the weights read each pair's bias once more (and a padded stack adds it:
    a read and a write of every weight). The bias's index, lookup, gradient and its sum over the
    heads are priced apart (``_bias_seconds``) and left out. If the kernel or the padded layer
    changes its passes, this fails and prints the new count."""
    want = (PADDED_SCORE_PASSES, PADDED_MASK_PAIR_PASSES) if padded else (SCORE_PASSES, 0.0)
    plain = _count_passes(padded, bias=False).ops
    assert _totals(plain) == want, plain
    heads_sum = ("sum", "add")  # the bias's gradient summed over the heads: _bias_seconds'

    def on_weights(ops: list[tuple[str, list[float], list[float]]]) -> tuple[float, float]:
        kept = [op for op in ops if (op[1][0] or op[2][0]) and not (op[0] in heads_sum and not op[2][0])]
        return _totals(kept)

    with_bias, without = on_weights(_count_passes(padded, bias=True).ops), on_weights(plain)
    assert with_bias[0] - without[0] == (PADDED_BIAS_ADD_PASSES if padded else 0.0)
    assert with_bias[1] - without[1] == BIAS_READ_PAIR_PASSES
    heads = 2
    assert (
        score_passes(heads, padded, True)
        == want[0] + (with_bias[0] - without[0]) + (want[1] + BIAS_READ_PAIR_PASSES) / heads
    )


def test_score_passes_refuses_bad_input() -> None:
    for bad in (0, -2, 1.5, "2", True):
        with pytest.raises((ValueError, TypeError), match="heads"):
            score_passes(bad, False, True)  # type: ignore[arg-type]
    with pytest.raises((ValueError, TypeError), match="padded"):
        score_passes(2, "no", True)  # type: ignore[arg-type]
    with pytest.raises((ValueError, TypeError), match="relative_bias"):
        score_passes(2, False, None)  # type: ignore[arg-type]
    assert score_passes(1, False, False) == SCORE_PASSES
