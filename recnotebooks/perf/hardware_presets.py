"""Hardware presets for the efficiency model (:data:`HARDWARE`), each number with its source.

Each preset is a :class:`~recnotebooks.perf.hardware_record.Hardware`. Sources are in
``Hardware.sources``: the public documents of :mod:`recnotebooks.published.sources` (vendor
datasheets and whitepapers, the talks and papers that describe Big Basin, Zion and ZionEX),
*measured* where a number was measured, or marked *approximate* / *modeling assumption*
where no spec gives the number (efficiency curves, per-op overheads). ``this_machine`` holds the
uncalibrated defaults; :func:`recnotebooks.perf.hardware.hardware` returns it with the saved
calibration, which :mod:`recnotebooks.measure.calibrate` fits.

The node of every accelerator in MLPerf Training's DLRM-DCNv2 results (v3.0-v5.1) has a preset,
its links, host memory and NICs cited from a submission's system description
(``systems/<system>.json``); :mod:`recnotebooks.perf.mlperf_systems` maps such a description to
its preset. An NVL72 rack (``gb200_nvl72``, ``gb300_nvl72``) is modeled as MLPerf describes it: nodes
of 4 GPUs (its compute trays, each with its Grace CPUs, host memory and NICs) in one NVLink domain of
72 (``Hardware.nvlink_domain``), so collectives among the trays of a rack run over NVLink
(``intra_node_bw``) and only traffic beyond the rack over the NICs.
"""

from __future__ import annotations

from recnotebooks.perf.hardware_record import GB, TB, Hardware
from recnotebooks.published.sources import cite

__all__ = ["HARDWARE"]


# ----- sources (titles and addresses in recnotebooks.published.sources) --------------------------
_APPROX = "approximate"
_GEMM = (
    "modeling assumption (approximate): large GEMMs reach ~80-85% of dense peak, and a "
    "dimension of half_dim halves efficiency; calibrate on the device to replace"
)
_GATHER = (
    "modeling assumption (approximate): random row gathers reach about half of HBM bandwidth for "
    "rows >= 256 B, less for small rows (32 B sectors, latency)"
)
_OP = (
    "approximate: eager PyTorch spends ~10 us of host time per operator (dispatch + kernel launch), "
    "so small kernels are overhead-bound"
)
_ALPHA = "approximate: NCCL small-message latency is on the order of 10 us per step inside a node"
_UPDATE_ASSUMED = (
    "modeling assumption: 1, a row's update (read and write it and its optimizer state) runs at the "
    "speed of a gather of the same bytes (no public figure; recnb calibrate measures it on a CPU)"
)
_SORT = "approximate: GPU radix sort of 64-bit key-value pairs runs at a few billion pairs/s"
_L2X = "approximate: GPU L2 serves gathers ~3x faster than HBM (L2 bandwidth is several times HBM's)"
_NIC = "NIC line rate / 8 bits per byte: 100 Gb/s = 12.5 GB/s, 200 Gb/s = 25 GB/s, 400 Gb/s = 50 GB/s"
_DDR4 = "6 DDR4-2666 channels x 8 B = ~128 GB/s theoretical per socket, " + cite("xeon6138")
_PRICE = "approximate, on-demand list price, changes often; edit price_per_hour for yours: "
_AWS_C5 = (
    "https://docs.amazonaws.cn/en_us/autoscaling/ec2/userguide/weights-spot-price-per-unit-hour-example"
    ".html (AWS's example on-demand prices: c5.2xlarge $0.34/h, c5.18xlarge $3.06/h; "
    "read 2026-12-01)"
)
_AWS_P4D = (
    "AWS p4d.24xlarge (8x A100 40 GB) on-demand $32.77/h in us-east-1 / 8 GPUs = $4.10 per GPU-hour, "
    "https://www.xither.com/compare/gpu-compute-costs-on-prem-vs-cloud-vs-spot-instances (Q2 2024) "
    "and https://www.usage.ai/blogs/finops/ai-ml-cost/gpu-instance-cost-optimization/ (2026); "
    "read 2026-12-01"
)
_AWS_P5 = (
    "AWS p5.48xlarge (8x H100 80 GB) on-demand $98.32/h in us-east-1 / 8 GPUs = $12.29 per GPU-hour, "
    "https://computespec.pages.dev/learn/pricing/cost-per-gpu-hour (Q1 2026) and "
    "https://deploybase.ai/articles/aws-vs-google-cloud (March 2026); read 2026-12-01"
)
_AWS_P3 = (
    "AWS p3.16xlarge (8x V100 16 GB) $24.48/h and p3dn.24xlarge (8x V100 32 GB) $31.212/h "
    "on-demand in us-east-1, https://aws.amazon.com/ec2/instance-types/p3/ (list prices 2018-2024, "
    "not re-read for this: approximate; 2026-12-01)"
)
_AWS_BLOCKS = (
    "https://aws.amazon.com/ec2/capacityblocks/pricing/ (EC2 Capacity Blocks accelerator rates, "
    "valid to 2025-01-01, read from a mirror of that page on 2026-12-01)"
)
_DEV = "measured on the 2-core development machine (uncalibrated default; `recnb calibrate` measures yours): "


def _gpu_sources(datasheet: str, l2_source: str, **extra: str) -> dict[str, str]:
    """The sources every GPU preset shares, from its datasheet, plus ``extra``."""
    return {
        "peak_flops": datasheet + " (dense)",
        "hbm_bytes": datasheet,
        "hbm_bw": datasheet,
        "power_w": datasheet + " (TDP)",
        "intra_node_bw": datasheet + " (NVLink total per GPU, both directions; halved per direction)",
        "host_link_bw": datasheet + " (PCIe x16, both directions; halved per direction)",
        "gemm_max_efficiency": _GEMM,
        "gemm_half_dim": _GEMM,
        "gather_efficiency": _GATHER,
        "gather_half_row_bytes": _GATHER,
        "op_overhead_s": _OP,
        "collective_latency_s": _ALPHA,
        "step_overhead_s": _APPROX + ": ~0.5 ms per step of Python loop, optimizer bookkeeping and syncs",
        "nic_bw": _NIC,
        "sort_rate": _SORT,
        "llc_bytes": l2_source,
        "llc_speedup": _L2X,
        "host_power_w": _APPROX,
        "update_efficiency": _UPDATE_ASSUMED,
        "bag_seconds_per_byte": "modeling assumption: 0, a GPU's warps pool bags in parallel (what is left "
        "of that cost is in gather_efficiency)",
        "silu_seconds": "modeling assumption: 0, a GPU's SiLU passes are bound by HBM bandwidth (priced by "
        "bytes, perf.hstu); a CPU's are timed by recnb calibrate",
        **extra,
    }


