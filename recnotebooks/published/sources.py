"""The public documents the efficiency model cites, each with its title and address.

Every hardware number in :mod:`recnotebooks.perf.hardware_presets` and every published run in
:mod:`recnotebooks.published.runs` names its source with :func:`cite`, so a reader can look
the number up: vendor datasheets and whitepapers, the talks and papers that describe the
servers of the seed paper's story, and the repositories whose constants or figures we use.
"""

from __future__ import annotations

__all__ = ["DOCUMENTS", "cite"]

_FB = "https://engineering.fb.com"
_NV = "https://www.nvidia.com/en-us/data-center"

#: Short key -> "title (publisher or venue, year), address".
DOCUMENTS: dict[str, str] = {
    # accelerators and nodes
    "v100": f"NVIDIA Tesla V100 GPU datasheet (NVIDIA, 2018), {_NV}/v100/",
    "volta": "NVIDIA Tesla V100 GPU Architecture whitepaper (NVIDIA, 2017), "
    "https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf",
    "a100": f"NVIDIA A100 Tensor Core GPU datasheet (NVIDIA, 2020), {_NV}/a100/",
    "ampere": "NVIDIA A100 Tensor Core GPU Architecture whitepaper (NVIDIA, 2020), "
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf",
    "h100": f"NVIDIA H100 Tensor Core GPU datasheet (NVIDIA, 2022), {_NV}/h100/",
    "hopper": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (NVIDIA, 2022), "
    "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper",
    "h200": f"NVIDIA H200 Tensor Core GPU datasheet (NVIDIA, 2024), {_NV}/h200/",
    "dgx_a100": f"NVIDIA DGX A100 datasheet (NVIDIA, 2020), {_NV}/dgx-a100/",
    "dgx_h100": f"NVIDIA DGX H100 datasheet (NVIDIA, 2022), {_NV}/dgx-h100/",
    "xeon6138": "Intel Xeon Gold 6138 Processor specifications (Intel ARK), https://ark.intel.com/content/"
    "www/us/en/ark/products/120476/intel-xeon-gold-6138-processor-27-5m-cache-2-00-ghz.html",
    # the accelerators of MLPerf Training's DLRM-DCNv2 results (v3.0-v5.1) and their nodes
    "a40": f"NVIDIA A40 GPU datasheet (NVIDIA, 2020), {_NV}/a40/",
    "ga102": "NVIDIA Ampere GA102 GPU Architecture whitepaper (NVIDIA, 2020), "
    "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf",
    "l40": f"NVIDIA L40 GPU datasheet (NVIDIA, 2022), {_NV}/l40/",
    "l40s": f"NVIDIA L40S GPU datasheet (NVIDIA, 2023), {_NV}/l40s/",
    "ada": "NVIDIA Ada GPU Architecture whitepaper (NVIDIA, 2022), "
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
    "hgx": f"NVIDIA HGX platform datasheet: HGX B300 and HGX B200 specifications (NVIDIA, 2025), {_NV}/hgx/",
    "dgx_b200": f"NVIDIA DGX B200 datasheet (NVIDIA, 2024), {_NV}/dgx-b200/",
    "dgx_b200_guide": "NVIDIA DGX B200 User Guide, hardware overview (NVIDIA, 2025), "
    "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html",
    "gb200_nvl72": "NVIDIA GB200 NVL72 datasheet: GB200 NVL72 and GB200 Grace Blackwell Superchip "
    f"specifications (NVIDIA, 2024), {_NV}/gb200-nvl72/",
    # GB300 NVL72: the two pages read (not NVIDIA's own page); they agree where both give a figure
    "verda_gb300": "NVIDIA GB300 NVL72: GPU Architecture & Performance, the per-GPU specifications of GB300, "
    "GB200, B300 and B200 and the GB300 rack's aggregates, tabled (Verda, 2025), "
    "https://verda.com/blog/gb300-nvl72-architecture",
    "lockwood_b300": "B300 (Blackwell Ultra) and GB300 NVL72, NVIDIA's announced specifications collected "
    "(Glenn K. Lockwood, digital garden, 2025), https://glennklockwood.com/garden/processors/B300",
    "b200_props": "A B200's device properties as CUDA reports them (L2 cache 126.50 MB, 7680-bit memory "
    "bus), pytorch/ao pull request 4002 (2026), https://github.com/pytorch/ao/pull/4002",
    "xeon8480": "Intel Xeon Platinum 8480+ Processor specifications (Intel ARK), https://www.intel.com/content/"
    "www/us/en/products/sku/231746/intel-xeon-platinum-8480-processor-105m-cache-2-00-ghz/specifications.html",
    "amx": "Advanced Matrix Extensions: a 4th Gen Xeon Scalable core performs 1024 BF16 operations per cycle "
    "(Wikipedia, citing Intel's AMX documentation), https://en.wikipedia.org/wiki/Advanced_Matrix_Extensions",
    # the servers of the seed paper's story
    "big_basin": "Introducing Big Basin: our next-generation AI hardware (Facebook Engineering, OCP Summit "
    f"2017), {_FB}/2017/03/08/data-center-engineering/introducing-big-basin-our-next-generation-ai-hardware/",
    "zion": "Zion: Facebook next-generation large-memory unified training platform (Hot Chips 31, 2019), "
    "and Naumov et al., Deep Learning Training in Facebook Data Centers: Design of Scale-up and Scale-out "
    "Systems (2020, https://arxiv.org/abs/2003.09518)",
    "seed": "Acun et al., Understanding Training Efficiency of Deep Learning Recommendation Models at Scale "
    "(HPCA 2021, https://arxiv.org/abs/2011.05497)",
    "neo": "Mudigere et al., Software-Hardware Co-design for Fast and Scalable Training of Deep Learning "
    "Recommendation Models (ZionEX, ISCA 2022, https://arxiv.org/abs/2104.05158)",
    # models, software and published runs
    "dlrm_paper": "Naumov et al., Deep Learning Recommendation Model for Personalization and Recommendation "
    "Systems (2019, https://arxiv.org/abs/1906.00091)",
    "deeprecsys": "Gupta et al., DeepRecSys: A System for Optimizing End-To-End At-scale Neural "
    "Recommendation Inference (ISCA 2020, https://arxiv.org/abs/2001.02772)",
    "torchrec": "TorchRec, PyTorch's recommendation library (README), https://github.com/pytorch/torchrec",
    "torchrec_planner": "TorchRec planner constants (pytorch/torchrec), "
    "https://github.com/pytorch/torchrec/blob/main/torchrec/distributed/planner/constants.py",
    "torchrec_benchmarks": "TorchRec benchmarks for EmbeddingBag: EBC vs fused EBC, UVM and UVM caching "
    "(pytorch/torchrec), https://github.com/pytorch/torchrec/blob/main/benchmarks/README.md",
    "torchrec_dlrm": "TorchRec DLRM example README (facebookresearch/dlrm), "
    "https://github.com/facebookresearch/dlrm/blob/main/torchrec_dlrm/README.MD",
    "nvidia_dlrm": "NVIDIA DLRM for PyTorch (DeepLearningExamples README), "
    "https://github.com/NVIDIA/DeepLearningExamples/tree/master/PyTorch/Recommendation/DLRM",
}


def cite(key: str) -> str:
    """The citation of document ``key`` of :data:`DOCUMENTS` (a ``KeyError`` names the known keys)."""
    if key not in DOCUMENTS:
        raise KeyError(f"no document {key!r}; known: {sorted(DOCUMENTS)}")
    return DOCUMENTS[key]
