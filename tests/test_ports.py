"""No code of the package or its benchmarks hands its ranks a port it found free and released.

A port found free (bound to port 0, read, closed) and bound again by a rank later can meanwhile
be taken by anything on the machine that binds or connects (another job's store, a gloo pair, an
outgoing connection's source port): the ranks then fail with EADDRINUSE or join a stranger's
store. Ranks rendezvous through a store whose port is held from its bind on
(``recnotebooks.distributed.launch``), or on an in-memory store when there is one rank; only
torchrun sets ``MASTER_PORT``, and the package reads it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: ``MASTER_PORT`` given a value: ``MASTER_PORT=...`` (keyword), ``"MASTER_PORT": ...`` (dict),
#: ``environ["MASTER_PORT"] = ...``.
SETS_PORT = re.compile(r"""\bMASTER_PORT\s*=(?!=)|["']MASTER_PORT["']\s*(:|\]\s*=(?!=))""")


def test_sets_port_finds_each_way_of_setting_it() -> None:
    for line in ('os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))',
                 'env = {"MASTER_PORT": str(p)}', "os.environ['MASTER_PORT'] = str(p)"):  # fmt: skip
        assert SETS_PORT.search(line), line
    for line in ('os.environ["MASTER_PORT"]', 'if os.environ.get("MASTER_PORT") == "1":', '("MASTER_PORT",)'):
        assert not SETS_PORT.search(line), line


def test_no_rank_is_handed_a_released_port() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for folder in ("recnotebooks", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SETS_PORT.search(line)
    ]
    assert not found, "MASTER_PORT set from a port found free (use distributed.launch):\n" + "\n".join(found)
