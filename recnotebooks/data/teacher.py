"""The hidden click model that labels :class:`~recnotebooks.data.synthetic.SyntheticCriteo`'s
batches: :class:`Teacher`.

A fixed random "true" model with four terms per sample: per-id effects, pairwise dot
products of per-id latent vectors between tables (the structure DLRM's interaction is built
to capture), a dense linear term and a dense x sparse cross term. Nothing is stored per table
row: an id's effect and latent vector come from an integer hash of (seed, table, id)
(:func:`~recnotebooks.data.skew.hash32`), so 40M-row tables cost no memory. :meth:`Teacher.fit`
standardises the terms on a probe batch and picks the bias that hits the target click rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from recnotebooks.data.skew import _mix64, hash32, i32

__all__ = ["Teacher"]

_LATENT = 4  # teacher latent dimension


class Teacher:
    """The hidden true click logit of a synthetic stream (deterministic in ``seed`` and the shapes).

    Args:
        seed: the stream's seed (the per-id hash keys derive from it).
        num_tables: tables of the config (one bag per table and sample).
        gen: the stream's parameter generator, positioned after its dense-feature draws: the
            dense weights come from it (``num_dense`` and ``num_dense x 4`` normals).
        num_dense: dense features per sample.
        strength: scale of the standardised logit (``SyntheticConfig.teacher_strength``).
        device: where the parameters live.

    Call :meth:`fit_dense` and :meth:`fit` once, on a probe batch, before :meth:`logit`.
    """

    def __init__(
        self,
        seed: int,
        num_tables: int,
        gen: torch.Generator,
        num_dense: int,
        strength: float,
        device: torch.device,
    ) -> None:
        T, D, dev = num_tables, num_dense, device
        self.num_tables, self.strength, self.device = T, strength, dev
        keys = [[i32(_mix64(seed, t, 0x7EAC, j)) | (j == 0) for t in range(T)] for j in (0, 1)]
        self._tkeys = torch.tensor(keys, dtype=torch.int32, device=dev)  # (2, T): odd multiplier, offset
        q = (torch.arange(65536, dtype=torch.float64) + 0.5) / 65536
        self._normal_q = torch.special.ndtri(q).to(device=dev, dtype=torch.float32)  # N(0,1) quantiles
        self._w = (torch.randn(D, generator=gen) / math.sqrt(D)).to(dev)
        self._proj = (torch.randn(D, _LATENT, generator=gen) / math.sqrt(D)).to(dev)

    def pieces(
        self,
        ids: torch.Tensor,
        lengths: torch.Tensor,
        bsz: int,
        dl: torch.Tensor,
        per: Callable,
        bag_len: int | None,
    ) -> torch.Tensor:
        """The teacher's four raw terms per sample, (B, 4): the sum over tables of the
        bag-mean effect ``a``, the pairwise dot products of the bag-mean latents ``v`` between
        tables, a linear dense term and a dense x latent cross term. Per id, a hash of
        (seed, table, id) gives ``a ~ N(0, 1)`` and ``v`` uniform on [-sqrt(3), sqrt(3)]^4.

        ``ids`` are laid out as the stream's ``_Layout`` (``per`` broadcasts a per-table
        tensor onto them), ``dl`` are ``log1p`` dense features, ``bag_len`` the bag size when
        every bag has it (a faster path), else ``None``."""
        T, n = self.num_tables, ids.numel()
        h = hash32(ids.to(torch.int32) * per(self._tkeys[0]) + per(self._tkeys[1]))  # ids < 2^32 wrap
        a = self._normal_q.index_select(0, (h & 0xFFFF).view(-1))
        h = h * 0x2C1B3C6D
        h ^= (h >> 15) & 0x1FFFF  # one more mixing round, then four latent bytes
        if n == 0:
            a_p, v_p = (
                torch.zeros(T * bsz, device=self.device),
                torch.zeros(T * bsz, _LATENT, device=self.device),
            )
        elif bag_len and bag_len < 258:  # byte pairs summed in 16-bit lanes of int32 (no overflow)
            a_p, h = a.view(T * bsz, bag_len).mean(1), h.view(T * bsz, bag_len)
            s02, s13 = (h & 0x00FF00FF).sum(1), ((h >> 8) & 0x00FF00FF).sum(1)
            v_p = torch.stack([s02 & 0xFFFF, s13 & 0xFFFF, s02 >> 16, s13 >> 16], 1).float() / bag_len
        else:
            feats = torch.cat([a.unsqueeze(1), h.view(-1).view(torch.uint8).view(n, _LATENT).float()], 1)
            off = torch.zeros(T * bsz + 1, dtype=torch.int64, device=self.device)
            torch.cumsum(lengths, 0, out=off[1:])
            ar = torch.arange(n, device=self.device)
            pooled = F.embedding_bag(ar, feats, off, mode="mean", include_last_offset=True)
            a_p, v_p = pooled[:, 0], pooled[:, 1:]
        v = ((v_p + 0.5) / 256 - 0.5) * math.sqrt(12) * (lengths > 0).unsqueeze(1)  # empty bag: 0
        v = v.view(T, bsz, _LATENT)
        vs = v.sum(0)
        pairs = ((vs * vs).sum(1) - (v * v).sum((0, 2))) / 2  # sum over table pairs t < t' of <v_t, v_t'>
        d = (dl - self._dmean) * self._dscale
        return torch.stack([a_p.view(T, bsz).sum(0), pairs, d @ self._w, ((d @ self._proj) * vs).sum(1)], 1)

    def logit(self, raw: torch.Tensor) -> torch.Tensor:
        """The click logit of each sample from its :meth:`pieces` (after :meth:`fit`)."""
        return ((raw - self._pmean) * self._pscale).sum(1) * self.strength + self._bias

    def fit_dense(self, dl: torch.Tensor) -> None:
        """Standardise the dense inputs on a probe batch's ``log1p`` dense features ``dl`` (unit
        variance): the first half of fitting, before :meth:`pieces` of that batch."""
        sd = dl.std(0)
        self._dmean, self._dscale = dl.mean(0), torch.where(sd > 1e-6, 1.0 / sd.clamp(min=1e-6), 0.0)

    def fit(self, pieces: torch.Tensor, positive_rate: float, label_noise: float) -> None:
        """On a probe batch's :meth:`pieces` (after :meth:`fit_dense` of its dense features):
        standardise each teacher term (unit variance, equal weight, so embeddings and the dense MLP
        both matter), then pick the bias so that the mean click probability, after flipping a
        ``label_noise`` share of the labels, hits ``positive_rate``."""
        raw = pieces.double()
        pm, ps = raw.mean(0), raw.std(0)
        active = ps > 1e-6 * (1 + pm.abs())  # e.g. no pairs term with one table
        scale = torch.where(active, 1.0 / ps.clamp(min=1e-30), 0.0) / math.sqrt(max(1, int(active.sum())))
        self._pmean, self._pscale, self._bias = pm.float(), scale.float(), 0.0
        logit = self.logit(raw.float()).double()
        eps = label_noise
        target = (positive_rate - eps) / (1 - 2 * eps)
        lo, hi = -60.0, 60.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if float(torch.sigmoid(logit + mid).mean()) < target else (lo, mid)
        self._bias = 0.5 * (lo + hi)
