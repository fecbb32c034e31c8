"""Distributed training end to end: ``recnb train --world-size 2`` and two torchrun "nodes" on this
machine train the tiny preset and match the single-process ``recnb train`` losses and held-out
metrics, in one JSON schema; bad options are refused before any process starts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from recnotebooks import cli
from recnotebooks.dist import commands as dist_commands
from recnotebooks.dist.training import DistTrainResult, round_robin_plan, train_local
from recnotebooks.train import TRAIN_REPORT_KEYS, train_report

ROOT = Path(__file__).resolve().parent.parent
STEPS, BATCH = 4, 128
COMMON = ["--preset", "tiny", "--steps", str(STEPS), "--batch-size", str(BATCH), "--seed", "1"]


@pytest.fixture(scope="module")
def single_process_losses() -> list[float]:
    """The losses of ``recnb train --preset tiny`` (built by the CLI itself), every step logged."""
    args = cli.build_parser().parse_args(["train", *COMMON, "--device", "cpu"])
    trainer, _ = cli._trainer(args, cli.config_from_args(args), torch.device("cpu"))
    trainer.config.log_every, trainer.config.progress, trainer.eval_data = 1, False, None
    trainer.fit(STEPS)
    return [h["loss"] for h in trainer.history]


@pytest.fixture(scope="module")
def single_process_report() -> dict[str, object]:
    """``recnb train --preset tiny --json``'s report (the CLI's own function; 10 eval batches)."""
    return cli.cmd_train(cli.build_parser().parse_args(["train", *COMMON, "--device", "cpu", "--json"]))


def test_world_size_two_matches_single_process(single_process_losses, single_process_report, capsys) -> None:
    assert cli.main(["train", "--world-size", "2", *COMMON, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    one = json.loads(json.dumps(single_process_report, default=str))  # as --json prints it
    assert (r["world_size"], r["backend"], r["steps"], r["batch_size"]) == (2, "gloo", STEPS, BATCH)
    assert r["losses"] == pytest.approx(single_process_losses, abs=1e-4)
    # one schema: the same keys, in the same order; per-step losses and held-out metrics in both
    assert list(r) == list(one) == list(TRAIN_REPORT_KEYS)
    assert one["losses"] == pytest.approx(single_process_losses, abs=1e-12)  # the Trainer's own, every step
    for key in ("auc", "logloss", "ne"):
        assert isinstance(one[key], float) and isinstance(r[key], float), key
        assert r[key] == pytest.approx(one[key], abs=1e-4), key
    assert 0.5 < r["auc"] < 1 and r["ne"] < 1.05
    assert (one["world_size"], one["backend"], one["rank"], one["comm"]) == (1, None, 0, [])
    assert r["data"] == one["data"] and r["dtype"] == one["dtype"] == "fp32"
    # the same metric lines in the text of both
    for data, printer in ((r, dist_commands._print), (one, cli._print_train)):
        printer(data)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("  loss ", "  eval "))]
    assert len(lines) == 4 and lines[:2] == lines[2:], lines
    assert lines[1].startswith("  eval        AUC ") and "NE " in lines[1]
    assert {"all_to_all", "all_reduce", "backward", "embedding_forward"} <= set(r["phases"])
    assert r["samples_per_s"] > 0
    assert {row["rank"] for row in r["comm"]} == {0, 1}
    assert {row["component"] for row in r["comm"]} == {"all_to_all", "all_reduce"}


def test_row_wise_ranks_evaluate_the_same_held_out_batches(single_process_report) -> None:
    """``train_local`` (the ranks ``--distributed`` runs too, through ``run_rank``) on row-wise
    tables: each rank predicts its slice of every eval batch, the gathered predictions give the
    single-process metrics; no eval batches, no metrics."""
    args = cli.build_parser().parse_args(["train", *COMMON])
    cfg = cli.config_from_args(args)
    res = train_local(cfg, round_robin_plan(cfg, 2, "row_wise"), 2, STEPS, BATCH, 1, eval_batches=10,
                      timeout_s=300.0)  # fmt: skip
    for key in ("auc", "logloss", "ne"):
        assert getattr(res, key) == pytest.approx(single_process_report[key], abs=1e-4), key
    assert res.losses == pytest.approx(single_process_report["losses"], abs=1e-4)
    with pytest.raises(ValueError, match="eval_batches"):
        train_local(cfg, round_robin_plan(cfg, 2), 2, STEPS, BATCH, eval_batches=-1)


def test_train_report_names_a_missing_or_unknown_key() -> None:
    full = dict.fromkeys(TRAIN_REPORT_KEYS)
    assert list(train_report(**full)) == list(TRAIN_REPORT_KEYS)
    with pytest.raises(TypeError, match="missing keys \\['losses'\\]"):
        train_report(**{k: v for k, v in full.items() if k != "losses"})
    with pytest.raises(TypeError, match="unknown keys \\['extra'\\]"):
        train_report(**full, extra=1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_torchrun_nodes_match_single_process(single_process_losses, tmp_path) -> None:
    port = _free_port()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    procs = []
    try:
        for node in (0, 1):
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
                   "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                   "--rdzv-id", f"recnb-test-{port}", "--local-addr", "127.0.0.1", "-m", "recnotebooks",
                   "train", "--distributed", *COMMON, "--json"]  # fmt: skip
            out = open(tmp_path / f"node{node}.out", "w")  # noqa: SIM115 - closed below
            procs.append((subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True), out))  # fmt: skip
        for p, _ in procs:
            p.wait(timeout=300)  # a hang guard: on a cold Numba cache each node compiles the kernels
    finally:
        for p, out in procs:
            if p.poll() is None:  # a node that did not finish: its whole process group goes
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            out.close()
    texts = [(tmp_path / f"node{n}.out").read_text() for n in (0, 1)]
    for p, text in zip((p for p, _ in procs), texts, strict=True):
        assert p.returncode == 0, text
    for node, text in enumerate(texts):
        r = json.loads(text[text.index("{") : text.rindex("}") + 1])
        assert (r["world_size"], r["rank"]) == (2, node)
        assert r["losses"] == pytest.approx(single_process_losses, abs=1e-4)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--world-size", "10000"], "--world-size must be at most"),
        (["--world-size", "2", "--batch-size", "63"], "--batch-size must be divisible by the world size 2"),
        (["--world-size", "2", "--distributed"], "not both"),
        (["--sharding", "row_wise"], "needs --world-size N or --distributed"),
        (["--world-size", "2", "--resume", "x.pt"], "--resume is not supported"),
        (["--world-size", "2", "--device", "cuda"], "--device must be auto or cpu"),
        (["--distributed"], "under torchrun"),
    ],
)
def test_bad_options_are_refused_before_any_process_starts(argv, message, capsys, monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert cli.main(["train", "--preset", "tiny", *argv]) == 2
    assert message in capsys.readouterr().err


def test_round_robin_plans_and_result_rows() -> None:
    cfg = cli.config_from_args(cli.build_parser().parse_args(["train", "--preset", "tiny"]))
    plan = round_robin_plan(cfg, 3)
    assert [s.rank for s in plan.shards] == [k % 3 for k in range(cfg.num_tables)]
    assert len(round_robin_plan(cfg, 2, "row_wise").shards) == 2 * cfg.num_tables
    with pytest.raises(ValueError, match="sharding"):
        round_robin_plan(cfg, 2, "diagonal")
    res = DistTrainResult(2, "gloo", 2, 8, [0.7, 0.6], 100.0, 0.01, {"all_to_all": 0.001},
                          [{"rank": 0, "component": "all_to_all", "bytes_sent": 8}])  # fmt: skip
    assert (res.auc, res.logloss, res.ne) == (None, None, None)  # not evaluated
    rows = res.rows()
    assert {r["kind"] for r in rows} == {"loss", "phase", "comm"}
    assert all(r["source"] == "measured" for r in rows)
