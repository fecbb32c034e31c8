"""bf16 autocast beside fp32 over several seeds, with the bottom MLP's dead output units counted.

A single seed made bf16 with sparse SGD look far behind fp32 on the Kaggle-sized model (AUC
0.573 vs 0.692). This script trains each (sparse optimizer, seed, dtype) of the same setting and
prints, beside each AUC, how many of the bottom MLP's output units are zero on every sample of a
held-out batch (a dead ReLU): runs whose output units all died end near AUC 0.57-0.58 in either
dtype. MEASURED, this machine.

Run: ``python benchmarks/precision_seeds.py`` (about 2 minutes; ``--quick``: tiny model, 2 seeds).
"""

from __future__ import annotations

import argparse

import torch

from recnotebooks.config import preset
from recnotebooks.data.synthetic import SyntheticCriteo
from recnotebooks.nn import DLRM
from recnotebooks.train import TrainConfig, Trainer


def dead_units(model: DLRM, dense: torch.Tensor) -> int:
    """Output units of the bottom MLP that are zero on every sample of ``dense``."""
    with torch.no_grad():
        x = model.eval().bottom_mlp(dense)
    return int(((x > 0).sum(0) == 0).sum())


def run(
    model: str, rows: int, steps: int, batch: int, seed: int, dtype: str, sparse_opt: str
) -> tuple[float, int]:
    """AUC after ``steps`` and the dead output units of the bottom MLP."""
    cfg = preset(model).with_max_rows(rows)
    tc = TrainConfig(steps=steps, warmup_steps=5, eval_batches=10, time_phases=False, progress=False,
                     dtype=dtype, sparse_optimizer=sparse_opt, sparse_lr=0.05)  # fmt: skip
    train = SyntheticCriteo(cfg, batch, seed=seed, split="train")
    evals = SyntheticCriteo(cfg, batch, seed=seed, split="eval")
    torch.manual_seed(seed)
    trainer = Trainer(DLRM(cfg, seed=seed), train, evals, tc)
    result = trainer.fit()
    return float(result.auc), dead_units(trainer.model, next(iter(evals)).dense)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="criteo_kaggle")
    ap.add_argument("--rows", type=int, default=100_000, help="rows per table at most")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.model, args.rows, args.steps, args.batch_size, args.seeds = "tiny", 1000, 10, 128, [0, 1]
    width = preset(args.model).bottom_mlp[-1]
    print(f"{args.model} (<= {args.rows:,} rows/table), {args.steps} steps x {args.batch_size}; AUC "
          f"(dead of the bottom MLP's {width} output units); MEASURED")  # fmt: skip
    print("| sparse optimizer | seed | fp32 | bf16 |\n|---|---|---|---|")
    for opt in ("sgd", "rowwise_adagrad"):
        for seed in args.seeds:
            cells = []
            for dtype in ("fp32", "bf16"):
                auc, dead = run(args.model, args.rows, args.steps, args.batch_size, seed, dtype, opt)
                cells.append(f"{auc:.4f} ({dead})")
            print(f"| {opt} | {seed} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
