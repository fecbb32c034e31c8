"""Notebook 04's take-aways, asserted on the numbers the notebook computes."""

from __future__ import annotations

import pytest

from recnotebooks.config import preset
from recnotebooks.perf.scaleout import compare_strategies, rack_or_nodes, scale_out


@pytest.fixture(scope="module")
def scaling() -> list[dict]:
    return scale_out(preset("criteo_terabyte"), "dgx_h100", devices=(1, 2, 4, 8, 16, 32, 64))


def _at(rows: list[dict], link: str, n: int) -> dict:
    return next(r for r in rows if r["link"] == link and r["devices"] == n)


def test_a_plan_balanced_by_bytes_is_not_balanced_by_work() -> None:
    rows = {r["strategy"]: r for r in compare_strategies(preset("criteo_terabyte"), "dgx_h100", devices=16)}
    assert rows["greedy"]["imbalance"] >= 3  # "several times the mean lookups"
    assert rows["cost"]["imbalance"] < 1.5 and rows["naive"]["imbalance"] < 1.5  # "spreads the lookups"
    assert rows["cost"]["samples_per_s"] > rows["greedy"]["samples_per_s"]


def test_all_to_all_share_grows_with_gpus_and_is_largest_over_the_network(scaling: list[dict]) -> None:
    for link in ("nvlink", "network"):
        shares = [_at(scaling, link, n)["all_to_all_share"] for n in (1, 2, 4, 8, 16)]
        assert shares == sorted(shares)
    for n in (2, 4, 8):
        assert _at(scaling, "nvlink", n)["all_to_all_share"] < _at(scaling, "pcie", n)["all_to_all_share"]
        assert _at(scaling, "pcie", n)["all_to_all_share"] <= _at(scaling, "network", n)["all_to_all_share"]
    for n in (16, 32):
        assert _at(scaling, "nvlink", n)["all_to_all_share"] < _at(scaling, "network", n)["all_to_all_share"]


def test_past_26_gpus_throughput_falls_although_gpus_were_added(scaling: list[dict]) -> None:
    assert len(preset("criteo_terabyte").tables) == 26
    for link in ("nvlink", "network"):
        assert _at(scaling, link, 32)["samples_per_s"] < _at(scaling, link, 16)["samples_per_s"]


def test_the_pcie_line_stops_at_one_node_and_the_chart_says_why(scaling: list[dict]) -> None:
    """04 §5: "The PCIe line stops at 8 GPUs, one node: past it a GPU's traffic to its peers and to
    the network would share the same PCIe x16 link, which the model does not split"."""
    import json

    from recnotebooks.perf.hardware import hardware
    from recnotebooks.viz.scaleout import PCIE_ONE_NODE, scale_out_chart

    devices = {
        link: [r["devices"] for r in scaling if r["link"] == link] for link in ("nvlink", "pcie", "network")
    }
    assert max(devices["pcie"]) == 8 == hardware("dgx_h100").devices  # one node
    assert max(devices["nvlink"]) == max(devices["network"]) == 64
    # the model prices PCIe peer traffic on the node's link and network traffic on its NICs apart
    pcie = next(r for r in scaling if r["link"] == "pcie" and r["devices"] == 8)
    assert pcie["nodes"] == 1 and pcie["gpus_per_node"] == 8
    subtitle = json.dumps(scale_out_chart(scaling).to_dict())
    assert (
        "PCIe stops at one node" in subtitle and "x16 link" in subtitle and "does not split" in PCIE_ONE_NODE
    )
    nvlink_only = [r for r in scaling if r["link"] != "pcie"]
    assert "PCIe stops" not in json.dumps(scale_out_chart(nvlink_only).to_dict())


def test_2d_keeps_the_all_to_all_inside_a_node_and_pays_a_replica_sync() -> None:
    from recnotebooks.perf.scaleout import two_d

    touched = {r["group_size"]: r for r in two_d(preset("criteo_terabyte"), "dgx_h100", sync="touched")}
    dense = {r["group_size"]: r for r in two_d(preset("criteo_terabyte"), "dgx_h100", sync="dense")}
    assert {r["source"] for r in touched.values()} == {"modeled"}
    assert touched[64]["replica_sync_ms"] == 0 and touched[64]["groups"] == 1
    # one group of 64 is plain model parallelism: the same step as the scale-out's 64 GPUs
    plain = scale_out(preset("criteo_terabyte"), "dgx_h100", devices=(64,), links=("nvlink",))[0]
    assert touched[64]["samples_per_s"] == pytest.approx(plain["samples_per_s"], rel=1e-9)
    a2a = [touched[m]["all_to_all_ms"] for m in (64, 32, 16, 8)]
    assert a2a == sorted(a2a, reverse=True)  # smaller groups, a cheaper all-to-all
    assert touched[8]["samples_per_s"] > 5 * touched[64]["samples_per_s"]  # "several times"
    for m in (32, 16, 8):  # syncing every row costs more than syncing the touched rows
        assert dense[m]["replica_sync_ms"] > touched[m]["replica_sync_ms"]
    assert dense[8]["samples_per_s"] < touched[8]["samples_per_s"] / 5


