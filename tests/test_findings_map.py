"""notebooks/README.md's findings map: every notebook section it lists exists, and holds code."""

from __future__ import annotations

import json
import re
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _map_rows() -> list[list[str]]:
    text = (NOTEBOOKS / "README.md").read_text()
    block = text.split("## Findings map", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block.splitlines()
            if line.startswith("|") and not line.startswith("|---")]  # fmt: skip
    return rows[1:]  # without the header


def _sections(notebook: Path) -> dict[str, int]:
    """Section number -> code cells under its heading (``## N. title``)."""
    cells = json.loads(notebook.read_text())["cells"]
    out: dict[str, int] = {}
    current = None
    for c in cells:
        if c["cell_type"] == "markdown":
            m = re.match(r"##\s+(\d+)\.", "".join(c["source"]).strip())
            if m:
                current = m.group(1)
                out[current] = 0
        elif current is not None:
            out[current] += 1
    return out


def test_every_listed_section_exists_and_has_code() -> None:
    rows = _map_rows()
    assert len(rows) >= 10
    for finding, where, _app, numbers in rows:
        assert numbers, finding
        for ref in where.split(","):
            m = re.fullmatch(r"\s*(\d\d) §(\d+)\s*", ref)
            assert m is not None, (finding, ref)
            nb, sec = m.groups()
            path = next(NOTEBOOKS.glob(f"{nb}_*.ipynb"))
            sections = _sections(path)
            assert sec in sections, f"{finding}: {path.name} has no section {sec}"
            assert sections[sec] > 0, f"{finding}: {path.name} section {sec} has no code"


def test_every_notebook_is_in_the_map() -> None:
    listed = {ref.strip()[:2] for row in _map_rows() for ref in row[1].split(",")}
    present = {p.name[:2] for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    assert present <= listed, sorted(present - listed)


def test_the_instructors_guide_covers_every_notebook_and_exercise() -> None:
    from recnotebooks.lab import EXERCISES

    guide = (NOTEBOOKS.parent / "docs" / "instructors.md").read_text()
    for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"):
        assert path.stem in guide, f"docs/instructors.md has no time plan for {path.stem}"
    missing = [e for e in EXERCISES if e not in guide]
    assert missing == [], f"docs/instructors.md has no answer-key row for {missing}"


def test_every_notebook_opens_with_its_time_and_what_it_needs() -> None:
    for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"):
        first = "".join(json.loads(path.read_text())["cells"][0]["source"])
        assert re.search(r"\*\*Time:\*\* .*minutes · \*\*Before this:\*\* \S", first), path.name
