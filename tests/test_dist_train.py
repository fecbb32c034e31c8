"""Distributed training end to end: ``recnb train --world-size 2`` and two torchrun "nodes" on this
machine train the tiny preset and match the single-process ``recnb train`` losses and held-out
metrics, in one JSON schema; bad options are refused before any process starts."""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import _procs
import pytest
import torch

from recnotebooks import cli
from recnotebooks.commands import train as train_command
from recnotebooks.commands.report import printer
from recnotebooks.commands.settings import train_settings
from recnotebooks.config import preset
from recnotebooks.distributed.training import WARMUP_STEPS, DistTrainResult, train_local
from recnotebooks.plan import round_robin
from recnotebooks.run_report import TRAIN_REPORT_KEYS, train_report
from recnotebooks.timing import PHASES

# the package's `launch` is the function
launch_module = importlib.import_module("recnotebooks.distributed.launch")

ROOT = Path(__file__).resolve().parent.parent
STEPS, BATCH = 4, 128
COMMON = ["--preset", "tiny", "--steps", str(STEPS), "--batch-size", str(BATCH), "--seed", "1"]


@pytest.fixture(scope="module")
def single_process_losses() -> list[float]:
    """The losses of ``recnb train --preset tiny`` (built by the CLI itself), every step logged."""
    args = cli.build_parser().parse_args(["train", *COMMON, "--device", "cpu"])
    trainer, _ = train_command.trainer(train_settings(args), torch.device("cpu"))
    trainer.config.log_every, trainer.config.progress, trainer.eval_data = 1, False, None
    trainer.fit(STEPS)
    return [h["loss"] for h in trainer.history]


@pytest.fixture(scope="module")
def single_process_report() -> dict[str, object]:
    """``recnb train --preset tiny --json``'s report (the CLI's own function; 10 eval batches)."""
    return train_command.train(
        train_settings(cli.build_parser().parse_args(["train", *COMMON, "--device", "cpu", "--json"]))
    )


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
    for data in (r, one):  # one printer for both
        printer(train_command.train_lines)(data)
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
    res = train_local(cfg, round_robin(cfg, 2, "row_wise"), 2, STEPS, BATCH, 1, eval_batches=10,
                      timeout_s=300.0)  # fmt: skip
    for key in ("auc", "logloss", "ne"):
        assert getattr(res, key) == pytest.approx(single_process_report[key], abs=1e-4), key
    assert res.losses == pytest.approx(single_process_report["losses"], abs=1e-4)
    with pytest.raises(ValueError, match="eval_batches"):
        train_local(cfg, round_robin(cfg, 2), 2, STEPS, BATCH, eval_batches=-1)


def test_train_report_names_a_missing_or_unknown_key() -> None:
    full = dict.fromkeys(TRAIN_REPORT_KEYS)
    assert list(train_report(**full)) == list(TRAIN_REPORT_KEYS)
    with pytest.raises(TypeError, match="missing keys \\['losses'\\]"):
        train_report(**{k: v for k, v in full.items() if k != "losses"})
    with pytest.raises(TypeError, match="unknown keys \\['extra'\\]"):
        train_report(**full, extra=1)


@contextlib.contextmanager
def _rendezvous_store(timeout_s: float) -> Iterator[int]:
    """The two torchrun nodes' c10d rendezvous store, served by this process on 127.0.0.1 (the
    launcher's own store: a socket bound to a port the system picks); yields its port.

    The port is held from its bind until the nodes are done, so nothing else on the machine can
    take it in between. A port found free, released and bound again by node 0 seconds later (as
    torchrun starts) can meanwhile be taken by any program that binds or connects (another torchrun
    job's store, a gloo pair, an outgoing connection's source port); node 0 then fails with
    EADDRINUSE and node 1 joins whatever listens there. Both nodes join as clients (``is_host=false``)."""
    store, port = launch_module._master_store(timeout_s)
    try:
        yield port
    finally:
        del store


#: Seconds a torchrun node waits for the other to join the rendezvous before it gives up.
JOIN_TIMEOUT_S = 45


