"""Tests for recnotebooks.data.criteo: round trips, file handling, batching, malformed input."""

from __future__ import annotations

import gzip
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recnotebooks.config import preset
from recnotebooks.data import criteo
from recnotebooks.data.criteo import CriteoReader, ReadStats, write_criteo_tsv

ROWS = (7, 100, 3, 1000, 2**31, 5, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73,
        79, 83, 1)  # fmt: skip
SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "criteo_sample.tsv.gz"


def make_rows(n: int, seed: int = 0, missing: float = 0.1, long_dense: float = 0.05):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    dense = rng.integers(-3, 50, (n, 13))
    dense[rng.random((n, 13)) < long_dense] = 10**12 + 7  # longer than 8 bytes: reference parser
    cats = rng.integers(0, 2**32, (n, 26), dtype=np.int64)
    return labels, dense, cats, rng.random((n, 39)) < missing


def ref_lines(content: bytes) -> list[tuple[int, list[int], list[int]] | None]:
    """Independent reference: one entry per line, None when the line is malformed."""
    lines = content.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out: list[tuple[int, list[int], list[int]] | None] = []
    for line in lines:
        f = line[:-1].split(b"\t") if line.endswith(b"\r") else line.split(b"\t")
        res = None
        if len(f) == 40 and f[0] in (b"0", b"1"):
            dense, cats = [], []
            for x in f[1:14]:
                digits = x[1:] if x.startswith(b"-") else x
                if x and not (digits and len(digits) <= 18 and all(48 <= c <= 57 for c in digits)):
                    break
                dense.append(int(x) if x else 0)
            for x in f[14:]:
                if x and not (len(x) <= 8 and all(chr(c) in "0123456789abcdefABCDEF" for c in x)):
                    break
                cats.append(int(x, 16) if x else -1)
            if len(dense) == 13 and len(cats) == 26:
                res = (int(f[0]), dense, cats)
        out.append(res)
    return out


def read_all(
    reader: CriteoReader,
) -> tuple[list[int], torch.Tensor, torch.Tensor, dict[str, list[list[int]]]]:
    batches = list(reader)
    assert all(b.dense.dtype == torch.float32 and b.labels.dtype == torch.float32 for b in batches)
    if not batches:
        return [], torch.zeros(0, 13), torch.zeros(0), {}
    bags: dict[str, list[list[int]]] = {k: [] for k in batches[0].sparse.keys}
    for b in batches:
        for k, v in b.sparse.to_lists().items():
            bags[k].extend(v)
    return (
        [b.batch_size for b in batches],
        torch.cat([b.dense for b in batches]),
        torch.cat([b.labels for b in batches]),
        bags,
    )


def expected_from(refs, log_dense: bool = True, missing: str = "empty", rows=ROWS):
    good = [r for r in refs if r is not None]
    labels = torch.tensor([float(r[0]) for r in good])
    f = (lambda x: math.log1p(max(x, 0))) if log_dense else float
    dense = torch.tensor([[f(x) for x in r[1]] for r in good], dtype=torch.float32).reshape(-1, 13)
    bags = {
        f"C{j + 1}": [[h % rows[j]] if h >= 0 else ([0] if missing == "zero" else []) for _, _, h in
                      [(r[0], r[1], r[2][j]) for r in good]]
        for j in range(26)
    }  # fmt: skip
    return labels, dense, bags


def check_matches(reader: CriteoReader, content: bytes, **kw) -> None:
    _, dense, labels, bags = read_all(reader)
    refs = ref_lines(content)
    e_labels, e_dense, e_bags = expected_from(refs, **kw)
    st_ = reader.stats
    assert st_.lines_read == st_.parsed + st_.skipped == len(refs)
    assert st_.parsed == len(e_labels)
    bad = [i + 1 for i, r in enumerate(refs) if r is None]  # one file: line numbers are global
    assert [n for n, _ in st_.first_skips] == bad[: st_.max_examples]
    assert torch.equal(labels, e_labels)
    assert torch.allclose(dense, e_dense, rtol=1e-6, atol=0)
    if len(e_labels):
        assert bags == e_bags


