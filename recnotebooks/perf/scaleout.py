"""Scale-out, modeled: the same model on 1 → 8 GPUs in a node → many nodes, over three links.

The seed paper's scale-out finding (Acun et al., HPCA 2021, §V): with more GPUs each step's
compute shrinks or stays (weak scaling keeps the per-GPU batch), while the all-to-all of pooled
embeddings — every sample's vectors leave the GPU that owns the table — grows its share of the
step, and far more so when it has to cross the network than when it stays on NVLink. This module
sweeps device counts and the link between GPUs and returns tidy rows for a chart:

* ``"nvlink"``: GPUs of a node talk over NVLink (the preset's ``intra_node_bw``), nodes over their
  NICs (``nic_bw``).
* ``"pcie"``: the same servers with GPUs that talk through PCIe (``intra_node_bw`` set to the
  preset's ``host_link_bw``, the PCIe x16 figure of its datasheet) — a server without NVLink.
  One node only: beyond it a PCIe GPU's peer and network traffic share the same x16 link, which
  the model's collectives (separate NVLink and NIC paths, the slower one bounding) do not split,
  so those rows are left out rather than drawn too fast.
* ``"network"``: one GPU per node, each with its own NIC (the node's ``nic_bw`` shared out over
  its ``devices``, as on a DGX with one NIC per GPU), so every byte of every collective crosses
  the network.

Everything here is **modeled** (:func:`recnotebooks.perf.cost.estimate`; rows carry
``source="modeled"``).
"""

from __future__ import annotations

from collections.abc import Sequence

from recnotebooks.plan import MAX_RANKS

from ..checks import check_choice, check_int, check_int_list
from ..config import DLRMConfig
from .access import expected_unique
from .components import all_reduce_seconds, nic_per_device
from .cost import COMMUNICATION, CostResult, estimate
from .hardware import Hardware, hardware
from .planner import STRATEGIES, plan_tables

__all__ = ["LINKS", "link_hardware", "scale_out"]

LINKS = ("nvlink", "pcie", "network")


def link_hardware(hw: Hardware | str, link: str) -> Hardware:
    """``hw`` with its GPUs joined by ``link`` (``"pcie"``: NVLink replaced by the PCIe link;
    ``"network"``: a node using one GPU and that GPU's share of the NICs)."""
    hw = hardware(hw)
    check_choice("link", link, LINKS)
    if link == "pcie" and hw.kind == "gpu":
        return hw.replace(name=f"{hw.name} (PCIe)", intra_node_bw=hw.host_link_bw)
    if link == "network" and hw.kind == "gpu":
        return hw.replace(name=f"{hw.name} (1 GPU per node)", nic_bw=hw.nic_bw / hw.devices)
    return hw


def _layout(devices: int, per_node: int, link: str) -> tuple[int, int]:
    """(GPUs per node, nodes) for ``devices`` devices joined by ``link``."""
    if link == "network":
        return 1, devices
    if devices <= per_node:
        return devices, 1
    if devices % per_node:
        raise ValueError(
            f"devices must be <= {per_node} or a multiple of {per_node} (a node's devices), got {devices}"
        )
    return per_node, devices // per_node


def _row(r: CostResult, devices: int, link: str, single: float, gpus: int, nodes: int) -> dict[str, object]:
    b = r.breakdown()
    step = sum(b.values()) or 1.0
    return {
        "devices": devices,
        "link": link,
        "gpus_per_node": gpus,
        "nodes": nodes,
        "samples_per_s": r.throughput,
        "step_ms": r.step_time * 1e3,
        "all_to_all_ms": b["all_to_all"] * 1e3,
        "all_reduce_ms": b["all_reduce"] * 1e3,
        "all_to_all_share": b["all_to_all"] / step,
        "communication_share": sum(b[c] for c in COMMUNICATION) / step,
        "scaling_efficiency": r.throughput / (devices * single) if single > 0 else float("nan"),
        "bound_by": max(b, key=b.get),
        "fits": r.fits,
        "hardware": r.hardware,
        "source": "modeled",
    }


