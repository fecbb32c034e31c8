"""Run a function on N ranks of this machine, from a notebook or a script.

``launch(fn, 2, ...)`` starts two processes (``torch.multiprocessing``, the ``spawn`` start
method), joins them in a process group (gloo on CPU; NCCL when asked and CUDA has a GPU per
rank), calls ``fn(ctx, *args, **kwargs)`` on each with a :class:`RankContext`, and gathers
every rank's return value, :class:`~recnotebooks.distributed.comm.CommLog` and warnings into a
:class:`LaunchResult`.

The rendezvous is a ``TCPStore`` served by this process on a socket bound to 127.0.0.1 only
(port 0: the system picks a free port, so two launches never race for one; a preferred port
in ``RECNB_MASTER_PORT`` is used when free, another one otherwise). Gloo and NCCL are told to
use the loopback interface.

``fn`` must be a module-level function of an importable module: spawned processes import it
by name, and a notebook cannot pickle its own functions (put workers in a ``.py`` file next
to the notebook, or call a runner of the library such as
:func:`recnotebooks.distributed.training.train_local`).

Faults end the launch within ``timeout_s`` (startup included) with a :class:`LaunchError`
naming the failing rank: a rank that raises (its traceback text), exits or is killed (its exit
code or signal), never joins the rendezvous, or does not finish. The other ranks get a short
grace to finish or report, then are terminated, killed if need be and joined: no process is
left behind (each rank also exits if this process dies).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import pickle
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing import connection
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ..checks import check_choice, check_float, check_int, show
from ..threads import choose_threads, rank_threads
from ._rank import HOST, RankContext, RankSpec, _rank_main
from .comm import CommLog
from .peers import HANG_ENV as HANG_ENV  # the fault tests set it
from .peers import is_peer_lost

__all__ = ["HOST", "LaunchError", "LaunchResult", "RankContext", "RankFailure", "launch", "max_world_size"]

#: Seconds the other ranks get to finish or report once one rank has failed.
GRACE_S = 2.0
#: Seconds at the end of ``timeout_s`` kept for stopping the ranks (a quarter of a shorter
#: timeout): half for SIGTERM to take effect, the rest for SIGKILL and reaping.
STOP_RESERVE_S = 2.0
PORT_ENV = "RECNB_MASTER_PORT"
#: Longest ``timeout_s`` a launch takes: a week (a longer one overflows the rendezvous store's
#: ``timedelta`` and ``select``'s timeout, and a hung rank would hold the machine for good).
MAX_TIMEOUT_S = 7 * 24 * 3600.0


def max_world_size() -> int:
    """The most local ranks :func:`launch` starts: four per CPU core."""
    return 4 * (os.cpu_count() or 1)


@dataclass
class RankFailure:
    """One rank's failure: ``kind`` is raised, exited, never_joined, timeout or stopped (by us,
    after another rank failed); ``traceback`` is the rank's traceback text when it raised."""

    rank: int
    kind: str
    message: str
    traceback: str = ""


@dataclass
class LaunchResult:
    """Per-rank return values, comm logs and warnings of one launch (index = rank)."""

    world_size: int
    backend: str
    port: int
    values: list[Any]
    logs: list[CommLog | None]
    warnings: list[list[str]]
    failures: list[RankFailure] = field(default_factory=list)
    seconds: float = 0.0
    pids: list[int] = field(default_factory=list)
    #: CPU threads each rank ran on, and why the thread policy lowered them (``""``: it did not)
    threads: int = 0
    busy: str = ""

    @property
    def ok(self) -> bool:
        """Whether every rank returned."""
        return not self.failures

    def rows(self) -> list[dict[str, Any]]:
        """Every rank's comm-log rows (tidy, ``source="measured"``), rank by rank."""
        return [row for log in self.logs if log is not None for row in log.rows()]


