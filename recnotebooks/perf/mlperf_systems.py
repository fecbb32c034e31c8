"""The systems of MLPerf Training's DLRM-DCNv2 results and the hardware presets that model them.

Every accelerator in MLPerf Training's DLRM-DCNv2 results (v3.0-v5.1) has a preset in
:mod:`recnotebooks.perf.hardware`, its links, host memory and NICs cited from a submission's
system description (``systems/<system>.json``). :func:`preset_for_accelerator` and
:func:`mlperf_layout` read such a description's accelerator name and counts
(:data:`MLPERF_ACCELERATORS`; a CPU-only system by its host processor, :data:`MLPERF_CPU_HOSTS`)
and say which preset, how many GPUs and how many nodes model it. An NVL72 rack's preset
(``gb200_nvl72``, ``gb300_nvl72``: :data:`RACK_PRESETS`) is a 4-GPU compute tray, as MLPerf's
"nodes" are, in an NVLink domain of 72 (``Hardware.nvlink_domain``): MLPerf's 16 trays of 4 are
``gpus=4, nodes=16`` in one domain, and the cost model sends their traffic over NVLink.
"""

from __future__ import annotations

import re

from recnotebooks.checks import check_int, check_str, parse_int, show
from recnotebooks.perf.hardware import HARDWARE
from recnotebooks.plan import MAX_RANKS

__all__ = [
    "MLPERF_ACCELERATORS",
    "MLPERF_CPU_HOSTS",
    "RACK_PRESETS",
    "mlperf_layout",
    "preset_for_accelerator",
]

#: Each ``accelerator_model_name`` of the DLRM-DCNv2 systems of MLPerf Training v3.0-v5.1
#: (``<submitter>/systems/<system>.json`` of ``mlcommons/training_results_v3.0`` ... ``v5.1``) and
#: the preset that models its node. 4-GPU HGX H100 nodes (Dell XE8640/XE9640, Supermicro
#: SYS-421GU, Fujitsu GX2560M7) are ``gpus=4`` of ``dgx_h100``; MLPerf's GB200 and GB300 "nodes" are
#: the 4-GPU trays of NVL72 racks, the nodes of ``gb200_nvl72`` and ``gb300_nvl72``
#: (:func:`mlperf_layout`). "NVIDIA Blackwell Ultra GPU (GB300)": NVIDIA's and Lambda's GB300 systems
#: of MLPerf Training v5.1 (training_results_v5.1 at 441d65f4:
#: https://github.com/mlcommons/training_results_v5.1/blob/441d65f4/NVIDIA/systems/theia_ngpu72_ngc25.09_nemo.json,
#: https://github.com/mlcommons/training_results_v5.1/blob/441d65f4/Lambda/systems/gb300_n18_ngc25.04_nemo.json);
#: "NVIDIA GB200": the name MLPerf Inference's GB200 NVL72 systems give, 4 accelerators per node (e.g.
#: Crusoe's in MLPerf Inference v6.1, read in the copy intel-ai-tce/inference_results_v6.1 at 5174fca8:
#: https://github.com/intel-ai-tce/inference_results_v6.1/blob/5174fca8/closed/Crusoe/systems/GB200-NVL72_GB200-186GB_aarch64x16_Dynamo.json).
MLPERF_ACCELERATORS: dict[str, str] = {
    "NVIDIA A40": "a40_node",
    "NVIDIA A100-SXM-80GB CTS": "dgx_a100_80gb",
    "NVIDIA A100-SXM4-80GB": "dgx_a100_80gb",
    "NVIDIA L40": "l40_node",
    "NVIDIA L40S": "l40s_node",
    "NVIDIA H100-PCIe-80GB": "h100_pcie_node",
    "NVIDIA H100-SXM5-80GB": "dgx_h100",
    "NVIDIA H200-NVL-141GB": "h200_nvl_node",
    "NVIDIA H200-SXM5-141GB": "h200_node",
    "NVIDIA Blackwell GPU (B200-SXM-180GB)": "dgx_b200",
    "NVIDIA Blackwell GPU (GB200)": "gb200_nvl72",
    "NVIDIA GB200": "gb200_nvl72",
    "NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)": "hgx_b300",
    "NVIDIA Blackwell Ultra GPU (GB300)": "gb300_nvl72",
}
#: A CPU-only system (``accelerator_model_name`` "N/A", 0 accelerators per node) is modeled by
#: its host processor (``host_processor_model_name``): the CPUs with a preset.
MLPERF_CPU_HOSTS: dict[str, str] = {
    "Intel Xeon Platinum 84xx (4th Gen Xeon Scalable: Sapphire Rapids)": "spr_node"
}
_CPU_PATTERNS = {"spr_node": r"xeon(\(r\))? platinum 84\d\d"}
_NO_ACCELERATOR = ("n/a", "none", "")


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def preset_for_accelerator(
    name: str, accelerators_per_node: int | str | None = None, host_processor: str | None = None
) -> str:
    """The preset that models an MLPerf system's node, from its system JSON's
    ``accelerator_model_name`` (:data:`MLPERF_ACCELERATORS`; case and spacing ignored) and,
    when given, its ``accelerators_per_node`` (an int or the JSON's string of digits, at most the
    preset's ``devices``). A CPU-only system (name ``"N/A"``, 0 accelerators) needs its
    ``host_processor_model_name`` (:data:`MLPERF_CPU_HOSTS`). ``ValueError`` naming the
    parameter, its value and what is allowed for anything else:

    >>> preset_for_accelerator("NVIDIA H100-SXM5-80GB", "8")
    'dgx_h100'
    """
    check_str("name", name, nonempty=False)
    if _normal(name) in _NO_ACCELERATOR:
        if accelerators_per_node is not None and _count("accelerators_per_node", accelerators_per_node) != 0:
            raise ValueError(
                f"accelerators_per_node must be 0 for a CPU-only system (name {name!r}), "
                f"got {show(accelerators_per_node)}"
            )
        if host_processor is None:
            raise ValueError(
                f"host_processor must name the host CPU of a CPU-only system (name {name!r}), "
                f"one of {list(MLPERF_CPU_HOSTS)}, got None"
            )
        check_str("host_processor", host_processor)
        for preset_name in MLPERF_CPU_HOSTS.values():
            if re.search(_CPU_PATTERNS[preset_name], _normal(host_processor)):
                return preset_name
        raise ValueError(
            f"host_processor must be one of {list(MLPERF_CPU_HOSTS)} (the CPUs with a preset), "
            f"got {host_processor!r}"
        )
    known = {_normal(k): v for k, v in MLPERF_ACCELERATORS.items()}
    if _normal(name) not in known:
        raise ValueError(
            f"name must be an accelerator of MLPerf's DLRM-DCNv2 systems, one of "
            f"{list(MLPERF_ACCELERATORS)} (or 'N/A' for a CPU-only system), got {name!r}"
        )
    preset_name = known[_normal(name)]
    if accelerators_per_node is not None:
        devices = HARDWARE[preset_name].devices
        n = _count("accelerators_per_node", accelerators_per_node, lo=1)
        if n > devices:
            raise ValueError(
                f"accelerators_per_node must be <= {devices} (devices per {preset_name} node, "
                f"the preset of {name!r}), got {show(accelerators_per_node)}"
            )
    return preset_name


