"""Yambda's listening logs as user histories (the data MLPerf's DLRMv4 trains on):
:class:`YambdaHistories`.

Yambda (Yandex Music; Ploshkin et al., "Yambda-5B — A Large-Scale Multi-modal Dataset for
Ranking And Retrieval", https://arxiv.org/abs/2505.22238) is 4.79 billion events of 1 million
users on 9.39 million tracks, in three sizes (``50m``, ``500m``, ``5b`` events). The user
downloads it from https://huggingface.co/datasets/yandex/yambda (Apache-2.0); this repository
holds none of it. Its files are parquet, in two layouts:

* ``flat/<size>/<events>.parquet``: one event a row, sorted by user then time;
* ``sequential/<size>/<events>.parquet``: one user a row, each column a list in time order.

``<events>`` is ``listens``, ``likes``, ``dislikes``, ``unlikes``, ``undislikes`` or
``multi_event`` (all five, with an ``event_type`` column: ``listen``, ``like``, ...). Every
file has ``uid``, ``item_id``, ``timestamp`` (seconds, in 5-second steps) and ``is_organic``;
listens add ``played_ratio_pct`` (share of the track played, over 100 after a rewind) and
``track_length_seconds``, which ``multi_event`` leaves empty on the other events. Beside them,
``artist_item_mapping.parquet`` (``artist_id``, ``item_id``) and ``album_item_mapping.parquet``
(``album_id``, ``item_id``) map tracks to their artist and album (the card of the dataset and its
``benchmarks/scripts``: ``make_multievent.py`` builds ``multi_event``, ``transform2sequential.py``
the sequential layout).

MLPerf's reference (``mlcommons/training`` ``recommendation_v4``, commit a67b8459:
``dlrm_v4/preprocess_public_data.py`` reads ``flat/<size>/multi_event.parquet`` and the two
mappings; ``dlrm_v4/datasets/yambda.py`` builds the samples) labels a listen ``listen_plus`` when
``played_ratio_pct >= 50`` (:data:`LISTEN_PLUS_PCT`) and codes the event types 0-4 in the order
of :data:`EVENT_TYPES`; its histories keep listens and likes (dislikes, unlikes and undislikes
carry no action bit), the most recent ones, and the artist and album of each track (0 for a
track the mappings lack). Here, as for MovieLens (:mod:`~recnotebooks.data.movielens`): each
user's events of ``event_types`` (listens only by default: every event then carries a real
label) in time order are one history, its most recent ``max_length`` kept; an event's label is
``listen_plus``; ids are ``item`` (and ``event``, the type, when more than one is kept; ``artist``
and ``album`` with ``mappings``). Every tenth user (by id) is held out for evaluation (MLPerf
holds out users by a hash of their id).

Reading needs pyarrow, an optional dependency: ``pip install 'recnotebooks[yambda]'``. The
events are held in memory, six int64 a row: the 50m files (about 2.4 GB) fit a laptop, the 5b
ones (4.76 billion events) need MLPerf's memory-mapped cache instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from recnotebooks.checks import (
    check_choice,
    check_data_path,
    check_fits_memory,
    check_int,
    import_optional,
    show,
)
from recnotebooks.config import TableConfig
from recnotebooks.data.sequences import SequenceBatch, most_recent

__all__ = [
    "YambdaHistories",
    "read_yambda_events",
    "read_yambda_mappings",
    "YAMBDA_URL",
    "EVENT_TYPES",
    "EVENT_FILES",
    "LISTEN_PLUS_PCT",
    "COLUMNS",
    "SPLITS",
]

YAMBDA_URL = "https://huggingface.co/datasets/yandex/yambda"
#: Yambda's event types, in the order of MLPerf's codes 0-4 (``preprocess_public_data.py``'s
#: ``EVENT_TYPE_MAP`` at mlcommons/training a67b8459).
EVENT_TYPES = ("listen", "like", "dislike", "unlike", "undislike")
#: The published file of each event type (a file without ``event_type`` holds one type).
EVENT_FILES = {"listens": "listen", "likes": "like", "dislikes": "dislike", "unlikes": "unlike",
               "undislikes": "undislike"}  # fmt: skip
#: ``listen_plus``: a listen of at least this share of the track (percent; MLPerf's
#: ``LISTEN_PLUS_THRESHOLD`` in ``dlrm_v4/datasets/yambda.py``; the card: "over 50%").
LISTEN_PLUS_PCT = 50
#: The columns of :func:`read_yambda_events`'s tensor (``-1`` where a file has no value).
COLUMNS = ("uid", "item_id", "timestamp", "event_type", "played_ratio_pct", "is_organic")
SPLITS = ("train", "eval")
#: Where a folder's events are looked for, in this order.
_FILES = ("multi_event.parquet", "listens.parquet")
_MAPPINGS = {"artist": "artist_item_mapping.parquet", "album": "album_item_mapping.parquet"}
_WHAT = "Yambda events (flat or sequential multi_event.parquet, listens.parquet, ...)"


def _parquet(path: Path) -> object:
    """The open ``pyarrow.parquet.ParquetFile`` of ``path``, or a ``ValueError`` if it is not one."""
    pq = import_optional("pyarrow.parquet", "yambda", "Reading Yambda's parquet files")
    try:
        return pq.ParquetFile(path)  # type: ignore[attr-defined]
    except Exception as e:  # pyarrow's ArrowInvalid / OSError: not parquet at all
        raise ValueError(
            f"path: {str(path)!r} is not a parquet file ({type(e).__name__}: {show(str(e))}); expected "
            f"{_WHAT} as downloaded from {YAMBDA_URL}"
        ) from None


def _column(table: object, names: tuple[str, ...], path: Path, *, required: bool = True) -> object | None:
    """The first of ``names`` (a column's flat and card spellings) in ``table``, or None."""
    for name in names:
        if name in table.column_names:  # type: ignore[attr-defined]
            return table.column(name)  # type: ignore[attr-defined]
    if required:
        raise ValueError(
            f"path: {str(path)!r} has no column {names[0]!r}; Yambda's files have uid, item_id, timestamp, "
            f"is_organic (+ played_ratio_pct for listens, event_type in multi_event), got "
            f"{table.column_names} ({YAMBDA_URL})"  # type: ignore[attr-defined]
        )
    return None


def _flatten(column: object, lengths: np.ndarray | None, name: str, path: Path) -> object:
    """A flat column: itself, or a sequential layout's list column flattened (its lists
    checked to be as long as the item lists)."""
    pa = import_optional("pyarrow", "yambda", "Reading Yambda's parquet files")
    chunked = column.combine_chunks() if hasattr(column, "combine_chunks") else column  # type: ignore[attr-defined]
    if lengths is None:
        return chunked
    if not (pa.types.is_list(chunked.type) or pa.types.is_large_list(chunked.type)):  # type: ignore[attr-defined]
        raise ValueError(f"path: {str(path)!r} is sequential (lists per user) but {name} is {chunked.type}")
    mine = chunked.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    if not np.array_equal(mine, lengths):
        raise ValueError(f"path: {str(path)!r}: the lists of {name} and item_id differ in length")
    return chunked.flatten()


def _integers(array: object, name: str, path: Path, fill: int = -1) -> np.ndarray:
    """``array`` (a pyarrow array of integers, nulls allowed) as int64, nulls as ``fill``;
    ``played_ratio_pct`` may also be a float (MLPerf's preprocessing writes float32), floored."""
    pa = import_optional("pyarrow", "yambda", "Reading Yambda's parquet files")
    kind = array.type  # type: ignore[attr-defined]
    if name == "played_ratio_pct" and pa.types.is_floating(kind):  # type: ignore[attr-defined]
        values = array.fill_null(float(fill)).to_numpy(zero_copy_only=False)  # type: ignore[attr-defined]
        return np.floor(np.nan_to_num(values, nan=fill, posinf=fill, neginf=fill)).astype(np.int64)
    if not (pa.types.is_integer(kind) or pa.types.is_boolean(kind)):  # type: ignore[attr-defined]
        raise ValueError(f"path: {str(path)!r}: column {name} must hold integers, got {kind}")
    out = array.cast(pa.int64()).fill_null(fill).to_numpy(zero_copy_only=False)  # type: ignore[attr-defined]
    if name in ("uid", "item_id") and len(out) and int(out.min()) < 0:
        raise ValueError(f"path: {str(path)!r}: column {name} holds a negative id ({int(out.min())})")
    return out.astype(np.int64, copy=False)


def _event_codes(array: object | None, n: int, path: Path) -> np.ndarray:
    """Each event's index into :data:`EVENT_TYPES`: from ``event_type`` (names, or MLPerf's
    codes 0-4), else the one type of a file named after it (``listens.parquet``, ...)."""
    if array is None:
        kind = EVENT_FILES.get(path.stem)
        if kind is None:
            raise ValueError(
                f"path: {str(path)!r} has no event_type column and its name is none of "
                f"{[f + '.parquet' for f in EVENT_FILES]}: which events it holds is unknown ({YAMBDA_URL})"
            )
        return np.full(n, EVENT_TYPES.index(kind), dtype=np.int64)
    pa = import_optional("pyarrow", "yambda", "Reading Yambda's parquet files")
    if pa.types.is_dictionary(array.type):  # type: ignore[attr-defined]
        array = array.dictionary_decode()  # type: ignore[attr-defined]
    if pa.types.is_integer(array.type):  # type: ignore[attr-defined]
        codes = _integers(array, "event_type", path)
        bad = codes[(codes < 0) | (codes >= len(EVENT_TYPES))]
        if len(bad):
            raise ValueError(f"path: {str(path)!r}: event_type codes must be 0-4 {EVENT_TYPES}, got {bad[0]}")
        return codes
    names, codes = np.unique(np.asarray(array.to_pylist(), dtype=object).astype(str), return_inverse=True)  # type: ignore[attr-defined]
    unknown = [x for x in names if x not in EVENT_TYPES]
    if unknown:
        raise ValueError(f"path: {str(path)!r}: event_type must be one of {EVENT_TYPES}, got {unknown[0]!r}")
    return np.array([EVENT_TYPES.index(x) for x in names], dtype=np.int64)[codes]


def read_yambda_events(path: str | Path) -> torch.Tensor:
    """Yambda's events in ``path`` (a parquet file of either layout, or a folder holding
    ``multi_event.parquet`` or ``listens.parquet``) as an ``(N, 6)`` int64 tensor of the
    :data:`COLUMNS`, in the file's order. A missing path raises
    :class:`~recnotebooks.checks.DataNotFoundError`, a file not in the format a ``ValueError``,
    each naming the path, what is expected and the download page; no pyarrow, an ``ImportError``
    naming the extra that installs it."""
    p = check_data_path("path", path, names=_FILES, what=_WHAT, url=YAMBDA_URL)
    f = _parquet(p)
    rows = f.metadata.num_rows  # type: ignore[attr-defined]
    check_fits_memory("Yambda's events", 2 * 8 * len(COLUMNS) * rows, "cpu",
                      hint="read a smaller size (50m) or MLPerf's memory-mapped cache")  # fmt: skip
    table = f.read()  # type: ignore[attr-defined]
    pa = import_optional("pyarrow", "yambda", "Reading Yambda's parquet files")
    items = _column(table, ("item_id", "item_ids"), p)
    lengths = None
    if pa.types.is_list(items.type) or pa.types.is_large_list(items.type):  # type: ignore[attr-defined]
        lengths = items.combine_chunks().value_lengths().fill_null(0).to_numpy(zero_copy_only=False)  # type: ignore[attr-defined]

    def flat(names: tuple[str, ...], required: bool = True) -> object | None:
        c = _column(table, names, p, required=required)
        return None if c is None else _flatten(c, lengths, names[0], p)

    users = _column(table, ("uid",), p)
    uid = _integers(users.combine_chunks(), "uid", p)  # type: ignore[attr-defined]
    if lengths is not None:
        uid = np.repeat(uid, lengths)
    item = _integers(flat(("item_id", "item_ids")), "item_id", p)
    ts = _integers(flat(("timestamp", "timestamps")), "timestamp", p)
    event = _event_codes(flat(("event_type", "event_types"), False), len(item), p)
    pct_col, organic_col = flat(("played_ratio_pct",), False), flat(("is_organic",), False)
    pct = None if pct_col is None else _integers(pct_col, "played_ratio_pct", p)
    if pct is None and bool((event == 0).any()):
        raise ValueError(f"path: {str(p)!r} holds listens but no played_ratio_pct column ({YAMBDA_URL})")
    none = np.full(len(item), -1, np.int64)
    organic = none if organic_col is None else _integers(organic_col, "is_organic", p)
    if not len(item):
        raise ValueError(f"path: {str(p)!r} holds no events")
    return torch.from_numpy(np.stack([uid, item, ts, event, none if pct is None else pct, organic], axis=1))


def read_yambda_mappings(folder: str | Path) -> dict[str, torch.Tensor]:
    """Yambda's ``artist_item_mapping.parquet`` and ``album_item_mapping.parquet`` in ``folder``
    as ``{"artist": t, "album": t}``, ``t[item]`` the track's artist (album) id; 0 for a track a
    file lacks and, for a track listed twice, its last row (as MLPerf's reference reads them)."""
    out = {}
    for table, name in _MAPPINGS.items():
        p = check_data_path("mappings", folder, names=(name,), what=f"a folder holding Yambda's {name}",
                            url=YAMBDA_URL)  # fmt: skip
        if p.name != name:
            raise ValueError(
                f"mappings must be the folder holding {list(_MAPPINGS.values())}, got {str(p)!r}"
            )
        t = _parquet(p).read()  # type: ignore[attr-defined]
        items = _integers(_column(t, ("item_id",), p).combine_chunks(), "item_id", p)  # type: ignore[union-attr]
        ids = _integers(_column(t, (f"{table}_id",), p).combine_chunks(), f"{table}_id", p, fill=0)  # type: ignore[union-attr]
        if not len(items):
            raise ValueError(f"mappings: {str(p)!r} holds no rows; expected Yambda's {name} ({YAMBDA_URL})")
        lookup = np.zeros(int(items.max()) + 1, dtype=np.int64)
        lookup[items] = ids
        out[table] = torch.from_numpy(lookup)
    return out


class YambdaHistories:
    """Yambda's events as jagged user histories, ``batch_size`` users a batch, for ``split``.

    ``events``: :func:`read_yambda_events`'s tensor, or a path it reads. ``event_types``: the
    kinds of event a history holds (default listens only; MLPerf's histories hold listens and
    likes); an event's label is ``listen_plus`` (a listen with ``played_ratio_pct >=``
    :data:`LISTEN_PLUS_PCT`), so a like's is 0. ``mappings``: a folder holding Yambda's artist and
    album mappings (adds the ``artist`` and ``album`` tables), or None. ``batch(i)`` is users
    ``i * batch_size ..`` of the split in id order (the last batch may be smaller); ``len()`` the
    number of batches; :attr:`tables` one :class:`~recnotebooks.config.TableConfig` per id."""

    def __init__(
        self,
        events: torch.Tensor | str | Path,
        batch_size: int,
        split: str = "train",
        *,
        max_length: int = 200,
        event_types: tuple[str, ...] = ("listen",),
        mappings: str | Path | None = None,
    ) -> None:
        self.batch_size = check_int("batch_size", batch_size, lo=1, hi=1_000_000)
        self.split = check_choice("split", split, SPLITS)
        self.max_length = check_int("max_length", max_length, lo=1)
        if isinstance(event_types, str) or not isinstance(event_types, (tuple, list)) or not event_types:
            raise TypeError(f"event_types must be a tuple of {EVENT_TYPES}, got {show(event_types)}")
        kinds = [EVENT_TYPES.index(check_choice("event_types[i]", k, EVENT_TYPES)) for k in event_types]
        maps = read_yambda_mappings(mappings) if mappings is not None else {}
        e = events if isinstance(events, torch.Tensor) else read_yambda_events(events)
        width = len(COLUMNS)
        if not isinstance(e, torch.Tensor) or e.ndim != 2 or e.shape[1] != width or e.dtype != torch.int64:
            raise ValueError(f"events must be an (N, {width}) int64 tensor of {COLUMNS}, got {show(e)}")
        self.num_items = int(e[:, 1].max()) + 1 if len(e) else 0
        e = e[torch.isin(e[:, 3], torch.tensor(kinds))]
        held = e[:, 0] % 10 == 9
        e = e[held] if self.split == "eval" else e[~held]
        if not len(e):
            raise ValueError(
                f"events hold no {list(event_types)} events of the {self.split!r} split "
                f"(users with id % 10 == 9 are held out for 'eval')"
            )
        # by user, then time; lexsort is stable: events at one time keep the file's order
        order = torch.from_numpy(np.lexsort((e[:, 2].numpy(), e[:, 0].numpy())))
        self._e = e[order]
        self._with_event = len(kinds) > 1
        self._maps = maps
        users, counts = torch.unique_consecutive(self._e[:, 0], return_counts=True)
        self.users = users
        self._starts = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)])

    @property
    def tables(self) -> tuple[TableConfig, ...]:
        """One table per id of :meth:`batch` (``item``, then ``event``, ``artist``, ``album`` as kept)."""
        rows = {"item": self.num_items}
        if self._with_event:
            rows["event"] = len(EVENT_TYPES)
        rows.update({k: int(v.max()) + 1 for k, v in self._maps.items()})
        return tuple(TableConfig(k, n) for k, n in rows.items())

    def __len__(self) -> int:
        return -(-len(self.users) // self.batch_size)

    def batch(self, index: int) -> SequenceBatch:
        """Batch ``index`` (``0 .. len() - 1``): each user's most recent ``max_length`` events."""
        index = check_int("index", index, lo=0, hi=len(self) - 1)
        lo, hi = index * self.batch_size, min((index + 1) * self.batch_size, len(self.users))
        rows, offsets = most_recent(self._starts, lo, hi, self.max_length)
        r = self._e[rows]
        ids = {"item": r[:, 1]}
        if self._with_event:
            ids["event"] = r[:, 3]
        for name, lookup in self._maps.items():
            known = r[:, 1] < len(lookup)
            ids[name] = torch.where(known, lookup[r[:, 1].clamp(max=max(len(lookup) - 1, 0))], 0)
        listen_plus = (r[:, 3] == 0) & (r[:, 4] >= LISTEN_PLUS_PCT)
        return SequenceBatch(self.users[lo:hi], offsets, ids, r[:, 2], listen_plus.float())