def scale_out(
    config: DLRMConfig,
    hw: Hardware | str = "dgx_h100",
    *,
    batch_per_device: int = 4096,
    devices: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    links: Sequence[str] = LINKS,
    dtype: str = "fp32",
    strategy: str = "cost",
) -> list[dict[str, object]]:
    """Modeled rows ``{devices, link, samples_per_s, step_ms, all_to_all_ms, all_to_all_share,
    scaling_efficiency, bound_by, fits, ...}`` for weak scaling (``batch_per_device`` samples per
    device, so the global batch grows with the devices), one row per device count and link.

    ``scaling_efficiency`` is samples/s over ``devices`` times one device's samples/s (1.0: linear).
    Each device count gets the planner's ``strategy`` plan (:func:`recnotebooks.perf.planner.plan_tables`;
    default the cost-based one, which balances modeled work, not bytes); ``fits`` says whether it
    fits in memory (a model too big for one device still gets numbers, with ``fits=False``).
    """
    if not isinstance(config, DLRMConfig):
        raise TypeError(f"config must be a DLRMConfig, got {type(config).__name__}")
    base = hardware(hw)
    if base.kind != "gpu":
        raise ValueError(
            f"hw must be a GPU preset (scale-out over GPU links), got {base.name!r} ({base.kind})"
        )
    b = check_int("batch_per_device", batch_per_device, lo=1, hi=2**24)
    counts = check_int_list("devices", list(devices), lo=1, hi=MAX_RANKS, min_len=1)
    chosen = [check_choice("link", x, LINKS) for x in links]
    if not chosen:
        raise ValueError("links must name at least one of " + ", ".join(LINKS))
    check_choice("strategy", strategy, STRATEGIES)
    single = estimate(config, base, batch_size=b, dtype=dtype).throughput
    rows = []
    for link in chosen:
        lhw = link_hardware(base, link)
        for n in counts:
            if link == "pcie" and n > base.devices:
                continue  # see the module docstring
            gpus, nodes = _layout(n, base.devices, link)
            plan = plan_tables(config, lhw, n, strategy=strategy, batch_size=b * n, dtype=dtype)
            r = estimate(config, lhw, batch_size=b * n, gpus=gpus, nodes=nodes, dtype=dtype, plan=plan)
            rows.append(_row(r, n, link, single, gpus, nodes))
    return rows


def compare_strategies(
    config: DLRMConfig,
    hw: Hardware | str = "dgx_h100",
    *,
    devices: int = 8,
    batch_per_device: int = 4096,
    strategies: Sequence[str] = ("naive", "greedy", "cost"),
    dtype: str = "fp32",
) -> list[dict[str, object]]:
    """One modeled row per planner strategy (:func:`recnotebooks.perf.planner.plan_tables`) for
    ``devices`` GPUs of ``hw`` (one node, or whole nodes): samples/s, step, all-to-all, what bounds
    the step, whether the plan fits, and the load imbalance of its embedding work (slowest rank's
    embedding seconds over the mean rank's)."""
    base = hardware(hw)
    n = check_int("devices", devices, lo=1, hi=MAX_RANKS)
    b = check_int("batch_per_device", batch_per_device, lo=1, hi=2**24)
    gpus, nodes = _layout(n, base.devices, "nvlink")
    rows = []
    for s in strategies:
        check_choice("strategy", s, STRATEGIES)
        plan = plan_tables(config, base, n, strategy=s, batch_size=b * n, dtype=dtype)
        r = estimate(config, base, batch_size=b * n, gpus=gpus, nodes=nodes, plan=plan, dtype=dtype)
        emb = [c["embedding_forward"] + c["embedding_backward"] for c in r.per_rank]
        mean = sum(emb) / len(emb)
        rows.append(
            {
                **_row(r, n, "nvlink", 0.0, gpus, nodes),
                "strategy": s,
                "imbalance": max(emb) / mean if mean > 0 else 1.0,
            }
        )
        rows[-1].pop("scaling_efficiency")
    return rows


__all__ += ["compare_strategies"]


def _replica_sync_bytes(
    config: DLRMConfig, group_batch: float, group_size: int, sync: str = "touched"
) -> float:
    """Bytes of embedding gradients one rank of a 2D group of ``group_size`` syncs with its replicas
    each step (:func:`two_d`): its share of the rows the group's ``group_batch`` samples touched
    (``sync="touched"``: expected distinct rows of a Zipf(1.05) stream,
    :func:`recnotebooks.perf.access.expected_unique`, each row's fp32 values and its 8-byte id), or
    of every row of every table (``"dense"``)."""
    per_rank = 0.0
    for t in config.tables:
        rows_sent = (
            t.num_rows if sync == "dense" else expected_unique(group_batch * t.pooling_factor, t.num_rows)
        )
        per_rank += rows_sent * (config.embedding_dim * 4 + (8 if sync == "touched" else 0)) / group_size
    return per_rank


