"""HugeCTR's hierarchical exchange across nodes and its hier_auto plan, checked by hand and
against NVIDIA's own planner (every number modeled)."""

from __future__ import annotations

import pytest

from recnotebooks.config import DLRMConfig, TableConfig, preset
from recnotebooks.perf import traffic
from recnotebooks.perf.components.collectives import hierarchical_all_to_all_seconds
from recnotebooks.perf.hardware import Hardware, hardware
from recnotebooks.perf.mlperf_plan import hier_auto_nodes, mlperf_plan
from recnotebooks.plan import Plan, combine, row_wise, table_wise


def _toy() -> DLRMConfig:
    tables = (TableConfig("a", 100, pooling_factor=2.0), TableConfig("b", 50, pooling_factor=1.0))
    return DLRMConfig(num_dense=1, tables=tables, embedding_dim=4, bottom_mlp=(4,), top_mlp=(1,))


def test_hierarchical_bytes_of_a_two_node_toy_by_hand() -> None:
    # 2 nodes of 2 GPUs; table a row-wise over node 0 (ranks 0, 1), b whole on rank 2; 3 samples a
    # rank (12 in all, 6 a rail), dim 4, fp32 (4 bytes).
    plan = combine(row_wise(["a"], 4, ranks=[0, 1]), table_wise(["b"], 4, ranks=[2]))
    rows = traffic.hierarchical_bytes(_toy(), plan, 3, gpus=2, dtype="fp32")
    got = [(r["nvlink_sent"], r["nvlink_received"], r["network_sent"], r["network_received"]) for r in rows]
    # NVLink: a rank sends its 4 columns for the other rail's 6 samples: 1 * 6 * 4 * 4 = 96 bytes;
    # rank 3 holds nothing, rank 2 hears from it nothing. Network: node 0 sends a once (its two
    # partial sums reduced), node 1 sends b: 1 * 3 * 4 * 4 = 48 bytes each way on every rail.
    assert got == [(96, 96, 48, 48), (96, 96, 48, 48), (96, 0, 48, 48), (0, 96, 48, 48)]


def test_one_node_hierarchy_is_the_plain_all_to_all() -> None:
    cfg = _toy()
    plan = combine(row_wise(["a"], 2), table_wise(["b"], 2, ranks=[1]))
    hier = traffic.hierarchical_bytes(cfg, plan, 5, gpus=2, dtype="fp32")
    flat = [
        r
        for r in traffic.collective_bytes(cfg, plan, 5, dtype="fp32")
        if r["collective"] == "pooled_all_to_all"
    ]
    assert [(h["nvlink_sent"], h["nvlink_received"]) for h in hier] == [
        (f["bytes_sent"], f["bytes_received"]) for f in flat
    ]
    assert all(h["network_sent"] == h["network_received"] == 0 for h in hier)


def test_hierarchical_bytes_refuses_a_partial_node() -> None:
    plan = row_wise(["a", "b"], 4)
    with pytest.raises(ValueError, match="gpus must divide plan.world_size=4"):
        traffic.hierarchical_bytes(_toy(), plan, 3, gpus=3)


def test_hierarchical_seconds_are_its_two_phases() -> None:
    # the α-β formula (a GPU the NCCL model does not cover: DGX H100's numbers under another name);
    # NCCL's network phase: tests/test_collectives_nccl.py
    hw = hardware("dgx_h100").replace(name="h100_alpha_beta")
    nic = hw.nic_bw / 8
    s = hierarchical_all_to_all_seconds(4.5e6, 1e6, 2, hw, nic, calls=2)
    assert s == pytest.approx(2 * (4.5e6 / hw.intra_node_bw + 1e6 / nic + 2 * hw.collective_latency_s))
    assert hierarchical_all_to_all_seconds(4.5e6, 0.0, 1, hw, nic, calls=1) == pytest.approx(
        4.5e6 / hw.intra_node_bw + hw.collective_latency_s
    )


#: What NVIDIA's planner prints for MLPerf's tables (0-based table ids per node), run as its
#: multi-node configs run it (training_results_v3.1 NVIDIA/benchmarks/dlrm_dcnv2/implementations/
#: hugectr: sharding.generate_plan with hier_auto, MEM_COMM_BW_RATIO=67, DP_SHARDING_THRESHOLD=0.0125,
#: train.py's TABLE_SIZE_ARRAY and MULTI_HOT_SIZES), 2026-12-03.
HUGECTR_PLANS = {
    2: [[20, 9, 23, 0, 2], [21, 19, 22, 11, 4, 10, 1]],
    8: [[21], [20, 10], [20, 1], [20, 0], [11, 9], [19, 23], [22, 4], [20, 2]],
    16: [[20], [20], [20], [20], [22], [21], [19], [21], [2], [10], [1], [9], [4], [0], [23], [11]],
}
HUGECTR_DP = [3, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17, 18, 24, 25]


@pytest.mark.parametrize("nodes", sorted(HUGECTR_PLANS))
def test_hier_auto_places_tables_as_nvidias_planner(nodes: int) -> None:
    cfg = preset("mlperf_dcnv2")
    index = {t.name: i for i, t in enumerate(cfg.tables)}
    per_node, dp = hier_auto_nodes(cfg, nodes)
    assert [[index[n] for n in node] for node in per_node] == HUGECTR_PLANS[nodes]
    assert sorted(index[n] for n in dp) == HUGECTR_DP