def _gpu(
    name: str,
    desc: str,
    *,
    fp32: float,
    tensor: dict[str, float],
    hbm: float,
    hbm_bw: float,
    nvlink: float | None,
    pcie: float,
    host_mem: float,
    host_bw: float,
    nic: float,
    power: float,
    host_power: float,
    l2: float,
    sources: dict[str, str],
    price: float,
    devices: int = 8,
    **fields: object,
) -> Hardware:
    """A GPU node: ``nvlink`` is a GPU's NVLink bandwidth both directions together (the
    datasheets' figure), ``None`` for GPUs without it, whose collectives inside the node cross
    their PCIe links (``intra_node_bw = pcie``); ``pcie`` per direction; ``price`` per GPU-hour.
    The software constants (overheads, GEMM and gather efficiency, latency) are the same for every
    GPU preset; ``fields`` replace any of them, or set another field, for one preset."""
    hw = Hardware(
        name=name,
        kind="gpu",
        devices=devices,
        peak_flops={"fp32": fp32, **tensor},
        hbm_bytes=hbm,
        hbm_bw=hbm_bw,
        host_mem_bytes=host_mem,
        host_mem_bw=host_bw,
        host_link_bw=pcie,
        intra_node_bw=pcie if nvlink is None else nvlink / 2,
        nic_bw=nic,
        collective_latency_s=10e-6,
        op_overhead_s=10e-6,
        step_overhead_s=0.5e-3,
        gemm_max_efficiency=0.85,
        gemm_half_dim=64.0,
        gather_efficiency=0.5,
        gather_half_row_bytes=64.0,
        power_w=power,
        host_power_w=host_power,
        llc_bytes=l2,
        llc_speedup=3.0,
        description=desc,
        sources=sources,
    )
    return hw.replace(price_per_hour=price, **fields)


def _tensor(tf32: float, half: float) -> dict[str, float]:
    """Dense tensor-core peaks of an Ampere-or-later GPU: TF32, and BF16 = FP16 (``half``)."""
    return {"tf32": tf32, "bf16": half, "fp16": half}


def _mlperf(version: str, path: str) -> str:
    """The address of a submission's file in MLPerf Training's results repository of ``version``."""
    return (
        f"MLPerf Training v{version} system description, "
        f"https://github.com/mlcommons/training_results_v{version}/blob/main/{path}"
    )


def _ddr(sockets: int, channels: int, mts: int, where: str) -> str:
    """Host DRAM bandwidth computed from its channels: sockets x channels x MT/s x 8 bytes."""
    gbs = sockets * channels * mts * 8 / 1000
    return f"computed: {sockets} sockets x {channels} channels x {mts} MT/s x 8 B = {gbs:,.1f} GB/s: {where}"


