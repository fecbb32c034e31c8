"""Bad input to the generative recommender's public entry points (issue 39, "Bad input"):
offsets that are not monotone or do not match the values, histories longer than the configured
maximum, heads that do not divide the dimension, timestamps that go backwards within a history,
an empty batch, a real-data path that is missing or in the wrong format. Each is a ValueError or
TypeError naming the parameter, never a raw torch/pyarrow error, and nothing is left changed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from recnotebooks.config import TableConfig
from recnotebooks.config.hstu import HSTUConfig, hstu_preset
from recnotebooks.data.listening import ListeningConfig, SyntheticListening
from recnotebooks.data.movielens import MovieLensHistories, read_movielens_ratings
from recnotebooks.data.sequences import SequenceBatch
from recnotebooks.data.yambda import YambdaHistories, read_yambda_events
from recnotebooks.nn.generative import HSTURanker
from recnotebooks.nn.hstu import HSTU, HSTULayer, hstu_attention
from recnotebooks.perf.hstu import hstu_step
from recnotebooks.sparse import JaggedBatch

DIM, MAX_LEN = 8, 6
GOOD = torch.tensor([0, 2, 5, 6])  # three histories of 2, 3 and 1 events
TIMES = torch.tensor([1, 2, 10, 11, 11, 4])  # the third history may start earlier than the second ends

#: (what, offsets, timestamps, the words the message must hold). Every entry point that takes a
#: jagged batch is fed each of these.
BAD_BATCHES = [
    ("not monotone", torch.tensor([0, 4, 2, 6]), None, r"offsets must never decrease, got 4 then 2 at 1"),
    ("not ending at the values", torch.tensor([0, 2, 5, 7]), None, r"offsets must run from 0 to .* \(6\)"),
    ("not starting at 0", torch.tensor([1, 2, 5, 6]), None, r"offsets must run from 0"),
    ("too long", torch.tensor([0, 7]), None, r"piece 0 of offsets holds 7 values; at most 6"),
    ("float offsets", GOOD.float(), None, r"offsets must be a 1-D int32 or int64 tensor"),
    ("an empty batch", torch.tensor([0]), None, r"offsets must hold at least two entries"),
    (
        "time backwards",
        GOOD,
        torch.tensor([1, 2, 10, 9, 11, 4]),
        r"timestamps must not decrease .* history 1",
    ),
    ("timestamps short", GOOD, torch.tensor([1, 2, 3]), r"timestamps must be a \(6,\) tensor"),
]


def tokens_for(offsets: torch.Tensor) -> int:
    """How many tokens the bad case's own values have: 6, or 7 for the history too long."""
    return 7 if len(offsets) == 2 else 6


@pytest.mark.parametrize(("what", "offsets", "times", "match"), BAD_BATCHES, ids=[c[0] for c in BAD_BATCHES])
def test_the_stack_and_a_layer_name_the_bad_batch(what, offsets, times, match) -> None:
    n = tokens_for(offsets)
    x = torch.randn(n, DIM)
    for module in (HSTU(DIM, 2, 2, MAX_LEN), HSTULayer(DIM, 2, MAX_LEN)):
        with pytest.raises((ValueError, TypeError), match=match):
            module(x, offsets, times)


@pytest.mark.parametrize(("what", "offsets", "times", "match"), BAD_BATCHES, ids=[c[0] for c in BAD_BATCHES])
def test_the_attention_names_the_bad_batch(what, offsets, times, match) -> None:
    n = tokens_for(offsets)
    q, k, v = torch.randn(n, 2, 4), torch.randn(n, 2, 4), torch.randn(n, 2, 3)
    layer = HSTULayer(DIM, 2, MAX_LEN)
    with pytest.raises((ValueError, TypeError), match=match):
        hstu_attention(q, k, v, offsets, MAX_LEN, layer.bias, times)


@pytest.mark.parametrize(("what", "offsets", "times", "match"), BAD_BATCHES, ids=[c[0] for c in BAD_BATCHES])
def test_the_ranker_names_the_bad_batch(what, offsets, times, match) -> None:
    n = tokens_for(offsets)
    cfg = HSTUConfig((TableConfig("item", 20),), dim=DIM, num_layers=1, heads=2, max_len=MAX_LEN)
    tokens = JaggedBatch(("item",), torch.arange(n) % 20, torch.ones(n, dtype=torch.int64), n)
    with pytest.raises((ValueError, TypeError), match=match):
        HSTURanker(cfg)(tokens, offsets, torch.zeros(n, dtype=torch.int64), times)


