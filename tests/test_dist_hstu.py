"""Hybrid-parallel HSTU on real gloo ranks (127.0.0.1): HSTU's tables sharded row- and table-wise
(one data-parallel, one column-wise) by the engine, the HSTU stack data parallel, each rank a contiguous block
of every global batch's histories. On 2 and 4 ranks the losses, tables and dense weights after a
few steps of row-wise Adagrad + Adam (and Adagrad) equal a plain single-process HSTURanker's
trained in a plain loop on the same global batches: batches with length-1 histories, histories
at the maximum length, uneven blocks (10 histories on 4 ranks) and a rank holding 4 of 75
events. Bad input is refused before any process starts."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from recnotebooks.config import TableConfig
from recnotebooks.config.hstu import HSTUConfig
from recnotebooks.data.listening import TABLES, USER_TABLE, ListeningConfig, SyntheticListening
from recnotebooks.distributed import ShardedEmbeddingBagCollection, history_blocks
from recnotebooks.distributed.hstu_training import HSTUTrainSettings, local_histories, train_hstu_local
from recnotebooks.metrics import click_metrics
from recnotebooks.nn.generative import HSTURanker
from recnotebooks.nn.optim import make_dense_optimizer, make_sparse_optimizer
from recnotebooks.plan import column_wise, combine, data_parallel, row_wise, table_wise

LOG = ListeningConfig(users=200, items=300, albums=60, artists=12, tastes=3, median_length=5, mean_length=9,
                      max_length=24)  # fmt: skip
CFG = HSTUConfig(tuple(TableConfig(n, r) for n, r in zip(TABLES, (300, 60, 12), strict=True)), dim=16,
                 num_layers=2, heads=2, max_len=24, top_mlp=(16,))  # fmt: skip
#: MLPerf's DLRMv4 shape: the user as a contextual token, looked up once a history
LOG_CTX = dataclasses.replace(LOG, user_context=True)
CFG_CTX = CFG.replace(tables=(*CFG.tables, TableConfig(USER_TABLE, 200)), context=(USER_TABLE,))
BATCH, STEPS, SEED = 10, 3, 4
PLAN_2 = combine(row_wise(["item"], 2), table_wise(["album", USER_TABLE], 2, ranks=[1, 0]),
                 data_parallel(["artist"], 2))  # fmt: skip
PLAN_4 = combine(
    row_wise(["item"], 4), column_wise(["album"], 4, ranks=[1, 2]), table_wise(["artist"], 4, ranks=3)
)


def reference(config: HSTUConfig, log: ListeningConfig, settings: HSTUTrainSettings) -> dict[str, Any]:
    """The plain single-process ranker on the same global batches: the mean loss over each batch's
    events, the same optimizers (and clipping), nothing of the distributed code."""
    model = HSTURanker(config, seed=settings.seed)
    sparse = make_sparse_optimizer(settings.sparse_optimizer, model.embeddings, settings.sparse_lr)
    rest = [p for n, p in model.named_parameters() if not n.startswith("embeddings")]
    dense = make_dense_optimizer(settings.dense_optimizer, rest, settings.dense_lr)
    data, losses, keys = SyntheticListening(log, settings.batch_size), [], model.embeddings.keys
    for step in range(settings.steps):
        b = data.batch(step)
        logits = model(b.tokens(keys), b.offsets, b.previous_actions(), b.timestamps)
        loss = F.binary_cross_entropy_with_logits(logits, b.labels)
        loss.backward()
        if settings.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(rest, settings.clip_grad_norm)
        dense.step()
        dense.zero_grad()
        sparse.step()
        losses.append(float(loss.detach()))
    tables = {t.name: model.embeddings.table_weight(t.name).detach() for t in config.tables}
    held = SyntheticListening(log, settings.batch_size, "eval")
    with torch.no_grad():
        bs = [held.batch(i) for i in range(settings.eval_batches)]
        scores = [model(b.tokens(keys), b.offsets, b.previous_actions(), b.timestamps) for b in bs]
    metrics = click_metrics(torch.sigmoid(torch.cat(scores)), torch.cat([b.labels for b in bs])) if bs else {}
    return {"losses": losses, "tables": tables, "state": model.state_dict(), "metrics": metrics}


def check_equal(got: Any, ref: dict[str, Any]) -> None:
    assert got.losses == pytest.approx(ref["losses"], rel=1e-5)
    for name, table in ref["tables"].items():
        torch.testing.assert_close(got.tables[name], table, atol=1e-5, rtol=1e-5)
    assert got.dense  # every replicated parameter, by the ranker's names
    for name, value in got.dense.items():
        torch.testing.assert_close(value, ref["state"][name], atol=1e-5, rtol=1e-5)
    assert set(got.dense) == {k for k in ref["state"] if not k.startswith("embeddings")}


def test_the_batches_hold_the_cases_worth_testing() -> None:
    """Length-1 histories, histories at the maximum length, and on 4 ranks a rank with 4 events."""
    batches = [SyntheticListening(LOG, BATCH).batch(i) for i in range(STEPS)]
    lengths = torch.cat([b.lengths for b in batches])
    assert int(lengths.min()) == 1 and int(lengths.max()) == LOG.max_length
    off = batches[2].offsets.tolist()
    assert [off[hi] - off[lo] for lo, hi in history_blocks(BATCH, 4)] == [31, 34, 6, 4]


def test_two_ranks_equal_one_process() -> None:
    """DLRMv4's shape and optimizers: a contextual user token, row-wise Adagrad on the tables, Adam
    on the rest, the dense gradients clipped (to a norm they exceed, so the clipping acts)."""
    settings = HSTUTrainSettings(
        STEPS, BATCH, seed=SEED, keep_weights=True, eval_batches=2, clip_grad_norm=0.05
    )
    got = train_hstu_local(CFG_CTX, LOG_CTX, PLAN_2, 2, settings, timeout_s=120)
    ref = reference(CFG_CTX, LOG_CTX, settings)
    check_equal(got, ref)
    assert float(got.dense["context_weight"].abs().sum()) > 0  # the contextual map is trained
    for k in ("auc", "logloss", "ne"):  # held-out, every rank's block scored, in order
        assert getattr(got, k) == pytest.approx(ref["metrics"][k], abs=1e-6)
    assert got.rank_events[1] == [13, 35] and got.events == [102, 48, 75]
    components = {r["component"] for r in got.comm}  # sequence embeddings all-to-all'd, dense all-reduced
    assert components == {"all_to_all", "all_reduce"}
    # the all-to-all of sequence embeddings, backward (gradients only): each event's fp32 columns
    # held on the other rank: rank 0 reads rank 1's half of the item rows and its album table,
    # rank 1 rank 0's half and its user table (32 columns each; the user's bag is empty but on a
    # history's first event, its zero row travels all the same); the artist replica moves none
    sent = [sum(r["bytes_sent"] for r in got.comm if r["rank"] == k and r["component"] == "all_to_all"
                and r["direction"] == "backward") for k in (0, 1)]  # fmt: skip
    mine = [sum(e[k] for e in got.rank_events) for k in (0, 1)]
    assert sent == [mine[0] * 32 * 4, mine[1] * 32 * 4]


def test_four_ranks_equal_one_process() -> None:
    """Exact Adagrad on the tables (row-wise Adagrad keeps an accumulator per column-wise shard)."""
    settings = HSTUTrainSettings(STEPS, BATCH, seed=SEED, sparse_optimizer="adagrad",
                                 dense_optimizer="adagrad", dense_lr=0.02, keep_weights=True)  # fmt: skip
    got = train_hstu_local(CFG, LOG, PLAN_4, 4, settings, timeout_s=120)
    check_equal(got, reference(CFG, LOG, settings))
    assert got.rank_events[2] == [31, 34, 6, 4]


def test_history_blocks_and_local_histories() -> None:
    assert history_blocks(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert history_blocks(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    b = SyntheticListening(LOG, BATCH).batch(0)
    parts = [local_histories(b, lo, hi) for lo, hi in history_blocks(BATCH, 3)]
    assert torch.equal(torch.cat([p.labels for p in parts]), b.labels)
    assert torch.equal(torch.cat([p.previous_actions() for p in parts]), b.previous_actions())
    assert torch.equal(torch.cat([p.lengths for p in parts]), b.lengths)
    with pytest.raises(ValueError, match="num_histories must be at least world_size=4"):
        history_blocks(3, 4)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"batch_size": 3}, "batch_size must be at least world_size=4"),
        ({"plan": PLAN_2}, "plan.world_size must equal world_size=4"),
        ({"config": CFG.replace(tables=CFG.tables[::2])}, "config.tables"),
        ({"config": CFG.replace(tables=(TableConfig("item", 30), *CFG.tables[1:]))}, "at least"),
        ({"config": CFG.replace(max_len=16)}, "config.max_len must be at least listening.max_length=24"),
        ({"config": CFG_CTX}, "config.tables must be the listening log's"),  # a log without its context
        ({"log": LOG_CTX, "config": CFG_CTX.replace(context=())}, "config.context must be"),
        ({"world_size": 0}, "world_size"),
    ],
)
def test_bad_input_is_refused_before_any_process_starts(change: dict[str, Any], match: str) -> None:
    args = {"config": CFG, "log": LOG, "plan": PLAN_4, "world_size": 4, "batch_size": BATCH} | change
    settings = HSTUTrainSettings(1, args.pop("batch_size"))
    with pytest.raises(ValueError, match=match):
        train_hstu_local(args["config"], args["log"], args["plan"], args["world_size"], settings, timeout_s=5)


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="dense_optimizer"):
        HSTUTrainSettings(1, dense_optimizer="lamb")
    with pytest.raises(ValueError, match="batch_size"):
        HSTUTrainSettings(1, batch_size=0)


def test_the_engine_refuses_batch_sizes_that_are_not_every_ranks() -> None:
    """Uneven splits: one size per rank, this rank's its own batch's (checked before any collective)."""
    ebc = ShardedEmbeddingBagCollection(CFG_CTX.tables, CFG.dim, PLAN_2, 0, 2)
    tokens = SyntheticListening(LOG_CTX, 2).batch(0).tokens(ebc.keys)
    n = tokens.batch_size
    with pytest.raises(ValueError, match=r"batch_sizes\[0\] must be this rank's batch.batch_size"):
        ebc.start(tokens, [n + 1, 3])
    with pytest.raises(ValueError, match="batch_sizes"):
        ebc.start(tokens, [n])
