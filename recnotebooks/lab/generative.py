"""Exercises of notebook 07 (generative recommenders: HSTU, MLPerf's DLRMv4)."""

from __future__ import annotations

import math

from recnotebooks.config.hstu import hstu_preset
from recnotebooks.config.model import state_floats_per_row
from recnotebooks.perf.hstu import attention_products, padding_waste
from recnotebooks.viz.hstu import history_lengths

from .core import AppSetting, app_result, exercise, number, number_exercise

#: 07.attention: the histories whose causal attention the learner counts.
ATTENTION_LENGTHS = (5, 3, 1)
#: 07.padding: a padded batch of this many Yambda-shaped histories, capped at DLRMv4's longest.
PADDING_HISTORIES, PADDING_LONGEST = 256, 4096
#: 07.shards: GB of each GPU's HBM left for the tables (the rest holds activations and dense state).
SHARD_GB = 50


number_exercise(
    "07.attention",
    f"""
    Three histories of {", ".join(map(str, ATTENTION_LENGTHS))} events, one head: how many query-key products
    does HSTU's causal attention compute for the whole batch?

    Under the causal mask, position i of a history attends to positions 0 .. i: i + 1 of them.

    A history of n events makes 1 + 2 + ... + n = n (n + 1) / 2 products; add the histories.

    recnotebooks.perf.hstu.attention_products(lengths) counts them; padded to the longest, each history
    would cost n x n of the longest's n.
    """,
    key=lambda: attention_products(ATTENTION_LENGTHS),
    what="the number of products",
    right="Right: each history costs n (n + 1) / 2, so the cost is set by the squares of the lengths.",
    wrong="Not that number: count n (n + 1) / 2 a history under the causal mask, and add them.",
)


def _padding_key() -> float:
    return padding_waste(history_lengths(PADDING_HISTORIES, 1.0, PADDING_LONGEST))[0]


@exercise(
    "07.padding",
    f"""
    A padded batch of {PADDING_HISTORIES} Yambda-shaped histories (the explorer's default: lengths 'Yambda',
    longest {PADDING_LONGEST}): what share of its tokens is padding? Answer with a fraction (0.25 for 25%),
    within 0.01.

    Padded, every history takes as many tokens as the batch's longest.

    history_lengths({PADDING_HISTORIES}, 1.0, {PADDING_LONGEST}) gives the lengths; the padded batch holds
    {PADDING_HISTORIES} x max(lengths) tokens.

    The explorer's bar 'padding in a padded batch' shows it; recnotebooks.perf.hstu.padding_waste(lengths)
    computes it (its first share).
    """,
    answer=_padding_key,
)
def _padding(answer: object) -> tuple[bool, str]:
    share = number(answer, "the share of padding")
    if share > 1 and share <= 100:
        return False, "Answer with a fraction of the tokens (0.25 for 25%), not a percentage."
    key = _padding_key()
    if abs(share - key) <= 0.01:
        return True, f"Right: {key:.0%} of a padded batch's tokens are padding, computed for nothing."
    return False, "Not that share: compare the real tokens, sum(lengths), with what a padded batch holds."


def _shards_key() -> int:
    cfg = hstu_preset("dlrmv4")
    rows = sum(t.num_rows for t in cfg.tables)
    table_bytes = cfg.embedding_parameters * 4 + rows * state_floats_per_row("rowwise_adagrad", cfg.dim) * 4
    return math.ceil(table_bytes / (SHARD_GB * 1e9))


number_exercise(
    "07.shards",
    f"""
    MLPerf's DLRMv4 trains its tables in fp32 with row-wise Adagrad. If each GPU keeps {SHARD_GB} GB of its
    HBM for table shards (the rest holds activations, the dense weights and Adam's state), how many GPUs
    does it need at least to hold them?

    Every table has dim 512: a row is 512 fp32 numbers, and row-wise Adagrad adds one float per row.

    hstu_preset('dlrmv4'): its tables' num_rows summed give the rows; embedding_parameters the weights
    (with the action embedding's 3 rows).

    Divide the bytes by {SHARD_GB}e9 and round up.
    """,
    key=_shards_key,
    what="a number of GPUs",
    right="Right: the tables alone take more than one 8-GPU node's share: the model is sharded over nodes.",
    wrong="Not that number: count 4 bytes a weight and 4 a row for the Adagrad state, over 50 GB a GPU.",
)


def _shape_key() -> AppSetting:
    return AppSetting("recnotebooks.viz.hstu:hstu_explorer", {"nodes": 1, "lengths": 1 / 16})


@exercise(
    "07.shape",
    """
    In the Generative Recommender Explorer, on one node of dgx_h100 (hardware dgx_h100, nodes 1), find a
    setting where attention is no longer the largest part of the jagged step on one GPU; pass the app.

    Attention grows with the square of each history's length; the projections only with its length.

    Move the history lengths, and watch the purple segment of the jagged bar.

    Shorter histories (Yambda/4 or less) shift the work to the projections and pointwise passes.
    """,
    answer=_shape_key,
)
def _shape(answer: object) -> tuple[bool, str]:
    rows = app_result(answer, "modeled")
    values = getattr(answer, "values", {})
    if values.get("hardware") != "dgx_h100" or values.get("nodes") != 1:
        return False, "Set the hardware to dgx_h100 and the nodes to 1 for this exercise."
    parts = {str(r["phase"]): float(r["seconds_per_step"]) for r in rows if r["layout"] == "jagged"}  # type: ignore[arg-type]
    largest = max(parts, key=parts.__getitem__)
    if largest == "attention":
        return False, f"Attention still takes {parts['attention'] / sum(parts.values()):.0%} of the step."
    return True, f"Right: {largest} now bounds the step ({parts[largest] / sum(parts.values()):.0%} of it)."