def _count(param: str, value: object, lo: int = 0) -> int:
    """An int, or a system JSON's string of ASCII digits, at least ``lo``."""
    if isinstance(value, str):
        return parse_int(param, value.strip(), lo=lo, hi=MAX_RANKS)
    return check_int(param, value, lo=lo, hi=MAX_RANKS)


#: The presets of NVL72 racks: a node is a compute tray of 4 GPUs, the NVLink domain the rack's 72.
RACK_PRESETS = ("gb200_nvl72", "gb300_nvl72")


def mlperf_layout(
    name: str,
    accelerators_per_node: int | str,
    number_of_nodes: int | str,
    host_processor: str | None = None,
) -> tuple[str, int, int]:
    """``(preset, gpus, nodes)`` that model an MLPerf system (``estimate(config, preset,
    gpus=gpus, nodes=nodes, ...)``), from its system JSON's fields: the preset of
    :func:`preset_for_accelerator` with MLPerf's accelerators per node and nodes; on a rack preset
    (:data:`RACK_PRESETS`) MLPerf's nodes are its trays, in NVLink domains of 72 (16 trays of 4:
    ``("gb200_nvl72", 4, 16)``, one domain; the cost model finds the domain from the preset); a
    CPU-only system is one device per node."""
    preset_name = preset_for_accelerator(name, accelerators_per_node, host_processor)
    per_node = _count("accelerators_per_node", accelerators_per_node)
    nodes = _count("number_of_nodes", number_of_nodes, lo=1)
    if HARDWARE[preset_name].kind == "cpu":
        return preset_name, 1, nodes
    return preset_name, per_node, nodes
