"""Host overhead of one modeled step: the operators it launches (every number **modeled**).

:func:`op_count` counts the operators of our single-process step and what a sharded step adds
(ours: :func:`sharded_op_terms` priced by :data:`SHARDED_OPS` and :data:`SHARD_OPS`; or
TorchRec's); :func:`overhead` prices them at the hardware's launch cost, and
:func:`overhead_of_remote_rows` adds a parameter server's round trips.
"""

from __future__ import annotations

from recnotebooks.checks import check_choice, check_int
from recnotebooks.config import DENSE_OPTIMIZERS, DLRMConfig
from recnotebooks.perf.hardware import Hardware
from recnotebooks.plan import Plan, data_parallel, table_wise

__all__ = ["HUGECTR", "HUGECTR_DTYPES", "IMPLEMENTATIONS", "OPTIMIZER_OPS_PER_TENSOR", "SHARDED_OPS",
           "SHARD_OPS", "op_count", "overhead", "overhead_of_remote_rows", "sharded_extra_ops",
           "sharded_op_terms"]  # fmt: skip

#: Operators of one training step of our DLRM (torch profiler, top-level aten ops, CPU):
#: 115 + 25 per MLP layer (forward, backward, Adagrad) + 15 for the dot interaction.
_OPS_BASE, _OPS_PER_LAYER, _OPS_DOT = 115, 25, 15
#: ... + 43 per cross layer of the "dcn" interaction (its two linear layers, product and sum
#: forward, their backward and Adagrad on V, W and b), beyond the "cat" interaction's
#: concatenation it starts from: counted the same way (tests/_train_workers.single_step_ops,
#: 1 to 5 layers, 2026-12-03: exactly 43 more per layer, none for the cross network itself;
#: checked by tests/test_op_count.py).
_OPS_PER_CROSS_LAYER = 43
#: Operators one dense parameter tensor's update launches in ``torch.optim``'s single-tensor path
#: (torch profiler, top-level aten ops of ``step()`` over 2 and 4 tensors, torch 2.13, 2026-12-03):
#: SGD 1, Adagrad 6, Adam 9. The counts above are of steps with Adagrad; another optimizer moves
#: them by the difference per tensor (checked by tests/test_op_count.py).
OPTIMIZER_OPS_PER_TENSOR = {"sgd": 1, "adagrad": 6, "adam": 9}
#: What OUR sharded step (recnotebooks.distributed's HybridParallelDLRM, as
#: recnotebooks.distributed.training.run_rank trains it: row-wise Adagrad, dense Adagrad) adds to the
#: single-process step: top-level operators on rank 0, counted with torch.profiler over gloo on
#: 2 and 4 ranks, 4, 8 and 16 tables, MLPs of 4 and 8 layers, every scheme and a mixed plan, minus
#: the single-process step counted the same way, fitted by least squares (residuals <= 8 of
#: 400-2000 operators) by benchmarks/our_step_ops.py, 2026-12-01 (refitted the same evening,
#: after the data-parallel sync stopped running a lookup and the ids' check became one pass;
#: and on 2026-12-02, after the ids' shift into the fused rows became one Numba pass: only the
#: term per collection beyond the first moved, 90 -> 98; and on 2026-12-03, after the received ids
#: stopped being reordered twice and the ids' range check became one Numba pass: worst residual
#: 7 operators with these rounded constants).
#: Terms (see
#: :func:`sharded_op_terms`): a fixed part (DDP, the all-to-alls' bookkeeping), data-parallel
#: tables' fixed part (their all-reduce and recording every row's gradient), DDP's reducer per
#: parameter tensor, each local embedding collection beyond the first (one per kind of shard
#: and width), and per scheme ops per shard of the plan (the input distribution loops over
#: every rank's shards) and per shard on the rank (lookup, assembly, optimizer). No term per
#: rank: the counts were equal on 2 and 4 ranks. ``aten::item`` host syncs (.tolist() of splits
#: and offsets: 40-230 a step) count as operators.
SHARDED_OPS: dict[str, float] = {"base": 84, "data_parallel_base": 17, "ddp_per_tensor": 3,
                                 "collection": 86}  # fmt: skip
