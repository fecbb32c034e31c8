"""Batches of user histories for generative recommenders: :class:`SequenceBatch`.

A batch holds ``B`` histories, ``L`` events in all, **jagged**: every per-event tensor lists
the events of history 0, then history 1, ...; ``offsets`` (``B + 1`` running sums of the
lengths) says where each starts. No padding::

    lengths = [3, 1, 2]
    offsets = [0, 3, 4, 6]              history b is events offsets[b] .. offsets[b + 1] - 1
    ids["item"] = [7, 7, 2 | 5 | 9, 1]  one id per table per event
    context["user"] = [4, 8, 6]         one id per context table per history (optional)

Where they come from: :class:`~recnotebooks.data.listening.SyntheticListening` (a synthetic
listening log), :class:`~recnotebooks.data.movielens.MovieLensHistories` (MovieLens-1M's
ratings, downloaded by the user).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from recnotebooks.checks import check_jagged_offsets, check_jagged_timestamps, show
from recnotebooks.sparse import JaggedBatch

__all__ = ["SequenceBatch", "most_recent"]


@dataclass(frozen=True)
class SequenceBatch:
    """``B`` histories of ``L`` events (checked on construction).

    Attributes:
        users: ``(B,)`` the user of each history.
        offsets: ``(B + 1,)`` where each history starts (from 0 to ``L``, never decreasing).
        ids: table name -> ``(L,)`` int64 ids, one per event (e.g. ``item``, ``album``, ``artist``).
        timestamps: ``(L,)`` int64 seconds, non-decreasing within each history.
        labels: ``(L,)`` float 0./1.: the action on each event (liked or not).
        context: table name -> ``(B,)`` int64 ids, one per *history* (a user's id, its crosses:
            the contextual features a generative recommender reads once, ahead of the events);
            empty when the batch has none. Its names must differ from :attr:`ids`'.
    """

    users: torch.Tensor
    offsets: torch.Tensor
    ids: Mapping[str, torch.Tensor]
    timestamps: torch.Tensor
    labels: torch.Tensor
    context: Mapping[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = int(self.offsets[-1]) if isinstance(self.offsets, torch.Tensor) and len(self.offsets) else 0
        check_jagged_offsets("offsets", self.offsets, n)
        if not isinstance(self.users, torch.Tensor) or self.users.shape != (len(self.offsets) - 1,):
            raise ValueError(
                f"users must be a ({len(self.offsets) - 1},) tensor, one per history, got {show(self.users)}"
            )
        if not isinstance(self.ids, Mapping) or not self.ids:
            raise TypeError(f"ids must map table names to (L,) id tensors, got {show(self.ids)}")
        object.__setattr__(self, "ids", dict(self.ids))
        for name, t in (*((f"ids[{k!r}]", v) for k, v in self.ids.items()), ("timestamps", self.timestamps),
                        ("labels", self.labels)):  # fmt: skip
            if not isinstance(t, torch.Tensor) or t.shape != (n,):
                raise ValueError(f"{name} must be a ({n},) tensor, one per event, got {show(t)}")
        self._check_values()
        self._check_context()

    def _check_values(self) -> None:
        """Ids that index a table, labels 0/1, time that never goes back within a history."""
        for k, v in self.ids.items():
            if v.is_floating_point() or v.dtype == torch.bool or (len(v) and int(v.min()) < 0):
                got = f"dtype {v.dtype}" if v.is_floating_point() or v.dtype == torch.bool else int(v.min())
                raise ValueError(f"ids[{k!r}] must hold integer ids >= 0, got {got}")
        bad = self.labels[(self.labels != 0) & (self.labels != 1)]
        if len(bad):
            raise ValueError(f"labels must hold 0. or 1. (the action on each event), got {bad[0].item()}")
        check_jagged_timestamps("timestamps", self.timestamps, self.offsets)

    def _check_context(self) -> None:
        """:attr:`context`: a mapping of names not in :attr:`ids` to ``(B,)`` integer tensors."""
        if not isinstance(self.context, Mapping):
            raise TypeError(f"context must map table names to (B,) id tensors, got {show(self.context)}")
        object.__setattr__(self, "context", dict(self.context))
        b = len(self.offsets) - 1
        for k, t in self.context.items():
            if k in self.ids:
                raise ValueError(
                    f"context[{k!r}] names a table of ids (one per event); a table is one or the other"
                )
            if not isinstance(t, torch.Tensor) or t.shape != (b,) or t.is_floating_point():
                raise ValueError(
                    f"context[{k!r}] must be a ({b},) integer tensor, one per history, got {show(t)}"
                )

    @property
    def batch_size(self) -> int:
        """``B``: histories in the batch (a trainer's samples)."""
        return len(self.offsets) - 1

    @property
    def lengths(self) -> torch.Tensor:
        """Events per history, ``(B,)``."""
        return self.offsets[1:] - self.offsets[:-1]

    @property
    def num_tokens(self) -> int:
        """``L``: events in the batch."""
        return int(self.offsets[-1])

    def tokens(self, keys: Sequence[str] | None = None) -> JaggedBatch:
        """The ids as a model looks them up, ``batch_size = L``, the tables ``keys`` in order
        (default: :attr:`ids`', then :attr:`context`'s): a table of :attr:`ids` has one id per
        event (a bag of one each); a table of :attr:`context` one id per history, in the bag of
        the history's first event (the other events' bags are empty; an empty history has no
        bag, and no context is looked up for it), so it is looked up once a history."""
        keys = (*self.ids, *self.context) if keys is None else tuple(keys)
        unknown = [k for k in keys if k not in self.ids and k not in self.context]
        if unknown:
            raise ValueError(
                f"keys must name tables of this batch ({list(self.ids)} per event, {list(self.context)} "
                f"per history), got {unknown}"
            )
        n, dev = self.num_tokens, self.offsets.device
        if not n:
            raise ValueError(
                f"tokens: the batch holds no events (offsets {self.offsets.tolist()}); an empty batch has "
                "nothing to look up or train"
            )
        firsts = self.offsets[:-1][self.lengths > 0]
        values, lengths = [], []
        for k in keys:
            if k in self.ids:
                values.append(self.ids[k])
                lengths.append(torch.ones(n, dtype=torch.int64, device=dev))
            else:
                values.append(self.context[k][self.lengths > 0])
                one = torch.zeros(n, dtype=torch.int64, device=dev)
                one[firsts] = 1
                lengths.append(one)
        return JaggedBatch(keys, torch.cat(values), torch.cat(lengths), n)

    def previous_actions(self) -> torch.Tensor:
        """For each event, what the user did on the event before it in the same history, as an
        index into :data:`recnotebooks.config.hstu.ACTIONS`: 0 none (a history's first), 1 not
        liked, 2 liked. Never the event's own label."""
        actions = torch.zeros(self.num_tokens, dtype=torch.int64, device=self.labels.device)
        actions[1:] = 1 + self.labels[:-1].to(torch.int64)
        actions[self.offsets[:-1][self.lengths > 0]] = 0
        return actions

    def to(self, device: torch.device | str, non_blocking: bool = False) -> SequenceBatch:
        """The same batch on ``device`` (every tensor moved; itself when already there)."""
        device = torch.device(device)
        if self.offsets.device == device:
            return self

        def move(t: torch.Tensor) -> torch.Tensor:
            return t.to(device, non_blocking=non_blocking)

        return SequenceBatch(move(self.users), move(self.offsets), {k: move(v) for k, v in self.ids.items()},
                             move(self.timestamps), move(self.labels),
                             {k: move(v) for k, v in self.context.items()})  # fmt: skip

    def replace(self, **changes: object) -> SequenceBatch:
        """The same batch with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def most_recent(starts: torch.Tensor, lo: int, hi: int, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Users ``lo .. hi - 1`` of a log sorted by user then time (user ``u``'s events are rows
    ``starts[u] .. starts[u + 1] - 1``), each cut to its most recent ``max_length`` events: the
    rows to take, in order, and the batch's ``offsets``. How a reader of a real log (MovieLens,
    Yambda) makes its histories."""
    ends = starts[lo + 1 : hi + 1]
    first = torch.maximum(starts[lo:hi], ends - max_length)
    rows = torch.cat([torch.arange(a, b) for a, b in zip(first.tolist(), ends.tolist(), strict=True)])
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), (ends - first).cumsum(0)])
    return rows, offsets
