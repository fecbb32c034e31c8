"""HSTURanker: tokens from the listening log, the causal contract (a position never sees its
own action or a later event), equality with its parts composed by hand, a short training run
that learns, and the checks at the door."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from recnotebooks.config import TableConfig
from recnotebooks.config.hstu import ACTIONS, HSTUConfig, hstu_preset
from recnotebooks.data.listening import TABLES, ListeningConfig, SyntheticListening
from recnotebooks.metrics import auc
from recnotebooks.nn.generative import HSTURanker
from recnotebooks.nn.optim import make_dense_optimizer, make_sparse_optimizer

LOG = ListeningConfig(users=2_000, items=5_000, albums=500, artists=100, tastes=5, median_length=20,
                      mean_length=36, max_length=64)  # fmt: skip
CFG = HSTUConfig(tuple(TableConfig(n, r) for n, r in zip(TABLES, (5_000, 500, 100), strict=True)), dim=32,
                 num_layers=2, heads=2, max_len=64, top_mlp=(32,))  # fmt: skip


def test_logits_equal_the_parts_composed_by_hand() -> None:
    model = HSTURanker(CFG, seed=3)
    b = SyntheticListening(LOG, 8).batch(0)
    x = (
        model.embeddings.weight[torch.cat([b.ids["item"], b.ids["album"] + 5_000, b.ids["artist"] + 5_500])]
        .view(3, -1, 32)
        .sum(0)
    )
    x = x + model.actions.weight[b.previous_actions()]
    expected = model.top(model.hstu(x, b.offsets, b.timestamps)).squeeze(-1)
    torch.testing.assert_close(model(b.tokens(), b.offsets, b.previous_actions(), b.timestamps), expected)


def test_previous_actions_shift_the_labels_within_a_history() -> None:
    b = SyntheticListening(LOG, 6).batch(1)
    a = b.previous_actions()
    for s, e in zip(b.offsets[:-1].tolist(), b.offsets[1:].tolist(), strict=True):
        assert a[s] == ACTIONS.index("none")
        assert a[s + 1 : e].tolist() == (1 + b.labels[s : e - 1].long()).tolist()


def test_a_position_never_sees_its_own_action_or_the_future() -> None:
    model = HSTURanker(CFG, seed=0).eval()
    b = SyntheticListening(LOG, 4).batch(2)
    t = int(b.offsets[1]) + 2  # the third event of the second history
    logits = model(b.tokens(), b.offsets, b.previous_actions(), b.timestamps)
    flipped = b.labels.clone()
    flipped[t] = 1 - flipped[t]
    b = b.replace(labels=flipped)
    again = model(b.tokens(), b.offsets, b.previous_actions(), b.timestamps)
    torch.testing.assert_close(again[: t + 1], logits[: t + 1])  # its own label changes nothing up to t
    assert not torch.allclose(again[t + 1], logits[t + 1])  # the next event reads it


def test_a_short_training_run_learns() -> None:
    """Row-wise Adagrad on the tables, Adam on the rest (MLPerf's DLRMv4 pairing): the held-out
    AUC after 60 steps is above chance and above the untrained model's."""
    torch.manual_seed(0)
    model = HSTURanker(CFG, seed=0)
    train, held = SyntheticListening(LOG, 32, "train"), SyntheticListening(LOG, 64, "eval")
    sparse = make_sparse_optimizer("rowwise_adagrad", model.embeddings, lr=0.05)
    rest = [p for n, p in model.named_parameters() if not n.startswith("embeddings")]
    dense = make_dense_optimizer("adam", rest, lr=2e-3)

    def held_out_auc() -> float:
        with torch.no_grad():
            bs = [held.batch(i) for i in range(2)]
            scores = torch.cat([model(b.tokens(), b.offsets, b.previous_actions(), b.timestamps) for b in bs])
            return auc(scores, torch.cat([b.labels for b in bs]))

    before = held_out_auc()
    for step in range(60):
        b = train.batch(step)
        logits = model(b.tokens(), b.offsets, b.previous_actions(), b.timestamps)
        loss = F.binary_cross_entropy_with_logits(logits, b.labels)
        dense.zero_grad()
        loss.backward()
        dense.step()
        sparse.step()
    after = held_out_auc()
    assert after > 0.6 and after > before + 0.05, (before, after)


def test_the_small_preset_matches_the_logs_catalogue() -> None:
    cfg, log = hstu_preset("hstu_small"), ListeningConfig()
    assert [t.num_rows for t in cfg.tables] == [log.items, log.albums, log.artists]
    assert [t.name for t in cfg.tables] == list(TABLES) and cfg.max_len == log.max_length


def test_parameter_counts_match_the_module() -> None:
    model = HSTURanker(CFG)
    dense = sum(p.numel() for n, p in model.named_parameters() if not n.startswith(("embeddings", "actions")))
    assert dense == CFG.dense_parameters
    assert model.embeddings.weight.numel() + model.actions.weight.numel() == CFG.embedding_parameters


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"dim": 30, "heads": 4}, ValueError, "heads must divide dim"),
        ({"tables": ()}, TypeError, "tables"),
        ({"tables": (TableConfig("a", 5), TableConfig("a", 6))}, ValueError, "unique"),
        ({"max_len": 0}, ValueError, "max_len"),
        ({"top_mlp": "64-x"}, ValueError, "top_mlp"),
        ({"num_layers": 0}, ValueError, "num_layers"),
    ],
)
def test_bad_config_is_named(change: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        CFG.replace(**change)


def test_bad_inputs_are_named() -> None:
    model = HSTURanker(CFG)
    b = SyntheticListening(LOG, 2).batch(0)
    with pytest.raises(ValueError, match="actions must be a"):
        model(b.tokens(), b.offsets, b.previous_actions()[:-1], b.timestamps)
    with pytest.raises(ValueError, match="actions must index"):
        model(b.tokens(), b.offsets, b.previous_actions() + 3, b.timestamps)
    with pytest.raises(ValueError, match="tokens must be a JaggedBatch with keys"):
        model(b.ids["item"], b.offsets, b.previous_actions(), b.timestamps)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="HSTUConfig"):
        HSTURanker("hstu_small")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="hstu_small"):
        hstu_preset("hstu_large")


def test_dlrmv4_is_mlperfs_model_as_its_reference_reads() -> None:
    """293 M rows of dim 512 (150 B parameters, 600 GB in fp32), 4 heads of 128, histories to 4,096."""
    cfg = hstu_preset("dlrmv4")
    assert len(cfg.tables) == 11 and sum(t.num_rows for t in cfg.tables) == 293_051_712
    assert cfg.embedding_parameters == pytest.approx(150e9, rel=0.001)
    assert 4 * cfg.embedding_parameters / 1e9 == pytest.approx(600, rel=0.001)
    assert (cfg.dim, cfg.heads, cfg.head_dims, cfg.max_len, cfg.num_layers) == (512, 4, (128, 128), 4096, 3)


def test_context_tables_are_looked_up_once_a_history() -> None:
    cfg = hstu_preset("dlrmv4")
    assert [t.name for t in cfg.event_tables] == ["item_id", "artist_id", "album_id"]
    assert len(cfg.context) == 8 and "uid" in cfg.context
    with pytest.raises(ValueError, match="context must name tables"):
        CFG.replace(context=("user",))
    with pytest.raises(ValueError, match="at least one table"):
        CFG.replace(context=TABLES)
    with pytest.raises(ValueError, match="config.context must be empty"):
        HSTURanker(CFG.replace(context=("album",)))
