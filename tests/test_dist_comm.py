"""recnotebooks.distributed.comm on real gloo ranks: each collective forward and backward against a
single-process reference built from every rank's inputs; exact logged bytes; async == sync."""

from __future__ import annotations

import pickle

import _workers as W
import pytest
import torch

from recnotebooks.distributed import CommLog, all_gather, all_reduce, all_to_all, launch, reduce_scatter

# Nothing deprecated, here or (checked through the launch results' warnings) on the ranks.
pytestmark = pytest.mark.filterwarnings(
    "error::DeprecationWarning", "error::FutureWarning", "error::UserWarning"
)

SEED = 7
#: splits[i][j]: rows rank i sends rank j (zeros included, uneven).
SPLITS = {2: [[1, 2], [0, 3]], 4: [[0, 1, 2, 0], [3, 0, 0, 1], [1, 1, 1, 1], [0, 0, 2, 0]]}
NAMES = ("all_to_all", "reduce_scatter", "all_gather", "all_reduce", "all_reduce_mean")


@pytest.fixture(scope="module", params=[2, 4])
def run(request: pytest.FixtureRequest) -> tuple[int, list[dict]]:
    world = request.param
    result = launch(W.exercise_collectives, world, SEED, SPLITS[world], timeout_s=60)
    assert result.warnings == [[]] * world  # no deprecation (or any other) warning on any rank
    return world, result.values


