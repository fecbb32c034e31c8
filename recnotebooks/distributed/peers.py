"""A clear word when a peer is lost: every surviving rank stops, in bounded time, saying which rank
was lost, at which step, where the last checkpoint is and the command that resumes the run.

A rank whose peer disappears (its process killed, its node down) learns it from the collective it
is in: gloo raises a ``RuntimeError`` (``DistBackendError``, ``DistNetworkError``) whose text says
"Connection reset by peer", "Connection closed by peer", "Broken pipe" or, when the peer went
silently, "Timed out waiting ...ms for recv operation". :func:`is_peer_lost` is the one place
that recognises these texts (the launcher sorts its failures with it too).

:func:`watch_peers` wraps a rank's work: such an error becomes a :class:`PeerLostError` naming

* the lost rank(s): with 2 ranks, the other one; with more, the ranks that did not check in on
  the rendezvous store within :data:`PEER_WAIT_S` (every survivor writes a key there when it sees
  the loss); if the store is gone too (it lived on the lost node), the peer's address from the
  error text; under torchrun also its node and host (every rank writes them on the store as it
  starts);
* the step: the training loop reports each step it starts (:func:`note_step`); the ranks run in
  lockstep (every step has collectives over all of them), so it is the step the lost rank was in.

``recnb train`` turns it into a few lines and exit status :data:`PEER_LOST_EXIT` (:func:`lost_report`):
local ranks (``--world-size N``) are watched by the launcher, which names a rank that died and
takes the step from a survivor's error (:func:`lost_in_launch`); under torchrun every surviving
rank prints its own lines, and hands them to torchrun's error file so that the agent's summary
shows them as the root cause (:func:`tell_torchrun`). ``RECNB_DEBUG=1`` adds the traceback.

**The bound.** A killed process's connections are closed by its operating system, so a survivor
blocked in a collective with it fails at once; it then takes at most :data:`PEER_WAIT_S` more
(more than 2 ranks under torchrun), and the launcher :data:`~recnotebooks.distributed.launch.GRACE_S`
plus the stopping of the others. A node that disappears without closing its connections (power,
network) is noticed when the collective times out: the process group's timeout
(``timeout_s`` of :func:`~recnotebooks.distributed.training.train_torchrun`, 600 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..checks import parse_int

__all__ = [
    "DEBUG_ENV",
    "HANG_ENV",
    "KILL_ENV",
    "PEER_LOST_EXIT",
    "PEER_WAIT_S",
    "PeerLostError",
    "command_line",
    "debugging",
    "is_peer_lost",
    "lost_in_launch",
    "note_step",
    "lost_report",
    "tell_torchrun",
    "watch_peers",
]

#: Exit status of a run stopped because a peer was lost: ``EX_TEMPFAIL`` of BSD's sysexits.h
#: ("a temporary failure ... the user is invited to retry", https://man.freebsd.org/cgi/man.cgi?sysexits),
#: distinct from 1 (an error) and 2 (bad input).
PEER_LOST_EXIT = 75
#: Seconds a survivor of more than 2 ranks waits for the others to check in on the store.
PEER_WAIT_S = 3.0
#: Set (to anything but ``""`` or ``0``): a lost peer's message also prints the error's traceback.
DEBUG_ENV = "RECNB_DEBUG"
#: ``RANK:STEP`` (``RANK:STEP:node``): that rank kills itself (and its parent: its torchrun agent,
#: a node going down) with SIGKILL as it starts that step. The fault tests' hook.
KILL_ENV = "RECNB_KILL_AT_STEP"
#: A rank with this rank number (as a string) never joins the rendezvous
#: (:mod:`recnotebooks.distributed.launch`'s ranks). The fault tests' other hook.
HANG_ENV = "RECNB_LAUNCH_NEVER_JOIN_RANK"

#: What an error says when the rank only saw another rank go away (lower case): gloo's TCP
#: transport (third_party/gloo/gloo/transport/tcp/pair.cc: "Connection closed by peer", "Read
#: error ... Connection reset by peer", write errors "Broken pipe", "Read timeout"), its timeouts
#: ("Timed out waiting 600000ms for recv operation to complete"), torch's network errors, NCCL's
#: aborted communicators and remote errors, and this module's own error.
_LOST_TEXTS = ("connection reset by peer", "connection closed by peer", "broken pipe", "socket closed",
               "connection refused", "no route to host", "network is unreachable", "read timeout",
               "remote worker", "remote process exited", "ncclremoteerror", "communicator was aborted",
               "distnetworkerror", "peerlosterror")  # fmt: skip
_TIMEOUT = re.compile(r"timed out waiting \d+ ?ms for (recv|send) operation", re.I)
#: A peer's address in gloo's messages: ``[127.0.0.1]:41234``
_ADDRESS = re.compile(r"\[([0-9A-Za-z.:%-]+)\]:(\d+)")
_STEP = re.compile(r" at step (\d+) of (\d+)")
_SAW = re.compile(r"; rank \d+ saw: (.*)\)$", re.S)


def _texts(error: BaseException | str) -> Iterator[str]:
    """The error's type name and text, then its causes' (``raise ... from``, or raised while handling)."""
    if isinstance(error, str):
        yield error
        return
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield f"{type(e).__name__}: {e}"
        e = e.__cause__ or e.__context__


def is_peer_lost(error: BaseException | str) -> bool:
    """Whether ``error`` (an exception, its chain included, or its text) says only that another
    rank went away: a lost connection or a collective's timeout, not a failure of this rank's own."""
    for text in _texts(error):
        low = text.lower()
        if any(p in low for p in _LOST_TEXTS) or _TIMEOUT.search(text):
            return True
    return False


def _first_line(error: BaseException | str, limit: int = 160) -> str:
    """The first line of the peer-lost text in ``error``'s chain, without gloo's source location."""
    texts = list(_texts(error))
    text = next((t for t in texts if is_peer_lost(t)), texts[0] if texts else "")
    text = text.split(": ", 1)[1] if not isinstance(error, str) and ": " in text else text
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"\[[^\]\s]*\.(cc|cpp|h):\d+\]\s*", "", line)  # "[../gloo/transport/tcp/pair.cc:534] "
    line = line.split(". ", 1)[0]  # gloo adds "This is typically caused by a remote worker crashing. ..."
    return line if len(line) <= limit else line[: limit - 3] + "..."


class PeerLostError(RuntimeError):
    """Rank ``rank`` of ``world`` lost a peer: ``lost`` (the ranks known lost, ``()`` when unknown),
    found ``how``, at step ``step`` of ``steps`` (``None``: not known; ``when`` says it instead when
    given), after the error ``seen`` (its first line)."""

    def __init__(self, rank: int, world: int, lost: Sequence[int], how: str, step: int | None,
                 steps: int | None, seen: str = "", when: str = "") -> None:  # fmt: skip
        self.rank, self.world, self.lost, self.how = rank, world, tuple(lost), how
        self.step, self.steps, self.seen, self.when = step, steps, seen, when
        super().__init__(self.summary())

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.rank, self.world, self.lost, self.how, self.step, self.steps, self.seen, self.when)
        return type(self), args

    def where(self) -> str:
        """When it happened: ``"at step 37 of 100"`` (37 steps done), after the last step, or ``when``."""
        if self.when or self.step is None:
            return self.when or "at a step not known"
        if self.steps is not None and self.step >= self.steps:
            return f"at step {self.step} of {self.steps} (after the last step)"
        return f"at step {self.step} of {self.steps}"

    def summary(self) -> str:
        """One line: who was lost, when, how it is known, what this rank saw."""
        n = len(self.lost)
        if n:
            ranks = ", ".join(map(str, self.lost))
            head = f"rank{'s' * (n > 1)} {ranks} of {self.world} {'were' if n > 1 else 'was'} lost"
        else:
            head = f"a peer of rank {self.rank} (of {self.world}) was lost"
        saw = f"; rank {self.rank} saw: {self.seen}" if self.seen else ""
        return f"{head} {self.where()} ({self.how}{saw})"


# ----- the rank's side --------------------------------------------------------------------------
@dataclass
class _Watch:
    """The watched rank: who it is, how long it waits for the others' check-in, where it is."""

    rank: int
    world: int
    wait_s: float
    step: int | None = None
    steps: int | None = None
    kill_at: int | None = None
    kill_node: bool = False