class LaunchError(RuntimeError):
    """A launch in which some rank failed; ``result`` holds what the ranks did return."""

    def __init__(self, message: str, result: LaunchResult) -> None:
        super().__init__(message)
        self.result = result
        self.failures = result.failures


# ----- checks before any process starts ------------------------------------------------------
def _check_fn(fn: object) -> Callable[..., Any]:
    if not callable(fn):
        raise TypeError(f"fn must be a module-level function, got {show(fn)} ({type(fn).__name__})")
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    hint = (
        "spawned ranks import fn by name, and a notebook cannot pickle its own functions: define it "
        "at the top level of a .py module (e.g. next to the notebook) and import it from there"
    )
    if not module or not qualname or "<" in qualname:
        raise ValueError(
            f"fn must be a module-level function of an importable module, got {show(fn)}; {hint}"
        )
    main = sys.modules.get("__main__")
    if module == "__main__" and not os.path.isfile(getattr(main, "__file__", None) or ""):
        raise ValueError(f"fn {qualname!r} is defined in this notebook or interpreter session; {hint}")
    try:
        found: Any = importlib.import_module(module) if module != "__main__" else main
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"fn {module}.{qualname} cannot be imported by name ({e}); {hint}") from None
    if found is not fn:
        raise ValueError(f"fn {module}.{qualname} is not the object found under that name; {hint}")
    return fn


def _check_picklable(name: str, value: object) -> None:
    try:
        pickle.dumps(value)
    except Exception as e:  # noqa: BLE001 - any pickling failure is the caller's to fix
        raise TypeError(f"{name} must be picklable to reach the ranks, got {show(value)}: {e}") from None


# ----- the rendezvous -----------------------------------------------------------------------
def _listen(preferred: int) -> socket.socket:
    """A listening socket on 127.0.0.1: the preferred port if free, else one the system picks."""
    for port in (preferred, 0) if preferred else (0,):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((HOST, port))
            sock.listen(128)
            return sock
        except OSError as e:
            sock.close()
            if e.errno != errno.EADDRINUSE or port == 0:
                raise
    raise AssertionError("unreachable")


def _master_store(timeout_s: float) -> tuple[Any, int]:
    env = os.environ.get(PORT_ENV, "")
    preferred = check_int(PORT_ENV, int(env) if env.strip().isdigit() else 0, lo=0, hi=65535)
    sock = _listen(preferred)
    port = sock.getsockname()[1]
    store = dist.TCPStore(
        HOST,
        port,
        None,
        is_master=True,
        timeout=timedelta(seconds=timeout_s),
        wait_for_workers=False,
        master_listen_fd=sock.fileno(),
    )
    sock.detach()  # the store's server owns (and closes) the socket now
    return store, port


# ----- the parent -----------------------------------------------------------------------------
def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