def _start_node(node: int, port: int, run_id: str, join_timeout_s: int, log: Path) -> subprocess.Popen:
    """One torchrun "node" of one rank on 127.0.0.1, a client of the rendezvous store at ``port``,
    in a session of its own (its agent and worker are stopped together), writing to ``log``."""
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
           "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
           "--rdzv-id", run_id, "--rdzv-conf", f"join_timeout={join_timeout_s},is_host=false",
           "--local-addr", "127.0.0.1", "-m", "recnotebooks", "train", "--distributed", *COMMON,
           "--json"]  # fmt: skip
    with open(log, "w") as out:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop_node(p: subprocess.Popen) -> None:
    """SIGABRT to the node's whole process group (its agent and worker write their stacks to the
    log first), SIGKILL 10 s later; reaped."""
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def _torchrun_nodes(tmp_path: Path, nodes: tuple[int, ...] = (0, 1), join_timeout_s: int = JOIN_TIMEOUT_S,
                    timeout_s: float = 300) -> list[str]:  # fmt: skip
    """Run ``recnb train --distributed`` as two torchrun "nodes" of one rank each on 127.0.0.1
    (only those in ``nodes`` are started); returns each node's output.

    This process hosts the rendezvous store (:func:`_rendezvous_store`), under a rendezvous id
    of this call's own: no other job on the machine can take the port or share the id. A node
    whose peer does not join gives up after ``join_timeout_s``; anything still running after
    ``timeout_s`` gets SIGABRT first, so that every Python process of the node (agent and
    worker, ``PYTHONFAULTHANDLER``) writes its threads' stacks to the node's log. Any failure
    fails the test with both nodes' logs."""
    procs, logs = {}, {n: tmp_path / f"node{n}.out" for n in (0, 1)}
    hung: list[int] = []
    run_id = f"recnb-test-{uuid.uuid4().hex[:12]}"
    with _rendezvous_store(timeout_s + 60) as port:
        try:
            for node in nodes:
                procs[node] = _start_node(node, port, run_id, join_timeout_s, logs[node])
            deadline = time.monotonic() + timeout_s
            for node, p in procs.items():
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    hung.append(node)
        finally:
            for p in procs.values():
                _stop_node(p)
    texts = [logs[n].read_text() if n in procs else "(not started)" for n in (0, 1)]
    failed = [n for n, p in procs.items() if p.returncode != 0]
    if hung or failed or len(procs) < 2:
        what = f"node(s) {hung} still running after {timeout_s:g} s" if hung else f"node(s) {failed} failed"
        pytest.fail(f"two torchrun nodes: {what}\n" + "\n".join(
            f"----- node {n} (exit code {procs[n].returncode if n in procs else None}) -----\n{t[-6000:]}"
            for n, t in enumerate(texts)))  # fmt: skip
    return texts


def test_two_torchrun_nodes_match_single_process(single_process_losses, tmp_path) -> None:
    texts = _torchrun_nodes(tmp_path)
    for node, text in enumerate(texts):
        r = json.loads(text[text.index("{") : text.rindex("}") + 1])
        assert (r["world_size"], r["rank"]) == (2, node)
        assert r["losses"] == pytest.approx(single_process_losses, abs=1e-4)


def test_no_other_program_can_take_the_rendezvous_port_before_the_nodes_join() -> None:
    """The store's port is bound from the moment it is chosen (a port found free and released
    would be bindable here, by anything on the machine, until node 0 bound it), on 127.0.0.1."""
    with _rendezvous_store(10.0) as port:
        for host in ("127.0.0.1", "0.0.0.0"):
            with socket.socket() as other, pytest.raises(OSError) as taken:
                other.bind((host, port))
            assert taken.value.errno == errno.EADDRINUSE, host
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # and it is the store that answers there


def test_a_node_that_never_joins_fails_fast_with_both_logs(tmp_path) -> None:
    """Only node 0 starts: it gives up after the join timeout (not the 15 minutes torchrun waits by
    default), and the failure shows both nodes' logs."""
    with pytest.raises(pytest.fail.Exception) as info:
        _torchrun_nodes(tmp_path, nodes=(0,), join_timeout_s=10, timeout_s=120)
    message = str(info.value)  # "failed", not "still running": it gave up by itself, not at the guard
    assert "node(s) [0] failed" in message and "----- node 1 (exit code None) -----\n(not started)" in message
    assert "RendezvousTimeoutError" in message  # node 0's own log says why


