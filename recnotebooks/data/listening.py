"""A synthetic music-listening log a generative recommender can learn: :class:`SyntheticListening`.

Each sample is one user's **history**: the tracks they listened to, in time order, with the
track's album and artist, a timestamp, and a ``listen_plus`` label per event (the listen was
"liked or played well through", as Yambda's ``listen_plus`` label marks organic listens of
at least half a track). A batch is jagged: ``offsets`` says where each history starts.

What makes it worth training on:

* **Heavy-tailed history lengths**, shaped like Yambda's (its README: median about 2.7k, mean
  about 4.8k, at most about 28k events a user), scaled down for a laptop: log-normal lengths
  with the configured median and mean (defaults 1/50 of Yambda's: 54 and 96), capped at
  ``max_length`` as MLPerf's reference keeps the most recent 4,096.
* **Skew and hierarchy**: tracks belong to albums, albums to artists; track popularity follows
  a bounded Zipf law (a continuous inverse-CDF draw); every artist has one of ``tastes`` taste
  clusters, every user one taste, and ``in_taste`` of a user's fresh listens come from
  artists of their taste.
* **Repeats**: ``repeat`` of the listens replay a track the user heard earlier in the history.
* **A hidden teacher** sets ``listen_plus``: a listen is more likely liked when its artist is of
  the user's taste, when the user heard that artist earlier in the history (only a model that
  reads the history can know), when the track is good (a hidden per-track quality), and less
  likely right after a long break. The teacher's logit is standardised on a probe batch and
  scaled by ``teacher_strength``; the intercept gives ``positive_rate``.
* **Random access**: batch ``i`` of a split is drawn from a generator seeded by
  ``(seed, split, i)``, so any batch can be regenerated from its index; train and eval users
  are disjoint (every tenth user id is held out).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from recnotebooks.checks import check_bool, check_choice, check_float, check_fraction, check_int, show
from recnotebooks.data.sequences import SequenceBatch
from recnotebooks.data.skew import _mix64

__all__ = ["ListeningConfig", "SyntheticListening", "SPLITS", "TABLES", "USER_TABLE", "YAMBDA_LENGTHS"]

SPLITS = ("train", "eval")
#: The ids of an event, one table each (the keys of :attr:`SequenceBatch.ids`).
TABLES = ("item", "album", "artist")
#: The context table of a log drawn with ``user_context``: the user's id, once a history (the key
#: of :attr:`SequenceBatch.context`; ``users`` rows).
USER_TABLE = "user"
#: Yambda's history lengths as its README states them (events per user): median, mean, max.
YAMBDA_LENGTHS = {"median": 2_700, "mean": 4_800, "max": 28_000}
#: Most tracks (the per-track tables are built in memory: 10M tracks are 120 MB).
MAX_ITEMS = 10_000_000
_EPOCH = 1_600_000_000  # histories start in the autumn of 2020 (seconds since 1970)
_TRACK_SECONDS = (150, 250)  # gap between listens inside a session
_BREAK_SECONDS = 86_400.0  # mean length of a break between sessions (one day)
_BREAK_RATE = 0.05  # share of listens that start a new session
_BREAK_AFTER = 1_800  # a gap longer than half an hour is a break (seconds)
_WEIGHTS = {"in_taste": 1.2, "heard_artist": 1.0, "quality": 0.8, "after_break": -0.6}


@dataclass(frozen=True)
class ListeningConfig:
    """How the listening log is drawn (checked on construction).

    Args:
        users, items, albums, artists: catalogue sizes (``items >= albums >= artists >= 1``).
        tastes: taste clusters of artists and users (``1 .. artists``).
        zipf_exponent: skew of track popularity (> 0; 1.05 as Criteo's ids).
        median_length, mean_length: of the log-normal history lengths before the cap
            (``mean_length >= median_length >= 1``).
        max_length: the cap (the most recent events are kept).
        in_taste: share of fresh listens from artists of the user's taste, in [0, 1].
        repeat: share of listens that replay an earlier track of the history, in [0, 1).
        positive_rate: target share of ``listen_plus`` labels, in (0, 1).
        teacher_strength: scale of the teacher's standardised logit, in [0, 20].
        seed: the whole log's seed.
        user_context: give every batch the user of each history as context (the
            :data:`USER_TABLE` entry of :attr:`SequenceBatch.context`), for a model whose
            ``HSTUConfig.context`` names that table. The draws do not change.
    """

    users: int = 20_000
    items: int = 100_000
    albums: int = 10_000
    artists: int = 2_000
    tastes: int = 20
    zipf_exponent: float = 1.05
    median_length: int = YAMBDA_LENGTHS["median"] // 50
    mean_length: int = YAMBDA_LENGTHS["mean"] // 50
    max_length: int = 512
    in_taste: float = 0.6
    repeat: float = 0.3
    positive_rate: float = 0.3
    teacher_strength: float = 2.0
    seed: int = 0
    user_context: bool = False

    def __post_init__(self) -> None:
        users = check_int("users", self.users, lo=10)
        artists = check_int("artists", self.artists, lo=1)
        albums = check_int("albums", self.albums, lo=artists)
        check_int("items", self.items, lo=albums, hi=MAX_ITEMS)
        check_int("tastes", self.tastes, lo=1, hi=artists)
        check_float("zipf_exponent", self.zipf_exponent, lo=0, lo_open=True, hi=5)
        median = check_int("median_length", self.median_length, lo=1)
        check_int("mean_length", self.mean_length, lo=median)
        check_int("max_length", self.max_length, lo=1)
        check_fraction("in_taste", self.in_taste)
        check_fraction("repeat", self.repeat, hi_open=True)
        check_fraction("positive_rate", self.positive_rate, lo_open=True, hi_open=True)
        check_float("teacher_strength", self.teacher_strength, lo=0, hi=20)
        check_int("seed", self.seed, lo=0)
        check_bool("user_context", self.user_context)
        del users


def _zipf(u: torch.Tensor, n: torch.Tensor, s: float) -> torch.Tensor:
    """Bounded Zipf ranks ``0 .. n - 1`` by the continuous inverse CDF of ``(k + 1)^-s``."""
    n1 = (n + 1).to(torch.float64)
    if abs(s - 1.0) < 1e-9:
        k = torch.pow(n1, u)
    else:
        e = 1.0 - s
        k = torch.pow(1.0 + u * (torch.pow(n1, e) - 1.0), 1.0 / e)
    return (k.floor().to(torch.int64) - 1).clamp(min=0).minimum(n - 1)


def _intercept(logits: torch.Tensor, rate: float) -> float:
    """The ``b`` with ``mean(sigmoid(logits + b)) = rate`` (bisection; the mean rises with ``b``)."""
    lo, hi = -50.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if float(torch.sigmoid(logits + mid).mean()) < rate else (lo, mid)
    return (lo + hi) / 2


class SyntheticListening:
    """The listening log of ``config``, ``batch_size`` histories a batch, for ``split``.

    >>> log = SyntheticListening(ListeningConfig(users=100, items=500, albums=50, artists=10, tastes=2), 4)
    >>> b = log.batch(0)
    >>> b.offsets.shape, bool((b.lengths >= 1).all()), b.ids["item"].shape == b.labels.shape
    (torch.Size([5]), True, True)
    """

    def __init__(
        self, config: ListeningConfig, batch_size: int, split: str = "train", num_batches: int | None = None
    ) -> None:
        if not isinstance(config, ListeningConfig):
            raise TypeError(f"config must be a ListeningConfig, got {type(config).__name__}")
        self.config = config
        self.batch_size = check_int("batch_size", batch_size, lo=1, hi=1_000_000)
        self.split = check_choice("split", split, SPLITS)
        self.num_batches = None if num_batches is None else check_int("num_batches", num_batches, lo=1)
        self.position = 0  # the index of the next batch an iteration yields
        self._resume: int | None = None
        self._catalogue()
        probe = self._draw(torch.Generator().manual_seed(_mix64(config.seed, 7)), 512)
        z = self._teacher_terms(probe)
        self._z_mean, self._z_std = float(z.mean()), float(z.std()) or 1.0
        self._intercept = _intercept(
            config.teacher_strength * (z - self._z_mean) / self._z_std, config.positive_rate
        )

    def _catalogue(self) -> None:
        c = self.config
        g = torch.Generator().manual_seed(_mix64(c.seed, 1))
        album_of_item = torch.arange(c.items) * c.albums // c.items  # contiguous tracks of an album
        self.artist_of_album = torch.arange(c.albums) * c.artists // c.albums
        self.album_of_item = album_of_item
        self.artist_of_item = self.artist_of_album[album_of_item]
        self.first_item = torch.searchsorted(self.artist_of_item, torch.arange(c.artists + 1))
        self.by_popularity = torch.randperm(c.items, generator=g)  # rank -> track
        self.quality = torch.randn(c.items, generator=g)
        self.taste_of_artist = torch.randint(c.tastes, (c.artists,), generator=g)
        order = torch.argsort(self.taste_of_artist * c.artists + torch.randperm(c.artists, generator=g))
        self.taste_artists = order  # artists grouped by taste, in popularity order inside each
        self.taste_first = torch.searchsorted(self.taste_of_artist[order], torch.arange(c.tastes + 1))

    def taste_of_user(self, users: torch.Tensor) -> torch.Tensor:
        """Each user's taste cluster (a hash of the id and the seed)."""
        h = (users * 0x9E3779B1 + _mix64(self.config.seed, 2)) % (2**31 - 1)
        return h % self.config.tastes

    def _users(self, g: torch.Generator, b: int) -> torch.Tensor:
        held_out = self.config.users // 10  # ids 9, 19, 29, ... are eval users
        if self.split == "eval":
            return torch.randint(held_out, (b,), generator=g) * 10 + 9
        k = torch.randint(self.config.users - held_out, (b,), generator=g)
        return k + k // 9

    def _lengths(self, g: torch.Generator, b: int) -> torch.Tensor:
        c = self.config
        sigma = math.sqrt(2 * math.log(c.mean_length / c.median_length))
        raw = torch.exp(math.log(c.median_length) + sigma * torch.randn(b, generator=g, dtype=torch.float64))
        return raw.round().clamp(1, c.max_length).to(torch.int64)

    def _draw(self, g: torch.Generator, b: int) -> SequenceBatch:
        users, lengths = self._users(g, b), self._lengths(g, b)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
        n = int(offsets[-1])
        history = torch.repeat_interleave(torch.arange(b), lengths)
        position = torch.arange(n) - offsets[history]
        items = self._fresh_items(g, self.taste_of_user(users)[history], n)
        items = self._repeats(g, items, position, offsets[history], n)
        gaps = torch.randint(*_TRACK_SECONDS, (n,), generator=g).to(torch.float64)
        pause = torch.empty(n, dtype=torch.float64).exponential_(1 / _BREAK_SECONDS, generator=g)
        gaps = torch.where(torch.rand(n, generator=g) < _BREAK_RATE, pause, gaps)
        gaps[offsets[:-1][lengths > 0]] = 0.0
        start = _EPOCH + torch.randint(10_000_000, (b,), generator=g)
        running = gaps.cumsum(0)
        timestamps = (start[history] + (running - running[offsets[history]]).round().to(torch.int64)).to(
            torch.int64
        )
        albums = self.album_of_item[items]
        ids = {"item": items, "album": albums, "artist": self.artist_of_album[albums]}
        return SequenceBatch(users, offsets, ids, timestamps, torch.zeros(n))

    def _fresh_items(self, g: torch.Generator, taste: torch.Tensor, n: int) -> torch.Tensor:
        c = self.config
        u1, u2, u3 = (torch.rand(n, generator=g, dtype=torch.float64) for _ in range(3))
        popular = self.by_popularity[_zipf(u1, torch.full((n,), c.items), c.zipf_exponent)]
        first, count = self.taste_first[taste], self.taste_first[taste + 1] - self.taste_first[taste]
        artist = self.taste_artists[first + _zipf(u2, count.clamp(min=1), c.zipf_exponent)]
        lo, hi = self.first_item[artist], self.first_item[artist + 1]
        own = lo + _zipf(torch.rand(n, generator=g, dtype=torch.float64), hi - lo, c.zipf_exponent)
        return torch.where((u3 < c.in_taste) & (count > 0), own, popular)

    def _repeats(
        self, g: torch.Generator, items: torch.Tensor, position: torch.Tensor, start: torch.Tensor, n: int
    ) -> torch.Tensor:
        replay = (torch.rand(n, generator=g) < self.config.repeat) & (position > 0)
        source = torch.arange(n)
        earlier = start + (torch.rand(n, generator=g) * position).floor().to(torch.int64)
        source = torch.where(replay, earlier, source)
        while True:  # a replay of a replay is a replay of the first listen
            nxt = source[source]
            if torch.equal(nxt, source):
                return items[source]
            source = nxt

    def _teacher_terms(self, b: SequenceBatch) -> torch.Tensor:
        c = self.config
        history = torch.repeat_interleave(torch.arange(len(b.users)), b.lengths)
        in_taste = (self.taste_of_artist[b.ids["artist"]] == self.taste_of_user(b.users)[history]).float()
        key = history * c.artists + b.ids["artist"]
        order = torch.argsort(key * (b.num_tokens + 1) + torch.arange(b.num_tokens))
        first = torch.ones(b.num_tokens, dtype=torch.bool)
        first[order[1:]] = key[order[1:]] != key[order[:-1]]
        w = _WEIGHTS
        breaks = torch.zeros(b.num_tokens)
        breaks[1:] = (b.timestamps[1:] - b.timestamps[:-1] > _BREAK_AFTER).float()
        breaks[b.offsets[:-1][b.lengths > 0]] = 0.0  # a history's first listen follows no break
        heard = (~first).float()  # the artist came earlier in this history
        quality = self.quality[b.ids["item"]]
        return (
            w["in_taste"] * in_taste
            + w["heard_artist"] * heard
            + w["quality"] * quality
            + w["after_break"] * breaks
        )

    def teacher_logits(self, b: SequenceBatch) -> torch.Tensor:
        """The hidden teacher's logit of ``listen_plus`` for every event of a batch this log drew."""
        c = self.config
        z = (self._teacher_terms(b) - self._z_mean) / self._z_std
        return c.teacher_strength * z + self._intercept

    def __iter__(self) -> Iterator[SequenceBatch]:
        """A pass over ``batch(0), batch(1), ...`` (``num_batches`` of them, or endless), or,
        right after :meth:`load_state_dict`, from the restored position."""
        self.position = 0 if self._resume is None else self._resume
        self._resume = None
        return self._iterate()

    def _iterate(self) -> Iterator[SequenceBatch]:
        while self.num_batches is None or self.position < self.num_batches:
            b = self.batch(self.position)
            self.position += 1  # the index of the next batch, as state_dict saves it
            yield b

    def state_dict(self) -> dict[str, Any]:
        """Resumable state: the next batch index and the identity of the log."""
        return {"kind": "synthetic_listening", "position": self.position, "seed": self.config.seed,
                "split": self.split}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict` output (of a log with the same seed and split): the next
        ``iter()`` continues at the saved position. A state of another stream is refused."""
        if not isinstance(state, dict) or "position" not in state:
            raise ValueError(f"state must be a dict with a 'position' key, got {show(state)}")
        if state.get("kind") != "synthetic_listening":
            raise ValueError(f"state is of a {state.get('kind')!r} stream, not of a SyntheticListening")
        for key, mine in (("seed", self.config.seed), ("split", self.split)):
            if key in state and state[key] != mine:
                raise ValueError(f"state[{key!r}] is {state[key]!r} but this log has {key}={mine!r}")
        self.position = self._resume = check_int("state['position']", state["position"], lo=0)

    def batch(self, index: int) -> SequenceBatch:
        """Batch ``index`` (>= 0) of this split: the same every time it is asked for."""
        index = check_int("index", index, lo=0)
        g = torch.Generator().manual_seed(_mix64(self.config.seed, SPLITS.index(self.split) + 3, index))
        b = self._draw(g, self.batch_size)
        labels = (torch.rand(b.num_tokens, generator=g) < torch.sigmoid(self.teacher_logits(b))).float()
        context = {USER_TABLE: b.users} if self.config.user_context else {}
        return b.replace(labels=labels, context=context)
