"""A clear word when a peer is lost (recnotebooks.distributed.peers): real gloo errors recognised,
the message's wording, and real runs in which a rank (local ranks) or a node (two torchrun nodes on
127.0.0.1) is killed mid-run: the survivor exits within the bound with exit status 75 and a few
lines naming the lost rank, the step and the command that starts the run again; no traceback."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import _procs
import pytest
import torch.distributed as dist

from recnotebooks import cli
from recnotebooks.commands import distributed as dist_command
from recnotebooks.commands.settings import train_settings
from recnotebooks.distributed import peers
from recnotebooks.distributed.launch import LaunchError, LaunchResult, RankFailure
from recnotebooks.distributed.peers import (
    KILL_ENV,
    PEER_LOST_EXIT,
    PeerLostError,
    is_peer_lost,
    lost_in_launch,
    lost_report,
    watch_peers,
)

ROOT = Path(__file__).resolve().parent.parent
#: Seconds from the loss of a rank (its process gone) to the survivor's exit that the tests allow.
#: The survivor fails at once (the lost process's sockets are closed by its OS and it is blocked
#: in the same step's collective); then the launcher's 2 s grace and the stopping of the ranks, or
#: torchrun's agent noticing its worker's exit (0.1 s). Measured: a few seconds. 30 s leaves room
#: for a machine loaded 5-fold (2 cores shared by a test suite and other jobs): a correctness
#: bound (no hang until a collective's 600 s timeout), not a speed figure.
EXIT_BOUND_S = 30.0

#: What a surviving rank caught, in real runs (torch 2.13.0+cpu, gloo, 2 ranks on 127.0.0.1):
#: ``python tests/_peer_errors.py`` (rank 1 SIGKILLed before or during rank 0's collective, or
#: alive and silent past a group's 2 s timeout) and the survivor of ``recnb train --world-size 2``
#: whose rank 1 was killed (``RECNB_DEBUG=1``), as :func:`~recnotebooks.distributed.peers.is_peer_lost`
#: reads them ("type: text").
CAPTURED: dict[str, str] = {
    "all_reduce_dead": (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Conne"
        "ction closed by peer [127.0.0.1]:19873. This is typically caused by a remote worker crashi"
        "ng. Check the logs of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f"
    ),
    "all_reduce_dies": (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Conne"
        "ction closed by peer [127.0.0.1]:15234. This is typically caused by a remote worker crashi"
        "ng. Check the logs of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f"
    ),
    "all_to_all_dies": (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Conne"
        "ction closed by peer [127.0.0.1]:24214. This is typically caused by a remote worker crashi"
        "ng. Check the logs of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f"
    ),
    "send_dead": (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read "
        "error [127.0.0.1]:64723: Connection reset by peer. This is typically caused by a remote wo"
        "rker hanging or bugs in the application. Check the logs of the remote worker before report"
        "ing an error. GLHF! \U0001f3d6\ufe0f"
    ),
    "barrier_dies": (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Conne"
        "ction closed by peer [127.0.0.1]:10672. This is typically caused by a remote worker crashi"
        "ng. Check the logs of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f"
    ),
    "ddp_backward_dies": (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Conne"
        "ction closed by peer [127.0.0.1]:19670. This is typically caused by a remote worker crashi"
        "ng. Check the logs of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f"
    ),
    # recnb train --world-size 2 --preset tiny, rank 1 killed at step 3 (RECNB_DEBUG=1): rank 0 in
    # the sharded embeddings' all-to-all (recnotebooks/distributed/comm.py, finish)
    "recnb_train_all_to_all": (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read "
        "error [127.0.0.1]:58548: Connection reset by peer. This is typically caused by a remote wo"
        "rker hanging or bugs in the application. Check the logs of the remote worker before report"
        "ing an error. GLHF! \U0001f3d6\ufe0f"
    ),
    "recv_timeout": (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:"
        "78] Timed out waiting 2000ms for recv operation to complete"
    ),
}

#: Errors that are a rank's own, not a lost peer.
NOT_LOST = [
    "ValueError: --data file x.tsv line 12: expected 40 tab-separated fields, got 3",
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x13 and 16x64)",
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.",
    "KeyError: 'dense'",
]


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_captured_lost_peer_errors_are_recognised(name: str) -> None:
    assert is_peer_lost(CAPTURED[name]), name


@pytest.mark.parametrize("text", NOT_LOST)
def test_a_ranks_own_errors_are_not_a_lost_peer(text: str) -> None:
    assert not is_peer_lost(text)


def test_the_cause_chain_is_read() -> None:
    try:
        try:
            raise RuntimeError(CAPTURED.get("all_reduce_dead", "Connection closed by peer [127.0.0.1]:1"))
        except RuntimeError as inner:
            raise ValueError("wrapped") from inner
    except ValueError as e:
        assert is_peer_lost(e)
    assert not is_peer_lost(ValueError("wrapped"))


def test_watch_peers_names_the_other_rank_and_the_step() -> None:
    with pytest.raises(PeerLostError) as info, watch_peers(0, 2):
        peers.note_step(37, 100)
        raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by "
                           "peer [127.0.0.1]:41234")  # fmt: skip
    e = info.value
    assert (e.lost, e.step, e.steps) == ((1,), 37, 100)
    assert str(e) == ("rank 1 of 2 was lost at step 37 of 100 (the only other rank; rank 0 saw: "
                      "Connection closed by peer [127.0.0.1]:41234)")  # fmt: skip
    assert isinstance(e.__cause__, RuntimeError)
    with pytest.raises(ValueError, match="mine"), watch_peers(0, 2):
        raise ValueError("mine")  # a rank's own error goes through unchanged
    peers.note_step(3, 4)  # outside a watch: nothing


def test_survivors_check_in_on_the_store_and_the_silent_ranks_are_named() -> None:
    store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, timeout=timedelta(seconds=10),
                          wait_for_workers=False)  # fmt: skip
    other = threading.Thread(target=lambda: (time.sleep(0.3), store.set("recnb/peers/0/alive/1", "yes")))
    other.start()
    assert peers._not_checked_in(store, 0, 4, 1.5) == [2, 3]  # rank 1 checked in late, 2 and 3 never
    other.join()
    assert peers._not_checked_in(None, 0, 4, 1.5) is None  # no store: the error's text is all there is


def test_the_report_says_where_the_checkpoint_is_and_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    how = "did not check in on the store within 3 s"
    e = PeerLostError(0, 4, [2], how, 12, 50, "Connection reset by peer")
    command = ["recnb", "train", "--world-size", "4", "--steps", "50", "--resume", "old.ckpt"]
    text = lost_report(e, None, None, command)
    assert text.splitlines() == [
        "rank 2 of 4 was lost at step 12 of 50 (did not check in on the store within 3 s; rank 0 saw: "
        "Connection reset by peer); the run stopped.",
        "  last checkpoint: none was being written (add --checkpoint PATH --checkpoint-every N to be able "
        "to resume)",
        "  start again with: recnb train --world-size 4 --steps 50 --resume old.ckpt",
        f"  exit status {PEER_LOST_EXIT}; RECNB_DEBUG=1 also prints the error's traceback",
    ]
    ckpt = tmp_path / "run ckpt"
    assert "none saved yet at " + str(ckpt) in lost_report(e, str(ckpt), 10, command)
    ckpt.write_text("x")
    lines = lost_report(e, str(ckpt), 10, command).splitlines()
    assert lines[1] == f"  last checkpoint: {ckpt} (the last one --checkpoint saved, saved every 10 steps)"
    assert lines[2] == f"  resume with: recnb train --world-size 4 --steps 50 --resume '{ckpt}'"
    torchrun = ["torchrun", "--nnodes", "2", "-m", "recnotebooks", "train", "--distributed"]
    assert "resume with (on every node, each with its own --node-rank): torchrun --nnodes 2" in lost_report(
        e, str(ckpt), None, torchrun
    )
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "3")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    restarting = lost_report(e, str(ckpt), None, torchrun).splitlines()
    assert restarting[1] == "  torchrun restarts this node's ranks: 2 more restart(s) under --max-restarts"
    two = PeerLostError(1, 3, [0, 2], "x", 100, 100, "")
    assert str(two) == "ranks 0, 2 of 3 were lost at step 100 of 100 (after the last step) (x)"


def _launch_error(failures: list[RankFailure]) -> LaunchError:
    return LaunchError("x", LaunchResult(2, "gloo", 1, [None, None], [None, None], [[], []], failures))


def test_a_launch_whose_rank_died_is_a_lost_peer() -> None:
    seen = PeerLostError(0, 2, [1], "the only other rank", 3, 9, "Connection reset by peer [127.0.0.1]:5")
    survivor = RankFailure(0, "raised", f"rank 0 raised PeerLostError: {seen}")
    lost = lost_in_launch(_launch_error([RankFailure(1, "exited", "rank 1 was killed by SIGKILL"), survivor]))
    assert lost is not None
    assert str(lost) == ("rank 1 of 2 was lost at step 3 of 9 (it was killed by SIGKILL; rank 0 saw: "
                         "Connection reset by peer [127.0.0.1]:5)")  # fmt: skip
    never = lost_in_launch(_launch_error([RankFailure(1, "never_joined", "rank 1 never joined the rendezvous "
                                                      "within timeout_s=600 s")]))  # fmt: skip
    assert str(never) == ("rank 1 of 2 was lost before training started (it never joined the rendezvous "
                          "within timeout_s=600 s)")  # fmt: skip
    own = RankFailure(1, "raised", "rank 1 raised ValueError: bad line")
    assert lost_in_launch(_launch_error([own, survivor])) is None  # a rank's own error is not a loss


def test_debug_prints_the_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    s = train_settings(cli.build_parser().parse_args(["train", "--world-size", "2", "--preset", "tiny"]))
    try:
        raise RuntimeError("Connection reset by peer")
    except RuntimeError as cause:
        lost = PeerLostError(0, 2, [1], "the only other rank", 1, 4, "Connection reset by peer")
        monkeypatch.delenv(peers.DEBUG_ENV, raising=False)
        error = dist_command._peer_lost(s, lost, cause)
        assert error.exit_code == PEER_LOST_EXIT and "Traceback" not in capsys.readouterr().err
        monkeypatch.setenv(peers.DEBUG_ENV, "1")
        dist_command._peer_lost(s, lost, cause)
        assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_the_kill_hook_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("1", "a:3", "1:3:disk", "-1:2"):
        monkeypatch.setenv(KILL_ENV, bad)
        with pytest.raises((ValueError, TypeError), match=KILL_ENV), watch_peers(0, 2):
            pass
    monkeypatch.setenv(KILL_ENV, "1:3:node")
    assert peers._kill_setting(1) == (3, True) and peers._kill_setting(0) == (None, False)


# ----- real runs ---------------------------------------------------------------------------------
STEPS = "1000000"  # far more than run before the kill: the run ends by the loss only
TRAIN = ["train", "--preset", "tiny", "--steps", STEPS, "--batch-size", "96", "--seed", "1"]


def _assert_short_and_clear(err: str, lost: str, step: int, command: str) -> None:
    lines = err.strip().splitlines()
    assert "Traceback" not in err and "GLHF" not in err, err
    assert len(lines) <= 6, err
    assert lines[0].startswith(f"recnb train: error: {lost} was lost at step {step} of {STEPS} ("), err
    assert "none was being written (add --checkpoint PATH --checkpoint-every N" in err, err
    assert f"  start again with{command}" in err, err
    assert f"exit status {PEER_LOST_EXIT}" in err


def _wait_gone(pids: list[int], proc: subprocess.Popen, deadline: float) -> float:
    """The time one of ``pids`` ended (polled every 0.05 s); fails if ``proc`` ends first."""
    while all(_procs.alive(p) for p in pids):
        assert proc.poll() is None and time.monotonic() < deadline, "no rank was lost"
        time.sleep(0.05)
    return time.monotonic()


def test_a_local_rank_killed_mid_run_is_named_with_its_step(tmp_path: Path) -> None:
    if not _procs.HAS_PROC:
        pytest.skip("reads processes from /proc")
    env = {**os.environ, KILL_ENV: "1:3", "OMP_NUM_THREADS": "1"}
    env.pop(peers.DEBUG_ENV, None)
    argv = [*TRAIN, "--world-size", "2"]
    with open(tmp_path / "err", "w") as err:
        p = subprocess.Popen([sys.executable, "-m", "recnotebooks", *argv], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        ranks: list[int] = []
        while len(ranks) < 2:  # the two spawned ranks (not the resource tracker)
            assert p.poll() is None and time.monotonic() < deadline, (tmp_path / "err").read_text()
            time.sleep(0.05)
            ranks = [c for c in _procs.children(p.pid) if "spawn_main" in _procs.command(c)]
        lost_at = _wait_gone(ranks, p, deadline)
        code = p.wait(timeout=EXIT_BOUND_S + 60)
        took = time.monotonic() - lost_at
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    err_text = (tmp_path / "err").read_text()
    assert code == PEER_LOST_EXIT, err_text
    print(f"the launcher exited {took:.1f} s after rank 1 was lost")
    assert took <= EXIT_BOUND_S, f"exited {took:.1f} s after the rank was lost\n{err_text}"
    _assert_short_and_clear(err_text, "rank 1 of 2", 3, ": recnb " + " ".join(argv))
    assert "(it was killed by SIGKILL; rank 0 saw: " in err_text


def _node(node: int, port: int, run_id: str, log_dir: Path, env: dict[str, str]) -> subprocess.Popen:
    """One torchrun "node" on 127.0.0.1: node 0 runs ranks 0 and 1, node 1 rank 2 (the workers'
    output in ``log_dir``)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
           "--nproc-per-node", str(2 - node), "--rdzv-backend", "c10d",
           "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
           "--rdzv-conf", "join_timeout=60,is_host=false", "--local-addr", "127.0.0.1",
           "--log-dir", str(log_dir), "--redirects", "3", "-m", "recnotebooks", *TRAIN,
           "--distributed"]  # fmt: skip
    with open(log_dir.parent / f"node{node}.out", "w") as out:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip


