"""NVLink domains larger than a node (issue 40): a ``Hardware`` knows its NVLink domain apart from its
node (an NVL72 rack: trays of 4 in a domain of 72), the cost model sends traffic between the trays
of one domain over NVLink and beyond it over the NICs, and a domain that is not whole nodes is refused
naming the parameter, the value and what is allowed."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.config import preset
from recnotebooks.perf.components import collectives as C
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import HARDWARE, hardware
from recnotebooks.plan import table_wise

RACK = HARDWARE["gb200_nvl72"]
CFG = preset("mlperf_dcnv2")


# ----- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "domain,needle",
    [
        (6, r"nvlink_domain must be a multiple of devices \(4.*got 6"),  # not whole trays
        (2, r"nvlink_domain must be a multiple of devices \(4.*got 2"),  # smaller than a node
        (0, r"nvlink_domain"),
        (10_000, r"nvlink_domain"),
    ],
)
def test_a_domain_that_is_not_whole_nodes_is_refused(domain: int, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        RACK.replace(nvlink_domain=domain)
    with pytest.raises(ValueError, match=r"Hardware\(gb200_nvl72\)\.nvlink_domain"):
        RACK.replace(nvlink_domain=domain)


@pytest.mark.parametrize("domain", [72.0, "72", True])
def test_a_domain_must_be_an_int(domain: object) -> None:
    with pytest.raises((TypeError, ValueError), match="nvlink_domain"):
        RACK.replace(nvlink_domain=domain)


def test_a_preset_whose_domain_is_smaller_than_its_node_is_refused() -> None:
    fields = {**dataclasses.asdict(HARDWARE["dgx_h100"]), "nvlink_domain": 4}
    with pytest.raises(ValueError, match=r"nvlink_domain must be a multiple of devices \(8"):
        type(RACK)(**fields)


@settings(max_examples=25, deadline=None)
@given(devices=st.sampled_from([1, 2, 4, 8]), k=st.integers(1, 32), extra=st.integers(1, 7))
def test_whole_nodes_validate_and_others_do_not(devices: int, k: int, extra: int) -> None:
    hw = HARDWARE["dgx_h100"].replace(devices=devices)
    assert hw.replace(nvlink_domain=devices * k).nodes_per_domain == k
    if extra % devices:
        with pytest.raises(ValueError, match="nvlink_domain"):
            hw.replace(nvlink_domain=devices * k + extra)


# ----- which ranks share a domain ----------------------------------------------------------------
@pytest.mark.parametrize(
    "name,gpus,nodes,ranks",
    [
        ("gb200_nvl72", 4, 16, 64),  # MLPerf's 16 trays of one rack
        ("gb200_nvl72", 4, 18, 72),  # a full rack
        ("gb200_nvl72", 4, 36, 72),  # two full racks
        ("gb200_nvl72", 4, 20, 8),  # a rack and 2 trays of another: the smaller domain's ranks
        ("gb200_nvl72", 2, 16, 32),  # half of each tray
        ("dgx_h100", 8, 8, 8),  # 8-GPU NVSwitch boxes: the node is the domain
        ("l40s_node", 8, 1, 8),  # a PCIe box: its node, whose intra_node_bw is PCIe's
    ],
)
def test_domain_ranks(name: str, gpus: int, nodes: int, ranks: int) -> None:
    assert C.domain_ranks(HARDWARE[name], gpus, nodes) == ranks


# ----- the cost model ----------------------------------------------------------------------------
def _flat(world: int):  # noqa: ANN202 - a table-wise plan, its all-to-all rank to rank
    return table_wise([t.name for t in CFG.tables], world)


def _comm(hw: object, gpus: int, nodes: int) -> tuple[float, float]:
    r = estimate(CFG, hw, batch_size=135_168, gpus=gpus, nodes=nodes, plan=_flat(gpus * nodes))
    slowest = max(r.per_rank, key=lambda c: c["all_to_all"] + c["all_reduce"])
    return slowest["all_to_all"], slowest["all_reduce"]


def test_trays_of_one_domain_exchange_over_nvlink_as_one_node_would() -> None:
    """16 trays of 4 in one NVL72 domain pay what 64 GPUs in one node of the same links pay (the
    reference: the rack as one 72-GPU node, as the model priced it before domains)."""
    one_node = RACK.replace(devices=72, nvlink_domain=None)
    assert _comm(RACK, 4, 16) == pytest.approx(_comm(one_node, 64, 1), rel=1e-12)


def test_beyond_the_domain_traffic_crosses_the_nics() -> None:
    a2a_in, _ = _comm(RACK, 4, 16)
    trays_alone = RACK.replace(nvlink_domain=None)  # the same trays, each its own domain
    a2a_out, _ = _comm(trays_alone, 4, 16)
    assert a2a_out > 2 * a2a_in  # 200 GB/s of NICs a tray vs 900 GB/s of NVLink a GPU
    # two racks: the ids and pooled embeddings to the other rack's 72 GPUs (half of all) cross the NICs
    a2a_two, _ = _comm(RACK, 4, 36)
    assert a2a_two > a2a_in


#: The rack's numbers under another name: a GPU the NCCL model does not cover, so its collectives
#: keep the α-β formula (collectives.NCCL_GPUS), which the two tests below write out by hand.
FORMULA_RACK = RACK.replace(name="nvl72_alpha_beta")


def test_a_collective_by_hand() -> None:
    """``_collective``'s split, written out: the share to the domain's other ranks over NVLink, the rest
    over the NIC share, plus the latencies."""
    volume, world, nic = 1e9, 144, C.nic_per_device(RACK, 4)
    domain = C.domain_ranks(RACK, 4, 36)
    inside = (domain - 1) / (world - 1)
    by_hand = (
        max(volume * inside / RACK.intra_node_bw, volume * (1 - inside) / nic) + 3 * RACK.collective_latency_s
    )
    assert C.all_to_all_seconds(
        volume, world, domain, FORMULA_RACK, nic, calls=3, grouped=True
    ) == pytest.approx(by_hand)


def test_hierarchical_exchange_between_trays_of_a_domain_uses_nvlink() -> None:
    nic = C.nic_per_device(RACK, 4)
    nvlink, network = 3e6, 5e6
    for hw in (FORMULA_RACK, RACK):  # the α-β formula, and NCCL's all-to-all over the rails
        inside = C.hierarchical_all_to_all_seconds(nvlink, network, 16, hw, nic, domain_nodes=18)
        across = C.hierarchical_all_to_all_seconds(nvlink, network, 16, hw, nic)
        assert across > 2 * inside
    as_nvlink = C.hierarchical_all_to_all_seconds(nvlink, network, 16, FORMULA_RACK, RACK.intra_node_bw)
    inside = C.hierarchical_all_to_all_seconds(nvlink, network, 16, FORMULA_RACK, nic, domain_nodes=18)
    assert inside == pytest.approx(as_nvlink)
    with pytest.raises(ValueError, match="domain_nodes"):
        C.hierarchical_all_to_all_seconds(nvlink, network, 16, RACK, nic, domain_nodes=0)


def test_one_domain_exposes_nothing_to_the_network() -> None:
    """HugeCTR's step waits for the network's share of its collectives (EXPOSED_COMMUNICATION); in
    one NVL72 domain there is none, on trays that were each their own domain there is."""
    kw = {"batch_size": 135_168, "gpus": 4, "nodes": 16, "dtype": "amp_fp16", "implementation": "hugectr"}
    plan = _flat(64)
    assert max(estimate(CFG, RACK, plan=plan, **kw).exposed_communication) == 0.0
    apart = estimate(CFG, RACK.replace(nvlink_domain=None), plan=plan, **kw)
    assert max(apart.exposed_communication) > 0.0


def test_asking_for_more_gpus_than_a_tray_says_how() -> None:
    with pytest.raises(ValueError, match=r"gpus must be <= 4 .*64 GPUs are gpus=4, nodes=16"):
        estimate(CFG, "gb200_nvl72", batch_size=135_168, gpus=64)
    assert hardware("gb300_nvl72").domain_size == 72
