"""Yambda's listening logs as user histories, on small parquet files of ours in the published
format (written here by each test: no real data, no committed fixture). The tests at the top
run without pyarrow (the optional dependency's message, a missing path); the rest need it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from recnotebooks.checks import DataNotFoundError
from recnotebooks.config.hstu import HSTUConfig
from recnotebooks.data.yambda import (
    COLUMNS,
    EVENT_TYPES,
    LISTEN_PLUS_PCT,
    YAMBDA_URL,
    YambdaHistories,
    read_yambda_events,
)
from recnotebooks.nn.generative import HSTURanker


# ----- without pyarrow ----------------------------------------------------------------------
def test_a_missing_path_names_the_parameter_the_path_and_the_download_page(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match=f"path: nothing at .*nowhere.*{YAMBDA_URL}"):
        read_yambda_events(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="holds none of .*multi_event.parquet"):  # also a ValueError
        YambdaHistories(tmp_path, 8)
    with pytest.raises(FileNotFoundError, match="mappings"):  # and a FileNotFoundError
        YambdaHistories(tmp_path / "x.parquet", 8, mappings=tmp_path / "absent")
    with pytest.raises(TypeError, match="path must be a file or folder path"):
        read_yambda_events(3)


def test_without_pyarrow_the_error_names_the_extra_and_the_pip_command(tmp_path, monkeypatch) -> None:
    (tmp_path / "multi_event.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"needs pyarrow.*pip install 'recnotebooks\[yambda\]'"):
        read_yambda_events(tmp_path)


def test_bad_arguments_are_named_before_any_file_is_read(tmp_path: Path) -> None:
    events = torch.tensor([[1, 5, 10, 0, 80, 1]])
    with pytest.raises(ValueError, match="split"):
        YambdaHistories(events, 8, split="test")
    with pytest.raises(ValueError, match="event_types"):
        YambdaHistories(events, 8, event_types=("listen", "skip"))
    with pytest.raises(TypeError, match="event_types"):
        YambdaHistories(events, 8, event_types="listen")
    with pytest.raises(ValueError, match="max_length"):
        YambdaHistories(events, 8, max_length=0)
    with pytest.raises(ValueError, match=r"events must be an \(N, 6\) int64"):
        YambdaHistories(events.float(), 8)
    with pytest.raises(ValueError, match="no \\['listen'\\] events of the 'eval' split"):
        YambdaHistories(events, 8, split="eval")


# ----- files in the published format (pyarrow) ------------------------------------------------
def events_of(users: int = 30, seed: int = 0) -> list[dict]:
    """Events of ``users`` users (ids 10, 20, ..., as Yambda's), 2 to 30 each, in time order
    (5-second steps, ties included), of every type (listens most)."""
    g = np.random.default_rng(seed)
    rows = []
    for u in range(1, users + 1):
        n = int(g.integers(2, 31))
        times = 300 + 5 * np.cumsum(g.integers(0, 4, n))
        for t in times:
            kind = str(g.choice(EVENT_TYPES, p=[0.7, 0.15, 0.05, 0.05, 0.05]))
            rows.append(
                {
                    "uid": 10 * u + (u % 3 == 0) * 9,
                    "timestamp": int(t),
                    "item_id": int(g.integers(1, 200)),
                    "is_organic": int(g.integers(0, 2)),
                    "event_type": kind,
                    "played_ratio_pct": int(g.integers(0, 120)) if kind == "listen" else None,
                    "track_length_seconds": int(g.integers(60, 400)) if kind == "listen" else None,
                }
            )
    return rows


def write_flat(path: Path, rows: list[dict], *, multi: bool = True) -> None:
    """``rows`` as Yambda's flat parquet: uint32 ids and times, uint8 is_organic, uint16
    played_ratio_pct (null off listens), event_type dictionary-encoded (polars' Enum)."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    cols = {
        "uid": pa.array([r["uid"] for r in rows], pa.uint32()),
        "timestamp": pa.array([r["timestamp"] for r in rows], pa.uint32()),
        "item_id": pa.array([r["item_id"] for r in rows], pa.uint32()),
        "is_organic": pa.array([r["is_organic"] for r in rows], pa.uint8()),
        "played_ratio_pct": pa.array([r["played_ratio_pct"] for r in rows], pa.uint16()),
        "track_length_seconds": pa.array([r["track_length_seconds"] for r in rows], pa.uint32()),
    }
    if multi:
        cols["event_type"] = pa.array([r["event_type"] for r in rows]).dictionary_encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), path)


