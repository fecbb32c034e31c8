"""The modeled HSTU step: its FLOPs counted by hand, attention by the sum of squared lengths,
padding's cost, the causal half, and the checks at the door."""

from __future__ import annotations

import statistics

import pytest

from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.config.hstu import HSTUConfig, hstu_preset
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.hstu import COMPONENTS, attention_products, hstu_step, lognormal_lengths, model_flops

TABLES = (TableConfig("item", 1_000_000), TableConfig("artist", 10_000))
CFG = HSTUConfig(TABLES, dim=256, num_layers=4, heads=2, max_len=2048, top_mlp=(128,))


def test_attention_products_count_pairs() -> None:
    assert attention_products([3]) == 6  # (0,0) (1,0) (1,1) (2,0) (2,1) (2,2)
    assert attention_products([3], causal=False) == 9
    assert attention_products([0, 1, 4]) == 0 + 1 + 10


def test_model_flops_by_hand() -> None:
    lengths = [5, 2]
    t, h, d = 7, 2, 128
    per_token = 2 * 256 * (4 * h * d) + 2 * h * d * 256  # U V Q K projection and the output projection
    attention = 2 * (15 + 3) * h * (d + d)  # Q K^T and A V over the causal pairs
    mlp = 2 * (256 * 128 + 128 * 1)
    assert model_flops(CFG, lengths) == 3 * (4 * (t * per_token + attention) + t * mlp)


def test_attention_follows_the_sum_of_squares_not_the_tokens() -> None:
    """The same tokens as few long histories cost more attention than as many short ones."""
    short = hstu_step(CFG, "dgx_h100", [100] * 100)
    long = hstu_step(CFG, "dgx_h100", [1000] * 10)
    assert short.tokens == long.tokens
    assert short.seconds["projections"] == pytest.approx(long.seconds["projections"])
    assert attention_products([1000] * 10) / attention_products([100] * 100) == pytest.approx(1001 / 101)
    # ten times the products; short histories also run their small products less efficiently
    assert 3 * short.seconds["attention"] < long.seconds["attention"] < 10 * short.seconds["attention"]


def test_padding_costs_what_the_longest_history_makes_it() -> None:
    lengths = lognormal_lengths(64, 54, 96, 512)
    jagged = hstu_step(hstu_preset("hstu_small"), "dgx_h100", lengths)
    padded = hstu_step(hstu_preset("hstu_small"), "dgx_h100", lengths, padded=True)
    assert padded.model_flops == jagged.model_flops  # the model's work is the same
    assert padded.seconds["attention"] > 10 * jagged.seconds["attention"]
    assert padded.step_seconds > jagged.step_seconds
    equal = [200] * 64  # nothing to pad: only the causal half differs
    ratio = (
        hstu_step(CFG, "dgx_h100", equal, padded=True).seconds["attention"]
        / hstu_step(CFG, "dgx_h100", equal).seconds["attention"]
    )
    assert ratio == pytest.approx(2 * 200 / 201)


def test_a_fused_attention_kernel_saves_the_score_traffic() -> None:
    """A fused kernel keeps the weights on chip and skips the masked half; an unfused one
    (``fused_attention=False``: this package's bucketed kernel) computes the full squares and
    launches its operators per bucket; everything else is the same."""
    lengths = [1024] * 8  # a bucket of its own length: nothing padded
    fused = hstu_step(CFG, "dgx_h100", lengths)
    plain = hstu_step(CFG, "dgx_h100", lengths, fused_attention=False)
    assert plain.seconds["pointwise"] > fused.seconds["pointwise"]
    assert plain.seconds["attention"] / fused.seconds["attention"] == pytest.approx(2 * 1024 / 1025)
    assert plain.seconds["overhead"] > fused.seconds["overhead"]
    changed = ("pointwise", "attention", "overhead")
    assert {k: v for k, v in plain.seconds.items() if k not in changed} == {
        k: v for k, v in fused.seconds.items() if k not in changed
    }