#: per scheme: (operators per shard of the plan, per shard on the rank); same provenance.
SHARD_OPS: dict[str, tuple[float, float]] = {
    "table_wise": (13, 5), "row_wise": (21, 10), "column_wise": (12, 7), "data_parallel": (0, 10),
}  # fmt: skip
#: What TorchRec 1.8's DistributedModelParallel step adds (table-wise, fused kernels; torch
#: profiler, top-level ops of one step on rank 0 over gloo, 2 and 4 ranks minus 1 rank, the same
#: at 26 and 13 tables; benchmarks/sharded_step_ops.py): input and output distribution 54 + 3 per
#: rank operators and 3 blocking ``.tolist()`` of the splits; DDP's reducer 2 + 3 per parameter
#: tensor (mlperf_v1's MLPs with and without DDP, measured by the same script without TorchRec).
_TORCHREC_DIST_BASE, _TORCHREC_DIST_PER_RANK, _TORCHREC_SYNCS = 54, 3, 3
_TORCHREC_DDP_BASE = 2
#: The implementations of a step the model prices (see :func:`op_count`): ours, TorchRec's, and
#: NVIDIA's HugeCTR DLRM-DCNv2 as MLPerf Training submissions ran it (:data:`HUGECTR`).
IMPLEMENTATIONS = ("recnotebooks", "torchrec", "hugectr")
#: The software stack of MLPerf Training's DLRM-DCNv2 submissions (NVIDIA's HugeCTR code, which
#: every GPU submission of v3.0-v5.1 ran: https://github.com/mlcommons/training_results_v3.0/tree/
#: main/NVIDIA/benchmarks/dlrm_dcnv2/implementations/hugectr), as the model prices it: the whole
#: step is captured in CUDA graphs and replayed with one launch, so no operator pays a host
#: launch cost and the step costs ``step_s`` beyond its kernels (fitted: see
#: :mod:`recnotebooks.perf.compare`, ``fit_hugectr_step``); the elementwise work of each cross
#: layer and MLP layer is fused into its GEMMs' epilogues (``cross_passes`` passes over the
#: layer's ``(B, w)`` tensors instead of eager PyTorch's 19: forward reads ``x_0`` and ``x_l`` and
#: writes ``x_{l+1}``, backward reads the gradient, ``x_0`` and ``x_l`` and writes two gradients;
#: ``mlp_passes`` for an MLP layer's bias and ReLU instead of 7); the pooled embeddings go forward
#: and their gradients back in ``a2a_calls`` all-to-alls (the ids travel with the data reader's
#: batches); and communication overlaps compute (its step is ``CostResult.step_time_overlap``),
#: except what it moves over PCIe or the network, which its step waits for
#: (:data:`~recnotebooks.perf.components.collectives.EXPOSED_COMMUNICATION`).
HUGECTR: dict[str, float] = {"step_s": 0.0, "cross_passes": 8, "mlp_passes": 0, "a2a_calls": 2}
#: The precisions HugeCTR trains in, and so the ``dtype`` s the model prices its step in: fp32, fp32
#: with TF32 GEMMs (its solver's ``enable_tf32_compute``) and fp16 mixed precision with a loss scaler
#: (``use_mixed_precision`` and ``scaler``: fp16 GEMMs and activations, fp32 master weights), per its
#: Python interface's ``CreateSolver``
#: (https://nvidia-merlin.github.io/HugeCTR/v3.9/api/python_interface.html). It has no bf16 mode,
#: and pure half precision is the model's lower bound, not a way to train.
HUGECTR_DTYPES = ("fp32", "tf32", "amp_fp16")


def _single_op_count(config: DLRMConfig, dense_optimizer: str = "adagrad") -> int:
    layers = len(config.bottom_mlp) + len(config.top_mlp)
    inter = {"dot": _OPS_DOT, "cat": 0, "dcn": _OPS_PER_CROSS_LAYER * config.dcn_layers}[config.interaction]
    per_tensor = OPTIMIZER_OPS_PER_TENSOR[dense_optimizer] - OPTIMIZER_OPS_PER_TENSOR["adagrad"]
    return _OPS_BASE + _OPS_PER_LAYER * layers + inter + per_tensor * _dense_tensors(config)


def _dense_tensors(config: DLRMConfig) -> int:
    """Parameter tensors DDP replicates: a weight and a bias per MLP layer, and per cross layer of
    a ``"dcn"`` interaction ``V``, ``W`` and ``b``."""
    cross = 3 * config.dcn_layers if config.interaction == "dcn" else 0
    return 2 * (len(config.bottom_mlp) + len(config.top_mlp)) + cross


def sharded_op_terms(config: DLRMConfig, plan: Plan, rank: int) -> dict[str, float]:
    """How many of each of :data:`SHARDED_OPS`' and :data:`SHARD_OPS`' terms ``plan``'s step has on
    ``rank`` (keys: those of :data:`SHARDED_OPS`, ``"<scheme>.plan"`` and ``"<scheme>.local"``)."""
    terms = dict.fromkeys(SHARDED_OPS, 0.0)
    terms.update({f"{k}.{w}": 0.0 for k in SHARD_OPS for w in ("plan", "local")})
    terms["base"] = 1.0
    terms["ddp_per_tensor"] = float(_dense_tensors(config))
    terms["data_parallel_base"] = float(any(s.sharding == "data_parallel" for s in plan.shards))
    groups = set()
    for s in plan.shards:
        terms[f"{s.sharding}.plan"] += 1
        if s.rank == rank:
            terms[f"{s.sharding}.local"] += 1
            width = round(config.embedding_dim * (s.col_fraction if s.sharding == "column_wise" else 1.0))
            groups.add(
                (s.sharding == "data_parallel", width, "sum" if s.sharding == "row_wise" else config.pooling)
            )
    terms["collection"] = float(max(0, len(groups) - 1))
    return terms


