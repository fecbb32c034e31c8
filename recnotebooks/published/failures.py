"""How often large training jobs are interrupted, as their operators published it (nothing
modeled): the failure rate :mod:`recnotebooks.perf.checkpointing` plans checkpoints against.

A synchronous training job stops when any one of its devices, hosts, links or switches fails,
so its mean time between failures (MTBF) is a device's divided by the number of devices: a
job of ``n`` GPUs fails ``n`` times as often as one GPU. :class:`PublishedInterruptions` holds
one published count of a job's unexpected interruptions over a period, and
:attr:`~PublishedInterruptions.mtbf_per_gpu_s` turns it into the MTBF of one GPU's share of
the cluster (every cause counted: GPUs, memory, hosts, network, software).
"""

from __future__ import annotations

from dataclasses import dataclass

from recnotebooks.checks import check_float, check_int, check_str

__all__ = ["LLAMA3_405B", "PublishedInterruptions"]

DAY_S = 86_400.0


@dataclass(frozen=True)
class PublishedInterruptions:
    """A job of ``gpus`` GPUs, observed for ``days``, interrupted ``unexpected`` times by
    failures (planned maintenance not counted); ``source`` says where it was published."""

    name: str
    gpus: int
    days: float
    unexpected: int
    source: str

    def __post_init__(self) -> None:
        check_str("name", self.name)
        check_int("gpus", self.gpus, lo=1)
        check_float("days", self.days, lo=0.0, lo_open=True)
        check_int("unexpected", self.unexpected, lo=1)
        check_str("source", self.source)

    @property
    def job_mtbf_s(self) -> float:
        """Seconds between the job's unexpected interruptions, on average."""
        return self.days * DAY_S / self.unexpected

    @property
    def mtbf_per_gpu_s(self) -> float:
        """The MTBF of one GPU's share of the cluster: the job's, times its GPUs."""
        return self.job_mtbf_s * self.gpus


#: Llama 3 405B's pre-training on 16,384 H100 GPUs: 419 unexpected interruptions in a 54-day
#: snapshot (466 in all; 47 planned), about one every 3.1 hours; 78% were confirmed or
#: suspected hardware (GPU 30.1%, HBM3 17.2%, ...). One GPU's share: about 5.8 years between
#: failures.
LLAMA3_405B = PublishedInterruptions(
    name="Llama 3 405B pre-training (16,384 x H100)",
    gpus=16_384,
    days=54.0,
    unexpected=419,
    source="Llama Team, AI @ Meta, 'The Llama 3 Herd of Models', arXiv:2407.21783 (2024), "
    "section 3.3.4 Reliability and Operational Challenges, Table 5",
)
