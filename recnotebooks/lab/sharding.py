"""Exercises of notebook 04 (multi-GPU sharding)."""

from __future__ import annotations

from .core import number, register


def _bytes_key() -> int:
    from recnotebooks.perf.traffic import collective_bytes
    from recnotebooks.viz.sharding import sharding_model, sharding_plan

    config = sharding_model("tiny")
    rows = collective_bytes(config, sharding_plan(config, "table_wise", 2), 256, 2)
    return int(
        sum(r["bytes_sent"] for r in rows if r["rank"] == 0 and r["collective"] == "pooled_all_to_all")
    )


def _cliff_key() -> int:
    from recnotebooks.config import preset
    from recnotebooks.perf.scaleout import scale_out

    rows = scale_out(preset("criteo_terabyte"), links=("nvlink",))
    return int(min(r["devices"] for r in rows if float(r["all_to_all_share"]) > 0.5))  # type: ignore[arg-type]


@register(
    "04.bytes",
    "The tiny model on 2 ranks, table-wise, global batch 512: how many bytes does rank 0 send per step in "
    "the forward all-to-all of pooled embeddings?",
    "Rank 0 owns some tables; every sample of the other rank needs one pooled vector of each of them.",
    "Bytes = samples of the other rank x (embedding dims of rank 0's tables) x 4 bytes (fp32).",
    "recnotebooks.perf.traffic.collective_bytes(config, plan, 256, 2) lists it: collective "
    "'pooled_all_to_all', rank 0, bytes_sent.",
    answer=_bytes_key,
)
def _bytes(answer: object) -> tuple[bool, str]:
    got, want = number(answer, "the bytes"), _bytes_key()
    ok = got == want
    return ok, (f"Right: {want:,} bytes, and the ranks' comm logs measure exactly that." if ok
                else f"{got:,.0f} bytes is not what rank 0 sends.")  # fmt: skip


@register(
    "04.cliff",
    "Scale criteo_terabyte out over NVLink-connected DGX H100s (recnotebooks.perf.scaleout.scale_out): from "
    "how many GPUs on does the all-to-all take more than half of the step?",
    "scale_out(preset('criteo_terabyte'), links=('nvlink',)) gives one row per device count.",
    "Read all_to_all_share; what changes when there are more GPUs than the model has tables?",
    answer=_cliff_key,
)
def _cliff(answer: object) -> tuple[bool, str]:
    got, want = number(answer, "the number of GPUs"), _cliff_key()
    ok = got == want
    why = "the planner must split tables by rows, and every split table sends partial sums for every sample"
    return ok, (f"Right: at {want} GPUs there are more GPUs than tables; {why}." if ok else "Not that count.")
