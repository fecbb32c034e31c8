"""Processes of this machine as Linux's /proc shows them (the tests that watch processes skip
without it)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

HAS_PROC = Path("/proc/self/stat").exists()


def _stat(pid: int | str) -> list[bytes]:
    """The fields of ``/proc/PID/stat`` after the command's name: state, ppid, ..."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return stat[stat.rindex(b")") + 2 :].split()


def children(pid: int) -> list[int]:
    """The live (not zombie) child processes of ``pid``."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError, ValueError):
            state, ppid = _stat(name)[:2]
            if int(ppid) == pid and state != b"Z":
                found.append(int(name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    with contextlib.suppress(OSError, IndexError):
        return _stat(pid)[0] != b"Z"
    return False


def command(pid: int) -> str:
    """``pid``'s command line, or ``""`` once it is gone."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    return ""


def has_socket(pid: int) -> bool:
    """Whether ``pid`` holds a socket open, ``False`` once it is gone. A process opens and closes
    files while its ``/proc/PID/fd`` is read: a descriptor listed and closed before its link is
    read is skipped, not an error (reading it raised ``FileNotFoundError`` once in a full run)."""
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd).startswith("socket:"):
                    return True
    return False
