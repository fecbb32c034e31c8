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
from dataclasses import dataclass, field

import numpy as np

from recnotebooks.checks import check_bool, check_choice, check_float, check_int, check_str, check_type
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.perf.planner import RESERVE, Decision
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


@dataclass(frozen=True)
class _Shard:
    """One shard placed by a pass of HugeCTR's planner: its table, the bucket it went to, the cost then
    of each bucket that had room and no shard of the table (the candidates), its lookups per sample and
    how many shards its table had in that pass."""

    table: str
    bucket: int
    costs: dict[int, float]
    hot: float
    shards: int


@dataclass
class _Trail:
    """What :func:`_buckets` did, for its decisions: the passes of its split search, the pass whose
    placement won and its maximum bucket cost, that pass's shards in the order placed, and the
    data-parallel threshold in rows."""

    passes: int = 0
    best_pass: int = 0
    best_cost: float = 0.0
    shards: list[_Shard] = field(default_factory=list)
    dp_rows: float = 0.0


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
        self,
        nodes: int,
        room: float,
        row_bytes: int,
        table_cost: float = HIER_AUTO["table_cost"],
        trail: list[_Shard] | None = None,
    ) -> tuple[str | None, list[list[str]], list[float]]:
        """One greedy pass: each shard, hottest first, on the node of least cost that holds no shard of
        its table and has ``room``; ``(the table that found no room or None, the tables per node, each
        node's cost)``. ``trail``: where each placed shard is recorded (:class:`_Shard`), if given."""
        load, mem = np.zeros(nodes), [0.0] * nodes
        place: list[list[str]] = [[] for _ in range(nodes)]
        for h, n in zip(self.hot.tolist(), self.names.tolist(), strict=True):
            size = self.tables[n].num_rows / self.splits[n] * row_bytes
            for b in np.argsort(load).tolist():
                if n not in place[b] and mem[b] + size <= room:
                    if trail is not None:
                        free = [k for k in range(nodes) if n not in place[k] and mem[k] + size <= room]
                        trail.append(_Shard(n, b, {k: float(load[k]) for k in free}, h, self.splits[n]))
                    place[b].append(n)
                    load[b] += h + table_cost
                    mem[b] += size
                    break
            else:
                return n, place, load.tolist()
        return None, place, load.tolist()


def _buckets(
    config: DLRMConfig,
    buckets: int,
    table_cost: float,
    dp_bytes: float,
    capacity: float,
    trail: _Trail | None = None,
) -> tuple[list[list[str]], list[str]]:
    """HugeCTR's ``Planner.plan`` over ``buckets`` (GPUs for ``auto``, nodes for ``hier_auto``): the tables
    under ``dp_bytes`` of fp32 rows and exact Adagrad's state data-parallel; the others' shards, hottest
    first, each on the bucket of least cost (its shards' lookups per sample plus ``table_cost`` per shard)
    that holds no shard of the same table and has room (``capacity`` bytes less the data-parallel tables);
    then the hottest table that can be is split over twice as many buckets (a table that found no room,
    first), :data:`HIER_AUTO`'s ``search_iterations`` times; the placement of least maximum cost wins
    (``trail``: what it did, recorded if given)."""
    row_bytes = config.embedding_dim * 4 * 2
    rows_dp = dp_bytes / row_bytes
    dp = [t for t in config.tables if t.num_rows < rows_dp]
    shards = _ShardList({t.name: t for t in config.tables if t.num_rows >= rows_dp})
    room = capacity - sum(t.num_rows for t in dp) * row_bytes
    best: tuple[float, list[list[str]]] | None = None
    for i in range(int(HIER_AUTO["search_iterations"])):
        placed: list[_Shard] | None = [] if trail is not None else None
        oom, place, load = shards.place(buckets, room, row_bytes, table_cost, placed)
        if trail is not None:
            trail.passes = i + 1
        if oom is None:
            if best is None or max(load) < best[0]:
                best = (max(load), place)
                if trail is not None:
                    trail.best_pass, trail.best_cost, trail.shards = i + 1, max(load), placed or []
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
    if trail is not None:
        trail.dp_rows = rows_dp
    return best[1], [t.name for t in dp]