def two_d(
    config: DLRMConfig,
    hw: Hardware | str = "dgx_h100",
    *,
    devices: int = 64,
    group_sizes: Sequence[int] = (64, 32, 16, 8),
    batch_per_device: int = 4096,
    sync: str = "touched",
    dtype: str = "fp32",
) -> list[dict[str, object]]:
    """2D sparse parallelism at scale, **modeled**: ``devices`` GPUs as ``G = devices / M`` groups of
    ``M`` (one row per ``M`` of ``group_sizes``). Inside a group the planner's cost-based plan shards
    the tables over its ``M`` GPUs, so the all-to-all stays inside the group (inside a node when
    ``M`` is a node's GPUs); the ``G`` groups are replicas, and each rank all-reduces its shards'
    embedding gradients with its ``G - 1`` replicas over the network once a step. ``sync``:
    ``"touched"`` sends the rows the group's batch touched (expected distinct rows of a Zipf(1.05)
    stream, :func:`recnotebooks.perf.access.expected_unique`, each row's fp32 values and its id);
    ``"dense"`` every row of every shard, as :mod:`recnotebooks.distributed.twod` does on local processes
    (exact and simple, affordable only for small tables). ``M = devices`` is plain model
    parallelism over every GPU. Rows: ``group_size``, ``groups``, ``all_to_all_ms``,
    ``replica_sync_ms``, ``rest_ms`` (the rest of the group's slowest step), ``step_ms``,
    ``samples_per_s``, ``source="modeled"``."""

    base = hardware(hw)
    n = check_int("devices", devices, lo=1, hi=MAX_RANKS)
    b = check_int("batch_per_device", batch_per_device, lo=1, hi=2**24)
    check_choice("sync", sync, ("touched", "dense"))
    sizes = check_int_list("group_sizes", list(group_sizes), lo=1, hi=n, min_len=1)
    rows = []
    for m in sizes:
        if n % m:
            raise ValueError(f"group_sizes must divide devices={n}, got {m}")
        g = n // m
        gpus, nodes = _layout(m, base.devices, "nvlink")
        plan = plan_tables(config, base, m, strategy="cost", batch_size=b * m, dtype=dtype)
        r = estimate(config, base, batch_size=b * m, gpus=gpus, nodes=nodes, plan=plan, dtype=dtype)
        bd = r.breakdown()
        per_rank = _replica_sync_bytes(config, b * m, m, sync)
        nic = nic_per_device(base, base.devices)  # every GPU of a node syncs at once
        sync_s = all_reduce_seconds(2 * per_rank * (g - 1) / g, g, 1, base, nic) if g > 1 else 0.0
        step = sum(bd.values()) + sync_s
        rows.append(
            {
                "devices": n,
                "group_size": m,
                "groups": g,
                "layout": f"{g} x {m} GPUs",
                "all_to_all_ms": bd["all_to_all"] * 1e3,
                "replica_sync_ms": sync_s * 1e3,
                "rest_ms": (sum(bd.values()) - bd["all_to_all"]) * 1e3,
                "step_ms": step * 1e3,
                "samples_per_s": b * n / step,
                "sync": sync,
                "fits": r.fits,
                "source": "modeled",
            }
        )
    return rows


__all__ += ["two_d"]


#: The two ways :func:`rack_or_nodes` lays out 64 Blackwell GPUs: one NVL72 rack's 16 trays of 4 in
#: one NVLink domain, and eight 8-GPU DGX B200 nodes joined by InfiniBand (one 400 Gb/s NIC a GPU).
RACK_OR_NODES = (("NVL72 rack, 16 x 4", "gb200_nvl72", 4, 16), ("DGX B200, 8 x 8", "dgx_b200", 8, 8))


def rack_or_nodes(
    config: DLRMConfig,
    *,
    batch_per_device: int = 4096,
    layouts: Sequence[tuple[str, str, int, int]] = RACK_OR_NODES,
) -> list[dict[str, object]]:
    """The same number of GPUs laid out as one NVLink domain and as nodes over a network, **modeled**:
    for each ``(label, hardware, gpus per node, nodes)`` of ``layouts`` the step of ``config``
    (the cost planner's plan, ``batch_per_device`` samples a GPU), its all-to-all and all-reduce,
    the share of each GPU's peers it reaches over NVLink, and the algorithm and protocol NCCL's model
    picks for each collective, with its reason. Rows: ``layout``, ``hardware``, ``devices``,
    ``step_ms``, ``all_to_all_ms``, ``all_reduce_ms``, ``rest_ms``, ``nvlink_peers``,
    ``all_to_all_algorithm``, ``all_reduce_algorithm``, ``all_to_all_reason``, ``all_reduce_reason``,
    ``samples_per_s``, ``source="modeled"``."""
    b = check_int("batch_per_device", batch_per_device, lo=1, hi=2**24)
    rows = []
    for label, name, gpus, nodes in layouts:
        hw = hardware(name)
        n = gpus * nodes
        plan = plan_tables(config, hw, n, strategy="cost", batch_size=b * n)
        r = estimate(config, hw, batch_size=b * n, gpus=gpus, nodes=nodes, plan=plan)
        bd, picks = r.breakdown(), r.collective_choices()
        domain = hw.domain_size if hw.nvlink_domain else gpus
        a2a, ar = picks.get("all_to_all", {}), picks.get("all_reduce", {})
        rows.append({
            "layout": label, "hardware": name, "devices": n, "step_ms": r.step_time * 1e3,
            "all_to_all_ms": bd["all_to_all"] * 1e3, "all_reduce_ms": bd["all_reduce"] * 1e3,
            "rest_ms": (sum(bd.values()) - bd["all_to_all"] - bd["all_reduce"]) * 1e3,
            "nvlink_peers": (min(domain, n) - 1) / (n - 1) if n > 1 else 1.0,
            "all_to_all_algorithm": f"{a2a.get('algorithm', a2a.get('how', '-'))}",
            "all_reduce_algorithm": f"{ar.get('algorithm', ar.get('how', '-'))}/{ar.get('protocol', '-')}",
            "all_to_all_reason": str(a2a.get("reason", "")), "all_reduce_reason": str(ar.get("reason", "")),
            "samples_per_s": b * n / r.step_time, "source": "modeled",
        })  # fmt: skip
    return rows


__all__ += ["RACK_OR_NODES", "rack_or_nodes"]
