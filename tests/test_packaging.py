"""environment.yml and pyproject.toml declare the same dependencies."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"pytorch": "torch"}


def _norm(spec: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", spec)
    assert m, spec
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def conda_deps() -> dict[str, str]:
    deps: dict[str, str] = {}
    in_deps = False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if line.startswith("dependencies:"):
            in_deps = True
            continue
        m = re.match(r"^  - (.+)$", line)  # top-level list items only (not the pip: block)
        if in_deps and m and not m.group(1).strip().endswith(":"):
            name, ver = _norm(m.group(1))
            if name not in ("python", "pip"):
                deps[CONDA_TO_PIP.get(name, name)] = ver
    return deps


def pyproject_deps() -> dict[str, str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(proj["dependencies"])
    for extra in proj["optional-dependencies"].values():
        specs += extra
    return dict(_norm(s) for s in specs)


def test_environment_matches_pyproject():
    assert conda_deps() == pyproject_deps()


def test_python_floor_matches():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert proj["requires-python"] == ">=3.10"
    assert "  - python>=3.10" in (ROOT / "environment.yml").read_text()
