"""Sources a reader can follow: every hardware number and published run names a public
document, and no docstring, comment, document or notebook text points at a file this
repository lacks (such as a section of a private notes file that only its authors have).

Files of other repositories are cited by their address (``https://github.com/...``); a path
on a line after such an address is taken as part of that citation.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

from recnotebooks.perf.hardware import HARDWARE, Hardware
from recnotebooks.perf.mlperf_setup import PUBLISHED_RUNS
from recnotebooks.published.runs import PUBLISHED_THROUGHPUTS
from recnotebooks.published.sources import DOCUMENTS, cite

ROOT = Path(__file__).resolve().parent.parent
URL = re.compile(r"https?://[\w.-]+\.[a-z]{2,}(?:/\S*)?")
#: Words that say what a source without a document is (an assumption, a measurement...).
LABELS = ("approximate", "modeling assumption", "measured", "computed", "calibrated")
#: Fields whose numbers come from a GPU's datasheet.
DATASHEET_FIELDS = ("peak_flops", "hbm_bytes", "hbm_bw", "power_w", "intra_node_bw", "host_link_bw")
PATH_LIKE = re.compile(
    r"(?<![\w/.:~-])((?:\.\.?/)*[\w-][\w.-]*(?:/[\w.-]+)*\.(?:md|MD|py|ipynb|json|toml|ya?ml|txt|csv|tsv)(?:\.gz)?)"
    r"(?![\w/])"
)
SECTION_OF_FILE = re.compile(r"\b([A-Z][A-Z_]{3,})(?:\.md)?\s*§")
#: Where the HSTU sources' files (issue 39) are cited, each by its repository and commit.
_RECSYS = "NVIDIA recsys-examples (43465aea), cited by address in published/hstu.py"
_MLPERF_V4 = "mlcommons/training's recommendation_v4 (PR #889, a67b8459), cited in config/hstu.py"
_LOGGING = "mlcommons/logging's training_6.1.0 (PR #470, 1237f533), cited in published/convergence.py"
_YAMBDA = "Yandex's Yambda scripts and MLPerf's reader, cited by address in data/yambda.py"
#: Files a text may name although they are not here, and why.
NOT_OURS = {
    "train.txt": "Criteo Kaggle's training file, downloaded by the user",
    "NN_topic.ipynb": "the naming pattern for a new notebook",
    "report.md": "written by benchmarks/gpu_check.py under the folder given by --out",
    "report.json": "written by benchmarks/gpu_check.py under the folder given by --out",
    "recnb_manifest.json": "written by recnotebooks.distributed.checkpoint in each sharded checkpoint",
    # files of the HSTU sources (issue 39), each module citing the repository and commit it read
    "E2E_BENCHMARK.md": _RECSYS,
    "examples/hstu/training/benchmark/E2E_BENCHMARK.md": _RECSYS,
    "PERF_ANALYSIS.md": _RECSYS,
    "scripts/generate_gin_config.py": _RECSYS,
    "examples/commons/datasets/hstu_batch.py": _RECSYS,
    "recommendation_v4/generative_recommenders/modules/preprocessors.py": _MLPERF_V4,
    "recommendation_v4/README.MD": _MLPERF_V4,
    "dlrm_v4/preprocess_public_data.py": _MLPERF_V4,
    "preprocess_public_data.py": _MLPERF_V4,
    "dlrm_v4/datasets/yambda.py": _MLPERF_V4,
    "make_multievent.py": _YAMBDA,
    "transform2sequential.py": _YAMBDA,
    "closed_dlrmv4.yaml": _LOGGING,
    "rcps_dlrmv4.json": _LOGGING,
}


# ----- hardware and published sources ------------------------------------------------------
def names_a_document(text: str) -> bool:
    return bool(URL.search(text)) or any(doc in text for doc in DOCUMENTS.values())


@pytest.mark.parametrize("name", list(HARDWARE))
def test_every_hardware_source_names_a_document_or_says_what_it_is(name: str) -> None:
    hw: Hardware = HARDWARE[name]
    assert hw.sources, f"{name} cites nothing"
    for field, text in hw.sources.items():
        assert text.strip(), f"{name}.sources[{field!r}] is empty"
        labelled = any(label in text.lower() for label in LABELS)
        assert names_a_document(text) or labelled, f"{name}.sources[{field!r}] = {text!r}"
        assert not missing_files(text, "recnotebooks/perf/hardware.py"), (name, field, text)


#: GPUs whose datasheet figures were read where others quote them (no datasheet of the vendor's read),
#: and the pages that must be cited instead: each datasheet field names one of them.
QUOTED_DATASHEETS = {"gb300_nvl72": ("verda_gb300", "lockwood_b300")}


@pytest.mark.parametrize("name", [n for n, hw in HARDWARE.items() if hw.kind == "gpu"])
def test_gpu_datasheet_numbers_cite_the_datasheet(name: str) -> None:
    for field in DATASHEET_FIELDS:
        text = HARDWARE[name].sources[field]
        quoted = [DOCUMENTS[k] for k in QUOTED_DATASHEETS.get(name, ())]
        assert "datasheet" in text or any(doc in text for doc in quoted), (name, field)
        assert URL.search(text), (name, field)


@pytest.mark.parametrize("run", PUBLISHED_RUNS, ids=lambda r: r.label)
def test_every_published_run_names_a_public_document(run: object) -> None:
    source = run.source  # type: ignore[attr-defined]
    assert source.strip() and names_a_document(source), source
    assert not missing_files(source, "recnotebooks/perf/published.py"), source


@pytest.mark.parametrize("key", list(DOCUMENTS))
def test_documents_have_a_title_and_an_address(key: str) -> None:
    text = cite(key)
    address = URL.search(text)
    assert address, f"{key}: no address in {text!r}"
    title = text[: address.start()].strip(" ,(")
    assert len(title.split()) >= 3, f"{key}: no title before the address in {text!r}"


def test_cite_names_the_known_documents() -> None:
    with pytest.raises(KeyError, match="v100"):
        cite("no_such_document")


# ----- no text points at a file the repository lacks -----------------------------------------
_SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}


def repo_files() -> set[str]:
    """The repository's files: git's list, or a walk of the tree outside a git checkout."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if out.returncode == 0:
        return {f for f in out.stdout.split() if (ROOT / f).exists()}
    found = set()
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if path.is_file() and not _SKIP_DIRS.intersection(rel.parts) and ".egg-info" not in str(rel):
            found.add(rel.as_posix())
    return found


