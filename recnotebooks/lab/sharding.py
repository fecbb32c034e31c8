"""Exercises of notebook 04 (multi-GPU sharding)."""

from __future__ import annotations

from recnotebooks.config import preset
from recnotebooks.perf.scaleout import scale_out
from recnotebooks.perf.traffic import collective_bytes
from recnotebooks.viz.sharding import sharding_model, sharding_plan

from .core import amount, exercise, number

#: 04.bytes: the tiny model on this many ranks, table-wise, at this global batch (the Sharding
#: Explorer's setting whose "all_to_all forward" bar of rank 0 the exercise asks about).
BYTES_RANKS, BYTES_BATCH = 2, 512
#: The forward all-to-alls of the sharded embeddings, as ``collective_bytes`` names them: the bag
#: lengths and the ids a rank sends to the owners of the tables, and the pooled vectors back.
FORWARD = ("lengths_all_to_all", "ids_all_to_all", "pooled_all_to_all")


def forward_bytes() -> dict[str, int]:
    """Bytes rank 0 sends per step in each forward all-to-all of the 04.bytes setting (modeled by
    :func:`recnotebooks.perf.traffic.collective_bytes`, which the ranks' comm logs equal to the byte)."""

    config = sharding_model("tiny")
    plan = sharding_plan(config, "table_wise", BYTES_RANKS)
    rows = collective_bytes(config, plan, BYTES_BATCH // BYTES_RANKS, BYTES_RANKS)
    return {
        c: int(sum(r["bytes_sent"] for r in rows if r["rank"] == 0 and r["collective"] == c)) for c in FORWARD
    }


def _bytes_key() -> int:
    return sum(forward_bytes().values())


def _cliff_key() -> int:

    rows = scale_out(preset("criteo_terabyte"), links=("nvlink",))
    return int(min(r["devices"] for r in rows if float(r["all_to_all_share"]) > 0.5))  # type: ignore[call-overload,type-var,arg-type]


@exercise(
    "04.bytes",
    f"""
    The tiny model on {BYTES_RANKS} ranks, table-wise, global batch {BYTES_BATCH} (the Sharding Explorer's
    'all_to_all forward' bar of rank 0): how many bytes does rank 0 send per step in the forward all-to-alls?
    They carry the bag lengths and the ids of rank 0's samples to the owner of each table, and rank 0's pooled
    vectors back to the other rank's samples.

    Three all-to-alls run forward: bag lengths (one int64 per sample and table), ids (one int64 per lookup)
    and pooled vectors (one fp32 vector of the embedding dim per sample and table).

    Rank 0 sends lengths and ids of its 256 samples for the tables rank 1 owns, and one pooled vector of each
    table it owns for each of rank 1's 256 samples.

    recnotebooks.perf.traffic.collective_bytes(config, plan, 256, 2) lists each: rank 0's bytes_sent of
    'lengths_all_to_all', 'ids_all_to_all' and 'pooled_all_to_all'.
    """,
    answer=_bytes_key,
)
def _bytes(answer: object) -> tuple[bool, str]:
    got, parts = number(answer, "the bytes"), forward_bytes()
    want = sum(parts.values())
    split = (
        f"{parts['lengths_all_to_all']:,} of bag lengths, {parts['ids_all_to_all']:,} of ids and "
        f"{parts['pooled_all_to_all']:,} of pooled vectors"
    )
    if got == want:
        return True, f"Right: {want:,} bytes, {split}; the ranks' comm logs measure exactly that."
    if got == parts["pooled_all_to_all"]:
        return False, "Those are the pooled vectors alone; the bar counts every forward all-to-all."
    if got == parts["lengths_all_to_all"] + parts["ids_all_to_all"]:
        return False, "Those are the lengths and ids alone; the bar counts the pooled vectors too."
    return False, f"{amount(got)} bytes is not what rank 0 sends."


@exercise(
    "04.cliff",
    """
    Scale criteo_terabyte out over NVLink-connected DGX H100s (recnotebooks.perf.scaleout.scale_out): from how
    many GPUs on does the all-to-all take more than half of the step?

    scale_out(preset('criteo_terabyte'), links=('nvlink',)) gives one row per device count.

    Read all_to_all_share; what changes when there are more GPUs than the model has tables?
    """,
    answer=_cliff_key,
)
def _cliff(answer: object) -> tuple[bool, str]:
    got, want = number(answer, "the number of GPUs"), _cliff_key()
    ok = got == want
    why = "the planner must split tables by rows, and every split table sends partial sums for every sample"
    return ok, (f"Right: at {want} GPUs there are more GPUs than tables; {why}." if ok else "Not that count.")
