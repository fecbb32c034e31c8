"""The synthetic listening log: shape, determinism, Yambda-shaped lengths, hierarchy, skew,
repeats, disjoint splits, a label the history predicts, and the checks at the door."""

from __future__ import annotations

import math

import pytest
import torch

from recnotebooks.data.listening import ListeningConfig, SyntheticListening
from recnotebooks.metrics import auc
from recnotebooks.nn.hstu import HSTU

SMALL = ListeningConfig(users=2_000, items=20_000, albums=2_000, artists=400, tastes=8)


@pytest.fixture(scope="module")
def log() -> SyntheticListening:
    return SyntheticListening(SMALL, batch_size=128)


def test_a_batch_is_the_same_every_time_and_batches_differ(log: SyntheticListening) -> None:
    a, b, c = log.batch(3), log.batch(3), log.batch(4)
    for name in ("users", "offsets", "timestamps", "labels"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert all(torch.equal(a.ids[k], b.ids[k]) for k in a.ids)
    assert not torch.equal(a.users, c.users)


def test_shapes_and_hierarchy(log: SyntheticListening) -> None:
    b = log.batch(0)
    n = b.num_tokens
    assert b.offsets[0] == 0 and b.offsets[-1] == n and len(b.users) == 128
    assert list(b.ids) == ["item", "album", "artist"]
    assert all(t.shape == (n,) for t in (*b.ids.values(), b.timestamps, b.labels))
    assert torch.equal(b.ids["album"], log.album_of_item[b.ids["item"]])
    assert torch.equal(b.ids["artist"], log.artist_of_album[b.ids["album"]])
    assert bool((b.lengths >= 1).all()) and int(b.lengths.max()) <= SMALL.max_length
    assert set(b.labels.unique().tolist()) <= {0.0, 1.0}
    HSTU(16, 1, 2, SMALL.max_length)(torch.randn(n, 16), b.offsets, b.timestamps)  # passes its checks


def test_lengths_are_lognormal_with_the_configured_median_and_mean() -> None:
    cfg = ListeningConfig(**{**SMALL.__dict__, "median_length": 20, "mean_length": 36, "max_length": 100_000})
    lengths = SyntheticListening(cfg, 4_000)._lengths(torch.Generator().manual_seed(0), 20_000).double()
    assert abs(lengths.median().item() / 20 - 1) < 0.06
    assert abs(lengths.mean().item() / 36 - 1) < 0.06
    # the Yambda shape: mean / median = 4.8k / 2.7k = 1.78, as the defaults keep (96 / 54)
    assert ListeningConfig().mean_length / ListeningConfig().median_length == pytest.approx(
        4_800 / 2_700, rel=0.02
    )


def test_timestamps_never_go_back_within_a_history(log: SyntheticListening) -> None:
    b = log.batch(1)
    steps = b.timestamps[1:] - b.timestamps[:-1]
    inside = torch.ones_like(steps, dtype=torch.bool)
    inside[b.offsets[1:-1] - 1] = False
    assert bool((steps[inside] >= 0).all())


def test_popularity_is_skewed_and_repeats_happen(log: SyntheticListening) -> None:
    items = torch.cat([log.batch(i).ids["item"] for i in range(4)])
    counts = torch.bincount(items, minlength=SMALL.items).sort(descending=True).values
    top = counts[: SMALL.items // 100].sum().item() / counts.sum().item()
    assert top > 0.2  # the top 1% of tracks take over a fifth of the listens
    b = log.batch(0)
    seen = 0
    for s, e in zip(b.offsets[:-1].tolist(), b.offsets[1:].tolist(), strict=True):
        seen += e - s - len(set(b.ids["item"][s:e].tolist()))
    assert 0.15 < seen / b.num_tokens < 0.6  # about `repeat` of the listens replay an earlier track


def test_train_and_eval_users_are_disjoint() -> None:
    train = SyntheticListening(SMALL, 256, "train")
    held = SyntheticListening(SMALL, 256, "eval")
    tr = set(torch.cat([train.batch(i).users for i in range(4)]).tolist())
    ev = set(torch.cat([held.batch(i).users for i in range(4)]).tolist())
    assert tr and ev and not tr & ev
    assert all(u % 10 == 9 for u in ev) and max(tr | ev) < SMALL.users


def test_the_label_rate_and_a_label_the_history_predicts(log: SyntheticListening) -> None:
    b = log.batch(2)
    assert abs(b.labels.mean().item() - SMALL.positive_rate) < 0.04
    assert auc(log.teacher_logits(b), b.labels) > 0.75  # the teacher itself
    # what only the history tells: has this user heard the artist before in this history?
    heard = torch.zeros(b.num_tokens)
    for s, e in zip(b.offsets[:-1].tolist(), b.offsets[1:].tolist(), strict=True):
        seen: set[int] = set()
        for t in range(s, e):
            heard[t] = float(int(b.ids["artist"][t]) in seen)
            seen.add(int(b.ids["artist"][t]))
    assert auc(heard, b.labels) > 0.55


def test_a_stronger_teacher_makes_labels_more_predictable() -> None:
    weak = SyntheticListening(ListeningConfig(**{**SMALL.__dict__, "teacher_strength": 0.5}), 128)
    strong = SyntheticListening(ListeningConfig(**{**SMALL.__dict__, "teacher_strength": 4.0}), 128)
    bw, bs = weak.batch(0), strong.batch(0)
    assert auc(strong.teacher_logits(bs), bs.labels) > auc(weak.teacher_logits(bw), bw.labels) + 0.1


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("users", 5, ValueError),
        ("albums", 10, ValueError),  # fewer albums than artists
        ("items", 100, ValueError),  # fewer tracks than albums
        ("tastes", 0, ValueError),
        ("median_length", 0, ValueError),
        ("mean_length", 10, ValueError),  # below the median
        ("max_length", 0, ValueError),
        ("repeat", 1.0, ValueError),
        ("positive_rate", 0.0, ValueError),
        ("zipf_exponent", math.nan, ValueError),
        ("items", 2.5, TypeError),
    ],
)
def test_bad_config_names_the_field(field: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=field):
        ListeningConfig(**{**SMALL.__dict__, field: value})