def _bucket_decisions(
    config: DLRMConfig,
    trail: _Trail,
    dp_names: list[str],
    per: int,
    world: int,
    table_cost: float,
    single: str,
) -> list[Decision]:
    """The :class:`Decision` of each shard :func:`_buckets` placed in its winning pass (bucket ``b`` is
    ranks ``b * per`` to ``(b + 1) * per - 1``: a GPU, ``per`` 1, or a node of ``per`` GPUs), then of
    each data-parallel table (:func:`_dp_decisions`). A table on one rank is ``single``
    (``table_wise``, or ``row_wise`` where the plan splits every table), on several ``row_wise``."""
    spread: dict[str, int] = {}
    for sh in trail.shards:
        spread[sh.table] = spread.get(sh.table, 0) + per
    what = "rank" if per == 1 else "node"
    unit = f"lookups per sample + {table_cost:g} a shard (MEM_COMM_BW_RATIO / 4)"
    out = []
    for sh in trail.shards:
        ranks = tuple(range(sh.bucket * per, (sh.bucket + 1) * per))
        reason = (
            f"shard of 1/{sh.shards} of its rows ({sh.hot:.3g} lookups per sample): {what} {sh.bucket} cost "
            f"least ({sh.costs[sh.bucket]:.3g}) of the {len(sh.costs)} with room and no shard of it; pass "
            f"{trail.best_pass} of the split search's {trail.passes} had the least maximum cost, "
            f"{trail.best_cost:.3g}"
        )
        out.append(
            Decision(
                sh.table,
                rule=f"hottest shard first, to the {what} of least cost",
                ranks=ranks,
                sharding="row_wise" if spread[sh.table] > 1 else single,
                placement="hbm",
                unit=unit,
                compared={f"{what} {k}": c for k, c in sh.costs.items()},
                chosen=f"{what} {sh.bucket}",
                added=sh.hot + table_cost,
                reason=reason,
            )
        )
    return out + _dp_decisions(config, dp_names, trail.dp_rows, world)


def _dp_decisions(config: DLRMConfig, dp_names: list[str], dp_rows: float, world: int) -> list[Decision]:
    """The :class:`Decision` of each table HugeCTR's planner replicates on the ``world`` GPUs: its fp32
    rows and Adagrad state under ``DP_SHARDING_THRESHOLD`` (``dp_rows`` rows)."""
    row_bytes = config.embedding_dim * 4 * 2
    rows = {t.name: t.num_rows for t in config.tables}
    out = []
    for n in dp_names:
        b, limit = rows[n] * row_bytes, dp_rows * row_bytes
        reason = (
            f"its fp32 rows and Adagrad state ({b / 1e6:.3g} MB) are under DP_SHARDING_THRESHOLD "
            f"({limit / 1e6:.3g} MB): replicated on every GPU"
        )
        out.append(
            Decision(
                n,
                rule="data-parallel under DP_SHARDING_THRESHOLD",
                ranks=tuple(range(world)),
                sharding="data_parallel",
                placement="hbm",
                unit="bytes",
                compared={"table": b, "DP_SHARDING_THRESHOLD": limit},
                chosen="table",
                added=b,
                reason=reason,
            )
        )
    return out


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
    return _hier_auto_nodes(config, nodes, node_bytes)


def _hier_auto_nodes(
    config: DLRMConfig, nodes: int, node_bytes: float, trail: _Trail | None = None
) -> tuple[list[list[str]], list[str]]:
    """:func:`hier_auto_nodes` of checked arguments, recording what it did in ``trail`` if given."""
    try:
        return _buckets(config, nodes, HIER_AUTO["table_cost"], HIER_AUTO["dp_bytes"], node_bytes, trail)
    except ValueError:
        raise ValueError(
            f"node_bytes={node_bytes:.3g} cannot hold {config.name}'s tables on {nodes} nodes, however split"
        ) from None