def test_mlperf_plan_on_nodes_splits_each_nodes_tables_over_its_gpus() -> None:
    cfg = preset("mlperf_dcnv2")
    plan = mlperf_plan(cfg, 8, 16)
    c21 = sorted(s.rank for s in plan.shards if s.table == cfg.tables[20].name)
    assert c21 == list(range(32))  # four nodes' GPUs, as the planner splits the hottest table
    assert all(s.sharding in ("row_wise", "data_parallel") for s in plan.shards)


@pytest.mark.parametrize(
    "args, match",
    [(("mlperf_dcnv2", 2), "config"), ((None, 0), "nodes"), ((None, 2, -1.0), "node_bytes"),
     ((None, 2, 1e9), "node_bytes=1e\\+09 cannot hold")],
)  # fmt: skip
def test_hier_auto_refuses_bad_input_naming_it(args: tuple, match: str) -> None:
    cfg = preset("mlperf_dcnv2")
    args = tuple(cfg if a is None else a for a in args)
    with pytest.raises((TypeError, ValueError), match=match):
        hier_auto_nodes(*args)


def _exposed_by_hand(
    cfg: DLRMConfig, plan: Plan, batch: int, gpus: int, nodes: int, hw: Hardware
) -> list[float]:
    """Each rank's network seconds, from the bytes and the formulas: the hierarchical exchange's
    network phase (2 calls), the all-reduce's cross-node ring over 1/gpus of the gradients, and
    what the ids' flat all-to-all spends on the NIC beyond its NVLink share."""
    world, local = gpus * nodes, batch / (gpus * nodes)
    nic = min(hw.nic_bw / gpus, hw.host_link_bw)
    rows = traffic.collective_bytes(cfg, plan, local, world, "fp32")
    pooled = ("pooled_all_to_all", "gradient_all_to_all")
    vol = traffic.volumes([r for r in rows if r["collective"] not in pooled], world)
    hier = traffic.hierarchical_bytes(cfg, plan, local, gpus, "fp32")
    inside = (gpus - 1) / (world - 1)
    out = []
    for r in range(world):
        network = 2 * max(hier[r]["network_sent"], hier[r]["network_received"]) / nic
        grads = vol["all_reduce"][r] * world / (2 * (world - 1))
        ring = 2 * (nodes - 1) / nodes * grads / gpus / nic
        ids = vol["all_to_all"][r]
        flat = (
            max(ids * inside / hw.intra_node_bw, ids * (1 - inside) / nic) - ids * inside / hw.intra_node_bw
        )
        out.append(network + ring + flat)
    return out


def test_a_hugectr_step_on_two_nodes_waits_for_its_network_share() -> None:
    from recnotebooks.perf import estimate
    from recnotebooks.perf.result import COMMUNICATION, COMPUTE

    # by hand: the α-β formulas (DGX H100's numbers under a name the NCCL model does not cover)
    cfg, hw = _toy(), hardware("dgx_h100").replace(name="h100_alpha_beta")
    plan = combine(row_wise(["a"], 4, ranks=[0, 1]), table_wise(["b"], 4, ranks=[2]))
    args = dict(batch_size=65536, gpus=2, nodes=2, plan=plan, dtype="fp32")
    r = estimate(cfg, hw, implementation="hugectr", **args)
    assert r.exposed_communication == pytest.approx(_exposed_by_hand(cfg, plan, 65536, 2, 2, hw), rel=1e-9)
    assert all(e > 0 for e in r.exposed_communication)
    nccl = estimate(cfg, "dgx_h100", implementation="hugectr", **args)  # NCCL's picks: a network share too
    assert all(
        0 < e < sum(c.values()) for e, c in zip(nccl.exposed_communication, nccl.per_rank, strict=True)
    )
    step = max(
        max(
            sum(c[k] for k in COMPUTE) + c["overhead"],
            sum(c[k] for k in COMMUNICATION) - e,
            c["data_loading"],
        )
        + e
        for c, e in zip(r.per_rank, r.exposed_communication, strict=True)
    )
    assert r.step_time_overlap == pytest.approx(step) and r.step_time_overlap <= r.step_time
    # TorchRec's pipeline hides it (nothing exposed), as does one node of HugeCTR
    assert not any(estimate(cfg, hw, implementation="torchrec", **args).exposed_communication)
    one = estimate(cfg, hw, batch_size=65536, gpus=4, plan=plan, dtype="fp32", implementation="hugectr")
    assert not any(one.exposed_communication)


def test_a_hugectr_step_on_a_pcie_node_waits_for_all_its_collectives() -> None:
    from recnotebooks.perf import estimate
    from recnotebooks.perf.components.collectives import peers_over_pcie

    cfg, plan = _toy(), combine(row_wise(["a"], 4), table_wise(["b"], 4, ranks=[2]))
    pcie, nvlink = hardware("h100_pcie_node"), hardware("dgx_h100")
    assert (
        peers_over_pcie(pcie)
        and not peers_over_pcie(nvlink)
        and not peers_over_pcie(hardware("this_machine"))
    )
    args = dict(batch_size=65536, gpus=4, plan=plan, dtype="fp32")
    r = estimate(cfg, pcie, implementation="hugectr", **args)
    assert r.exposed_communication == pytest.approx([c["all_to_all"] + c["all_reduce"] for c in r.per_rank])
    assert all(e > 0 for e in r.exposed_communication)
    # NVLink: hidden; TorchRec's pipeline: hidden
    assert not any(estimate(cfg, nvlink, implementation="hugectr", **args).exposed_communication)
    assert not any(estimate(cfg, pcie, implementation="torchrec", **args).exposed_communication)
