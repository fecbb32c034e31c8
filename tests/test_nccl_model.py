"""The NCCL model (:mod:`recnotebooks.perf.components.nccl`): its pick is the fastest pair by a
naive loop, its ring is the textbook ring, NVLS appears only where the switches reduce, time grows
with the message, the published nccl-tests table holds its target where it does (and the rows
where it does not are named), and bad input is refused by name."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.perf.components import nccl as N
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.nccl_tests import nccl_tests_table

H100_NODE = N.Fabric(ranks=8, node_size=8, domain_size=8, nvlink_bw=450e9, nic_bw=50e9)
H100_IB = N.Fabric(ranks=64, node_size=8, domain_size=8, nvlink_bw=450e9, nic_bw=50e9)
NVL72 = N.Fabric(ranks=72, node_size=4, domain_size=72, nvlink_bw=900e9, nic_bw=50e9, arch="blackwell")
NVL72_16 = N.Fabric(ranks=16, node_size=4, domain_size=72, nvlink_bw=900e9, nic_bw=50e9, arch="blackwell")
TWO_RACKS = N.Fabric(ranks=144, node_size=4, domain_size=72, nvlink_bw=900e9, nic_bw=50e9, arch="blackwell")
NO_NVLS = N.Fabric(ranks=8, node_size=8, domain_size=8, nvlink_bw=450e9, nic_bw=50e9, nvls=False)
FABRICS = [H100_NODE, H100_IB, NVL72, NVL72_16, TWO_RACKS, NO_NVLS]
TUNED = ("all_reduce", "reduce_scatter", "all_gather")


def test_nccl_counts_the_nvlink_as_nccl_does() -> None:
    # 18 links x SM90_NVLINK_BW 20.6; a B200's 18 x 40.1 = 721.8, NCCL's log's "maxBw 721.8"
    # (NVIDIA/nccl issue 1807)
    assert H100_NODE.nvlink_gbps == pytest.approx(370.8)
    assert NVL72.nvlink_gbps == pytest.approx(721.8)
    assert (NVL72.nodes, NVL72.local_ranks, TWO_RACKS.nodes, H100_IB.nodes) == (1, 72, 2, 8)
    # NCCL 2.19.4's GRAPH log on H100s: "Pattern 4 ... nChannels 12, bw 30.000000/30.000000" (ring)
    # and "Pattern 1 ..." (tree) the same (NVIDIA/nccl issue 1197)
    g = N.graphs(H100_NODE)
    assert g["ring"] == g["tree"] == N.Graph(12, 30.0, 30.0)


@settings(max_examples=20)
@given(
    fabric=st.sampled_from(FABRICS),
    collective=st.sampled_from(TUNED),
    log_bytes=st.floats(min_value=3, max_value=34),
)
def test_the_choice_is_the_fastest_pair_of_a_naive_loop(
    fabric: N.Fabric, collective: str, log_bytes: float
) -> None:
    nbytes = 2.0**log_bytes
    times = {}
    for algo in N.ALGORITHMS[:7]:  # every algorithm and protocol, offered or not
        for proto in N.PROTOCOLS:
            t = N.algorithm_time(collective, algo, proto, nbytes, fabric)
            if t is not None:
                times[(algo, proto)] = t
    choice = N.choose(collective, nbytes, fabric)
    assert choice.seconds == min(times.values())
    assert times[(choice.algorithm, choice.protocol)] == choice.seconds


@pytest.mark.parametrize(("fabric", "bus"), [(H100_NODE, 12 * 30.0), (NVL72_16, 16 * 45.0)])
def test_ring_all_reduce_is_the_textbook_ring(fabric: N.Fabric, bus: float) -> None:
    # One NVLink domain, Simple protocol: 2(n-1)/n * S / B + 2(n-1) alpha + a base latency, with
    # B the ring's channels x GB/s (12 x 30 on 8 H100s, 16 x 45 on Blackwell), alpha NCCL's
    # 3.4 us per NVLink step and 8.4 us base (tuning.cc v2.30.7-1).
    n = fabric.ranks
    for size in (1e3, 1e6, 1e9, 1e12):
        expected = 2 * (n - 1) / n * size / (bus * 1e9) + 2 * (n - 1) * 3.4e-6 + 8.4e-6
        assert N.algorithm_time("all_reduce", "ring", "Simple", size, fabric) == pytest.approx(
            expected, rel=1e-9
        )
    huge = N.all_reduce(1e13, fabric, "ring")  # in the limit the bus bandwidth is the ring's
    assert huge.bus_bandwidth == pytest.approx(bus * 1e9, rel=1e-3)


def test_nvls_only_where_the_switches_reduce() -> None:
    def algos(fabric: N.Fabric, coll: str = "all_reduce") -> set[str]:
        return {a for a, _ in N.candidates(coll, 1 << 20, fabric)}

    assert not {"nvls", "nvls_tree"} & algos(NO_NVLS)
    assert "nvls" in algos(H100_NODE) and "nvls_tree" not in algos(H100_NODE)  # NVLS tree: several nodes
    assert "nvls_tree" in algos(H100_IB) and "nvls" not in algos(H100_IB)  # NVLS across nodes needs CollNet
    assert "nvls" in algos(NVL72) and "nvls" not in algos(NVL72, "all_gather")  # > 32 local ranks
    collnet = N.Fabric(64, 8, 8, 450e9, 50e9, collnet=True)
    assert {"nvls", "collnet_chain", "collnet_direct"} <= algos(collnet)
    assert N.all_reduce(1 << 30, H100_NODE).algorithm == "nvls"
    assert N.all_reduce(1 << 30, NO_NVLS).algorithm == "ring"


@settings(max_examples=20)
@given(
    fabric=st.sampled_from(FABRICS),
    collective=st.sampled_from(N.COLLECTIVES),
    nbytes=st.floats(min_value=1, max_value=2.0**34),
)
def test_time_grows_with_the_message(fabric: N.Fabric, collective: str, nbytes: float) -> None:
    assert N.choose(collective, 2 * nbytes, fabric).seconds >= N.choose(collective, nbytes, fabric).seconds


def test_all_to_all_routes_through_pxn_across_domains() -> None:
    assert {a for a, _ in N.candidates("all_to_all", 1 << 20, NVL72)} == {"pairwise"}
    # 64 ranks over 8 nodes: NCCL narrows each network peer's channels until all 63 peers run in
    # one round, so the direct sends pay one network latency and PXN's extra NVLink hop does not pay
    assert N.p2p_rounds(H100_IB, 63) == 1 and N.all_to_all(1 << 10, H100_IB).algorithm == "pairwise"
    # 20 racks (1440 ranks): the direct sends need rounds, PXN reaches one peer per other rack
    racks = N.Fabric(1440, 4, 72, 900e9, 50e9, arch="blackwell")
    assert N.p2p_rounds(racks, 1439) > N.p2p_rounds(racks, 19) == 1
    assert N.all_to_all(1 << 10, racks).algorithm == "pxn"
    big = N.all_to_all(1 << 30, H100_IB)
    # bandwidth-bound: 56/64 of the bytes leave the node over the GPU's 50 GB/s NIC
    assert big.seconds == pytest.approx((1 << 30) * 56 / 64 / 50e9, rel=0.02)
    assert "8 NVLink domains of 8" in big.reason


def test_grouped_sends_reach_eight_peers_a_round_in_one_domain() -> None:
    # enqueue.cc: p2pnChannels / p2pnChannelsPerPeer * NCCL_MAX_DEV_WORK_P2P_PER_BATCH peers at once;
    # over NVSwitch a peer's channels (2 per NVLink: 36) cover all p2p channels, so 8 a round
    assert N.P2P_PER_BATCH == 8
    assert [N.p2p_rounds(f, f.ranks - 1) for f in (H100_NODE, NVL72_16, NVL72)] == [1, 2, 9]
    simple = N.PROTOCOLS.index("Simple")
    lat = N.BASE_LATENCY_US["ring"][simple] + 9 * N.HW_LATENCY_US["nvlink"]["ring"][simple]
    assert N.all_to_all(1.0, NVL72).seconds == pytest.approx(lat * 1e-6, rel=1e-3)
    with pytest.raises(ValueError, match="peers must be an int >= 0"):
        N.p2p_rounds(NVL72, -1)


def test_nvls_tree_is_corrected_on_blackwell_with_x86_hosts_only() -> None:
    # tuning.cc lines 643-645: NVLS tree's bandwidth times treeCorrectionFactor on SM100 with x86 CPUs
    x86 = N.Fabric(16, 8, 8, 900e9, 50e9, arch="blackwell")  # two DGX B200 nodes
    arm = N.Fabric(16, 8, 8, 900e9, 50e9, arch="blackwell", host="arm")  # Grace hosts
    nbytes = 64 << 20  # log2(nbytes / 64) = 20: Simple's factor 0.8
    lat, bw = N.tuning_table("all_reduce", x86)[("nvls_tree", "Simple")]
    t = N.algorithm_time("all_reduce", "nvls_tree", "Simple", nbytes, x86)
    assert t == pytest.approx(lat * 1e-6 + nbytes / (1e9 * bw * 0.8), rel=1e-12)
    assert N.algorithm_time("all_reduce", "nvls_tree", "Simple", nbytes, arm) == pytest.approx(
        lat * 1e-6 + nbytes / (1e9 * bw), rel=1e-12
    )
    hopper = N.Fabric(16, 8, 8, 450e9, 50e9)
    lat_h, bw_h = N.tuning_table("all_reduce", hopper)[("nvls_tree", "Simple")]
    assert N.algorithm_time("all_reduce", "nvls_tree", "Simple", nbytes, hopper) == pytest.approx(
        lat_h * 1e-6 + nbytes / (1e9 * bw_h), rel=1e-12
    )
    with pytest.raises(ValueError, match="host must be one of"):
        N.Fabric(16, 8, 8, 900e9, 50e9, host="power")


def test_the_choice_says_why() -> None:
    c = N.all_reduce(1 << 10, H100_NODE)
    assert (c.algorithm, c.protocol) == ("ring", "LL")  # tiny: LL's 15 us beats NVLS's 25 us
    assert "1.0 KiB" in c.reason and "8 ranks" in c.reason and "latency-bound" in c.reason
    big = N.all_reduce(1 << 30, NVL72)
    assert (
        big.algorithm == "nvls"
        and "one NVLink domain of 72" in big.reason
        and "bandwidth-bound" in big.reason
    )
    assert N.choose("all_reduce", 100, N.Fabric(1, 8, 8, 450e9, 50e9)).seconds == 0.0


def test_a_fabric_reads_a_hardware_preset() -> None:
    f = N.Fabric.from_hardware(hardware("dgx_h100"), 16)
    assert (f.node_size, f.domain_size, f.nodes, f.nic_bw) == (8, 8, 2, 50e9)


# Sizes >= 1 MiB where the model (nothing fitted) misses the published figure by more than 25%:
# the forced ring/LL on a GB200 tray (2-4 MiB; NCCL's LL ceiling for Blackwell is twice Hopper's,
# the tray's LL ran at about 70% of it). NVLS's mid sizes on 8 H100s and on a rack are within since
# the pipeline's fill is priced, two racks' NVLS tree since it is bounded by one rack's NVLS
# (run_time).
KNOWN_MISSES = {("azure_nd_gb200_v6", 2 << 20), ("azure_nd_gb200_v6", 4 << 20)}


def test_the_published_table_meets_its_target_except_where_named() -> None:
    rows = nccl_tests_table(min_bytes=1 << 20)
    assert {r.key for r in rows} >= {"azure_nd_h100_v5", "coreweave_h100_64", "coreweave_gb200_nvl72"}
    misses = {(r.key, r.nbytes) for r in rows if abs(r.error) > 0.25}
    assert misses == KNOWN_MISSES  # a fixed row or a new miss changes this list, on purpose
    assert all(math.isfinite(r.error) and r.modeled_busbw > 0 for r in rows)
    large = [r for r in rows if r.nbytes >= 8 << 30]
    assert all(abs(r.error) <= 0.25 for r in large)


@pytest.mark.parametrize(
    ("nbytes", "chunk"),
    [(1 << 20, 16384), ((8 << 20) - 1, 16384), (8 << 20, 32768), ((64 << 20) - 1, 32768),
     (64 << 20, 65536), ((1 << 30) - 1, 65536), (1 << 30, 131072), (8 << 30, 131072)],
)  # fmt: skip
def test_nvls_chunks_shrink_for_smaller_calls_as_enqueue_sets_them(nbytes: int, chunk: int) -> None:
    # 8 H100s: 16 NVLS channels x 8 heads = 128 operations; enqueue.cc's thresholds by hand:
    # 128 KiB from 64 x 128 x 128 KiB = 1 GiB, 64 KiB from 8 x 128 x 64 KiB = 64 MiB, 32 KiB from
    # 2 x 128 x 32 KiB = 8 MiB, 16 KiB below
    assert N.nvls_channels(H100_NODE) * N.graphs(H100_NODE)["nvls"].channels == 128
    assert N.nvls_chunk("nvls", nbytes, 128, 1) == chunk


def test_nvls_channels_follow_the_release_and_the_generation() -> None:
    assert N.nvls_channels(H100_NODE, "2.18.5") == N.nvls_channels(H100_NODE) == 16
    assert N.nvls_channels(NVL72, "2.26.2") == 32  # NVLS_NCHANNELS_SM100 before 2.27
    assert N.nvls_channels(NVL72, "v2.30.7-1") == 24  # _SM100_NVL: one NVLink domain
    assert N.nvls_channels(TWO_RACKS, "2.30.7") == 32
    with pytest.raises(ValueError, match="release must be an NCCL release such as '2.26.2', got 'x.y'"):
        N.nvls_channels(NVL72, "x.y")


def test_nvls_runs_slower_than_ncclss_prediction_by_its_pipelines_fill() -> None:
    lat = N.tuning_table("all_reduce", H100_NODE)[("nvls", "Simple")][0] * 1e-6
    # 8 MiB: loops of 128 x 32 KiB = 4 MiB, three stages: the transfer plus two loops' worth
    predicted = N.algorithm_time("all_reduce", "nvls", "Simple", 8 << 20, H100_NODE)
    run = N.run_time("all_reduce", "nvls", "Simple", 8 << 20, H100_NODE)
    assert predicted is not None and run is not None
    assert run - lat == pytest.approx(2 * (predicted - lat), rel=1e-9)
    # 1 MiB, one partial loop: three times the transfer; 8 GiB: two loops of 512, 0.4% more
    small = N.algorithm_time("all_reduce", "nvls", "Simple", 1 << 20, H100_NODE)
    assert N.run_time("all_reduce", "nvls", "Simple", 1 << 20, H100_NODE) - lat == pytest.approx(
        3 * (small - lat)
    )
    big = N.algorithm_time("all_reduce", "nvls", "Simple", 8 << 30, H100_NODE)
    assert N.run_time("all_reduce", "nvls", "Simple", 8 << 30, H100_NODE) == pytest.approx(
        big + (big - lat) / 256
    )
    # nothing else fills a pipeline here: rings, trees and the other collectives run as predicted
    for coll, algo, proto in (("all_reduce", "ring", "Simple"), ("all_gather", "ring", "LL128")):
        assert N.run_time(coll, algo, proto, 8 << 20, H100_NODE) == N.algorithm_time(
            coll, algo, proto, 8 << 20, H100_NODE
        )


def test_nvls_tree_runs_no_faster_than_one_domains_nvls() -> None:
    # two racks: NCCL's tuning model prices NVLS tree from the network heads' graph, above one
    # rack's NVLS; its kernel runs one rack's NVLS scatter and gather on the same bytes first
    tree = N.tuning_table("all_reduce", TWO_RACKS)[("nvls_tree", "Simple")]
    rack = N.tuning_table("all_reduce", NVL72)[("nvls", "Simple")][1]
    assert N.domain_nvls_bandwidth(TWO_RACKS) == rack < tree[1]
    nbytes = 16 << 30  # past the fill but for 4 loops of 32 x 15 x 128 KiB = 60 MiB
    loop = N.nvls_channels(TWO_RACKS) * N.graphs(TWO_RACKS)["nvls"].channels * 128 * 1024
    transfer = nbytes / (rack * 1e9)
    expected = tree[0] * 1e-6 + transfer * (1 + 4 * loop / nbytes)
    assert N.run_time("all_reduce", "nvls_tree", "Simple", nbytes, TWO_RACKS) == pytest.approx(expected)
    # where the tree is the slower already (8-GPU H100 nodes over InfiniBand), nothing changes
    ib = N.tuning_table("all_reduce", H100_IB)[("nvls_tree", "Simple")]
    assert ib[1] < N.domain_nvls_bandwidth(H100_IB)
    predicted = N.algorithm_time("all_reduce", "nvls_tree", "Simple", 8 << 30, H100_IB)
    assert predicted is not None
    assert N.run_time("all_reduce", "nvls_tree", "Simple", 8 << 30, H100_IB) > predicted
    assert "no faster than one NVLink domain's NVLS" in N.all_reduce(nbytes, TWO_RACKS, "nvls_tree").reason
    assert "no faster than" not in N.all_reduce(8 << 30, H100_IB, "nvls_tree").reason
    assert N.domain_nvls_bandwidth(NO_NVLS) == math.inf


def test_the_choice_is_ncclss_and_its_run_time_is_said() -> None:
    c = N.all_reduce(8 << 20, H100_NODE, "nvls")
    assert c.seconds == N.algorithm_time("all_reduce", "nvls", c.protocol, 8 << 20, H100_NODE)
    assert c.run_seconds == N.run_time("all_reduce", "nvls", c.protocol, 8 << 20, H100_NODE) > c.seconds
    assert "pipeline's fill" in c.reason
    ring = N.all_reduce(8 << 20, NO_NVLS)
    assert ring.run_seconds == ring.seconds and "fill" not in ring.reason


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: N.choose("broadcast", 1024, H100_NODE), "collective must be one of"),
        (lambda: N.choose("all_reduce", 1024, H100_NODE, "mesh"), "algorithm must be one of"),
        (lambda: N.choose("all_reduce", 1024, H100_NODE, "pat"), "algorithm must be one NCCL offers"),
        (lambda: N.choose("all_reduce", 1024, NO_NVLS, "nvls"), "algorithm must be one NCCL offers"),
        (lambda: N.choose("all_to_all", 1024, H100_NODE, "ring"), "algorithm must be one of"),
        (lambda: N.all_reduce(0, H100_NODE), "nbytes must be a finite number > 0, got 0"),
        (lambda: N.all_gather(-5.0, H100_NODE), "nbytes must be a finite number > 0"),
        (lambda: N.all_reduce(float("nan"), H100_NODE), "nbytes must be a finite number"),
        (lambda: N.Fabric(8, 4, 6, 450e9, 50e9), "domain_size must be a multiple of 4"),
        (lambda: N.Fabric(8, 8, 4, 450e9, 50e9), "domain_size must be a multiple of 8"),
        (lambda: N.Fabric(100, 4, 72, 900e9, 50e9), "ranks must be a multiple of 72"),
        (lambda: N.Fabric(8, 8, 8, 0.0, 50e9), "nvlink_bw must be a finite number > 0"),
        (lambda: N.Fabric(8, 8, 8, 450e9, 50e9, arch="volta"), "arch must be one of"),
        (lambda: N.algorithm_time("all_reduce", "ring", "LL64", 1024, H100_NODE), "protocol must be one of"),
    ],
)
def test_bad_input_is_refused_by_name(call, match: str) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match=match):
        call()


def test_wrong_kinds_are_type_errors() -> None:
    with pytest.raises(TypeError, match="fabric must be a Fabric"):
        N.choose("all_reduce", 1024, "h100")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ranks must be an int"):
        N.Fabric(8.0, 8, 8, 450e9, 50e9)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="nvls must be True or False"):
        N.Fabric(8, 8, 8, 450e9, 50e9, nvls=1)  # type: ignore[arg-type]


def test_every_published_figure_names_its_source() -> None:
    from recnotebooks.published.nccl_tests import NCCL_TESTS

    assert len({t.key for t in NCCL_TESTS}) == len(NCCL_TESTS) >= 3
    for t in NCCL_TESTS:
        assert t.source.startswith("https://github.com/") and t.date[:4] in ("2023", "2024", "2025")
        sizes = [s for s, _ in t.busbw]
        assert sizes == sorted(sizes) and t.ranks % min(t.ranks, t.domain_size) == 0
    # the small-message latency the published runs imply, beside the model's: NVLS's 25 us on
    # 8 H100s (published 25.6 us at 1 KiB), ring/LL on a GB200 tray 10.2 us (published 15.4 us)
    small = {r.key: r for r in nccl_tests_table() if r.nbytes == 1 << 10}
    assert small["azure_nd_h100_v5"].modeled_seconds == pytest.approx(
        small["azure_nd_h100_v5"].published_seconds, rel=0.05
    )
    assert small["azure_nd_gb200_v6"].modeled_seconds < small["azure_nd_gb200_v6"].published_seconds
