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
from recnotebooks.data.sequences import SequenceBatch
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


CTX_LOG = ListeningConfig(users=200, items=500, albums=50, artists=10, tastes=2, median_length=6,
                          mean_length=9, max_length=16, user_context=True)  # fmt: skip
CTX_CFG = HSTUConfig((TableConfig("user", 200), TableConfig("item", 500), TableConfig("artist", 10),
                      TableConfig("album", 50)), context=("user", "album"), dim=16, num_layers=2, heads=2,
                     max_len=16, top_mlp=(16,))  # fmt: skip


def _plain_context_logits(model: HSTURanker, b: SequenceBatch) -> torch.Tensor:
    """The ranker with contextual tokens, written plainly: for each history on its own, the
    event tokens summed from the tables' rows, then each context table's row of the history
    (``album`` taken from ``context``, not the events) through its own map, put ahead of them at
    time 0; the stack over that one sequence, its last ``n`` outputs through the top MLP."""
    w, keys = model.embeddings.weight, [t.name for t in CTX_CFG.tables]
    base = dict(
        zip(keys, [0, *torch.tensor([t.num_rows for t in CTX_CFG.tables]).cumsum(0).tolist()], strict=False)
    )
    out = []
    actions = b.previous_actions()
    for h, (s, e) in enumerate(zip(b.offsets[:-1].tolist(), b.offsets[1:].tolist(), strict=True)):
        if s == e:
            continue
        events = (
            sum(w[base[k] + b.ids[k][s:e]] for k in ("item", "artist")) + model.actions.weight[actions[s:e]]
        )
        ctx = [w[base[k] + b.context[k][h]] @ model.context_weight[i] + model.context_bias[i]
               for i, k in enumerate(CTX_CFG.context)]  # fmt: skip
        x = torch.cat([torch.stack(ctx), events])
        times = torch.cat([torch.zeros(len(ctx), dtype=torch.int64), b.timestamps[s:e]])
        y = model.hstu(x, torch.tensor([0, len(x)]), times)[len(ctx) :]
        out.append(model.top(y).squeeze(-1))
    return torch.cat(out)


def test_contextual_tokens_equal_a_plain_reference() -> None:
    """Context tables looked up once a history, mapped, prepended at time 0 and dropped from the
    output (the reference's ContextualPreprocessor) equal a loop over the histories; an empty
    history among them changes nothing; the gradients of the maps and the rows agree too."""
    model = HSTURanker(CTX_CFG, seed=1)
    log = SyntheticListening(CTX_LOG, 5)
    b = log.batch(0)
    album = torch.randint(50, (5,), generator=torch.Generator().manual_seed(0))
    b = b.replace(ids={k: v for k, v in b.ids.items() if k != "album"}, context={**b.context, "album": album})
    lengths = b.lengths.clone()
    lengths[2] = 0  # history 2 emptied: its events dropped
    keep = torch.repeat_interleave(torch.arange(5), b.lengths) != 2
    b = b.replace(offsets=torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]),
                  ids={k: v[keep] for k, v in b.ids.items()}, timestamps=b.timestamps[keep],
                  labels=b.labels[keep])  # fmt: skip
    got, labels = model.batch_logits(b)
    want = _plain_context_logits(model, b)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(labels, b.labels)
    grads = []
    for out in (got, want):
        model.zero_grad()
        model.embeddings.clear_gradients()
        (out * torch.linspace(-1, 1, len(out))).sum().backward(retain_graph=True)
        grads.append(model.context_weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)
    assert grads[0].abs().sum() > 0


def test_context_is_looked_up_once_a_history_and_changes_only_its_history() -> None:
    model = HSTURanker(CTX_CFG.replace(context=("user",), tables=CTX_CFG.tables[:3]), seed=0).eval()
    b = SyntheticListening(CTX_LOG, 4).batch(1)
    tokens = b.tokens(model.embeddings.keys)
    assert int(tokens.lengths.view(3, -1)[0].sum()) == 4  # one user lookup a history
    logits, _ = model.batch_logits(b)
    other = b.context["user"].clone()
    other[1] = (other[1] + 1) % 200
    again, _ = model.batch_logits(b.replace(context={"user": other}))
    s, e = b.offsets[1:3].tolist()
    torch.testing.assert_close(again[:s], logits[:s])
    torch.testing.assert_close(again[e:], logits[e:])
    assert not torch.allclose(again[s:e], logits[s:e])
    assert CTX_CFG.sequence_len == 18 and model.hstu.max_len == 17
    dense = sum(p.numel() for p in model.dense_parameters()) - model.actions.weight.numel()
    assert dense == model.config.dense_parameters


def test_a_batch_without_the_models_context_is_refused() -> None:
    model = HSTURanker(CTX_CFG.replace(context=("user",), tables=CTX_CFG.tables[:3]))
    b = SyntheticListening(LOG, 2).batch(0)
    with pytest.raises(ValueError, match="keys must name tables of this batch"):
        model.batch_logits(b)
    with pytest.raises(ValueError, match="one per history"):
        b.replace(context={"user": torch.zeros(3, dtype=torch.int64)})
    with pytest.raises(ValueError, match="one or the other"):
        b.replace(context={"item": torch.zeros(2, dtype=torch.int64)})
