"""Streaming reader (and a small writer) for the Criteo Kaggle / Terabyte TSV format.

Each line is ``label \\t I1..I13 \\t C1..C26``: a 0/1 click label, 13 integer (dense) features
and 26 categorical features given as 32-bit hex hashes; an empty field is a missing value
(the format of Criteo's Kaggle Display Advertising Challenge release,
https://www.kaggle.com/c/criteo-display-ad-challenge, and of its 1TB Click Logs).
:class:`CriteoReader` streams plain or gzip files in fixed-size byte chunks (memory does
not grow with the file) and yields :class:`~recnotebooks.data.batch.Batch`
objects, hashing every id into its table the way the dlrm repo does (``int(h, 16) % rows``)
and applying DLRM's ``log(1 + max(x, 0))`` to the dense features.

Parsing is vectorised with numpy: every field's last 8 bytes are read as one ``uint64`` and
decoded with SWAR bit tricks, so a chunk of lines costs a few dozen array operations. Lines
the fast path cannot vouch for are re-parsed one by one by a plain-Python reference parser,
which decides whether they are valid and, if not, why.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from recnotebooks.checks import check_bool, check_choice, check_int
from recnotebooks.config import DLRMConfig
from recnotebooks.data.batch import Batch
from recnotebooks.sparse import JaggedBatch

__all__ = ["ReadStats", "CriteoReader", "write_criteo_tsv", "NUM_DENSE", "NUM_CATEGORICAL", "NUM_FIELDS"]

NUM_DENSE, NUM_CATEGORICAL = 13, 26
NUM_FIELDS = 1 + NUM_DENSE + NUM_CATEGORICAL
READ_BYTES = 1 << 20  # bytes read (and parsed) at a time
MAX_LINE_BYTES = 1 << 20  # longer lines are skipped without being held in memory
_U = np.uint64
_H, _L = _U(0x8080808080808080), _U(0x0101010101010101)
# _MASKS[n]: the top n bytes of a little-endian uint64 (a field's last n characters).
_MASKS = np.array([((1 << (8 * n)) - 1) << (64 - 8 * n) if n else 0 for n in range(9)], dtype=np.uint64)
_DEC_RE, _HEX_RE = re.compile(rb"-?[0-9]{1,18}"), re.compile(rb"[0-9a-fA-F]{1,8}")


@dataclass
class ReadStats:
    """Line counts of one pass over the files; ``lines_read == parsed + skipped`` always.

    ``first_skips`` keeps the first :attr:`max_examples` skipped lines as
    ``(line_number, reason)``; line numbers are 1-based within their file and the reason
    starts with the file name. Counts advance a read chunk at a time, so they may run ahead
    of the batches yielded so far.
    """

    lines_read: int = 0
    parsed: int = 0
    skipped: int = 0
    first_skips: list[tuple[int, str]] = field(default_factory=list)
    max_examples: int = 10


def _show(x: bytes) -> str:
    return repr(x[:24]) + ("..." if len(x) > 24 else "")


def _parse_line(line: bytes) -> tuple[int, list[int], list[int]] | str:
    """Reference parser for one line (no newline): ``(label, dense, hashes)`` or a reason.

    Missing dense values become 0 and missing hashes -1.
    """
    f = line.split(b"\t")
    if len(f) != NUM_FIELDS:
        return f"expected {NUM_FIELDS} tab-separated fields, got {len(f)}"
    if f[0] not in (b"0", b"1"):
        return f"label must be 0 or 1, got {_show(f[0])}"
    dense = [0] * NUM_DENSE
    for j, x in enumerate(f[1 : 1 + NUM_DENSE]):
        if x:
            if not _DEC_RE.fullmatch(x):
                return f"dense I{j + 1} must be an integer of at most 18 digits, got {_show(x)}"
            dense[j] = int(x)
    hashes = [-1] * NUM_CATEGORICAL
    for j, x in enumerate(f[1 + NUM_DENSE :]):
        if x:
            if not _HEX_RE.fullmatch(x):
                return f"categorical C{j + 1} must be 1 to 8 hex digits, got {_show(x)}"
            hashes[j] = int(x, 16)
    return int(f[0]), dense, hashes


def _ge(x: np.ndarray, k: int) -> np.ndarray:
    """Per byte of ``x``: high bit set where ``(byte & 0x7f) >= k`` (0 < k <= 128)."""
    return ((x | _H) - _U(k * 0x0101010101010101)) & _H


def _parse_chunk(chunk: bytes) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
    """Parse complete ``\\n``-terminated lines.

    Returns ``(n_lines, line_index, labels, dense, hashes, bad)`` for the valid lines (in
    order; ``hashes`` is -1 where missing) and ``bad = [(line_index, reason), ...]``.
    """
    if b"\r" in chunk:
        chunk = chunk.replace(b"\r\n", b"\n")
    buf = b"\0" * 8 + chunk  # padding so every field has 8 bytes in front of its end
    a = np.frombuffer(buf, np.uint8)
    sep = np.flatnonzero((a == 9) | (a == 10))
    nl = np.flatnonzero(a[sep] == 10)
    line_end = sep[nl]
    fields = np.diff(nl, prepend=-1)
    n_lines = len(fields)
    lens = np.diff(sep, prepend=7) - 1
    good = fields == NUM_FIELDS
    if not good.all():
        keep = np.repeat(good, fields)
        sep, lens = sep[keep], lens[keep]
    ends, lens = sep.reshape(-1, NUM_FIELDS), lens.reshape(-1, NUM_FIELDS)
    x = np.ndarray((len(a) - 7,), dtype="<u8", buffer=buf, strides=(1,))[ends - 8]
    lab = x[:, 0] >> _U(56)
    ok = (lens[:, 0] == 1) & ((lab | _U(1)) == _U(49))
    # dense: optional '-' then digits; fields over 8 bytes go to the reference parser
    dl = lens[:, 1 : 1 + NUM_DENSE]
    neg = a[ends[:, 1 : 1 + NUM_DENSE] - dl] == 45
    nd = dl - neg
    m = _MASKS[np.minimum(nd, 8)]
    xd = x[:, 1 : 1 + NUM_DENSE] & m
    bad = (xd & _H) | (~(_ge(xd, 48) & ~_ge(xd, 58)) & m & _H)
    ok &= ((bad == 0) & (dl <= 8) & ~(neg & (nd == 0))).all(1)
    v = xd - (_U(0x3030303030303030) & m)
    v = (v & _U(0x00FF00FF00FF00FF)) * _U(10) + ((v >> _U(8)) & _U(0x00FF00FF00FF00FF))
    v = (v & _U(0x0000FFFF0000FFFF)) * _U(100) + ((v >> _U(16)) & _U(0x0000FFFF0000FFFF))
    v = ((v & _U(0xFFFFFFFF)) * _U(10000) + (v >> _U(32))).astype(np.int64)
    dense = np.where(neg, -v, v)
    # categorical: 1 to 8 hex digits (either case)
    hl = lens[:, 1 + NUM_DENSE :]
    m = _MASKS[np.minimum(hl, 8)]
    xh = x[:, 1 + NUM_DENSE :] & m
    low = xh | _U(0x2020202020202020)
    hexbyte = (_ge(xh, 48) & ~_ge(xh, 58)) | (_ge(low, 97) & ~_ge(low, 103))
    ok &= (((xh & _H) | (~hexbyte & m & _H)) == 0).all(1) & (hl <= 8).all(1)
    v = (xh & _U(0x0F0F0F0F0F0F0F0F)) + ((xh >> _U(6)) & _L) * _U(9)
    v = ((v & _U(0x000F000F000F000F)) << _U(4)) | ((v >> _U(8)) & _U(0x000F000F000F000F))
    v = ((v & _U(0x0000FFFF0000FFFF)) << _U(8)) | ((v >> _U(16)) & _U(0x0000FFFF0000FFFF))
    v = ((v & _U(0xFFFFFFFF)) << _U(16)) | (v >> _U(32))
    hashes = np.where(hl == 0, -1, v.astype(np.int64))
    labels = (lab == _U(49)).astype(np.float32)
    line_index = np.flatnonzero(good)
    # lines the fast path did not accept: ask the reference parser
    suspects = np.sort(np.concatenate([np.flatnonzero(~good), line_index[~ok]]))
    bad_lines: list[tuple[int, str]] = []
    if len(suspects):
        row_of_line = np.cumsum(good) - 1
        starts = np.concatenate([[8], line_end[:-1] + 1])
        for i in suspects.tolist():
            res = _parse_line(buf[starts[i] : line_end[i]])
            if isinstance(res, str):
                bad_lines.append((i, res))
            else:
                r = row_of_line[i]
                labels[r], dense[r], hashes[r], ok[r] = res[0], res[1], res[2], True
    return n_lines, line_index[ok], labels[ok], dense[ok], hashes[ok], bad_lines


class CriteoReader:
    """Stream Criteo TSV files (plain or gzip) as :class:`Batch` objects.

    Args:
        paths: one file or a sequence of files, read in order (gzip is detected by a ``.gz``
            suffix or the gzip magic bytes).
        table_rows: 26 table sizes, or a :class:`DLRMConfig` with 26 tables and 13 dense
            features (its table names become the keys). Ids are ``int(hash, 16) % rows``.
        batch_size: samples per batch.
        log_dense: apply ``log(1 + max(x, 0))`` to the dense features (else raw floats).
        strict: raise ``ValueError`` (file, 1-based line number, reason) on a malformed line
            instead of counting it in :attr:`stats` and skipping it.
        drop_last: drop the final batch if it has fewer than ``batch_size`` samples.
        missing_categorical: ``"empty"`` (a missing id is an empty bag) or ``"zero"`` (id 0).
        keys: feature names for the sparse batch (default ``C1..C26`` or the config's).
        max_lines: stop after reading this many lines in total (None: read everything).

    Every iteration starts over from the first file and resets :attr:`stats`.
    """

    def __init__(
        self,
        paths: str | Path | Sequence[str | Path],
        table_rows: Sequence[int] | DLRMConfig,
        batch_size: int,
        log_dense: bool = True,
        strict: bool = False,
        drop_last: bool = False,
        missing_categorical: str = "empty",
        keys: Sequence[str] | None = None,
        max_lines: int | None = None,
    ) -> None:
        if isinstance(paths, (str, Path)):
            paths = [paths]
        if not isinstance(paths, Sequence) or not paths:
            raise ValueError(f"paths must be a path or a non-empty sequence of paths, got {paths!r}")
        self.paths: list[Path] = []
        for p in paths:
            if not isinstance(p, (str, Path)):
                raise TypeError(f"paths must hold str or Path, got {p!r} ({type(p).__name__})")
            path = Path(p)
            if not path.exists():
                raise FileNotFoundError(f"paths: no such file: {str(path)!r}")
            if not path.is_file():
                raise ValueError(f"paths: {str(path)!r} is not a regular file")
            self.paths.append(path)
        default_keys = tuple(f"C{j + 1}" for j in range(NUM_CATEGORICAL))
        if isinstance(table_rows, DLRMConfig):
            cfg = table_rows
            if cfg.num_tables != NUM_CATEGORICAL or cfg.num_dense != NUM_DENSE:
                raise ValueError(
                    f"table_rows: a DLRMConfig for Criteo needs {NUM_CATEGORICAL} tables and "
                    f"{NUM_DENSE} dense features, got {cfg.num_tables} tables and {cfg.num_dense} "
                    f"dense features (config {cfg.name!r})"
                )
            default_keys = cfg.table_names
            table_rows = [t.num_rows for t in cfg.tables]
        if isinstance(table_rows, (str, bytes)) or not isinstance(table_rows, (Sequence, np.ndarray)):
            raise TypeError(f"table_rows must be a sequence of 26 ints or a DLRMConfig, got {table_rows!r}")
        if len(table_rows) != NUM_CATEGORICAL:
            raise ValueError(f"table_rows must have 26 entries (C1..C26), got {len(table_rows)}")
        self.table_rows = tuple(check_int(f"table_rows[{j}]", r, lo=1) for j, r in enumerate(table_rows))
        self.batch_size = check_int("batch_size", batch_size, lo=1)
        for name, flag in (("log_dense", log_dense), ("strict", strict), ("drop_last", drop_last)):
            check_bool(name, flag)
        self.log_dense, self.strict, self.drop_last = log_dense, strict, drop_last
        check_choice("missing_categorical", missing_categorical, ("empty", "zero"))
        self.missing_categorical = missing_categorical
        keys = default_keys if keys is None else keys
        if (
            isinstance(keys, str)
            or not isinstance(keys, Sequence)
            or any(not isinstance(k, str) for k in keys)
        ):
            raise TypeError(f"keys must be a sequence of str, got {keys!r}")
        if len(keys) != NUM_CATEGORICAL or len(set(keys)) != len(keys):
            raise ValueError(f"keys must be {NUM_CATEGORICAL} unique names, got {list(keys)}")
        self.keys = tuple(keys)
        self.max_lines = None if max_lines is None else check_int("max_lines", max_lines, lo=1)
        self._rows = np.array(self.table_rows, dtype=np.int64)
        self.stats = ReadStats()

    def __repr__(self) -> str:
        return (
            f"CriteoReader({[str(p) for p in self.paths]}, batch_size={self.batch_size}, "
            f"log_dense={self.log_dense}, strict={self.strict}, drop_last={self.drop_last}, "
            f"missing_categorical={self.missing_categorical!r}, max_lines={self.max_lines})"
        )

    # ----- reading ----------------------------------------------------------------------
    def _open(self, path: Path) -> io.BufferedIOBase:
        with open(path, "rb") as f:
            magic = f.read(2)
        if path.suffix == ".gz" or magic == b"\x1f\x8b":
            return gzip.open(path, "rb")
        return open(path, "rb")

    def _raw_chunks(self, path: Path) -> Iterator[bytes | None]:
        """Blocks of whole lines (``None`` stands for one line over MAX_LINE_BYTES)."""
        pending, overlong = b"", False
        with self._open(path) as f:
            while True:
                try:
                    block = f.read(READ_BYTES)
                except (EOFError, gzip.BadGzipFile, zlib.error) as e:
                    raise ValueError(f"{path}: corrupt or truncated gzip data ({e})") from e
                if not block:
                    break
                if overlong:
                    cut = block.find(b"\n")
                    if cut < 0:
                        continue
                    yield None
                    overlong, block = False, block[cut + 1 :]
                data = pending + block
                cut = data.rfind(b"\n")
                if cut < 0:
                    pending = data
                else:
                    pending = data[cut + 1 :]
                    yield data[: cut + 1]
                if len(pending) > MAX_LINE_BYTES:
                    pending, overlong = b"", True
        if overlong:
            yield None
        elif pending:
            yield pending + b"\n"

    def _skip(self, path: Path, line_no: int, reason: str) -> None:
        st = self.stats
        st.skipped += 1
        if len(st.first_skips) < st.max_examples:
            st.first_skips.append((line_no, f"{path.name}: {reason}"))
        if self.strict:
            raise ValueError(f"{path}: line {line_no}: {reason}")

    def _parsed_chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``(labels, dense, hashes)`` per chunk of valid lines, updating :attr:`stats`."""
        st = self.stats
        for path in self.paths:
            line_no = 0  # lines of this file already counted
            if self.max_lines is not None and st.lines_read >= self.max_lines:
                return
            for chunk in self._raw_chunks(path):
                if self.max_lines is not None and st.lines_read >= self.max_lines:
                    return
                if chunk is None:
                    line_no += 1
                    st.lines_read += 1
                    self._skip(path, line_no, f"line longer than {MAX_LINE_BYTES} bytes")
                    continue
                if self.max_lines is not None and st.lines_read + chunk.count(b"\n") > self.max_lines:
                    room = self.max_lines - st.lines_read
                    cut = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10)[room - 1]
                    chunk = chunk[: cut + 1]
                n, idx, labels, dense, hashes, bad = _parse_chunk(chunk)
                if bad and self.strict:  # yield the lines before the bad one, then raise
                    i, reason = bad[0]
                    k = int(np.searchsorted(idx, i))
                    st.lines_read += i + 1
                    st.parsed += k
                    if k:
                        yield labels[:k], dense[:k], hashes[:k]
                    self._skip(path, line_no + i + 1, reason)
                st.lines_read += n
                st.parsed += len(idx)
                for i, reason in bad:
                    self._skip(path, line_no + i + 1, reason)
                line_no += n
                if len(idx):
                    yield labels, dense, hashes

    def _make_batch(self, labels: np.ndarray, dense: np.ndarray, hashes: np.ndarray) -> Batch:
        if self.log_dense:
            dense = np.log1p(np.maximum(dense, 0))
        present = hashes >= 0
        ids = np.where(present, hashes % self._rows, 0)
        if self.missing_categorical == "zero":
            present[:] = True
        ids_t, present_t = ids.T, present.T  # key-major
        values = torch.from_numpy(np.ascontiguousarray(ids_t[present_t]))
        lengths = torch.from_numpy(present_t.astype(np.int64).reshape(-1))
        sparse = JaggedBatch(self.keys, values, lengths, len(labels))
        return Batch(torch.from_numpy(dense.astype(np.float32)), sparse, torch.from_numpy(labels.copy()))

    def __iter__(self) -> Iterator[Batch]:
        self.stats = ReadStats()
        b = self.batch_size
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        have = 0
        for part in self._parsed_chunks():
            parts.append(part)
            have += len(part[0])
            if have < b:
                continue
            cols = [np.concatenate(c) if len(parts) > 1 else c[0] for c in zip(*parts, strict=True)]
            full = have - have % b
            for s in range(0, full, b):
                yield self._make_batch(*(c[s : s + b] for c in cols))
            parts = [tuple(c[full:] for c in cols)] if have > full else []  # type: ignore[list-item]
            have -= full
        if have and not self.drop_last:
            yield self._make_batch(*(np.concatenate(c) for c in zip(*parts, strict=True)))


