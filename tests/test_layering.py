"""The dependency arrows of ARCHITECTURE.md, read from every import of every module.

:data:`MAY_IMPORT` is the one statement of the arrows: for each *unit* of the package (a
top-level module, a subpackage, or a module singled out inside one), the units it may
import. ARCHITECTURE.md prints the same table (``test_architecture_md_states_these_rules``
keeps them equal). Every ``import`` and ``from ... import`` counts, at module level or
inside a function, absolute or relative. Importing a submodule also runs its packages'
``__init__`` files; those implicit edges are not counted (they point from a package to its
own modules).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "recnotebooks"

#: unit -> the units (or single modules, such as ``perf.calibrate``) it imports directly. A unit
#: may also import whatever those may import (the arrows chain: ``config`` <- ``data`` <-
#: ``train`` <- ``measure``), and its own modules.
MAY_IMPORT: dict[str, frozenset[str]] = {
    k: frozenset(v)
    for k, v in {
        "checks": set(),
        "config": {"checks"},
        "sparse": {"checks"},
        "threads": {"checks"},
        "timing": {"checks", "threads"},
        "metrics": {"checks"},
        "checkpoint": {"checks"},
        "text": {"checks"},
        "__init__": {"config", "sparse"},
        "doctor": {"__init__"},
        "data": {"config", "sparse"},
        "kernels": {"checks", "sparse"},
        "nn": {"config", "sparse", "timing", "kernels", "text"},
        "cache": {"config", "sparse", "nn"},
        "train": {"data", "nn", "metrics", "checkpoint"},
        "plan": {"config"},
        "published": {"config"},
        "perf": {"config", "plan", "published", "sparse"},
        "distributed": {"cache", "plan"},
        "distributed.rank_data": {"distributed", "data"},
        "distributed.resume": {"distributed", "train"},
        "distributed.training": {
            "distributed",
            "train",
            "distributed.hstu_training",
            "distributed.rank_data",
            "distributed.resume",
        },
        "distributed.hstu_training": {"distributed", "train"},
        "run_report": set(),
        "measure": {"train", "doctor", "perf", "text"},
        "measure.mixed_precision": {"train"},
        "measure.table_batching": {"nn"},
        "measure.cache_overhead": {"cache"},
        "measure.calibrate": {"perf", "measure"},
        "measure.validate": {"measure.calibrate"},
        "measure.collective_timing": {"distributed"},
        "measure.calibrate_comm": {"perf", "measure.collective_timing"},
        "measure.validate_dist": {"measure.validate", "measure.calibrate_comm", "distributed.training"},
        "viz": {
            "measure",
            "measure.calibrate",
            "measure.calibrate_comm",
            "measure.table_batching",
            "measure.cache_overhead",
            "cache",
            "distributed.training",
        },
        "lab": {"viz"},
        # the command line: parser, settings, one module per family of commands, the report printer
        "commands": {
            "__init__",
            "perf",
            "cache",
            "run_report",
            "distributed.training",
            "measure.validate",
            "measure.calibrate_comm",
            "measure.validate_dist",
        },
        # re-exports of names that moved to commands (one release)
        "cache.commands": {"commands"},
        "measure.commands": {"commands"},
        "cli": {"commands"},
        "__main__": {"cli"},
    }.items()
}


def allowed(unit: str) -> frozenset[str]:
    """Everything ``unit`` may import: its entries and, transitively, theirs."""
    seen: set[str] = set()
    todo = list(MAY_IMPORT[unit])
    while todo:
        entry = todo.pop()
        if entry not in seen:
            seen.add(entry)
            todo += MAY_IMPORT[entry] if entry in MAY_IMPORT else MAY_IMPORT[unit_of(entry)]
    return frozenset(seen)


#: The sentences of ARCHITECTURE.md, spelled out (already implied by MAY_IMPORT; kept so a
#: future widening of MAY_IMPORT cannot silently break them).
MUST_NOT_IMPORT: dict[str, frozenset[str]] = {
    "checks": frozenset({"*"}),
    "kernels": frozenset({"nn", "data", "train"}),
    "nn": frozenset({"data", "train"}),
    "perf": frozenset({"viz", "measure", "cache", "distributed", "train", "nn", "data", "kernels"}),
    "published": frozenset({"perf", "plan", "viz", "measure", "cache", "distributed", "train", "nn", "data"}),
    "distributed": frozenset({"perf", "measure"}),
}

#: Modules whose units are planned (later issues); their rules above reserve their places.
PLANNED: tuple[str, ...] = ()

#: The app modules of ``viz`` (the explorers, the live chart: every module not listed in
#: VIZ_SHARED) are peers: one may build on another's public controls and helpers only where
#: APP_MAY_IMPORT lists it, and never imports another's private names.
VIZ_SHARED = ("viz", "viz.app", "viz.charts", "viz.controls", "viz.theme", "viz.tidy", "viz.reference",
              "viz.export")  # fmt: skip
APP_MAY_IMPORT = {"viz.efficiency": frozenset({"viz.architecture"})}


def is_app(module: str) -> bool:
    """Whether ``module`` is an app module of ``viz`` (not one of its shared helpers)."""
    return module.startswith("viz.") and module not in VIZ_SHARED


# ----- reading imports ---------------------------------------------------------------------
def module_name(path: Path, root: Path) -> str:
    """``recnotebooks/perf/cost.py`` -> ``perf.cost``; a package's ``__init__`` -> its name
    (the root package's -> ``__init__``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def package_modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _short(dotted: str) -> str | None:
    if dotted == PACKAGE:
        return "__init__"
    return dotted[len(PACKAGE) + 1 :] if dotted.startswith(PACKAGE + ".") else None


def imports_of(source: str, module: str, is_package: bool, known: Iterable[str]) -> set[tuple[str, str]]:
    """``(imported module, imported name)`` pairs of the package's own modules found anywhere in
    ``source`` (the module ``module``); the name is ``""`` for ``import x``."""
    known = set(known)
    here = module.split(".") if module != "__init__" else []
    package = here if is_package else here[:-1]
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {(s, "") for a in node.names if (s := _short(a.name)) is not None}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else [])) or "__init__"
            else:
                target = _short(node.module or "")
                if target is None:
                    continue
            for alias in node.names:
                sub = alias.name if target == "__init__" else f"{target}.{alias.name}"
                found.add((sub, "") if sub in known else (target, alias.name))
    return found


