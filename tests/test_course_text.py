"""What a learner reads agrees with what runs: 00's course map names every app by the title it
shows, 00 defines the course's words, every notebook ends by naming the next one, and 04 defines
its two collectives before it uses them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
#: every app factory a notebook may call, built cheaply (nothing measured) to read its title
FACTORIES = {
    "lookup_traffic_app": ("recnotebooks.viz.traffic", {}),
    "architecture_explorer": ("recnotebooks.viz.architecture", {"measure": False}),
    "efficiency_explorer": ("recnotebooks.viz.efficiency", {"measure": False}),
    "advantage_explorer": ("recnotebooks.viz.advantage", {}),
    "cache_explorer": ("recnotebooks.viz.cache", {"measure": False, "num_ids": 10_000}),
    "sharding_explorer": ("recnotebooks.viz.sharding", {}),
    "server_explorer": ("recnotebooks.viz.servers", {}),
    "job_planner": ("recnotebooks.viz.planner", {}),
    "hstu_explorer": ("recnotebooks.viz.hstu", {"measure": False}),
}
GLOSSARY = (
    "HBM",
    "UVM",
    "all-to-all",
    "all-reduce",
    "row-wise Adagrad",
    "NE",
    "AMP / TF32",
    "load factor",
    "FAE",
    "token",
    "jagged",
    "HSTU",
    "MFU",
)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _map_rows() -> dict[str, str]:
    """00's course map: notebook number -> its row."""
    text = next(
        _source(c) for c in _cells(NOTEBOOKS / "00_start_here.ipynb") if "## 3. The map" in _source(c)
    )
    table = text.split("## 3. The map", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): line for line in table.splitlines() if (m := re.match(r"\|\s*\**(\d\d) ", line))}


@pytest.fixture(scope="module")
def titles() -> dict[str, str]:
    """factory -> the title its app shows."""
    import importlib

    return {
        name: getattr(importlib.import_module(mod), name)(**kw).title for name, (mod, kw) in FACTORIES.items()
    }


def test_the_course_map_lists_every_notebook_and_names_its_apps_as_they_are_titled(
    titles: dict[str, str],
) -> None:
    rows = _map_rows()
    assert sorted(rows) == [p.name[:2] for p in PATHS]  # every notebook, no other
    for path in PATHS:
        code = "\n".join(_source(c) for c in _cells(path) if c["cell_type"] == "code")
        used = [f for f in FACTORIES if re.search(rf"\b{f}\(", code)]
        for factory in used:  # the app the notebook shows, under the name it shows
            assert titles[factory] in rows[path.name[:2]], (path.name, titles[factory])
    readme = (NOTEBOOKS / "README.md").read_text()
    for title in titles.values():  # the README's table names them the same way
        assert title in readme, title


def test_the_course_map_is_current() -> None:
    text = "".join(_source(c) for c in _cells(NOTEBOOKS / "00_start_here.ipynb"))
    for stale in ("run today", "arrive with", "later parts of the package"):
        assert stale not in text, stale


def test_00_defines_the_words_of_the_course() -> None:
    text = "".join(
        _source(c) for c in _cells(NOTEBOOKS / "00_start_here.ipynb") if c["cell_type"] == "markdown"
    )
    section = text.split("Words you will meet", 1)[1]
    for term in GLOSSARY:
        assert re.search(rf"^- \*\*{re.escape(term)}\*\*", section, re.M), term


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_every_notebook_ends_naming_the_next(path: Path) -> None:
    last = _cells(path)[-1]
    text = _source(last)
    assert last["cell_type"] == "markdown" and text.startswith("**Next:")
    n = int(path.name[:2])
    following = [p for p in PATHS if int(p.name[:2]) == n + 1]
    if following:
        assert f"**Next: notebook {n + 1:02d}** (`{following[0].name}`)" in text
    else:  # the last notebook points back to the map
        assert "00_start_here.ipynb" in text


def test_04_defines_all_to_all_and_all_reduce_before_using_them() -> None:
    text = "\n".join(_source(c) for c in _cells(NOTEBOOKS / "04_multi_gpu_sharding.ipynb"))
    for word in ("all-to-all", "all-reduce"):
        first = text.lower().index(word)
        assert text[first - 2 : first + len(word) + 2] == f"**{word}**", (
            word
        )  # its first use is its definition
        definition = text[first : text.index(". ", first)]
        assert "every GPU" in definition or "all GPUs" in definition, definition
    assert text.lower().index("all-reduced") > text.lower().index("all-reduce")