def op_count(
    config: DLRMConfig,
    world_size: int = 1,
    model_parallel: bool = False,
    plan: Plan | None = None,
    implementation: str = "torchrec",
    dense_optimizer: str = "adagrad",
) -> int:
    """Operators launched by one training step of our DLRM (independent of table count on one
    process), and on ``world_size > 1`` ranks what the sharded step of ``implementation`` adds.

    * ``"recnotebooks"``: **our** step (:class:`recnotebooks.distributed.HybridParallelDLRM`, what
      ``recnb train --world-size``/``--distributed`` runs, on CPUs or GPUs), counted on our
      implementation: :func:`sharded_op_terms` of ``plan`` priced by :data:`SHARDED_OPS` and
      :data:`SHARD_OPS`, the slowest rank's count (it grows with the shards: a Python loop each);
    * ``"torchrec"`` (the default, as :func:`recnotebooks.perf.cost.estimate`'s): TorchRec's
      DistributedModelParallel with fused kernels (what the published GPU runs and the paper's
      clusters ran): a fixed count and one per rank, not per table.

    Without a plan, ``model_parallel`` means the tables round-robin table-wise, otherwise all
    data-parallel; with one, ``model_parallel`` is read from it. ``dense_optimizer`` (one of
    :data:`~recnotebooks.config.DENSE_OPTIMIZERS`) updates the dense parameters
    (:data:`OPTIMIZER_OPS_PER_TENSOR`).
    """
    world_size = check_int("world_size", world_size, lo=1)
    check_choice("implementation", implementation, IMPLEMENTATIONS)
    check_choice("dense_optimizer", dense_optimizer, DENSE_OPTIMIZERS)
    ops = _single_op_count(config, dense_optimizer)
    if world_size == 1:
        return ops
    if plan is None:
        build = table_wise if model_parallel else data_parallel
        plan = build(config.table_names, world_size)
    elif plan.world_size != world_size:
        raise ValueError(f"plan is for {plan.world_size} ranks but world_size={world_size}")
    if implementation in ("torchrec", "hugectr"):  # HugeCTR's kernels counted as TorchRec's
        ops += _TORCHREC_DDP_BASE + SHARDED_OPS["ddp_per_tensor"] * _dense_tensors(config)
        if any(s.sharding != "data_parallel" for s in plan.shards):
            ops += _TORCHREC_DIST_BASE + _TORCHREC_DIST_PER_RANK * world_size + _TORCHREC_SYNCS
        return int(ops)
    return ops + round(max(sharded_extra_ops(config, plan, r) for r in range(world_size)))


def sharded_extra_ops(config: DLRMConfig, plan: Plan, rank: int) -> float:
    """Operators our sharded step adds on ``rank`` to the single-process step (the terms of
    :func:`sharded_op_terms` priced by :data:`SHARDED_OPS` and :data:`SHARD_OPS`)."""
    weights = {
        **SHARDED_OPS,
        **{f"{k}.{w}": v[i] for k, v in SHARD_OPS.items() for i, w in enumerate(("plan", "local"))},
    }
    return sum(weights[k] * n for k, n in sharded_op_terms(config, plan, rank).items())


def overhead(
    config: DLRMConfig,
    hw: Hardware,
    world_size: int,
    model_parallel: bool,
    plan: Plan | None = None,
    implementation: str = "torchrec",
    dense_optimizer: str = "adagrad",
) -> float:
    """Host time to launch the step's operators (:func:`op_count` of ``plan`` in
    ``implementation``, the dense parameters updated by ``dense_optimizer``) plus
    ``step_overhead_s``: ``op_overhead_s`` each, except the operators our sharded step adds
    to the single-process one (``"recnotebooks"`` on several ranks), which cost
    ``hw.sharded_op_cost_s`` each (calibrated on our step where measured). HugeCTR's step
    (``"hugectr"``) is one CUDA-graph replay: :data:`HUGECTR`'s ``step_s``, whatever the
    hardware."""
    if implementation == "hugectr":  # one CUDA-graph replay a step (:data:`HUGECTR`)
        return HUGECTR["step_s"]
    ops = op_count(config, world_size, model_parallel, plan, implementation, dense_optimizer)
    if implementation == "recnotebooks" and world_size > 1:
        single = _single_op_count(config, dense_optimizer)
        return single * hw.op_overhead_s + (ops - single) * hw.sharded_op_cost_s + hw.step_overhead_s
    return ops * hw.op_overhead_s + hw.step_overhead_s


def overhead_of_remote_rows(hw: Hardware) -> float:
    """A rank with rows on a parameter server waits for two round trips (lookup and update)."""
    return 2 * hw.collective_latency_s