def write_sequential(path: Path, rows: list[dict], plural: bool = False) -> None:
    """``rows`` as Yambda's sequential layout: one row per user, every other column a list
    (``plural``: named as the dataset card spells them, ``item_ids``, ``timestamps``, ...)."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    users = sorted({r["uid"] for r in rows})
    per = {u: [r for r in rows if r["uid"] == u] for u in users}
    cols = {"uid": pa.array(users, pa.uint32())}
    for name, kind in (
        ("timestamp", pa.uint32()),
        ("item_id", pa.uint32()),
        ("is_organic", pa.uint8()),
        ("played_ratio_pct", pa.uint16()),
        ("event_type", pa.string()),
    ):
        key = name + "s" if plural and name in ("item_id", "timestamp", "event_type") else name
        cols[key] = pa.array([[r[name] for r in per[u]] for u in users], pa.list_(kind))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), path)


def expected_histories(rows: list[dict], split: str, kinds: tuple[str, ...], keep: int) -> dict:
    """Each user's kept events as (item, time, label), the plain way: a loop over the rows."""
    out: dict[int, list] = {}
    for r in sorted(rows, key=lambda r: (r["uid"], r["timestamp"])):  # sorted() is stable: ties keep order
        if r["event_type"] in kinds and (r["uid"] % 10 == 9) == (split == "eval"):
            plus = r["event_type"] == "listen" and (r["played_ratio_pct"] or 0) >= LISTEN_PLUS_PCT
            out.setdefault(r["uid"], []).append((r["item_id"], r["timestamp"], float(plus)))
    return {u: h[-keep:] for u, h in out.items()}


def histories(data: YambdaHistories) -> dict:
    seen = {}
    for i in range(len(data)):
        b = data.batch(i)
        for j, u in enumerate(b.users.tolist()):
            s, e = int(b.offsets[j]), int(b.offsets[j + 1])
            seen[u] = list(
                zip(
                    b.ids["item"][s:e].tolist(),
                    b.timestamps[s:e].tolist(),
                    b.labels[s:e].tolist(),
                    strict=True,
                )
            )
    return seen


@pytest.mark.parametrize("layout", ["flat", "sequential", "sequential-plural"])
@pytest.mark.parametrize("split", ["train", "eval"])
def test_histories_are_each_users_events_in_time_order_with_listen_plus(tmp_path, layout, split) -> None:
    rows = events_of()
    if layout == "flat":  # rows out of order: the reader sorts by user and time, ties in file order
        rows = [rows[i] for i in np.random.default_rng(1).permutation(len(rows))]
    path = tmp_path / layout / "50m" / "multi_event.parquet"
    if layout == "flat":
        write_flat(path, rows)
    else:
        write_sequential(path, rows, plural=layout.endswith("plural"))
    for kinds in (("listen",), ("listen", "like")):
        data = YambdaHistories(path.parent, batch_size=7, split=split, max_length=12, event_types=kinds)
        assert histories(data) == expected_histories(rows, split, kinds, 12)


def test_the_event_table_appears_when_histories_mix_event_types(tmp_path: Path) -> None:
    rows = events_of()
    write_flat(tmp_path / "multi_event.parquet", rows)
    data = YambdaHistories(tmp_path, 64, event_types=("listen", "like"), max_length=1_000)
    b = data.batch(0)
    assert [t.name for t in data.tables] == ["item", "event"]
    likes = b.ids["event"] == EVENT_TYPES.index("like")
    assert bool(likes.any()) and not bool(b.labels[likes].any())  # a like is not a listen_plus
    assert list(YambdaHistories(tmp_path, 64).batch(0).ids) == ["item"]


def test_the_reader_returns_the_columns_and_marks_what_a_file_lacks(tmp_path: Path) -> None:
    rows = events_of(users=5)
    write_flat(tmp_path / "listens.parquet", [r for r in rows if r["event_type"] == "listen"], multi=False)
    e = read_yambda_events(tmp_path / "listens.parquet")  # no event_type column: the file's name says
    listens = [r for r in rows if r["event_type"] == "listen"]
    assert e.shape == (len(listens), len(COLUMNS)) and e.dtype == torch.int64
    assert e[:, 3].tolist() == [0] * len(listens)
    assert e[:, 4].tolist() == [r["played_ratio_pct"] for r in listens]
    write_flat(tmp_path / "multi" / "multi_event.parquet", rows)
    m = read_yambda_events(tmp_path / "multi")
    assert m[:, 3].tolist() == [EVENT_TYPES.index(r["event_type"]) for r in rows]
    assert m[:, 4].tolist() == [-1 if r["played_ratio_pct"] is None else r["played_ratio_pct"] for r in rows]
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pct = pa.array([49.9, 50.0, None, float("nan")], pa.float32())  # as MLPerf's preprocessing writes it
    table = pa.table({"uid": [1] * 4, "item_id": [1, 2, 3, 4], "timestamp": [5] * 4, "played_ratio_pct": pct})
    pq.write_table(table, tmp_path / "listens.parquet")
    assert read_yambda_events(tmp_path / "listens.parquet")[:, 4].tolist() == [49, 50, -1, -1]