def mlperf_plan(
    config: DLRMConfig,
    gpus: int,
    nodes: int = 1,
    device_bytes: float = math.inf,
    *,
    decisions: list[Decision] | None = None,
) -> Plan:
    """The sharding the model prices MLPerf's runs with, one rule for every system. On one node:
    small tables (:data:`SMALL_TABLE_ROWS`) data-parallel; a table with more lookups per sample than
    a fair share (its lookups over the devices) split row-wise over the GPUs; the others whole
    (table-wise), each to the device with the fewest lookups so far that has room for it
    (``device_bytes`` less the planner's reserve, :data:`~recnotebooks.perf.planner.RESERVE`: the
    table's fp32 rows and exact Adagrad's fp32 state), or else row-wise over the GPUs (HugeCTR's
    ``auto`` plan balances its lookups under a memory cap the same way). On several nodes: NVIDIA's
    ``hier_auto`` plan (:func:`hier_auto_nodes`, each node's memory ``gpus`` devices' room), every
    table of a node split row-wise over all of its GPUs, a table on several nodes over all of theirs.
    ``decisions``: a list to which each table's :class:`~recnotebooks.perf.planner.Decision` is
    appended (the plan is the same without it)."""
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    if decisions is not None:
        check_type("decisions", decisions, list, "a list (the planner appends its Decisions)")
    gpus, nodes = check_int("gpus", gpus, lo=1, hi=MAX_RANKS), check_int("nodes", nodes, lo=1, hi=MAX_RANKS)
    if gpus * nodes > MAX_RANKS:
        raise ValueError(f"gpus x nodes must be at most {MAX_RANKS} devices, got {gpus} x {nodes}")
    if device_bytes != math.inf:  # inf: no memory limit
        device_bytes = check_float("device_bytes", device_bytes, lo=0, lo_open=True)
    if nodes > 1:
        return _hier_auto_plan(config, gpus, nodes, device_bytes, decisions)
    return _auto_plan(config, gpus, nodes, device_bytes, decisions)


def _hier_auto_plan(
    config: DLRMConfig, gpus: int, nodes: int, device_bytes: float, decisions: list[Decision] | None = None
) -> Plan:
    """NVIDIA's ``hier_auto`` plan: each node's tables (:func:`hier_auto_nodes`) row-wise over all of
    its GPUs (each table's decisions appended to ``decisions`` where given)."""
    world = gpus * nodes
    trail = _Trail() if decisions is not None else None
    node_bytes = device_bytes * (1 - RESERVE) * gpus
    if node_bytes != math.inf:
        node_bytes = check_float("node_bytes", node_bytes, lo=0, lo_open=True)
    per_node, dp_names = _hier_auto_nodes(config, nodes, node_bytes, trail)
    if decisions is not None and trail is not None:
        decisions += _bucket_decisions(
            config, trail, dp_names, gpus, world, HIER_AUTO["table_cost"], "row_wise"
        )
    where: dict[str, list[int]] = {}
    for n, names in enumerate(per_node):
        for name in names:
            where.setdefault(name, []).extend(range(n * gpus, (n + 1) * gpus))
    parts = [row_wise([name], world, ranks=ranks) for name, ranks in where.items()]
    if dp_names:
        parts.append(data_parallel(dp_names, world))
    return combine(*parts, strategy="mlperf")


def _auto_plan(
    config: DLRMConfig, gpus: int, nodes: int, device_bytes: float, decisions: list[Decision] | None = None
) -> Plan:
    """HugeCTR's ``auto`` plan as :func:`mlperf_plan` states it: small tables data-parallel, the busy
    ones row-wise over a node's GPUs, the rest whole on the device of fewest lookups with room (each
    decision appended to ``decisions`` where given: :func:`_auto_decision`)."""
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

    log = decisions if decisions is not None else []
    rest: list[tuple[TableConfig, int]] = []
    for t in big:
        if t.pooling_factor > fair:
            log.append(
                _auto_decision(t, "hot", {"lookups per sample": t.pooling_factor, "fair share": fair}, gpus)
            )
            split(t, min(range(nodes), key=node_load))
            continue
        fits = [r for r in range(world) if room[r] >= t.num_rows * row_bytes]
        if not fits:
            log.append(
                _auto_decision(t, "big", {"table": t.num_rows * row_bytes, "most room": max(room)}, gpus)
            )
            split(t, max(range(nodes), key=lambda n: min(room[n * gpus : (n + 1) * gpus])))
            continue
        r = min(fits, key=lambda i: load[i])
        log.append(_auto_decision(t, "whole", {f"rank {i}": load[i] for i in fits}, r))
        load[r] += t.pooling_factor
        room[r] -= t.num_rows * row_bytes
        rest.append((t, r))
    if rest:
        parts.append(table_wise([t.name for t, _ in rest], world, ranks=[r for _, r in rest]))
    if small:
        parts.append(data_parallel([t.name for t in small], world))
        log += [
            _auto_decision(t, "small", {"rows": t.num_rows, "SMALL_TABLE_ROWS": SMALL_TABLE_ROWS}, world)
            for t in small
        ]
    return combine(*parts, strategy="mlperf")