_CPU_CLUSTER_SOURCES = {
    "update_efficiency": _UPDATE_ASSUMED,
    "peak_flops": "computed (approximate): 2 sockets x 20 cores x 64 fp32 FLOP/cycle (AVX-512, 2 FMA units) "
    "x an assumed 1.6 GHz AVX-512 clock, " + cite("xeon6138"),
    "hbm_bw": "2 sockets x " + _DDR4,
    "hbm_bytes": _APPROX + ": 256 GB per trainer", "host_mem_bytes": _APPROX, "host_power_w": _APPROX,
    "nic_bw": _APPROX + ": 25 Gb/s Ethernet, the low end of 25-100 Gb/s, for the CPU trainers and parameter "
    "servers that GPU training replaced in " + cite("seed"),
    "power_w": "TDP 125 W x 2 sockets, " + cite("xeon6138"),
    "gemm_max_efficiency": _GEMM, "gemm_half_dim": _GEMM + " (CPUs saturate at smaller shapes)",
    "gather_efficiency": _GATHER, "op_overhead_s": _OP,
    "collective_latency_s": _APPROX + ": TCP/Ethernet round trip",
    "sort_rate": _APPROX + ": ~10 M pairs/s per core x 40 cores",
    "llc_bytes": "27.5 MB L3 per socket, 2 sockets, " + cite("xeon6138"),
    "llc_speedup": _APPROX + ": an L3 hit costs ~1/4 of a DRAM access for random rows",
    "price_per_hour": _PRICE + "a 36-core Skylake c5.18xlarge at $3.06 per node-hour, " + _AWS_C5,
}  # fmt: skip
_BIG_BASIN_SOURCES = _gpu_sources(
    cite("v100"),
    "6 MB L2, " + cite("volta"),
    host_mem_bytes=_APPROX + ": 256 GB head node, little host memory next to the GPUs, " + cite("big_basin"),
    host_mem_bw="2 Skylake-SP sockets x " + _DDR4,
    nic_bw=_APPROX + ": one 100 Gb/s NIC; " + _NIC,
    price_per_hour=_PRICE + "$24.48 / 8 = $3.06 per V100 16 GB-hour, " + _AWS_P3,
)
_ZION_SOURCES = _gpu_sources(
    cite("v100"),
    "as V100: 6 MB L2, " + cite("volta"),
    peak_flops=_APPROX + ": Zion's accelerators modeled as V100 SXM2 32 GB, " + cite("v100"),
    host_mem_bytes=_APPROX + ": 'terabytes of DDR' for the tables, 2 TB, " + cite("zion"),
    host_mem_bw="8 sockets x " + _DDR4,
    nic_bw=_APPROX + ": several 100 Gb/s NICs, 4, " + cite("zion") + "; " + _NIC,
    host_power_w=_APPROX + ": 150 W per socket",
    price_per_hour=_PRICE + "as a V100 32 GB of p3dn.24xlarge, $31.212 / 8 = $3.90 per GPU-hour "
    "(Zion's terabytes of DRAM not priced separately), " + _AWS_P3,
    host_pools_embeddings=(
        f"the tables live in the CPU sockets' large DRAM and need no remote parameter servers, "
        f"{cite('seed')}; modeled as the CPUs pooling rows and sending pooled vectors to the accelerators"
    ),
)
_DGX_A100_SOURCES = _gpu_sources(
    cite("a100"),
    "40 MB L2, " + cite("ampere"),
    host_mem_bytes="1 TB system memory, " + cite("dgx_a100"),
    host_mem_bw=_APPROX + ": 2 sockets x 8 DDR4-3200 channels",
    nic_bw="one 200 Gb/s NIC per GPU, " + cite("dgx_a100") + ", as in ZionEX, " + cite("neo") + "; " + _NIC,
    price_per_hour=_PRICE + _AWS_P4D,
)
_EOS = _mlperf("3.1", "NVIDIA/systems/eos_n8_ngc23.09_merlin_hugectr.json")
_DGX_H100_SOURCES = _gpu_sources(
    cite("h100"),
    "50 MB L2, " + cite("hopper"),
    devices=f"8 H100 SXM5 per node, {_EOS} (4-GPU HGX H100 nodes, as Dell's XE9640 and Supermicro's "
    "SYS-421GU, are gpus=4 of this preset)",
    intra_node_bw=f"{cite('h100')} (NVLink 900 GB/s per GPU both directions; halved per direction); "
    f"'NVLINK Gen4 900 GB/s + NVSWITCH Gen3', {_EOS}",
    host_mem_bytes=f"2 TB system memory, {cite('dgx_h100')}; '2.0 TB', {_EOS}",
    host_mem_bw=_APPROX + ": 2 sockets x 8 DDR5-4800 channels",
    nic_bw=f"one 400 Gb/s NIC per GPU, {cite('dgx_h100')}; 'Compute: 8x ConnectX-7 IB NDR 400Gb/s', {_EOS}; "
    + _NIC,
    price_per_hour=_PRICE + _AWS_P5,
)
_H200_JSON = _mlperf("4.0", "NVIDIA/systems/h200_ngc24.04_merlin_hugectr.json")
_H200_SOURCES = _gpu_sources(
    cite("h200"),
    _APPROX + ": the H100 die's 50 MB L2, " + cite("hopper"),
    devices=f"8 H200 SXM per node, {_H200_JSON}",
    intra_node_bw=f"{cite('h200')} (NVLink 900 GB/s per GPU both directions; halved per direction); "
    f"'NVLINK Gen4 900 GB/s + NVSWITCH Gen3', {_H200_JSON}",
    host_mem_bytes=f"'2.0 TB' host memory, {_H200_JSON}",
    host_mem_bw=f"{_APPROX}: 2 sockets (Xeon Platinum 8480C, {_H200_JSON}) x 8 DDR5-4800 channels",
    nic_bw=f"'Compute: 8x ConnectX-7 IB NDR 400Gb/s', {_H200_JSON}; {_NIC}",
    gemm_max_efficiency="measured (PyTorch, 2026, one H200): an 8192^3 BF16 matmul ran at 770-800 of the "
    "989 TFLOP/s of " + cite("h200") + ", ~0.8",
    price_per_hour=_PRICE + "the H100's $12.29 x 1.10 = $13.52 per GPU-hour: 1.10 is the ratio of AWS's "
    "accelerator rates for H200 (p5e, $5.408/h) and H100 (p5, $4.916/h), " + _AWS_BLOCKS,
)
# ----- the other accelerators of MLPerf Training's DLRM-DCNv2 results (v3.0-v5.1) -------------
_A100_80_JSON = _mlperf("4.0", "JuniperNetworks/systems/a100_n8_ngc23.09_merlin_hugectr.json")
_A100_80_DELL = _mlperf("3.0", "Dell/systems/XE9680x8A100-SXM-80GB.json")
_DGX_A100_80GB_SOURCES = _gpu_sources(
    cite("a100"),
    "40 MB L2, " + cite("ampere"),
    devices=f"8 A100 SXM4 80 GB per node, {_A100_80_JSON} and {_A100_80_DELL}",
    power_w=f"{cite('a100')} (TDP 400 W of the A100 80GB SXM; Dell's XE9680 ran the 500 W CTS part, "
    f"{_A100_80_DELL})",
    intra_node_bw=f"{cite('a100')} (NVLink 600 GB/s per GPU both directions; halved per direction); "
    f"'12xNVLink 25GB/s + 6xNVSwitch', {_A100_80_DELL}",
    host_mem_bytes=f"2 TB system memory (DGX A100 640GB), {cite('dgx_a100')}; '2.0 TB', {_A100_80_JSON}",
    host_mem_bw=_ddr(
        2,
        8,
        3200,
        f"'32 slots / 64 GB each / Total = 2 TB /DDR4 3200 MHz' on 2 AMD EPYC 7763 (8 DDR4 "
        f"channels each), {_A100_80_JSON}",
    ),
    nic_bw=f"one 200 Gb/s NIC per GPU (8 single-port ConnectX-6 for compute), {cite('dgx_a100')}; Juniper's "
    f"8-node system, {_A100_80_JSON}, lists 'accelerator_interconnect': '2 x 200Gbe Ethernet' in a "
    "'rail-optimized' topology (a rail per GPU needs a NIC per GPU; read literally, 2 NICs per node would be "
    f"50 GB/s); {_NIC}",
    price_per_hour=_PRICE + "AWS p4de.24xlarge (8x A100 80 GB) on-demand $40.96/h in us-east-1 / 8 = $5.12 "
    "per GPU-hour, https://aws.amazon.com/ec2/instance-types/p4/ (list price 2022-2024, not re-read for "
    "this: approximate; 2026-12-01)",
)
_ASUS_H100_PCIE = _mlperf("3.1", "ASUSTeK/systems/ESC8000-E11-8xH100-PCIE-80GB.json")
_QCT_H100_PCIE = _mlperf("4.0", "Quanta_Cloud_Technology/systems/D54U-3U.json")
_LAMBDA = (
    "Lambda's on-demand list: 1x H100 PCIe $2.49/h, 8x H100 SXM $2.99 per GPU-hour, "
    "https://lambda.ai/pricing (list prices 2024-2025, not re-read for this: approximate; 2026-12-01)"
)
_H100_PCIE_SOURCES = _gpu_sources(
    cite("h100"),
    "50 MB L2 (H100 PCIe as SXM5), " + cite("hopper"),
    devices=f"8 H100 PCIe per node, {_ASUS_H100_PCIE} (QCT's D54U has 4: gpus=4, {_QCT_H100_PCIE})",
    power_w=f"{cite('h100')} (max TDP 300-350 W); 'TDP=350W per GPU', {_ASUS_H100_PCIE}",
    intra_node_bw=f"no NVSwitch: collectives cross the GPUs' PCIe Gen5 x16 links, 128 GB/s both directions, "
    f"{cite('h100')}, 64 GB/s per direction; ASUS lists 'PCIe 5.0', {_ASUS_H100_PCIE}; QCT's 'NVLINK 600 "
    f"GB/s + PCIe Gen5' are NVLink bridges joining pairs, {_QCT_H100_PCIE}, which an all-to-all among more "
    "than 2 GPUs mostly does not use (modeling assumption: the PCIe path)",
    host_mem_bytes=f"'1 TB' (16x64GB), {_ASUS_H100_PCIE}",
    host_mem_bw=_ddr(
        2,
        8,
        4800,
        f"2 Xeon Platinum 8460Y+ (Sapphire Rapids: 8 DDR5-4800 channels), {_ASUS_H100_PCIE}; "
        f"QCT's: '32 x 64GB DDR5 4800 MT/s', {_QCT_H100_PCIE}",
    ),
    nic_bw=f"'ConnectX-5 25Gb/s Ethernet', {_QCT_H100_PCIE} (ASUS lists none: single-node runs); {_NIC}, "
    "25 Gb/s = 3.125 GB/s",
    price_per_hour=f"{_PRICE}the H100 SXM's $12.29 x 2.49 / 2.99 = $10.24 per GPU-hour, the ratio of "
    + _LAMBDA,
)
_DELL_H200_NVL = _mlperf("5.0", "Dell/systems/1xXE7745x4H200-NVL-141GB.json")
_H200_NVL_SOURCES = _gpu_sources(
    cite("h200") + " (H200 NVL)",
    _APPROX + ": the H100 die's 50 MB L2, " + cite("hopper"),
    devices=f"4 H200 NVL per node, {_DELL_H200_NVL}",
    power_w=f"{cite('h200')} (H200 NVL max TDP up to 600 W)",
    intra_node_bw=f"{_APPROX}: the system JSON leaves accelerator_interconnect empty, {_DELL_H200_NVL}; "
    f"modeled with the 4-way NVLink bridge of {cite('h200')} (900 GB/s per GPU both directions; halved per "
    "direction)",
    host_link_bw=f"{cite('h200')} (PCIe Gen5 128 GB/s both directions; halved per direction)",
    host_mem_bytes=f"'2.2 TB', {_DELL_H200_NVL}",
    host_mem_bw=f"{_APPROX}: "
    + _ddr(
        2,
        12,
        6400,
        f"2 AMD EPYC 9965 ({_DELL_H200_NVL}), 12 DDR5-6400 channels each (AMD's specification; "
        "the JSON gives no memory speed)",
    ),
    nic_bw=f"{_APPROX}: the system JSON lists no network (a single-node run), {_DELL_H200_NVL}; modeled as "
    f"one 400 Gb/s NIC per GPU pair; {_NIC}",
    price_per_hour=f"{_PRICE}no public list price of H200 NVL instances found; the H200 SXM's $13.52 x 2.49 "
    f"/ 2.99 = $11.26 per GPU-hour, the PCIe/SXM ratio of {_LAMBDA}",
)
_NYX = _mlperf("5.0", "NVIDIA/systems/nyx_n1_ngc25.03_hugectr.json")
_UF_B200 = _mlperf("5.1", "University-of-Florida/systems/hpg.dgxb200x8.n1.json")
_B200_L2 = (
    f"{_APPROX}: 126.5 MB, the L2 a B200 reports to CUDA, {cite('b200_props')} "
    "(NVIDIA's datasheets give none)"
)
_COREWEAVE = (
    "CoreWeave's on-demand list: HGX H100 (8 GPUs) $49.24/h, HGX B200 (8 GPUs) $68.80/h, GB200 NVL72 "
    "(4 GPUs) $42.00/h, L40 (8 GPUs) $10.00/h, https://www.coreweave.com/pricing (list prices of 2025, "
    "not re-read for this: approximate; 2026-12-01)"
)
_B200_PRICE = "the H100 SXM's $12.29 x (68.80 / 8) / (49.24 / 8) = $17.17 per GPU-hour, the ratio of "
_HGX_PER_GPU = ", per GPU: FP32 600 TFLOPS / 8, TF32 18 and FP16/BF16 36 PFLOPS (with sparsity) / 8 / 2"
_DGX_B200_SOURCES = _gpu_sources(
    cite("hgx") + ", HGX B200" + _HGX_PER_GPU,
    _B200_L2,
    devices=f"8 B200 per node, {cite('dgx_b200')}; {_NYX}",
    hbm_bytes=f"{cite('dgx_b200')} (1,440 GB total / 8 GPUs); '183359 MiB', {_NYX}",
    hbm_bw=f"{cite('dgx_b200')} (64 TB/s HBM3e bandwidth / 8 GPUs; the bus CUDA reports, 7680 bits, gives "
    f"7.7 TB/s, {cite('b200_props')})",
    power_w=f"not in the HGX B200 datasheet, {cite('hgx')}; 'B200 TGP 1000 W', {_UF_B200}",
    intra_node_bw=f"{cite('hgx')} (NVSwitch GPU-to-GPU bandwidth 1.8 TB/s both directions; halved per "
    f"direction); 'NVLINK Gen5 1800 GB/s + NVSWITCH Gen5', {_NYX}",
    host_link_bw=f"PCIe Gen5 x16, 128 GB/s both directions, halved per direction: 'PCIe Gen5 x16', "
    f"{_UF_B200}; the hosts' 'Intel Xeon 8570 PCIe Gen5 CPUs', {cite('dgx_b200_guide')} (no datasheet "
    "figure)",
    host_mem_bytes=f"'2 TB using 32 x DIMMs', {cite('dgx_b200_guide')}; '2.0 TB', {_NYX}",
    host_mem_bw=f"{_APPROX}: "
    + _ddr(
        2,
        8,
        5600,
        f"2 Xeon Platinum 8570 (Emerald Rapids: 8 DDR5 channels, up to 5600 MT/s), {cite('dgx_b200_guide')}",
    ),
    nic_bw=f"'8x ConnectX-7 IB NDR 400Gb/s', {_NYX}; {_NIC}",
    host_power_w=_APPROX + ": 2 Xeon sockets, 2 TB of DDR5, NICs, NVSwitches and fans, ~2.5 kW",
    price_per_hour=_PRICE + _B200_PRICE + _COREWEAVE,
)
_TYCHE = _mlperf("5.0", "NVIDIA/systems/tyche_ngpu64_ngc25.03_hugectr.json")
_SMC_GB200 = _mlperf("5.0", "Supermicro/systems/ARS-121GL-NBO_16.json")
_GB200_SOURCES = _gpu_sources(
    f"{cite('gb200_nvl72')}: GB200 NVL72 FP32 5,760 TFLOPS, TF32 180 and FP16/BF16 360 PFLOPS (with "
    "sparsity), / 72 GPUs (/ 2 for dense)",
    _B200_L2 + " (a GB200's GPU taken as the B200's)",
    devices=f"4 GPUs per compute tray (the node: its own Grace CPUs, host memory and NICs): MLPerf's GB200 "
    f"systems list 4 accelerators per node x 16 or 2 nodes, {_TYCHE}, 'Tyche (1x NVIDIA GB200 NVL72)'",
    nvlink_domain=f"72 GPUs in one NVLink domain (18 trays of 4 joined by NVLink switch trays), "
    f"{cite('gb200_nvl72')}; MLPerf's 16 trays of 4 are one rack, 'NVLINK Gen5 1800 GB/s + NVSWITCH Gen5', "
    f"{_TYCHE}",
    hbm_bytes=f"{cite('gb200_nvl72')} (up to 13.4 TB HBM3e / 72 GPUs = 186 GB); '186GB', {_SMC_GB200}",
    hbm_bw=f"{cite('gb200_nvl72')} (576 TB/s / 72 GPUs)",
    power_w=f"{_APPROX}: the GB200 NVL72 datasheet gives no per-GPU power, {cite('gb200_nvl72')}; 1.2 kW, "
    "a GB200 GPU's maximum TDP as https://verda.com/blog/gb300-nvl72-architecture (2025) lists it",
    intra_node_bw=f"{cite('gb200_nvl72')} (NVLink 130 TB/s / 72 GPUs = 1.8 TB/s both directions; halved per "
    f"direction), to every GPU of the rack's NVLink domain; 'NVLINK Gen5 1800 GB/s + NVSWITCH Gen5', "
    f"{_TYCHE}",
    host_link_bw=f"{_APPROX}: NVLink-C2C, 900 GB/s both directions between a Grace CPU and its two GPUs, "
    f"GB200 NVL72 datasheet, {cite('gb200_nvl72')}: 225 GB/s per GPU per direction (how the two GPUs share "
    "it is not given)",
    host_mem_bytes=f"960 GB of LPDDR5X per 4-GPU tray (2 Grace CPUs x 480 GB, {cite('gb200_nvl72')}), "
    f"'960GB', {_SMC_GB200} ('1.7 TB' per tray in {_TYCHE} counts the GPUs' HBM too: 960 GB + 4 x 186 GB)",
    host_mem_bw=f"computed: 2 Grace CPUs a tray x 512 GB/s of LPDDR5X each, {cite('gb200_nvl72')}",
    nic_bw=f"'4x ConnectX-7 IB NDR 400Gb/s' per 4-GPU tray, {_TYCHE}: one 400 Gb/s NIC per GPU, for traffic "
    f"beyond the rack's NVLink domain; {_NIC}",
    host_power_w=_APPROX + ": the rack less its GPUs, ~15 kW (36 Grace CPUs with their LPDDR5X, ~250 W each, "
    "72 NICs, 9 NVLink switch trays and fans) / 18 trays = 833 W a tray",
    price_per_hour=f"{_PRICE}the H100 SXM's $12.29 x (42.00 / 4) / (49.24 / 8) = $20.97 per GPU-hour, the "
    f"ratio of {_COREWEAVE}",
)
_THEIA = _mlperf("5.1", "NVIDIA/systems/theia_ngpu72_ngc25.09_nemo.json")
_SMC_GB300 = _mlperf("5.1", "Supermicro/systems/ARS-121GL-NB3.json")
_VERDA = cite("verda_gb300")
_LOCKWOOD = cite("lockwood_b300")
#: No NVIDIA datasheet of GB300 NVL72 was read: its figures are NVIDIA's as two pages quote them, which
#: agree wherever both give a figure (288 GB, 8 TB/s, 1.4 kW, NVLink 130 TB/s a rack).
_GB300_SOURCES = _gpu_sources(
    f"a GB300 GPU's FP32 0.080, TF32 1.25 and FP16/BF16 2.5 PFLOPS without sparsity, Verda's per-GPU table, "
    f"{_VERDA}",
    _B200_L2 + " (a GB300's GPU taken as the B200's)",
    devices=f"4 GPUs per compute tray: 'accelerators_per_node': '4', 'number_of_nodes': '18', {_THEIA}, "
    f"'Theia (1x NVIDIA GB300 NVL72)'; one board of 2 Grace CPUs and 4 Blackwell Ultra GPUs, {_LOCKWOOD}",
    nvlink_domain=f"72 GPUs in one NVLink domain, the rack's 18 NVLink switches at 130 TB/s, {_LOCKWOOD}; "
    f"18 trays of 4 in one rack, 'NVLINK Gen5 1800 GB/s + NVSWITCH Gen5', {_THEIA}",
    hbm_bytes=f"288 GB HBM3e a GPU (8 stacks, 12-high), {_LOCKWOOD}; '288GB' a GPU, {_SMC_GB300} (Verda's "
    f"table lists 279 GB, {_VERDA}, and NVIDIA's system JSON '284208 MiB' as the GPU reports it, {_THEIA}: "
    "what is left to a program)",
    hbm_bw=f"8 TB/s a GPU, {_VERDA} (576 TB/s a rack) and {_LOCKWOOD} ('8 TB/s (max)')",
    power_w=f"a GB300 GPU's maximum TDP, 1.4 kW, {_VERDA}; '1400 W maximum', {_LOCKWOOD}",
    intra_node_bw=f"NVLink 5: 1.8 TB/s a GPU both directions (900 GB/s each way), 130 TB/s a rack, {_VERDA}; "
    f"halved per direction, to every GPU of the rack's NVLink domain; 'NVLINK Gen5 1800 GB/s + NVSWITCH "
    f"Gen5', {_THEIA}",
    host_link_bw=f"{_APPROX}: NVLink-C2C between a Grace CPU and its two GPUs, 'NVLink-C2C', {_SMC_GB300}; "
    f"taken as the GB200's 900 GB/s both directions, {cite('gb200_nvl72')}: 225 GB/s per GPU per direction",
    host_mem_bytes=f"'960GB' of host memory per 4-GPU tray, {_SMC_GB300} (NVIDIA's '2.0 TB', {_THEIA}, "
    "counts the GPUs' HBM too: 960 GB + 4 x 288 GB = 2.1 TB)",
    host_mem_bw=f"{_APPROX}: 2 Grace CPUs a tray ('Neoverse-V2', {_THEIA}) x 512 GB/s of LPDDR5X each, the "
    f"Grace of {cite('gb200_nvl72')}",
    nic_bw=f"'4x ConnectX-8 IB XDR 800 Gb/s' per 4-GPU tray, {_THEIA}: one 800 Gb/s NIC per GPU (72 "
    f"ConnectX-8 NICs a rack, {_LOCKWOOD}), for traffic beyond the rack's NVLink domain; {_NIC}, "
    "800 Gb/s = 100 GB/s",
    host_power_w=_APPROX + ": as the GB200 rack's, ~15 kW less its GPUs / 18 trays = 833 W a tray",
    price_per_hour=f"{_PRICE}no public list price of GB300 NVL72 instances found; priced as the GB200 "
    f"NVL72's $20.97 per GPU-hour, the ratio of {_COREWEAVE}",
)
_DELL_B300 = _mlperf("5.1", "Dell/systems/1xXE9780x8B300-SXM-270GB.json")
_HGX_B300_SOURCES = _gpu_sources(
    cite("hgx") + ", HGX B300" + _HGX_PER_GPU,
    _B200_L2 + " (a B300 taken as the B200)",
    devices=f"8 B300 per node, {_DELL_B300}",
    hbm_bytes=f"{cite('hgx')} (HGX B300 up to 2.3 TB / 8 GPUs = 288 GB); '275040 MiB' = 288.4 GB, "
    + _DELL_B300,
    hbm_bw=f"{_APPROX}: 8 TB/s, the B200's (HBM3e, 8 stacks); the HGX datasheet, {cite('hgx')}, gives the "
    "HGX B300's capacity, not its bandwidth per GPU",
    power_w=f"{_APPROX}: the HGX datasheet gives no per-GPU power, {cite('hgx')}; 1.1 kW, a B300's maximum "
    "TDP as https://verda.com/blog/gb300-nvl72-architecture (2025) lists it",
    intra_node_bw=f"{cite('hgx')} (NVSwitch GPU-to-GPU bandwidth 1.8 TB/s both directions; halved per "
    f"direction); the system JSON leaves accelerator_interconnect empty, {_DELL_B300}",
    host_link_bw=f"{_APPROX}: PCIe Gen5 x16, 128 GB/s both directions, halved per direction: the hosts, 2 "
    f"Xeon 6767P ({_DELL_B300}), are PCIe 5.0 (the B300's own Gen6 link is not in the HGX datasheet, "
    f"{cite('hgx')})",
    host_mem_bytes=f"'3.9 TB', {_DELL_B300}",
    host_mem_bw=f"{_APPROX}: "
    + _ddr(
        2,
        8,
        6400,
        f"2 Xeon 6767P ({_DELL_B300}), 8 DDR5-6400 channels each (Intel's Xeon 6700P "
        "specification; the JSON gives no memory speed)",
    ),
    nic_bw=f"{_APPROX}: the system JSON lists no network (a single-node run), {_DELL_B300}; the HGX B300's "
    f"networking bandwidth 1.6 TB/s (both directions: 8 x 800 Gb/s ConnectX-8), {cite('hgx')}; {_NIC}, "
    "800 Gb/s = 100 GB/s",
    host_power_w=_APPROX + ": 2 Xeon sockets, 3.9 TB of DDR5, NICs, NVSwitches and fans, ~2.5 kW",
    price_per_hour=f"{_PRICE}no public list price of B300 instances found; priced as the B200 (the same "
    f"dense peaks in the HGX datasheet): {_B200_PRICE}{_COREWEAVE}",
)
_XFUSION_L40S = _mlperf("3.1", "xFusion/systems/G5500V7x8xL40S.json")
_XFUSION_L40 = _mlperf("3.1", "xFusion/systems/G5500V7x8L40.json")
_PCIE4 = "PCIe Gen4 x16, 64 GB/s both directions, 32 GB/s per direction"