def test_one_device_sends_nothing_and_many_do() -> None:
    one = hstu_step(CFG, "dgx_h100", [300] * 16)
    many = hstu_step(CFG, "dgx_h100", [300] * 16, gpus=8, nodes=2)
    assert one.seconds["all_to_all"] == one.seconds["all_reduce"] == 0
    assert many.seconds["all_to_all"] > 0 and many.seconds["all_reduce"] > 0
    assert list(one.seconds) == list(COMPONENTS)
    assert 0 < many.mfu() < 1 and many.tokens_per_s == pytest.approx(16 * 4800 / many.step_seconds)
    assert sum(r["share"] for r in many.rows()) == pytest.approx(1.0)  # type: ignore[misc]


def test_lognormal_lengths_have_the_median_and_mean() -> None:
    lengths = lognormal_lengths(20_000, 2_700, 4_800, 10**9)
    assert statistics.median(lengths) == pytest.approx(2_700, rel=0.01)
    assert statistics.mean(lengths) == pytest.approx(4_800, rel=0.02)
    assert max(lognormal_lengths(1000, 54, 96, 512)) == 512


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"lengths": []}, ValueError, "lengths"),
        ({"lengths": [0, 0]}, ValueError, "lengths"),
        ({"lengths": [5000]}, ValueError, "lengths"),
        ({"gpus": 9}, ValueError, "gpus"),
        ({"dtype": "fp8"}, ValueError, "dtype"),
        ({"hw": "tpu"}, ValueError, "tpu"),
        ({"config": "hstu_small"}, TypeError, "config"),
    ],
)
def test_bad_input_is_named(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    args: dict[str, object] = {"config": CFG, "hw": "dgx_h100", "lengths": [10, 20], **kwargs}
    with pytest.raises(error, match=match):
        hstu_step(**args)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="median"):
        lognormal_lengths(10, 96, 54, 512)


def test_contextual_tables_cost_once_a_history() -> None:
    """DLRMv4's user and cross tables are looked up once a history, its item tables once an event:
    its embeddings cost what its event tables cost on the histories plus what its contextual
    tables cost as event tables on histories of one event (no last-level cache, which the tables
    of one device share)."""
    cfg = hstu_preset("dlrmv4")
    hw = hardware("dgx_h100").replace(llc_bytes=0.0)
    lengths = [1000] * 4
    every = hstu_step(cfg.replace(context=()), hw, lengths, gpus=8)
    once = hstu_step(cfg, hw, lengths, gpus=8).seconds["embeddings"]
    context = tuple(t for t in cfg.tables if t.name in cfg.context)
    events = hstu_step(cfg.replace(tables=cfg.event_tables, context=()), hw, lengths, gpus=8)
    heads = hstu_step(cfg.replace(tables=context, context=()), hw, [1] * 4, gpus=8)
    assert once == pytest.approx(events.seconds["embeddings"] + heads.seconds["embeddings"])
    assert once < 0.3 * every.seconds["embeddings"]  # 3 of 11 tables an event
    assert hstu_step(cfg, hw, lengths, gpus=8).seconds["all_to_all"] < every.seconds["all_to_all"]


@pytest.mark.parametrize(
    ("hw", "dtype"), [("dgx_h100", "bf16"), ("dgx_h100", "fp32"), ("cpu_cluster", "fp32")]
)
def test_embeddings_are_priced_as_a_dlrms(hw: str, dtype: str) -> None:
    """On one device, an HSTU step's tables cost what DLRM's model prices for the same tables with a
    bag of one row each per event (its forward and backward embedding terms, row-wise Adagrad)."""
    tables = (TableConfig("item", 1_000_000), TableConfig("artist", 50_000))
    lengths = [300, 120, 40, 7]
    hstu = HSTUConfig(tables, dim=128, num_layers=1, heads=2, top_mlp=(64,))
    step = hstu_step(hstu, hw, lengths, dtype=dtype)
    dlrm = DLRMConfig(num_dense=1, tables=tables, embedding_dim=128, bottom_mlp=(128,), top_mlp=(1,))
    bags = estimate(dlrm, hw, batch_size=sum(lengths), dtype=dtype, sparse_optimizer="rowwise_adagrad")
    parts = bags.breakdown()
    assert step.seconds["embeddings"] == pytest.approx(
        parts["embedding_forward"] + parts["embedding_backward"]
    )