def test_a_torchrun_node_killed_mid_run_is_named_with_its_step(tmp_path: Path) -> None:
    """Two torchrun nodes, ranks 0 and 1 on node 0, rank 2 on node 1. Node 1 dies at step 3 (its
    worker SIGKILLs its agent, then itself); each of node 0's workers finds on the store that
    rank 2 did not check in, says so in a few lines and exits 75; its agent's summary shows those
    lines as the root cause."""
    from recnotebooks.distributed.launch import _master_store

    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    env.pop(peers.DEBUG_ENV, None)
    store, port = _master_store(300)
    procs: dict[int, subprocess.Popen] = {}
    try:
        run_id = f"recnb-test-{uuid.uuid4().hex[:12]}"
        for node in (0, 1):
            (tmp_path / f"logs{node}").mkdir()
            node_env = {**env, KILL_ENV: "2:3:node"} if node == 1 else env
            procs[node] = _node(node, port, run_id, tmp_path / f"logs{node}", node_env)
        lost_at = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            procs[1].wait(timeout=240)
            lost_at = time.monotonic()
        code = procs[0].wait(timeout=EXIT_BOUND_S + 60)
        took = time.monotonic() - (lost_at or 0)
    finally:
        for p in procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        del store
    agent = (tmp_path / "node0.out").read_text()
    workers = sorted((tmp_path / "logs0").rglob("stderr.log"))
    assert lost_at is not None and procs[1].returncode == -signal.SIGKILL, agent
    assert len(workers) == 2, agent
    print(f"node 0 exited {took:.1f} s after node 1 was lost")
    assert code != 0 and took <= EXIT_BOUND_S, f"{took:.1f} s\n{agent}"
    every_node = " (on every node, each with its own --node-rank): torchrun --nnodes 2"
    for rank, log in enumerate(workers):  # .../attempt_0/{local rank}/stderr.log
        err_text = log.read_text()
        _assert_short_and_clear(err_text, "rank 2 of 3", 3, every_node)
        host = socket.gethostname()
        how = f"(on node 1 ({host}); did not check in on the store within 3 s; rank {rank} saw: "
        assert how in err_text, err_text
    # the agent's failure summary: the worker's exit status and its lines as the root cause
    assert f"exitcode  : {PEER_LOST_EXIT}" in agent and "rank 2 of 3 was lost at step 3" in agent, agent
