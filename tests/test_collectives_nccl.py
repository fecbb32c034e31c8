"""The step's collectives as NCCL prices and picks them (issue 40): on the GPUs NCCL's model covers
(:data:`~recnotebooks.perf.components.collectives.NCCL_GPUS`) the cost model's all-reduce and
all-to-all are NCCL's choice (checked against the NCCL model called by hand on the fabric written
out), a CPU node keeps the α-β formula (gloo is not NCCL; checked against the formula by hand),
the result says which algorithm NCCL picked and why, and bad input is refused by name."""

from __future__ import annotations

import math

import pytest

from recnotebooks.config import preset
from recnotebooks.perf.components import collectives as C
from recnotebooks.perf.components import nccl as N
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import hardware

H100 = hardware("dgx_h100")
RACK = hardware("gb200_nvl72")
CPU = hardware("cpu_cluster")


def test_the_fabric_of_a_step() -> None:
    # one DGX H100: 8 ranks, one domain; 8 of them: 8 domains of 8 over a 50 GB/s NIC share each
    nic = C.nic_per_device(H100, 8)
    assert C.nccl_fabric(H100, 8, 8, nic) == N.Fabric(8, 8, 8, 450e9, 50e9, True, "hopper")
    assert C.nccl_fabric(H100, 64, 8, nic) == N.Fabric(64, 8, 8, 450e9, 50e9, True, "hopper")
    # MLPerf's 16 GB200 trays of 4: one NVLink domain (the rack's 72), Blackwell's constants
    f = C.nccl_fabric(RACK, 64, C.domain_ranks(RACK, 4, 16), C.nic_per_device(RACK, 4))
    assert f is not None and (f.ranks, f.node_size, f.domain_size, f.nodes, f.arch) == (
        64,
        4,
        72,
        1,
        "blackwell",
    )
    assert f.host == "arm" and C.nccl_fabric(hardware("dgx_b200"), 16, 8, 50e9).host == "x86"  # Grace; x86
    # 20 trays: a rack of 18 and one of 2; priced as domains of 8 ranks, the slower view
    f20 = C.nccl_fabric(RACK, 80, C.domain_ranks(RACK, 4, 20), 50e9)
    assert f20 is not None and (f20.local_ranks, f20.nodes) == (8, 10)
    # not NCCL: a CPU node (gloo), a GPU the model does not cover, a single rank
    assert C.nccl_fabric(CPU, 4, 1, CPU.nic_bw) is None
    assert C.nccl_fabric(hardware("dgx_a100"), 8, 8, 25e9) is None
    assert C.nccl_fabric(hardware("h100_pcie_node"), 8, 8, 1e9) is None
    assert C.nccl_fabric(H100, 1, 1, nic) is None
    assert C.nccl_fabric(H100.replace(hbm_bytes=40e9), 8, 8, nic) is not None  # a copy keeps its GPU


@pytest.mark.parametrize(("world", "gpus", "calls"), [(8, 8, 1), (64, 8, 3), (2, 2, 2)])
def test_all_reduce_is_ncclS_pick_called_by_hand(world: int, gpus: int, calls: int) -> None:
    size = 48e6  # S, the gradients' bytes
    volume = 2 * (world - 1) / world * size
    nic = C.nic_per_device(H100, gpus)
    price = C.all_reduce_priced(volume, world, gpus, H100, nic, calls)
    fabric = N.Fabric(world, 8, 8, 450e9, 50e9)  # 2 GPUs of a DGX: in its NVLink domain of 8
    by_hand = N.all_reduce(size / calls, fabric)
    assert price.choice == by_hand and price.how == "nccl" and price.calls == calls
    # the step spends what the call takes as NCCL's kernels run it (NVLS: its pipeline's fill too)
    assert price.seconds == pytest.approx(calls * by_hand.run_seconds, rel=1e-12)
    assert C.all_reduce_seconds(volume, world, gpus, H100, nic, calls) == price.seconds
    # NCCL's pick is the fastest it offers: no forced algorithm is faster
    for algo in {a for a, _ in N.candidates("all_reduce", size / calls, fabric)}:
        assert N.all_reduce(size / calls, fabric, algo).seconds >= by_hand.seconds


def test_one_node_all_reduce_is_nvls_and_says_why() -> None:
    price = C.all_reduce_priced(2 * 7 / 8 * 256e6, 8, 8, H100, 50e9)
    assert price.choice is not None and price.choice.algorithm == "nvls"
    assert "8 ranks in one NVLink domain of 8" in price.reason and "bandwidth-bound" in price.reason


def test_all_to_all_is_ncclS_grouped_sends_by_hand() -> None:
    volume, world, calls = 12e6, 64, 2
    nic = C.nic_per_device(H100, 8)
    price = C.all_to_all_priced(volume, world, 8, H100, nic, calls, grouped=True)
    by_hand = N.all_to_all(volume * world / (world - 1) / calls, N.Fabric(64, 8, 8, 450e9, 50e9))
    assert price.choice == by_hand and price.seconds == pytest.approx(calls * by_hand.seconds)
    # NCCL groups every all-to-all's sends: the implementation's grouping does not matter there
    assert C.all_to_all_priced(volume, world, 8, H100, nic, calls, grouped=False) == price
    assert C.all_to_all_priced(0.0, world, 8, H100, nic, calls).seconds == 0.0  # all data-parallel