@pytest.mark.parametrize("log_dense", [True, False])
@pytest.mark.parametrize("missing", ["empty", "zero"])
def test_round_trip(tmp_path, log_dense, missing):
    labels, dense, cats, miss = make_rows(300, seed=1)
    p = tmp_path / "day.tsv"
    assert write_criteo_tsv(p, labels, dense, cats, miss) == 300
    r = CriteoReader(p, ROWS, batch_size=64, log_dense=log_dense, missing_categorical=missing)
    check_matches(r, p.read_bytes(), log_dense=log_dense, missing=missing)
    sizes, got_dense, got_labels, bags = read_all(r)
    assert sizes == [64] * 4 + [44] and r.stats == ReadStats(300, 300, 0)
    assert torch.equal(got_labels, torch.tensor(labels, dtype=torch.float32))
    j = 5  # explicit check of one table: ids are hash % rows, missing is empty/zero
    want = [
        [] if m and missing == "empty" else [0 if m else int(h) % ROWS[j]]
        for h, m in zip(cats[:, j], miss[:, 13 + j], strict=True)
    ]
    assert bags[f"C{j + 1}"] == want
    raw = np.where(miss[:, :13], 0, dense).astype(np.float64)
    exp = np.log1p(np.maximum(raw, 0)) if log_dense else raw
    assert np.allclose(got_dense.numpy(), exp.astype(np.float32), rtol=1e-6)


def test_gzip_plain_and_magic_detection_agree(tmp_path):
    rows = make_rows(200, seed=2)
    plain, gz, disguised = tmp_path / "a.tsv", tmp_path / "a.tsv.gz", tmp_path / "a.dat"
    write_criteo_tsv(plain, *rows)
    write_criteo_tsv(gz, *rows)
    disguised.write_bytes(gz.read_bytes())
    assert gzip.decompress(gz.read_bytes()) == plain.read_bytes()
    outs = [list(CriteoReader(p, ROWS, batch_size=33)) for p in (plain, gz, disguised)]
    for other in outs[1:]:
        assert len(other) == len(outs[0])
        for a, b in zip(outs[0], other, strict=True):
            assert torch.equal(a.dense, b.dense) and torch.equal(a.labels, b.labels)
            assert torch.equal(a.sparse.values, b.sparse.values) and torch.equal(
                a.sparse.lengths, b.sparse.lengths
            )


def test_multi_file_order_and_batches_span_files(tmp_path):
    parts = [make_rows(n, seed=s) for n, s in ((10, 3), (7, 4), (5, 5))]
    paths = [tmp_path / f"day_{i}.tsv" for i in range(3)]
    for p, rows in zip(paths, parts, strict=True):
        write_criteo_tsv(p, *rows)
    r = CriteoReader([str(paths[0]), paths[1], paths[2]], ROWS, batch_size=4)
    sizes, _, labels, _ = read_all(r)
    assert sizes == [4, 4, 4, 4, 4, 2]
    assert labels.tolist() == np.concatenate([p[0] for p in parts]).astype(float).tolist()
    check_matches(r, b"".join(p.read_bytes() for p in paths))


@pytest.mark.parametrize(
    ("n", "bs", "drop_last", "sizes"),
    [(10, 4, False, [4, 4, 2]), (10, 4, True, [4, 4]), (10, 10, False, [10]), (10, 1, False, [1] * 10),
     (10, 100, False, [10]), (10, 100, True, []), (0, 3, False, [])],
)  # fmt: skip
def test_batch_boundaries(tmp_path, n, bs, drop_last, sizes):
    p = tmp_path / "d.tsv"
    write_criteo_tsv(p, *make_rows(n))
    r = CriteoReader(p, ROWS, batch_size=bs, drop_last=drop_last)
    assert [b.batch_size for b in r] == sizes
    assert r.stats.lines_read == n
    assert [b.batch_size for b in r] == sizes and r.stats.lines_read == n  # a second pass starts over


def test_max_lines(tmp_path):
    paths = [tmp_path / "a.tsv", tmp_path / "b.tsv"]
    for i, p in enumerate(paths):
        write_criteo_tsv(p, *make_rows(6, seed=i))
    r = CriteoReader(paths, ROWS, batch_size=4, max_lines=8)
    assert [b.batch_size for b in r] == [4, 4] and r.stats.lines_read == 8


def corrupt_file(tmp_path: Path, bad_line: int, n: int = 9) -> Path:
    p = tmp_path / "c.tsv"
    write_criteo_tsv(p, *make_rows(n, missing=0.0))
    lines = p.read_bytes().split(b"\n")
    lines[bad_line - 1] = lines[bad_line - 1].replace(b"\t", b"\tzz", 1)  # non-integer I1
    p.write_bytes(b"\n".join(lines))
    return p


@pytest.mark.parametrize("read_bytes", [100, 1 << 20])
def test_strict_raises_with_file_and_line_number(tmp_path, monkeypatch, read_bytes):
    monkeypatch.setattr(criteo, "READ_BYTES", read_bytes)
    p = corrupt_file(tmp_path, bad_line=6)
    r = CriteoReader(p, ROWS, batch_size=2, strict=True)
    got = []
    with pytest.raises(ValueError, match=r"c\.tsv: line 6: dense I1"):
        for b in r:
            got.append(b.batch_size)
    assert got == [2, 2]  # the five lines before the bad one fill two full batches first
    assert r.stats.lines_read == r.stats.parsed + r.stats.skipped == 6