def _pcie_node_sources(datasheet: str, json: str, **extra: str) -> dict[str, str]:
    """Sources of a PCIe GPU server without NVSwitch (L40S, L40, A40): collectives inside it
    cross the GPUs' PCIe links."""
    base = {
        "devices": f"8 GPUs per node, {json}",
        "intra_node_bw": f"no NVLink: {datasheet}; collectives cross the GPUs' PCIe links ({_PCIE4})",
        "host_link_bw": f"{datasheet} (PCIe Gen4 x16 64 GB/s both directions; halved per direction); 'PCIe "
        f"4.0x16', {json}",
        "host_mem_bytes": f"'1024 GB' (16 x 64GB DDR5), {json}",
        "host_mem_bw": _ddr(
            2,
            8,
            4800,
            f"'16 x 64GB DDR5 4800 MHz' on 2 Xeon Platinum 8480+ (8 DDR5-4800 channels each, "
            f"{cite('xeon8480')}), {json}",
        ),
        "nic_bw": f"{_APPROX}: the system JSON lists no network (a single-node run), {json}; modeled as one "
        f"100 Gb/s NIC; {_NIC}",
        "host_power_w": _APPROX + ": 2 Xeon sockets, DRAM, NICs and fans, ~1 kW",
    }
    return _gpu_sources(datasheet, f"{_APPROX}: the AD102 die's 96 MB L2, {cite('ada')}", **{**base, **extra})