#: A SequenceBatch's offsets say how many events it has (its tensors are checked against them,
#: below) and it has no maximum length: the other bad batches.
OWN = [c for c in BAD_BATCHES if c[0] not in ("not ending at the values", "too long")]


@pytest.mark.parametrize(("what", "offsets", "times", "match"), OWN, ids=[c[0] for c in OWN])
def test_a_sequence_batch_names_the_bad_batch(what, offsets, times, match) -> None:
    n = tokens_for(offsets)
    ts = TIMES if times is None else times
    with pytest.raises((ValueError, TypeError), match=match):
        item = torch.zeros(n, dtype=torch.int64)
        SequenceBatch(torch.arange(max(len(offsets) - 1, 0)), offsets, {"item": item}, ts, torch.zeros(n))


def test_a_sequence_batch_names_tensors_that_do_not_match_its_offsets() -> None:
    item, users = torch.zeros(6, dtype=torch.int64), torch.arange(3)
    with pytest.raises(ValueError, match=r"ids\['item'\] must be a \(5,\) tensor"):
        SequenceBatch(users, torch.tensor([0, 2, 4, 5]), {"item": item}, TIMES, torch.zeros(6))
    with pytest.raises(ValueError, match=r"users must be a \(3,\) tensor"):
        SequenceBatch(torch.arange(2), GOOD, {"item": item}, TIMES, torch.zeros(6))
    with pytest.raises(ValueError, match=r"labels must hold 0\. or 1\. .*got 2\.0"):
        SequenceBatch(users, GOOD, {"item": item}, TIMES, torch.full((6,), 2.0))
    with pytest.raises(ValueError, match=r"ids\['item'\] must hold integer ids >= 0, got -1"):
        SequenceBatch(users, GOOD, {"item": item - 1}, TIMES, torch.zeros(6))


def test_a_batch_without_events_is_named_where_it_is_looked_up() -> None:
    b = SequenceBatch(torch.arange(2), torch.tensor([0, 0, 0]), {"item": torch.zeros(0, dtype=torch.int64)},
                      torch.zeros(0, dtype=torch.int64), torch.zeros(0))  # fmt: skip
    with pytest.raises(ValueError, match="tokens: the batch holds no events"):
        b.tokens()
    out = HSTU(DIM, 1, 2, MAX_LEN)(torch.zeros(0, DIM), b.offsets, b.timestamps)  # the stack: nothing to do
    assert out.shape == (0, DIM)


def test_heads_that_do_not_divide_the_dimension_are_named() -> None:
    for make in (lambda: HSTU(DIM, 1, 3, MAX_LEN), lambda: HSTULayer(DIM, 3, MAX_LEN),
                 lambda: HSTUConfig((TableConfig("item", 5),), dim=DIM, heads=3),
                 lambda: hstu_preset("hstu_small").replace(heads=7)):  # fmt: skip
        with pytest.raises(ValueError, match=r"heads must divide dim \(\d+\), got heads=\d"):
            make()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_layers": 0}, ValueError, r"num_layers must be an int (>= 1|in \[1, \d+\]), got 0"),
        ({"max_len": 0}, ValueError, r"max_len must be an int (>= 1|in \[1, \d+\]), got 0"),
        ({"dim": 2.5}, TypeError, "dim must be an int"),
        ({"heads": 0}, ValueError, "heads must be an int >= 1"),
    ],
)
def test_a_stack_and_a_config_name_their_bad_sizes(kwargs, error, match) -> None:
    args = {"dim": DIM, "num_layers": 1, "heads": 2, "max_len": MAX_LEN} | kwargs
    with pytest.raises(error, match=match):
        HSTU(**args)
    with pytest.raises(error, match=match):
        HSTUConfig((TableConfig("item", 5),), **args)