def reference(world: int) -> dict[str, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Per collective, per rank: (output, input gradient) computed here from all ranks' inputs."""
    splits = SPLITS[world]
    data = [W.inputs(SEED, r, splits) for r in range(world)]
    ref: dict[str, list] = {}
    # all-to-all: rank r receives, in rank order, block r of every rank's input
    offsets = [[sum(splits[i][:j]) for j in range(world + 1)] for i in range(world)]
    blocks = [
        [data[i]["a2a_x"][offsets[i][j] : offsets[i][j + 1]] for j in range(world)] for i in range(world)
    ]
    recv_off = [[sum(splits[k][r] for k in range(j)) for j in range(world + 1)] for r in range(world)]
    w_blocks = [
        [data[r]["a2a_w"][recv_off[r][j] : recv_off[r][j + 1]] for j in range(world)] for r in range(world)
    ]
    ref["all_to_all"] = [
        (torch.cat([blocks[j][r] for j in range(world)]), torch.cat([w_blocks[j][r] for j in range(world)]))
        for r in range(world)
    ]
    c = W.CHUNK
    total = sum(d["rs_x"] for d in data)
    ref["reduce_scatter"] = [
        (total[r * c : (r + 1) * c], torch.cat([d["rs_w"] for d in data])) for r in range(world)
    ]
    gathered = torch.cat([d["ag_x"] for d in data])
    w_sum = sum(d["ag_w"] for d in data)
    ref["all_gather"] = [(gathered, w_sum[r * c : (r + 1) * c]) for r in range(world)]
    ar, ar_w = sum(d["ar_x"] for d in data), sum(d["ar_w"] for d in data)
    ref["all_reduce"] = [(ar, ar_w)] * world
    ref["all_reduce_mean"] = [(ar / world, ar_w / world)] * world
    return ref


def expected_bytes(world: int, rank: int, name: str, direction: str) -> tuple[int, int]:
    """The documented exact formula (float64: 8 bytes an element), bytes to/from other ranks only."""
    s = SPLITS[world]
    if name == "all_to_all":
        sent = sum(s[rank]) - s[rank][rank]
        received = sum(s[j][rank] for j in range(world)) - s[rank][rank]
        sent, received = (sent, received) if direction == "forward" else (received, sent)
        return sent * W.DIM * 8, received * W.DIM * 8
    if name in ("reduce_scatter", "all_gather"):
        both = (world - 1) * W.CHUNK * W.DIM * 8
        return both, both
    n = W.REDUCE_NUMEL
    mine = n // world + (1 if rank < n % world else 0)
    both = (n - mine + (world - 1) * mine) * 8
    return both, both


def test_forward_and_backward_match_a_single_process_reference(run: tuple[int, list[dict]]) -> None:
    world, values = run
    ref = reference(world)
    for name in NAMES:
        for r in range(world):
            for mode in ("sync", "async"):
                y, grad, _ = values[r][f"{name}/{mode}"]
                torch.testing.assert_close(
                    y, ref[name][r][0], rtol=0, atol=1e-12, msg=f"{name} {mode} rank {r}"
                )
                torch.testing.assert_close(
                    grad, ref[name][r][1], rtol=0, atol=1e-12, msg=f"{name} grad rank {r}"
                )


def test_async_equals_sync(run: tuple[int, list[dict]]) -> None:
    world, values = run
    for name in NAMES:
        for r in range(world):
            (y, g, _), (ya, ga, _) = values[r][f"{name}/sync"], values[r][f"{name}/async"]
            assert torch.equal(y, ya) and torch.equal(g, ga), (name, r)


def test_logged_bytes_are_exact_and_rows_tidy(run: tuple[int, list[dict]]) -> None:
    world, values = run
    back = {"reduce_scatter": "all_gather", "all_gather": "reduce_scatter"}
    component = {"all_to_all": "all_to_all", "reduce_scatter": "all_to_all", "all_gather": "all_reduce",
                 "all_reduce": "all_reduce", "all_reduce_mean": "all_reduce"}  # fmt: skip
    for name in NAMES:
        for r in range(world):
            for mode in ("sync", "async"):
                rows = values[r][f"{name}/{mode}"][2]
                assert len(rows) == 2
                for row in rows:
                    assert row["source"] == "measured" and row["rank"] == r and row["calls"] == 1
                    assert row["component"] == component[name] and row["seconds"] > 0
                    forward = name if not name.startswith("all_reduce") else "all_reduce"
                    own = back.get(forward, forward) if row["direction"] == "backward" else forward
                    assert row["collective"] == own
                    sent, received = expected_bytes(world, r, forward, row["direction"])
                    if forward in back and row["direction"] == "backward":  # the reverse collective
                        sent, received = expected_bytes(world, r, own, "forward")
                    assert (row["bytes_sent"], row["bytes_received"]) == (sent, received), (name, r, row)


def test_bad_calls_raise_clear_errors_on_the_ranks(run: tuple[int, list[dict]]) -> None:
    world, values = run
    for r in range(world):
        errors = values[r]["errors"]
        assert errors[0].startswith("ValueError: in_splits must sum to x.shape[0]"), errors
        assert f"one entry per rank ({world})" in errors[1]
        assert f"out_splits[{r}] must equal in_splits[{r}]" in errors[2]
        assert "divisible by the world size" in errors[3]
        assert "op must be one of ['sum', 'mean'], got 'max'" in errors[4]
        assert "in_splits[0] must be an int >= 0, got -1" in errors[5]


def test_collectives_need_a_process_group_and_check_arguments_first() -> None:
    with pytest.raises(RuntimeError, match="initialised process group.*launch"):
        all_reduce(torch.ones(3))
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got"):
        all_to_all([1, 2], [1, 1], [1, 1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="component must be one of"):
        reduce_scatter(torch.ones(4), component="overhead")
    with pytest.raises(TypeError, match="async_op must be True or False"):
        all_gather(torch.ones(2), async_op=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="log must be a CommLog or None"):
        all_reduce(torch.ones(2), log=[])  # type: ignore[arg-type]


def test_comm_log_totals_rows_and_pickles() -> None:
    log = CommLog(rank=3)
    log.record("all_to_all", "all_to_all", "forward", 10, 20, 0.5)
    log.record("all_to_all", "all_to_all", "forward", 1, 2, 0.25)
    log.record("all_reduce", "all_reduce", "backward", 8, 8, 1.0)
    rows = log.rows()
    assert [r["collective"] for r in rows] == ["all_reduce", "all_to_all"]
    assert rows[1] == {"source": "measured", "rank": 3, "component": "all_to_all", "collective": "all_to_all",
                       "direction": "forward", "calls": 2, "bytes_sent": 11, "bytes_received": 22,
                       "seconds": 0.75}  # fmt: skip
    assert log.total() == 19 and log.total("calls", component="all_to_all") == 2
    assert pickle.loads(pickle.dumps(log)).rows() == rows
    with pytest.raises(ValueError, match="what must be one of"):
        log.total("bytes")
    log.clear()
    assert log.rows() == []


def test_comm_log_since_a_snapshot_holds_only_what_came_after() -> None:
    log = CommLog(rank=1)
    log.record("all_to_all", "all_to_all", "forward", 10, 20, 0.5)  # a warm-up step
    log.record("all_reduce", "all_reduce", "forward", 4, 4, 0.125)
    snap = log.snapshot()
    log.record("all_to_all", "all_to_all", "forward", 3, 6, 0.25)  # the timed steps
    log.record("all_to_all", "all_to_all", "backward", 7, 7, 1.0)
    timed = log.since(snap)
    assert timed.rank == 1
    assert [(r["direction"], r["calls"], r["bytes_sent"], r["bytes_received"], r["seconds"])
            for r in timed.rows()] == [("forward", 1, 3, 6, 0.25), ("backward", 1, 7, 7, 1.0)]  # fmt: skip
    assert snap.total("calls") == 2  # the snapshot is a copy: later records do not reach it
    assert log.since(log.snapshot()).rows() == []
    with pytest.raises(TypeError, match="earlier must be a CommLog"):
        log.since({})  # type: ignore[arg-type]