class _Ranks:
    """The parent's view of the running ranks: messages in, failures noted, processes stopped."""

    def __init__(self, procs: list[Any], conns: list[Any]) -> None:
        self.procs, self.conns = procs, dict(enumerate(conns))
        world = len(procs)
        self.pending = set(range(world))
        self.arrived: set[int] = set()
        self.values: list[Any] = [None] * world
        self.logs: list[CommLog | None] = [None] * world
        self.warnings: list[list[str]] = [[] for _ in range(world)]
        self.failures: list[RankFailure] = []
        self.failed_at: float | None = None
        self.pids: list[int | None] = []

    def _read(self, rank: int) -> None:
        conn = self.conns[rank]
        while rank in self.conns and conn.poll():
            try:
                message = pickle.loads(conn.recv_bytes())
            except EOFError:
                del self.conns[rank]
                conn.close()
                return
            except Exception as e:  # noqa: BLE001 - e.g. a value whose class cannot be imported here
                message = (
                    "error",
                    f"a result that cannot be read here: {type(e).__name__}: {e}",
                    "",
                    None,
                    [],
                )
            kind = message[0]
            if kind == "arrived":
                self.arrived.add(rank)
            elif kind == "ok":
                self.values[rank], self.logs[rank], self.warnings[rank] = message[1:]
                self.pending.discard(rank)
            else:
                text, tb, self.logs[rank], self.warnings[rank] = message[1:]
                self.failures.append(RankFailure(rank, "raised", f"rank {rank} raised {text}", tb))
                self.pending.discard(rank)

    def run_until(self, deadline: float) -> None:
        """Read messages and watch exits until every rank is done, one fails (then a grace), or
        ``deadline``."""
        limit = deadline
        while self.pending:
            if self.failed_at is not None:
                limit = min(limit, self.failed_at + GRACE_S)
            left = limit - time.monotonic()
            if left <= 0:
                return
            sentinels = {self.procs[r].sentinel: r for r in self.pending}
            ready = connection.wait([*self.conns.values(), *sentinels], timeout=left)
            for rank, conn in list(self.conns.items()):
                if conn in ready:
                    self._read(rank)
            for s in ready:
                rank = sentinels.get(s)
                if rank is None or rank not in self.pending:
                    continue
                if rank in self.conns:
                    self._read(rank)
                if rank in self.pending:
                    self.procs[rank].join(0.1)
                    code = self.procs[rank].exitcode
                    self.failures.append(RankFailure(rank, "exited", f"rank {rank} {_exit_text(code)}"))
                    self.pending.discard(rank)
            if self.failures and self.failed_at is None:
                self.failed_at = time.monotonic()

    def give_up(self, timeout_s: float) -> None:
        """Failures for the ranks still pending; then the causes first, the ranks they stopped after."""
        missing = sorted(r for r in self.pending if r not in self.arrived)
        first = self.failures[0].rank if self.failures else None
        for r in sorted(self.pending):
            if first is not None:
                text, kind = f"rank {r} was stopped after rank {first} failed", "stopped"
            elif r in missing:
                text, kind = (
                    f"rank {r} never joined the rendezvous within timeout_s={timeout_s:g} s",
                    "never_joined",
                )
            elif missing:
                text, kind = (
                    f"rank {r} waited for rank(s) {missing} at the rendezvous and was stopped",
                    "stopped",
                )
            else:
                text, kind = f"rank {r} did not finish within timeout_s={timeout_s:g} s", "timeout"
            self.failures.append(RankFailure(r, kind, text))
        self.pending.clear()
        self.failures.sort(
            key=lambda f: f.kind == "stopped" or (f.kind == "raised" and is_peer_lost(f.message))
        )

    def stop(self, grace_s: float) -> None:
        """Terminate every rank still alive, kill those alive ``grace_s`` later; join them all."""
        self.pids = [p.pid for p in self.procs]
        started = [p for p in self.procs if p.pid is not None]
        for p in started:
            if p.is_alive():
                p.terminate()
        end = time.monotonic() + grace_s
        for p in started:
            p.join(max(0.0, end - time.monotonic()))
        for p in started:
            if p.is_alive():
                p.kill()
                p.join()
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()
        for p in self.procs:
            if p.pid is not None:
                p.close()


def _check_launch(
    fn: object, world_size: object, backend: object, timeout_s: object, args: tuple, kwargs: dict
) -> tuple[Callable[..., Any], int, str, float]:
    """:func:`launch`'s settings checked (``fn`` importable by the ranks, a GPU per rank for NCCL,
    picklable arguments), before any process starts."""
    fn = _check_fn(fn)
    world = check_int("world_size", world_size, lo=1, hi=max_world_size())
    backend = check_choice("backend", backend, ("gloo", "nccl"))
    timeout_s = check_float("timeout_s", timeout_s, lo=1.0, hi=MAX_TIMEOUT_S)
    if backend == "nccl" and (not torch.cuda.is_available() or torch.cuda.device_count() < world):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        raise ValueError(
            f"backend 'nccl' needs one CUDA device per rank: world_size={world}, {count} device(s)"
        )
    _check_picklable("args", args)
    _check_picklable("kwargs", kwargs)
    return fn, world, backend, timeout_s


