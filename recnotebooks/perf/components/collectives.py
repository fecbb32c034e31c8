"""The collectives of one modeled step (every number **modeled**): :func:`all_to_all_seconds`
(model-parallel pooled embeddings, their gradients and the ids) and :func:`all_reduce_seconds`
(data-parallel gradients), over NVLink inside an NVLink domain (the ranks of
:func:`domain_ranks`: one node, or the trays of an NVL72 rack, ``Hardware.nvlink_domain``) and
each device's share of its node's NICs (:func:`nic_per_device`) beyond it. They price, in
seconds, the collectives of the same names that :mod:`recnotebooks.distributed.comm` runs.

Two ways, one branch (:func:`nccl_fabric`):

* **GPUs NCCL's model covers** (:data:`NCCL_GPUS`: Hopper and Blackwell GPUs on NVSwitches, a NIC
  per GPU) are priced as NCCL prices and picks them
  (:mod:`recnotebooks.perf.components.nccl`: its tuning model's lowest predicted time over ring,
  tree, NVLS, NVLS tree and, for an all-to-all, its grouped sends pairwise or through PXN);
  :func:`all_reduce_priced` and :func:`all_to_all_priced` return the :class:`CollectivePrice` with
  NCCL's :class:`~recnotebooks.perf.components.nccl.Choice` (which algorithm, and why).
* **Everything else** keeps the α-β formula of :func:`_collective` (``steps`` latencies of
  ``Hardware.collective_latency_s`` plus the bytes at ``intra_node_bw`` / the NIC share): a CPU
  node (gloo, not NCCL: ``recnb calibrate --collectives`` measures its two numbers) and GPUs the
  NCCL model does not cover (PCIe nodes, Volta's hybrid cube-mesh, Ampere, a calibrated GPU).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from recnotebooks.checks import check_float, check_int
from recnotebooks.config import DLRMConfig
from recnotebooks.perf import traffic
from recnotebooks.perf.components import nccl
from recnotebooks.perf.components.ops import HUGECTR
from recnotebooks.perf.hardware import Hardware
from recnotebooks.plan import Plan

__all__ = [
    "COLLECTIVES",
    "A2A_CALLS",
    "A2A_CALLS_PER_STEP",
    "CollectivePrice",
    "GRACE_HOSTS",
    "NCCL_GPUS",
    "all_reduce_priced",
    "all_reduce_seconds",
    "all_to_all_priced",
    "all_to_all_seconds",
    "all_to_all_bytes",
    "domain_ranks",
    "EXPOSED_COMMUNICATION",
    "HIERARCHICAL",
    "hierarchical_all_to_all_priced",
    "hierarchical_all_to_all_seconds",
    "nccl_fabric",
    "nic_per_device",
    "peers_over_pcie",
]

#: The collectives a sharded training step issues, named as the cost model's components and
#: as ``CommLog`` records them (the one list: calibration and validation read it here).
COLLECTIVES = ("all_to_all", "all_reduce")
#: All-to-all calls per model-parallel step; each pays ``world - 1`` latencies. Ours
#: (:data:`A2A_CALLS_PER_STEP`): the ids' lengths, the ids and the pooled embeddings forward, their
#: gradients backward. TorchRec's: the ids' splits too. HugeCTR's:
#: :data:`~recnotebooks.perf.components.ops.HUGECTR`.
A2A_CALLS_PER_STEP = 4
A2A_CALLS: dict[str, int] = {
    "recnotebooks": A2A_CALLS_PER_STEP,
    "torchrec": 5,
    "hugectr": int(HUGECTR["a2a_calls"]),
}

#: The implementations whose pooled embeddings cross nodes **hierarchically**
#: (:func:`recnotebooks.perf.traffic.hierarchical_bytes`, priced by
#: :func:`hierarchical_all_to_all_seconds`): HugeCTR, as NVIDIA's MLPerf ``train.py`` runs it on more
#: than one node (``comm_strategy = hugectr.CommunicationStrategy.Hierarchical if num_nodes > 1``;
#: https://github.com/mlcommons/training_results_v3.1/tree/main/NVIDIA/benchmarks/dlrm_dcnv2/
#: implementations/hugectr). The others' all-to-all is flat, rank to rank.
HIERARCHICAL = frozenset({"hugectr"})

#: The implementations whose step **hides only what its GPUs move over NVLink**: their overlapped
#: step (``CostResult.step_time_overlap``) waits for the rest of their all-to-alls and all-reduce
#: (``CostResult.exposed_communication``): on a node whose GPUs reach each other over PCIe
#: (:func:`peers_over_pcie`) all of it, on several NVLink nodes the network's share. HugeCTR: its
#: overlap runs the embeddings' exchange beside the bottom MLP ("generalized embedding and bottom MLP
#: overlap", https://github.com/NVIDIA-Merlin/HugeCTR/releases/tag/v3.1_beta), and DLRM-DCNv2's
#: bottom MLP is about 0.01 ms of a 2-40 ms step, so an exchange that takes time (after its NVLink
#: phase, the network phase before the interaction that consumes it:
#: :func:`hierarchical_all_to_all_seconds`) is on the step's critical path, as is the dense
#: gradients' all-reduce before the dense update (collectives with no independent work beside them
#: stay on the critical path: Pati et al., GPU-initiated fine-grained overlap of collective
#: communication with computation, 2023, https://arxiv.org/abs/2305.06942). Over NVLink, at 10x a
#: NIC's or a PCIe link's bandwidth, the model keeps it hidden as before: published single-node
#: NVSwitch steps sit at the overlapped step, not at the serial one (NVIDIA's v3.1 DGX H100: 4.08 ms
#: logged with evaluations, 4.19 modeled hidden, 5.28 serial), and PCIe nodes' at the serial one
#: (ASUS's 8x H100 PCIe, v3.1: 12.20 ms logged, 6.44 hidden, 12.33 serial). Chosen on MLPerf's fit
#: rounds (:mod:`recnotebooks.perf.compare`); the held-out rounds test the network part (seven
#: runs on 2-16 nodes) but hold no PCIe node. The figures, with everything hidden / the network
#: exposed / PCIe too (issue 40's plans as submitted): fit-round MAPE 26.8% / 26.0% / 18.5%; held out
#: 10.2% / 8.5% / 8.5%; Dell's two 4-GPU nodes 1.26 / 0.94, Juniper's 64 A100s 1.26 / 1.00; PCIe
#: nodes 1.30-3.96 hidden, 0.76-2.87 exposed (the rest: docs/benchmarks-log.md).
EXPOSED_COMMUNICATION = frozenset({"hugectr"})


#: The GPU presets whose collectives NCCL's model prices (:func:`nccl_fabric`), with the GPU
#: generation NCCL tunes for (``compCapIndex`` in tuning.cc: compute capability 9.x Hopper,
#: 10.x Blackwell; H100 and H200 are 9.0, B200 and GB200 10.0, B300 and GB300 10.3,
#: https://developer.nvidia.com/cuda-gpus): GPUs on NVSwitches (third generation and later, whose
#: switches reduce: NVLink SHARP, NCCL's NVLS) with a NIC per GPU, the topology whose search
#: :func:`~recnotebooks.perf.components.nccl.graphs` repeats. Not here, so on the α-β formula:
#: PCIe nodes and the H200 NVL's 4-way bridge (no NVSwitch), Volta's hybrid cube-mesh, Ampere (its
#: constants are not carried by the NCCL model) and the CPU presets. A copy of a preset
#: (``Hardware.replace``) keeps its name, and so its generation.
NCCL_GPUS: dict[str, str] = {
    "dgx_h100": "hopper",
    "h200_node": "hopper",
    "dgx_b200": "blackwell",
    "hgx_b300": "blackwell",
    "gb200_nvl72": "blackwell",
    "gb300_nvl72": "blackwell",
}
#: The GPU presets whose nodes' CPUs are Arm (Grace, joined to the GPUs by NVLink-C2C): NCCL's
#: model tells hosts apart (:data:`~recnotebooks.perf.components.nccl.HOSTS`); the others are x86.
GRACE_HOSTS = frozenset({"gb200_nvl72", "gb300_nvl72"})
#: A NIC share of "unlimited" bandwidth (the cost model's counterfactual of a free network,
#: :func:`recnotebooks.perf.cost._exposed`) as a :class:`~recnotebooks.perf.components.nccl.Fabric`
#: takes it: finite, far above any link.
_UNLIMITED = 1e30


def peers_over_pcie(hw: Hardware) -> bool:
    """Whether the GPUs of a ``hw`` node reach each other over their PCIe links (no NVLink): its
    device-to-device bandwidth is no more than its PCIe link's, as the GPU presets without NVLink
    set it (``intra_node_bw`` = the PCIe link's, :mod:`recnotebooks.perf.hardware`). A CPU node: no."""
    return hw.kind == "gpu" and hw.intra_node_bw <= hw.host_link_bw


def domain_ranks(hw: Hardware, gpus: int, nodes: int) -> int:
    """Ranks that reach each other over NVLink when ``gpus`` of each of ``nodes`` nodes of ``hw``
    run: ``gpus`` times the nodes one NVLink domain holds (``Hardware.nodes_per_domain``: 18 trays
    of an NVL72 rack, 1 where the node is the domain), at most all of them. MLPerf's 16 GB200 trays
    of 4 are one domain of 64 ranks; 8 DGX H100 nodes are 8 domains of 8. Nodes that do not fill
    whole domains leave a smaller last one (20 trays: a rack of 18 and one of 2), and its ranks,
    which send the most over the network, are the ones counted: the slowest rank's view.

    >>> from recnotebooks.perf.hardware import hardware
    >>> domain_ranks(hardware("gb200_nvl72"), 4, 16), domain_ranks(hardware("dgx_h100"), 8, 8)
    (64, 8)
    """
    gpus, nodes = check_int("gpus", gpus, lo=1), check_int("nodes", nodes, lo=1)
    per = hw.nodes_per_domain
    return gpus * (nodes % per or per if nodes > per else nodes)


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


def nccl_fabric(
    hw: Hardware, world: int, gpus: int, nic: float, node_size: int | None = None
) -> nccl.Fabric | None:
    """The fabric NCCL sees when ``world`` ranks of ``hw`` run a collective, ``gpus`` of them in
    each NVLink domain (:func:`domain_ranks`) and each with ``nic`` bytes/s of the network
    (:func:`nic_per_device`); ``None`` where the α-β formula prices it instead: a CPU node (gloo
    is not NCCL), a GPU preset not in :data:`NCCL_GPUS`, or a single rank. Ranks that do not fill
    whole domains of ``gpus`` (20 trays of an NVL72: 18 and 2) are priced as domains of the
    largest size that divides both, the slower view; NVLS on (NVIDIA's MLPerf configs set
    ``NCCL_NVLS_ENABLE=1``), CollNet (SHARP in the network switches) off, as NCCL defaults.
    ``node_size``: ranks per node (``None``: as many of a domain's as a node of ``hw`` holds);
    it only names the fabric in NCCL's reason."""
    arch = NCCL_GPUS.get(hw.name) if hw.kind == "gpu" else None
    if arch is None or world <= 1:
        return None
    domain = min(max(1, gpus), world)
    if world % domain:
        domain = math.gcd(world, domain)
    if domain == world and node_size is None:  # one domain: name all of it (72 GPUs of a rack)
        domain = max(domain, hw.domain_size)
    node = math.gcd(domain, hw.devices if node_size is None else node_size)
    host = "arm" if hw.name in GRACE_HOSTS else "x86"
    return nccl.Fabric(world, node, domain, hw.intra_node_bw, min(nic, _UNLIMITED), True, arch, False, host)


@dataclass(frozen=True)
class CollectivePrice:
    """One collective of a step as the cost model priced it: ``seconds`` for its ``calls``, and
    NCCL's :class:`~recnotebooks.perf.components.nccl.Choice` for one call (which algorithm and
    protocol, its predicted time and why), or ``None`` where the α-β formula priced it
    (:func:`nccl_fabric`) or nothing was sent."""

    seconds: float
    calls: int
    choice: nccl.Choice | None = None

    @property
    def how(self) -> str:
        """``"nccl"`` or ``"alpha-beta"``: which model priced it."""
        return "nccl" if self.choice is not None else "alpha-beta"

    @property
    def reason(self) -> str:
        """NCCL's reason for its pick, or which formula priced the call."""
        if self.choice is not None:
            return self.choice.reason
        return "the alpha-beta formula: latency per step + bytes / bandwidth (not an NCCL GPU fabric)"


def _check_call(
    volume: float, world: int, gpus: int, nic: float, names: tuple[str, str] = ("volume", "world")
) -> None:
    """The arguments every collective here takes: ``volume`` bytes >= 0 (0: nothing to send),
    ``world`` and ``gpus`` ranks >= 1, a NIC share ``nic`` > 0 bytes/s (``math.inf``: a network of
    unlimited bandwidth, the cost model's counterfactual)."""
    check_float(names[0], volume, lo=0)
    check_int(names[1], world, lo=1)
    check_int("gpus", gpus, lo=1)
    if nic != math.inf:
        check_float("nic", nic, lo=0, lo_open=True)


@functools.lru_cache(maxsize=4096)
def _choose(collective: str, nbytes: float, fabric: nccl.Fabric) -> nccl.Choice:
    """:func:`~recnotebooks.perf.components.nccl.choose`, once per call shape (every rank of a
    step asks for the same all-reduce)."""
    return nccl.choose(collective, nbytes, fabric)


def _collective(volume: float, world: int, gpus: int, hw: Hardware, nic: float, steps: int) -> float:
    """Seconds to move ``volume`` bytes per device: the share to the ``gpus`` devices of this NVLink
    domain (:func:`domain_ranks`) over NVLink, the rest over this device's share of its node's NICs,
    plus ``steps`` latencies (the α-β formula)."""
    if world <= 1:
        return 0.0
    inside = (gpus - 1) / (world - 1)
    return (
        max(volume * inside / hw.intra_node_bw, volume * (1 - inside) / nic) + steps * hw.collective_latency_s
    )


def all_to_all_priced(
    volume: float,
    world: int,
    gpus: int,
    hw: Hardware,
    nic: float,
    calls: int = A2A_CALLS_PER_STEP,
    grouped: bool = False,
) -> CollectivePrice:
    """:func:`all_to_all_seconds` with NCCL's choice for one call. On an NCCL fabric
    (:func:`nccl_fabric`) each of the ``calls`` moves ``volume / calls`` of the bytes and is
    priced by :func:`recnotebooks.perf.components.nccl.all_to_all` on its buffer (what the rank
    keeps, ``1/world`` of it, included); ``grouped`` does not matter there: NCCL runs every
    all-to-all as one group of sends and receives (``ncclAlltoAll``, and PyTorch's
    ``all_to_all_single`` on NCCL)."""
    calls = check_int("calls", calls, lo=1)
    _check_call(volume, world, gpus, nic)
    if volume <= 0 or world <= 1:  # nothing to exchange when every table is data-parallel
        return CollectivePrice(0.0, calls)
    fabric = nccl_fabric(hw, world, gpus, nic)
    if fabric is None:
        steps = calls * (1 if grouped else world - 1)
        return CollectivePrice(_collective(volume, world, gpus, hw, nic, steps=steps), calls)
    choice = _choose("all_to_all", volume * world / (world - 1) / calls, fabric)
    return CollectivePrice(calls * choice.seconds, calls, choice)


def all_to_all_seconds(
    volume: float,
    world: int,
    gpus: int,
    hw: Hardware,
    nic: float,
    calls: int = A2A_CALLS_PER_STEP,
    grouped: bool = False,
) -> float:
    """Seconds of the step's all-to-alls (``calls`` of them, :data:`A2A_CALLS` of the
    implementation) among ``world`` ranks, ``gpus`` of them in each NVLink domain
    (:func:`domain_ranks`), ``volume`` bytes per rank in all: as NCCL prices them on an NCCL
    fabric (:func:`all_to_all_priced`); else pairwise, ``world - 1`` latencies each, or one when
    ``grouped`` (all sends posted at once, in one group, as HugeCTR's step runs them)."""
    return all_to_all_priced(volume, world, gpus, hw, nic, calls, grouped).seconds


def all_reduce_priced(
    volume: float, world: int, gpus: int, hw: Hardware, nic: float, calls: int = 1
) -> CollectivePrice:
    """:func:`all_reduce_seconds` with NCCL's choice for one call: on an NCCL fabric
    (:func:`nccl_fabric`) the gradients' ``S`` bytes (``volume = 2(p-1)/p * S``) go in ``calls``
    equal all-reduces, each priced and picked by
    :func:`recnotebooks.perf.components.nccl.all_reduce` (ring, tree, NVLS or NVLS tree)."""
    calls = check_int("calls", calls, lo=1)
    _check_call(volume, world, gpus, nic)
    if world <= 1:
        return CollectivePrice(0.0, calls)
    fabric = nccl_fabric(hw, world, gpus, nic)
    if fabric is None:
        return CollectivePrice(_alpha_beta_all_reduce(volume, world, gpus, hw, nic, calls), calls)
    if volume <= 0:
        return CollectivePrice(0.0, calls)
    choice = _choose("all_reduce", volume * world / (2 * (world - 1)) / calls, fabric)
    return CollectivePrice(calls * choice.run_seconds, calls, choice)


def all_reduce_seconds(
    volume: float, world: int, gpus: int, hw: Hardware, nic: float, calls: int = 1
) -> float:
    """Seconds of the all-reduce of the data-parallel gradients: ``volume`` bytes per device
    (``2(p-1)/p * S`` of ``S`` bytes: :func:`recnotebooks.perf.traffic.collective_bytes`) in
    ``calls`` calls, ``gpus`` ranks in each NVLink domain (:func:`domain_ranks`; a node, or the
    trays of an NVL72 rack): as NCCL prices and picks it on an NCCL fabric
    (:func:`all_reduce_priced`), else by the ring formula of :func:`_alpha_beta_all_reduce`."""
    return all_reduce_priced(volume, world, gpus, hw, nic, calls).seconds


def _alpha_beta_all_reduce(
    volume: float, world: int, gpus: int, hw: Hardware, nic: float, calls: int
) -> float:
    """The ring all-reduce of ``volume`` bytes per device in ``calls`` calls, ``2(p-1)`` latencies
    each, inside one NVLink domain of ``gpus`` ranks.

    Across ``n`` domains of ``g`` devices it is hierarchical, as NCCL's rings run it over the
    NICs (one rail per GPU): each device reduce-scatters and all-gathers its domain's ``S`` over
    NVLink (``2(g-1)/g * S``) and all-reduces its own ``S/g`` share with the same device of the
    other nodes over its NIC (``2(n-1)/n * S/g``), ``2(g-1) + 2(n-1)`` latencies a call; only
    ``1/g`` of the gradients crosses each NIC
    (https://github.com/NVIDIA/nccl, the rings and trees of its ``docs``; Sanders et al., Two-tree
    algorithms for full bandwidth broadcast, reduction and scan, 2009)."""
    nodes = max(1, world // max(gpus, 1))
    if nodes <= 1 or gpus <= 1:
        return _collective(volume, world, gpus, hw, nic, steps=2 * (world - 1) * calls)
    size = volume * world / (2 * (world - 1))  # S, the gradients' bytes
    inside = 2 * (gpus - 1) / gpus * size / hw.intra_node_bw
    across = 2 * (nodes - 1) / nodes * size / gpus / nic
    return inside + across + calls * (2 * (gpus - 1) + 2 * (nodes - 1)) * hw.collective_latency_s


def hierarchical_all_to_all_priced(
    nvlink: float,
    network: float,
    nodes: int,
    hw: Hardware,
    nic: float,
    calls: int = 2,
    domain_nodes: int = 1,
) -> CollectivePrice:
    """:func:`hierarchical_all_to_all_seconds` with NCCL's choice for the network phase's call
    (``None`` on the α-β formula, or with one node)."""
    calls = check_int("calls", calls, lo=1)
    domain_nodes = check_int("domain_nodes", domain_nodes, lo=1)
    check_float("nvlink", nvlink, lo=0)
    _check_call(network, nodes, 1, nic, ("network", "nodes"))
    if nvlink <= 0 and network <= 0:
        return CollectivePrice(0.0, calls)
    peer = nvlink / hw.intra_node_bw + hw.collective_latency_s  # HugeCTR's peer writes, not NCCL
    fabric = nccl_fabric(hw, nodes, _domain_of(nodes, domain_nodes), nic, node_size=1)  # one rail
    if fabric is None or network <= 0:
        return CollectivePrice(calls * (peer + _network_phase(network, nodes, hw, nic, domain_nodes)), calls)
    choice = _choose("all_to_all", network * nodes / (nodes - 1), fabric)
    return CollectivePrice(calls * (peer + choice.seconds), calls, choice)


def _domain_of(nodes: int, per: int) -> int:
    """Of ``nodes`` nodes, those in one NVLink domain of ``per`` nodes (the last, smaller one
    where they do not fill whole domains: :func:`domain_ranks`' rule)."""
    return nodes % per or per if nodes > per else nodes


def _network_phase(network: float, nodes: int, hw: Hardware, nic: float, domain_nodes: int) -> float:
    """The α-β formula of the exchange's second phase: ``network`` bytes to the same rail of the
    other ``nodes - 1`` nodes, over NVLink to those of this NVLink domain, over the NIC share
    ``nic`` to the rest, one latency."""
    if nodes <= 1:
        return 0.0
    inside = (min(domain_nodes, nodes) - 1) / (nodes - 1)
    return max(network * inside / hw.intra_node_bw, network * (1 - inside) / nic) + hw.collective_latency_s


def hierarchical_all_to_all_seconds(
    nvlink: float,
    network: float,
    nodes: int,
    hw: Hardware,
    nic: float,
    calls: int = 2,
    domain_nodes: int = 1,
) -> float:
    """Seconds of the pooled embeddings' hierarchical exchange, forward and backward (``calls``
    of them: :data:`A2A_CALLS`), ``nvlink`` and ``network`` bytes per device each way (the larger of
    sent and received of :func:`recnotebooks.perf.traffic.hierarchical_bytes`): each call writes to
    the node's peers over NVLink (HugeCTR's peer writes: bytes at ``intra_node_bw`` and one
    latency), then, once the node's partial sums are reduced, sends to the same rail of the other
    ``nodes - 1`` nodes over this device's NIC share ``nic`` (one NCCL group: on an NCCL fabric,
    :func:`nccl_fabric` of the ``nodes`` rails, NCCL's all-to-all; else one latency); the phases
    run one after the other (HugeCTR's ``model_forward`` then ``network_forward``). Where
    ``domain_nodes`` nodes share an NVLink domain (the trays of an NVL72 rack,
    :attr:`~recnotebooks.perf.hardware.Hardware.nodes_per_domain`), the second phase's bytes to the
    other nodes of the domain travel over NVLink too, the rest over the NIC share."""
    return hierarchical_all_to_all_priced(nvlink, network, nodes, hw, nic, calls, domain_nodes).seconds
