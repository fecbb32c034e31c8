"""MovieLens-1M's ratings as user histories (the HSTU paper's public benchmark):
:class:`MovieLensHistories`.

MovieLens-1M is 1,000,209 ratings of 3,706 movies by 6,040 users (GroupLens; the user
downloads it from https://grouplens.org/datasets/movielens/1m/ and agrees to its terms; this
repository holds none of it). ``ratings.dat`` has one rating a line,
``UserID::MovieID::Rating::Timestamp`` (ratings 1-5, timestamps in seconds).

Each user's ratings, in time order (ties by movie id), are one history: the tokens are the
movies (table ``item``, ids as in the file), the label of an event is whether the user liked
the movie (rating at least ``liked_from``, 4 by default), and a history keeps its most recent
``max_length`` events, as MLPerf's reference keeps the most recent 4,096. Every tenth user (by
id) is held out for evaluation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from recnotebooks.checks import check_choice, check_data_path, check_int, show
from recnotebooks.data.sequences import SequenceBatch, most_recent

__all__ = ["MovieLensHistories", "read_movielens_ratings", "MOVIELENS_1M_URL", "SPLITS"]

MOVIELENS_1M_URL = "https://grouplens.org/datasets/movielens/1m/"
SPLITS = ("train", "eval")
#: Most lines read (MovieLens-1M has 1,000,209; the 25M set 25,000,095): more is not this format.
MAX_RATINGS = 30_000_000


def read_movielens_ratings(path: str | Path) -> torch.Tensor:
    """``ratings.dat`` (or the folder holding it) as an ``(N, 4)`` int64 tensor of
    ``user, movie, rating, timestamp``. A missing file raises
    :class:`~recnotebooks.checks.DataNotFoundError` (a ``FileNotFoundError`` and a ``ValueError``),
    a line not in the format a ``ValueError``, naming the path, the line and where to get the data."""
    what = "MovieLens-1M's ratings.dat (unzip ml-1m.zip; pass the ml-1m folder or the file)"
    p = check_data_path("path", path, names=("ratings.dat",), what=what, url=MOVIELENS_1M_URL)
    rows: list[tuple[int, int, int, int]] = []
    with p.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if number > MAX_RATINGS:
                raise ValueError(
                    f"path: {str(p)!r} holds more than {MAX_RATINGS:,} lines; not a MovieLens ratings file"
                )
            line = raw.strip()
            if not line:
                continue
            parts = line.split(b"::")
            if len(parts) != 4 or not all(x.isdigit() for x in parts):
                got = show(line.decode(errors="replace"))
                raise ValueError(
                    f"path: line {number} of {str(p)!r} is not UserID::MovieID::Rating::Timestamp "
                    f"(MovieLens-1M's ratings.dat, {MOVIELENS_1M_URL}), got {got}"
                )
            user, movie, rating, ts = (int(x) for x in parts)
            if not 1 <= rating <= 5:
                raise ValueError(
                    f"path: line {number} of {str(p)!r} has rating {rating}; MovieLens rates 1 to 5"
                )
            rows.append((user, movie, rating, ts))
    if not rows:
        raise ValueError(f"path: {str(p)!r} holds no ratings")
    return torch.tensor(rows, dtype=torch.int64)


class MovieLensHistories:
    """MovieLens ratings as jagged user histories, ``batch_size`` users a batch, for ``split``.

    ``ratings``: :func:`read_movielens_ratings`'s tensor, or a path it reads. ``batch(i)`` is
    users ``i * batch_size ..`` of the split in id order (the last batch may be smaller);
    ``len()`` the number of batches; ``num_items`` the largest movie id + 1 (the ``item``
    table's rows)."""

    def __init__(
        self,
        ratings: torch.Tensor | str | Path,
        batch_size: int,
        split: str = "train",
        *,
        max_length: int = 200,
        liked_from: int = 4,
    ) -> None:
        r = ratings if isinstance(ratings, torch.Tensor) else read_movielens_ratings(ratings)
        if r.ndim != 2 or r.shape[1] != 4 or r.dtype != torch.int64:
            raise ValueError(
                f"ratings must be an (N, 4) int64 tensor (user, movie, rating, time), got {show(r)}"
            )
        self.batch_size = check_int("batch_size", batch_size, lo=1)
        self.split = check_choice("split", split, SPLITS)
        self.max_length = check_int("max_length", max_length, lo=1)
        self.liked_from = check_int("liked_from", liked_from, lo=1, hi=5)
        self.num_items = int(r[:, 1].max()) + 1
        held = r[:, 0] % 10 == 9
        r = r[held] if split == "eval" else r[~held]
        # time order inside each user (ties by movie id): one stable sort by a composite key
        order = torch.from_numpy(np.lexsort((r[:, 1].numpy(), r[:, 3].numpy(), r[:, 0].numpy())))
        self._r = r[order]
        users, counts = torch.unique_consecutive(self._r[:, 0], return_counts=True)
        self.users = users
        self._starts = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)])

    def __len__(self) -> int:
        return -(-len(self.users) // self.batch_size)

    def batch(self, index: int) -> SequenceBatch:
        """Batch ``index`` (``0 .. len() - 1``): each user's most recent ``max_length`` ratings."""
        index = check_int("index", index, lo=0, hi=len(self) - 1)
        lo, hi = index * self.batch_size, min((index + 1) * self.batch_size, len(self.users))
        rows, offsets = most_recent(self._starts, lo, hi, self.max_length)
        r = self._r[rows]
        return SequenceBatch(self.users[lo:hi], offsets, {"item": r[:, 1]}, r[:, 3],
                             (r[:, 2] >= self.liked_from).float())  # fmt: skip
