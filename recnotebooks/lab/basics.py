"""Exercises of notebooks 00 (start here) and 01 (DLRM anatomy)."""

from __future__ import annotations

from recnotebooks.config import architecture_config, preset

from .core import AppSetting, app_result, exercise, number_exercise, phase_share, reliable_rows


def _threads_key() -> int:
    import torch

    return torch.get_num_threads()


def _parameters_key() -> int:

    return preset("tiny").parameters


def _interaction_key() -> int:

    return architecture_config(num_tables=8, embedding_dim=32).interaction_output_dim


# ----- notebook 00 ---------------------------------------------------------------------
number_exercise(
    "00.threads",
    """
    How many threads does PyTorch use for CPU work on this machine?

    `recnb doctor` prints a line that starts with 'threads'.

    It is `torch.get_num_threads()`; pass that number as an int.
    """,
    key=_threads_key,
    what="the thread count",
    right="Right: that is how many cores torch's CPU kernels use.",
    wrong="Not this machine's count.",
)


@exercise(
    "00.traffic",
    """
    With the demo app at embedding dim 32, find a setting that reads between 1 GB and 2 GB of embedding rows
    per step.

    Bytes per step = batch size x 26 tables x pooling x (32 floats x 4 bytes + an 8-byte index).

    At batch 2048 one unit of pooling is about 7 MB; doubling the batch size doubles it.

    Pooling 80 reads about 0.6 GB at batch 2048. What does one more doubling of the batch give?
    """,
    answer=lambda: AppSetting(
        "recnotebooks.viz.traffic:lookup_traffic_app",
        {"embedding_dim": 32, "pooling": 80, "batch_size": 4096},
    ),
)
def _traffic(answer: object) -> tuple[bool, str]:
    rows = app_result(answer, "traffic")
    dim = getattr(answer, "values", {}).get("embedding_dim")
    if dim != 32:
        return False, f"Set the embedding dim to 32 first (it is {dim})."
    now = [r for r in rows if r.get("current")]
    mb = float(now[0]["MB_per_step"]) if now else 0.0  # type: ignore[arg-type]
    ok = 1000 < mb < 2000
    return ok, (f"Right: {mb:,.0f} MB per step." if ok else f"This setting reads {mb:,.0f} MB per step.")


# ----- notebook 01 ---------------------------------------------------------------------
number_exercise(
    "01.parameters",
    """
    How many parameters (weights and biases, all tables) does the 'tiny' preset have?

    Parameters = embedding rows x embedding dim, summed over tables, plus every MLP layer's weights and
    biases.

    A linear layer from i to o features has i*o weights and o biases; the top MLP's input width is
    `config.interaction_output_dim`.

    Compute it from `preset('tiny')`: its `tables`, `embedding_dim` and `mlp_layers('bottom'/'top')`.
    """,
    key=_parameters_key,
    what="the parameter count",
    right="Right: almost all of them are embedding rows.",
    wrong="That is not the count.",
)


number_exercise(
    "01.interaction",
    """
    Width of the top MLP input: dot interaction, 8 tables, embedding dim 32, no self-interaction?

    The dot interaction takes the bottom MLP output and one pooled vector per table: 9 vectors of width 32.

    It outputs every distinct pair's dot product (not a vector with itself) and concatenates the bottom MLP
    output.

    n vectors have n*(n-1)/2 distinct pairs; add the width of the bottom MLP output.
    """,
    key=_interaction_key,
    what="the width",
    right="Right: pairs grow with the square of the number of tables.",
    wrong="Not that width.",
)


@exercise(
    "01.embedding_bound",
    """
    In the Architecture Explorer, find a setting where embedding work (embedding forward and sparse optimizer)
    takes more than half of the measured step.

    Embedding work grows with the lookups per step: tables x pooling x batch size, each a row of embedding dim
    floats.

    MLP work does not grow with pooling. Raise pooling and the number of tables, keep the MLPs small.

    Try pooling 40+, 16+ tables and a narrow MLP (width 64), then pass the app to check().
    """,
    answer=lambda: AppSetting(
        "recnotebooks.viz.architecture:architecture_explorer",
        {"pooling": 120, "num_tables": 32, "bottom_width": 16, "top_width": 16},
    ),
)
def _embedding_bound(answer: object) -> tuple[bool, str]:
    rows = reliable_rows(app_result(answer, "phases"))  # CannotJudge when the step is not reliable
    share = phase_share(rows, ("embedding_forward", "sparse_optimizer"))
    ok = share > 0.5
    return ok, (
        f"Right: embeddings take {share:.0%} of the step here: an embedding-bound model (like RM1/RM2)."
        if ok
        else f"Embedding work is {share:.0%} of this step."
    )
