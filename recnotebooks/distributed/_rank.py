"""One spawned rank of :func:`recnotebooks.distributed.launch.launch`: join the group, run the function,
send back its value or its exception (the parent's side is in :mod:`recnotebooks.distributed.launch`)."""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..threads import THREADS_ENV
from .comm import CommLog
from .peers import HANG_ENV, watch_peers

HOST = "127.0.0.1"


@dataclass
class RankContext:
    """What a rank's function receives: who it is, where its tensors go and its comm log."""

    rank: int
    world_size: int
    backend: str
    device: torch.device
    log: CommLog


def _loopback() -> str:
    names = [name for _, name in socket.if_nameindex()] if hasattr(socket, "if_nameindex") else []
    return next((n for n in names if n.startswith("lo")), "lo")


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)


def exit_with_parent(parent: int) -> None:
    """End this process (exit code 1, within half a second) once its parent ``parent`` is gone:
    a rank outlives neither the launcher that spawned it nor the torchrun agent that started it
    (a killed agent's worker is orphaned otherwise: torchrun starts it in a session of its own,
    so it trains on, with its peers, for the rest of the run). A daemon thread watches."""
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="recnb-exit-with-parent").start()


@dataclass(frozen=True)
class RankSpec:
    """Who a spawned rank is and how it joins: its rank of ``world``, the backend, the rendezvous
    port, the timeout, the parent's pid (it exits when the parent dies) and its CPU threads."""

    rank: int
    world: int
    backend: str
    port: int
    timeout_s: float
    parent: int
    threads: int


class _Reply:
    """The rank's side of the pipe: its messages, the warnings it caught, and whether it has
    already reported a failure (the first one is the one that counts)."""

    def __init__(self, conn: Any, log: CommLog) -> None:
        self.conn, self.log = conn, log
        self.caught: list[warnings.WarningMessage] = []
        self.reported = False

    def send(self, message: tuple) -> None:
        self.conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def texts(self) -> list[str]:
        return [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in self.caught]

    def report(self, e: BaseException) -> None:
        self.reported = True
        text = "".join(traceback.format_exception(e))
        with contextlib.suppress(Exception):
            self.send(("error", f"{type(e).__name__}: {e}", text, self.log, self.texts()))


def _settle(spec: RankSpec) -> None:
    """The rank's environment: torchrun's variables, the loopback interface for gloo and NCCL,
    the launcher's thread policy (:func:`recnotebooks.threads.rank_threads`), and a watch that
    ends the rank if the parent dies."""
    exit_with_parent(spec.parent)
    rank, world = str(spec.rank), str(spec.world)
    os.environ.update({"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": world, "LOCAL_WORLD_SIZE": world})
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        os.environ.setdefault(var, _loopback())
    if os.environ.get(THREADS_ENV):  # a count fixed for the run: this rank's share of it, for
        os.environ[THREADS_ENV] = str(spec.threads)  # what the rank measures with the policy too
    torch.set_num_threads(spec.threads)


def _join(spec: RankSpec, reply: _Reply) -> torch.device:
    """Join the rendezvous (say so to the parent) and the process group; this rank's device."""
    if os.environ.get(HANG_ENV) == str(spec.rank):
        time.sleep(10 * spec.timeout_s + 60)
    timeout = timedelta(seconds=spec.timeout_s)
    store = dist.TCPStore(HOST, spec.port, None, is_master=False, timeout=timeout)
    reply.send(("arrived",))
    device = torch.device("cpu")
    if spec.backend == "nccl":
        device = torch.device("cuda", spec.rank)
        torch.cuda.set_device(device)
    options = {"device_id": device} if spec.backend == "nccl" else {}
    dist.init_process_group(
        spec.backend, store=store, rank=spec.rank, world_size=spec.world, timeout=timeout, **options
    )
    # Every rank connected before any runs: a rank whose function talks to no other (or fails at
    # once) closes its connections when it ends, and a peer still connecting to it (gloo's
    # connectFullMesh, slow on a busy machine) then fails with "Connection closed by peer".
    dist.barrier()
    return device


def _run(spec: RankSpec, reply: _Reply, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``fn``'s value on this rank, in the group (taken down after, whatever happens)."""
    device = _join(spec, reply)
    try:  # a lost peer is a PeerLostError (the launcher knows which rank died: no check-in wait)
        with watch_peers(spec.rank, spec.world, wait_s=0):
            return fn(RankContext(spec.rank, spec.world, spec.backend, device, reply.log), *args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - reported before the group goes down, so
        reply.report(e)  # the errors it causes on the other ranks arrive after this one
        raise
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def _rank_main(conn: Any, fn: Callable[..., Any], spec: RankSpec, args: tuple, kwargs: dict) -> None:
    """A spawned rank: join the group, run ``fn``, send back its value (or its exception)."""
    _settle(spec)
    reply = _Reply(conn, CommLog(spec.rank))
    try:
        with warnings.catch_warnings(record=True) as caught:
            reply.caught = caught
            warnings.simplefilter("default")
            value = _run(spec, reply, fn, args, kwargs)
        for w in caught:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        try:
            reply.send(("ok", value, reply.log, reply.texts()))
        except Exception as e:  # noqa: BLE001 - an unpicklable return value
            raise TypeError(f"the return value of rank {spec.rank} cannot be pickled: {e}") from None
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
        if not reply.reported:
            reply.report(e)
    finally:
        conn.close()