def test_non_strict_skips_and_records_reasons(tmp_path):
    p = corrupt_file(tmp_path, bad_line=3)
    r = CriteoReader(p, ROWS, batch_size=4)
    assert [b.batch_size for b in r] == [4, 4]
    assert (r.stats.lines_read, r.stats.parsed, r.stats.skipped) == (9, 8, 1)
    ((line_no, reason),) = r.stats.first_skips
    assert line_no == 3 and reason.startswith("c.tsv: dense I1 must be an integer")


def test_line_endings_blank_lines_and_case(tmp_path):
    good = ["1", *["5"] * 13, *["0000000A"] * 26]
    lines = ["\t".join(good) + "\r", "", "\t".join(good).lower(), "\t".join(good)]  # last has no newline
    p = tmp_path / "e.tsv"
    p.write_bytes("\n".join(lines).encode())
    r = CriteoReader(p, [1000] * 26, batch_size=8)
    check_matches(r, p.read_bytes(), rows=[1000] * 26)
    assert r.stats.parsed == 3 and r.stats.first_skips == [
        (2, "e.tsv: expected 40 tab-separated fields, got 1")
    ]
    (b,) = list(r)
    assert b.sparse.values.tolist() == [10] * 78
    p.write_bytes(b"")
    assert list(CriteoReader(p, ROWS, batch_size=2)) == []


def test_overlong_line_is_skipped_without_buffering(tmp_path, monkeypatch):
    monkeypatch.setattr(criteo, "READ_BYTES", 64)
    monkeypatch.setattr(criteo, "MAX_LINE_BYTES", 500)
    p = tmp_path / "d.tsv"
    write_criteo_tsv(p, *make_rows(4))
    lines = p.read_bytes().split(b"\n")
    lines.insert(2, b"9" * 5000)
    p.write_bytes(b"\n".join(lines))
    r = CriteoReader(p, ROWS, batch_size=3)
    check_matches(r, p.read_bytes())
    assert r.stats.first_skips == [(3, "d.tsv: line longer than 500 bytes")]


def test_corrupt_gzip_raises(tmp_path):
    p = tmp_path / "t.tsv.gz"
    write_criteo_tsv(p, *make_rows(500))
    p.write_bytes(p.read_bytes()[:-200])
    with pytest.raises(ValueError, match="t.tsv.gz: corrupt or truncated gzip"):
        list(CriteoReader(p, ROWS, batch_size=16))


GARBAGE = [b"", b"xyz", b"1.5", b" 1", b"0x1f", b"123456789", b"--1", b"-", b"+1", b"\x00", b"\xff", b"1_0",
           b"g", b"-7", b"DEADBEEF", b"2", b"\r", b"1\t", b"\t\t", b"0\n1"]  # fmt: skip


@st.composite
def corrupted_files(draw):
    n = draw(st.integers(0, 12))
    lines = write_lines(draw(st.integers(0, 2**16)), n)
    for i in draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=n)):
        fields = lines[i].split(b"\t")
        op = draw(st.sampled_from(["drop", "extra_tab", "garbage", "blank", "no_label", "random"]))
        if op == "drop":
            fields.pop(draw(st.integers(0, len(fields) - 1)))
        elif op == "extra_tab":
            fields.insert(draw(st.integers(0, len(fields))), b"")
        elif op == "garbage":
            fields[draw(st.integers(0, len(fields) - 1))] = draw(st.sampled_from(GARBAGE))
        elif op == "no_label":
            fields[0] = b""
        lines[i] = b"" if op == "blank" else b"\t".join(fields)
        if op == "random":
            lines[i] = draw(st.binary(max_size=300))
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b"", b"\r\n"]))


def write_lines(seed: int, n: int, long_dense: float = 0.05) -> list[bytes]:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "x.tsv"
        write_criteo_tsv(p, *make_rows(n, seed=seed, long_dense=long_dense))
        return p.read_bytes().split(b"\n")[:n]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=corrupted_files(), read_bytes=st.sampled_from([7, 100, 1 << 20]), bs=st.integers(1, 5))
def test_fuzz_corrupted_lines_are_counted_and_skipped(content, read_bytes, bs):
    criteo.READ_BYTES, saved = read_bytes, criteo.READ_BYTES
    try:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "f.tsv"
            p.write_bytes(content)
            check_matches(CriteoReader(p, ROWS, batch_size=bs), content)
    finally:
        criteo.READ_BYTES = saved


