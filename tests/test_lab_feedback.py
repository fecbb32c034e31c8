"""The feedback of notebooks 03-07's exercises says what a learner needs: the units an answer is
in (03.size: MB, not MiB) and why a right answer is right (05.per_joule)."""

from __future__ import annotations

import pytest
from _values import num

from recnotebooks import lab
from recnotebooks.config import preset
from recnotebooks.perf.access import hit_rate
from recnotebooks.perf.servers import compare_servers


@pytest.fixture(autouse=True)
def _fresh_hints() -> None:
    lab.reset()


def test_03_size_names_its_units_in_the_question_and_the_hints() -> None:
    title = dict(lab.exercises("03"))["03.size"]
    assert "MB = 10^6 bytes" in title and "MiB = 2^20 bytes" in title
    fb = lab.check("03.size", (1, 0.5))
    assert "MB = 10^6 bytes" in fb.message and not fb.passed


def test_03_size_answered_in_mib_is_told_the_difference_not_just_wrong() -> None:
    """256 MiB // 260 bytes = 1,032,444 rows, 4.9% more than 256 MB holds (984,615): the feedback
    says which unit the learner used and which the exercise means, without passing it."""
    rows = 256 * 2**20 // 260  # the learner's reading: MiB
    assert rows == 1_032_444 and 256e6 // 260 == 984_615
    fb = lab.check("03.size", (rows, hit_rate(rows, 10_000_000, 1.05, policy="lru")))
    assert not fb.passed
    assert "256 MiB" in fb.message and "10^6 bytes" in fb.message and "2^20" in fb.message
    assert "4.6% less than 256 MiB" in fb.message  # 1 - 256e6 / 2**28
    assert "984,615" not in fb.message  # still a hint, not the answer
    right = lab.check("03.size", (984_615, hit_rate(984_615, 10_000_000, 1.05, policy="lru")))
    assert right.passed


def test_05_per_joule_says_why_the_winner_wins() -> None:
    rows, _ = compare_servers(preset("rm3"))
    by = {str(r["server"]): r for r in rows}
    ranked = sorted(by, key=lambda s: num(by[s], "samples_per_joule"), reverse=True)
    best, second = ranked[:2]
    fb = lab.check("05.per_joule", best)
    assert fb.passed
    per_joule = num(by[best], "samples_per_joule")
    assert fb.message.startswith(f"Right: {best} does {per_joule:.0f} samples per joule")
    assert f"more than {second}" in fb.message
    # the reason: every GPU server is bound by per-step overhead at this batch, so the node with
    # the least power for about the same throughput wins
    assert all(r["bound_by"] == "overhead" for s, r in by.items() if s != "cpu_cluster")
    assert "bound by per-step overhead" in fb.message
    gpu_power = {s: num(r, "node_power_w") for s, r in by.items() if s != "cpu_cluster"}
    assert min(gpu_power, key=gpu_power.__getitem__) == best and "least power wins" in fb.message
    wrong = lab.check("05.per_joule", second)
    assert not wrong.passed and best not in wrong.message


def test_07_shards_counts_the_adagrad_state_and_names_the_usual_slips() -> None:
    """DLRMv4's tables: 293 M rows of 512 fp32 weights (600.17 GB) and one row-wise Adagrad float a row
    (1.17 GB), counted here from the preset, not read from the key: the weights alone, GiB or a count of
    GPUs (the question's old form) are each told what they missed, and only the whole passes."""
    from recnotebooks.config import hstu_preset

    v4 = hstu_preset("dlrmv4")
    rows = sum(t.num_rows for t in v4.tables)
    weights = v4.embedding_parameters * 4 / 1e9
    whole = weights + rows * 4 / 1e9
    assert round(weights, 2) == 600.17 and round(whole - weights, 2) == 1.17
    assert lab.check("07.shards", whole).passed and "13 GPUs" in lab.check("07.shards", whole).message
    fb = lab.check("07.shards", weights)
    assert not fb.passed and "weights alone" in fb.message
    fb = lab.check("07.shards", whole * 1e9 / 2**30)
    assert not fb.passed and "GiB" in fb.message
    fb = lab.check("07.shards", 13)
    assert not fb.passed and "not a number of GPUs" in fb.message
    assert not lab.check("07.shards", 600).passed  # the rounded 600 GB misses the state too