_L40S_SOURCES = _pcie_node_sources(
    cite("l40s"),
    _XFUSION_L40S,
    price_per_hour=_PRICE + "AWS g6e.48xlarge (8x L40S) on-demand $30.131/h in us-east-1 / 8 = $3.77 per "
    "GPU-hour, https://aws.amazon.com/ec2/instance-types/g6e/ (list price 2024-2025, not re-read for this: "
    "approximate; 2026-12-01)",
)
_L40_SOURCES = _pcie_node_sources(
    cite("l40"),
    _XFUSION_L40,
    price_per_hour=f"{_PRICE}the H100 SXM's $12.29 x (10.00 / 8) / (49.24 / 8) = $2.50 per GPU-hour, the "
    f"ratio of {_COREWEAVE}",
)
_IEI_A40 = _mlperf("3.0", "IEI/systems/nf5468m6_hugectr.json")
_A40_SOURCES = _pcie_node_sources(
    cite("a40"),
    _IEI_A40,
    llc_bytes="6 MB L2 of the GA102 die, " + cite("ga102"),
    intra_node_bw=f"{_APPROX}: the system JSON leaves accelerator_interconnect empty, {_IEI_A40}; an A40's "
    f"NVLink bridge joins a pair (112.5 GB/s both directions, {cite('a40')}), which an all-to-all among 8 "
    f"GPUs mostly does not use: modeled as the PCIe path ({_PCIE4})",
    host_link_bw=f"{cite('a40')} (PCIe Gen4 x16 64 GB/s both directions; halved per direction)",
    host_mem_bytes=f"'2TB' ('32 x 64GB DDR4 3200 MT/s'), {_IEI_A40}",
    host_mem_bw=_ddr(
        2,
        8,
        3200,
        f"'32 x 64GB DDR4 3200 MT/s' on 2 Xeon Platinum 8380 (Ice Lake: 8 DDR4 channels each), {_IEI_A40}",
    ),
    price_per_hour=_PRICE
    + "no A40 in today's public lists; the A100 80 GB's $5.12 x 1.28 / 2.21 = $2.97 per "
    "GPU-hour, the ratio of CoreWeave's A40 ($1.28/h) and A100 80GB NVLink ($2.21/h) on-demand prices of "
    "2023, https://www.coreweave.com/pricing (not re-read for this: approximate; 2026-12-01)",
)
_INTEL_SPR = _mlperf("3.1", "Intel/systems/4-nodes-SPR-pytorch.json")
_SPR_BW = _ddr(
    2,
    8,
    4800,
    f"'16 slots / 64GB each / 4800 MT/s' on 2 Xeon Platinum 8480+ (8 DDR5-4800 channels each, "
    f"{cite('xeon8480')}), {_INTEL_SPR}",
)
_SPR_SOURCES = {
    "devices": f"one trainer per node (the node is the device; MLPerf's run used 4 nodes), {_INTEL_SPR}",
    "peak_flops": f"computed (approximate): 2 sockets x 56 cores x 2.0 GHz base clock ({cite('xeon8480')}) x "
    f"1024 bf16 FLOP per cycle per core with AMX ({cite('amx')}) = 229 TFLOP/s bf16; fp32 at 64 FLOP per "
    "cycle per core (AVX-512, 2 FMA units) = 14.3 TFLOP/s; no published AMX or AVX-512 clock, so the base "
    "clock is assumed",
    "hbm_bytes": f"'1024GB' host memory, {_INTEL_SPR}",
    "host_mem_bytes": f"'1024GB' host memory, {_INTEL_SPR}",
    "hbm_bw": _SPR_BW,
    "host_mem_bw": _SPR_BW,
    "host_link_bw": "modeling assumption: the CPU is the device, its 'link to the host' its own DRAM, "
    + _SPR_BW,
    "intra_node_bw": "modeling assumption: one trainer per node, nothing crosses inside it; its DRAM, "
    + _SPR_BW,
    "nic_bw": f"{_APPROX}: 'Intel(R) Corporation Ethernet Controller E810-C for QSFP', {_INTEL_SPR}, an "
    f"adapter of up to 100 Gb/s; {_NIC}",
    "power_w": "TDP 350 W x 2 sockets, " + cite("xeon8480"),
    "llc_bytes": "105 MB L3 per socket, 2 sockets, " + cite("xeon8480"),
    "gemm_max_efficiency": _GEMM + " (as cpu_cluster)",
    "gemm_half_dim": _GEMM + " (CPUs saturate at smaller shapes)",
    "gather_efficiency": _GATHER + " (as cpu_cluster)",
    "gather_half_row_bytes": _GATHER,
    "op_overhead_s": _OP,
    "step_overhead_s": _APPROX + ": as cpu_cluster, ~0.5 ms per step",
    "collective_latency_s": _APPROX + ": TCP/Ethernet round trip (as cpu_cluster)",
    "sort_rate": _APPROX + ": ~10 M pairs/s per core (as cpu_cluster) x 112 cores",
    "llc_speedup": _APPROX + ": an L3 hit costs ~1/4 of a DRAM access for random rows (as cpu_cluster)",
    "host_power_w": _APPROX + ": the rest of the node, as cpu_cluster",
    "bag_seconds_per_byte": "modeling assumption: 0 until calibrated on such a CPU (as cpu_cluster)",
    "silu_seconds": "modeling assumption: 0 until calibrated on such a CPU (SiLU passes priced by bytes)",
    "update_efficiency": _UPDATE_ASSUMED,
    "price_per_hour": _PRICE + "AWS m7i.48xlarge (2 Sapphire Rapids sockets, 192 vCPUs, 768 GiB) on-demand "
    "$9.6768/h in us-east-1 per node-hour, https://aws.amazon.com/ec2/instance-types/m7i/ (list price "
    "2023-2025, not re-read for this: approximate; 2026-12-01)",
}
_THIS_MACHINE_SOURCES = {
    "update_efficiency": _UPDATE_ASSUMED,
    "peak_flops": _DEV + "~200 GFLOP/s fp32 matmul",
    "hbm_bw": _DEV + "~90 GB/s streaming copy (bytes read + written)",
    "gather_efficiency": _DEV + "random embedding-bag gather ~23 GB/s of 90",
    "power_w": _APPROX + ": 2 cores of a server CPU",
    "op_overhead_s": _OP,
    "collective_latency_s": _DEV + "gloo all-to-all and all-reduce among 2-4 local processes, each call "
    "after a burst of compute as in a step, ~1 ms a step (recnb calibrate --collectives, 2026-12-01; "
    "back to back 350-530 us)",
    "intra_node_bw": _DEV + "gloo between local processes over 127.0.0.1, 1.1-1.4 GB/s (recnb calibrate "
    "--collectives, 2026-12-01)",
    "price_per_hour": _PRICE + "2 vCPUs at c5.2xlarge's $0.34/h for 8 = $0.085 per hour, " + _AWS_C5,
}