FILES = repo_files()


def exists_here(token: str, where: str, files: set[str]) -> bool:
    """Whether ``token`` (named in file ``where``) is a file of the repository: from the root,
    from ``where``'s folder, or as the tail of a path (``kernels/fused.py``)."""
    folder = PurePosixPath(where).parent
    candidates = {token, str(folder / token), str(PurePosixPath(*(folder / token).parts))}
    if candidates & files or any(f.endswith("/" + token) for f in files):
        return True
    return (ROOT / folder / token).resolve().is_relative_to(ROOT) and (ROOT / folder / token).exists()


def missing_files(text: str, where: str, files: set[str] | None = None) -> list[str]:
    """The file references in ``text`` that point nowhere in the repository."""
    files = FILES if files is None else files
    addresses = " ".join(URL.findall(text))
    missing = []
    for m in PATH_LIKE.finditer(text):
        line_before = text[: m.start()].rsplit("\n", 1)[-1]
        token = m.group(1)
        cited = URL.search(line_before) or "github.com/" in line_before or "/" + token in addresses
        if cited or token in NOT_OURS:
            continue  # another repository's file, cited by its address
        if not exists_here(token, where, files):
            missing.append(token)
    for m in SECTION_OF_FILE.finditer(text):
        if not exists_here(m.group(1) + ".md", where, files):
            missing.append(m.group(0))
    return missing


def python_prose(source: str) -> str:
    """Docstrings and comments of a Python file (its code's own strings are runtime data)."""
    parts = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                parts.append(doc)
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    parts += [t.string for t in tokens if t.type == tokenize.COMMENT]
    return "\n".join(parts)


def notebook_prose(text: str) -> str:
    """Markdown cells and code-cell comments of a notebook."""
    parts = []
    for cell in json.loads(text)["cells"]:
        src = "".join(cell["source"])
        parts.append(src if cell["cell_type"] == "markdown" else "\n".join(re.findall(r"#.*", src)))
    return "\n".join(parts)


def prose_files() -> Iterator[tuple[str, str]]:
    for f in sorted(FILES):
        text = (ROOT / f).read_text(errors="replace") if f.endswith((".py", ".md", ".ipynb")) else ""
        if f.endswith(".py"):
            yield f, python_prose(text)
        elif f.endswith(".md"):
            yield f, text
        elif f.endswith(".ipynb"):
            yield f, notebook_prose(text)


def test_no_text_points_at_a_missing_file() -> None:
    found = {f: miss for f, prose in prose_files() if (miss := missing_files(prose, f))}
    assert found == {}


def test_the_scan_reads_what_it_should() -> None:
    names = {f for f, _ in prose_files()}
    assert {"ARCHITECTURE.md", "recnotebooks/perf/hardware.py", "tests/test_sources.py"} <= names
    assert any(f.endswith(".ipynb") for f in names)


# ----- the checker can fail ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("vendor spec sheet (REFERENCE.md §1)", ["REFERENCE.md", "REFERENCE.md §"]),
        ("see ../shared/DESIGN.md for the plan", ["../shared/DESIGN.md"]),
        ("figures from REFERENCE §5", ["REFERENCE §"]),
        ("the kernel in kernels/fused.py and recnotebooks/perf/cost.py", []),
        (
            "TorchRec, https://github.com/pytorch/torchrec/blob/main/torchrec/distributed/planner/constants.py",
            [],
        ),
        ("github.com/pytorch/torchrec, torchrec/distributed/planner/constants.py", []),
        (
            "README, torchrec_dlrm/README.MD, https://github.com/facebookresearch/dlrm/blob/main/torchrec_dlrm/README.MD",
            [],
        ),
        ("ARCHITECTURE.md and datasets/criteo_sample.tsv.gz", []),
        ("notes in docs/missing_notes.md", ["docs/missing_notes.md"]),
    ],
)
def test_missing_files_flags_only_what_is_missing(text: str, expected: list[str]) -> None:
    assert missing_files(text, "recnotebooks/perf/hardware.py") == expected


def test_python_prose_is_docstrings_and_comments() -> None:
    src = '"""Module doc, see A.md."""\nx = "runtime.json"  # a comment on B.md\ndef f():\n    """C.md"""\n'
    prose = python_prose(src)
    assert "A.md" in prose and "B.md" in prose and "C.md" in prose and "runtime.json" not in prose


def test_each_published_run_pairs_one_published_throughput_in_order() -> None:
    assert len(PUBLISHED_RUNS) == len(PUBLISHED_THROUGHPUTS) == 10
    for run, t in zip(PUBLISHED_RUNS, PUBLISHED_THROUGHPUTS, strict=True):
        assert (run.label, run.source, run.gpus, run.nodes, run.batch_size, run.samples_per_s) == (
            t.label, t.source, t.gpus, t.nodes, t.batch_size, t.samples_per_s)  # fmt: skip
