"""Jagged sparse batches: :class:`JaggedBatch`; and how jagged histories are bucketed by length.

A batch of multi-hot categorical features in the layout of torchrec's ``KeyedJaggedTensor``:
one flat ``values`` tensor of ids, ``lengths`` giving the bag size of every (key, sample)
pair in **key-major** order (all samples of key 0, then key 1, ...), optional per-id
``weights`` and an explicit ``batch_size``. ``offsets`` are the running sums of ``lengths``
(``len(lengths) + 1`` entries, starting at 0).

A worked example: two tables (``"user"``, ``"ad"``), a batch of 3 samples::

    sample              0        1      2
    user ids          [7, 2]    []     [5]
    ad ids            [1]      [4, 4]  [9, 3, 3]

    keys    = ("user", "ad")
    lengths = [2, 0, 1,   1, 2, 3]            all samples of "user", then all of "ad"
    values  = [7, 2, 5,   1, 4, 4, 9, 3, 3]   the ids, bag after bag
    offsets = [0, 2, 2, 3, 4, 6, 9]          bag i is values[offsets[i]:offsets[i + 1]]

Sample 1 has an empty "user" bag (length 0): it pools to a zero vector. The same ``4`` twice
in one bag is two lookups of one row (summed twice, and its gradient counted twice).
``JaggedBatch.from_lists({"user": [[7, 2], [], [5]], "ad": [[1], [4, 4], [9, 3, 3]]})``
builds exactly this batch.

Histories of a generative recommender's batch are jagged too; its fast attention
(:mod:`recnotebooks.kernels.jagged_attention`) runs histories of like length as one padded
block. The rule that groups them lives here, on plain ints, so that the kernel and the model
that prices it (:mod:`recnotebooks.perf.hstu`) share it: :func:`padded_length` rounds a length
``n`` up to a multiple of ``max(MIN_STEP, 2^floor(log2 n) / 4)`` (a bucket pads at most about
25%), and :func:`buckets` groups the histories of a batch by that padded length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from recnotebooks.checks import check_choice, check_float, check_int, check_type, show

if TYPE_CHECKING:  # the optional torchrec package, for annotations only
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

__all__ = ["MIN_STEP", "JaggedBatch", "buckets", "padded_length"]

_INT_DTYPES = (torch.int32, torch.int64)

#: Shortest padding step of :func:`padded_length`: lengths are rounded up to a multiple of at least this.
MIN_STEP = 8


def padded_length(n: int) -> int:
    """``n`` rounded up to a multiple of ``max(MIN_STEP, 2^floor(log2 n) / 4)``: the length of
    the bucket a history of ``n`` events runs in (``n = 0``: 0)."""
    step = max(MIN_STEP, (1 << max(n, 1).bit_length() - 1) // 4)
    return -(-n // step) * step


def buckets(lengths: Sequence[int]) -> dict[int, list[int]]:
    """Padded length (:func:`padded_length`) -> the histories (indices into ``lengths``) padded
    to it, in order of first appearance; empty histories are in none."""
    out: dict[int, list[int]] = {}
    for b, n in enumerate(lengths):
        if n:
            out.setdefault(padded_length(n), []).append(b)
    return out


@dataclass(frozen=True, eq=False)
class JaggedBatch:
    """Key-major jagged batch of ids (see module docstring). Validated on construction.

    Args:
        keys: feature (table) names, unique.
        values: 1-D int32/int64 ids, all bags concatenated.
        lengths: 1-D int32/int64, ``len(keys) * batch_size`` bag sizes, key-major.
        batch_size: samples in the batch.
        weights: optional 1-D float per-id weights, same length as ``values``.
    """

    keys: tuple[str, ...]
    values: torch.Tensor
    lengths: torch.Tensor
    batch_size: int
    weights: torch.Tensor | None = None
    _offsets: torch.Tensor | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = tuple(self.keys) if not isinstance(self.keys, (str, bytes)) else None
        if keys is None or any(not isinstance(k, str) for k in keys):
            raise TypeError(f"keys must be a sequence of str, got {show(self.keys)}")
        if len(set(keys)) != len(keys) or not keys:
            raise ValueError(f"keys must be non-empty and unique, got {show(list(keys))}")
        object.__setattr__(self, "keys", keys)
        bs = check_int("batch_size", self.batch_size, lo=1)
        object.__setattr__(self, "batch_size", bs)
        for name in ("values", "lengths"):
            t = getattr(self, name)
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dtype not in _INT_DTYPES or t.dim() != 1:
                raise TypeError(
                    f"{name} must be a 1-D int32/int64 tensor, got dtype={t.dtype}, shape={tuple(t.shape)}"
                )
        expected = len(keys) * bs
        if self.lengths.numel() != expected:
            raise ValueError(
                f"lengths must have len(keys) * batch_size = {len(keys)} * {bs} = {expected} "
                f"entries (key-major), got {self.lengths.numel()}"
            )
        if self.lengths.device != self.values.device:
            raise ValueError(
                "values and lengths must be on one device, "
                f"got {self.values.device} and {self.lengths.device}"
            )
        if expected and int(self.lengths.min()) < 0:
            bad = int(torch.nonzero(self.lengths < 0)[0])
            raise ValueError(
                f"lengths must be >= 0, got lengths[{bad}]={int(self.lengths[bad])} "
                f"(key {keys[bad // bs]!r}, sample {bad % bs})"
            )
        n = self.values.numel()
        if expected and int(self.lengths.max()) > n:  # also keeps the sum below from wrapping int64
            bad = int(torch.argmax(self.lengths))
            raise ValueError(
                f"lengths must each be <= len(values) = {n}, got lengths[{bad}]={int(self.lengths[bad])} "
                f"(key {keys[bad // bs]!r}, sample {bad % bs})"
            )
        if self.lengths.dtype == torch.int32 and n >= 2**31:
            raise ValueError(f"lengths must be int64 for {n:,} values (int32 offsets would overflow)")
        total = int(self.lengths.sum())
        if total != n:
            raise ValueError(
                f"lengths must sum to len(values): sum(lengths)={total}, len(values)={self.values.numel()}"
            )
        w = self.weights
        if w is not None:
            if not isinstance(w, torch.Tensor) or not w.is_floating_point() or w.dim() != 1:
                raise TypeError("weights must be a 1-D floating-point tensor or None")
            if w.device != self.values.device:
                raise ValueError(
                    f"weights must be on the device of values ({self.values.device}), got {w.device}"
                )
            if w.numel() != self.values.numel():
                raise ValueError(
                    "weights must have one entry per value: "
                    f"len(weights)={w.numel()}, len(values)={self.values.numel()}"
                )

    # ----- constructors -------------------------------------------------------------
    @classmethod
    def from_lists(
        cls,
        features: Mapping[str, Sequence[Sequence[int]]],
        weights: Mapping[str, Sequence[Sequence[float]]] | None = None,
        dtype: torch.dtype = torch.int64,
    ) -> JaggedBatch:
        """Build from ``{key: [bag_of_sample0, bag_of_sample1, ...]}`` (for tests and teaching)."""
        check_type("features", features, Mapping, "a mapping {key: [bag of ids per sample]}")
        check_choice("dtype", dtype, _INT_DTYPES)
        keys = list(features)
        if not keys:
            raise ValueError("features must have at least one key, got {}")
        if weights is not None:
            check_type("weights", weights, Mapping, "None or a mapping {key: [bag of weights per sample]}")
            if set(weights) != set(keys):
                raise ValueError(f"weights must have the keys of features {keys}, got {list(weights)}")
        sizes = {k: len(v) for k, v in features.items()}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"every key must have the same number of samples, got {sizes}")
        info = torch.iinfo(dtype)
        vals: list[int] = []
        lens: list[int] = []
        ws: list[float] = []
        for k in keys:
            for i, bag in enumerate(features[k]):
                bag = list(bag)
                vals.extend(
                    check_int(f"features[{k!r}][{i}][{j}]", x, lo=info.min, hi=info.max)
                    for j, x in enumerate(bag)
                )
                lens.append(len(bag))
                if weights is not None:
                    wb = list(weights[k][i])
                    if len(wb) != len(bag):
                        raise ValueError(
                            f"weights[{k!r}][{i}] must match its bag length {len(bag)}, got {len(wb)} weights"
                        )
                    ws.extend(check_float(f"weights[{k!r}][{i}][{j}]", x) for j, x in enumerate(wb))
        return cls(
            keys=tuple(keys),
            values=torch.tensor(vals, dtype=dtype),
            lengths=torch.tensor(lens, dtype=dtype),
            batch_size=sizes[keys[0]],
            weights=torch.tensor(ws, dtype=torch.float32) if weights is not None else None,
        )

    # ----- derived ------------------------------------------------------------------
    @property
    def num_keys(self) -> int:
        return len(self.keys)

    @property
    def device(self) -> torch.device:
        return self.values.device

    def offsets(self) -> torch.Tensor:
        """Running sums of ``lengths``: ``len(lengths) + 1`` entries starting at 0 (cached)."""
        if self._offsets is None:
            off = torch.zeros(self.lengths.numel() + 1, dtype=self.lengths.dtype, device=self.device)
            torch.cumsum(self.lengths, 0, out=off[1:])
            object.__setattr__(self, "_offsets", off)
        return self._offsets  # type: ignore[return-value]

    def length_per_key(self) -> torch.Tensor:
        """Number of ids of each key in the batch (``num_keys`` entries)."""
        return self.lengths.view(self.num_keys, self.batch_size).sum(1)

    def __getitem__(self, key: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``(values, lengths)`` of one key."""
        if key not in self.keys:
            raise KeyError(f"key {key!r} not in batch keys {list(self.keys)}")
        k = self.keys.index(key)
        off = self.offsets()
        lo, hi = int(off[k * self.batch_size]), int(off[(k + 1) * self.batch_size])
        return self.values[lo:hi], self.lengths[k * self.batch_size : (k + 1) * self.batch_size]

    def to_lists(self) -> dict[str, list[list[int]]]:
        """Inverse of :meth:`from_lists` (ids only)."""
        out: dict[str, list[list[int]]] = {}
        vals = self.values.tolist()
        lens = self.lengths.tolist()
        pos = 0
        for k, key in enumerate(self.keys):
            bags = []
            for n in lens[k * self.batch_size : (k + 1) * self.batch_size]:
                bags.append(vals[pos : pos + n])
                pos += n
            out[key] = bags
        return out

    # ----- movement -----------------------------------------------------------------
    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> JaggedBatch:
        return JaggedBatch(
            self.keys,
            fn(self.values),
            fn(self.lengths),
            self.batch_size,
            None if self.weights is None else fn(self.weights),
        )

    def to(self, device: torch.device | str, non_blocking: bool = False) -> JaggedBatch:
        """Copy to ``device`` (a no-op if already there)."""
        device = torch.device(device)
        if device == self.device:
            return self
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> JaggedBatch:
        """Pinned (page-locked) host copy for fast asynchronous host-to-device copies."""
        return self._map(lambda t: t.pin_memory())

    def is_pinned(self) -> bool:
        return self.values.is_pinned()

    # ----- torchrec interop -----------------------------------------------------------
    def to_kjt(self) -> KeyedJaggedTensor:
        """Convert to ``torchrec.KeyedJaggedTensor`` (needs the optional torchrec package)."""
        try:
            from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
        except ImportError as e:  # pragma: no cover - depends on environment
            raise ImportError("to_kjt needs torchrec: pip install torchrec") from e
        return KeyedJaggedTensor(
            keys=list(self.keys),
            values=self.values,
            lengths=self.lengths,
            weights=self.weights,
            stride=self.batch_size,
        )

    @classmethod
    def from_kjt(cls, kjt: KeyedJaggedTensor) -> JaggedBatch:
        """Convert from a ``torchrec.KeyedJaggedTensor`` (key-major, like this class)."""
        return cls(
            keys=tuple(kjt.keys()),
            values=kjt.values(),
            lengths=kjt.lengths(),
            batch_size=int(kjt.stride()),
            weights=kjt.weights_or_none(),
        )
