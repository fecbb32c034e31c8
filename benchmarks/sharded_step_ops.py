"""Operators and collectives a sharded training step adds, measured on TorchRec (CPU, gloo).

The cost model (``recnotebooks.perf.cost.op_count`` with ``implementation="torchrec"``; our own
step's counts are benchmarks/our_step_ops.py's) charges a model-parallel step for
the input and output distribution of sharded embeddings and for DDP's reducer on the
dense part, with counts measured here: one training step of TorchRec's DLRM (26 tables,
dim 128, MLPs 512-256-128 and 1024-1024-512-256-1, batch 2048 per rank, row-wise Adagrad
fused into the backward, dense Adagrad), table-wise sharded by DistributedModelParallel
over 1, 2 and 4 gloo processes on localhost (``recnotebooks.distributed.launch``: its rendezvous
store holds a port the system picked from the bind on, so no other program can take it between
the choice and the ranks' joining), profiled with torch.profiler on rank 0.
A "top-level" operator is one with no operator among its profiler ancestors (the same
count as ``op_count``'s). The 1-rank run is the baseline: it has the same fused kernels
and DDP wrapper but no all-to-alls, so ``W ranks - 1 rank`` is the distribution's cost.

DDP's reducer is measured apart, without TorchRec: the same dense MLPs trained with and
without ``DistributedDataParallel`` (1 gloo rank in this process, on an in-memory store: no
port), operators per parameter tensor.
The sharded runs need the optional peers (``make peers``); without them the script says so.
Run: ``python benchmarks/sharded_step_ops.py [--tables 26] [--worlds 1 2 4]``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

import torch
import torch.distributed as dist

from recnotebooks.distributed.launch import RankContext, launch

ROWS, DIM, BATCH = 1000, 128, 2048
_OP = ("aten::", "fbgemm::", "c10d::", "_c10d_functional::", "torchrec::")
_COLL = ("alltoall", "all_to_all", "allreduce", "all_reduce")
#: Seconds one sharded run (DMP built, 4 steps profiled) gets before the launch gives up.
RUN_TIMEOUT_S = 1800.0


def _is_op(name: str) -> bool:
    return name.startswith(_OP)


def _top_level(prof: object) -> list[object]:
    out = []
    for e in prof.events():  # type: ignore[attr-defined]
        if not _is_op(e.name):
            continue
        p = e.cpu_parent
        while p is not None and not _is_op(p.name):
            p = p.cpu_parent
        if p is None:
            out.append(e)
    return out


def _worker(ctx: RankContext, tables: int) -> dict[str, Any] | None:
    """One rank of the sharded run (in the launcher's gloo group, one CPU thread); rank 0's
    counts, ``None`` on the other ranks."""
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor
    from torchrec.datasets.utils import Batch
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.sharding_plan import construct_module_sharding_plan, table_wise
    from torchrec.distributed.types import ShardingPlan
    from torchrec.models.dlrm import DLRM, DLRMTrain
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
    from torchrec.optim.optimizers import in_backward_optimizer_filter
    from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

    rank, world = ctx.rank, ctx.world_size
    torch.manual_seed(0)
    cfgs = [
        EmbeddingBagConfig(name=f"t{i}", embedding_dim=DIM, num_embeddings=ROWS, feature_names=[f"f{i}"])
        for i in range(tables)
    ]
    ebc = EmbeddingBagCollection(tables=cfgs, device=torch.device("cpu"))
    model = DLRMTrain(
        DLRM(
            embedding_bag_collection=ebc,
            dense_in_features=13,
            dense_arch_layer_sizes=[512, 256, 128],
            over_arch_layer_sizes=[1024, 1024, 512, 256, 1],
            dense_device=torch.device("cpu"),
        )
    )
    apply_optimizer_in_backward(RowWiseAdagrad, model.model.sparse_arch.parameters(), {"lr": 0.01})
    sharder = EmbeddingBagCollectionSharder()
    module_plan = construct_module_sharding_plan(
        ebc,
        {c.name: table_wise(rank=i % world, compute_kernel="fused") for i, c in enumerate(cfgs)},
        sharder=sharder,
        local_size=world,
        world_size=world,
        device_type="cpu",
    )
    dmp = DistributedModelParallel(
        module=model,
        device=torch.device("cpu"),
        sharders=[sharder],
        plan=ShardingPlan({"model.sparse_arch.embedding_bag_collection": module_plan}),
    )
    dense = [p for _, p in in_backward_optimizer_filter(dmp.named_parameters())]
    opt = torch.optim.Adagrad(dense, lr=0.01)
    g = torch.Generator().manual_seed(rank)
    kjt = KeyedJaggedTensor.from_lengths_sync(
        keys=[f"f{i}" for i in range(tables)],
        values=torch.randint(0, ROWS, (tables * BATCH,), generator=g),
        lengths=torch.ones(tables * BATCH, dtype=torch.int32),
    )
    batch = Batch(
        dense_features=torch.rand(BATCH, 13, generator=g),
        sparse_features=kjt,
        labels=torch.randint(0, 2, (BATCH,), generator=g).float(),
    )

    def step() -> None:
        loss, _ = dmp(batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    dist.barrier()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    top = _top_level(prof)
    dist.barrier()
    if rank != 0:
        return None
    names = Counter(e.name for e in top)  # type: ignore[attr-defined]
    return {
        "top_level_ops": len(top),
        "dense_tensors": len(dense),
        "collectives": {k: v for k, v in names.items() if any(c in k for c in _COLL)},
        "ops": dict(names),
    }


def ddp_reducer_ops(batch: int = BATCH) -> tuple[int, int, int]:
    """Top-level ops of one training step of mlperf_v1's dense MLPs (bottom and top, ReLU,
    Adagrad) without and with DDP (1 gloo rank on localhost), and the number of parameter tensors."""
    from recnotebooks.config import preset

    cfg = preset("mlperf_v1")

    def mlp(dims: list[int]) -> torch.nn.Sequential:
        return torch.nn.Sequential(
            *[
                m
                for a, b in zip(dims[:-1], dims[1:], strict=True)
                for m in (torch.nn.Linear(a, b), torch.nn.ReLU())
            ]
        )

    class Dense(torch.nn.Module):  # the bottom MLP, then the top MLP on its output padded to the top's width
        def __init__(self) -> None:
            super().__init__()
            self.bottom = mlp([cfg.num_dense, *cfg.bottom_mlp])
            self.top = mlp([cfg.interaction_output_dim, *cfg.top_mlp])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            z = self.bottom(x)
            return self.top(torch.nn.functional.pad(z, (0, cfg.interaction_output_dim - z.shape[1])))

    x, y = torch.rand(batch, cfg.num_dense), torch.rand(batch, 1)

    def count(model: torch.nn.Module) -> int:
        opt = torch.optim.Adagrad(model.parameters(), lr=0.01)

        def step() -> None:
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for _ in range(3):
            step()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step()
        return len(_top_level(prof))

    model = Dense()
    plain = count(model)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # one rank: no port
    try:
        wrapped = count(torch.nn.parallel.DistributedDataParallel(model))
    finally:
        dist.destroy_process_group()
    return plain, wrapped, len(list(model.parameters()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=26)
    ap.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    if 1 not in args.worlds or min(args.worlds) < 1:
        ap.error(f"--worlds must include 1 (the baseline) and be >= 1, got {args.worlds}")
    from recnotebooks.config import preset
    from recnotebooks.perf.cost import op_count

    cfg = preset("mlperf_v1")  # what the cost model charges, from its public op_count
    plain, wrapped, tensors = ddp_reducer_ops()
    print(
        f"mlperf_v1's dense MLPs, batch {BATCH}: {plain} top-level ops per step, "
        f"{wrapped} with DDP (1 rank): +{wrapped - plain} for {tensors} parameter tensors "
        f"(cost model: +{op_count(cfg, 2, implementation='torchrec') - op_count(cfg)})"
    )
    try:
        import torchrec  # noqa: F401
    except ImportError as e:
        print(
            f"torchrec is not installed ({e}); `make peers` installs the optional peers. "
            "Skipping the sharded runs."
        )
        return

    runs = {
        w: launch(_worker, w, args.tables, timeout_s=RUN_TIMEOUT_S, threads_per_rank=1).values[0]
        for w in args.worlds
    }
    base = runs[1]
    print(
        f"TorchRec DMP, {args.tables} tables, table-wise, batch {BATCH}/rank: top-level ops per training step"
    )
    for w, r in runs.items():
        extra = r["top_level_ops"] - base["top_level_ops"]
        mp_ops = op_count(cfg, w, True, implementation="torchrec") - op_count(
            cfg, w, implementation="torchrec"
        )
        model = f"(cost model: +{mp_ops}, 3 of them host syncs)" if w > 1 else ""
        print(
            f"  {w} rank(s): {r['top_level_ops']:4d} ops, +{extra:3d} over 1 rank {model}; "
            f"collectives {r['collectives']}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
