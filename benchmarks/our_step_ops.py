"""Operators our sharded training step adds, counted per scheme (CPU, gloo): ``op_count``'s constants.

The cost model (:func:`recnotebooks.perf.cost.op_count`) prices the step of **our**
implementation: :class:`recnotebooks.distributed.HybridParallelDLRM` trained as
:func:`recnotebooks.distributed.training.run_rank` does (row-wise Adagrad on the shards, dense
Adagrad under DDP). This script counts the top-level operators of one such step on rank 0
with ``torch.profiler`` (``count_step_ops`` of ``tests/_train_workers.py``, the tests' counter;
a "top-level" operator has no operator among its profiler ancestors, as benchmarks/sharded_step_ops.py counts
TorchRec's) for table-wise, row-wise, column-wise, data-parallel and a mixed plan, on 2 and 4
ranks, 4, 8 and 16 tables and MLPs of 4 and 8 layers; subtracts the single-process step
counted the same way; and fits the terms of
:func:`recnotebooks.perf.components.sharded_op_terms` by least squares. It prints the fit beside
the constants in ``perf/components/ops.py`` (``SHARDED_OPS``, ``SHARD_OPS``) and each config's
counted vs modeled operators.

Run: ``python benchmarks/our_step_ops.py [--worlds 2 4] [--tables 4 8 16] [--json FILE]``
(about two minutes on two cores).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from recnotebooks.config import DLRMConfig, architecture_config
from recnotebooks.distributed.launch import launch
from recnotebooks.perf import components as C
from recnotebooks.plan import named_plan

# the tests' op counter (tests/_train_workers.py); spawned ranks find it on the same path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _train_workers import count_step_ops, single_step_ops  # noqa: E402

SCHEMES = ("table_wise", "row_wise", "column_wise", "data_parallel", "mixed")
BATCH = 256


def small_config(tables: int, depth: int = 2) -> DLRMConfig:
    """The counted model: ``tables`` tables of 1000 rows, dim 16, MLPs of ``depth`` layers each."""
    return architecture_config(
        num_tables=tables, rows_per_table=1000, embedding_dim=16, pooling=1,
        bottom_width=64, bottom_depth=depth, top_width=32, top_depth=depth,
    )  # fmt: skip


def plan_for(config: DLRMConfig, world: int, scheme: str) -> Any:
    """The plan counted for ``scheme`` (the validation's mixed plan, or round-robin)."""
    return named_plan(config, scheme, world)


def count(worlds: tuple[int, ...] = (2, 4), tables: tuple[int, ...] = (4, 8, 16)) -> list[dict[str, Any]]:
    """Rows ``{world, tables, depth, scheme, ops, host_syncs, single_ops, extra}`` (rank 0's counts)."""
    grid = [(t, 2) for t in tables] + [(8, 4)]  # one deeper MLP: DDP's operators per parameter tensor
    single = {(t, d): single_step_ops(small_config(t, d), BATCH)["ops"] for t, d in grid}
    rows = []
    for w in worlds:
        meta = [(t, d, s) for t, d in grid for s in SCHEMES if t >= w]
        cases = [
            {"config": small_config(t, d), "plan": plan_for(small_config(t, d), w, s), "batch_size": BATCH}
            for t, d, s in meta
        ]
        res = launch(count_step_ops, w, cases, timeout_s=600)
        for (t, d, s), r in zip(meta, res.values[0], strict=True):
            extra = r["ops"] - single[(t, d)]
            rows.append({"world": w, "tables": t, "depth": d, "scheme": s, **r, "single_ops": single[(t, d)],
                         "extra": extra})  # fmt: skip
    return rows


def fit(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Least-squares constants of :func:`~recnotebooks.perf.components.sharded_op_terms`' terms."""
    terms = [C.sharded_op_terms(small_config(r["tables"], r["depth"]),
                                plan_for(small_config(r["tables"], r["depth"]), r["world"], r["scheme"]), 0)
             for r in rows]  # fmt: skip
    keys = [k for k in terms[0] if any(t[k] for t in terms)]
    a = np.array([[t[k] for k in keys] for t in terms])
    coef, *_ = np.linalg.lstsq(a, np.array([r["extra"] for r in rows]), rcond=None)
    return dict(zip(keys, coef.tolist(), strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--tables", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--json", help="write the counted rows and the fit here")
    args = ap.parse_args()
    rows = count(tuple(args.worlds), tuple(args.tables))
    head = ("world", "tables", "depth", "scheme", "ops", "item", "extra", "model")
    print("{:>5} {:>6} {:>5} {:<14} {:>6} {:>5} {:>6} {:>6}".format(*head))
    for r in rows:
        cfg = small_config(r["tables"], r["depth"])
        plan = plan_for(cfg, r["world"], r["scheme"])
        model = C.op_count(cfg, r["world"], plan=plan, implementation="recnotebooks") - C.op_count(cfg)
        r["model_extra"] = model
        print(f"{r['world']:>5} {r['tables']:>6} {r['depth']:>5} {r['scheme']:<14} {r['ops']:>6.0f} "
              f"{r['host_syncs']:>5.0f} {r['extra']:>6.0f} {model:>6}")  # fmt: skip
    coef = fit(rows)
    used = {**C.SHARDED_OPS, **{f"{k}.{w}": v[i] for k, v in C.SHARD_OPS.items()
                                for i, w in enumerate(("plan", "local"))}}  # fmt: skip
    print("term                    fitted   in perf/components/ops.py")
    for k, v in coef.items():
        print(f"  {k:<20} {v:8.1f}   {used.get(k, 0):6.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "fit": coef}, f, indent=1)


if __name__ == "__main__":
    main()
