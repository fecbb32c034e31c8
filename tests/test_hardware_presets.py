"""The node presets of every accelerator in MLPerf Training's DLRM-DCNv2 results (v3.0-v5.1):
each validates and cites a source for every number, its numbers agree with the datasheet
figures typed here (aggregates divided by the GPUs, sparse figures halved), it relates to the
others as the hardware does, the model gives finite results on it, and every accelerator name
of the submissions' system JSONs maps to a preset."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from recnotebooks.config import preset
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import GB, HARDWARE, OPTIONAL_FIELDS, TB, Hardware
from recnotebooks.perf.mlperf_systems import MLPERF_ACCELERATORS, mlperf_layout, preset_for_accelerator

#: The presets of MLPerf's DCNv2 accelerators added for them, and the two existing ones reviewed.
NEW = ["spr_node", "a40_node", "dgx_a100_80gb", "l40_node", "l40s_node", "h100_pcie_node", "h200_nvl_node",
       "dgx_b200", "gb200_nvl72", "hgx_b300", "gb300_nvl72"]  # fmt: skip
REVIEWED = [*NEW, "dgx_h100", "h200_node"]
NUMBERS = [
    f.name for f in dataclasses.fields(Hardware) if f.name not in ("name", "kind", "description", "sources")
]
URL = re.compile(r"https?://\S+")
LABELS = ("approximate", "modeling assumption", "measured", "computed", "calibrated")


@pytest.mark.parametrize("name", NEW)
def test_new_presets_validate_and_round_trip(name: str) -> None:
    hw = HARDWARE[name]
    again = Hardware(**{**dataclasses.asdict(hw), "sources": dict(hw.sources)})
    assert again == hw
    assert hw.description and hw.price_per_hour > 0


@pytest.mark.parametrize("name", REVIEWED)
def test_every_number_of_the_dcnv2_presets_has_a_source(name: str) -> None:
    hw = HARDWARE[name]
    for f in NUMBERS:
        if f in OPTIONAL_FIELDS and getattr(hw, f) is None:
            continue  # not set: another field applies (op_overhead_s, llc_speedup)
        if f == "host_pools_embeddings":
            continue  # a switch, not a number
        text = hw.sources.get(f, "")
        assert text.strip(), f"{name} has no source for {f}"
        assert URL.search(text) or any(label in text.lower() for label in LABELS), (name, f, text)


@pytest.mark.parametrize("name", [n for n in REVIEWED if HARDWARE[n].kind == "gpu"])
def test_node_links_cite_an_mlperf_system_description(name: str) -> None:
    src = HARDWARE[name].sources
    cited = src["devices"] + src["nic_bw"] + src["intra_node_bw"] + src["host_mem_bytes"]
    assert "github.com/mlcommons/training_results_v" in cited and "/systems/" in cited, name


# Datasheet figures typed from the documents (not from the presets): per GPU fp32 TFLOP/s; tf32
# and bf16 tensor TFLOP/s *with sparsity* where the document gives only that (halved here), else
# dense; HBM GB and TB/s; NVLink GB/s both directions (None: none); TDP W. Aggregates are divided
# by the GPUs they count (HGX: 8, NVL72: 72).
SPARSE, DENSE = 0.5, 1.0
DATASHEETS = {
    "dgx_a100_80gb": (19.5, 312, 624, SPARSE, 80, 2.039, 600, 400),
    "h100_pcie_node": (51, 756, 1513, SPARSE, 80, 2.0, None, 350),
    "h200_nvl_node": (60, 835, 1671, SPARSE, 141, 4.8, 900, 600),
    "h200_node": (67, 989, 1979, SPARSE, 141, 4.8, 900, 700),
    "dgx_h100": (67, 989, 1979, SPARSE, 80, 3.35, 900, 700),
    "dgx_b200": (600 / 8, 18000 / 8, 36000 / 8, SPARSE, 1440 / 8, 64 / 8, 14400 / 8, 1000),
    "gb200_nvl72": (5760 / 72, 180000 / 72, 360000 / 72, SPARSE, 13400 / 72, 576 / 72, 130000 / 72, 1200),
    "hgx_b300": (600 / 8, 18000 / 8, 36000 / 8, SPARSE, 2300 / 8, 8.0, 14400 / 8, 1100),
    # GB300 (no NVIDIA datasheet read): Verda's per-GPU table, dense: FP32 80, TF32 1,250, FP16/BF16 2,500
    # TFLOPS, 8 TB/s, 1.4 kW; the rack's NVLink 130 TB/s / 72; 288 GB (Lockwood's B300 page, Supermicro)
    "gb300_nvl72": (80, 1250, 2500, DENSE, 288, 8.0, 130000 / 72, 1400),
    "l40s_node": (91.6, 183, 362.05, DENSE, 48, 0.864, None, 350),
    "l40_node": (90.5, 90.5, 181.05, DENSE, 48, 0.864, None, 300),
    "a40_node": (37.4, 74.8, 149.7, DENSE, 48, 0.696, None, 300),
}  # fmt: skip


@pytest.mark.parametrize("name", list(DATASHEETS))
def test_gpu_numbers_agree_with_the_datasheet_figures(name: str) -> None:
    fp32, tf32, bf16, factor, hbm, hbm_tbs, nvlink, tdp = DATASHEETS[name]
    hw = HARDWARE[name]
    close = {"rel": 0.01}  # aggregates divided (13.4 TB / 72 = 186.1 GB)
    assert hw.peak_flops["fp32"] == pytest.approx(fp32 * 1e12, **close)
    assert hw.flops("tf32") == pytest.approx(tf32 * factor * 1e12, **close)
    assert hw.flops("bf16") == pytest.approx(bf16 * factor * 1e12, **close)
    assert hw.flops("fp16") == hw.flops("bf16")
    assert hw.hbm_bytes == pytest.approx(hbm * GB, **close)
    assert hw.hbm_bw == pytest.approx(hbm_tbs * TB, **close)
    assert hw.power_w == tdp
    if nvlink is None:  # no NVLink (or bridges of pairs only): collectives cross PCIe
        assert hw.intra_node_bw == hw.host_link_bw
    else:
        assert hw.intra_node_bw == pytest.approx(nvlink * GB / 2, **close)


# Host DRAM: (sockets, channels per socket, MT/s) of each node's CPUs, from the system JSONs and
# the CPUs' specifications; bandwidth = sockets x channels x MT/s x 8 bytes.
HOST_DRAM = {
    "dgx_a100_80gb": (2, 8, 3200), "a40_node": (2, 8, 3200), "h100_pcie_node": (2, 8, 4800),
    "l40_node": (2, 8, 4800), "l40s_node": (2, 8, 4800), "spr_node": (2, 8, 4800),
    "h200_nvl_node": (2, 12, 6400), "dgx_b200": (2, 8, 5600), "hgx_b300": (2, 8, 6400),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HOST_DRAM))
def test_host_dram_bandwidth_is_channels_times_speed(name: str) -> None:
    sockets, channels, mts = HOST_DRAM[name]
    assert HARDWARE[name].host_mem_bw == pytest.approx(sockets * channels * mts * 1e6 * 8)
    assert f"{sockets * channels * mts * 8 / 1000:,.1f} GB/s" in HARDWARE[name].sources["host_mem_bw"]


def test_presets_relate_as_the_hardware_does() -> None:
    h = HARDWARE
    bf16 = {n: hw.flops("bf16") for n, hw in h.items() if "bf16" in hw.peak_flops}
    # memory: each generation holds more
    assert h["h200_node"].hbm_bytes > h["dgx_h100"].hbm_bytes > h["dgx_a100"].hbm_bytes
    assert (
        h["hgx_b300"].hbm_bytes
        > h["gb200_nvl72"].hbm_bytes
        > h["dgx_b200"].hbm_bytes
        > h["h200_node"].hbm_bytes
    )
    assert h["dgx_a100_80gb"].hbm_bytes == 2 * h["dgx_a100"].hbm_bytes
    assert h["dgx_a100_80gb"].hbm_bw > h["dgx_a100"].hbm_bw
    assert h["h200_node"].hbm_bw > h["dgx_h100"].hbm_bw and h["h200_node"].hbm_bw == h["h200_nvl_node"].hbm_bw
    # compute: Blackwell over Hopper over Ampere; the PCIe cards below their SXM siblings
    assert bf16["dgx_b200"] > 2 * bf16["dgx_h100"] > 2 * 2 * bf16["dgx_a100_80gb"]
    assert bf16["gb200_nvl72"] > bf16["dgx_b200"] == bf16["hgx_b300"]
    assert (
        bf16["h100_pcie_node"] < bf16["dgx_h100"] == bf16["h200_node"]
        and bf16["h200_nvl_node"] < bf16["h200_node"]
    )
    assert bf16["l40s_node"] == pytest.approx(
        2 * bf16["l40_node"], rel=1e-3
    )  # the L40S doubled the tensor rate
    assert bf16["a40_node"] < bf16["l40_node"] < bf16["dgx_a100_80gb"]
    # links: NVLink 5 doubles NVLink 4; the NVL72 rack shares the B200's NVLink across 72 GPUs
    assert h["dgx_b200"].intra_node_bw == 2 * h["dgx_h100"].intra_node_bw == h["gb200_nvl72"].intra_node_bw
    # an NVL72 rack: trays of 4 GPUs (the nodes) in one NVLink domain of 72; elsewhere the node is the domain
    for rack in ("gb200_nvl72", "gb300_nvl72"):
        assert (h[rack].devices, h[rack].domain_size, h[rack].nodes_per_domain) == (4, 72, 18)
    # a NIC per GPU of the tray: ConnectX-8 at 800 Gb/s on GB300, ConnectX-7 at 400 on GB200
    assert (h["gb300_nvl72"].nic_bw, h["gb200_nvl72"].nic_bw) == (4 * 100 * GB, 4 * 50 * GB)
    assert h["gb300_nvl72"].hbm_bytes == h["hgx_b300"].hbm_bytes > h["gb200_nvl72"].hbm_bytes
    assert h["gb300_nvl72"].intra_node_bw == h["gb200_nvl72"].intra_node_bw  # NVLink 5 both
    assert h["h200_nvl_node"].devices == 4
    assert all(hw.domain_size == hw.devices for n, hw in h.items() if n not in ("gb200_nvl72", "gb300_nvl72"))
    for name in ("l40s_node", "l40_node", "a40_node", "h100_pcie_node"):  # no NVSwitch: the PCIe path
        assert h[name].intra_node_bw == h[name].host_link_bw, name
    for name in (
        "dgx_a100_80gb",
        "dgx_h100",
        "h200_node",
        "h200_nvl_node",
        "dgx_b200",
        "gb200_nvl72",
        "hgx_b300",
    ):
        assert h[name].intra_node_bw > h[name].host_link_bw, name
    assert h["gb200_nvl72"].host_link_bw > h["dgx_b200"].host_link_bw  # NVLink-C2C beyond PCIe Gen5
    # the Sapphire Rapids node: a CPU trainer whose AMX bf16 is 16x its AVX-512 fp32
    spr = h["spr_node"]
    assert spr.kind == "cpu" and spr.devices == 1
    assert spr.flops("bf16") == pytest.approx(16 * spr.flops("fp32"))
    assert spr.hbm_bw > h["cpu_cluster"].hbm_bw and spr.hbm_bytes == spr.host_mem_bytes
    # last-level caches grow by generation
    assert (
        h["dgx_b200"].llc_bytes
        > h["dgx_h100"].llc_bytes
        > h["dgx_a100_80gb"].llc_bytes
        > h["a40_node"].llc_bytes
    )


def test_the_software_constants_are_the_same_for_every_gpu_preset() -> None:
    """Global constants calibrated once for all GPUs, never per preset."""
    shared = ("op_overhead_s", "step_overhead_s", "gather_efficiency", "gather_half_row_bytes",
              "collective_latency_s", "gemm_half_dim", "llc_speedup", "sort_rate")  # fmt: skip
    gpus = [HARDWARE[n] for n in NEW if HARDWARE[n].kind == "gpu"]
    for f in shared:
        assert {getattr(hw, f) for hw in gpus} == {getattr(HARDWARE["dgx_h100"], f)}, f
    assert {hw.gemm_max_efficiency for hw in gpus} == {HARDWARE["dgx_h100"].gemm_max_efficiency}
    cpu = HARDWARE["spr_node"]
    for f in (*shared, "gemm_max_efficiency"):
        if f != "sort_rate":  # the per-core sort rate times the cores
            assert getattr(cpu, f) == getattr(HARDWARE["cpu_cluster"], f), f


@pytest.mark.parametrize("name", REVIEWED)
@pytest.mark.parametrize("dtype", ["fp32", "amp_bf16"])
def test_the_model_gives_finite_results_on_every_preset(name: str, dtype: str) -> None:
    hw = HARDWARE[name]
    gpus = min(8, hw.devices)
    r = estimate(preset("mlperf_v1"), hw, batch_size=65536, gpus=gpus, dtype=dtype)
    for v in (r.step_time, r.throughput, r.power_w):
        assert math.isfinite(v) and v > 0, (name, v)
    several = estimate(preset("mlperf_v1"), hw, batch_size=65536, gpus=gpus, nodes=2, dtype=dtype)
    assert math.isfinite(several.step_time) and several.step_time > 0


# Every accelerator_model_name (with accelerators_per_node and number_of_nodes) of the
# DLRM-DCNv2 systems in mlcommons/training_results_v3.0 ... v5.1 (<submitter>/systems/<system>.json
# of each results/<system>/dlrm_dcnv2/), and the layout each is modeled as.
SPR = "Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz"
MLPERF_SYSTEMS = [
    ("NVIDIA A40", "8", "1", None, ("a40_node", 8, 1)),                                      # v3.0 IEI
    ("NVIDIA A100-SXM-80GB CTS", "8", "1", None, ("dgx_a100_80gb", 8, 1)),                   # v3.0 Dell
    ("NVIDIA A100-SXM4-80GB", "8", "8", None, ("dgx_a100_80gb", 8, 8)),                      # v4.0 Juniper
    ("NVIDIA H100-SXM5-80GB", "8", "1", None, ("dgx_h100", 8, 1)),                           # many
    ("NVIDIA H100-SXM5-80GB", "4", "1", None, ("dgx_h100", 4, 1)),                           # Dell XE8640...
    ("NVIDIA H100-SXM5-80GB", "4", "2", None, ("dgx_h100", 4, 2)),                           # v3.1 Dell 2x
    ("NVIDIA H100-SXM5-80GB", "8", "4", None, ("dgx_h100", 8, 4)),                           # v4.0 Juniper
    ("NVIDIA H100-SXM5-80GB", "8", "8", None, ("dgx_h100", 8, 8)),                           # NVIDIA, Cisco
    ("NVIDIA H100-SXM5-80GB", "8", "16", None, ("dgx_h100", 8, 16)),                         # NVIDIA
    ("NVIDIA H100-PCIe-80GB", "8", "1", None, ("h100_pcie_node", 8, 1)),                     # v3.1 ASUS
    ("NVIDIA H100-PCIe-80GB", "4", "1", None, ("h100_pcie_node", 4, 1)),                     # QCT D54U
    ("NVIDIA L40", "8", "1", None, ("l40_node", 8, 1)),                                      # v3.1 xFusion
    ("NVIDIA L40S", "8", "1", None, ("l40s_node", 8, 1)),                                    # v3.1 xFusion
    ("N/A", "0", "4", SPR, ("spr_node", 1, 4)),                                              # v3.1 Intel
    ("NVIDIA H200-SXM5-141GB", "8", "1", None, ("h200_node", 8, 1)),                         # v4.0-v5.1
    ("NVIDIA H200-SXM5-141GB", "8", "2", None, ("h200_node", 8, 2)),                         # v5.0 HPE
    ("NVIDIA H200-SXM5-141GB", "8", "4", None, ("h200_node", 8, 4)),                         # v5.0 HPE
    ("NVIDIA H200-NVL-141GB", "4", "1", None, ("h200_nvl_node", 4, 1)),                      # v5.0 Dell
    ("NVIDIA Blackwell GPU (B200-SXM-180GB)", "8", "1", None, ("dgx_b200", 8, 1)),           # v4.1-v5.1
    ("NVIDIA Blackwell GPU (B200-SXM-180GB)", "8", "2", None, ("dgx_b200", 8, 2)),           # v5.1 Dell 2x
    ("NVIDIA Blackwell GPU (GB200)", "4", "2", None, ("gb200_nvl72", 4, 2)),                 # v5.0/5.1 tyche
    ("NVIDIA Blackwell GPU (GB200)", "4", "16", None, ("gb200_nvl72", 4, 16)),               # tyche, SMC
    ("NVIDIA GB200", "4", "16", None, ("gb200_nvl72", 4, 16)),                               # Inference
    ("NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)", "8", "1", None, ("hgx_b300", 8, 1)),     # v5.1 Dell
    ("NVIDIA Blackwell Ultra GPU (GB300)", "4", "18", None, ("gb300_nvl72", 4, 18)),         # v5.1 theia
    ("NVIDIA Blackwell Ultra GPU (GB300)", "4", "2", None, ("gb300_nvl72", 4, 2)),           # v5.1 theia
]  # fmt: skip


@pytest.mark.parametrize("name,per_node,nodes,host,layout", MLPERF_SYSTEMS)
def test_every_mlperf_dcnv2_system_maps_to_a_preset(
    name: str, per_node: str, nodes: str, host: str | None, layout: tuple[str, int, int]
) -> None:
    assert preset_for_accelerator(name, per_node, host) == layout[0]
    assert mlperf_layout(name, per_node, nodes, host) == layout
    assert (
        mlperf_layout(name, int(per_node), int(nodes), host) == layout
    )  # ints as well as the JSON's strings
    hw, gpus, n = HARDWARE[layout[0]], layout[1], layout[2]
    assert gpus <= hw.devices and n >= 1


def test_the_table_names_exactly_the_accelerators_found() -> None:
    found = {name for name, *_ in MLPERF_SYSTEMS if name != "N/A"}
    assert set(MLPERF_ACCELERATORS) == found
    assert set(MLPERF_ACCELERATORS.values()) | {"spr_node"} == set(NEW) | {"dgx_h100", "h200_node"}
    assert preset_for_accelerator("  nvidia   h100-sxm5-80gb ") == "dgx_h100"  # case and spacing ignored
    assert mlperf_layout("NVIDIA Blackwell GPU (GB200)", 4, 36) == ("gb200_nvl72", 4, 36)  # two full racks


@pytest.mark.parametrize(
    "args,needle",
    [
        (("NVIDIA B100",), "name must be an accelerator"),
        (("NVIDIA L40S", "16"), "accelerators_per_node must be <= 8"),
        (("NVIDIA L40S", "eight"), "accelerators_per_node"),
        (("NVIDIA L40S", 0), "accelerators_per_node"),
        (("N/A", "0"), "host_processor"),
        (("N/A", "0", "AMD EPYC 9965"), "host_processor must be one of"),
        (("N/A", "4", SPR), "accelerators_per_node must be 0"),
        ((None,), "name"),
    ],
)
def test_an_unknown_system_raises_naming_what_is_allowed(args: tuple[object, ...], needle: str) -> None:
    with pytest.raises((ValueError, TypeError), match=needle):
        preset_for_accelerator(*args)  # type: ignore[arg-type]


def test_a_layout_beyond_one_rack_spans_two_domains() -> None:
    assert mlperf_layout("NVIDIA Blackwell GPU (GB200)", "4", "20") == ("gb200_nvl72", 4, 20)
    with pytest.raises(ValueError, match="accelerators_per_node must be <= 4"):
        mlperf_layout("NVIDIA Blackwell GPU (GB200)", "8", "2")  # a tray holds 4
    with pytest.raises(ValueError, match="number_of_nodes"):
        mlperf_layout("NVIDIA L40S", "8", "0")
