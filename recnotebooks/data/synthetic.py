"""A Criteo-like synthetic click stream whose labels a DLRM can learn: :class:`SyntheticCriteo`.

Batches have Criteo's shape (count-like dense features, one bag of ids per table, 0/1
clicks) and the properties that matter for training experiments:

* **Skew**: ids follow a bounded Zipf law per table (:mod:`recnotebooks.data.skew`), with
  the hot ids scattered over the table, as hashed Criteo ids are.
* **Temporal locality**: a ``reuse_fraction`` of each batch's lookups repeat ids that the
  previous batch drew, as consecutive real batches share trending items.
* **A hidden teacher**: labels come from a fixed random "true" model with per-id effects,
  pairwise dot products of per-id latent vectors between tables (the structure DLRM's
  interaction is built to capture), a dense linear term and a dense x sparse cross term
  (:class:`~recnotebooks.data.teacher.Teacher`).
* **Streaming at any scale**: nothing is stored per table row. Ids and teacher parameters
  come from integer hashes (:func:`~recnotebooks.data.skew.hash32`), so 40M-row tables cost
  no memory and any batch can be generated directly from its index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from recnotebooks.checks import (
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_fraction,
    check_int,
    check_type,
    show,
)
from recnotebooks.config import DLRMConfig
from recnotebooks.data.batch import Batch
from recnotebooks.data.skew import (
    FLOAT_MOD_MAX,
    MAX_EXPONENT,
    MAX_ROWS,
    ZipfSampler,
    _mix64,
    affine_mod,
    fmod_exact,
    hash32,
    i32,
    scatter_params,
)
from recnotebooks.data.teacher import Teacher
from recnotebooks.sparse import JaggedBatch

__all__ = ["SyntheticConfig", "SyntheticCriteo", "POOLING_DISTRIBUTIONS", "SPLITS"]

POOLING_DISTRIBUTIONS = ("fixed", "uniform", "poisson")
SPLITS = ("train", "eval")
_PROBE = 7  # stream code of the calibration batch (train and eval are 1 and 2)
#: Most ids one batch may hold (2^31, 16 GiB as int64): more is a typo in the batch size or
#: the pooling factor, and would overflow int32 offsets.
MAX_IDS_PER_BATCH = 2**31


def _exponent(name: str, value: object) -> float:
    return check_float(name, value, lo=0.0, hi=MAX_EXPONENT, lo_open=True)


@dataclass(frozen=True)
class SyntheticConfig:
    """How the synthetic stream is drawn (validated on construction).

    Args:
        zipf_exponent: Zipf exponent of id popularity, one for all tables or one per table.
        reuse_fraction: fraction of each table's lookups in a batch that copy ids the
            previous batch drew fresh for that table (temporal locality), in [0, 1).
        pooling: bag-size distribution with mean ``TableConfig.pooling_factor``: ``"fixed"``
            (the mean, rounded), ``"uniform"`` (on [0, 2 * mean], rounded) or ``"poisson"``.
        positive_rate: target click rate in (0, 1) (Criteo: about 0.256).
        teacher_strength: scale of the teacher's standardised logit, in [0, 100]; bigger =
            more learnable (a higher achievable AUC; 2.5 gives about 0.9).
        label_noise: probability of flipping each label, below ``min(positive_rate,
            1 - positive_rate)``; ``positive_rate`` is the rate after flipping.
        dense_log: emit ``log1p(count)`` dense features (DLRM's preprocessing), else counts.
    """

    zipf_exponent: float | tuple[float, ...] = 1.05
    reuse_fraction: float = 0.2
    pooling: str = "fixed"
    positive_rate: float = 0.25
    teacher_strength: float = 2.5
    label_noise: float = 0.0
    dense_log: bool = True

    def __post_init__(self) -> None:
        z = self.zipf_exponent
        if isinstance(z, (tuple, list)):
            if not z:
                raise ValueError("zipf_exponent must be a number or a non-empty tuple, got ()")
            z = tuple(_exponent(f"zipf_exponent[{i}]", x) for i, x in enumerate(z))
        object.__setattr__(
            self, "zipf_exponent", z if isinstance(z, tuple) else _exponent("zipf_exponent", z)
        )
        check_fraction("reuse_fraction", self.reuse_fraction, hi_open=True)
        check_choice("pooling", self.pooling, POOLING_DISTRIBUTIONS)
        p = check_fraction("positive_rate", self.positive_rate, lo_open=True, hi_open=True)
        check_float("teacher_strength", self.teacher_strength, lo=0.0, hi=100.0)
        check_float("label_noise", self.label_noise, lo=0.0, hi=min(p, 1.0 - p), hi_open=True)
        check_bool("dense_log", self.dense_log)

    def exponents(self, num_tables: int) -> tuple[float, ...]:
        """One Zipf exponent per table."""
        z = self.zipf_exponent
        if not isinstance(z, tuple):
            return (float(z),) * num_tables
        if len(z) != num_tables:
            raise ValueError(f"zipf_exponent must have one entry per table ({num_tables}), got {len(z)}")
        return z


class _Layout(NamedTuple):
    """Lookups of a batch: ``(T, n / T)`` arrays and ``(T, 1)`` parameters when every table
    has as many lookups (no gathers), else flat ``(n,)`` arrays and gathered parameters."""

    n: int
    shape: tuple[int, ...]
    per: Callable[[torch.Tensor], torch.Tensor]  # per-table (T,) tensor -> broadcastable
    counts: list[int]  # lookups per table


class SyntheticCriteo:
    """Deterministic, random-access, streaming synthetic Criteo-like batches.

    ``batch(i)`` depends only on ``(seed, split, i)`` and the configs. Each ``iter()`` is a
    pass from ``start`` (so an eval stream gives the same batches every time); iterating
    advances :attr:`position`, which :meth:`state_dict` saves for resuming. ``"train"`` and
    ``"eval"`` draw different samples from the same hidden teacher (it depends on ``seed`` and
    the configs, not on the split or ``batch_size``). Nothing accumulates per batch.

    Ids and the teacher come from integer hashes, so they agree across devices (up to rare
    last-bit differences of ``log``/``exp`` in the Zipf tail); bag sizes, dense features and
    labels use a ``torch.Generator`` seeded per batch, reproducible on one device type.
    Tables may have up to ``MAX_ROWS`` rows (``2^31`` with int32 indices).
    """

    def __init__(
        self,
        config: DLRMConfig,
        batch_size: int,
        data: SyntheticConfig = SyntheticConfig(),
        seed: int = 0,
        split: str = "train",
        num_batches: int | None = None,
        start: int = 0,
        device: torch.device | str = "cpu",
        index_dtype: torch.dtype = torch.int64,
    ) -> None:
        check_type("config", config, DLRMConfig, "a DLRMConfig")
        check_type("data", data, SyntheticConfig, "a SyntheticConfig")
        batch_size = check_int("batch_size", batch_size, lo=1)
        seed, start = check_int("seed", seed, lo=0), check_int("start", start, lo=0)
        num_batches = None if num_batches is None else check_int("num_batches", num_batches, lo=0)
        check_choice("split", split, SPLITS)
        if index_dtype not in (torch.int32, torch.int64):
            raise TypeError(f"index_dtype must be torch.int32 or torch.int64, got {show(index_dtype)}")
        ids = batch_size * config.lookups_per_sample * (2 if data.pooling != "fixed" else 1)
        if ids > MAX_IDS_PER_BATCH:
            raise ValueError(
                f"batch_size={batch_size} x {config.lookups_per_sample:g} lookups per sample is "
                f"{ids:.3g} ids per batch (up to twice the mean with pooling={data.pooling!r}), over the "
                f"{MAX_IDS_PER_BATCH:,} allowed; lower batch_size or the tables' pooling_factor"
            )
        rows = [t.num_rows for t in config.tables]
        limit = MAX_ROWS if index_dtype == torch.int64 else 2**31
        if max(rows) > limit:
            raise ValueError(f"num_rows of every table must be <= {limit} for {index_dtype}, got {max(rows)}")
        self.config, self.data, self.batch_size, self.seed, self.split = config, data, batch_size, seed, split
        self.num_batches, self.start, self.position = num_batches, start, start
        self._resume: int | None = None
        self.device, self.index_dtype = check_device("device", device), index_dtype
        self._code = SPLITS.index(split) + 1
        dev, T, D = self.device, config.num_tables, config.num_dense
        self._exps = data.exponents(T)
        self._samplers = {s: ZipfSampler.get(s, str(dev)) for s in sorted(set(self._exps))}
        mass = [self._samplers[s].mass(n) for s, n in zip(self._exps, rows, strict=True)]
        self._mass = torch.tensor(mass, dtype=torch.float64, device=dev)
        self._rows, self._max_rows = torch.tensor(rows, device=dev), max(rows)
        scatter = [scatter_params(n, _mix64(seed, t, 0x5CA7)) for t, n in enumerate(rows)]
        self._scat = torch.tensor(scatter, device=dev).T.contiguous()  # (2, T): a, b of a*rank+b mod n
        self._scat_f = (*self._scat.double(), self._rows.double())
        self._pool = torch.tensor([float(t.pooling_factor) for t in config.tables], device=dev)
        self._fixed = torch.round(self._pool).to(torch.int64)
        fixed = set(self._fixed.tolist())
        self._bag_len = fixed.pop() if data.pooling == "fixed" and len(fixed) == 1 else None
        g = torch.Generator().manual_seed(_mix64(seed, 0xDE45E) >> 1)
        self._dense_mu = (torch.rand(D, generator=g) * 5 - 1).to(dev)  # log-scale of each count
        self._dense_sigma = (torch.rand(D, generator=g) + 0.5).to(dev)
        self._teacher = Teacher(seed, T, g, D, data.teacher_strength, dev)  # the hidden click model
        self._calibrate()

    # ----- public API --------------------------------------------------------------------
    def batch(self, i: int) -> Batch:
        """Batch number ``i`` (any ``i >= 0``, in any order; deterministic)."""
        i = check_int("i", i, lo=0)
        return self._make(self._code, i, self.batch_size)

    def teacher_logits(self, batch: Batch) -> torch.Tensor:
        """The hidden true click logit of every sample of ``batch`` (float32, shape (B,))."""
        if not isinstance(batch, Batch):
            raise TypeError(f"batch must be a Batch, got {type(batch).__name__}")
        sp, dev = batch.sparse, self.device
        if sp.keys != self.config.table_names or batch.dense.shape[1] != self.config.num_dense:
            raise ValueError(
                f"batch must have keys {list(self.config.table_names)} and "
                f"{self.config.num_dense} dense columns, got {list(sp.keys)}, {batch.dense.shape[1]}"
            )
        lengths = sp.lengths.to(dev, torch.int64)
        dense = batch.dense.to(dev, torch.float32)
        lay = self._layout(lengths, sp.batch_size)
        same = lengths.numel() > 0 and bool((lengths == lengths[0]).all())
        raw = self._teacher.pieces(
            sp.values.to(dev, torch.int64).view(lay.shape),
            lengths,
            sp.batch_size,
            dense if self.data.dense_log else torch.log1p(dense),
            lay.per,
            int(lengths[0]) if same else None,
        )
        return self._teacher.logit(raw)

    def __iter__(self) -> Iterator[Batch]:
        """A pass over ``batch(start), batch(start + 1), ...`` (``num_batches`` of them, or
        endless), or, right after :meth:`load_state_dict`, from the restored position."""
        self.position = self.start if self._resume is None else self._resume
        self._resume = None
        return self._iterate()

    def _iterate(self) -> Iterator[Batch]:
        end = None if self.num_batches is None else self.start + self.num_batches
        while end is None or self.position < end:
            b = self.batch(self.position)
            self.position += 1  # the index of the next batch, as saved by state_dict
            yield b

    def __len__(self) -> int:
        if self.num_batches is None:
            raise TypeError("len() of an infinite SyntheticCriteo (num_batches=None)")
        return self.num_batches

    def state_dict(self) -> dict[str, Any]:
        """Resumable state: the next batch index plus the identity of the stream."""
        return {"kind": "synthetic_criteo", "position": self.position, "seed": self.seed, "split": self.split}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict` output (of a stream with the same seed and split):
        the next ``iter()`` continues at the saved position."""
        if not isinstance(state, dict) or "position" not in state:
            raise ValueError(f"state must be a dict with a 'position' key, got {show(state)}")
        if state.get("kind", "synthetic_criteo") != "synthetic_criteo":
            raise ValueError(f"state is of a {state['kind']!r} stream, not of a SyntheticCriteo")
        for k in ("seed", "split"):
            if k in state and state[k] != getattr(self, k):
                raise ValueError(f"state[{k!r}] is {state[k]!r} but this stream has {k}={getattr(self, k)!r}")
        pos = check_int("state['position']", state["position"], lo=0)
        self.position = self._resume = pos

    # ----- sampling ----------------------------------------------------------------------
    def _gen(self, code: int, i: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(_mix64(self.seed, code, i) >> 1)

    def _keys(self, code: int, i: int) -> tuple[int, int]:
        """Per-batch int32 counter keys: an odd multiplier and an offset."""
        return i32(_mix64(self.seed, code, i, 0)) | 1, i32(_mix64(self.seed, code, i, 1))

    def _lengths(self, gen: torch.Generator, bsz: int) -> torch.Tensor:
        """Bag sizes, key-major (T * bsz,), int64; the first draw from ``gen``."""
        if self.data.pooling == "fixed":
            return self._fixed.repeat_interleave(bsz)
        mean = self._pool.repeat_interleave(bsz)
        if self.data.pooling == "uniform":
            return torch.rand(mean.shape, generator=gen, device=self.device).mul_(mean * 2).round_().long()
        return torch.poisson(mean, generator=gen).long()

    def _layout(self, lengths: torch.Tensor, bsz: int) -> _Layout:
        T = self.config.num_tables
        n_t = lengths.view(T, bsz).sum(1)
        counts = n_t.tolist()
        if counts.count(counts[0]) == T:
            return _Layout(sum(counts), (T, counts[0]), lambda p: p.view(T, 1), counts)
        tab = torch.repeat_interleave(torch.arange(T, device=self.device), n_t, output_size=sum(counts))
        return _Layout(sum(counts), (sum(counts),), lambda p: p.index_select(0, tab), counts)

    def _reuse(self, code: int, i: int, lay: _Layout, bsz: int, ctr: torch.Tensor) -> torch.Tensor:
        """Point a ``reuse_fraction`` of each table's lookup counters at counters of the
        previous batch's *fresh* (not themselves reused) lookups of the same table.

        Each batch permutes each table's positions by ``pi(p) = (A p + C) mod n``; positions
        with ``pi(p) < R = round(r n)`` are reused, the rest are fresh. A reused position copies
        the previous batch's fresh position ``pi'^-1(R' + pi(p) mod (n' - R'))``, so every
        copied id is visible in the previous batch. Selection is an arithmetic blend."""
        r, T, dev = self.data.reuse_fraction, self.config.num_tables, self.device
        n_old = self._lengths(self._gen(code, i - 1), bsz).view(T, bsz).sum(1).tolist()
        r_old = [round(r * m) for m in n_old]
        fresh = [m - k for m, k in zip(n_old, r_old, strict=True)]
        reuse = [round(r * m) if f > 0 else 0 for m, f in zip(lay.counts, fresh, strict=True)]
        if not any(reuse):
            return ctr
        new = [
            scatter_params(m, _mix64(self.seed, code, i, t, 0xEC)) if m else (1, 0)
            for t, m in enumerate(lay.counts)
        ]
        old = [
            scatter_params(m, _mix64(self.seed, code, i - 1, t, 0xEC)) if m else (1, 0)
            for t, m in enumerate(n_old)
        ]
        inv = [pow(a, -1, m) if m > 1 else 0 for (a, _), m in zip(old, n_old, strict=True)]
        params = [
            [a for a, _ in new],
            [c for _, c in new],
            [max(m, 1) for m in lay.counts],
            reuse,
            r_old,
            [max(f, 1) for f in fresh],
            inv,
            [c for _, c in old],
            [max(m, 1) for m in n_old],
            [sum(n_old[:t]) for t in range(T)],
        ]
        A, C, n, R, R0, F0, inv0, C0, n0, s0 = map(
            lay.per, torch.tensor(params, dtype=torch.float64, device=dev)
        )
        if len(lay.shape) == 2:
            local = torch.arange(lay.shape[1], dtype=torch.float64, device=dev).view(1, -1)
        else:
            starts = torch.tensor([0] + lay.counts[:-1], device=dev).cumsum(0).double()
            local = torch.arange(lay.n, dtype=torch.float64, device=dev) - lay.per(starts)
        pi = fmod_exact(local * A + C, n)
        src = fmod_exact((R0 + fmod_exact(pi, F0) - C0 + n0) * inv0, n0) + s0
        pk = self._keys(code, i - 1)
        return ctr + (pi < R).to(torch.int32) * (src.to(torch.int32) * pk[0] + pk[1] - ctr)

    def _ids(self, code: int, i: int, lay: _Layout, bsz: int) -> torch.Tensor:
        """Ids (``lay.shape``; exact float64 integers, or int64 beyond FLOAT_MOD_MAX rows).

        A 53-bit uniform per lookup comes from ``hash32(k1 * counter + k0)`` with per-batch
        keys (an affine map per batch, so batches never line up); its Zipf rank is scattered
        over the table by the table's fixed bijection."""
        k = self._keys(code, i)
        ctr = torch.arange(lay.n, dtype=torch.int32, device=self.device).view(lay.shape) * k[0] + k[1]
        if self.data.reuse_fraction > 0 and code != _PROBE:
            ctr = self._reuse(code, i, lay, bsz, ctr)
        h = hash32(ctr)
        lo = (((h * 0x2C1B3C6D) >> 11) & 0x1FFFFF).to(torch.float64)  # 21 more bits of resolution
        x = h.to(torch.float64).add_(2.0**31).mul_(2.0**21).add_(lo).mul_(lay.per(self._mass * 2.0**-53))
        if len(self._samplers) == 1:  # x = u * Z_t: position in the table's unnormalised CDF
            ranks = next(iter(self._samplers.values())).ranks_float(x)
        else:  # per-table exponents: one slice per table (tables are contiguous, key-major)
            ranks, xf, lo_ = torch.empty_like(x).view(-1), x.view(-1), 0
            for t, cnt in enumerate(lay.counts):
                ranks[lo_ : lo_ + cnt] = self._samplers[self._exps[t]].ranks_float(xf[lo_ : lo_ + cnt])
                lo_ += cnt
            ranks = ranks.view(lay.shape)
        if self._max_rows <= FLOAT_MOD_MAX:
            return affine_mod(ranks, *map(lay.per, self._scat_f), n_max=self._max_rows)
        ranks = torch.minimum(ranks.to(torch.int64), lay.per(self._rows) - 1)
        a, b = self._scat
        return affine_mod(ranks, lay.per(a), lay.per(b), lay.per(self._rows), n_max=self._max_rows)

    def _make(self, code: int, i: int, bsz: int) -> Batch:
        gen = self._gen(code, i)
        lengths = self._lengths(gen, bsz)
        lay = self._layout(lengths, bsz)
        ids = self._ids(code, i, lay, bsz)
        z = torch.randn(bsz, self.config.num_dense, generator=gen, device=self.device)
        counts = z.mul_(self._dense_sigma).add_(self._dense_mu).exp_().floor_()  # log-normal counts
        dl = torch.log1p(counts)
        raw = self._teacher.pieces(ids, lengths, bsz, dl, lay.per, self._bag_len)
        lab = torch.rand(bsz, generator=gen, device=self.device) < torch.sigmoid(self._teacher.logit(raw))
        if self.data.label_noise > 0:
            lab ^= torch.rand(bsz, generator=gen, device=self.device) < self.data.label_noise
        idt = self.index_dtype
        sparse = JaggedBatch(self.config.table_names, ids.reshape(-1).to(idt), lengths.to(idt), bsz)
        return Batch(dl if self.data.dense_log else counts, sparse, lab.to(torch.float32))

    # ----- teacher (recnotebooks.data.teacher) ------------------------------------------
    def _calibrate(self) -> None:
        """Fit the teacher on a probe batch (:meth:`Teacher.fit`): standardised dense inputs
        and terms, and the bias that hits the target click rate."""
        bsz = max(2048, min(8192, (1 << 20) // max(1, round(self.config.lookups_per_sample))))
        gen = self._gen(_PROBE, 0)
        lengths = self._lengths(gen, bsz)
        lay = self._layout(lengths, bsz)
        ids = self._ids(_PROBE, 0, lay, bsz)
        z = torch.randn(bsz, self.config.num_dense, generator=gen, device=self.device)
        dl = torch.log1p(z.mul_(self._dense_sigma).add_(self._dense_mu).exp_().floor_())
        self._teacher.fit_dense(dl)
        raw = self._teacher.pieces(ids, lengths, bsz, dl, lay.per, self._bag_len)
        self._teacher.fit(raw, self.data.positive_rate, self.data.label_noise)