def test_a_cpu_node_keeps_the_alpha_beta_formula() -> None:
    volume, world, nic = 8e6, 4, CPU.nic_bw
    a2a = C.all_to_all_priced(volume, world, 1, CPU, nic, calls=4)
    assert a2a.choice is None and a2a.how == "alpha-beta" and "alpha-beta" in a2a.reason
    assert a2a.seconds == pytest.approx(volume / nic + 4 * 3 * CPU.collective_latency_s)
    ar = C.all_reduce_priced(volume, world, 1, CPU, nic, calls=2)
    assert ar.choice is None
    assert ar.seconds == pytest.approx(volume / nic + 2 * 2 * 3 * CPU.collective_latency_s)
    h = C.hierarchical_all_to_all_priced(1e6, 2e6, 4, CPU, nic, calls=2)
    assert h.choice is None and h.seconds == pytest.approx(
        2 * (1e6 / CPU.intra_node_bw + 2e6 / nic + 2 * CPU.collective_latency_s)
    )


def test_the_hierarchical_network_phase_is_ncclS_all_to_all_over_the_rails() -> None:
    nic = C.nic_per_device(H100, 8)
    h = C.hierarchical_all_to_all_priced(4.5e6, 1e6, 8, H100, nic, calls=2)
    rails = N.Fabric(8, 1, 1, 450e9, 50e9)  # the same GPU of each of 8 nodes
    phase = N.all_to_all(1e6 * 8 / 7, rails)
    peer = 4.5e6 / H100.intra_node_bw + H100.collective_latency_s  # HugeCTR's NVLink writes
    assert h.choice == phase and h.seconds == pytest.approx(2 * (peer + phase.seconds))


def test_the_cost_result_says_what_nccl_picked() -> None:
    cfg = preset("mlperf_dcnv2")
    r = estimate(cfg, "gb200_nvl72", batch_size=135168, gpus=4, nodes=16, dtype="amp_fp16",
                 implementation="hugectr")  # fmt: skip
    picked = r.collective_choices()
    assert picked["all_reduce"]["how"] == "nccl" and picked["all_reduce"]["algorithm"] == "nvls"
    assert "64 ranks in one NVLink domain of 72" in str(picked["all_reduce"]["reason"])
    assert picked["all_to_all"]["algorithm"] == "pairwise"
    slow = r.breakdown()
    assert slow["all_reduce"] == pytest.approx(picked["all_reduce"]["seconds"])
    assert r.summary()["collectives"] == picked
    assert len(r.collectives) == 64
    # one process: nothing to communicate; a CPU cluster: the formula, said so
    assert estimate(cfg, "dgx_h100", batch_size=4096).collective_choices() == {}
    cpu = estimate(preset("tiny"), "cpu_cluster", batch_size=512, gpus=1, nodes=2).collective_choices()
    assert cpu and {v["how"] for v in cpu.values()} == {"alpha-beta"}


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (
            lambda: C.all_reduce_seconds(-1.0, 8, 8, H100, 50e9),
            ValueError,
            "volume must be a finite number >= 0",
        ),
        (
            lambda: C.all_to_all_seconds(math.nan, 8, 8, H100, 50e9),
            ValueError,
            "volume must be a finite number",
        ),
        (lambda: C.all_to_all_seconds(1e6, 0, 8, H100, 50e9), ValueError, "world must be"),
        (lambda: C.all_reduce_seconds(1e6, 8, 0, H100, 50e9), ValueError, "gpus must be"),
        (lambda: C.all_reduce_seconds(1e6, 8, 8, H100, 0.0), ValueError, "nic must be a finite number > 0"),
        (lambda: C.all_reduce_seconds(1e6, 8, 8, H100, 50e9, calls=0), ValueError, "calls must be"),
        (lambda: C.hierarchical_all_to_all_seconds(1e6, -2.0, 2, H100, 50e9), ValueError, "network must be"),
        (lambda: C.hierarchical_all_to_all_seconds(-1.0, 2.0, 2, H100, 50e9), ValueError, "nvlink must be"),
        (lambda: C.all_reduce_seconds("1e6", 8, 8, H100, 50e9), TypeError, "volume must be a finite number"),
    ],
)
def test_bad_input_is_refused_by_name(call, exc: type, match: str) -> None:  # noqa: ANN001
    with pytest.raises(exc, match=match):
        call()


def test_an_unlimited_network_is_a_counterfactual_not_an_error() -> None:
    # what the cost model prices to find the network's share of a step (cost._exposed)
    assert (
        0 < C.all_to_all_seconds(64e6, 64, 8, H100, math.inf) < C.all_to_all_seconds(64e6, 64, 8, H100, 50e9)
    )
    # NVLS tree's speed across nodes is the topology search's (48 GB/s a channel), not the NIC's
    real = C.all_reduce_seconds(2 * 63 / 64 * 64e6, 64, 8, H100, 50e9)
    assert 0 < C.all_reduce_seconds(2 * 63 / 64 * 64e6, 64, 8, H100, math.inf) <= real
