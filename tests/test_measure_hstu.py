"""The measured HSTU step (recnotebooks.measure.hstu): what a measurement returns, the padded
implementation it can time against the jagged one (checked equal to the model, forward and
gradients), the batch it trains on, and the checks at the door. No timing asserts."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from recnotebooks.config import TableConfig
from recnotebooks.config.hstu import HSTUConfig
from recnotebooks.measure import DoesNotFitError
from recnotebooks.measure.hstu import (
    HSTU_PHASES,
    HSTUMeasurement,
    HSTUStepper,
    capped_hstu,
    hstu_batch,
    measure_hstu_step,
)
from recnotebooks.nn.generative import HSTURanker
from recnotebooks.nn.hstu import HSTU
from recnotebooks.nn.hstu_padded import padded_stack, to_padded, valid_positions
from recnotebooks.timing import NULL_TIMER

MAX_LEN = 16
TINY = HSTUConfig(
    (TableConfig("item", 300), TableConfig("album", 40), TableConfig("artist", 9)),
    dim=16, num_layers=2, heads=2, max_len=MAX_LEN, top_mlp=(8,), name="tiny_hstu",
)  # fmt: skip
QUICK = {"time_budget_s": 0.0, "min_steps": 3, "max_steps": 3}


@pytest.mark.parametrize("padded", [False, True])
def test_measurement_returns_its_phases_tokens_and_reliability(padded: bool) -> None:
    lengths = [5, 1, 0, MAX_LEN, 3]
    m = measure_hstu_step(TINY, lengths, padded=padded, **QUICK)
    assert isinstance(m, HSTUMeasurement) and m.source == "measured" and m.padded is padded
    assert tuple(m.phases) == HSTU_PHASES
    assert all(math.isfinite(v) and v >= 0 for v in m.phases.values())
    assert all(m.phases[k] > 0 for k in ("embeddings", "hstu", "backward"))
    assert m.seconds_per_step == pytest.approx(sum(m.phases.values())) and m.seconds_per_step > 0
    assert m.steps == 3 and len(m.step_seconds) == 3 and m.batch_size == len(lengths)
    assert m.tokens == sum(lengths) and m.lengths == tuple(lengths)
    assert m.computed_tokens == (len(lengths) * MAX_LEN if padded else sum(lengths))
    assert m.tokens_per_s == pytest.approx(m.tokens / m.seconds_per_step)
    assert (m.padding_share > 0) is padded
    assert isinstance(m.reliable, bool) and m.reliable == (m.reliability() == "") and m.threads >= 1
    assert "median of 3 steps" in m.describe()
    assert {r["phase"] for r in m.table()} == set(HSTU_PHASES)


def test_default_histories_come_from_the_synthetic_log() -> None:
    m = measure_hstu_step(TINY, histories=4, **QUICK)
    assert m.batch_size == 4 and len(m.lengths) == 4 and m.tokens == sum(m.lengths)
    assert all(1 <= n <= MAX_LEN for n in m.lengths)


def test_batch_has_the_lengths_asked_for_and_ids_inside_the_capped_tables() -> None:
    lengths = [0, 7, 1, 12]
    capped = capped_hstu(TINY, 20)
    b = hstu_batch(capped, lengths, seed=3)
    assert b.lengths.tolist() == lengths and list(b.ids) == ["item", "album", "artist"]
    for t in capped.tables:
        assert int(b.ids[t.name].min()) >= 0 and int(b.ids[t.name].max()) < t.num_rows <= 20
    for s, e in zip(b.offsets[:-1].tolist(), b.offsets[1:].tolist(), strict=True):
        assert bool((b.timestamps[s:e].diff() >= 0).all())
    assert torch.equal(hstu_batch(capped, lengths, seed=3).ids["item"], b.ids["item"])


def test_a_step_updates_the_tables_and_the_dense_weights() -> None:
    model = HSTURanker(TINY, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    HSTUStepper(model, hstu_batch(TINY, [4, 9]), padded=True).train_step(NULL_TIMER)
    after = model.state_dict()
    assert not torch.equal(before["embeddings.weight"], after["embeddings.weight"])
    assert not torch.equal(before["top.0.weight"], after["top.0.weight"])


@settings(max_examples=8, deadline=None)
@given(
    st.lists(st.integers(0, MAX_LEN), min_size=1, max_size=5).filter(lambda x: sum(x) > 0),
    st.integers(0, 2**16),
)
def test_padded_forward_equals_the_model(lengths: list[int], seed: int) -> None:
    """The padded step's logits at the real events are the model's own forward (1e-5, fp32)."""
    model = HSTURanker(TINY, seed=seed % 7)
    b = hstu_batch(TINY, lengths, seed=seed % 2)
    ref = model(b.tokens(), b.offsets, b.previous_actions(), b.timestamps)
    for padded in (False, True):
        got = HSTUStepper(model, b, padded=padded).logits(NULL_TIMER)
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


@settings(max_examples=6, deadline=None)
@given(st.lists(st.integers(0, MAX_LEN), min_size=1, max_size=5).filter(lambda x: sum(x) > 0))
@example([13, 1, 4, 14])
def test_padded_stack_equals_the_jagged_stack_forward_and_gradients(lengths: list[int]) -> None:
    # float64: the two ways sum in different orders, and a gradient summed over every pair of
    # events differs by more than 1e-5 in float32 for some histories (e.g. lengths 13, 1, 4, 14)
    g = torch.Generator().manual_seed(len(lengths))
    stack = HSTU(16, 2, 2, MAX_LEN, generator=g).double()
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    ts = torch.cat([torch.randint(0, 9_000, (n,), generator=g).sort().values for n in lengths])
    x = torch.randn(int(offsets[-1]), 16, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(int(offsets[-1]), 16, generator=g, dtype=torch.float64)
    (stack(x, offsets, ts) * w).sum().backward()
    jagged = [x.grad.clone(), *(p.grad.clone() for p in stack.parameters())]
    stack.zero_grad()
    x.grad = None
    n = max(lengths)
    lengths_t = offsets[1:] - offsets[:-1]
    y = padded_stack(stack, to_padded(x, offsets, n), lengths_t, to_padded(ts, offsets, n))
    (y[valid_positions(lengths_t, n)] * w).sum().backward()
    for a, b in zip(jagged, [x.grad, *(p.grad for p in stack.parameters())], strict=True):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_to_padded_puts_zeros_at_the_padding() -> None:
    offsets = torch.tensor([0, 2, 2, 5])
    got = to_padded(torch.arange(1, 6), offsets, 3)
    assert got.tolist() == [[1, 2, 0], [0, 0, 0], [3, 4, 5]]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"config": "hstu_small"}, TypeError, "config"),
        ({"lengths": [3, MAX_LEN + 1]}, ValueError, "lengths[1]"),
        ({"lengths": [0, 0]}, ValueError, "lengths"),
        ({"lengths": []}, ValueError, "lengths"),
        ({"lengths": "3,4"}, TypeError, "lengths"),
        ({"lengths": [2, -1]}, ValueError, "lengths[1]"),
        ({"histories": 0}, ValueError, "histories"),
        ({"lengths": [3], "padded": "yes"}, (TypeError, ValueError), "padded"),
        ({"lengths": [3], "max_rows": 0}, ValueError, "max_rows"),
        ({"lengths": [3], "time_budget_s": -1.0}, ValueError, "time_budget_s"),
        ({"lengths": [3], "deadline_s": 0.0}, ValueError, "deadline_s"),
        ({"lengths": [3], "memory_budget": 1000}, DoesNotFitError, "GB allowed"),
    ],
)
def test_bad_input_is_refused_by_name(kwargs: dict[str, object], error: type, words: str) -> None:
    args = {"config": TINY, **kwargs}
    config = args.pop("config")
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        measure_hstu_step(config, **args)  # type: ignore[arg-type]


def test_a_ranker_with_contextual_tables_is_refused() -> None:
    cfg = TINY.replace(context=("artist",))
    with pytest.raises(ValueError, match="context"):
        measure_hstu_step(cfg, [3], **QUICK)