def _cpu_trainer(
    name: str,
    desc: str,
    *,
    peak_flops: dict[str, float],
    memory: float,
    dram_bw: float,
    nic: float,
    power: float,
    sort_rate: float,
    llc: float,
    price: float,
    sources: dict[str, str],
) -> Hardware:
    """A dual-socket CPU trainer, the node its one device: its DRAM (``memory``, ``dram_bw``) holds
    the tables and the model, and stands for the link to the host and inside the node. The software
    constants (overheads, GEMM and gather efficiency, latency over TCP) are the same for each."""
    return Hardware(
        name=name, kind="cpu", devices=1, peak_flops=peak_flops, hbm_bytes=memory, hbm_bw=dram_bw,
        host_mem_bytes=memory, host_mem_bw=dram_bw, host_link_bw=dram_bw, intra_node_bw=dram_bw, nic_bw=nic,
        collective_latency_s=50e-6, op_overhead_s=10e-6, step_overhead_s=0.5e-3, gemm_max_efficiency=0.7,
        gemm_half_dim=16.0, gather_efficiency=0.35, gather_half_row_bytes=64.0, power_w=power,
        host_power_w=150.0, sort_rate=sort_rate, llc_bytes=llc, llc_speedup=4.0, price_per_hour=price,
        sources=sources, description=desc,
    )  # fmt: skip