def _spawn(
    fn: Callable[..., Any], specs: list[RankSpec], args: tuple, kwargs: dict
) -> tuple[list[Any], list[Any], list[Any]]:
    """One ``spawn`` process per rank (not started), each with a pipe back: the processes, the
    parent's ends and the ranks' ends (closed here once the processes start)."""
    context = mp.get_context("spawn")
    procs, conns, ends = [], [], []
    for spec in specs:
        receive, send = context.Pipe(duplex=False)
        target_args = (send, fn, spec, args, kwargs)
        procs.append(context.Process(target=_rank_main, args=target_args, name=f"recnb-rank-{spec.rank}"))
        conns.append(receive)
        ends.append(send)
    return procs, conns, ends


def _failure(fn: Callable[..., Any], result: LaunchResult) -> LaunchError:
    """The error of a failed launch: the first failure (the cause), the others, the traceback."""
    first = result.failures[0]
    lines = [
        f"launch of {fn.__module__}.{fn.__qualname__} on {result.world_size} rank(s) failed: {first.message}"
    ]
    lines += [f"  also: {f.message}" for f in result.failures[1:]]
    if first.traceback:
        lines += ["", f"traceback of rank {first.rank}:", first.traceback.rstrip()]
    return LaunchError("\n".join(lines), result)


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "gloo",
    timeout_s: float = 60.0,
    threads_per_rank: int | None = None,
    **kwargs: Any,
) -> LaunchResult:
    """Run ``fn(ctx, *args, **kwargs)`` on ``world_size`` local ranks; their results, in rank order.

    ``backend`` is ``"gloo"`` (CPU tensors) or ``"nccl"`` (one CUDA device per rank, ``ctx.device``).
    Each rank uses ``threads_per_rank`` CPU threads; ``None``: the thread policy's
    (:func:`recnotebooks.threads.rank_threads`: the cores other programs leave free, shared out
    evenly, at least one each; ``LaunchResult.threads`` and ``.busy`` say what it chose).
    Raises :class:`LaunchError` (with the partial :class:`LaunchResult` as ``.result``) naming
    the failing rank when any rank fails, within ``timeout_s`` seconds of the call;
    ``ValueError``/``TypeError`` before any process starts for bad settings (``world_size`` in
    ``[1, max_world_size()]``, ``timeout_s`` in ``[1, MAX_TIMEOUT_S]``).
    """
    start = time.monotonic()  # timeout_s counts from the call: the load probe below sleeps
    fn, world, backend, timeout_s = _check_launch(fn, world_size, backend, timeout_s, args, kwargs)
    choice = rank_threads(world) if threads_per_rank is None else choose_threads(threads_per_rank)
    reserve = min(STOP_RESERVE_S, 0.25 * timeout_s)
    deadline = start + timeout_s - reserve  # leaves time to stop the ranks
    store, port = _master_store(timeout_s)
    specs = [RankSpec(r, world, backend, port, timeout_s, os.getpid(), choice.threads) for r in range(world)]
    procs, conns, ends = _spawn(fn, specs, args, kwargs)
    ranks = _Ranks(procs, conns)
    try:
        for proc, send in zip(procs, ends, strict=True):
            proc.start()
            send.close()
        ranks.run_until(deadline)
        ranks.give_up(timeout_s)
    finally:
        for send in ends:
            send.close()
        ranks.stop(reserve / 2)
        del store
    busy = choice.describe() if choice.busy else ""
    result = LaunchResult(world, backend, port, ranks.values, ranks.logs, ranks.warnings, ranks.failures,
                          time.monotonic() - start, ranks.pids, choice.threads, busy)  # fmt: skip
    if result.failures:
        raise _failure(fn, result)
    return result
