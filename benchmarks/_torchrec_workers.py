"""TorchRec's side of ``benchmarks/distributed.py``: its DLRM in ``DistributedModelParallel``, gloo CPU ranks.

:func:`torchrec_train` runs on every rank of :func:`recnotebooks.distributed.launch` (this module is
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
``recnotebooks.distributed.training.run_rank`` draws and slices its batches inside its steps).

The APIs are those of torchrec 1.8, as its own multi-process tests use them:
https://github.com/pytorch/torchrec/blob/main/torchrec/distributed/test_utils/test_sharding.py
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from recnotebooks.config import DLRMConfig
from recnotebooks.data import SyntheticCriteo
from recnotebooks.distributed import RankContext
from recnotebooks.sparse import JaggedBatch

__all__ = ["TORCHREC_PHASES", "local_slice", "torchrec_runs", "torchrec_train"]

#: The phases :func:`torchrec_train` times on TorchRec's step, in step order (see :class:`_Phases`).
TORCHREC_PHASES = (
    "data",
    "bottom_mlp",
    "input_dist",
    "lookup",
    "output_dist",
    "interaction",
    "top_mlp",
    "loss",
    "backward_top",
    "backward_output_dist",
    "backward_lookup_fused_update",
    "backward_bottom",
    "backward_all_reduce_wait",
    "optimizer",
)


def local_slice(batch: JaggedBatch, lo: int, hi: int) -> JaggedBatch:
    """Samples ``lo .. hi - 1`` of a key-major ``batch`` (one rank's share of the global batch)."""
    b, off = batch.batch_size, batch.offsets().tolist()
    ranges = [(off[k * b + lo], off[k * b + hi]) for k in range(batch.num_keys)]
    values = torch.cat([batch.values[s:e] for s, e in ranges])
    lengths = batch.lengths.view(batch.num_keys, b)[:, lo:hi].reshape(-1)
    weights = None if batch.weights is None else torch.cat([batch.weights[s:e] for s, e in ranges])
    return JaggedBatch(batch.keys, values, lengths, hi - lo, weights)


class _Phases:
    """Wall seconds per phase of TorchRec's step, from hooks that leave its computation unchanged.

    Forward: module hooks on ``DLRM``'s ``dense_arch`` (``bottom_mlp``), ``sparse_arch``,
    ``inter_arch`` (``interaction``) and ``over_arch`` (``top_mlp``); the sharded collection's
    ``forward`` is TorchRec's own ``ShardedModule.forward`` split in its three calls, each timed:
    ``input_dist`` (``input_dist(...).wait().wait()``: the KJT's splits, lengths and ids
    all-to-alls), ``lookup`` (each sharding's ``_lookups`` module: FBGEMM's CPU table-batched
    forward) and issuing ``output_dist``; the rest of ``sparse_arch`` (waiting for the pooled
    vectors' all-to-all, ``KeyedTensor.to_dict`` and the concatenation) is added to
    ``output_dist``. For one sharding type (table-wise here) that is exactly what TorchRec's
    ``compute_and_output_dist`` does.

    Backward (one autograd thread on CPU runs the nodes one at a time, latest-created first among
    the ready ones): ``backward_top`` from ``loss.backward()`` until the sparse output's backward
    node starts (loss, top MLP and interaction backward); ``backward_output_dist`` until the
    lookups' backward node starts (the pooled gradients' all-to-all); ``backward_lookup_fused_update``
    until the bottom MLP's backward starts (FBGEMM's CPU backward, **which applies the SGD update
    to the table rows**: ``apply_optimizer_in_backward``); ``backward_bottom`` until the last dense
    gradient is accumulated; ``backward_all_reduce_wait`` from then until ``backward()`` returns
    (DDP's finalisation: waiting for the gradients' asynchronous all-reduce and copying them in).
    ``optimizer`` is ``zero_grad`` + ``step`` of the combined optimizer (the fused part's step does
    nothing: its update ran in the backward). A mark that does not come in the order above (the
    engine picked another order) makes :attr:`ordered` False.

    Each phase gets wall seconds (:attr:`totals`) and this thread's CPU seconds (:attr:`cpu_totals`,
    ``time.thread_time``: what the rank's main thread computed, not its waits, nor gloo's threads).
    """

    def __init__(self) -> None:
        self.totals: dict[str, float] = dict.fromkeys(TORCHREC_PHASES, 0.0)
        self.cpu_totals: dict[str, float] = dict.fromkeys(TORCHREC_PHASES, 0.0)
        self.on = False
        self._t: dict[str, tuple[float, float]] = {}
        self.marks: dict[str, tuple[float, float]] = {}
        self.ordered = True

    @staticmethod
    def now() -> tuple[float, float]:
        """(wall, this thread's CPU) seconds."""
        return time.perf_counter(), time.thread_time()

    def add(self, name: str, t0: tuple[float, float], t1: tuple[float, float]) -> None:
        """Charge ``t0 .. t1`` (:meth:`now` pairs) to phase ``name``."""
        if self.on:
            self.totals[name] += t1[0] - t0[0]
            self.cpu_totals[name] += t1[1] - t0[1]

    def start(self, name: str) -> None:
        self._t[name] = self.now()

    def stop(self, name: str, phase: str | None = None) -> None:
        self.add(phase or name, self._t.pop(name), self.now())

    def mark(self, name: str) -> Callable[..., None]:
        """A hook that records when it first runs in this backward."""

        def hook(*_: Any) -> None:
            if name not in self.marks:
                self.marks[name] = self.now()

        return hook

    def last(self, name: str) -> Callable[..., None]:
        """A hook that records when it last runs in this backward."""

        def hook(*_: Any) -> None:
            self.marks[name] = self.now()

        return hook

    def backward(self, t0: tuple[float, float], t1: tuple[float, float]) -> None:
        """Split the backward ``t0 .. t1`` at this step's marks."""
        names = ("sparse_grad", "lookup_grad", "bottom_grad", "dense_done")
        nan = (float("nan"), float("nan"))
        times = [t0, *(self.marks.get(n, nan) for n in names), t1]
        walls = [t[0] for t in times]
        if any(w != w for w in walls) or any(b < a for a, b in zip(walls, walls[1:], strict=False)):
            self.ordered = False
        phases = ("backward_top", "backward_output_dist", "backward_lookup_fused_update", "backward_bottom",
                  "backward_all_reduce_wait")  # fmt: skip
        for name, a, b in zip(phases, times[:-1], times[1:], strict=True):
            self.add(name, a, b)
        self.marks.clear()


def _instrument(dmp: Any, clock: _Phases) -> None:
    """Install :class:`_Phases`' hooks on a ``DistributedModelParallel`` DLRM."""
    from torchrec.distributed.embeddingbag import ShardedEmbeddingBagCollection

    model = dmp.module
    arches = {"dense_arch": "bottom_mlp", "sparse_arch": "sparse_arch", "inter_arch": "interaction",
              "over_arch": "top_mlp"}  # fmt: skip
    for attr, phase in arches.items():
        mod = getattr(model, attr)
        mod.register_forward_pre_hook(lambda *_, p=phase: clock.start(p))
        if phase == "sparse_arch":

            def post(_m: Any, _i: Any, out: torch.Tensor) -> None:
                clock.stop("sparse_arch", "output_dist")  # the part not timed inside (the wait)
                out.register_hook(clock.mark("sparse_grad"))

        elif phase == "bottom_mlp":

            def post(_m: Any, _i: Any, out: torch.Tensor) -> None:
                clock.stop("bottom_mlp")
                out.register_hook(clock.mark("bottom_grad"))

        else:

            def post(_m: Any, _i: Any, out: Any, p: str = phase) -> None:
                clock.stop(p)

        mod.register_forward_hook(post)
    for p in dmp.parameters():  # the dense parameters (the tables' weights get no .grad)
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(clock.last("dense_done"))
    sebc = model.sparse_arch.embedding_bag_collection
    if not isinstance(sebc, ShardedEmbeddingBagCollection):
        raise TypeError(f"expected TorchRec's ShardedEmbeddingBagCollection, got {type(sebc).__name__}")

    def forward(features: Any) -> Any:  # ShardedModule.forward, its three calls timed
        ctx = sebc.create_context()
        t0 = clock.now()
        dist_input = sebc.input_dist(ctx, features).wait().wait()
        t1 = clock.now()
        embs = sebc.compute(ctx, dist_input)
        t2 = clock.now()
        for e in embs:
            if e.requires_grad:
                e.register_hook(clock.mark("lookup_grad"))
        out = sebc.output_dist(ctx, embs)
        t3 = clock.now()
        clock.add("input_dist", t0, t1)
        clock.add("lookup", t1, t2)
        clock.add("output_dist", t2, t3)
        # the sparse arch's own timer started before these: take them out of its remainder
        s0 = clock._t["sparse_arch"]
        clock._t["sparse_arch"] = (s0[0] + t3[0] - t0[0], s0[1] + t3[1] - t0[1])
        return out

    sebc.forward = forward


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
    ``threads`` (``torch.get_num_threads()`` on this rank: :func:`recnotebooks.distributed.launch` gives
    every rank ``cpu_count // world_size``, on both sides of the benchmark) and
    ``cpu_seconds_per_step`` (this process's CPU time per timed step, all its threads),
    ``phases`` (seconds per timed step of each of :data:`TORCHREC_PHASES`, see :class:`_Phases`),
    ``phase_cpu`` (the same phases' CPU seconds of this rank's main thread),
    ``thread_cpu_seconds_per_step`` (the main thread's CPU per timed step, phases and the rest)
    and ``phases_ordered`` (False when a backward's marks came in another order than expected).
    """
    world, rank = ctx.world_size, ctx.rank
    if batch_size % world:
        raise ValueError(f"batch_size must be divisible by the world size {world}, got {batch_size}")
    for name in ("torchrec", "torch.fx._symbolic_trace"):  # their notices about their own APIs
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings():  # TorchRec's and FBGEMM's own deprecation notices, not ours to fix
        warnings.simplefilter("ignore")
        dmp, opt = _model(config, ctx, kernel, lr)
    clock = _Phases()
    _instrument(dmp, clock)
    data = SyntheticCriteo(config, batch_size, seed=seed)
    per = batch_size // world
    lo, hi = rank * per, (rank + 1) * per
    loss_fn = torch.nn.BCEWithLogitsLoss()
    losses: list[float] = []
    t0 = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            torch.distributed.barrier()
            t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
            clock.on = True
        ta = clock.now()
        b = data.batch(i)  # timed, as in recnotebooks.distributed.training.run_rank (its "data" phase)
        dense, kjt, labels = b.dense[lo:hi], local_slice(b.sparse, lo, hi).to_kjt(), b.labels[lo:hi].float()
        tb = clock.now()
        clock.add("data", ta, tb)
        logits = dmp(dense_features=dense, sparse_features=kjt).squeeze(-1)
        tc = clock.now()
        loss = loss_fn(logits, labels)
        td = clock.now()
        clock.add("loss", tc, td)
        opt.zero_grad()
        te = clock.now()
        loss.backward()
        tf = clock.now()
        clock.backward(te, tf)
        opt.step()
        tg = clock.now()
        clock.add("optimizer", td, te)
        clock.add("optimizer", tf, tg)
        if i >= warmup:
            losses.append(float(loss.detach()))
    seconds, cpu, main_cpu = time.perf_counter() - t0, time.process_time() - c0, time.thread_time() - m0
    shardings = {name: (ps.sharding_type, ps.compute_kernel, ps.ranks) for plan in dmp.plan.plan.values()
                 for name, ps in plan.items()}  # fmt: skip
    return {"rank": rank, "seconds": seconds, "steps": steps, "losses": losses,
            "samples_per_s": steps * batch_size / seconds, "plan": shardings,
            "threads": torch.get_num_threads(), "cpu_seconds_per_step": cpu / steps,
            "phases": {k: v / steps for k, v in clock.totals.items()},
            "phase_cpu": {k: v / steps for k, v in clock.cpu_totals.items()},
            "thread_cpu_seconds_per_step": main_cpu / steps,
            "phases_ordered": clock.ordered}  # fmt: skip


def torchrec_runs(ctx: RankContext, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`torchrec_train` for each run's keyword arguments, in one launch (TorchRec's import
    and the ranks' start-up are paid once)."""
    return [torchrec_train(ctx, **run) for run in runs]
