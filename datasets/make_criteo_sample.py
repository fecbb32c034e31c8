"""Write a small SYNTHETIC sample in the Criteo TSV format (it contains no Criteo data).

The rows come from :class:`recnotebooks.data.synthetic.SyntheticCriteo` with the
``criteo_kaggle`` preset's 26 table sizes, so the labels are learnable (they follow that
module's hidden teacher model) and the ids are Zipf-skewed like real Criteo ids:

* label: the generator's 0/1 click label;
* I1..I13: the generator's count features (``round(expm1(log1p(count)))``), and ``-1`` for
  about half of the zero counts of I2 (real Criteo has small negative values there; the
  reader's ``log(1 + max(x, 0))`` maps both to 0);
* C1..C26: the generator's ids written as 8 hex digits. An id is smaller than its table, so
  the reader's ``int(h, 16) % rows`` gives back the same id;
* about ``--missing`` (default 2%) of the dense and categorical fields are left empty.

Usage (from the repository root)::

    python datasets/make_criteo_sample.py --out datasets/criteo_sample.tsv.gz --lines 6000 --seed 0
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from recnotebooks.config import preset  # noqa: E402
from recnotebooks.data.criteo import NUM_CATEGORICAL, NUM_DENSE, write_criteo_tsv  # noqa: E402
from recnotebooks.data.synthetic import SyntheticCriteo  # noqa: E402


def make_sample(out: str | Path, lines: int, seed: int = 0, missing: float = 0.02) -> dict[str, float]:
    """Write ``lines`` synthetic Criteo-format rows to ``out`` (gzip if it ends in .gz)."""
    if lines < 1:
        raise ValueError(f"lines must be >= 1, got {lines}")
    if not 0.0 <= missing < 1.0:
        raise ValueError(f"missing must be in [0, 1), got {missing}")
    cfg = preset("criteo_kaggle")
    bs = min(lines, 4096)
    gen = SyntheticCriteo(cfg, batch_size=bs, seed=seed)
    labels, dense, ids = [], [], []
    for i in range(math.ceil(lines / bs)):
        b = gen.batch(i)
        if not bool((b.sparse.lengths == 1).all()):
            raise RuntimeError("expected exactly one id per table and sample (pooling factor 1)")
        labels.append(b.labels.numpy())
        dense.append(np.rint(np.expm1(b.dense.double().numpy())).astype(np.int64))
        ids.append(b.sparse.values.view(NUM_CATEGORICAL, bs).T.numpy())
    labels_a = np.concatenate(labels)[:lines].astype(np.int64)
    dense_a = np.concatenate(dense)[:lines]
    ids_a = np.concatenate(ids)[:lines]
    rng = np.random.default_rng(seed)
    dense_a[:, 1] = np.where((dense_a[:, 1] == 0) & (rng.random(lines) < 0.5), -1, dense_a[:, 1])
    miss = rng.random((lines, NUM_DENSE + NUM_CATEGORICAL)) < missing
    write_criteo_tsv(out, labels_a, dense_a, ids_a, miss)
    return {"lines": lines, "positive_rate": float(labels_a.mean()), "missing_rate": float(miss.mean())}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(Path(__file__).with_name("criteo_sample.tsv.gz")), help="output file")
    p.add_argument("--lines", type=int, default=20000, help="number of rows (default 20000)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--missing", type=float, default=0.02, help="fraction of empty fields (default 0.02)")
    a = p.parse_args(argv)
    info = make_sample(a.out, a.lines, a.seed, a.missing)
    size = Path(a.out).stat().st_size
    print(
        f"wrote {a.out}: {info['lines']} lines, {size / 1024:.0f} KiB, positive rate "
        f"{info['positive_rate']:.3f}, missing fields {info['missing_rate']:.3f} (synthetic, not Criteo data)"
    )


if __name__ == "__main__":
    main()