def test_a_hand_written_plan_runs_and_every_rank_gets_all_tables_for_its_samples() -> None:
    """The "write a plan and run it" section: the hand-written shards equal the constructors', and
    each rank gets back (its samples, every table, dim), equal to one process's collection."""
    from recnotebooks.config import TableConfig
    from recnotebooks.distributed import run_plan
    from recnotebooks.plan import Plan, TableShard, combine, data_parallel, row_wise, table_wise

    tables = [TableConfig("users", 12), TableConfig("items", 8), TableConfig("ads", 6)]
    users = [TableShard("users", r, "row_wise", row_fraction=0.5) for r in (0, 1)]
    ads = [TableShard("ads", r, "data_parallel") for r in (0, 1)]
    by_hand = Plan(2, (*users, TableShard("items", 1), *ads))
    built = combine(row_wise(["users"], 2), table_wise(["items"], 2, ranks=1), data_parallel(["ads"], 2))
    assert built.shards == by_hand.shards
    run = run_plan(tables, 4, by_hand, batch_size=8)
    assert run.shapes == ((4, 3, 4), (4, 3, 4)) and run.matches
    # rank 0 holds no table-wise table: it receives pooled vectors for items from rank 1, and
    # both ranks all-reduce the replicated table's gradient
    assert {(r["collective"], r["direction"]) for r in run.bytes_by_collective() if r["rank"] == 0} == {
        ("all_to_all", "forward"),
        ("all_to_all", "backward"),
        ("all_reduce", "forward"),
    }


def test_checkpoint_takeaways() -> None:
    """04 §7: the ~1 TB model's checkpoint on 64 ranks, its write at 1/10/100 GB/s, Daly's interval,
    and the same checkpoint as the job grows to Llama 3's 16,384 GPUs."""
    import math

    from recnotebooks.perf.checkpointing import checkpoint_plan, job_checkpointing
    from recnotebooks.perf.job_planner import evaluate
    from recnotebooks.published.failures import LLAMA3_405B

    job = evaluate(model="mlperf_v1_x10", hardware="dgx_h100", nodes=8, gpus=8, epochs=10)
    mtbf = LLAMA3_405B.mtbf_per_gpu_s
    plans = {bw: job_checkpointing(job, bw, mtbf) for bw in (1e9, 1e10, 1e11)}
    p10 = plans[1e10]
    assert 0.9e12 < p10.total_bytes < 1.2e12 and p10.ranks == 64  # "~1 TB model ... on 64 H100s"
    assert p10.bytes_per_rank == p10.total_bytes / 64
    assert 25 < p10.job_mtbf_s / 86400 < 40  # "about one a month"
    # "ten times the bandwidth shrinks the best interval by about sqrt(10)"
    for slow, fast in ((1e9, 1e10), (1e10, 1e11)):
        assert plans[slow].daly_s / plans[fast].daly_s == pytest.approx(math.sqrt(10), rel=0.05)
        assert plans[fast].lost_share < plans[slow].lost_share
    assert p10.lost_share < 0.01  # "a checkpoint every few hours loses under 1%"
    assert 2 < p10.daly_s / 3600 < 10
    assert plans[1e9].checkpoints == 1 and plans[1e9].daly_s > job.job.seconds  # "shorter than the interval"
    assert abs(p10.young_s / p10.daly_s - 1) < 0.01
    big = checkpoint_plan(p10.total_bytes, 64, 1e10, mtbf, 30 * 86400, devices=16_384)
    assert 20 < big.daly_s / 60 < 30  # "every 25 minutes"
    assert 0.12 < big.lost_share < 0.16  # "still loses about 14%"
    assert big.job_mtbf_s / 3600 == pytest.approx(LLAMA3_405B.job_mtbf_s / 3600)  # Llama 3's 3.1 hours


def test_one_rack_or_eight_nodes_takeaways() -> None:
    """04 §7: "the step is about five times shorter" on the rack; "7 of a GPU's 63 peers share its
    node"; "the all-to-all takes most of the step" across nodes; the all-reduce by NVLink SHARP on
    the rack and by a tree with LL128 across the nodes; every peer over NVLink on the rack."""
    rack, nodes = rack_or_nodes(preset("criteo_terabyte"))
    assert (rack["hardware"], nodes["hardware"], rack["devices"], nodes["devices"]) == (
        "gb200_nvl72", "dgx_b200", 64, 64,
    )  # fmt: skip
    assert rack["nvlink_peers"] == 1.0 and nodes["nvlink_peers"] == pytest.approx(7 / 63)
    assert 4.5 <= nodes["step_ms"] / rack["step_ms"] <= 5.5  # "about five times shorter"
    assert nodes["all_to_all_ms"] > nodes["step_ms"] / 2  # "takes most of the step"
    assert rack["all_to_all_ms"] < rack["step_ms"] / 2
    assert rack["all_reduce_algorithm"] == "nvls/Simple" and nodes["all_reduce_algorithm"] == "tree/LL128"
    assert max(rack["all_reduce_ms"], nodes["all_reduce_ms"]) < 0.05 * nodes["step_ms"]  # "small either way"
    assert "nvls" in rack["all_reduce_reason"] and "tree/LL128" in nodes["all_reduce_reason"]
    # the rack's pairs: every collective priced by NCCL's model, none by the alpha-beta formula
    assert "alpha-beta" not in rack["all_to_all_algorithm"] + nodes["all_to_all_algorithm"]