def test_a_rank_ends_when_its_torchrun_agent_is_killed(tmp_path) -> None:
    """A node killed (its torchrun agent, SIGKILL) takes its rank with it: torchrun starts the rank
    in a session of its own, so without the rank's watch on its agent it trained on, orphaned, for
    the rest of the run (seen beside the suite: a killed two-node job's ranks trained for 20 minutes)."""
    if not _procs.HAS_PROC:
        pytest.skip("reads processes from /proc")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", "-m",
           "recnotebooks", "train", "--distributed", "--preset", "tiny", "--steps", "1000000"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(tmp_path / "node.out", "w") as out:
        agent = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    rank = None
    try:
        deadline = time.monotonic() + 240
        while rank is None or not _procs.has_socket(rank):
            assert agent.poll() is None and time.monotonic() < deadline, (tmp_path / "node.out").read_text()
            time.sleep(0.2)  # until its rank is joining the group (past its entry, training next)
            ranks = [p for p in _procs.children(agent.pid) if "recnotebooks" in _procs.command(p)]
            rank = next(iter(ranks), None)
        agent.kill()
        agent.wait()
        deadline = time.monotonic() + 60
        while _procs.alive(rank) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _procs.alive(rank), f"rank {rank} still running 60 s after its agent was killed"
    finally:
        for pid in (agent.pid, rank):
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
        agent.wait()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--world-size", "10000"], "--world-size must be at most"),
        (["--world-size", "2", "--batch-size", "63"], "--batch-size must be divisible by the world size 2"),
        (["--world-size", "2", "--distributed"], "not both"),
        (["--sharding", "row_wise"], "needs --world-size N or --distributed"),
        (["--world-size", "2", "--resume", "x.pt"], "--resume: resume 'x.pt' does not exist"),
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
    plan = round_robin(cfg, 3)
    assert [s.rank for s in plan.shards] == [k % 3 for k in range(cfg.num_tables)]
    assert len(round_robin(cfg, 2, "row_wise").shards) == 2 * cfg.num_tables
    with pytest.raises(ValueError, match="sharding"):
        round_robin(cfg, 2, "diagonal")
    res = DistTrainResult(2, "gloo", 2, 8, [0.7, 0.6], 100.0, 0.01, {"all_to_all": 0.001},
                          [{"rank": 0, "component": "all_to_all", "bytes_sent": 8}])  # fmt: skip
    assert (res.auc, res.logloss, res.ne) == (None, None, None)  # not evaluated
    rows = res.rows()
    assert {r["kind"] for r in rows} == {"loss", "phase", "comm"}
    assert all(r["source"] == "measured" for r in rows)


def test_train_local_reports_the_timed_steps_collectives_and_cpu_per_phase() -> None:
    cfg, steps = preset("tiny"), WARMUP_STEPS + 2
    r = train_local(cfg, round_robin(cfg, 2), 2, steps, 64, sparse_optimizer="sgd")
    calls = {(row["collective"], row["direction"]): row["calls"] for row in r.timed_comm}
    # per step: lengths, ids and pooled vectors forward, their gradients back; DDP's one bucket
    assert calls == {("all_to_all", "forward"): 3 * 2, ("all_to_all", "backward"): 2,
                     ("all_reduce", "forward"): 2}  # fmt: skip
    everything = {(row["collective"], row["direction"]): row for row in r.comm if row["rank"] == 0}
    for row in r.timed_comm:
        whole = everything[(row["collective"], row["direction"])]
        assert whole["calls"] == row["calls"] * steps // 2
        assert 0 < row["bytes_sent"] < whole["bytes_sent"] and 0 <= row["seconds"] <= whole["seconds"]
    assert set(PHASES) <= set(r.phase_cpu) and all(v >= 0 for v in r.phase_cpu.values())
    assert r.phase_cpu["data"] > 0 and r.phase_cpu["embedding_forward"] > 0
    # the step's main-thread CPU holds every phase's (thread_time ticks are coarse: a little slack)
    assert r.thread_cpu_seconds_per_step >= 0.9 * sum(r.phase_cpu.values()) > 0
