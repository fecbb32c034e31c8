"""TorchRec's side of ``benchmarks/distributed.py``: its DLRM in ``DistributedModelParallel``, gloo CPU ranks.

:func:`torchrec_train` runs on every rank of :func:`recnotebooks.dist.launch` (this module is
imported by name in the spawned ranks: ``benchmarks/`` is on ``sys.path`` when the benchmark
runs as a script, and spawn hands the parent's ``sys.path`` to its children). It builds
``torchrec.models.dlrm.DLRM`` for a ``recnotebooks`` config (one ``EmbeddingBagConfig`` per
table, feature name = table name; dense arch = ``bottom_mlp``; over arch = ``top_mlp``; dot
interaction without self-dots, as TorchRec's ``InteractionArch``) on the meta device, shards
it table-wise with TorchRec's planner (``ParameterConstraints(sharding_types=["table_wise"],
compute_kernels=[kernel])``), wraps it in ``DistributedModelParallel`` (embeddings model-parallel,
dense part in DDP), and trains with SGD: the tables' optimizer fused into the backward
(``apply_optimizer_in_backward``: FBGEMM's CPU table-batched kernel with exact SGD, kernel
``"fused"``; TorchRec's planner offers no ``"dense"`` kernel for tables with an in-backward
optimizer), the dense parameters with ``torch.optim.SGD`` through ``KeyedOptimizerWrapper``.
Each step's global batch is ``SyntheticCriteo``'s, sliced per rank
and converted to a ``KeyedJaggedTensor`` with ``JaggedBatch.to_kjt`` inside the timed step (as
``recnotebooks.dist.training.run_rank`` draws and slices its batches inside its steps).

The APIs are those of torchrec 1.8, as its own multi-process tests use them:
https://github.com/pytorch/torchrec/blob/main/torchrec/distributed/test_utils/test_sharding.py
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

import torch

from recnotebooks.config import DLRMConfig
from recnotebooks.data import SyntheticCriteo
from recnotebooks.dist import RankContext
from recnotebooks.sparse import JaggedBatch

__all__ = ["local_slice", "torchrec_runs", "torchrec_train"]


def local_slice(batch: JaggedBatch, lo: int, hi: int) -> JaggedBatch:
    """Samples ``lo .. hi - 1`` of a key-major ``batch`` (one rank's share of the global batch)."""
    b, off = batch.batch_size, batch.offsets().tolist()
    ranges = [(off[k * b + lo], off[k * b + hi]) for k in range(batch.num_keys)]
    values = torch.cat([batch.values[s:e] for s, e in ranges])
    lengths = batch.lengths.view(batch.num_keys, b)[:, lo:hi].reshape(-1)
    weights = None if batch.weights is None else torch.cat([batch.weights[s:e] for s, e in ranges])
    return JaggedBatch(batch.keys, values, lengths, hi - lo, weights)


def _model(config: DLRMConfig, ctx: RankContext, kernel: str, lr: float) -> tuple[Any, Any]:
    """The sharded DLRM and its combined (fused sparse + dense) optimizer."""
    from torch.distributed.optim import _apply_optimizer_in_backward as apply_optimizer_in_backward
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints
    from torchrec.distributed.planner.storage_reservations import FixedPercentageStorageReservation
    from torchrec.distributed.planner.types import KernelConfig, TopologyFactory, TrainerConfig
    from torchrec.distributed.types import ShardingEnv
    from torchrec.models.dlrm import DLRM
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection
    from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    if config.interaction != "dot" or config.interaction_self or config.pooling != "sum":
        raise ValueError(
            f"TorchRec's DLRM is dot interaction without self-dots and sum pooling, got {config}"
        )
    tables = [EmbeddingBagConfig(name=t.name, embedding_dim=config.embedding_dim, num_embeddings=t.num_rows,
                                 feature_names=[t.name]) for t in config.tables]  # fmt: skip
    ebc = EmbeddingBagCollection(tables=tables, device=torch.device("meta"))
    torch.manual_seed(0)  # the dense part: the same initial weights on every rank (DDP also broadcasts)
    model = DLRM(embedding_bag_collection=ebc, dense_in_features=config.num_dense,
                 dense_arch_layer_sizes=list(config.bottom_mlp), over_arch_layer_sizes=list(config.top_mlp),
                 dense_device=ctx.device)  # fmt: skip
    apply_optimizer_in_backward(torch.optim.SGD, model.sparse_arch.parameters(), {"lr": lr})
    constraints = {t.name: ParameterConstraints(sharding_types=["table_wise"], compute_kernels=[kernel])
                   for t in config.tables}  # fmt: skip
    topology = TopologyFactory.create_topology(
        TrainerConfig(world_size=ctx.world_size, local_world_size=ctx.world_size),
        kernel_config=KernelConfig(compute_device=ctx.device.type),
    )
    reservation = FixedPercentageStorageReservation(0.15)
    planner = EmbeddingShardingPlanner(
        topology=topology, constraints=constraints, storage_reservation=reservation
    )
    sharders = [EmbeddingBagCollectionSharder()]
    plan = planner.collective_plan(model, sharders, torch.distributed.GroupMember.WORLD)
    dmp = DistributedModelParallel(
        model, env=ShardingEnv.from_process_group(torch.distributed.GroupMember.WORLD), device=ctx.device,
        plan=plan, sharders=sharders,
    )  # fmt: skip
    dense = KeyedOptimizerWrapper(
        dict(in_backward_optimizer_filter(dmp.named_parameters())), lambda ps: torch.optim.SGD(ps, lr=lr)
    )
    return dmp, CombinedOptimizer([dmp.fused_optimizer, dense])


def torchrec_train(
    ctx: RankContext,
    config: DLRMConfig,
    batch_size: int,
    warmup: int,
    steps: int,
    seed: int = 0,
    kernel: str = "fused",
    lr: float = 0.05,
) -> dict[str, Any]:
    """Train ``warmup`` + ``steps`` steps of global ``batch_size``; this rank's timings.

    Returns ``seconds`` (the timed steps' wall time on this rank, after a barrier), ``losses``
    (this rank's local losses of the timed steps), ``samples_per_s`` (global samples over this
    rank's seconds; the caller takes the slowest rank), the plan's sharding per table and
    ``threads`` (``torch.get_num_threads()`` on this rank: :func:`recnotebooks.dist.launch` gives
    every rank ``cpu_count // world_size``, on both sides of the benchmark) and
    ``cpu_seconds_per_step`` (this process's CPU time per timed step, all its threads).
    """
    world, rank = ctx.world_size, ctx.rank
    if batch_size % world:
        raise ValueError(f"batch_size must be divisible by the world size {world}, got {batch_size}")
    for name in ("torchrec", "torch.fx._symbolic_trace"):  # their notices about their own APIs
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings():  # TorchRec's and FBGEMM's own deprecation notices, not ours to fix
        warnings.simplefilter("ignore")
        dmp, opt = _model(config, ctx, kernel, lr)
    data = SyntheticCriteo(config, batch_size, seed=seed)
    per = batch_size // world
    lo, hi = rank * per, (rank + 1) * per
    loss_fn = torch.nn.BCEWithLogitsLoss()
    losses: list[float] = []
    t0 = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            torch.distributed.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
        b = data.batch(i)  # timed, as in recnotebooks.dist.training.run_rank (its "data" phase)
        dense, kjt, labels = b.dense[lo:hi], local_slice(b.sparse, lo, hi).to_kjt(), b.labels[lo:hi].float()
        logits = dmp(dense_features=dense, sparse_features=kjt).squeeze(-1)
        loss = loss_fn(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= warmup:
            losses.append(float(loss.detach()))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    shardings = {name: (ps.sharding_type, ps.compute_kernel, ps.ranks) for plan in dmp.plan.plan.values()
                 for name, ps in plan.items()}  # fmt: skip
    return {"rank": rank, "seconds": seconds, "steps": steps, "losses": losses,
            "samples_per_s": steps * batch_size / seconds, "plan": shardings,
            "threads": torch.get_num_threads(), "cpu_seconds_per_step": cpu / steps}  # fmt: skip


def torchrec_runs(ctx: RankContext, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`torchrec_train` for each run's keyword arguments, in one launch (TorchRec's import
    and the ranks' start-up are paid once)."""
    return [torchrec_train(ctx, **run) for run in runs]
