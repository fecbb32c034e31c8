"""Collectives as NCCL prices and picks them (every number **modeled**).

NCCL chooses, for each collective call, the algorithm (ring, tree, NVLS, NVLS tree, CollNet,
PAT) and protocol (LL, LL128, Simple) its tuning model predicts fastest for the message size:
``time = latency + bytes / bandwidth``, each term from constants measured by NVIDIA and the
channels its topology search found. This module repeats that model with NCCL's own constants,
read from ``src/graph/tuning.cc`` of NCCL :data:`NCCL_RELEASE` (commit :data:`NCCL_COMMIT`):

* :func:`tuning_table`: per (algorithm, protocol) the latency (µs) and bandwidth (GB/s) that
  ``ncclTopoTuneModel`` (tuning.cc lines 243-436) stores in ``comm->latencies/bandwidths``;
* :func:`algorithm_time`: ``ncclTopoGetAlgoTime`` (lines 630-656), with the tree correction
  factors and the ring's plateau;
* :func:`choose`: the lowest predicted time over every enabled pair, as ``topoGetAlgoInfo`` in
  ``src/enqueue.cc`` picks it, returned as a :class:`Choice` that says which and why;
* :func:`run_time`: the call as NCCL's kernels run it, what a step spends (``Choice.run_seconds``):
  the predicted time plus, for NVLS and NVLS tree, the loops their kernel's pipeline takes to fill,
  which NCCL's tuning model leaves out (:func:`nvls_channels`, :func:`nvls_chunk`,
  :data:`PIPELINE_STAGES`, read from ``src/transport/nvls.cc``, ``src/enqueue.cc`` and
  ``src/device/all_reduce.h``), NVLS tree no faster than one domain's NVLS
  (:func:`domain_nvls_bandwidth`);
* :func:`all_reduce`, :func:`reduce_scatter`, :func:`all_gather`, :func:`all_to_all`: the four
  collectives a training step issues. NCCL runs an all-to-all as grouped sends and receives, not
  as a tuned collective: :func:`all_to_all` prices it ``pairwise`` (each peer over the link that
  reaches it, up to 8 peers a channel at once: :func:`p2p_rounds`) or ``pxn`` (NCCL's PXN: across
  nodes, data first moves over NVLink to the GPU on the destination's rail, whose NIC then
  reaches one peer per other node).

The channels and per-channel bandwidths come from NCCL's topology search (``src/graph/search.cc``),
which this module does not rerun: :func:`graphs` keeps its outcome for the topologies modeled
here (GPUs on NVSwitches, one NIC per GPU), with NCCL's speed arrays and its channel doubling.
What the model is given is a :class:`Fabric`: ranks, node (tray) size, NVLink domain size, per-GPU
NVLink and NIC bandwidths from datasheets, NVLink SHARP (NVLS) and in-network SHARP (CollNet).
Ranks within one NVLink domain form one NCCL "node" (multi-node NVLink puts a GB200 NVL72 rack's
72 GPUs in one clique); beyond the domain, NCCL's nodes are the domains. Nothing is fitted: the
published nccl-tests figures it is checked against are in
:mod:`recnotebooks.published.nccl_tests` and the comparison in :mod:`recnotebooks.perf.nccl_tests`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from recnotebooks.checks import (
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_multiple,
    check_type,
    format_bytes,
)
from recnotebooks.perf.hardware import Hardware

__all__ = [
    "ALGORITHMS",
    "ARCHS",
    "HOSTS",
    "COLLECTIVES",
    "NCCL_COMMIT",
    "NCCL_RELEASE",
    "P2P_PER_BATCH",
    "PROTOCOLS",
    "TUNING_CC",
    "Choice",
    "Fabric",
    "Graph",
    "algorithm_time",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "bus_bandwidth",
    "candidates",
    "choose",
    "domain_nvls_bandwidth",
    "graphs",
    "p2p_rounds",
    "reduce_scatter",
    "run_time",
    "nvls_channels",
    "nvls_chunk",
    "NVLS_CHUNK_BYTES",
    "PIPELINE_STAGES",
    "tuning_table",
]

NCCL_RELEASE = "v2.30.7-1"
NCCL_COMMIT = "73cf112295c33aee2b895f329f592f2a9b4b0f97"
_SRC = f"https://github.com/NVIDIA/nccl/blob/{NCCL_COMMIT}/src"
#: The file whose constants and formulas this module repeats.
TUNING_CC = f"{_SRC}/graph/tuning.cc"

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
#: NCCL's algorithms (``ncclAlgoStr``), then the two ways an all-to-all's sends are routed.
ALGORITHMS = (
    "tree",
    "ring",
    "collnet_direct",
    "collnet_chain",
    "nvls",
    "nvls_tree",
    "pat",
    "pairwise",
    "pxn",
)
PROTOCOLS = ("LL", "LL128", "Simple")
#: GPU generations NCCL tunes apart (``compCapIndex``): Hopper is SM90, Blackwell SM100.
ARCHS = ("hopper", "blackwell")
#: Host CPUs NCCL's model tells apart (``cpuArch``): x86 and Arm (Grace).
HOSTS = ("x86", "arm")
_TUNED = ALGORITHMS[:7]
_A2A = ("pairwise", "pxn")

# ---- NCCL's constants (tuning.cc v2.30.7-1, ncclTunerConstantsDefaults, lines 146-213) -------
#: baseLatencies (µs), per algorithm: (LL, LL128, Simple); lines 149-155.
BASE_LATENCY_US: dict[str, tuple[float, float, float]] = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "collnet_direct": (0, 0, 0),
    "collnet_chain": (0, 0, 0), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0), "pat": (8.0, 8.0, 8.0),
}  # fmt: skip
#: hwLatencies (µs) per link (NVLink, PCI, network) and algorithm: (LL, LL128, Simple); 156-176.
HW_LATENCY_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet_direct": (0, 0, 3.7),
               "collnet_chain": (0, 0, 2.8), "nvls": (0, 0, 25), "nvls_tree": (0, 0, 25), "pat": (0, 0, 4.0)},
    "net": {"tree": (5.0, 8.5, 14), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0, 0, 31),
            "collnet_chain": (0, 0, 30), "nvls": (0, 0, 18), "nvls_tree": (0, 0, 20.9), "pat": (0, 0, 14)},
}  # fmt: skip
#: llMaxBws (GB/s), lines 177-183: one node reads the GPU's row, several nodes the CPU's (row 0:
#: Intel or Arm hosts); columns: 1 node, 2 nodes, more.
_LL_MAX_BW = {"hopper": (141.0, 45.0, 35.0), "blackwell": (282.0, 90.0, 70.0), "cpu": (39.0, 39.0, 20.4)}
#: Per-channel caps (GB/s) by generation and (1, 2, more) nodes, lines 184-211.
_PER_CH_RING_LL128 = {"hopper": (36.7, 36.7, 36.7), "blackwell": (40.0, 40.0, 40.0)}
_PER_CH_TREE_LL128 = {"hopper": (36.7, 36.7, 29.0), "blackwell": (55.6, 31.67, 20.0)}
_PER_CH_TREE = {"hopper": (38.7, 41.4, 36.0), "blackwell": (70.0, 42.8, 24.0)}
_PER_CH_NVLS_TREE = {"hopper": (0.0, 57.7, 45.5), "blackwell": (0.0, 96.0, 80.0)}
#: nvlsEfficiency, lines 138-144.
_NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
#: treeCorrectionFactor per protocol, powers of two from 64 B (lines 620-627).
_TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0,
           1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
              1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9,
               .9, .9),
}  # fmt: skip
#: getNetOverhead (µs) for Intel or Arm hosts (tuning.cc lines 225-232); tripled for Simple.
_NET_OVERHEAD_US = 1.0

# ---- the topology search's constants (src/graph/search.cc lines 1052-1067, topo.h 19-24) -----
#: Speeds (GB/s per channel) the search tries, fastest first: in one node and across nodes.
_SPEEDS = {
    ("hopper", "intra"): (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    ("hopper", "inter"): (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0),
    ("blackwell", "intra"): (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
    ("blackwell", "inter"): (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0),
}  # fmt: skip
#: NCCL's bandwidth of one NVLink (SM90_NVLINK_BW, SM100_NVLINK_BW, topo.h) beside the datasheet's
#: per direction (NVLink 4: 25 GB/s, H100 datasheet: 18 links, 900 GB/s both ways; NVLink 5:
#: 50 GB/s, GB200 NVL72 datasheet: 1.8 TB/s per GPU both ways).
_NVLINK_PER_LINK = {"hopper": (20.6, 25.0), "blackwell": (40.1, 50.0)}
_MAX_RING_CHANNELS = 32  # MAXCHANNELS / 2 (init.cc line 1177)
_MAX_NVLS_ARITY = 32  # NCCL_MAX_NVLS_ARITY (device.h line 213)
_MAX_DIRECT_ARITY = 8  # NCCL_MAX_DIRECT_ARITY + 1 (device.h line 199)
_MAX_CHANNELS = 64  # MAXCHANNELS (device.h line 91)
#: Peers one channel serves at once in a batch of grouped sends and receives
#: (``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``, device.h line 391): :func:`p2p_rounds`.
P2P_PER_BATCH = 8
#: GB/s one channel of sends or receives to a network peer carries, for the channels NCCL gives
#: such a peer (``NCCL_P2P_PER_CHANNEL_NET_BW``'s default, paths.cc line 918).
_P2P_NET_CHANNEL_GBPS = 14.0


@dataclass(frozen=True)
class Fabric:
    """The GPUs one collective spans and the links between them.

    Args:
        ranks: GPUs in the communicator.
        node_size: GPUs per node (a GB200 NVL72 tray: 4).
        domain_size: GPUs one NVLink domain joins (an NVL72 rack: 72; an 8-GPU HGX node: 8); a
            multiple of ``node_size``. ``ranks`` is at most one domain or whole domains.
        nvlink_bw: per GPU per direction, bytes/s, from the datasheet (H100: 450e9; B200: 900e9).
        nic_bw: the network per GPU per direction, bytes/s (ConnectX-7 at 400 Gb/s: 50e9).
        nvls: the NVSwitches reduce (NVLink SHARP: NVSwitch 3 and later).
        arch: ``"hopper"`` or ``"blackwell"`` (NCCL's constants differ per generation).
        collnet: the network switches reduce (SHARP; NCCL's CollNet), enabled by the user.
        host: the CPUs of the nodes, ``"x86"`` or ``"arm"`` (Grace, as in GB200 and GB300 racks):
            NCCL corrects NVLS tree's bandwidth on Blackwell with x86 hosts only (tuning.cc
            lines 643-645).
    """

    ranks: int
    node_size: int
    domain_size: int
    nvlink_bw: float
    nic_bw: float
    nvls: bool = True
    arch: str = "hopper"
    collnet: bool = False
    host: str = "x86"

    def __post_init__(self) -> None:
        check_int("ranks", self.ranks, lo=1)
        check_int("node_size", self.node_size, lo=1)
        check_int("domain_size", self.domain_size, lo=1)
        check_float("nvlink_bw", self.nvlink_bw, lo=0, lo_open=True)
        check_float("nic_bw", self.nic_bw, lo=0, lo_open=True)
        check_bool("nvls", self.nvls)
        check_bool("collnet", self.collnet)
        check_choice("host", self.host, HOSTS)
        check_choice("arch", self.arch, ARCHS)
        check_multiple("domain_size", self.domain_size, self.node_size, "an NVLink domain holds whole nodes")
        if self.ranks > self.domain_size:
            check_multiple("ranks", self.ranks, self.domain_size, "beyond one NVLink domain, whole domains")

    @classmethod
    def from_hardware(
        cls,
        hw: Hardware,
        ranks: int,
        *,
        node_size: int | None = None,
        domain_size: int | None = None,
        arch: str = "hopper",
        nvls: bool = True,
        collnet: bool = False,
        host: str = "x86",
    ) -> Fabric:
        """The fabric of ``ranks`` GPUs of a :class:`Hardware` (read only): its NVLink bandwidth
        (``intra_node_bw``) and each GPU's share of the node's NICs (``nic_bw / devices``).
        ``node_size`` defaults to the preset's ``devices``, ``domain_size`` to ``node_size``."""
        hw = check_type("hw", hw, Hardware, "a Hardware")
        node = hw.devices if node_size is None else node_size
        return cls(ranks, node, node if domain_size is None else domain_size, hw.intra_node_bw,
                   hw.nic_bw / hw.devices, nvls, arch, collnet, host)  # fmt: skip

    @property
    def local_ranks(self) -> int:
        """Ranks per NCCL node: the ranks of one NVLink domain (``ppn`` in tuning.cc)."""
        return min(self.ranks, self.domain_size)

    @property
    def nodes(self) -> int:
        """NCCL's nodes: NVLink domains the ranks span (``nNodes``)."""
        return self.ranks // self.local_ranks

    @property
    def nvlink_gbps(self) -> float:
        """A GPU's NVLink bandwidth as NCCL counts it: links x NCCL's per-link GB/s (H100: 370.8)."""
        nccl, datasheet = _NVLINK_PER_LINK[self.arch]
        return round(self.nvlink_bw / 1e9 / datasheet) * nccl

    @property
    def nic_gbps(self) -> float:
        """A GPU's NIC as NCCL reads it: the port speed in GB/s (``mbps / 8000``, topo.cc line 418)."""
        return self.nic_bw / 1e9


@dataclass(frozen=True)
class Graph:
    """What NCCL's topology search found for one algorithm: ``channels``, each carrying
    ``bw_intra`` GB/s inside a node and ``bw_inter`` GB/s across nodes."""

    channels: int
    bw_intra: float
    bw_inter: float


def _first(speeds: tuple[float, ...], fits) -> float:  # noqa: ANN001 (a predicate)
    """The fastest of ``speeds`` that ``fits``, else the slowest (search.cc lines 1162-1167)."""
    return next((s for s in speeds if fits(s)), speeds[-1])


def _ring_graph(f: Fabric) -> Graph:
    """The ring search: as many channels as the NVLink (and, across nodes, the NICs: one channel
    per NIC at the channel's speed) carry, doubled when fast (``ncclTopoDupChannels``, search.cc
    lines 1036-1050), then as fast as those channels fit (pass 2, lines 1268-1273)."""
    total, multi = f.nvlink_gbps, f.nodes > 1
    speeds = _SPEEDS[(f.arch, "inter" if multi else "intra")]
    cap = min(total, f.nic_gbps) if multi else total

    def channels(s: float) -> int:
        ch = min(_MAX_RING_CHANNELS, int(total // s))
        return min(ch, f.local_ranks * int(f.nic_gbps // s)) if multi else ch

    first = _first(speeds, lambda s: s <= cap)
    tried = [s for s in speeds if first >= s >= 0.49 * first and channels(s) > 0]
    speed = max(tried, key=lambda s: channels(s) * s) if tried else first
    ch = max(1, channels(speed))
    if speed >= 25 and not (speed < 50 and ch > 4):
        doubled = min(2 * ch, _MAX_RING_CHANNELS)
        speed, ch = speed / math.ceil(doubled / ch), doubled
    for faster in sorted(s for s in speeds if s > speed):
        if ch * faster > total or (multi and ch > f.local_ranks * int(f.nic_gbps // faster)):
            break
        speed = faster
    return Graph(ch, speed, speed)


def _tree_graph(f: Fabric, ch: int) -> Graph:
    """Trees keep the ring's channels; non-ring patterns may use ``n/(n-1)`` of the NVLink (lines
    1169-1170); their speed is the fastest those channels fit."""
    multi, n = f.nodes > 1, f.local_ranks
    total = f.nvlink_gbps * (n / (n - 1) if n > 1 else 1.0)
    speeds = _SPEEDS[(f.arch, "inter" if multi else "intra")]
    cap = min(f.nvlink_gbps, f.nic_gbps) if multi else f.nvlink_gbps
    speed = _first(speeds, lambda s: s <= cap and s * ch <= total)
    return Graph(ch, speed, speed)


def _nvls_graph(f: Fabric) -> Graph:
    """NVLS: one channel per GPU up to 32 (line 1127), pulling evenly from all GPUs in one node
    (line 1137); in one node the search then raises ``bw_inter`` while below twice ``bw_intra``
    (lines 1274-1278). Across nodes the channels are the NIC heads, at the NIC's speed."""
    n = f.local_ranks
    ch = min(_MAX_NVLS_ARITY, n)
    total = f.nvlink_gbps * (n / (n - 1) if n > 1 else 1.0)
    if f.nodes > 1:  # as many heads as the NVLink and the NICs carry at the fastest speed
        speed = _first(_SPEEDS[(f.arch, "inter")], lambda s: s <= min(f.nic_gbps, f.nvlink_gbps))
        return Graph(max(1, min(ch, int(total // speed), n * int(f.nic_gbps // speed))), speed, speed)
    speeds = _SPEEDS[(f.arch, "intra")]
    i = speeds.index(_first(speeds, lambda s: s <= f.nvlink_gbps and s * ch <= total))
    j = i
    while j > 0 and speeds[j] < 2 * speeds[i]:
        j -= 1
    return Graph(ch, speeds[i], speeds[j])


def graphs(f: Fabric) -> dict[str, Graph]:
    """The channels and per-channel GB/s of every algorithm on ``f``: the outcome of NCCL's
    topology search for GPUs on NVSwitches with one NIC per GPU. Trees and rings end with the
    same channels (init.cc line 1459); PAT rides the ring's graph, CollNet chain the tree's,
    CollNet direct the NVLS heads (at most 8). On 8 H100s the ring and the tree are 12 channels of
    30 GB/s, as NCCL 2.19.4 logged them on an H100 NVSwitch system ("Pattern 4, crossNic 0,
    nChannels 12, bw 30.000000/30.000000, type NVL/PIX", https://github.com/NVIDIA/nccl/issues/1197)."""
    return dict(_graphs(_check_fabric(f)))


@functools.lru_cache(maxsize=512)
def _graphs(f: Fabric) -> dict[str, Graph]:
    """:func:`graphs`, once per fabric (a frozen, hashable dataclass); callers do not mutate it."""
    ring = _ring_graph(f)
    tree = _tree_graph(f, ring.channels)
    ch = min(ring.channels, tree.channels)
    ring, tree = Graph(ch, ring.bw_intra, ring.bw_inter), Graph(ch, tree.bw_intra, tree.bw_inter)
    nvls = _nvls_graph(f)
    heads = min(_MAX_DIRECT_ARITY, f.local_ranks)
    return {"ring": ring, "tree": tree, "pat": ring, "collnet_chain": tree, "nvls": nvls,
            "nvls_tree": nvls, "collnet_direct": Graph(heads, nvls.bw_intra, nvls.bw_inter)}  # fmt: skip


def _enabled(coll: str, algo: str, proto: str, f: Fabric, g: Graph) -> bool:
    """Whether NCCL prices this pair at all (tuning.cc lines 290-303, 495-537; enqueue.cc's
    ``updateCollCostTable``). LL128 is on: Hopper and Blackwell over NVSwitch and PXN paths."""
    multi = f.nodes > 1
    simple_only = algo in ("nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat")
    if simple_only and proto != "Simple":
        return False
    if algo in ("tree", "collnet_chain", "collnet_direct", "nvls_tree") and coll != "all_reduce":
        return False
    if algo in ("nvls", "nvls_tree"):
        if not f.nvls or g.channels < 2 or (algo == "nvls_tree" and not multi):
            return False
        if algo == "nvls" and multi and (not f.collnet or coll != "all_reduce"):
            return False
        return coll == "all_reduce" or f.local_ranks <= _MAX_NVLS_ARITY
    if algo.startswith("collnet"):
        return f.collnet and multi
    if algo == "pat":
        return coll != "all_reduce" and f.local_ranks == 1
    return True


def _bus_bw(coll: str, algo: str, proto: str, f: Fabric, g: Graph) -> float:
    """NCCL's bandwidth (GB/s) for one pair before the bus-to-algorithm conversion
    (tuning.cc lines 305-374)."""
    nodes, ppn, arch = f.nodes, f.local_ranks, f.arch
    col = min(nodes, 3) - 1
    bw = g.bw_intra if nodes <= 2 or algo.startswith("collnet") else g.bw_inter
    if algo in ("nvls", "nvls_tree"):
        intra = g.bw_intra * _NVLS_EFFICIENCY[arch] * (g.channels - 1) / g.channels
        intra *= 2.0 if coll == "all_reduce" else (ppn - 1) / ppn
        inter = g.bw_inter * (2 if nodes <= 2 and algo == "nvls_tree" else 1)
        bw = min(intra, inter, _PER_CH_NVLS_TREE[arch][col] if algo == "nvls_tree" else math.inf)
    bus = g.channels * bw
    ll_max = _LL_MAX_BW[arch if nodes == 1 else "cpu"][col]
    if algo == "ring" and proto == "LL":
        bus = min(ll_max, bus * 0.5)
    if algo == "ring" and proto == "LL128":
        bus = min(bus * 0.92, g.channels * _PER_CH_RING_LL128[arch][col])
    if algo == "tree":
        bus = min(bus * 0.92, g.channels * _PER_CH_TREE[arch][col])
        if proto == "LL":
            bus = min(bus / 3.8, ll_max)
        if proto == "LL128":
            bus = min(bus * (7 / 9 if nodes == 1 else 120 / 128), g.channels * _PER_CH_TREE_LL128[arch][col])
    if algo == "pat":
        bus *= 0.75
    if algo == "collnet_direct":
        factor = ppn / g.channels
        bus = bus / (factor - (factor - 1) / 2) * 0.85
    return bus


def _latency_us(coll: str, algo: str, proto: str, f: Fabric) -> float:
    """NCCL's latency (µs) of one call (tuning.cc lines 384-435): a base per algorithm and
    protocol plus a hardware latency per step over NVLink or the network."""
    p = PROTOCOLS.index(proto)
    n, nodes, ppn = f.ranks, f.nodes, f.local_ranks
    base = BASE_LATENCY_US[algo][p]
    intra = HW_LATENCY_US["nvlink"][algo][p]
    inter = HW_LATENCY_US["net"]["tree" if ppn == 1 else algo][p]
    nsteps = 2 * (n - 1) if coll == "all_reduce" else n - 1
    log2 = int(math.log2(nodes))
    if algo == "ring":
        if nodes > 1:
            intra = max(intra, _NET_OVERHEAD_US * (3 if proto == "Simple" else 1))
        inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if coll == "all_reduce" else nodes - 1)
        return base + (nsteps - inter_steps) * intra + inter_steps * inter
    if algo == "tree":
        return base + 2 * ((ppn - 1) * intra + log2 * inter)
    if algo == "collnet_direct":
        return base + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4) + inter
    if algo == "collnet_chain":
        return base + 2 * (ppn - 1) * intra + inter
    if algo == "nvls":
        return intra + (inter if nodes > 1 else 0.0)
    if algo == "nvls_tree":
        return base + intra + 2 * log2 * inter
    return base + log2 * (inter / 3.5) + n * 2.8  # PAT


def tuning_table(collective: str, fabric: Fabric) -> dict[tuple[str, str], tuple[float, float]]:
    """``(algorithm, protocol) -> (latency µs, bandwidth GB/s)`` of every pair NCCL prices for
    ``collective`` on ``fabric``: ``comm->latencies`` and ``comm->bandwidths`` (the bandwidth is
    an algorithm bandwidth: the bus bandwidth times ``nRanks/nsteps`` for rings, NVLS and NVLS
    tree and 1/2 for trees and CollNet, tuning.cc lines 376-382)."""
    coll = check_choice("collective", collective, COLLECTIVES[:3])
    return dict(_table(coll, _check_fabric(fabric)))


@functools.lru_cache(maxsize=1024)
def _table(coll: str, fabric: Fabric) -> dict[tuple[str, str], tuple[float, float]]:
    """:func:`tuning_table`, once per (collective, fabric); callers do not mutate it."""
    gs = _graphs(fabric)
    n = fabric.ranks
    nsteps = 2 * (n - 1) if coll == "all_reduce" else n - 1
    table: dict[tuple[str, str], tuple[float, float]] = {}
    if n == 1:  # nothing to tune (tuning.cc line 261)
        return table
    for algo in _TUNED:
        for proto in PROTOCOLS:
            if not _enabled(coll, algo, proto, fabric, gs[algo]):
                continue
            bw = _bus_bw(coll, algo, proto, fabric, gs[algo])
            if algo == "ring" or coll == "all_reduce":
                bw *= n / nsteps if algo in ("ring", "nvls", "nvls_tree") else 0.5
            if bw > 0:
                table[(algo, proto)] = (_latency_us(coll, algo, proto, fabric), bw)
    return table


def _check_fabric(fabric: object) -> Fabric:
    """``fabric`` if it is a :class:`Fabric`."""
    return check_type("fabric", fabric, Fabric, "a Fabric")


def algorithm_time(
    collective: str, algorithm: str, protocol: str, nbytes: float, fabric: Fabric
) -> float | None:
    """Seconds NCCL predicts for ``nbytes`` (the buffer nccl-tests reports: all of it for an
    all-reduce, the gathered output of an all-gather, the input of a reduce-scatter) with this
    pair, or ``None`` where NCCL does not offer it (``ncclTopoGetAlgoTime``, lines 630-656)."""
    coll = check_choice("collective", collective, COLLECTIVES[:3])
    nbytes = check_float("nbytes", nbytes, lo=0, lo_open=True)
    check_choice("algorithm", algorithm, _TUNED)
    check_choice("protocol", protocol, PROTOCOLS)
    if _check_fabric(fabric).ranks == 1:
        return 0.0
    entry = _table(coll, fabric).get((algorithm, protocol))
    if entry is None:
        return None
    lat, bw = entry
    log_size = int(math.log2(nbytes / 64)) if nbytes >= 64 else -1
    if algorithm == "tree" and coll == "all_reduce" and 0 <= log_size < 23:
        bw *= _TREE_CORRECTION[protocol][log_size]
    blackwell_x86 = fabric.arch == "blackwell" and fabric.host == "x86"
    if algorithm == "nvls_tree" and coll == "all_reduce" and 0 <= log_size < 24 and blackwell_x86:
        bw *= _TREE_CORRECTION[protocol][log_size]  # tuning.cc lines 643-645
    channels = _graphs(fabric)["ring"].channels
    plateau = nbytes / (channels * fabric.ranks) >= 64
    if algorithm == "ring" and protocol == "Simple" and fabric.nodes > 1 and coll == "all_reduce" and plateau:
        lat *= 1.4  # the ring's plateau on SM80 and later
    return lat * 1e-6 + nbytes / (1e9 * bw)


#: NCCL's NVLS chunk size, bytes (``NCCL_NVLS_CHUNKSIZE``'s default, ``src/transport/nvls.cc``
#: line 160; line 149 in v2.26.2-1).
NVLS_CHUNK_BYTES = 128 * 1024
#: Stages one chunk passes through in the all-reduce kernel of each NVLS algorithm: the warp groups
#: of ``src/device/all_reduce.h`` (``RunWorkColl<ncclFuncAllReduce, ..., NCCL_ALGO_NVLS ...>``,
#: lines 388-515 of v2.26.2-1; the same three in v2.18.5-1's ``src/collectives/device``):
#: in one NVLink domain scatter -> reduce and broadcast through the switch -> gather; across domains
#: (NVLS with the network's heads) scatter -> reduce, send out -> receive, broadcast -> gather; NVLS
#: tree (lines 521-640) scatter -> reduce, send up the tree -> the root's reduce and broadcast ->
#: receive, broadcast down -> gather.
PIPELINE_STAGES = {("nvls", 1): 3, ("nvls", 2): 4, ("nvls_tree", 1): 5, ("nvls_tree", 2): 5}


def _release(release: str) -> tuple[int, ...]:
    """``"2.18.5"`` or ``"v2.30.7-1"`` as ``(2, 18, 5)``; ``ValueError`` naming it otherwise."""
    text = check_type("release", release, str, "an NCCL release such as '2.26.2'").lstrip("v").split("-")[0]
    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError:
        raise ValueError(f"release must be an NCCL release such as '2.26.2', got {release!r}") from None


def nvls_channels(fabric: Fabric, release: str = NCCL_RELEASE) -> int:
    """The channels NCCL's NVLS kernels run on (``comm->nvlsChannels``): 16 on Hopper; on Blackwell
    32, and from 2.27 24 within one NVLink domain (``NVLS_NCHANNELS_SM90``, ``_SM100``,
    ``_SM100_NVL``: ``src/transport/nvls.cc`` lines 155-157 and 209-214 of v2.30.7-1, lines 144-145
    and 176 of v2.26.2-1; ``NCCL_NVLS_NCHANNELS`` 16 in v2.18.5-1, line 231)."""
    f = _check_fabric(fabric)
    if f.arch == "hopper":
        return 16
    return 24 if _release(release) >= (2, 27) and f.nodes == 1 else 32


def nvls_chunk(algorithm: str, nbytes: float, ops: int, nodes: int, nvls_bw: float = math.inf) -> int:
    """The chunk (bytes) ``calcCollChunking`` gives an NVLS or NVLS-tree all-reduce of ``nbytes``
    over ``ops`` concurrent operations (channels x heads): smaller for smaller calls
    (``src/enqueue.cc`` lines 2258-2289 of v2.30.7-1, the NVLS rule also in v2.18.5-1's lines
    1338-1345); an NVLS tree over 4 domains or more starts at 64 KiB (``nvlsTreeMaxChunkSize``,
    nvls.cc line 229); an NVLS over several domains whose all-reduce bandwidth ``nvls_bw`` (GB/s,
    the tuning table's) is under 150 at 32 KiB (lines 2263-2266). Every size runs on all
    :func:`nvls_channels` (enqueue.cc lines 2084-2090)."""
    check_choice("algorithm", algorithm, ("nvls", "nvls_tree"))
    if algorithm == "nvls":
        k = 32768 if nodes > 1 and nvls_bw < 150 else NVLS_CHUNK_BYTES
        rule = ((64, 65536), (8, 32768), (2, 16384))
    else:
        k = 65536 if nodes >= 4 else NVLS_CHUNK_BYTES
        rule = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))
    for times, smaller in rule:  # "if (nBytes < times * concurrentOps * chunkSize && chunkSize > smaller)"
        if nbytes < times * ops * k and k > smaller:
            k = smaller
    return k


def run_time(
    collective: str, algorithm: str, protocol: str, nbytes: float, fabric: Fabric, release: str = NCCL_RELEASE
) -> float | None:
    """Seconds the call takes as NCCL's kernels run it: :func:`algorithm_time` (what NCCL's tuning
    model predicts and picks by), plus, for NVLS and NVLS tree, the time their kernel's pipeline
    takes to fill. Their kernel moves the buffer in loops of ``channels x heads x chunk`` bytes
    (:func:`nvls_channels`, :func:`nvls_chunk`), and a chunk passes through
    :data:`PIPELINE_STAGES` stages, each a loop's time at the algorithm's bandwidth: a call of
    ``S`` bytes takes ``(S + (stages - 1) min(S, loop)) / bandwidth`` beyond its latency. NCCL's
    tuning model leaves the fill out, which is why its NVLS is fast at mid sizes: on 8 H100s at
    8 MiB a loop is 4 MiB and the fill doubles the transfer. NVLS tree's bandwidth is at most
    NVLS's in one of its domains (:func:`domain_nvls_bandwidth`). ``release``: the NCCL release
    the channel count follows. ``None`` where NCCL does not offer the pair."""
    t = algorithm_time(collective, algorithm, protocol, nbytes, fabric)
    f = fabric
    if t is None or f.ranks == 1 or collective != "all_reduce" or algorithm not in ("nvls", "nvls_tree"):
        return t
    latency = _table(collective, f)[(algorithm, protocol)][0] * 1e-6
    transfer = t - latency  # nbytes / bandwidth
    if algorithm == "nvls_tree":
        transfer = max(transfer, nbytes / (1e9 * domain_nvls_bandwidth(f)))
    ops = nvls_channels(f, release) * _graphs(f)["nvls"].channels
    nvls_bw = _table("all_reduce", f).get(("nvls", "Simple"), (0.0, math.inf))[1]
    loop = ops * nvls_chunk(algorithm, nbytes, ops, f.nodes, nvls_bw)
    stages = PIPELINE_STAGES[(algorithm, min(f.nodes, 2))]
    return latency + transfer + (stages - 1) * transfer * min(nbytes, loop) / nbytes


def domain_nvls_bandwidth(fabric: Fabric) -> float:
    """The all-reduce bandwidth (GB/s, an algorithm bandwidth) NCCL's tuning model gives NVLS in
    one NVLink domain of ``fabric``: what bounds NVLS tree across domains as its kernel runs. Inside
    each domain NVLS tree's kernel runs NVLS's own scatter and gather through the switch on the
    same buffer, with no more warps (``src/device/all_reduce.h`` of v2.26.2-1: of 20 warps, scatter
    and gather take 8 and 7 in NVLS in one domain, lines 393-396, and in NVLS tree 8 and 7 at the
    tree's root, 6 and 5 below it, lines 531-535), so a call takes at least what an NVLS all-reduce
    of the same bytes takes in one domain; the tree's traffic between domains comes on top. NCCL's
    tuning model prices NVLS tree by the network heads' graph instead, which across two NVL72
    racks puts it above one rack's NVLS (500 against 465 GB/s). ``inf`` where NVLS is off."""
    f = _check_fabric(fabric)
    entry = _table("all_reduce", replace(f, ranks=f.local_ranks)).get(("nvls", "Simple"))
    return math.inf if entry is None else entry[1]


def _pow2_up(x: int) -> int:
    """The least power of two >= ``x`` (NCCL's ``pow2Up``)."""
    return 1 << max(0, (int(x) - 1).bit_length())


def p2p_rounds(fabric: Fabric, peers: int) -> int:
    """Rounds in which NCCL's grouped sends and receives (an all-to-all: ``ncclAlltoAll`` posts a
    send and a receive to every rank in one group, enqueue.cc lines 3070-3082) reach ``peers``
    peers, one latency each. A channel serves up to :data:`P2P_PER_BATCH` peers at once and a
    peer's traffic is striped over ``p2pnChannelsPerPeer`` of the ``p2pnChannels`` channels, so
    ``p2pnChannels / p2pnChannelsPerPeer * 8`` peers run concurrently (enqueue.cc lines 1048-1056).
    ``p2pnChannels``: the communicator's channels (the ring's, doubled by ``ncclTopoPostset``,
    connect.cc line 460) to a power of two (paths.cc lines 977-991); per peer: two per NVLink of
    the path to an NVLink peer, ``max(NICs, NIC GB/s / 14)`` to a network peer
    (``ncclTopoGetNchannels``, paths.cc lines 918-953), the least over the peers, to a power of
    two; across NVLink domains NCCL halves it until every peer fits one round (lines 994-1000).
    One NVLink domain of 8 or 72 GPUs: 8 peers a round; 8 nodes of 8 H100s: all 63 in one."""
    f = _check_fabric(fabric)
    peers = check_int("peers", peers, lo=0)
    channels = _pow2_up(min(2 * _graphs(f)["ring"].channels, _MAX_CHANNELS))
    per_peer = 2 * max(1, round(f.nvlink_gbps / _NVLINK_PER_LINK[f.arch][0]))
    if f.nodes > 1:
        per_peer = _pow2_up(min(per_peer, max(1, math.ceil(f.nic_gbps / _P2P_NET_CHANNEL_GBPS))))
        while per_peer * math.ceil(f.ranks / P2P_PER_BATCH) > channels and per_peer > 1:
            per_peer //= 2
    per_peer = min(channels, _pow2_up(per_peer))
    return math.ceil(peers / (channels // per_peer * P2P_PER_BATCH))


def _all_to_all_time(algorithm: str, nbytes: float, f: Fabric) -> float | None:
    """Seconds of an all-to-all of ``nbytes`` per rank (``nbytes / ranks`` to each peer), as
    NCCL's grouped sends run it: each GPU's share for its NVLink domain over NVLink (NCCL's count
    of it), the rest over its NIC; one ring base latency, plus one step latency per round of peers
    (:func:`p2p_rounds`): NVLink's in one domain, the network's across domains. With PXN the data
    for another domain first moves over NVLink to the GPU on the destination's rail (one NVLink
    step more), whose NIC then reaches one peer per other domain."""
    if algorithm == "pxn" and f.nodes == 1:
        return None
    n, d = f.ranks, f.local_ranks
    simple = PROTOCOLS.index("Simple")
    hop = HW_LATENCY_US["nvlink"]["ring"][simple]
    net = HW_LATENCY_US["net"]["ring"][simple]
    remote = n - d
    if f.nodes == 1:
        steps = p2p_rounds(f, n - 1) * hop
    elif algorithm == "pxn":
        steps = hop + p2p_rounds(f, f.nodes - 1) * net
    else:
        steps = p2p_rounds(f, n - 1) * net
    lat = BASE_LATENCY_US["ring"][simple] + steps
    ring = _graphs(f)["ring"]
    inside = nbytes * (d - 1) / n / (ring.channels * ring.bw_intra * 1e9)
    across = nbytes * remote / n / f.nic_bw if remote else 0.0
    return lat * 1e-6 + max(inside, across)


@dataclass(frozen=True)
class Choice:
    """The pair NCCL's model picks for one call, its predicted ``seconds`` and why, and
    ``run_seconds``: the call as NCCL's kernels run it (:func:`run_time`; ``seconds`` unless the
    pair is NVLS or NVLS tree), what a step spends."""

    collective: str
    nbytes: float
    ranks: int
    algorithm: str
    protocol: str
    seconds: float
    reason: str
    run_seconds: float

    @property
    def bus_bandwidth(self) -> float:
        """nccl-tests' bus bandwidth of this call, bytes/s (:func:`bus_bandwidth`)."""
        return bus_bandwidth(self.collective, self.nbytes, self.seconds, self.ranks)


def bus_bandwidth(collective: str, nbytes: float, seconds: float, ranks: int) -> float:
    """nccl-tests' bus bandwidth (bytes/s): the algorithm bandwidth ``nbytes / seconds`` times
    ``2(n-1)/n`` for an all-reduce and ``(n-1)/n`` for the others
    (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md)."""
    coll = check_choice("collective", collective, COLLECTIVES)
    nbytes = check_float("nbytes", nbytes, lo=0, lo_open=True)
    seconds = check_float("seconds", seconds, lo=0, lo_open=True)
    n = check_int("ranks", ranks, lo=1)
    factor = 2 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n
    return nbytes / seconds * factor


def candidates(collective: str, nbytes: float, fabric: Fabric) -> dict[tuple[str, str], float]:
    """``(algorithm, protocol) -> seconds`` of every pair NCCL would consider for this call."""
    coll = check_choice("collective", collective, COLLECTIVES)
    nbytes = check_float("nbytes", nbytes, lo=0, lo_open=True)
    _check_fabric(fabric)
    out: dict[tuple[str, str], float] = {}
    if coll == "all_to_all":
        for algo in _A2A:
            t = _all_to_all_time(algo, nbytes, fabric)
            if t is not None:
                out[(algo, "Simple")] = t
        return out
    for algo, proto in tuning_table(coll, fabric):
        t = algorithm_time(coll, algo, proto, nbytes, fabric)
        if t is not None:
            out[(algo, proto)] = t
    return out


def choose(collective: str, nbytes: float, fabric: Fabric, algorithm: str | None = None) -> Choice:
    """NCCL's pick for ``collective`` of ``nbytes`` on ``fabric``: the (algorithm, protocol) of
    lowest predicted time, or the fastest protocol of ``algorithm`` when one is forced (as
    ``NCCL_ALGO`` does). The :class:`Choice` says why, in words."""
    coll = check_choice("collective", collective, COLLECTIVES)
    allowed = _A2A if coll == "all_to_all" else _TUNED
    if algorithm is not None:
        check_choice("algorithm", algorithm, allowed)
    table = candidates(coll, nbytes, fabric)
    if fabric.ranks == 1:
        return Choice(coll, float(nbytes), 1, "none", "none", 0.0, "one rank: nothing to communicate", 0.0)
    pool = {k: t for k, t in table.items() if algorithm is None or k[0] == algorithm}
    if not pool:
        offered = sorted({a for a, _ in table})
        raise ValueError(
            f"algorithm must be one NCCL offers for {coll} on this fabric {offered}, got {algorithm!r}"
        )
    (algo, proto), t = min(pool.items(), key=lambda kv: kv[1])
    run = t if coll == "all_to_all" else run_time(coll, algo, proto, nbytes, fabric)
    why = _reason(coll, nbytes, fabric, table, (algo, proto), algorithm)
    if run is not None and run > t * 1.005:
        bound = algo == "nvls_tree" and domain_nvls_bandwidth(fabric) < _table(coll, fabric)[(algo, proto)][1]
        at = ", no faster than one NVLink domain's NVLS" if bound else ""
        why += f"; runs in {run * 1e6:.1f} us with its pipeline's fill{at} (run_time)"
    return Choice(coll, nbytes, fabric.ranks, algo, proto, t, why, t if run is None else run)


def _reason(
    coll: str,
    nbytes: float,
    f: Fabric,
    table: dict[tuple[str, str], float],
    best: tuple[str, str],
    forced: str | None,
) -> str:
    """Words for a choice: the call, the fabric, the winner and its runner-up, and whether the
    call is latency- or bandwidth-bound (the share of the predicted time that is latency)."""
    t = table[best]
    where = (
        f"{f.ranks} ranks in one NVLink domain of {f.domain_size} (nodes of {f.node_size})"
        if f.nodes == 1
        else f"{f.ranks} ranks: {f.nodes} NVLink domains of {f.local_ranks} over the network"
    )
    rest = sorted((v, k) for k, v in table.items() if k != best)
    runner = f"; next {rest[0][1][0]}/{rest[0][1][1]} at {rest[0][0] * 1e6:.1f} us" if rest else ""
    how = "forced" if forced else f"fastest of {len(table)} algorithm/protocol pairs NCCL offers"
    lat = min(t, _latency_of(coll, best, f))
    bound = "latency-bound" if lat > t / 2 else "bandwidth-bound"
    return (
        f"{coll} of {format_bytes(nbytes)} on {where}: {best[0]}/{best[1]} predicted {t * 1e6:.1f} us, "
        f"{how}{runner}; {bound} ({lat / t:.0%} of it latency)"
    )


def _latency_of(coll: str, pair: tuple[str, str], f: Fabric) -> float:
    """Seconds of the latency term of ``pair`` (an all-to-all's: its time for one byte)."""
    if coll == "all_to_all":
        return _all_to_all_time(pair[0], 1.0, f) or 0.0
    return _table(coll, f)[pair][0] * 1e-6


def all_reduce(nbytes: float, fabric: Fabric, algorithm: str | None = None) -> Choice:
    """An all-reduce of ``nbytes`` per rank, as NCCL picks (or runs ``algorithm``)."""
    return choose("all_reduce", nbytes, fabric, algorithm)


def reduce_scatter(nbytes: float, fabric: Fabric, algorithm: str | None = None) -> Choice:
    """A reduce-scatter of ``nbytes`` of input per rank (``nbytes / ranks`` out)."""
    return choose("reduce_scatter", nbytes, fabric, algorithm)


def all_gather(nbytes: float, fabric: Fabric, algorithm: str | None = None) -> Choice:
    """An all-gather into ``nbytes`` per rank (``nbytes / ranks`` in)."""
    return choose("all_gather", nbytes, fabric, algorithm)


def all_to_all(nbytes: float, fabric: Fabric, algorithm: str | None = None) -> Choice:
    """An all-to-all of ``nbytes`` per rank (``nbytes / ranks`` to each rank)."""
    return choose("all_to_all", nbytes, fabric, algorithm)