def test_the_ranker_names_the_rest_of_its_input() -> None:
    cfg = HSTUConfig((TableConfig("item", 20),), dim=DIM, num_layers=1, heads=2, max_len=MAX_LEN)
    model = HSTURanker(cfg)
    tokens = JaggedBatch(("item",), torch.arange(6), torch.ones(6, dtype=torch.int64), 6)
    actions = torch.zeros(6, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"tokens must be a JaggedBatch with keys \['item'\]"):
        model(JaggedBatch(("artist",), torch.arange(6), torch.ones(6, dtype=torch.int64), 6), GOOD, actions)
    with pytest.raises(ValueError, match=r"actions must index"):
        model(tokens, GOOD, actions + 5)
    with pytest.raises(ValueError, match=r"item"):  # an id past the table's rows
        model(
            JaggedBatch(("item",), torch.arange(6) + 18, torch.ones(6, dtype=torch.int64), 6), GOOD, actions
        )
    with pytest.raises(TypeError, match="config must be an HSTUConfig"):
        HSTURanker("hstu_small")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("lengths", "error", "match"),
    [
        ([10, 5000], ValueError, r"lengths\[1\] must be an int in \[0, 4096\], got 5000"),
        ([], ValueError, "lengths must hold at least one history with events"),
        ([0, 0], ValueError, "lengths must hold at least one history with events"),
        ([3, -1], ValueError, r"lengths\[1\]"),
        ([3, 2.5], TypeError, r"lengths\[1\] must be an int"),
        (7, TypeError, "lengths must be a sequence of ints"),
    ],
)
def test_the_step_model_names_bad_lengths(lengths, error, match) -> None:
    cfg = hstu_preset("dlrmv4")
    with pytest.raises(error, match=match):
        hstu_step(cfg, "dgx_h100", lengths)


def test_the_step_model_names_its_other_arguments() -> None:
    cfg = hstu_preset("dlrmv4")
    with pytest.raises(TypeError, match="config must be an HSTUConfig"):
        hstu_step("dlrmv4", "dgx_h100", [10])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dtype must be one of"):
        hstu_step(cfg, "dgx_h100", [10], dtype="fp12")
    with pytest.raises(ValueError, match="gpus must be an int in"):
        hstu_step(cfg, "dgx_h100", [10], gpus=10_000)


def test_the_listening_log_names_its_bad_arguments() -> None:
    with pytest.raises(ValueError, match="mean_length must be an int >= 30"):
        ListeningConfig(median_length=30, mean_length=10)
    with pytest.raises(ValueError, match="albums must be an int >= 50"):
        ListeningConfig(albums=10, artists=50)
    with pytest.raises(TypeError, match="config must be a ListeningConfig"):
        SyntheticListening("small", 4)  # type: ignore[arg-type]
    log = SyntheticListening(ListeningConfig(users=100, items=500, albums=50, artists=10, tastes=2), 4)
    with pytest.raises(ValueError, match="batch_size"):
        SyntheticListening(log.config, 0)
    with pytest.raises(ValueError, match=r"state\['seed'\] is 5"):
        log.load_state_dict({"kind": "synthetic_listening", "position": 3, "seed": 5})
    assert log.position == 0  # a refused state changes nothing


@pytest.mark.parametrize("reader", ["movielens", "yambda"])
def test_a_real_data_path_that_is_missing_is_a_value_error_naming_it(tmp_path: Path, reader) -> None:
    read, histories, url = (
        (read_movielens_ratings, MovieLensHistories, "grouplens.org")
        if reader == "movielens"
        else (read_yambda_events, YambdaHistories, "huggingface.co/datasets/yandex/yambda")
    )
    for call in (lambda: read(tmp_path / "absent"), lambda: histories(tmp_path / "absent", 4)):
        with pytest.raises(ValueError, match=f"path: .*absent.*{url}"):
            call()


def test_a_real_data_file_in_the_wrong_format_is_a_value_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "ratings.dat").write_text("1,2,3,4\n")
    with pytest.raises(ValueError, match="path: line 1 .* is not UserID::MovieID::Rating::Timestamp"):
        MovieLensHistories(tmp_path, 4)
    pytest.importorskip("pyarrow")
    (tmp_path / "multi_event.parquet").write_text("uid,item_id\n")
    with pytest.raises(ValueError, match="path: .* is not a parquet file"):
        YambdaHistories(tmp_path, 4)
