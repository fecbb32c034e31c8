"""environment.yml and pyproject.toml declare the same dependencies; public import paths work."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

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


# ----- public import paths ---------------------------------------------------------------------
def _package_modules() -> list[str]:
    import pkgutil

    import recnotebooks

    found = ["recnotebooks"]
    found += [
        m.name
        for m in pkgutil.walk_packages(recnotebooks.__path__, "recnotebooks.")
        if m.name != "recnotebooks.__main__"
    ]
    return sorted(found)


@pytest.mark.parametrize("module", _package_modules())
def test_every_name_in_all_is_importable(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in getattr(mod, "__all__", ()) if not hasattr(mod, name)]
    assert missing == [], f"{module}.__all__ names what it lacks: {missing}"


@pytest.mark.parametrize(
    "path",
    [
        "recnotebooks.perf.Plan",
        "recnotebooks.perf.estimate",
        "recnotebooks.perf.hardware",
        "recnotebooks.measure.calibrate.load_calibration",
        "recnotebooks.measure.calibrate.save_calibration",
        "recnotebooks.measure.calibrate.calibration_path",
        "recnotebooks.measure.calibrate.load_probe",
        "recnotebooks.perf.hardware.load_calibration",
        "recnotebooks.perf.sources.DOCUMENTS",
        "recnotebooks.viz.servers.scaled_model",
        "recnotebooks.config.DLRMConfig.with_rows_scale",
        "recnotebooks.checks.check_int",
        "recnotebooks.DLRMConfig",
    ],
)
def test_public_import_paths_keep_working(path: str) -> None:
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError:
            continue
        for attr in parts[n:]:
            obj = getattr(obj, attr)
        return
    pytest.fail(f"{path} does not import")


def test_the_linter_sees_every_python_file_make_lint_names() -> None:
    """``make lint`` runs ruff over these folders; ruff's default excludes once skipped
    ``recnotebooks/dist`` (they name any folder called ``dist``). Every .py file there is linted."""
    import subprocess
    import sys

    folders = ["recnotebooks", "tests", "benchmarks", "datasets", "notebooks"]
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--show-files", *folders], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    seen = {Path(line.strip()).resolve() for line in out.splitlines() if line.strip().endswith(".py")}
    ours = {p.resolve() for f in folders for p in (ROOT / f).rglob("*.py") if "__pycache__" not in p.parts}
    assert ours and ours <= seen, sorted(str(p.relative_to(ROOT)) for p in ours - seen)
