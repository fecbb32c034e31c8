"""Training throughputs of DLRMs that their authors published: the TorchRec project, NVIDIA's
DLRM and the DLRM paper, and TorchRec's UVM-caching benchmark.

Each :class:`PublishedThroughput` is what a source reported: samples per second of a training
run on so many GPUs (or one CPU server) at a global batch, and where to read it. How the model
is set up to match each run (its model, hardware, precision and software) and the comparison are
the model's: :mod:`recnotebooks.perf.mlperf_setup` and :mod:`recnotebooks.perf.compare`. MLPerf's
results are in :mod:`recnotebooks.published.mlperf_results`.
"""

from __future__ import annotations

from dataclasses import dataclass

from recnotebooks.checks import check_float, check_int, check_str
from recnotebooks.published.sources import cite

__all__ = [
    "PUBLISHED_THROUGHPUTS",
    "PublishedThroughput",
    "TORCHREC_README_ROWS",
    "TORCHREC_UVM",
    "TORCHREC_UVM_SOURCE",
]


@dataclass(frozen=True)
class PublishedThroughput:
    """One published training throughput: ``samples_per_s`` of the whole run (``gpus`` per node
    on ``nodes`` nodes, one for a CPU server) at a global ``batch_size``, from ``source``."""

    label: str  #: short: who, where, @global batch
    source: str
    gpus: int
    batch_size: int
    samples_per_s: float
    nodes: int = 1

    def __post_init__(self) -> None:
        check_str("label", self.label)
        check_str("source", self.source)
        check_int("gpus", self.gpus, lo=1)
        check_int("batch_size", self.batch_size, lo=1)
        check_float("samples_per_s", self.samples_per_s, lo=0.0, lo_open=True)
        check_int("nodes", self.nodes, lo=1)


_TR = "TorchRec DLRM on 8x A100 40GB, published by the TorchRec project: " + cite("torchrec")
_TRR = cite("torchrec_dlrm") + " (AWS p4d.24xlarge, A100 40GB, CUDA 11.0, NCCL 2.10.3)"
_NV = "1x V100 32GB, Criteo Terabyte, dim 128: " + cite("nvidia_dlrm")
_DP = "1000 batches of 2048 of its benchmark config, Caffe2: " + cite("dlrm_paper")

#: Every published throughput the model is compared with (beside MLPerf's), in the order of
#: :data:`recnotebooks.perf.mlperf_setup.PUBLISHED_RUNS`. The DLRM paper gives seconds per batch
#: of 2048 (0.062 s on one V100, 0.256 s on two Xeon 6138).
PUBLISHED_THROUGHPUTS: tuple[PublishedThroughput, ...] = (
    PublishedThroughput("TorchRec 8xA100 @2k", _TR, 8, 2048, 204_800.0),
    PublishedThroughput("TorchRec 8xA100 @16k", _TR, 8, 16384, 925_696.0),
    PublishedThroughput("TorchRec README 4xA100 @16k", _TRR, 4, 16384, 1_458_176.0),
    PublishedThroughput("TorchRec README 8xA100 @2k", _TRR, 8, 2048, 284_615.0),
    PublishedThroughput("TorchRec README 8xA100 @16k", _TRR, 8, 16384, 1_671_168.0),
    PublishedThroughput("TorchRec README 8xA100 @64k", _TRR, 8, 65536, 5_373_952.0),
    PublishedThroughput("NVIDIA 1xV100 FP32 @32k", _NV, 1, 32768, 494_000.0),
    PublishedThroughput("NVIDIA 1xV100 AMP @32k", _NV, 1, 32768, 875_000.0),
    PublishedThroughput("DLRM paper 1xV100 @2k", _DP, 1, 2048, 2048 / 0.062),
    PublishedThroughput("DLRM paper 2xXeon 6138 @2k", _DP, 1, 2048, 2048 / 0.256),
)

#: Table cardinalities of the TorchRec DLRM example's README runs (Criteo 1TB, 91.10 GB of
#: fp32 tables at dim 128): https://github.com/facebookresearch/dlrm/tree/main/torchrec_dlrm
TORCHREC_README_ROWS = (
    45833188,
    36746,
    17245,
    7413,
    20243,
    3,
    7114,
    1441,
    62,
    29275261,
    1572176,
    345138,
    10,
    2209,
    11267,
    128,
    4,
    974,
    14,
    48937457,
    11316796,
    40094537,
    452104,
    12606,
    104,
    35,
)

# ----- TorchRec's UVM / UVM-caching benchmark ----------------------------------------------------
#: TorchRec's benchmark of a UVM cache ("Full sized DLRM EMB w/ UVM/UVM-caching" in its benchmarks README,
#: https://github.com/pytorch/torchrec/blob/main/benchmarks/README.md, cited as ``torchrec_benchmarks`` in
#: :mod:`recnotebooks.published.sources`): seconds per epoch of 10 batches of 64 samples (its benchmark
#: script, https://github.com/pytorch/torchrec/blob/main/benchmarks/ebc_benchmarks.py), 26 tables of dim 128,
#: 64 ids per table and sample, SGD, one 16 GB V100; tables in host memory over UVM vs a UVM cache (load
#: factor 0.2) with the five largest tables halved.
TORCHREC_UVM = {"uvm_s": 0.62, "uvm_cache_s": 0.06, "batch_size": 64, "batches": 10, "pooling": 64}
TORCHREC_UVM_SOURCE = cite("torchrec_benchmarks")  #: where :data:`TORCHREC_UVM` was published