def _cpu_presets() -> list[Hardware]:
    """The CPU trainers: the cluster GPUs replaced (Skylake-SP) and Intel's MLPerf submission's."""
    # Dual-socket Skylake-SP trainer (Xeon Gold 6138: 20 cores, AVX-512 with 2 FMA units = 64 fp32 FLOP/cycle
    # per core at ~1.6 GHz AVX-512 clock): 2 x 20 x 64 x 1.6e9 = 4.1 TFLOP/s; 6 x DDR4-2666 per socket.
    cluster = _cpu_trainer(
        "cpu_cluster", "CPU training cluster: dual-socket Skylake-SP trainers; tables on sparse parameter "
        "servers and MLP weights on dense parameter servers over 25 Gb/s Ethernet",
        peak_flops={"fp32": 4.1e12}, memory=256 * GB, dram_bw=2 * 128 * GB, nic=25e9 / 8, power=2 * 125.0,
        sort_rate=0.4e9, llc=2 * 27.5e6, price=3.06, sources=_CPU_CLUSTER_SOURCES,
    )  # fmt: skip
    # Dual-socket Sapphire Rapids trainer (Xeon Platinum 8480+: 56 cores, 2.0 GHz base, AMX 1024 bf16
    # FLOP/cycle per core): 2 x 56 x 1024 x 2.0e9 = 229 TFLOP/s bf16; 8 DDR5-4800 channels per socket.
    spr = _cpu_trainer(
        "spr_node", "Sapphire Rapids CPU trainer (Intel's DLRM-DCNv2 submission): 2x Xeon Platinum 8480+, "
        "AMX bf16, 1 TB DDR5-4800, 100 Gb/s Ethernet; the node is the device",
        peak_flops={"fp32": 2 * 56 * 64 * 2.0e9, "bf16": 2 * 56 * 1024 * 2.0e9}, memory=1024 * GB,
        dram_bw=2 * 8 * 4800e6 * 8, nic=100e9 / 8, power=2 * 350.0, sort_rate=112 * 10e6, llc=2 * 105e6,
        price=9.68, sources=_SPR_SOURCES,
    )  # fmt: skip
    return [cluster, spr]


