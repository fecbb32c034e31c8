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
#: 07.shards: GB of each GPU's HBM left for the tables (the rest holds activations and dense state), and
#: how close an answer in GB must be (the row-wise Adagrad state is 1.2 GB: an answer without it is off).
SHARD_GB, SHARD_TOLERANCE_GB = 50, 0.5


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


def _table_bytes(optimizer: bool = True) -> float:
    """DLRMv4's fp32 table bytes, with (``optimizer``) the row-wise Adagrad state of every row."""
    cfg = hstu_preset("dlrmv4")
    rows = sum(t.num_rows for t in cfg.tables)
    state = rows * state_floats_per_row("rowwise_adagrad", cfg.dim) * 4 if optimizer else 0
    return float(cfg.embedding_parameters * 4 + state)


def _shards_key() -> float:
    return _table_bytes() / 1e9


@exercise(
    "07.shards",
    f"""
    MLPerf's DLRMv4 trains its tables in fp32 with row-wise Adagrad. How many GB (1e9 bytes) do the tables
    take in HBM, with their optimizer state? Answer within {SHARD_TOLERANCE_GB} GB.

    Every table has dim 512: a row is 512 fp32 numbers, and row-wise Adagrad adds one float per row.

    hstu_preset('dlrmv4'): its tables' num_rows summed give the rows; embedding_parameters the weights
    (with the action embedding's 3 rows).

    4 bytes a weight, 4 a row for the Adagrad state; divide by 1e9.
    """,
    answer=_shards_key,
)
def _shards(answer: object) -> tuple[bool, str]:
    gb = number(answer, "a number of GB")
    key, weights = _shards_key(), _table_bytes(optimizer=False) / 1e9
    if abs(gb - key) <= SHARD_TOLERANCE_GB:
        gpus = math.ceil(key / SHARD_GB)
        return True, (
            f"Right: {key:,.1f} GB. At {SHARD_GB} GB of each GPU's HBM for table shards (the rest holds "
            f"activations, the dense weights and Adam's state) that is {gpus} GPUs: more than one 8-GPU "
            "node, so the model is sharded over nodes."
        )
    if 1 <= gb < 100 and gb == int(gb):
        return False, "Answer in GB of the tables and their state, not a number of GPUs."
    if abs(gb - weights) <= SHARD_TOLERANCE_GB:
        return (
            False,
            "Those are the weights alone: add the row-wise Adagrad state, one float (4 bytes) a row.",
        )
    if abs(gb * 2**30 / 1e9 - key) <= SHARD_TOLERANCE_GB * 2:
        return False, "That looks like GiB (2^30 bytes): answer in GB, 1e9 bytes."
    return False, "Not that number: count 4 bytes a weight and 4 a row for the Adagrad state, in 1e9 bytes."


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
