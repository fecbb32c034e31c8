"""What :func:`recnotebooks.perf.cost.estimate` returns: :class:`CostResult`, one modeled
training step per rank by component, and the components' names (:data:`COMPONENTS`; the
compute and communication groups the overlapped step time uses)."""

from __future__ import annotations

from dataclasses import dataclass, field

from recnotebooks.perf.memory import MemoryReport
from recnotebooks.perf.plan import Plan

__all__ = ["COMMUNICATION", "COMPONENTS", "COMPUTE", "CostResult"]

#: The components of one step, in the order charts stack them.
COMPONENTS = ("data_loading", "host_to_device", "embedding_forward", "embedding_backward", "bottom_mlp",
              "interaction", "top_mlp", "dense_optimizer", "all_to_all", "all_reduce",
              "overhead")  # fmt: skip
COMPUTE = (
    "embedding_forward",
    "embedding_backward",
    "bottom_mlp",
    "interaction",
    "top_mlp",
    "dense_optimizer",
)
COMMUNICATION = ("host_to_device", "all_to_all", "all_reduce")


@dataclass
class CostResult:
    """Modeled cost of one training step; ``per_rank[r][component]`` in seconds."""

    config: str
    hardware: str
    world_size: int
    nodes: int
    batch_size: int
    dtype: str
    per_rank: list[dict[str, float]]
    step_time: float
    step_time_overlap: float
    throughput: float
    throughput_overlap: float
    busy_fraction: float
    flops_efficiency: float
    hbm_utilisation: float
    joules_per_million_samples: float
    memory: MemoryReport
    notes: list[str] = field(default_factory=list)
    source: str = "modeled"
    #: parameter-server nodes holding remote rows (their power is in the energy figures)
    parameter_servers: int = 0
    #: watts the step draws: devices, hosts and parameter servers
    power_w: float = 0.0
    #: the plan this result models (its notes say why each table is where it is)
    plan: Plan | None = None
    #: device-cache hit rate of each cached shard's table (typed in or modeled; the last
    #: shard's, for a table split over ranks)
    cache_hit_rates: dict[str, float] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def slowest_rank(self) -> int:
        return max(range(self.world_size), key=lambda r: sum(self.per_rank[r].values()))

    def breakdown(self) -> dict[str, float]:
        """Components of the slowest rank (what bounds the step)."""
        return dict(self.per_rank[self.slowest_rank])

    def table(self, **extra: object) -> list[dict[str, object]]:
        """Tidy rows ``{rank, component, seconds, share, source="modeled", **extra}``."""
        rows = []
        for r, comp in enumerate(self.per_rank):
            tot = sum(comp.values()) or 1.0
            rows += [{"rank": r, "component": c, "seconds": v, "share": v / tot, "source": self.source,
                      "hardware": self.hardware, **extra} for c, v in comp.items()]  # fmt: skip
        return rows

    def summary(self) -> dict[str, object]:
        """Headline numbers as plain data (JSON-ready)."""
        return {
            "config": self.config, "hardware": self.hardware, "world_size": self.world_size,
            "nodes": self.nodes, "batch_size": self.batch_size, "dtype": self.dtype, "source": self.source,
            "step_time_s": self.step_time, "step_time_overlap_s": self.step_time_overlap,
            "throughput": self.throughput, "throughput_overlap": self.throughput_overlap,
            "busy_fraction": self.busy_fraction, "flops_efficiency": self.flops_efficiency,
            "hbm_utilisation": self.hbm_utilisation,
            "joules_per_million_samples": self.joules_per_million_samples,
            "parameter_servers": self.parameter_servers, "power_w": self.power_w, "fits": self.fits,
            "reasons": list(self.memory.reasons), "breakdown_s": self.breakdown(),
            "memory_per_device_bytes": [d["total"] for d in self.memory.device], "notes": list(self.notes),
        }  # fmt: skip