#: The GPU nodes, one generation after another, each number cited in its ``sources`` (above).
_GPU_NODES: tuple[Hardware, ...] = (
    # ----- Volta: Facebook's V100 servers of the DLRM papers, Big Basin and Zion (terabytes of DRAM)
    _gpu(
        "big_basin", "Big Basin (OCP 2017): 8x V100 SXM2 16 GB, NVLink hybrid cube-mesh, PCIe to a "
        "dual-socket Xeon head node; tables that do not fit go to remote CPU parameter servers",
        fp32=15.7e12, tensor={"fp16": 125e12}, hbm=16 * GB, hbm_bw=0.90 * TB, nvlink=300 * GB, pcie=16 * GB,
        host_mem=256 * GB, host_bw=2 * 128 * GB, nic=12.5 * GB, power=300.0, host_power=800.0, l2=6e6,
        sources=_BIG_BASIN_SOURCES, price=3.06,
    ),
    _gpu(
        "zion", "Zion-like (OCP/Hot Chips 2019): 8 CPU sockets with terabytes of DDR for embedding tables "
        "plus 8 accelerators (modeled as V100-class) on their own fabric; PCIe switches between them",
        fp32=15.7e12, tensor={"fp16": 125e12}, hbm=32 * GB, hbm_bw=0.90 * TB, nvlink=300 * GB, pcie=16 * GB,
        host_mem=2000 * GB, host_bw=8 * 128 * GB, nic=4 * 12.5 * GB, power=300.0, host_power=8 * 150.0,
        l2=6e6, sources=_ZION_SOURCES, price=3.90, host_pools_embeddings=True,
    ),
    # ----- Ampere: A100 (40 and 80 GB, NVSwitch) and A40 (PCIe) nodes.
    _gpu(
        "dgx_a100", "DGX A100: 8x A100 SXM4 40 GB, NVLink 3 through NVSwitch, PCIe Gen4, 8x 200 Gb/s NICs",
        fp32=19.5e12, tensor=_tensor(156e12, 312e12), hbm=40 * GB, hbm_bw=1.555 * TB, nvlink=600 * GB,
        pcie=32 * GB, host_mem=1000 * GB, host_bw=2 * 204.8 * GB, nic=8 * 25 * GB, power=400.0,
        host_power=1500.0, l2=40e6, sources=_DGX_A100_SOURCES, price=4.10,
    ),
    _gpu(
        "a40_node", "A40 server: 8x A40 48 GB GDDR6 on PCIe Gen4 (NVLink bridges join pairs only), 2 Ice "
        "Lake sockets",
        fp32=37.4e12, tensor=_tensor(74.8e12, 149.7e12), hbm=48 * GB, hbm_bw=696 * GB, nvlink=None,
        pcie=32 * GB, host_mem=2000 * GB, host_bw=2 * 8 * 3200e6 * 8, nic=12.5 * GB, power=300.0,
        host_power=1000.0, l2=6e6, sources=_A40_SOURCES, price=2.97,
    ),
    _gpu(
        "dgx_a100_80gb", "DGX/HGX A100 80GB: 8x A100 SXM4 80 GB, NVLink 3 through NVSwitch, PCIe Gen4, "
        "8x 200 Gb/s NICs (MLPerf's A100 DLRM-DCNv2 systems: Dell XE9680, Juniper's 8 nodes)",
        fp32=19.5e12, tensor=_tensor(156e12, 312e12), hbm=80 * GB, hbm_bw=2.039 * TB, nvlink=600 * GB,
        pcie=32 * GB, host_mem=2000 * GB, host_bw=2 * 8 * 3200e6 * 8, nic=8 * 25 * GB, power=400.0,
        host_power=1500.0, l2=40e6, sources=_DGX_A100_80GB_SOURCES, price=5.12,
    ),
    # ----- Ada: L40 and L40S servers: 48 GB GDDR6 cards on PCIe, no NVLink.
    _gpu(
        "l40_node", "L40 server: 8x L40 48 GB GDDR6 on PCIe Gen4, no NVLink, 2 Sapphire Rapids sockets",
        fp32=90.5e12, tensor=_tensor(90.5e12, 181.05e12), hbm=48 * GB, hbm_bw=864 * GB, nvlink=None,
        pcie=32 * GB, host_mem=1024 * GB, host_bw=2 * 8 * 4800e6 * 8, nic=12.5 * GB, power=300.0,
        host_power=1000.0, l2=96e6, sources=_L40_SOURCES, price=2.50,
    ),
    _gpu(
        "l40s_node", "L40S server: 8x L40S 48 GB GDDR6 on PCIe Gen4, no NVLink, 2 Sapphire Rapids sockets",
        fp32=91.6e12, tensor=_tensor(183e12, 362.05e12), hbm=48 * GB, hbm_bw=864 * GB, nvlink=None,
        pcie=32 * GB, host_mem=1024 * GB, host_bw=2 * 8 * 4800e6 * 8, nic=12.5 * GB, power=350.0,
        host_power=1000.0, l2=96e6, sources=_L40S_SOURCES, price=3.77,
    ),
    # ----- Hopper: H100 (PCIe and SXM5) and H200 (NVL and SXM) nodes.
    _gpu(
        "h100_pcie_node", "H100 PCIe server: 8x H100 PCIe 80 GB on PCIe Gen5, no NVSwitch (NVLink bridges, "
        "where fitted, join pairs only), 2 Sapphire Rapids sockets, 25 Gb/s Ethernet",
        fp32=51e12, tensor=_tensor(378e12, 756e12), hbm=80 * GB, hbm_bw=2.0 * TB, nvlink=None, pcie=64 * GB,
        host_mem=1000 * GB, host_bw=2 * 8 * 4800e6 * 8, nic=25e9 / 8, power=350.0, host_power=1000.0,
        l2=50e6, sources=_H100_PCIE_SOURCES, price=10.24,
    ),
    _gpu(
        "dgx_h100", "DGX H100: 8x H100 SXM5 80 GB, NVLink 4 through NVSwitch, PCIe Gen5, 8x 400 Gb/s NICs",
        fp32=67e12, tensor=_tensor(495e12, 989e12), hbm=80 * GB, hbm_bw=3.35 * TB, nvlink=900 * GB,
        pcie=64 * GB, host_mem=2000 * GB, host_bw=2 * 307 * GB, nic=8 * 50 * GB, power=700.0,
        host_power=2000.0, l2=50e6, sources=_DGX_H100_SOURCES, price=12.29,
    ),
    _gpu(
        "h200_nvl_node", "H200 NVL server: 4x H200 NVL 141 GB (PCIe cards, 600 W) joined by a 4-way NVLink "
        "bridge, PCIe Gen5, 2 AMD EPYC 9965 sockets",
        fp32=60e12, tensor=_tensor(417.5e12, 835.5e12), hbm=141 * GB, hbm_bw=4.8 * TB, nvlink=900 * GB,
        pcie=64 * GB, host_mem=2200 * GB, host_bw=2 * 12 * 6400e6 * 8, nic=2 * 50 * GB, power=600.0,
        host_power=1200.0, l2=50e6, sources=_H200_NVL_SOURCES, price=11.26, devices=4,
    ),
    _gpu(
        "h200_node", "HGX H200 node: 8x H200 SXM 141 GB, NVLink 4, PCIe Gen5, 8x 400 Gb/s NICs",
        fp32=67e12, tensor=_tensor(494.5e12, 989e12), hbm=141 * GB, hbm_bw=4.8 * TB, nvlink=900 * GB,
        pcie=64 * GB, host_mem=2000 * GB, host_bw=2 * 307 * GB, nic=8 * 50 * GB, power=700.0,
        host_power=2000.0, l2=50e6, sources=_H200_SOURCES, price=13.52, gemm_max_efficiency=0.8,
    ),
    # ----- Blackwell: B200 and B300 (Blackwell Ultra) nodes, and the trays of GB200 and GB300 NVL72 racks.
    _gpu(
        "dgx_b200", "DGX/HGX B200: 8x B200 180 GB, NVLink 5 through NVSwitch, PCIe Gen5, 8x 400 Gb/s NICs",
        fp32=75e12, tensor=_tensor(1.125e15, 2.25e15), hbm=180 * GB, hbm_bw=8 * TB, nvlink=1800 * GB,
        pcie=64 * GB, host_mem=2000 * GB, host_bw=2 * 8 * 5600e6 * 8, nic=8 * 50 * GB, power=1000.0,
        host_power=2500.0, l2=126.5e6, sources=_DGX_B200_SOURCES, price=17.17,
    ),
    # NVL72 racks: the node is a compute tray of 4 GPUs, the NVLink domain the rack's 72 (nvlink_domain).
    _gpu(
        "gb200_nvl72", "GB200 NVL72 compute tray: 4 Blackwell GPUs and 2 Grace CPUs (NVLink-C2C), a 400 Gb/s "
        "NIC per GPU; 18 trays share one NVLink 5 domain of 72 GPUs through the rack's NVLink switch trays "
        "(MLPerf's 4-GPU 'nodes': 16 trays = gpus=4, nodes=16, all over NVLink)",
        fp32=80e12, tensor=_tensor(1.25e15, 2.5e15), hbm=186 * GB, hbm_bw=8 * TB, nvlink=1800 * GB,
        pcie=225 * GB, host_mem=2 * 480 * GB, host_bw=2 * 512 * GB, nic=4 * 50 * GB, power=1200.0,
        host_power=15000.0 / 18, l2=126.5e6, sources=_GB200_SOURCES, price=20.97, devices=4, nvlink_domain=72,
    ),
    _gpu(
        "gb300_nvl72", "GB300 NVL72 compute tray: 4 Blackwell Ultra GPUs (288 GB HBM3e) and 2 Grace CPUs, an "
        "800 Gb/s ConnectX-8 NIC per GPU; 18 trays share one NVLink 5 domain of 72 GPUs",
        fp32=80e12, tensor=_tensor(1.25e15, 2.5e15), hbm=288 * GB, hbm_bw=8 * TB, nvlink=1800 * GB,
        pcie=225 * GB, host_mem=2 * 480 * GB, host_bw=2 * 512 * GB, nic=4 * 100 * GB, power=1400.0,
        host_power=15000.0 / 18, l2=126.5e6, sources=_GB300_SOURCES, price=20.97, devices=4, nvlink_domain=72,
    ),
    _gpu(
        "hgx_b300", "HGX B300: 8x B300 (Blackwell Ultra) 288 GB, NVLink 5 through NVSwitch, 8x 800 Gb/s "
        "NICs, 2 Xeon 6 sockets",
        fp32=75e12, tensor=_tensor(1.125e15, 2.25e15), hbm=288 * GB, hbm_bw=8 * TB, nvlink=1800 * GB,
        pcie=64 * GB, host_mem=3900 * GB, host_bw=2 * 8 * 6400e6 * 8, nic=8 * 100 * GB, power=1100.0,
        host_power=2500.0, l2=126.5e6, sources=_HGX_B300_SOURCES, price=17.17,
    ),
)  # fmt: skip


def _this_machine() -> Hardware:
    """This development machine before calibration (measured on it in 2026); `recnb calibrate`
    replaces it."""
    return Hardware(
        name="this_machine", kind="cpu", devices=1, peak_flops={"fp32": 250e9}, hbm_bytes=24 * GB,
        hbm_bw=90 * GB, host_mem_bytes=24 * GB, host_mem_bw=90 * GB, host_link_bw=90 * GB,
        intra_node_bw=1.2 * GB, nic_bw=1 * GB, collective_latency_s=1e-3, op_overhead_s=8e-6,
        step_overhead_s=0.1e-3, gemm_max_efficiency=0.8, gemm_half_dim=16.0, gather_efficiency=0.25,
        gather_half_row_bytes=64.0, power_w=30.0, host_power_w=0.0, sort_rate=50e6, price_per_hour=0.085,
        sources=_THIS_MACHINE_SOURCES,
        description="the machine this runs on (uncalibrated defaults: run `recnb calibrate`)",
    )  # fmt: skip


#: Every preset by name: the CPU trainers, the GPU nodes by generation (Volta, Ampere, Ada, Hopper,
#: Blackwell), then this machine.
HARDWARE: dict[str, Hardware] = {hw.name: hw for hw in (*_cpu_presets(), *_GPU_NODES, _this_machine())}
