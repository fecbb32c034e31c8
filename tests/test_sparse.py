"""JaggedBatch validation, round trips and torchrec interop."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.sparse import JaggedBatch

bags = st.lists(st.lists(st.integers(0, 1000), max_size=4), min_size=1, max_size=5)


@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), bags, min_size=1))
def test_from_lists_round_trip(features):
    n = min(len(v) for v in features.values())
    features = {k: v[:n] for k, v in features.items()}
    jb = JaggedBatch.from_lists(features)
    assert jb.to_lists() == features
    off = jb.offsets()
    assert off[0] == 0 and int(off[-1]) == jb.values.numel()
    for k in features:
        vals, lens = jb[k]
        assert vals.tolist() == [x for bag in features[k] for x in bag]
        assert lens.tolist() == [len(b) for b in features[k]]


def test_key_major_layout():
    jb = JaggedBatch.from_lists({"a": [[1], [2, 3]], "b": [[], [4]]})
    assert jb.values.tolist() == [1, 2, 3, 4]
    assert jb.lengths.tolist() == [1, 2, 0, 1]
    assert jb.length_per_key().tolist() == [3, 1]


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"lengths": torch.tensor([1, 1, 1])}, ValueError, "lengths must have"),
        ({"lengths": torch.tensor([3, -1])}, ValueError, "lengths must be >= 0"),
        ({"lengths": torch.tensor([1, 0])}, ValueError, "sum to len"),
        ({"values": torch.tensor([1.0, 2.0])}, TypeError, "values must be a 1-D int"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"keys": ("a", "a")}, ValueError, "unique"),
        ({"keys": "ab"}, TypeError, "keys"),
        ({"weights": torch.tensor([1.0])}, ValueError, "weights"),
        ({"weights": torch.tensor([1, 2])}, TypeError, "weights"),
    ],
)
def test_validation(kwargs, exc, match):
    args = {
        "keys": ("a", "b"),
        "values": torch.tensor([5, 6]),
        "lengths": torch.tensor([1, 1]),
        "batch_size": 1,
    } | kwargs
    with pytest.raises(exc, match=match):
        JaggedBatch(**args)


def test_to_and_pin_memory():
    jb = JaggedBatch.from_lists({"a": [[1, 2]]})
    assert jb.to("cpu") is jb
    if torch.cuda.is_available():
        assert jb.pin_memory().is_pinned()
        assert jb.to("cuda").device.type == "cuda"


def test_torchrec_round_trip():
    pytest.importorskip("torchrec")
    jb = JaggedBatch.from_lists(
        {"a": [[1], [2, 3]], "b": [[], [4]]}, weights={"a": [[0.5], [1, 2]], "b": [[], [3]]}
    )
    kjt = jb.to_kjt()
    back = JaggedBatch.from_kjt(kjt)
    assert back.to_lists() == jb.to_lists()
    assert torch.equal(back.weights, jb.weights)
    assert kjt.stride() == 2 and list(kjt.keys()) == ["a", "b"]


@given(st.lists(st.integers(0, 2**62), min_size=1, max_size=6), st.integers(0, 12))
def test_lengths_are_accepted_only_when_they_sum_to_len_values(lengths, n):
    """However large the lengths (sums that wrap int64 included), a batch is built only when
    the exact sum (Python ints, by hand) equals len(values)."""
    values = torch.arange(n)
    args = (("k",), values, torch.tensor(lengths, dtype=torch.int64), len(lengths))
    if sum(lengths) == n:
        assert JaggedBatch(*args).offsets()[-1] == n
    else:
        with pytest.raises(ValueError, match="lengths"):
            JaggedBatch(*args)