def _auto_decision(t: TableConfig, case: str, compared: dict[str, float], where: int) -> Decision:
    """:func:`_auto_plan`'s :class:`~recnotebooks.perf.planner.Decision` for table ``t`` (one node):
    ``case`` ``"hot"`` (more lookups than a fair share: row-wise over the ``where`` GPUs), ``"big"``
    (no GPU has room: row-wise over the ``where`` GPUs), ``"whole"`` (on rank ``where``, the fewest
    lookups among ``compared``) or ``"small"`` (data-parallel on the ``where`` GPUs)."""
    if case == "whole":
        least = compared[f"rank {where}"]
        reason = f"rank {where} had the fewest lookups per sample ({least:.3g}) of the ranks with room"
        return Decision(
            t.name,
            rule="whole, to the GPU with the fewest lookups and room",
            ranks=(where,),
            sharding="table_wise",
            placement="hbm",
            unit="lookups per sample",
            compared=compared,
            chosen=f"rank {where}",
            added=t.pooling_factor,
            reason=reason,
        )
    if case == "small":
        reason = f"{t.num_rows:,} rows <= SMALL_TABLE_ROWS ({SMALL_TABLE_ROWS:,}): replicated on every GPU"
        return Decision(
            t.name,
            rule="data-parallel: a small table",
            ranks=tuple(range(where)),
            sharding="data_parallel",
            placement="hbm",
            unit="rows",
            compared=compared,
            chosen="rows",
            added=float(t.num_rows),
            reason=reason,
        )
    ranks = tuple(range(min(where, t.num_rows)))
    if case == "hot":
        reason = (
            f"{t.pooling_factor:.3g} lookups per sample, more than a fair share "
            f"({compared['fair share']:.3g}): split row-wise over the node's {len(ranks)} GPUs"
        )
        unit = "lookups per sample"
    else:
        reason = f"no GPU has room for its {compared['table'] / 1e9:.3g} GB: split row-wise"
        unit = "bytes"
    return Decision(
        t.name,
        rule="row-wise over the node's GPUs",
        ranks=ranks,
        sharding="row_wise",
        placement="hbm",
        unit=unit,
        compared=compared,
        chosen="",
        added=t.pooling_factor / len(ranks),
        reason=reason,
    )


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
    *,
    decisions: list[Decision] | None = None,
) -> Plan:
    """The plan HugeCTR's ``sharding`` package makes with ``sharding``'s settings (NVIDIA's
    ``generate_plan``, v3.1-v5.1: https://github.com/mlcommons/training_results_v5.1/tree/main/NVIDIA/
    benchmarks/dlrm_dcnv2/implementations/hugectr/sharding): ``auto``, its planner (:func:`_buckets`)
    over all ``gpus x nodes`` GPUs, each table whole on one GPU or row-split over the GPUs its shards
    went to; ``hier_auto``, over the nodes, a node's tables row-split over its GPUs. ``gpu_bytes``: the
    memory each GPU gives the tables (HugeCTR's 60 GB, :data:`HUGECTR_EMBEDDING_CAP`). ``decisions``: a
    list to which each shard's and data-parallel table's :class:`~recnotebooks.perf.planner.Decision`
    is appended, the costs its planner compared (the plan is the same without it)."""
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    check_type("sharding", sharding, HugeCTRSharding, "a HugeCTRSharding")
    if decisions is not None:
        check_type("decisions", decisions, list, "a list (the planner appends its Decisions)")
    gpus, nodes = check_int("gpus", gpus, lo=1, hi=MAX_RANKS), check_int("nodes", nodes, lo=1, hi=MAX_RANKS)
    gpu_bytes = check_float("gpu_bytes", gpu_bytes, lo=0, lo_open=True)
    world = gpus * nodes
    if sharding.plan == "hier_auto" and nodes <= 1:
        raise ValueError(
            "sharding.plan 'hier_auto' needs nodes > 1 (HugeCTR refuses it on one node), got nodes=1"
        )
    by_node = sharding.plan == "hier_auto"
    buckets, per = (nodes, gpus) if by_node else (world, 1)
    trail = _Trail() if decisions is not None else None
    placed, dp_names = _buckets(
        config, buckets, sharding.table_cost, sharding.dp_threshold * 1e9, gpu_bytes * per, trail
    )
    if decisions is not None and trail is not None:
        decisions += _bucket_decisions(config, trail, dp_names, per, world, sharding.table_cost, "table_wise")
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