def write_criteo_tsv(
    path: str | Path,
    labels: Sequence[int] | np.ndarray | torch.Tensor,
    dense_ints: np.ndarray | torch.Tensor | Sequence[Sequence[int]],
    cat_hashes: np.ndarray | torch.Tensor | Sequence[Sequence[int]],
    missing_mask: np.ndarray | torch.Tensor | None = None,
) -> int:
    """Write rows in Criteo TSV format (gzip if ``path`` ends in ``.gz``); returns the line count.

    Args:
        labels: (N,) 0/1 labels.
        dense_ints: (N, 13) integers.
        cat_hashes: (N, 26) integers in [0, 2**32), written as 8 lowercase hex digits.
        missing_mask: optional (N, 39) bool; True leaves that dense (columns 0..12) or
            categorical (columns 13..38) field empty.
    """
    lab, dense, cats = np.asarray(labels), np.asarray(dense_ints), np.asarray(cat_hashes)
    n = lab.shape[0] if lab.ndim == 1 else -1
    if n < 0 or not np.isin(lab, (0, 1)).all():
        raise ValueError(f"labels must be a 1-D array of 0/1 values, got shape {lab.shape}")
    lab = lab.astype(np.int64)
    for name, arr, width in (("dense_ints", dense, NUM_DENSE), ("cat_hashes", cats, NUM_CATEGORICAL)):
        if arr.shape != (n, width) or (arr.size and arr.dtype.kind not in "iub"):
            raise ValueError(
                f"{name} must be an int array of shape ({n}, {width}), got {arr.dtype} {arr.shape}"
            )
    cats = cats.astype(np.int64)
    if cats.size and (cats.min() < 0 or cats.max() >= 2**32):
        raise ValueError("cat_hashes must lie in [0, 2**32)")
    miss = np.zeros((n, 39), bool) if missing_mask is None else np.asarray(missing_mask)
    if miss.shape != (n, 39) or miss.dtype != bool:
        raise ValueError(
            f"missing_mask must be a bool array of shape ({n}, 39), got {miss.dtype} {miss.shape}"
        )
    cols = [lab.astype(str).tolist()]
    cols += [np.where(miss[:, j], "", dense[:, j].astype(np.int64).astype(str)).tolist() for j in range(13)]
    for j in range(NUM_CATEGORICAL):
        hexes = [f"{h:08x}" for h in cats[:, j].tolist()]
        cols.append(["" if m else h for m, h in zip(miss[:, NUM_DENSE + j].tolist(), hexes, strict=True)])
    text = "".join("\t".join(row) + "\n" for row in zip(*cols, strict=True)).encode("ascii")
    path = Path(path)
    if path.suffix == ".gz":
        with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(text)
    else:
        path.write_bytes(text)
    return n
