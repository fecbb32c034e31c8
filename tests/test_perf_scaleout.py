"""Modeled scale-out (recnotebooks.perf.scaleout): the seed paper's finding — all-to-all's share
of the step grows with the devices, and more over a network than over NVLink."""

from __future__ import annotations

import math

import pytest

from recnotebooks.config import preset
from recnotebooks.perf import estimate
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.planner import plan_tables
from recnotebooks.perf.scaleout import LINKS, compare_strategies, link_hardware, scale_out


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return scale_out(preset("criteo_terabyte"), "dgx_h100", devices=(1, 2, 4, 8, 16, 32))


def _at(rows: list[dict], link: str, n: int) -> dict:
    return next(r for r in rows if r["link"] == link and r["devices"] == n)


def test_rows_are_modeled_finite_and_one_device_scales_linearly(rows: list[dict]) -> None:
    assert {r["source"] for r in rows} == {"modeled"}
    assert len(rows) == 6 + 4 + 6  # pcie stops at one node
    for r in rows:
        for k in ("samples_per_s", "step_ms", "all_to_all_ms", "all_to_all_share", "scaling_efficiency"):
            assert math.isfinite(r[k]) and r[k] >= 0, (k, r)
    for link in LINKS:
        one = _at(rows, link, 1)
        assert one["all_to_all_ms"] == 0 and one["scaling_efficiency"] == pytest.approx(1.0)


def test_a_row_is_the_estimate_of_its_layout(rows: list[dict]) -> None:
    cfg = preset("criteo_terabyte")
    r = _at(rows, "nvlink", 16)
    plan = plan_tables(cfg, "dgx_h100", 16, strategy="cost", batch_size=4096 * 16)
    direct = estimate(cfg, "dgx_h100", batch_size=4096 * 16, gpus=8, nodes=2, plan=plan)
    assert r["samples_per_s"] == pytest.approx(direct.throughput)
    assert (r["gpus_per_node"], r["nodes"]) == (8, 2)


def test_all_to_all_share_grows_with_devices_and_network_is_slowest(rows: list[dict]) -> None:
    for link in LINKS:
        shares = [_at(rows, link, n)["all_to_all_share"] for n in (2, 4, 8)]
        assert shares == sorted(shares) and shares[-1] > shares[0]
    for n in (2, 4, 8):
        a2a = [_at(rows, link, n)["all_to_all_ms"] for link in LINKS]
        assert a2a[0] < a2a[1] <= a2a[2], (n, a2a)  # NVLink < PCIe <= one GPU per node


def test_link_hardware_changes_only_the_link() -> None:
    hw = hardware("dgx_h100")
    pcie, net = link_hardware(hw, "pcie"), link_hardware(hw, "network")
    assert pcie.intra_node_bw == hw.host_link_bw and pcie.nic_bw == hw.nic_bw
    assert net.nic_bw == pytest.approx(hw.nic_bw / hw.devices) and net.intra_node_bw == hw.intra_node_bw
    assert link_hardware(hw, "nvlink") is hw


@pytest.mark.parametrize(
    ("kwargs", "err", "text"),
    [
        ({"hw": "cpu_cluster"}, ValueError, "GPU preset"),
        ({"links": ("wifi",)}, ValueError, "link"),
        ({"links": ()}, ValueError, "links"),
        ({"devices": (12,)}, ValueError, "multiple of 8"),
        ({"devices": (0,)}, ValueError, "devices"),
        ({"batch_per_device": 2.5}, TypeError, "batch_per_device"),
    ],
)
def test_bad_input_is_named(kwargs: dict, err: type, text: str) -> None:
    with pytest.raises(err, match=text):
        scale_out(preset("tiny"), **kwargs)


def test_balancing_bytes_is_not_balancing_work() -> None:
    rows = {r["strategy"]: r for r in compare_strategies(preset("criteo_terabyte"), devices=8)}
    assert set(rows) == {"naive", "greedy", "cost"} and {r["source"] for r in rows.values()} == {"modeled"}
    # the size-balanced (greedy) plan leaves one rank with most of the lookups
    assert rows["greedy"]["imbalance"] > 2 * rows["cost"]["imbalance"]
    assert rows["cost"]["samples_per_s"] >= rows["greedy"]["samples_per_s"]
