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

from .comm import CommLog

HOST = "127.0.0.1"
#: A rank with this rank number (as a string) never joins the rendezvous: the fault tests' hook.
HANG_ENV = "RECNB_LAUNCH_NEVER_JOIN_RANK"


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


def _rank_main(
    conn: Any,
    fn: Callable[..., Any],
    rank: int,
    world: int,
    backend: str,
    port: int,
    timeout_s: float,
    parent: int,
    threads: int,
    args: tuple,
    kwargs: dict,
) -> None:
    """A spawned rank: join the group, run ``fn``, send back its value (or its exception)."""
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    os.environ.update(
        {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world)}
    )
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        os.environ.setdefault(var, _loopback())
    torch.set_num_threads(threads)  # the launcher's thread policy (recnotebooks.threads.rank_threads)
    log = CommLog(rank)
    caught: list[warnings.WarningMessage] = []

    def send(message: tuple) -> None:
        conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    reported: list[bool] = []

    def report(e: BaseException) -> None:
        reported.append(True)
        text = "".join(traceback.format_exception(e))
        with contextlib.suppress(Exception):
            send(("error", f"{type(e).__name__}: {e}", text, log, texts()))

    def texts() -> list[str]:
        return [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            if os.environ.get(HANG_ENV) == str(rank):
                time.sleep(10 * timeout_s + 60)
            timeout = timedelta(seconds=timeout_s)
            store = dist.TCPStore(HOST, port, None, is_master=False, timeout=timeout)
            send(("arrived",))
            device = torch.device("cpu")
            if backend == "nccl":
                device = torch.device("cuda", rank)
                torch.cuda.set_device(device)
            options = {"device_id": device} if backend == "nccl" else {}
            dist.init_process_group(
                backend, store=store, rank=rank, world_size=world, timeout=timeout, **options
            )
            try:
                value = fn(RankContext(rank, world, backend, device, log), *args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - reported before the group goes down, so
                report(e)  # the errors it causes on the other ranks arrive after this one
                raise
            finally:
                with contextlib.suppress(Exception):
                    dist.destroy_process_group()
        for w in caught:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        try:
            send(("ok", value, log, texts()))
        except Exception as e:  # noqa: BLE001 - an unpicklable return value
            raise TypeError(f"the return value of rank {rank} cannot be pickled: {e}") from None
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
        if not reported:
            report(e)
    finally:
        conn.close()