def import_graph(root: Path) -> dict[str, set[tuple[str, str]]]:
    """Every module of the package under ``root`` -> what it imports from the package."""
    modules = package_modules(root)
    return {
        m: imports_of(p.read_text(), m, p.name == "__init__.py", modules) - {(m, "")}
        for m, p in modules.items()
    }


# ----- the rules ---------------------------------------------------------------------------
def unit_of(module: str) -> str:
    """The unit of MAY_IMPORT a module belongs to: its longest listed prefix."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in MAY_IMPORT:
            return ".".join(parts[:n])
    raise KeyError(
        f"module {module!r} belongs to no unit of MAY_IMPORT: add it to the rules and ARCHITECTURE.md"
    )


def _matches(target: str, entries: Iterable[str]) -> bool:
    return any(e == "*" or target == e or target.startswith(e + ".") or unit_of(target) == e for e in entries)


def violations(graph: Mapping[str, Iterable[tuple[str, str]]]) -> list[str]:
    """Every import that breaks a rule, as ``"src -> dst: why"``."""
    found = []
    for src, edges in sorted(graph.items()):
        unit = unit_of(src)
        for dst, name in sorted(edges):
            dst_unit = unit_of(dst)
            where = f"{src} -> {dst}" + (f".{name}" if name else "")
            if dst_unit != unit and _matches(dst, MUST_NOT_IMPORT.get(unit, ())):
                found.append(f"{where}: {unit} must never import {dst_unit}")
            elif dst_unit != unit and not (dst in allowed(unit) or dst_unit in allowed(unit)):
                found.append(f"{where}: {unit} may import only {sorted(allowed(unit))}")
            elif is_app(src) and is_app(dst) and dst not in APP_MAY_IMPORT.get(src, ()):
                found.append(f"{where}: explorers are peers; share through {', '.join(VIZ_SHARED[1:])}")
            if name.startswith("_") and not name.startswith("__") and dst != src:
                same_package = dst.rsplit(".", 1)[0] == src.rsplit(".", 1)[0] and "." in src
                if not same_package or (is_app(src) and is_app(dst)):
                    found.append(f"{where}: private name imported from another package or explorer")
    return found


def cycles(graph: Mapping[str, Iterable[tuple[str, str]]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    succ = {m: sorted({d for d, _ in e if d in graph}) for m, e in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return sorted(groups)


def rules_markdown() -> str:
    """The rule table as ARCHITECTURE.md prints it."""
    lines = ["| unit | may import |", "|---|---|"]
    for unit, allowed in MAY_IMPORT.items():
        planned = " (planned)" if unit in PLANNED else ""
        lines.append(f"| `{unit}`{planned} | {', '.join(f'`{a}`' for a in sorted(allowed)) or 'nothing'} |")
    return "\n".join(lines)


# ----- the package obeys them --------------------------------------------------------------
GRAPH = import_graph(ROOT / PACKAGE)


def test_the_package_keeps_the_arrows() -> None:
    assert violations(GRAPH) == []


def test_no_import_cycles() -> None:
    assert cycles(GRAPH) == []


def test_every_module_has_a_unit_and_every_unit_exists_or_is_planned() -> None:
    units = {unit_of(m) for m in GRAPH}
    assert set(MAY_IMPORT) - units <= set(PLANNED)


def test_the_reader_sees_real_imports() -> None:
    """The reader finds lazy, relative and ``from . import`` imports (guards the checker itself)."""
    assert "perf.cost" in {dst for dst, _ in GRAPH["measure.calibrate"]}  # imported inside a function
    src = "from . import cost\nfrom .plan import Plan\nfrom .. import config\n"
    src += "def f():\n    import recnotebooks.nn\n"
    known = {"perf.cost", "perf.plan", "config", "nn", "perf"}
    expected = {("perf.cost", ""), ("perf.plan", "Plan"), ("config", ""), ("nn", "")}
    assert imports_of(src, "perf.x", False, known) == expected
    assert imports_of("from . import nothing_here\n", "perf", True, known) == {("perf", "nothing_here")}


def test_architecture_md_states_these_rules() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    assert rules_markdown() in text, (
        "ARCHITECTURE.md's rule table differs from the test's; paste:\n" + rules_markdown()
    )


# ----- the checker can fail ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"nn.dlrm": {("data.batch", "Batch")}}, "nn must never import data"),
        ({"nn.dlrm": {("train", "Trainer")}}, "nn must never import train"),
        ({"perf.cost": {("viz.charts", "")}}, "perf must never import viz"),
        ({"perf.cost": {("measure", "measure_step")}}, "perf must never import measure"),
        ({"perf.memory": {("cache.lru", "")}}, "perf must never import cache"),
        ({"distributed.shard": {("perf.cost", "estimate")}}, "distributed must never import perf"),
        ({"perf.cost": {("train", "Trainer")}}, "perf must never import train"),
        ({"perf.jobs": {("distributed.launch", "launch")}}, "perf must never import distributed"),
        ({"kernels.fused": {("nn.embedding", "")}}, "kernels must never import nn"),
        ({"checks": {("config", "")}}, "checks must never import config"),
        ({"config": {("sparse", "JaggedBatch")}}, "config may import only"),
        ({"cache.lru": {("train", "")}}, "cache may import only"),
        ({"viz.charts": {("lab", "")}}, "viz may import only"),
        ({"viz.servers": {("viz.traffic", "traffic_app")}}, "explorers are peers"),
        ({"viz.some_new_explorer": {("viz.servers", "SERVERS")}}, "explorers are peers"),
        ({"viz.efficiency": {("viz.architecture", "_helper")}}, "private name"),
        ({"lab": {("perf.cost", "_gemm_time")}}, "private name"),
    ],
)
def test_checker_flags_a_fake_violation(graph: dict[str, set[tuple[str, str]]], expected: str) -> None:
    found = violations(graph)
    assert len(found) == 1 and expected in found[0], found


def test_checker_allows_what_the_rules_allow() -> None:
    fine = {
        "distributed.shard": {("plan", "Plan"), ("nn.embedding", ""), ("cache", "")},
        "cache.lru": {("nn.rows", ""), ("checks", "check_int")},
        "measure.calibrate": {("measure", "measure_step"), ("perf.cost", "estimate")},
        "nn.optim": {("kernels.fused", "fused_step")},
        "viz.efficiency": {("viz.architecture", "measure_here"), ("perf.hardware", "hardware")},
        "data.synthetic": {("data.skew", "_mix64")},
        "lab": {("viz.servers", "explore_servers")},
    }
    assert violations(fine) == []


def test_cycle_finder_finds_a_fake_cycle() -> None:
    graph = {"a": {("b", "")}, "b": {("c", "x")}, "c": {("a", "")}, "d": {("a", "")}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {("b", "")}, "b": set()}) == []
