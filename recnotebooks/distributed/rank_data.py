"""The global batches a rank of a distributed DLRM run trains and evaluates on.

At step ``i`` every rank draws the **global** batch ``i``, exactly the batch the single-process
``recnb train`` draws, and keeps its contiguous slice of it
(:func:`~recnotebooks.distributed.hybrid.local_samples`), so ``N`` ranks see the samples one
process sees:

* synthetic data: :class:`~recnotebooks.data.SyntheticCriteo` of the run's seed
  (:func:`train_batches`, :func:`eval_batches`);
* real data (``recnb train --data``): :class:`CriteoFiles` names the Criteo files; every rank opens
  its own :class:`~recnotebooks.data.criteo.CriteoReader` of them with the global batch size and
  splits it as one process does (:class:`~recnotebooks.data.split.HeldOutSplit`: the same held-out
  batches, the same train batches in the same order, the files repeated when they run out).

Every rank reads and parses every line: the cost is ``N`` times the parsing of one process (on
the reader's vectorised path, a small share of a step). A split by bytes or by line ranges would
parse ``1/N`` each, but a gzip stream cannot be entered in the middle (every rank would still
decompress everything up to its range), and lines the reader skips as malformed shift every later
sample, so a rank cannot know where its samples start without parsing what comes before; reading
the same stream keeps the exactness for free. Evaluation pads a last, partial held-out batch to a
multiple of ``N`` samples (:func:`pad_batch`: copies of its last sample, whose predictions are
dropped), so the metrics are over the same samples too. :func:`data_state` is the stream's
position after a step, as a checkpoint records it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from ..checks import check_enough, check_fraction, check_type
from ..config import Workload
from ..data.batch import Batch
from ..data.criteo import CriteoReader
from ..data.split import HeldOutSplit, is_held_out
from ..data.synthetic import SyntheticConfig, SyntheticCriteo
from ..sparse import JaggedBatch
from .hybrid import local_samples

__all__ = ["CriteoFiles", "data_state", "eval_batches", "pad_batch", "train_batches"]


@dataclass(frozen=True)
class CriteoFiles:
    """The Criteo TSV files a distributed run trains on (``recnb train --data``) and the share of
    their batches held out for evaluation: a description, picklable, that travels to the ranks, where
    each opens its own reader (see the module docstring). ``TypeError``/``ValueError`` naming the
    field; the files themselves are checked by :meth:`check`."""

    paths: tuple[str, ...]
    eval_fraction: float

    def __post_init__(self) -> None:
        paths = (self.paths,) if isinstance(self.paths, (str, Path)) else self.paths
        if not isinstance(paths, (tuple, list)) or not paths:
            raise ValueError(f"paths must be a file path or a non-empty tuple of them, got {self.paths!r}")
        paths = tuple(
            str(check_type(f"paths[{i}]", p, (str, Path), "a file path")) for i, p in enumerate(paths)
        )
        object.__setattr__(self, "paths", paths)
        fraction = check_fraction("eval_fraction", self.eval_fraction, lo_open=True, hi_open=True)
        object.__setattr__(self, "eval_fraction", fraction)

    def split(self, workload: Workload, split: str) -> HeldOutSplit:
        """A new reader of the files (global batches of ``workload.batch_size``) and its ``"train"``
        split (the files repeated; a last partial batch dropped) or ``"eval"`` split (one pass; a last
        partial batch kept), as the single-process ``recnb train --data`` reads them."""
        reader = CriteoReader(
            list(self.paths), workload.config, workload.batch_size, drop_last=split == "train"
        )
        return HeldOutSplit(reader, self.eval_fraction, split)

    def check(self, workload: Workload) -> None:
        """That the files open as Criteo for ``workload``'s model (the reader's errors) and hold at
        least one train batch: reads until the first one (a few batches), the whole files only when
        they are too small. ``ValueError`` naming the files, their usable samples and the least."""
        reader = self.split(workload, "train").source
        first = next(i for i in itertools.count() if not is_held_out(i, self.eval_fraction))
        for i, _ in enumerate(reader):
            if i == first:
                return
        b = workload.batch_size
        check_enough(
            f"data {list(self.paths)}", reader.stats.parsed, (first + 1) * b,
            f"usable samples ({first + 1} global batches of batch_size={b}: with eval_fraction="
            f"{self.eval_fraction} the first train batch is batch {first}; give more data, a smaller "
            "batch size or a smaller eval fraction)",
        )  # fmt: skip


def train_batches(
    workload: Workload, data: CriteoFiles | None, seed: int, data_cfg: SyntheticConfig, start: int = 0
) -> tuple[Iterator[Batch], CriteoReader | None]:
    """The global training batches ``start, start + 1, ...`` (the single-process run's: the synthetic
    stream of ``seed``, or the files' train split) and the reader of the files (``None`` on
    synthetic data)."""
    if data is None:
        stream = SyntheticCriteo(workload.config, workload.batch_size, data_cfg, seed=seed, split="train")
        return (stream.batch(i) for i in itertools.count(start)), None
    split = data.split(workload, "train")
    split.position = start  # the batches from ``start`` on (the split skips those before)
    return iter(split), cast(CriteoReader, split.source)


def eval_batches(
    workload: Workload, data: CriteoFiles | None, seed: int, data_cfg: SyntheticConfig, n: int
) -> Iterator[Batch]:
    """The first ``n`` held-out batches the single-process run evaluates (fewer when the files' eval
    split has fewer; its last may be partial)."""
    if data is None:
        stream = SyntheticCriteo(workload.config, workload.batch_size, data_cfg, seed=seed, split="eval")
        return (stream.batch(i) for i in range(n))
    return itertools.islice(iter(data.split(workload, "eval")), n)


def pad_batch(batch: Batch, size: int) -> Batch:
    """``batch`` with copies of its last sample appended up to ``size`` samples (a partial held-out
    batch made divisible by the world size; the copies' predictions are dropped)."""
    n, extra = batch.batch_size, size - batch.batch_size
    if extra == 0:
        return batch
    sp, last = batch.sparse, local_samples(batch.sparse, n - 1, n)
    off, last_off = sp.offsets().tolist(), last.offsets().tolist()

    def keyed(full: torch.Tensor, one: torch.Tensor) -> torch.Tensor:
        """Per key (key-major): the batch's values (or weights), then the last sample's, repeated."""
        ranges = [(off[k * n], off[(k + 1) * n], last_off[k], last_off[k + 1]) for k in range(sp.num_keys)]
        return torch.cat([p for a, b, c, d in ranges for p in (full[a:b], one[c:d].repeat(extra))])

    weights = None if sp.weights is None or last.weights is None else keyed(sp.weights, last.weights)
    lengths = torch.cat([sp.lengths.view(sp.num_keys, n), last.lengths.view(-1, 1).expand(-1, extra)], 1)
    sparse = JaggedBatch(sp.keys, keyed(sp.values, last.values), lengths.reshape(-1), size, weights)
    dense = torch.cat([batch.dense, batch.dense[-1:].expand(extra, -1)])
    return Batch(dense, sparse, torch.cat([batch.labels, batch.labels[-1:].expand(extra)]))


def data_state(workload: Workload, data: CriteoFiles | None, seed: int, step: int) -> dict[str, Any]:
    """The training data's position after ``step`` steps, as the single-process run's stream records
    it (:meth:`~recnotebooks.data.synthetic.SyntheticCriteo.state_dict`,
    :meth:`~recnotebooks.data.split.HeldOutSplit.state_dict`): what a checkpoint saves, and what a
    run that resumes from it must read."""
    if data is None:
        return {"kind": "synthetic_criteo", "position": step, "seed": seed, "split": "train"}
    split = data.split(workload, "train")
    split.position = step
    return split.state_dict()