_CURRENT: _Watch | None = None


def _kill_setting(rank: int) -> tuple[int | None, bool]:
    """``KILL_ENV`` for this rank: the step it dies at (``None``: it does not), and whether it
    takes its parent along."""
    value = os.environ.get(KILL_ENV, "").strip()
    if not value:
        return None, False
    parts = value.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "node"):
        raise ValueError(f"{KILL_ENV} must be RANK:STEP or RANK:STEP:node, got {value!r}")
    who, step = parse_int(KILL_ENV, parts[0], lo=0), parse_int(KILL_ENV, parts[1], lo=0)
    return (step, len(parts) == 3) if who == rank else (None, False)


def note_step(step: int, steps: int) -> None:
    """The training loop of this process starts step ``step`` of ``steps`` (``step == steps``:
    the steps are done). Nothing happens outside :func:`watch_peers`."""
    w = _CURRENT
    if w is None:
        return
    w.step, w.steps = step, steps
    if w.kill_at == step:
        sys.stdout.flush()
        sys.stderr.flush()
        if w.kill_node:
            os.kill(os.getppid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


def _default_store() -> Any:
    """The default process group's store (``None`` when there is none)."""
    with contextlib.suppress(Exception):
        from torch.distributed import distributed_c10d

        return distributed_c10d._get_default_store()
    return None


def _not_checked_in(store: Any, rank: int, world: int, wait_s: float) -> list[int] | None:
    """The ranks of ``world`` that did not check in on ``store`` within ``wait_s`` seconds (this
    rank checks in first); ``None`` when the store cannot be reached."""
    if store is None:
        return None
    try:
        store.set_timeout(timedelta(seconds=max(wait_s, 1.0)))
        store.set(_key("alive", rank), "yes")
        others = [q for q in range(world) if q != rank]
        deadline = time.monotonic() + wait_s
        while True:
            missing = [q for q in others if not store.check([_key("alive", q)])]
            if not missing or time.monotonic() >= deadline:
                return missing
            time.sleep(0.1)
    except Exception:  # noqa: BLE001 - the store went with the lost node: fall back on the error text
        return None


def _key(kind: str, rank: int) -> str:
    """A store key of this module's (one set per torchrun restart: the store outlives them)."""
    return f"recnb/peers/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{kind}/{rank}"


def _announce(rank: int) -> None:
    """Under torchrun: write this rank's node (``GROUP_RANK``) and host on the store, for the
    survivors of its loss to name them."""
    store = _default_store() if os.environ.get("TORCHELASTIC_RUN_ID") else None
    if store is not None:
        with contextlib.suppress(Exception):
            store.set(
                _key("node", rank), f"node {os.environ.get('GROUP_RANK', '?')} ({socket.gethostname()})"
            )


def _nodes(ranks: Sequence[int]) -> str:
    """Where ``ranks`` ran, as they wrote it on the store (:func:`_announce`): ``"on node 1 (host)"``,
    ``""`` when not known (outside torchrun, or the store went with them)."""
    store = _default_store() if ranks and os.environ.get("TORCHELASTIC_RUN_ID") else None
    if store is None:
        return ""
    try:
        store.set_timeout(timedelta(seconds=1))
        found = [store.get(_key("node", q)).decode() for q in ranks if store.check([_key("node", q)])]
    except Exception:  # noqa: BLE001 - the store is gone: the ranks are all there is to say
        return ""
    return "on " + ", ".join(dict.fromkeys(found)) if found else ""


def _identify(w: _Watch, error: BaseException) -> tuple[list[int], str]:
    """The lost ranks as far as ``w``'s rank can know them, and how it knows."""
    if w.world == 2:
        return [1 - w.rank], "the only other rank"
    if w.wait_s > 0:
        missing = _not_checked_in(_default_store(), w.rank, w.world, w.wait_s)
        if missing:
            return missing, f"did not check in on the store within {w.wait_s:g} s"
    address = next((m for t in _texts(error) if (m := _ADDRESS.search(t))), None)
    if address is not None:
        return [], f"rank {w.rank}'s connection to {address[1]}:{address[2]} failed"
    return [], "which rank is not known"


@contextlib.contextmanager
def watch_peers(rank: int, world: int, wait_s: float = PEER_WAIT_S) -> Iterator[None]:
    """Run the block as rank ``rank`` of ``world``: an error that says a peer was lost
    (:func:`is_peer_lost`) leaves it as a :class:`PeerLostError` (the error as its cause) naming
    the lost rank and the step (:func:`note_step`). ``wait_s``: how long a survivor of more than 2
    ranks waits for the others to check in on the store (0: no check-in; the launcher of local
    ranks knows which rank died)."""
    global _CURRENT
    kill_at, kill_node = _kill_setting(rank)
    outer, _CURRENT = _CURRENT, _Watch(rank, world, wait_s, kill_at=kill_at, kill_node=kill_node)
    w = _CURRENT
    if wait_s > 0:
        _announce(rank)
    try:
        yield
    except PeerLostError:
        raise
    except Exception as e:
        if not is_peer_lost(e):
            raise
        lost, how = _identify(w, e)
        where = _nodes(lost)
        how = f"{where}; {how}" if where else how
        raise PeerLostError(rank, world, lost, how, w.step, w.steps, _first_line(e)) from e
    finally:
        _CURRENT = outer


# ----- the launcher's and the command line's side ----------------------------------------------
def lost_in_launch(error: Any) -> PeerLostError | None:
    """A :class:`~recnotebooks.distributed.launch.LaunchError` as a lost peer: a rank that died
    (exited or was killed) or never joined, or ranks that only saw their peers go (the step is a
    survivor's, from its :class:`PeerLostError`); ``None`` when the first failure is a rank's own
    error (or a timeout)."""
    failures = list(getattr(error, "failures", []))
    if not failures:
        return None
    first = failures[0]
    died = first.kind in ("exited", "never_joined")
    if not died and not (first.kind == "raised" and is_peer_lost(first.message)):
        return None
    survivor = next((f for f in failures if f.kind == "raised" and is_peer_lost(f.message)), None)
    step = steps = None
    seen, noticed = "", first.rank
    if survivor is not None:
        noticed, text = survivor.rank, survivor.message.split(" raised ", 1)[-1]
        if found := _STEP.search(text):
            step, steps = int(found[1]), int(found[2])
        saw = _SAW.search(text)
        seen = saw[1] if saw else _first_line(text)
    world = error.result.world_size
    if not died:  # every failure a survivor's: no rank died by itself
        return PeerLostError(noticed, world, [], "a connection between ranks failed", step, steps, seen)
    how = "it " + first.message.split(f"rank {first.rank} ", 1)[-1]  # "it was killed by SIGKILL"
    when = "before training started" if first.kind == "never_joined" else ""
    return PeerLostError(noticed, world, [first.rank], how, step, steps, seen, when)


def command_line(argv: Sequence[str] | None = None) -> list[str]:
    """The command that started this run: ``recnb ARGS``, or under torchrun the agent's own command
    (read from ``/proc``; ``torchrun ... -m recnotebooks ARGS`` when it cannot be read)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not os.environ.get("TORCHELASTIC_RUN_ID"):
        return ["recnb", *args]
    with contextlib.suppress(OSError):
        agent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode(errors="replace")
        words = [w for w in agent.split("\0") if w]
        for i, word in enumerate(words):
            if word == "torch.distributed.run" or Path(word).name == "torchrun":
                return ["torchrun", *words[i + 1 :]]
    return ["torchrun", "...", "-m", "recnotebooks", *args]


def _with_resume(command: Sequence[str], checkpoint: str) -> list[str]:
    """``command`` with ``--resume checkpoint`` in place of any ``--resume`` it has."""
    out, skip = [], False
    for word in command:
        if skip:
            skip = False
        elif word == "--resume":
            skip = True
        elif not word.startswith("--resume="):
            out.append(word)
    return [*out, "--resume", checkpoint]


def _restarts_left() -> int:
    """How many more times torchrun restarts this node's ranks (``--max-restarts`` less the
    restarts done; 0 outside torchrun or when unreadable)."""
    with contextlib.suppress(ValueError):
        most = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0"))
        return max(0, most - int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    return 0


def lost_report(
    error: PeerLostError,
    checkpoint: str | None = None,
    checkpoint_every: int | None = None,
    command: Sequence[str] | None = None,
) -> str:
    """The few lines a survivor prints: who was lost and when, what it saw, where the last
    checkpoint is (the run's ``--checkpoint``) and the command that resumes the run (``command``,
    default :func:`command_line`, with ``--resume``) or starts it again."""
    command = list(command_line() if command is None else command)
    lines = [f"{error.summary()}; the run stopped."]
    left = _restarts_left()
    if left:
        lines.append(f"  torchrun restarts this node's ranks: {left} more restart(s) under --max-restarts")
    torchrun = command[:1] == ["torchrun"]
    where = " (on every node, each with its own --node-rank)" if torchrun else ""
    if checkpoint and os.path.exists(checkpoint):
        every = f", saved every {checkpoint_every} steps" if checkpoint_every else ""
        lines.append(f"  last checkpoint: {checkpoint} (the last one --checkpoint saved{every})")
        lines.append(f"  resume with{where}: {shlex.join(_with_resume(command, checkpoint))}")
    else:
        hint = "none was being written (add --checkpoint PATH --checkpoint-every N to be able to resume)"
        lines.append(f"  last checkpoint: {f'none saved yet at {checkpoint}' if checkpoint else hint}")
        lines.append(f"  start again with{where}: {shlex.join(command)}")
    lines.append(f"  exit status {PEER_LOST_EXIT}; {DEBUG_ENV}=1 also prints the error's traceback")
    return "\n".join(lines)


def debugging() -> bool:
    """Whether ``RECNB_DEBUG`` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


def tell_torchrun(text: str) -> None:
    """Write ``text`` to torchrun's error file for this worker (``TORCHELASTIC_ERROR_FILE``, in the
    format of torch.distributed.elastic's ``@record``), so that the agent's failure summary shows
    it as the root cause; nothing outside torchrun."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    info = {"py_callstack": text, "timestamp": str(int(time.time()))}
    data = {"message": {"message": text, "extraInfo": info}}
    with contextlib.suppress(OSError):
        Path(path).write_text(json.dumps(data))
