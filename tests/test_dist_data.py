"""Real data on every rank (issue 41): ``recnb train --data --world-size N`` trains on the Criteo files
with every rank reading them and keeping its slice of each global batch, so 2 and 4 ranks equal the
single-process ``recnb train --data`` (the loss of every step, the held-out metrics over the same
held-out samples, a partial last eval batch included); files that do not split across the ranks are
refused before any process starts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from recnotebooks import cli
from recnotebooks.commands import train as train_command
from recnotebooks.commands.settings import train_settings
from recnotebooks.config import Workload
from recnotebooks.data.batch import Batch
from recnotebooks.distributed import training
from recnotebooks.distributed.rank_data import CriteoFiles, pad_batch
from recnotebooks.distributed.training import train_local
from recnotebooks.plan import round_robin
from recnotebooks.sparse import JaggedBatch

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = str(ROOT / "datasets" / "criteo_sample.tsv.gz")  # 4,000 Criteo Kaggle lines
STEPS = 4
CRITEO = ["train", "--max-rows", "1000", "--steps", str(STEPS), "--seed", "1"]


def _single(argv: list[str]) -> dict[str, object]:
    """The single-process ``recnb train``'s report (the CLI's own function), as ``--json`` prints it."""
    args = cli.build_parser().parse_args([*CRITEO, *argv, "--device", "cpu", "--json"])
    return json.loads(json.dumps(train_command.train(train_settings(args)), default=str))


def _head(tmp_path: Path, lines: int) -> str:
    """The first ``lines`` lines of the sample, as a gzip file of their own."""
    with gzip.open(SAMPLE, "rb") as f:
        head = b"".join(f.readline() for _ in range(lines))
    path = tmp_path / f"head{lines}.tsv.gz"
    path.write_bytes(gzip.compress(head))
    return str(path)


def test_world_size_two_on_the_sample_matches_one_process(capsys) -> None:
    argv = ["--data", SAMPLE, "--batch-size", "256", "--eval-batches", "2"]
    one = _single(argv)
    assert cli.main([*CRITEO, *argv, "--world-size", "2", "--sharding", "row_wise", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["world_size"], r["backend"], r["steps"]) == (2, "gloo", STEPS)
    assert r["losses"] == pytest.approx(one["losses"], abs=1e-4)
    for key in ("auc", "logloss", "ne"):
        assert isinstance(r[key], float) and r[key] == pytest.approx(one[key], abs=1e-4), key
    # the same data report: files, held-out share, the reader's counts of its pass
    assert r["data"] == one["data"] and r["data"]["lines_read"] == 4000


def test_four_ranks_evaluate_the_same_partial_held_out_batch(tmp_path) -> None:
    """970 lines in batches of 96: held-out batches 0 and 10, the last of 10 samples (not a multiple
    of 4: padded on the ranks, the copies dropped)."""
    path = _head(tmp_path, 970)
    argv = ["--data", path, "--batch-size", "96", "--eval-batches", "3"]
    one = _single(argv)
    cfg = cli.config_from_args(cli.build_parser().parse_args([*CRITEO, *argv]))
    res = train_local(cfg, round_robin(cfg, 4), 4, STEPS, 96, 1, eval_batches=3,
                      data=CriteoFiles((path,), 0.1), timeout_s=300.0)  # fmt: skip
    assert res.losses == pytest.approx(one["losses"], abs=1e-4)
    for key in ("auc", "logloss", "ne"):
        assert getattr(res, key) == pytest.approx(one[key], abs=1e-4), key
    assert res.data["lines_read"] == one["data"]["lines_read"] == 970


def test_pad_repeats_the_last_sample() -> None:
    ids = {"a": [[1, 2], [], [3]], "b": [[4], [5, 6], []]}
    weights = {"a": [[0.5, 1.5], [], [2.5]], "b": [[3.5], [4.5, 5.5], []]}
    sparse = JaggedBatch.from_lists(ids, weights)
    batch = Batch(torch.arange(6.0).view(3, 2), sparse, torch.tensor([0.0, 1.0, 1.0]))
    padded = pad_batch(batch, 5)
    assert padded.sparse.to_lists() == {"a": [[1, 2], [], [3], [3], [3]], "b": [[4], [5, 6], [], [], []]}
    assert padded.sparse.weights.tolist() == [0.5, 1.5, 2.5, 2.5, 2.5, 3.5, 4.5, 5.5]
    assert padded.sparse.batch_size == 5 and padded.sparse.lengths.tolist() == [2, 0, 1, 1, 1, 1, 2, 0, 0, 0]
    assert padded.dense[3:].tolist() == [[4.0, 5.0]] * 2 and padded.labels.tolist() == [0, 1, 1, 1, 1]
    assert pad_batch(batch, 3) is batch


@pytest.fixture
def no_launch(monkeypatch):
    """Fails the test if a process would start."""
    monkeypatch.setattr(training, "launch", lambda *a, **k: pytest.fail("a process was started"))


def test_files_that_do_not_split_are_refused_before_any_process_starts(tmp_path, no_launch) -> None:
    cfg = cli.config_from_args(cli.build_parser().parse_args([*CRITEO, "--data", SAMPLE]))
    small = CriteoFiles((_head(tmp_path, 300),), 0.1)
    msg = r"must hold at least 384 usable samples \(2 global batches of batch_size=192.*got 300"
    with pytest.raises(ValueError, match=msg):
        train_local(cfg, round_robin(cfg, 2), 2, STEPS, 192, data=small)
    with pytest.raises(ValueError, match="divisible by world_size=4"):
        train_local(cfg, round_robin(cfg, 4), 4, STEPS, 194, data=CriteoFiles(SAMPLE, 0.1))
    with pytest.raises(FileNotFoundError, match="no such file"):
        train_local(cfg, round_robin(cfg, 2), 2, STEPS, 192, data=CriteoFiles(str(tmp_path / "x.gz"), 0.1))
    tiny = cli.config_from_args(cli.build_parser().parse_args(["train", "--preset", "tiny"]))
    with pytest.raises(ValueError, match="needs 26 tables and 13 dense"):
        CriteoFiles(SAMPLE, 0.1).check(Workload(tiny, 64))
    with pytest.raises(ValueError, match="eval_fraction"):
        CriteoFiles(SAMPLE, 1.0)
    with pytest.raises(TypeError, match="data must be a CriteoFiles"):
        train_local(cfg, round_robin(cfg, 2), 2, STEPS, 192, data=SAMPLE)


def test_cli_refuses_bad_data_and_still_checkpoints(tmp_path, no_launch, capsys) -> None:
    small = _head(tmp_path, 300)
    cases = [
        (["--data", small, "--batch-size", "192"], "must hold at least 384 usable samples"),
        (["--data", str(tmp_path / "none.gz")], "--data: paths: no such file"),
        (["--data", SAMPLE, "--preset", "tiny"], "--data needs a model with 26 tables"),
        (["--data", SAMPLE, "--batch-size", "255"], "--batch-size must be divisible by the world size 2"),
        (["--data", SAMPLE, "--resume", str(tmp_path / "none")], "--resume: resume"),
    ]
    for argv, message in cases:
        assert cli.main([*CRITEO, "--world-size", "2", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)


def test_a_ranks_data_error_is_one_line(monkeypatch, capsys) -> None:
    """Files corrupt past the batches checked before the launch fail on every rank alike: the CLI
    says the rank's error in one line, as one process does; a rank's other error still raises the
    launch's error (a rank that died is a lost peer: tests/test_dist_peers.py)."""
    from recnotebooks.commands import distributed as dist_command
    from recnotebooks.distributed.launch import LaunchError, LaunchResult, RankFailure

    def fails(failure: RankFailure):
        def train_local(*args, **kwargs):  # a launch's own result: the CLI reads its world size too
            result = LaunchResult(2, "gloo", 0, [None, None], [None, None], [[], []], [failure])
            raise LaunchError("launch failed", result)

        return train_local

    why = "x.gz: corrupt or truncated gzip data (Compressed file ended before the end-of-stream marker)"
    monkeypatch.setattr(
        dist_command, "train_local", fails(RankFailure(1, "raised", f"rank 1 raised ValueError: {why}"))
    )
    assert cli.main([*CRITEO, "--world-size", "2", "--data", SAMPLE, "--batch-size", "256"]) == 2
    err = capsys.readouterr().err
    assert f"{why} (rank 1)" in err and "Traceback" not in err
    monkeypatch.setattr(
        dist_command, "train_local", fails(RankFailure(0, "raised", "rank 0 raised RuntimeError: a bug"))
    )
    with pytest.raises(LaunchError):
        cli.main([*CRITEO, "--world-size", "2", "--data", SAMPLE, "--batch-size", "256"])
