"""MovieLens-1M's ratings as user histories, on a small ratings.dat of ours in the same format."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from recnotebooks.config import TableConfig
from recnotebooks.config.hstu import HSTUConfig
from recnotebooks.data.movielens import MOVIELENS_1M_URL, MovieLensHistories, read_movielens_ratings
from recnotebooks.nn.generative import HSTURanker


def write_ratings(folder: Path, users: int = 30, seed: int = 0) -> list[tuple[int, int, int, int]]:
    """A ratings.dat with ``users`` users (ids 1..users), 3 to 40 ratings each, shuffled lines."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for u in range(1, users + 1):
        n = int(torch.randint(3, 41, (1,), generator=g))
        times = 978_300_000 + torch.randint(0, 50, (n,), generator=g).cumsum(0)  # repeated times: ties
        movies = torch.randperm(200, generator=g)[:n] + 1
        ratings = torch.randint(1, 6, (n,), generator=g)
        rows += [(u, int(m), int(r), int(t)) for m, r, t in zip(movies, ratings, times, strict=True)]
    lines = [f"{u}::{m}::{r}::{t}" for u, m, r, t in rows]
    order = torch.randperm(len(lines), generator=g).tolist()
    (folder / "ratings.dat").write_text("\n".join(lines[i] for i in order) + "\n")
    return rows


def test_histories_are_each_users_ratings_in_time_order(tmp_path: Path) -> None:
    rows = write_ratings(tmp_path)
    data = MovieLensHistories(tmp_path, batch_size=7, max_length=1_000)
    seen = {}
    for i in range(len(data)):
        b = data.batch(i)
        for j, u in enumerate(b.users.tolist()):
            s, e = int(b.offsets[j]), int(b.offsets[j + 1])
            items, times, labels = b.ids["item"][s:e], b.timestamps[s:e], b.labels[s:e]
            seen[u] = list(zip(items.tolist(), times.tolist(), labels.tolist(), strict=True))
    expected: dict[int, list[tuple[int, int, float]]] = {}
    for u, m, r, t in sorted(rows, key=lambda x: (x[0], x[3], x[1])):
        if u % 10 != 9:
            expected.setdefault(u, []).append((m, t, float(r >= 4)))
    assert seen == expected


def test_a_history_keeps_its_most_recent_events_and_every_tenth_user_is_held_out(tmp_path: Path) -> None:
    rows = write_ratings(tmp_path)
    train = MovieLensHistories(tmp_path, batch_size=64, max_length=5)
    held = MovieLensHistories(tmp_path, batch_size=64, split="eval", max_length=5)
    b = train.batch(0)
    assert int(b.lengths.max()) == 5
    u0 = int(b.users[0])
    last = sorted((t, m) for u, m, _, t in rows if u == u0)[-5:]
    assert b.ids["item"][:5].tolist() == [m for _, m in last]
    assert set(held.batch(0).users.tolist()) == {9, 19, 29}
    assert not set(held.batch(0).users.tolist()) & set(b.users.tolist())
    assert train.num_items == max(m for _, m, _, _ in rows) + 1


def test_the_ranker_reads_its_batches(tmp_path: Path) -> None:
    write_ratings(tmp_path)
    data = MovieLensHistories(tmp_path / "ratings.dat", batch_size=8, max_length=20)
    cfg = HSTUConfig((TableConfig("item", data.num_items),), dim=16, num_layers=1, heads=2, max_len=20)
    b = data.batch(1)
    logits = HSTURanker(cfg)(b.tokens(), b.offsets, b.previous_actions(), b.timestamps)
    assert logits.shape == (b.num_tokens,) and bool(torch.isfinite(logits).all())


def test_a_missing_file_names_the_path_and_the_download_page(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=MOVIELENS_1M_URL):
        read_movielens_ratings(tmp_path)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        MovieLensHistories(tmp_path / "nowhere" / "ratings.dat", 8)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("1::2::3", "line 2 .* is not UserID::MovieID::Rating::Timestamp"),
        ("1,2,3,4", "line 2"),
        ("1::2::7::978300000", "rating 7"),
        ("1::x::3::978300000", "line 2"),
    ],
)
def test_a_line_not_in_the_format_is_named(tmp_path: Path, line: str, match: str) -> None:
    (tmp_path / "ratings.dat").write_text(f"1::5::4::978300000\n{line}\n")
    with pytest.raises(ValueError, match=match):
        read_movielens_ratings(tmp_path)


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    write_ratings(tmp_path)
    with pytest.raises(ValueError, match="split"):
        MovieLensHistories(tmp_path, 8, split="test")
    with pytest.raises(ValueError, match="liked_from"):
        MovieLensHistories(tmp_path, 8, liked_from=6)
    data = MovieLensHistories(tmp_path, 8)
    with pytest.raises(ValueError, match="index"):
        data.batch(len(data))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "ratings.dat").write_text("")
    with pytest.raises(ValueError, match="no ratings"):
        read_movielens_ratings(tmp_path / "empty")
