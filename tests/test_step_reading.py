"""A measured step read phase by phase (notebook 01 §6): shares, the largest phase, the step
without its data phase, and the words printed, on hand-made phases."""

from __future__ import annotations

import pytest
from _values import bad

from recnotebooks.measure.step import PHASE_WORK, read_step
from recnotebooks.timing import PHASES

STEP = {"data": 0.015, "embedding_forward": 0.002, "bottom_mlp": 0.0005, "interaction": 0.005,
        "top_mlp": 0.002, "backward": 0.0145, "sparse_optimizer": 0.005,
        "dense_optimizer": 0.002}  # fmt: skip


def test_shares_largest_and_the_step_without_data() -> None:
    r = read_step(STEP, 512)
    assert r.seconds == pytest.approx(0.046)
    assert list(r.shares)[:2] == ["data", "backward"] and r.largest == "data"
    assert sum(r.shares.values()) == pytest.approx(1.0)
    assert r.without_data == pytest.approx(0.031)
    assert r.samples_per_s == pytest.approx(512 / 0.046) and r.samples_per_s_without_data == pytest.approx(
        512 / 0.031
    )
    rows = r.rows(setting="x")
    assert [x["rank"] for x in rows] == list(range(1, 9)) and rows[0]["phase"] == "data"
    assert all(x["source"] == "measured" and x["setting"] == "x" for x in rows)


def test_the_words_quote_the_numbers_and_fit_the_page() -> None:
    text = read_step(STEP, 512).describe("dcnv2_small")
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines) and "NOT RELIABLE" not in text
    assert lines[0] == "dcnv2_small: one training step of batch 512, 46.0 ms (MEASURED)"
    assert lines[1].split()[:4] == ["data", "15.0", "ms", "33%"]
    flat = " ".join(text.split())
    assert "Largest: data (33%), then backward (32%)." in flat
    assert "the step would take 31.0 ms: 1.5x the samples per second (16,516 instead of 11,130)" in flat
    assert "NOT RELIABLE: its steps varied 3.0-fold" in read_step(STEP, 512).describe(
        "m", "its steps varied 3.0-fold"
    )


def test_every_phase_the_trainer_times_is_explained() -> None:
    assert set(PHASE_WORK) == set(PHASES)


@pytest.mark.parametrize(
    ("phases", "batch", "exc", "words"),
    [({}, 1, TypeError, "phases must be a non-empty dict"),
     ([("data", 1.0)], 1, TypeError, "phases must be a non-empty dict"),
     ({"data": -1.0}, 1, ValueError, "phases['data'] must be"),
     ({"data": float("nan")}, 1, ValueError, "phases['data'] must be"),
     ({"data": 0.0}, 1, ValueError, "add up to more than 0"),
     ({"data": 1.0}, 0, ValueError, "batch_size must be")],
)  # fmt: skip
def test_bad_phases_are_named(phases: object, batch: int, exc: type, words: str) -> None:
    with pytest.raises(exc) as err:
        read_step(bad(phases), batch)
    assert words in str(err.value)
