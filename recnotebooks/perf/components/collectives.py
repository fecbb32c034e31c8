"""The collectives of one modeled step (every number **modeled**): :func:`all_to_all_seconds`
(model-parallel pooled embeddings, their gradients and the ids) and :func:`all_reduce_seconds`
(data-parallel gradients), both priced by :func:`_collective` over NVLink inside a node and
each device's share of the NICs (:func:`nic_per_device`) across nodes. They price, in seconds,
the collectives of the same names that :mod:`recnotebooks.distributed.comm` runs.
"""

from __future__ import annotations

from recnotebooks.checks import check_int
from recnotebooks.config import DLRMConfig
from recnotebooks.perf import traffic
from recnotebooks.perf.hardware import Hardware
from recnotebooks.plan import Plan

__all__ = [
    "COLLECTIVES",
    "A2A_CALLS",
    "A2A_CALLS_PER_STEP",
    "all_reduce_seconds",
    "all_to_all_seconds",
    "all_to_all_bytes",
    "nic_per_device",
]

#: The collectives a sharded training step issues, named as the cost model's components and
#: as ``CommLog`` records them (the one list: calibration and validation read it here).
COLLECTIVES = ("all_to_all", "all_reduce")
#: All-to-all calls per model-parallel step; each pays ``world - 1`` latencies. Ours
#: (:data:`A2A_CALLS_PER_STEP`): the ids' lengths, the ids and the pooled embeddings forward, their
#: gradients backward. TorchRec's: the ids' splits too.
A2A_CALLS_PER_STEP = 4
A2A_CALLS: dict[str, int] = {"recnotebooks": A2A_CALLS_PER_STEP, "torchrec": 5}


def nic_per_device(hw: Hardware, gpus: int) -> float:
    """A GPU reaches the network through its own PCIe link (GPUDirect RDMA), sharing the node's
    NICs with the other GPUs in use; a CPU node has all of them."""
    return min(hw.nic_bw / gpus, hw.host_link_bw) if hw.kind == "gpu" else hw.nic_bw


def all_to_all_bytes(config: DLRMConfig, plan: Plan, local_batch: float, dtype: str) -> list[float]:
    """Per rank: bytes the step's all-to-alls put on its link (bag lengths and ids forward,
    pooled embeddings forward, their gradients backward; each collective counted by the larger
    of what the rank sends and receives), from :func:`recnotebooks.perf.traffic.collective_bytes`."""
    rows = traffic.collective_bytes(config, plan, local_batch, dtype=dtype, dense=False)
    return traffic.volumes(rows, plan.world_size)["all_to_all"]


def _collective(volume: float, world: int, gpus: int, hw: Hardware, nic: float, steps: int) -> float:
    """Seconds to move ``volume`` bytes per device: the share to devices in this node over NVLink,
    the rest over this device's share of the node's NICs, plus ``steps`` latencies."""
    if world <= 1:
        return 0.0
    inside = (gpus - 1) / (world - 1)
    return (
        max(volume * inside / hw.intra_node_bw, volume * (1 - inside) / nic) + steps * hw.collective_latency_s
    )


def all_to_all_seconds(
    volume: float, world: int, gpus: int, hw: Hardware, nic: float, calls: int = A2A_CALLS_PER_STEP
) -> float:
    """Seconds of the step's all-to-alls (``calls`` of them, :data:`A2A_CALLS` of the
    implementation; pairwise: ``world - 1`` latencies each)."""
    if volume <= 0:  # nothing to exchange when every table is data-parallel
        return 0.0
    return _collective(volume, world, gpus, hw, nic, steps=calls * (world - 1))


def all_reduce_seconds(
    volume: float, world: int, gpus: int, hw: Hardware, nic: float, calls: int = 1
) -> float:
    """Seconds of the ring all-reduce of the data-parallel gradients: ``volume`` bytes per device
    (``2(p-1)/p * S`` of ``S`` bytes: :func:`recnotebooks.perf.traffic.collective_bytes`) in
    ``calls`` calls, ``2(p-1)`` latencies each."""
    return _collective(volume, world, gpus, hw, nic, steps=2 * (world - 1) * check_int("calls", calls, lo=1))
