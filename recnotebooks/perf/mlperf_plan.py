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

import numpy as np

from recnotebooks.checks import check_float, check_int, check_type
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.perf.planner import RESERVE
from recnotebooks.plan import MAX_RANKS, Plan, combine, data_parallel, row_wise, table_wise

__all__ = ["HIER_AUTO", "SMALL_TABLE_ROWS", "hier_auto_nodes", "mlperf_plan"]

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
        self, nodes: int, room: float, row_bytes: int
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
                    load[b] += h + HIER_AUTO["table_cost"]
                    mem[b] += size
                    break
            else:
                return n, place, load.tolist()
        return None, place, load.tolist()


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
    row_bytes = config.embedding_dim * 4 * 2
    rows_dp = HIER_AUTO["dp_bytes"] / row_bytes
    dp = [t for t in config.tables if t.num_rows < rows_dp]
    shards = _ShardList({t.name: t for t in config.tables if t.num_rows >= rows_dp})
    room = node_bytes - sum(t.num_rows for t in dp) * row_bytes
    best: tuple[float, list[list[str]]] | None = None
    for _ in range(int(HIER_AUTO["search_iterations"])):
        oom, place, load = shards.place(nodes, room, row_bytes)
        if oom is None:
            if best is None or max(load) < best[0]:
                best = (max(load), place)
            hottest = next((n for n in shards.names.tolist() if shards.splits[n] * 2 <= nodes), None)
            if hottest is not None:
                shards.split(hottest)
        elif shards.splits[oom] * 2 <= nodes:
            shards.split(oom)
        else:
            break
    if best is None:
        raise ValueError(
            f"node_bytes={node_bytes:.3g} cannot hold {config.name}'s tables on {nodes} nodes, however split"
        )
    return best[1], [t.name for t in dp]


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