def test_constructor_validation(tmp_path):
    p = tmp_path / "d.tsv"
    write_criteo_tsv(p, *make_rows(2))
    cases = [
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(batch_size="8"), TypeError, "batch_size"),
        (dict(batch_size=True), TypeError, "batch_size"),
        (dict(table_rows=ROWS[:25]), ValueError, "table_rows must have 26"),
        (dict(table_rows=(0,) * 26), ValueError, r"table_rows\[0\]"),
        (dict(table_rows=preset("tiny")), ValueError, "table_rows: a DLRMConfig for Criteo needs 26 tables"),
        (dict(missing_categorical="drop"), ValueError, "missing_categorical"),
        (dict(keys=["a"] * 26), ValueError, "keys"),
        (dict(max_lines=0), ValueError, "max_lines"),
        (dict(strict="yes"), TypeError, "strict"),
        (dict(paths=[]), ValueError, "paths"),
        (dict(paths=tmp_path), ValueError, "not a regular file"),
        (dict(paths=tmp_path / "nope.tsv.gz"), FileNotFoundError, "nope.tsv.gz"),
    ]
    for kw, exc, msg in cases:
        args = dict(paths=p, table_rows=ROWS, batch_size=2) | kw
        with pytest.raises(exc, match=msg):
            CriteoReader(**args)


def test_config_keys_and_writer_validation(tmp_path):
    p = tmp_path / "d.tsv.gz"
    write_criteo_tsv(p, *make_rows(3))
    cfg = preset("criteo_kaggle")
    (b,) = list(CriteoReader(p, cfg, batch_size=3))
    assert b.sparse.keys == cfg.table_names
    names = tuple(f"f{j}" for j in range(26))
    assert next(iter(CriteoReader(p, cfg, batch_size=3, keys=names))).sparse.keys == names
    labels, dense, cats, miss = make_rows(3)
    with pytest.raises(ValueError, match="labels"):
        write_criteo_tsv(p, [0, 2, 1], dense, cats)
    with pytest.raises(ValueError, match="cat_hashes"):
        write_criteo_tsv(p, labels, dense, cats + 2**32)
    with pytest.raises(ValueError, match="missing_mask"):
        write_criteo_tsv(p, labels, dense, cats, miss[:, :26])


def test_shipped_sample_parses_cleanly():
    assert SAMPLE.exists(), "datasets/criteo_sample.tsv.gz is missing: run datasets/make_criteo_sample.py"
    r = CriteoReader(SAMPLE, preset("criteo_kaggle"), batch_size=4096)
    n = sum(b.batch_size for b in r)
    assert r.stats.skipped == 0 and n == r.stats.parsed == r.stats.lines_read > 1000
    check_matches(
        r, gzip.decompress(SAMPLE.read_bytes()), rows=[t.num_rows for t in preset("criteo_kaggle").tables]
    )


# tokens near the edges of the valid alphabets ('/' and ':' around digits, '@'/'G'/'`'/'g' around
# hex letters, high-bit bytes) and near the length limits (8 hex digits, 8 bytes on the fast path)
TOKEN = st.one_of(
    st.text("0123456789abcdefABCDEF-/:@G`g", max_size=10),
    st.text("0123456789abcdef", min_size=7, max_size=10),
    st.text("0123456789", min_size=7, max_size=20).map(lambda s: "-" + s),
    st.text("0123456789", min_size=7, max_size=10),
    st.text("0123456789abcdef-+ \x7f\x80\xb0\xb9\xba", max_size=4),
).map(lambda s: s.encode("latin-1")) | st.sampled_from(GARBAGE)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**16), st.integers(1, 12), st.data())
def test_fuzz_near_valid_fields_match_reference(seed, n, data):
    """Valid lines with a few fields replaced: the vectorised fast path must agree with the reference."""
    lines = write_lines(seed, n, long_dense=0.0)
    for i in range(n):
        fields = lines[i].split(b"\t")
        for j in data.draw(st.lists(st.integers(0, 39), max_size=3)):
            fields[j] = data.draw(TOKEN)
        lines[i] = b"\t".join(fields)
    content = b"\n".join(lines) + b"\n"
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "f.tsv"
        p.write_bytes(content)
        check_matches(CriteoReader(p, ROWS, batch_size=3), content)


def test_every_byte_in_every_column_kind(tmp_path):
    """Each byte value, alone and next to digits, as a label, a dense and a categorical field."""
    base = write_lines(0, 1, long_dense=0.0)[0].split(b"\t")
    lines = []
    for c in (bytes([i]) for i in range(256) if i not in (9, 10, 13)):
        for tok in (c, b"1" + c, c + b"1", b"-" + c, b"1234567" + c, c * 8, c + b"12345678"):
            for j in (0, 1, 13, 14, 39):
                lines.append(b"\t".join(base[:j] + [tok] + base[j + 1 :]))
    content = b"\n".join(lines) + b"\n"
    p = tmp_path / "bytes.tsv"
    p.write_bytes(content)
    check_matches(CriteoReader(p, ROWS, batch_size=512), content)