def test_candidates_attend_to_the_history_and_themselves() -> None:
    # 2 history events, 3 candidates: the history's 3 causal pairs, 3 x 2 to the history, 3 to themselves
    assert attention_products([5], num_targets=3) == 3 + 6 + 3
    assert attention_products([4], num_targets=0) == attention_products([4])
    assert attention_products([2], num_targets=9) == 2  # all candidates: each sees itself
    fewer = hstu_step(CFG, "dgx_h100", [1000] * 4, num_targets=500)
    assert fewer.seconds["attention"] < hstu_step(CFG, "dgx_h100", [1000] * 4).seconds["attention"]


def test_a_forward_pass_is_a_third_of_the_compute_and_sends_no_gradients() -> None:
    fwd = hstu_step(CFG, "dgx_h100", [300] * 16, gpus=8, backward=False)
    train = hstu_step(CFG, "dgx_h100", [300] * 16, gpus=8)
    assert fwd.model_flops == pytest.approx(train.model_flops / 3)
    assert fwd.seconds["projections"] == pytest.approx(train.seconds["projections"] / 3)
    assert fwd.seconds["all_reduce"] == fwd.seconds["optimizer"] == 0 < fwd.seconds["all_to_all"]
    assert not fwd.backward and 0 < fwd.mfu() < 1


def test_narrow_tables_cost_less_to_gather() -> None:
    wide = hstu_step(CFG, "dgx_h100", [300] * 16)
    narrow = hstu_step(CFG, "dgx_h100", [300] * 16, embedding_dim=64)
    # a quarter of the bytes a row, gathered at a lower share of the bandwidth (short rows are), and
    # the work of a lookup that is not its row's (its id, the grouping sort, the row's Adagrad state)
    assert wide.seconds["embeddings"] / 4 < narrow.seconds["embeddings"] < 0.6 * wide.seconds["embeddings"]
    assert narrow.seconds["projections"] == wide.seconds["projections"]


def test_zipf_lengths_clamp_the_tail_at_the_longest() -> None:
    from recnotebooks.perf.hstu import zipf_lengths

    lengths = zipf_lengths(1000, 1.2, 4096)
    assert lengths == sorted(lengths) and lengths[0] == 1 and lengths[-1] == 4096
    # P(k >= 4096) = 1 - sum_{k<4096} k^-1.2 / zeta(1.2) ~ 0.17: the clamped share
    assert 0.15 < sum(n == 4096 for n in lengths) / 1000 < 0.19
    assert statistics.median(lengths) < 30  # most histories are short
    with pytest.raises(ValueError, match="alpha"):
        zipf_lengths(10, 1.0, 100)


def test_the_causal_mask_saves_just_under_half_and_padding_wastes_more() -> None:
    from recnotebooks.perf.hstu import causal_saving, padding_waste

    assert causal_saving([4]) == pytest.approx(1 - 10 / 16)  # 1/2 - 1/8
    assert causal_saving([1]) == 0.0
    assert causal_saving([4096]) == pytest.approx(0.5 - 1 / 8192)
    tokens, attention = padding_waste([1, 3])
    assert tokens == pytest.approx(1 - 4 / 6) and attention == pytest.approx(1 - (1 + 6) / 18)
    lengths = lognormal_lengths(256, 2_700, 4_800, 4096)  # Yambda at DLRMv4's cap
    tokens, attention = padding_waste(lengths)
    assert 0.2 < tokens < attention < 1
    with pytest.raises(ValueError, match="lengths"):
        causal_saving([0])
