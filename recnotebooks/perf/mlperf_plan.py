"""MLPerf's sharding plans for DLRM-DCNv2: how the model places the tables of MLPerf's runs.

:func:`mlperf_plan` is the one sharding rule the model prices every MLPerf Training DLRM-DCNv2
run with (:mod:`recnotebooks.perf.mlperf_setup`), and the job planner's ``"mlperf"`` strategy
(:mod:`recnotebooks.perf.job_planner`): on one node, small tables (:data:`SMALL_TABLE_ROWS`)
replicated, the busiest split row-wise over the GPUs and the rest placed whole, balanced by lookups
under each GPU's memory, as HugeCTR's ``auto`` plan balances them; on several nodes, NVIDIA's
``hier_auto`` plan (:func:`hier_auto_nodes`, ported from its submission's ``sharding`` package with
its settings, :data:`HIER_AUTO`) assigns tables to nodes and splits each row-wise over its nodes'
GPUs. The plan is a :class:`~recnotebooks.plan.Plan`, for :func:`~recnotebooks.perf.cost.estimate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recnotebooks.checks import check_bool, check_choice, check_float, check_int, check_str, check_type
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.perf.planner import RESERVE
from recnotebooks.plan import MAX_RANKS, Plan, combine, data_parallel, row_wise, table_wise

__all__ = [
    "HIER_AUTO",
    "HUGECTR_EMBEDDING_CAP",
    "SMALL_TABLE_ROWS",
    "HugeCTRSharding",
    "hier_auto_nodes",
    "hugectr_plan",
    "mlperf_plan",
    "submitted_sharding",
]

#: Tables of at most this many rows are replicated on every GPU (data-parallel); the bigger ones are
#: model-parallel. HugeCTR's planner makes the same split by a cost model (the ``sharding`` package of
#: NVIDIA's submission, https://github.com/mlcommons/training_results_v3.0/tree/main/NVIDIA/
#: benchmarks/dlrm_dcnv2/implementations/hugectr/sharding); MLPerf's 26 tables fall into 13 and 13.
SMALL_TABLE_ROWS = 10_000


#: NVIDIA's settings for its plan on several DGX nodes (``SHARDING_PLAN=hier_auto``,
#: ``MEM_COMM_BW_RATIO=67``, ``DP_SHARDING_THRESHOLD=0.0125`` in its 8- and 16-node DGX H100 configs,
#: e.g. https://github.com/mlcommons/training_results_v3.1/blob/main/NVIDIA/benchmarks/dlrm_dcnv2/
#: implementations/hugectr/config_DGXH100_16x8x1056.sh; ``--mem_comm_work_ratio`` 8 / 2 is
#: ``train.py``'s default): the planner's cost of one more table on a node, in lookups (its
#: ``unit_table_cost``: ``MEM_COMM_BW_RATIO / mem_comm_work_ratio``), and the tables it replicates
#: (data-parallel): those under ``dp_bytes`` of fp32 weights and exact Adagrad's fp32 state
#: (``dp_threshold / unit_mem_cost``, its ``unit_mem_cost`` 8 bytes an element): at dim 128,
#: 12,207 rows.
HIER_AUTO = {"table_cost": 67 / (8 / 2), "dp_bytes": 0.0125e9, "search_iterations": 20}


#: One greedy pass of the planner: the table that found no room (or None), the tables per node, each
#: node's cost.
_Placement = tuple[str | None, list[list[str]], list[float]]


class _ShardList:
    """HugeCTR's planner's list of model-parallel shards, hottest first: each table of ``tables`` in
    ``splits[name]`` equal shards of its lookups per sample (``hot``), sorted as the planner sorts
    them (``np.argsort(...)[::-1]``, whose order of ties the placement follows)."""

    def __init__(self, tables: dict[str, TableConfig]) -> None:
        self.tables = tables
        self.splits = dict.fromkeys(tables, 1)
        self._sort(np.array([t.pooling_factor for t in tables.values()], dtype=float), np.array(list(tables)))

    def _sort(self, hot: np.ndarray, names: np.ndarray) -> None:
        order = np.argsort(hot)[::-1]
        self.hot, self.names = hot[order], names[order]

    def split(self, name: str) -> None:
        """Table ``name`` in twice as many shards."""
        self.splits[name] *= 2
        n, keep = self.splits[name], self.names != name
        hot = np.concatenate((self.hot[keep], np.ones(n) * (self.tables[name].pooling_factor / n)))
        self._sort(hot, np.concatenate((self.names[keep], np.array([name] * n))))

    def place(
        self, nodes: int, room: float, row_bytes: int, table_cost: float = HIER_AUTO["table_cost"]
    ) -> tuple[str | None, list[list[str]], list[float]]:
        """One greedy pass: each shard, hottest first, on the node of least cost that holds no shard of
        its table and has ``room``; ``(the table that found no room or None, the tables per node, each
        node's cost)``."""
        load, mem = np.zeros(nodes), [0.0] * nodes
        place: list[list[str]] = [[] for _ in range(nodes)]
        for h, n in zip(self.hot.tolist(), self.names.tolist(), strict=True):
            size = self.tables[n].num_rows / self.splits[n] * row_bytes
            for b in np.argsort(load).tolist():
                if n not in place[b] and mem[b] + size <= room:
                    place[b].append(n)
                    load[b] += h + table_cost
                    mem[b] += size
                    break
            else:
                return n, place, load.tolist()
        return None, place, load.tolist()


def _buckets(
    config: DLRMConfig, buckets: int, table_cost: float, dp_bytes: float, capacity: float
) -> tuple[list[list[str]], list[str]]:
    """HugeCTR's ``Planner.plan`` over ``buckets`` (GPUs for ``auto``, nodes for ``hier_auto``): the tables
    under ``dp_bytes`` of fp32 rows and exact Adagrad's state data-parallel; the others' shards, hottest
    first, each on the bucket of least cost (its shards' lookups per sample plus ``table_cost`` per shard)
    that holds no shard of the same table and has room (``capacity`` bytes less the data-parallel tables);
    then the hottest table that can be is split over twice as many buckets (a table that found no room,
    first), :data:`HIER_AUTO`'s ``search_iterations`` times; the placement of least maximum cost wins."""
    row_bytes = config.embedding_dim * 4 * 2
    rows_dp = dp_bytes / row_bytes
    dp = [t for t in config.tables if t.num_rows < rows_dp]
    shards = _ShardList({t.name: t for t in config.tables if t.num_rows >= rows_dp})
    room = capacity - sum(t.num_rows for t in dp) * row_bytes
    best: tuple[float, list[list[str]]] | None = None
    for _ in range(int(HIER_AUTO["search_iterations"])):
        oom, place, load = shards.place(buckets, room, row_bytes, table_cost)
        if oom is None:
            if best is None or max(load) < best[0]:
                best = (max(load), place)
            hottest = next((n for n in shards.names.tolist() if shards.splits[n] * 2 <= buckets), None)
            if hottest is not None:
                shards.split(hottest)
        elif shards.splits[oom] * 2 <= buckets:
            shards.split(oom)
        else:
            break
    if best is None:
        raise ValueError(
            f"capacity={capacity:.3g} bytes cannot hold {config.name}'s tables on {buckets} buckets, "
            "however split"
        )
    return best[1], [t.name for t in dp]


def hier_auto_nodes(
    config: DLRMConfig, nodes: int, node_bytes: float = math.inf
) -> tuple[list[list[str]], list[str]]:
    """The tables on each of ``nodes`` nodes and the data-parallel ones, as HugeCTR's ``hier_auto``
    planner places them (NVIDIA's planner with its nodes as buckets, ported from the ``sharding``
    package of https://github.com/mlcommons/training_results_v3.1/tree/main/NVIDIA/benchmarks/
    dlrm_dcnv2/implementations/hugectr, its ``Planner.plan``): tables under :data:`HIER_AUTO`'s
    ``dp_bytes`` data-parallel; the others' shards, hottest first, each on the node of least
    cost (a node's cost: its shards' lookups per sample plus ``table_cost`` per shard) that holds no
    shard of the same table and has room (``node_bytes``: fp32 rows and exact Adagrad's state); then
    the hottest table that can be is split over twice as many nodes (a table that does not fit,
    first), and again, :data:`HIER_AUTO`'s ``search_iterations`` times; the placement of least
    maximum cost wins. Raises ValueError when no split fits the tables in ``node_bytes``."""
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    nodes = check_int("nodes", nodes, lo=1, hi=MAX_RANKS)
    if node_bytes != math.inf:  # inf: no memory limit
        node_bytes = check_float("node_bytes", node_bytes, lo=0, lo_open=True)
    try:
        return _buckets(config, nodes, HIER_AUTO["table_cost"], HIER_AUTO["dp_bytes"], node_bytes)
    except ValueError:
        raise ValueError(
            f"node_bytes={node_bytes:.3g} cannot hold {config.name}'s tables on {nodes} nodes, however split"
        ) from None


def mlperf_plan(config: DLRMConfig, gpus: int, nodes: int = 1, device_bytes: float = math.inf) -> Plan:
    """The sharding the model prices MLPerf's runs with, one rule for every system. On one node:
    small tables (:data:`SMALL_TABLE_ROWS`) data-parallel; a table with more lookups per sample than
    a fair share (its lookups over the devices) split row-wise over the GPUs; the others whole
    (table-wise), each to the device with the fewest lookups so far that has room for it
    (``device_bytes`` less the planner's reserve, :data:`~recnotebooks.perf.planner.RESERVE`: the
    table's fp32 rows and exact Adagrad's fp32 state), or else row-wise over the GPUs (HugeCTR's
    ``auto`` plan balances its lookups under a memory cap the same way). On several nodes: NVIDIA's
    ``hier_auto`` plan (:func:`hier_auto_nodes`, each node's memory ``gpus`` devices' room), every
    table of a node split row-wise over all of its GPUs, a table on several nodes over all of theirs."""
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    gpus, nodes = check_int("gpus", gpus, lo=1, hi=MAX_RANKS), check_int("nodes", nodes, lo=1, hi=MAX_RANKS)
    if gpus * nodes > MAX_RANKS:
        raise ValueError(f"gpus x nodes must be at most {MAX_RANKS} devices, got {gpus} x {nodes}")
    if device_bytes != math.inf:  # inf: no memory limit
        device_bytes = check_float("device_bytes", device_bytes, lo=0, lo_open=True)
    if nodes > 1:
        return _hier_auto_plan(config, gpus, nodes, device_bytes)
    return _auto_plan(config, gpus, nodes, device_bytes)


def _hier_auto_plan(config: DLRMConfig, gpus: int, nodes: int, device_bytes: float) -> Plan:
    """NVIDIA's ``hier_auto`` plan: each node's tables (:func:`hier_auto_nodes`) row-wise over all of
    its GPUs."""
    world = gpus * nodes
    per_node, dp_names = hier_auto_nodes(config, nodes, device_bytes * (1 - RESERVE) * gpus)
    where: dict[str, list[int]] = {}
    for n, names in enumerate(per_node):
        for name in names:
            where.setdefault(name, []).extend(range(n * gpus, (n + 1) * gpus))
    parts = [row_wise([name], world, ranks=ranks) for name, ranks in where.items()]
    if dp_names:
        parts.append(data_parallel(dp_names, world))
    return combine(*parts, strategy="mlperf")


def _auto_plan(config: DLRMConfig, gpus: int, nodes: int, device_bytes: float) -> Plan:
    """HugeCTR's ``auto`` plan as :func:`mlperf_plan` states it: small tables data-parallel, the busy
    ones row-wise over a node's GPUs, the rest whole on the device of fewest lookups with room."""
    world = gpus * nodes
    row_bytes = config.embedding_dim * 4 * 2  # fp32 weights and exact Adagrad's state
    small = [t for t in config.tables if t.num_rows <= SMALL_TABLE_ROWS]
    big = sorted((t for t in config.tables if t.num_rows > SMALL_TABLE_ROWS), key=lambda t: -t.pooling_factor)
    fair = sum(t.pooling_factor for t in big) / world
    room = [device_bytes * (1 - RESERVE) - sum(t.num_rows for t in small) * row_bytes] * world
    load = [0.0] * world
    parts = []

    def split(t: TableConfig, node: int) -> None:
        ranks = list(range(node * gpus, (node + 1) * gpus))
        for r in ranks:
            load[r] += t.pooling_factor / gpus
            room[r] -= t.num_rows * row_bytes / gpus
        parts.append(row_wise([t], world, ranks=ranks))

    def node_load(n: int) -> float:
        return sum(load[n * gpus : (n + 1) * gpus])

    rest: list[tuple[TableConfig, int]] = []
    for t in big:
        if t.pooling_factor > fair:
            split(t, min(range(nodes), key=node_load))
            continue
        fits = [r for r in range(world) if room[r] >= t.num_rows * row_bytes]
        if not fits:
            split(t, max(range(nodes), key=lambda n: min(room[n * gpus : (n + 1) * gpus])))
            continue
        r = min(fits, key=lambda i: load[i])
        load[r] += t.pooling_factor
        room[r] -= t.num_rows * row_bytes
        rest.append((t, r))
    if rest:
        parts.append(table_wise([t.name for t, _ in rest], world, ranks=[r for _, r in rest]))
    if small:
        parts.append(data_parallel([t.name for t in small], world))
    return combine(*parts, strategy="mlperf")


# ----- HugeCTR's plan as each submission's config sets it (issue 40) -----------------------------
_RESULTS = "https://github.com/mlcommons/training_results_v{}/blob/main/{}"
_NV = "NVIDIA/benchmarks/dlrm_dcnv2/implementations/{}/config_{}.sh"
#: HugeCTR's ``--memory_cap_for_embedding`` default, 60 GB a GPU (no DLRM-DCNv2 config sets it): the
#: capacity its planner fills (``train.py`` and ``sharding/generate_plan.py`` of every NVIDIA round, e.g.
#: https://github.com/mlcommons/training_results_v5.1/blob/441d65f4/NVIDIA/benchmarks/dlrm_dcnv2/implementations/hugectr/sharding/generate_plan.py).
HUGECTR_EMBEDDING_CAP = 60e9


@dataclass(frozen=True)
class HugeCTRSharding:
    """HugeCTR's sharding settings as an MLPerf submission's ``config_*.sh`` sets them, and the exchange
    its ``train.py`` picks. ``plan``: ``SHARDING_PLAN`` (``"auto"``: the planner over every GPU as a
    bucket, flat; ``"hier_auto"``: over the nodes, each node's tables row-split over its GPUs);
    ``mem_comm_bw_ratio``: ``MEM_COMM_BW_RATIO`` (the planner's cost of one more table a bucket is it
    over ``--mem_comm_work_ratio`` 8 / 2); ``dp_threshold``: ``DP_SHARDING_THRESHOLD`` in GB (tables
    under it of fp32 rows and Adagrad's state are data-parallel; v3.0 has none: 0); ``hierarchical``:
    the pooled embeddings cross nodes hierarchically (``comm_strategy``: v3.0-v4.1 on more than one
    node, v5.0 and v5.1 only with ``hier_auto``); ``source``: the config file."""

    plan: str
    mem_comm_bw_ratio: float
    dp_threshold: float
    hierarchical: bool
    source: str = ""

    def __post_init__(self) -> None:
        check_choice("plan", self.plan, ("auto", "hier_auto"))
        check_float("mem_comm_bw_ratio", self.mem_comm_bw_ratio, lo=0, lo_open=True, hi=1e6)
        check_float("dp_threshold", self.dp_threshold, lo=0, hi=1e6)
        check_bool("hierarchical", self.hierarchical)
        check_str("source", self.source, nonempty=False)

    @property
    def table_cost(self) -> float:
        """The planner's cost of one more table on a bucket, in lookups per sample."""
        return self.mem_comm_bw_ratio / (8 / 2)


_ROUNDS = ("v3.0", "v3.1", "v4.0", "v4.1", "v5.0", "v5.1")
#: MEM_COMM_BW_RATIO of the single-node configs, by preset (NVIDIA's and most submitters' configs:
#: 7 on H100 and A100 nodes, 11 on H200 from v4.0, 9 on B200 and B300 from v5.0; v4.1's B200 preview 7).
_ONE_NODE_RATIO = {"h200_node": 11.0, "dgx_b200": 9.0, "hgx_b300": 9.0}


def submitted_sharding(preset_name: str, gpus: int, nodes: int, round: str = "v5.1") -> HugeCTRSharding:
    """The settings MLPerf round ``round``'s configs give a system of ``nodes`` nodes of ``gpus`` GPUs
    of preset ``preset_name`` (its ``config_*.sh``, e.g. ``config_GB200_16x4x2112.sh``: ``auto``, ratio
    9, no data-parallel tables; the 8- and 16-node DGX configs: ``hier_auto``, 67 (160 on 8 DGX B200),
    0.0125; one node: ``auto``, 7/9/11, 0.008). The system classes' settings; three single-node
    submissions set their own (v3.0 Dell XE9680 H100 and v3.1 ASUS ESC-N8-E11: ratio 1; v5.1 Dell
    XE9680L H200: 8 and 0.01), not modeled. ``ValueError`` for a round outside v3.0-v5.1."""
    check_str("preset_name", preset_name)
    gpus, nodes = check_int("gpus", gpus, lo=1, hi=MAX_RANKS), check_int("nodes", nodes, lo=1, hi=MAX_RANKS)
    check_choice("round", round, _ROUNDS)
    dp = 0.0 if round == "v3.0" else 0.008
    r = round[1:]
    rack = preset_name in ("gb200_nvl72", "gb300_nvl72")
    if nodes > 1 and not rack and gpus == 8 and nodes >= 4:
        ratio = 160.0 if preset_name == "dgx_b200" and nodes == 8 else 67.0
        src = (
            f"{_RESULTS.format(r, '')} config_DGX{'B200' if preset_name == 'dgx_b200' else 'H100'}_{nodes}x8x"
            f"{135168 // (8 * nodes)}.sh (NVIDIA's and the other submitters' copies)"
        )
        return HugeCTRSharding("hier_auto", ratio, 0.0 if r == "3.0" else 0.0125, True, src)
    if rack:
        name = f"GB200_{nodes}x{gpus}x{2112 if nodes * gpus >= 64 else 6912}"
        threshold = 0.0 if nodes * gpus >= 64 else dp
        src = _RESULTS.format(max(r, "5.0"), _NV.format("hugectr", name))
        return HugeCTRSharding("auto", 9.0, threshold, r < "5.0" and nodes > 1, src)
    ratio = 7.0 if r == "4.1" and preset_name == "dgx_b200" else _ONE_NODE_RATIO.get(preset_name, 7.0)
    if r < "4.0" and preset_name == "h200_node":
        ratio = 7.0
    src = f"{_RESULTS.format(r, '')} <submitter>/benchmarks/dlrm_dcnv2/implementations/*/config_*.sh"
    return HugeCTRSharding("auto", ratio, dp, r < "5.0" and nodes > 1, src)


def hugectr_plan(
    config: DLRMConfig,
    gpus: int,
    nodes: int,
    sharding: HugeCTRSharding,
    gpu_bytes: float = HUGECTR_EMBEDDING_CAP,
) -> Plan:
    """The plan HugeCTR's ``sharding`` package makes with ``sharding``'s settings (NVIDIA's
    ``generate_plan``, v3.1-v5.1: https://github.com/mlcommons/training_results_v5.1/tree/main/NVIDIA/
    benchmarks/dlrm_dcnv2/implementations/hugectr/sharding): ``auto``, its planner (:func:`_buckets`)
    over all ``gpus x nodes`` GPUs, each table whole on one GPU or row-split over the GPUs its shards
    went to; ``hier_auto``, over the nodes, a node's tables row-split over its GPUs. ``gpu_bytes``: the
    memory each GPU gives the tables (HugeCTR's 60 GB, :data:`HUGECTR_EMBEDDING_CAP`)."""
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    check_type("sharding", sharding, HugeCTRSharding, "a HugeCTRSharding")
    gpus, nodes = check_int("gpus", gpus, lo=1, hi=MAX_RANKS), check_int("nodes", nodes, lo=1, hi=MAX_RANKS)
    gpu_bytes = check_float("gpu_bytes", gpu_bytes, lo=0, lo_open=True)
    world = gpus * nodes
    if sharding.plan == "hier_auto" and nodes <= 1:
        raise ValueError(
            "sharding.plan 'hier_auto' needs nodes > 1 (HugeCTR refuses it on one node), got nodes=1"
        )
    by_node = sharding.plan == "hier_auto"
    buckets, per = (nodes, gpus) if by_node else (world, 1)
    placed, dp_names = _buckets(
        config, buckets, sharding.table_cost, sharding.dp_threshold * 1e9, gpu_bytes * per
    )
    where: dict[str, list[int]] = {}
    for b, names in enumerate(placed):
        for name in names:
            where.setdefault(name, []).extend(range(b * per, (b + 1) * per))
    whole = {n: r[0] for n, r in where.items() if len(r) == 1}
    parts = [row_wise([n], world, ranks=r) for n, r in where.items() if len(r) > 1]
    if whole:
        parts.append(table_wise(list(whole), world, ranks=list(whole.values())))
    if dp_names:
        parts.append(data_parallel(dp_names, world))
    return combine(*parts, strategy=f"hugectr_{sharding.plan}")