def test_artists_and_albums_come_from_the_mappings(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = events_of()
    write_flat(tmp_path / "multi_event.parquet", rows)
    items = np.arange(0, 150)  # tracks 150..199 unmapped: artist and album 0, as MLPerf reads them
    pq.write_table(
        pa.table(
            {"artist_id": pa.array(items // 7 + 1, pa.uint32()), "item_id": pa.array(items, pa.uint32())}
        ),
        tmp_path / "artist_item_mapping.parquet",
    )
    pq.write_table(
        pa.table(
            {"album_id": pa.array(items // 3 + 1, pa.uint32()), "item_id": pa.array(items, pa.uint32())}
        ),
        tmp_path / "album_item_mapping.parquet",
    )
    data = YambdaHistories(tmp_path, 16, mappings=tmp_path, max_length=50)
    b = data.batch(0)
    item = b.ids["item"]
    assert torch.equal(b.ids["artist"], torch.where(item < 150, item // 7 + 1, 0))
    assert torch.equal(b.ids["album"], torch.where(item < 150, item // 3 + 1, 0))
    assert [(t.name, t.num_rows) for t in data.tables][1:] == [
        ("artist", 149 // 7 + 2),
        ("album", 149 // 3 + 2),
    ]


def test_the_ranker_reads_its_batches(tmp_path: Path) -> None:
    write_flat(tmp_path / "multi_event.parquet", events_of())
    data = YambdaHistories(tmp_path, batch_size=8, max_length=20, event_types=("listen", "like"))
    cfg = HSTUConfig(data.tables, dim=16, num_layers=1, heads=2, max_len=20)
    b = data.batch(0)
    logits = HSTURanker(cfg)(b.tokens(), b.offsets, b.previous_actions(), b.timestamps)
    assert logits.shape == (b.num_tokens,) and bool(torch.isfinite(logits).all())


def test_files_not_in_the_format_are_named(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "multi_event.parquet").write_text("uid,item_id\n1,2\n")
    with pytest.raises(ValueError, match=f"path: .* is not a parquet file.*{YAMBDA_URL}"):
        read_yambda_events(tmp_path)
    cases = {
        "no_item.parquet": ({"uid": [1], "timestamp": [5]}, "no column 'item_id'"),
        "floats.parquet": ({"uid": [1], "item_id": [2.5], "timestamp": [5]}, "item_id must hold integers"),
        "kinds.parquet": ({"uid": [1], "item_id": [2], "timestamp": [5], "event_type": ["skip"]}, "'skip'"),
        "codes.parquet": (
            {"uid": [1], "item_id": [2], "timestamp": [5], "event_type": [7]},
            "codes must be 0-4",
        ),
        "unnamed.parquet": ({"uid": [1], "item_id": [2], "timestamp": [5]}, "no event_type column"),
        "listens.parquet": ({"uid": [1], "item_id": [2], "timestamp": [5]}, "no played_ratio_pct"),
        "negative.parquet": ({"uid": [-1], "item_id": [2], "timestamp": [5]}, "negative id"),
    }
    for name, (cols, match) in cases.items():
        pq.write_table(pa.table(cols), tmp_path / name)
        with pytest.raises(ValueError, match=match):
            read_yambda_events(tmp_path / name)
    ragged = {"uid": [1], "item_id": [[1, 2]], "timestamp": [[5]], "event_type": [["like", "like"]]}
    pq.write_table(pa.table(ragged), tmp_path / "ragged.parquet")
    with pytest.raises(ValueError, match="lists of timestamp and item_id differ"):
        read_yambda_events(tmp_path / "ragged.parquet")
    write_flat(tmp_path / "m" / "multi_event.parquet", events_of(users=3))
    with pytest.raises(ValueError, match="mappings must be the folder"):
        YambdaHistories(tmp_path / "m", 4, mappings=tmp_path / "m" / "multi_event.parquet")