def test_bad_arguments_are_named(log: SyntheticListening) -> None:
    with pytest.raises(ValueError, match="split"):
        SyntheticListening(SMALL, 8, split="test")
    with pytest.raises(ValueError, match="batch_size"):
        SyntheticListening(SMALL, 0)
    with pytest.raises(TypeError, match="config"):
        SyntheticListening("small", 8)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="index"):
        log.batch(-1)


def test_iteration_resumes_where_its_state_says() -> None:
    """A pass yields batch(0), batch(1), ...; a state saved after two batches resumes at the third,
    in a fresh log of the same seed and split (what a checkpoint needs)."""
    log = SyntheticListening(SMALL, 16, num_batches=4)
    it = iter(log)
    first = [next(it) for _ in range(2)]
    assert torch.equal(first[1].users, log.batch(1).users)
    state = log.state_dict()
    assert state == {"kind": "synthetic_listening", "position": 2, "seed": 0, "split": "train"}
    fresh = SyntheticListening(SMALL, 16, num_batches=4)
    fresh.load_state_dict(state)
    rest = list(fresh)
    assert [b.users.tolist() for b in rest] == [log.batch(i).users.tolist() for i in (2, 3)]
    assert len(list(SyntheticListening(SMALL, 16, num_batches=3))) == 3


def test_a_state_of_another_stream_is_refused() -> None:
    log = SyntheticListening(SMALL, 16)
    with pytest.raises(ValueError, match="not of a SyntheticListening"):
        log.load_state_dict({"kind": "synthetic_criteo", "position": 3})
    with pytest.raises(ValueError, match="split"):
        log.load_state_dict({"kind": "synthetic_listening", "position": 3, "split": "eval"})
    with pytest.raises(ValueError, match="position"):
        log.load_state_dict({"kind": "synthetic_listening", "position": -1})
    with pytest.raises(ValueError, match="num_batches"):
        SyntheticListening(SMALL, 16, num_batches=0)
