"""Cost and memory model against direct formulas, naive loops and textbook collectives."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from recnotebooks.config import DLRMConfig, TableConfig, preset
from recnotebooks.perf import components as C
from recnotebooks.perf.cost import COMPONENTS, estimate, gemm_time, op_count
from recnotebooks.perf.hardware import HARDWARE, Hardware
from recnotebooks.perf.memory import memory_footprint, memory_report
from recnotebooks.plan import Plan, TableShard, single_device_plan

A100 = HARDWARE["dgx_a100"]


def small_config(num_tables: int = 4, rows: int = 50_000, pooling: float = 3.0, dim: int = 16) -> DLRMConfig:
    tables = tuple(TableConfig(f"T{i}", rows + 1000 * i, pooling + i) for i in range(num_tables))
    return DLRMConfig(13, tables, dim, (128, dim), (64, 1), name="small")


# ----- GEMMs and MLPs --------------------------------------------------------------------------
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (4096, 512, 13), (64, 1024, 1024), (3.5, 7.0, 11.0)])
@pytest.mark.parametrize("name,dtype", [("dgx_a100", "fp32"), ("dgx_a100", "bf16"), ("cpu_cluster", "fp32")])
def test_gemm_time_direct_formula(m: float, n: float, k: float, name: str, dtype: str) -> None:
    hw = HARDWARE[name]
    h = hw.gemm_half_dim
    eff = hw.gemm_max_efficiency * m / (m + h) * n / (n + h) * k / (k + h)
    assert gemm_time(hw, m, n, k, dtype) == pytest.approx(
        2 * m * n * k / (hw.peak_flops[dtype] * eff), rel=1e-12
    )


def ideal_gpu() -> Hardware:
    """A GPU whose GEMMs run at peak for any shape and whose memory is free.

    (1e18 B/s is not enough: the 7 elementwise passes per layer output still add ~2e-6 of
    the MLP time for ``tiny`` at 19.5 TFLOP/s.)"""
    return A100.replace(gemm_half_dim=1e-9, gemm_max_efficiency=1.0, hbm_bw=1e24)


@pytest.mark.parametrize("name", ["tiny", "criteo_kaggle", "rm3", "dlrm_benchmark"])
@pytest.mark.parametrize("batch", [1, 512, 4096])
def test_mlp_time_is_flops_over_peak_on_an_ideal_gpu(name: str, batch: int) -> None:
    cfg = preset(name)
    hw = ideal_gpu()
    r = estimate(cfg, hw, batch_size=batch)
    fl = cfg.flops_per_sample()
    per_sample = sum(fl[c][p] for c in ("bottom_mlp", "top_mlp") for p in ("forward", "backward"))
    got = r.per_rank[0]["bottom_mlp"] + r.per_rank[0]["top_mlp"]
    assert got == pytest.approx(per_sample * batch / hw.peak_flops["fp32"], rel=1e-6, abs=0)


# ----- embeddings ------------------------------------------------------------------------------
def test_last_level_cache_hits_speed_up_gathers_of_skewed_tables() -> None:
    cfg = small_config(num_tables=5, dim=32)
    with_l2 = estimate(cfg, A100, batch_size=2048).per_rank[0]["embedding_forward"]
    without = estimate(cfg, A100.replace(llc_bytes=0.0), batch_size=2048).per_rank[0]["embedding_forward"]
    assert with_l2 < without


def test_embedding_forward_traffic_naive_loop() -> None:
    cfg = small_config(num_tables=5, dim=32)
    hw = A100.replace(gather_efficiency=1.0, gather_half_row_bytes=1e-9, llc_bytes=0.0)  # no L2 hits
    batch = 2048
    r = estimate(cfg, hw, batch_size=batch, placement="hbm")
    want = 0.0
    for t in cfg.tables:
        row_bytes = cfg.embedding_dim * 4
        rows_read = batch * t.pooling_factor * row_bytes  # every lookup reads a row
        pooled_written = batch * row_bytes  # one pooled vector per sample
        ids_read = batch * t.pooling_factor * 8  # int64 ids
        want += rows_read / hw.hbm_bw + (pooled_written + ids_read) / hw.hbm_bw
    assert r.per_rank[0]["embedding_forward"] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("placement", ["hbm", "host"])
def test_the_optimizer_update_reads_and_writes_each_distinct_rows_state(placement: str) -> None:
    """Backward, the fused optimizer reads and writes each distinct row's state once: row-wise
    Adagrad one fp32 per row, exact Adagrad ``dim`` (a naive loop over tables with the closed-form
    distinct rows of :func:`recnotebooks.perf.access.expected_unique`); SGD none."""
    from recnotebooks.perf.access import expected_unique
    from recnotebooks.perf.components import uvm_bandwidth

    cfg = small_config(num_tables=3, dim=32)
    hw = A100.replace(gather_efficiency=1.0, gather_half_row_bytes=1e-9, llc_bytes=0.0)  # no L2 hits
    batch = 2048
    bw = hw.hbm_bw if placement == "hbm" else uvm_bandwidth(hw)

    def backward(opt: str) -> float:
        return estimate(cfg, hw, batch_size=batch, placement=placement, sparse_optimizer=opt).per_rank[0][
            "embedding_backward"
        ]

    distinct = sum(expected_unique(batch * t.pooling_factor, t.num_rows, 1.05) for t in cfg.tables)
    for opt, floats in (("rowwise_adagrad", 1), ("adagrad", cfg.embedding_dim)):
        extra = backward(opt) - backward("sgd")
        assert extra == pytest.approx(distinct * floats * 4 * 2 / bw, rel=1e-6)


@pytest.mark.parametrize("placement", ["hbm", "cache"])
def test_the_update_of_distinct_rows_runs_at_the_hardwares_update_efficiency(placement: str) -> None:
    """``update_efficiency`` e: backward, each distinct row and its state (read and written) take
    1/e of their gather's time, and nothing else changes (a naive loop over tables with the
    closed-form distinct rows); in a device cache only its hits are in device memory."""
    from recnotebooks.perf.access import expected_unique

    cfg = small_config(num_tables=3, dim=32)
    hw = A100.replace(gather_efficiency=0.5, gather_half_row_bytes=64.0, llc_bytes=0.0)  # no L2 hits
    batch, hit = 2048, 0.75
    row = cfg.embedding_dim * 4
    gather_bw = hw.hbm_bw * 0.5 * row / (row + 64.0)

    def run(e: float) -> dict[str, float]:
        return estimate(cfg, hw.replace(update_efficiency=e), batch_size=batch, placement=placement,
                        cache_hit_rate=hit if placement == "cache" else None,
                        sparse_optimizer="rowwise_adagrad").per_rank[0]  # fmt: skip

    distinct = sum(expected_unique(batch * t.pooling_factor, t.num_rows, 1.05) for t in cfg.tables)
    once = distinct * (row + 4) * 2 / gather_bw * (hit if placement == "cache" else 1.0)
    base, slow = run(1.0), run(0.25)
    assert slow["embedding_backward"] - base["embedding_backward"] == pytest.approx(3 * once, rel=1e-9)
    assert {k: v for k, v in slow.items() if k != "embedding_backward"} == {
        k: v for k, v in base.items() if k != "embedding_backward"
    }
    with pytest.raises(ValueError, match="update_efficiency"):
        hw.replace(update_efficiency=0.0)


@pytest.mark.parametrize("placement", ["hbm", "cache"])
def test_the_update_gets_its_own_last_level_cache_speedup(placement: str) -> None:
    """``update_llc_speedup`` s_u: backward, the update's bytes take ``(1 - h) + h / s_u`` of
    their time from memory for a shard with ``h`` of its lookups in the last-level cache (the
    forward keeps the gathers' ``llc_speedup``); unset, it is ``llc_speedup``; in a device cache
    only its hits are in device memory (a hand computation of one shard)."""
    from recnotebooks.perf.components.embeddings import embedding_in_cache, embedding_in_hbm
    from recnotebooks.perf.components.lookups import ShardAccess

    hw = A100.replace(gather_efficiency=0.5, gather_half_row_bytes=64.0, llc_speedup=3.0)
    h, hit, distinct = 0.6, 0.75, 1e5
    shard = TableShard("t0", 0, placement=placement, cache_hit_rate=hit if placement == "cache" else None)
    a = ShardAccess(shard, 1.0, 32, 128.0, 2048, 2048 * 20, distinct, h, hit, 1e6, state_bytes=4.0)
    run = embedding_in_hbm if placement == "hbm" else embedding_in_cache
    from_memory = distinct * (128 + 4) * 2 / (hw.hbm_bw * 0.5 * 128 / (128 + 64.0))
    in_device = hit if placement == "cache" else 1.0
    base, same = run(a, hw), run(a, hw.replace(update_llc_speedup=3.0))
    none, fast = run(a, hw.replace(update_llc_speedup=1.0)), run(a, hw.replace(update_llc_speedup=6.0))
    assert base == same and hw.update_llc_speedup is None and hw.update_cache_speedup == 3.0
    for e, s in ((none, 1.0), (base, 3.0), (fast, 6.0)):
        uvm = (1 - hit) * distinct * 132 * 2 / (hw.host_link_bw * 0.1) if placement == "cache" else 0.0
        assert e.backward == pytest.approx(in_device * from_memory * ((1 - h) + h / s) + uvm, rel=1e-9)
        assert e.forward == base.forward and e.device_bytes == base.device_bytes
    with pytest.raises(ValueError, match="update_llc_speedup"):
        hw.replace(update_llc_speedup=0.5)


def test_exact_adagrad_state_is_a_second_table_in_memory_and_on_the_wire() -> None:
    """Exact Adagrad keeps one fp32 per element: the footprint's embedding state equals the fp32
    tables, stays fp32 under fp16/bf16 tables, and a column-wise split divides it with the
    columns (row-wise Adagrad's one float per row is held by every column-wise shard)."""
    cfg = small_config(num_tables=2, dim=16)
    fp = memory_footprint(cfg, "adagrad", "adam")
    assert fp["embedding_optimizer_state"] == cfg.sparse_parameters * 4 == fp["embedding_weights"]
    assert fp["dense_optimizer_state"] == 2 * cfg.dense_parameters * 4  # Adam's two moments
    half = memory_footprint(cfg, "adagrad", "adam", embedding_bytes=2)
    assert half["embedding_weights"] == cfg.sparse_parameters * 2
    assert half["embedding_optimizer_state"] == fp["embedding_optimizer_state"]  # fp32 state
    assert half["dense_weights"] == fp["dense_weights"]  # dense dtype unchanged
    row_wise = memory_footprint(cfg, "rowwise_adagrad", embedding_bytes=2, dtype_bytes=2)
    assert row_wise["embedding_optimizer_state"] == cfg.total_rows * 4  # fp32 whatever dtype_bytes
    k = 4
    cw = Plan(
        k,
        tuple(TableShard(t, r, "column_wise", col_fraction=1 / k) for t in cfg.table_names for r in range(k)),
    )
    for opt, whole in (("adagrad", cfg.sparse_parameters * 4), ("rowwise_adagrad", cfg.total_rows * 4 * k)):
        m = memory_report(cfg, A100, cw, 4096, sparse_optimizer=opt)
        assert sum(d["embedding_optimizer_state"] for d in m.device) == pytest.approx(whole, rel=1e-12)
    bf16 = memory_report(cfg, A100, single_device_plan(cfg), 4096, dtype="bf16", sparse_optimizer="adagrad")
    assert bf16.device[0]["embedding_weights"] == cfg.sparse_parameters * 2
    assert bf16.device[0]["embedding_optimizer_state"] == cfg.sparse_parameters * 4


# ----- collectives -----------------------------------------------------------------------------
def all_data_parallel(cfg: DLRMConfig, world: int, except_tables: tuple[str, ...] = ()) -> Plan:
    shards = [TableShard(t, r, "data_parallel") for t in cfg.table_names if t not in except_tables
              for r in range(world)]  # fmt: skip
    shards += [TableShard(t, i % world) for i, t in enumerate(except_tables)]
    return Plan(world, tuple(shards), "test")


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("model_parallel", [(), ("T0", "T2")])
def test_all_reduce_is_the_ring_formula(p: int, model_parallel: tuple[str, ...]) -> None:
    cfg = small_config(num_tables=4, rows=20_000)
    plan = all_data_parallel(cfg, p, model_parallel)
    r = estimate(cfg, A100, batch_size=4096, gpus=p, plan=plan)
    replicated = sum(t.num_rows * cfg.embedding_dim * 4 for t in cfg.tables if t.name not in model_parallel)
    size = cfg.dense_parameters * 4 + replicated
    beta, alpha = A100.intra_node_bw, A100.collective_latency_s
    ring = 2 * (p - 1) / p * size / beta + 2 * (p - 1) * alpha
    for comp in r.per_rank:
        assert comp["all_reduce"] == pytest.approx(ring, rel=1e-9)


@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("bottom", [(64, 16), (512, 512, 16)])
def test_our_step_pays_the_latencies_of_each_all_reduce_call(p: int, bottom: tuple[int, ...]) -> None:
    """``implementation="recnotebooks"``: one call per DDP bucket and one for the replicated
    tables, each with the ring's ``2 (p - 1)`` latencies; TorchRec's all-reduce is priced as one
    call; the bytes are the same."""
    from recnotebooks.perf.traffic import ddp_buckets

    cfg = DLRMConfig(13, small_config(num_tables=4, rows=20_000).tables, 16, bottom, (64, 1))
    plan = all_data_parallel(cfg, p)
    ours, theirs = (estimate(cfg, A100, batch_size=4096, gpus=p, plan=plan, implementation=i)
                    for i in ("recnotebooks", "torchrec"))  # fmt: skip
    calls = ddp_buckets(cfg) + 1
    assert ddp_buckets(cfg) == (1 if bottom == (64, 16) else 2)
    extra = (calls - 1) * 2 * (p - 1) * A100.collective_latency_s
    for a, b in zip(ours.per_rank, theirs.per_rank, strict=True):
        assert a["all_reduce"] - b["all_reduce"] == pytest.approx(extra, rel=1e-9)


@pytest.mark.parametrize("p", [2, 8])
def test_all_reduce_across_nodes_uses_the_nic(p: int) -> None:
    cfg = small_config(num_tables=4, rows=20_000)
    r = estimate(cfg, A100, batch_size=4096, gpus=1, nodes=p, plan=all_data_parallel(cfg, p))
    size = cfg.dense_parameters * 4 + sum(t.num_rows * cfg.embedding_dim * 4 for t in cfg.tables)
    beta = min(A100.nic_bw, A100.host_link_bw)  # a lone GPU reaches the NICs through its own PCIe link
    ring = 2 * (p - 1) / p * size / beta + 2 * (p - 1) * A100.collective_latency_s
    assert r.per_rank[0]["all_reduce"] == pytest.approx(ring, rel=1e-9)


@pytest.mark.parametrize(
    ("hw_name", "gpus", "nodes"),
    [
        ("dgx_a100", 2, 1),
        ("dgx_a100", 4, 1),
        ("dgx_a100", 8, 1),
        ("dgx_a100", 1, 4),
        ("dgx_a100", 2, 2),
        ("cpu_cluster", 1, 3),
    ],
)
def test_sharded_step_pays_measured_distribution_ops_and_five_all_to_all_latencies(
    hw_name: str, gpus: int, nodes: int
) -> None:
    # Counts measured on TorchRec's DistributedModelParallel (table-wise, gloo): 54 + 3 per rank
    # operators and 3 host syncs for the input/output distribution, 5 all-to-alls; DDP's reducer
    # 2 + 3 per dense parameter tensor (benchmarks/sharded_step_ops.py). Written out here.
    cfg = small_config(num_tables=8, rows=20_000)
    hw, p = HARDWARE[hw_name], gpus * nodes
    layers = len(cfg.bottom_mlp) + len(cfg.top_mlp)
    single = estimate(cfg, hw, batch_size=4096, gpus=1).breakdown()["overhead"]
    sharded = estimate(
        cfg, hw, batch_size=4096, gpus=gpus, nodes=nodes, plan=all_data_parallel(cfg, p, ("T0", "T1"))
    )
    replicated = estimate(cfg, hw, batch_size=4096, gpus=gpus, nodes=nodes, plan=all_data_parallel(cfg, p))
    ddp = 2 + 3 * 2 * layers
    for comp in sharded.per_rank:
        assert comp["overhead"] == pytest.approx(single + (ddp + 54 + 3 * p + 3) * hw.op_overhead_s, rel=1e-9)
    for comp in replicated.per_rank:
        assert comp["overhead"] == pytest.approx(single + ddp * hw.op_overhead_s, rel=1e-9)
        assert comp["all_to_all"] == 0.0
    # with free bandwidth, the all-to-all is latency only: 5 calls of p - 1 pairwise steps
    ideal = hw.replace(intra_node_bw=1e30, nic_bw=1e30, host_link_bw=1e30, collective_latency_s=1e-3)
    r = estimate(
        cfg, ideal, batch_size=4096, gpus=gpus, nodes=nodes, plan=all_data_parallel(cfg, p, ("T0", "T1"))
    )
    assert max(c["all_to_all"] for c in r.per_rank) == pytest.approx(5 * (p - 1) * 1e-3, rel=1e-6)


def test_op_count_checks_the_world_size() -> None:
    cfg = small_config()
    for bad in (0, -1, True, 2.0):
        with pytest.raises((TypeError, ValueError), match="world_size"):
            op_count(cfg, bad)  # type: ignore[arg-type]
    assert op_count(cfg, 1, True) == op_count(cfg)  # one device: nothing to distribute


# ----- random configurations ------------------------------------------------------------------
@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, object]:
    hw = HARDWARE[draw(st.sampled_from(sorted(HARDWARE)))]
    gpus = draw(st.sampled_from([g for g in (1, 2, 4, 8) if g <= hw.devices]))
    nodes = draw(st.integers(1, 3))
    world = gpus * nodes
    dim = draw(st.sampled_from([4, 16, 64, 128]))
    tables = tuple(TableConfig(f"T{i}", draw(st.integers(1, 10**8)), draw(st.floats(0, 200)))
                   for i in range(draw(st.integers(world, world + 30))))  # fmt: skip
    interaction = draw(st.sampled_from(["dot", "cat", "dcn"]))
    cross = {}
    if interaction == "dcn":  # the rank at most the cross layers' width, dim + tables x dim
        width = dim * (1 + len(tables))
        cross = {"dcn_layers": draw(st.integers(1, 4)), "dcn_rank": min(width, draw(st.integers(1, 1024)))}
    cfg = DLRMConfig(
        draw(st.integers(1, 600)),
        tables,
        dim,
        (draw(st.integers(1, 1024)), dim),
        (draw(st.integers(1, 2048)), 1),
        interaction=interaction,
        **cross,
    )
    placement = draw(st.sampled_from(["hbm", "host", "cache", "remote"]))
    hit = draw(st.floats(0, 1)) if placement == "cache" else None
    return {
        "config": cfg,
        "hw": hw,
        "gpus": gpus,
        "nodes": nodes,
        "placement": placement,
        "cache_hit_rate": hit,
        "batch_size": draw(st.integers(world, 200_000)),
    }


@given(sc=scenarios())
def test_results_are_finite_and_in_range(sc: dict[str, object]) -> None:
    r = estimate(sc.pop("config"), sc.pop("hw"), **sc)  # type: ignore[arg-type]
    assert r.step_time > 0 and math.isfinite(r.step_time)
    assert 0 < r.step_time_overlap <= r.step_time * (1 + 1e-12)
    assert math.isfinite(r.throughput) and r.throughput > 0
    assert 0 <= r.busy_fraction <= 1
    assert 0 < r.flops_efficiency <= 1
    assert math.isfinite(r.joules_per_million_samples) and r.joules_per_million_samples > 0
    for comp in r.per_rank:
        assert set(comp) == set(COMPONENTS)
        assert all(math.isfinite(v) and v >= 0 for v in comp.values()), comp
    assert all(math.isfinite(d["total"]) for d in r.memory.device)


# ----- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"batch_size": 7, "gpus": 4, "nodes": 2}, "batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"batch_size": 64, "gpus": 9}, "gpus"),
        ({"batch_size": 64, "gpus": 0}, "gpus"),
        ({"batch_size": 64, "nodes": 0}, "nodes"),
        ({"batch_size": 64, "placement": "cache"}, "cache_hit_rate"),
        ({"batch_size": 64, "placement": "cache", "cache_hit_rate": 1.5}, "cache_hit_rate"),
        ({"batch_size": 64, "placement": "disk"}, "placement"),
        ({"batch_size": 64, "dtype": "int8"}, "dtype"),
    ],
)
def test_bad_input_raises_naming_the_parameter(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises((TypeError, ValueError), match=needle):
        estimate(preset("tiny"), "dgx_a100", **kwargs)  # type: ignore[arg-type]


def test_bad_types_and_missing_dtype() -> None:
    with pytest.raises(TypeError, match="config"):
        estimate("tiny", "dgx_a100", batch_size=64)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bf16"):
        estimate(preset("tiny"), "big_basin", batch_size=64, dtype="bf16")  # V100 has no bf16
    with pytest.raises(ValueError, match="world_size|ranks"):
        estimate(preset("tiny"), "dgx_a100", batch_size=64, gpus=2, plan=single_device_plan(preset("tiny")))


def test_impossible_config_says_why_without_nan() -> None:
    # (the criteo_terabyte preset, rows capped at 10M, needs 14.2 GB and does fit a 16 GB V100;
    # mlperf_v1's 40M-row tables of dim 128 need 105 GB)
    r = estimate(preset("mlperf_v1"), "big_basin", batch_size=4096, placement="hbm")
    assert not r.fits
    reason = " ".join(r.memory.reasons)
    assert "C1 (" in reason and "16 GB" in reason and "big_basin" in reason
    assert any("does not fit" in n for n in r.notes)
    for v in r.summary().values():
        if isinstance(v, float):
            assert math.isfinite(v)
    assert all(math.isfinite(x) for x in r.breakdown().values())


# ----- memory -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sparse", "dense"),
    [("rowwise_adagrad", "adagrad"), ("sgd", "adam"), ("sgd", "sgd"), ("adagrad", "adam")],
)
def test_one_device_report_is_the_footprint(sparse: str, dense: str) -> None:
    """One memory model: a one-device fp32 plan in device memory holds exactly the footprint's
    weights, optimizer state and activations (the report adds caches and all-to-all buffers,
    none here)."""
    cfg = preset("criteo_kaggle")
    fp = memory_footprint(cfg, sparse, dense, batch_size=4096)
    d = memory_report(
        cfg, A100, single_device_plan(cfg), 4096, sparse_optimizer=sparse, dense_optimizer=dense
    )
    for kind in ("embedding_weights", "embedding_optimizer_state", "dense_weights", "dense_optimizer_state",
                 "activations"):  # fmt: skip
        assert d.device[0][kind] == fp[kind], kind
    assert d.device[0]["cache"] == d.device[0]["comm_buffers"] == 0


def test_memory_report_single_device_placements() -> None:
    cfg = preset("criteo_kaggle")
    weights = sum(t.num_rows * cfg.embedding_dim * 4 for t in cfg.tables)
    state = cfg.total_rows * 4
    hbm = memory_report(cfg, A100, single_device_plan(cfg, "hbm"), 4096).device[0]
    assert hbm["embedding_weights"] == weights
    assert hbm["embedding_optimizer_state"] == state
    assert hbm["dense_weights"] == cfg.dense_parameters * 4
    assert hbm["total"] == pytest.approx(sum(v for k, v in hbm.items() if k != "total"))
    sgd = memory_report(cfg, A100, single_device_plan(cfg), 4096, sparse_optimizer="sgd").device[0]
    assert sgd["embedding_optimizer_state"] == 0

    host = memory_report(cfg, A100, single_device_plan(cfg, "host"), 4096)
    assert host.device[0]["embedding_weights"] == 0 and host.device[0]["cache"] == 0
    assert host.host[0]["embedding_tables"] == weights + state
    assert host.device[0]["total"] < hbm["total"] - weights

    cache = memory_report(cfg, A100, single_device_plan(cfg, "cache", cache_hit_rate=0.9), 4096)
    assert cache.host[0]["embedding_tables"] == weights + state
    assert 0 < cache.device[0]["cache"] < weights
    with pytest.raises(ValueError, match="sparse_optimizer"):
        memory_report(cfg, A100, single_device_plan(cfg), 4096, sparse_optimizer="adam")


# ----- where the tables live ---------------------------------------------------------------------
def _table_bytes(cfg: DLRMConfig, state_per_row: int = 4) -> float:
    """The model's table bytes from its config: fp32 weights plus the optimizer's state per row
    (row-wise Adagrad's one float a row by default)."""
    return sum(t.num_rows * (cfg.embedding_dim * 4 + state_per_row) for t in cfg.tables)


def _homes(r: object) -> dict[str, float]:
    return {str(x["placement"]): float(x["bytes"]) for x in r.table_placement()}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "plan_of",
    [
        lambda c: single_device_plan(c, "hbm"),
        lambda c: single_device_plan(c, "host"),
        lambda c: single_device_plan(c, "cache", cache_hit_rate=0.8),
        lambda c: single_device_plan(c, ["hbm", "cache", "host", "remote"], cache_hit_rate=0.5),
        lambda c: Plan(4, tuple(TableShard(t, r, "row_wise", "hbm", row_fraction=0.25) for t in c.table_names
                                for r in range(4))),  # fmt: skip
        lambda c: Plan(4, tuple(TableShard(t, r, "data_parallel", "hbm") for t in c.table_names
                                for r in range(4))),
        lambda c: Plan(2, (TableShard("T0", 0, placement="remote"), TableShard("T1", 1),
                           *(TableShard(t, r, "data_parallel") for t in ("T2", "T3") for r in range(2)))),
    ],
    ids=["hbm", "host", "cache", "one_each", "row_wise", "data_parallel", "mixed"],
)  # fmt: skip
def test_table_placement_adds_up_to_the_models_table_bytes(plan_of) -> None:  # type: ignore[no-untyped-def]
    """Weights and optimizer state, each table once (a data-parallel table's replicas once),
    wherever the plan puts them; one row per placement, in the chart's order."""
    cfg = small_config()
    plan = plan_of(cfg)
    for opt, state in (("rowwise_adagrad", 4), ("sgd", 0), ("adagrad", 4 * cfg.embedding_dim)):
        r = estimate(cfg, A100, batch_size=4096, gpus=plan.world_size, plan=plan, sparse_optimizer=opt)
        rows = r.table_placement()
        assert [x["placement"] for x in rows] == ["hbm", "cache", "host", "remote"]
        assert sum(float(x["bytes"]) for x in rows) == pytest.approx(_table_bytes(cfg, state), rel=1e-12)
        assert sum(float(x["share"]) for x in rows) == pytest.approx(1.0)
        for s in plan.shards:  # a place holds bytes exactly when some shard lives there
            assert _homes(r)[s.placement] > 0
        assert all(x["source"] == "modeled" for x in rows)


def test_table_placement_by_hand() -> None:
    """One table in each place: its bytes there, the cache's device slots and hit rate, the servers."""
    cfg = small_config()
    plan = single_device_plan(cfg, ["hbm", "cache", "host", "remote"], cache_hit_rate=0.7)
    r = estimate(cfg, A100, batch_size=4096, plan=plan)
    per_table = {t.name: t.num_rows * (cfg.embedding_dim * 4 + 4) for t in cfg.tables}
    assert _homes(r) == pytest.approx({"hbm": per_table["T0"], "cache": per_table["T1"],
                                       "host": per_table["T2"], "remote": per_table["T3"]})  # fmt: skip
    cache, remote = r.table_placement()[1], r.table_placement()[3]
    assert cache["hit_rate"] == pytest.approx(0.7) and r.device_cache_hit_rate == pytest.approx(0.7)
    assert (
        cache["device_cache_bytes"] == pytest.approx(r.memory.device[0]["cache"])
        and cache["device_cache_bytes"] > 0
    )
    assert remote["parameter_servers"] == 1 and r.table_placement()[0]["hit_rate"] is None
    text = r.table_placement_text()
    assert text.startswith("the 14.0 MB of tables (weights and optimizer state) live 3.4 MB (24%) in HBM, ")
    assert "in host DRAM behind a device cache (" in text and " of HBM, hit rate 70%), " in text
    assert text.endswith(" (25%) in host DRAM read over PCIe (UVM) and 3.6 MB (26%) on 1 parameter server")


def test_device_cache_hit_rate_weighs_each_table_by_its_lookups() -> None:
    """Tables of different pooling behind caches of different sizes: the cache row's hit rate is
    the lookup-weighted mean of the per-table rates (``cache_hit_rates``)."""
    cfg = small_config()
    rows = {t.name: 500 * (k + 1) for k, t in enumerate(cfg.tables)}
    r = estimate(cfg, A100, batch_size=4096, placement="cache", cache_rows=rows, cache_policy="lfu")
    looks = {t.name: t.pooling_factor for t in cfg.tables}
    want = sum(looks[t] * h for t, h in r.cache_hit_rates.items()) / sum(looks.values())
    assert len(set(r.cache_hit_rates.values())) == len(rows)  # the rates do differ
    assert r.table_placement()[1]["hit_rate"] == pytest.approx(want, rel=1e-9)


def test_a_terabyte_on_one_h200_mostly_leaves_hbm_and_says_so() -> None:
    """~1 TB of tables, one H200, placement hbm, the cost planner: most bytes are not in HBM (it
    holds 141 GB), the result says where they went, and against what was chosen."""
    from recnotebooks.perf.planner import plan_tables

    cfg = preset("mlperf_v1").with_rows_scale(10)
    total = _table_bytes(cfg)
    assert 0.9e12 < total < 1.2e12
    plan = plan_tables(cfg, "h200_node", 1, strategy="cost", placement="hbm", batch_size=65536)
    assert plan.requested_placement == "hbm"
    r = estimate(cfg, "h200_node", batch_size=65536, plan=plan)
    homes = _homes(r)
    assert sum(homes.values()) == pytest.approx(total, rel=1e-12)
    assert homes["hbm"] < 141e9 and homes["hbm"] / total < 0.15
    assert homes["cache"] + homes["host"] + homes["remote"] > 0.85 * total
    text = r.table_placement_text()
    assert (
        text.startswith("you chose hbm; the cost planner kept ") and "moved what does not fit there" in text
    )
    s = r.summary()
    assert s["requested_placement"] == "hbm" and s["table_placement_note"] == text
    assert s["table_placement"] == r.table_placement()


def test_a_small_model_lives_all_in_hbm() -> None:
    r = estimate(preset("criteo_kaggle"), "h200_node", batch_size=8192)
    assert _homes(r)["hbm"] == pytest.approx(_table_bytes(preset("criteo_kaggle")), rel=1e-12)
    assert r.table_placement()[0]["share"] == 1.0
    assert r.table_placement_text() == "all 2.3 GB of tables (weights and optimizer state) live in HBM"
    several = estimate(preset("criteo_kaggle"), "h200_node", batch_size=8192, gpus=8)  # the greedy plan
    assert several.plan is not None and several.plan.requested_placement == "hbm"
    assert several.table_placement_text() == r.table_placement_text()
    with pytest.raises(ValueError, match="requested_placement"):
        Plan(1, (), requested_placement="ssd")


# ----- tidy table ------------------------------------------------------------------------------
@pytest.mark.parametrize("gpus", [1, 4])
def test_table_rows_add_up_to_each_rank(gpus: int) -> None:
    r = estimate(preset("criteo_kaggle"), "dgx_a100", batch_size=8192, gpus=gpus)
    rows = r.table(run="x")
    assert rows and all(row["source"] == "modeled" and row["run"] == "x" for row in rows)
    assert len(rows) == gpus * len(COMPONENTS)
    per_rank = [sum(float(row["seconds"]) for row in rows if row["rank"] == k) for k in range(gpus)]
    assert per_rank == pytest.approx([sum(c.values()) for c in r.per_rank], rel=1e-12)
    assert max(per_rank) == pytest.approx(r.step_time, rel=1e-12)
    for k in range(gpus):
        assert sum(float(row["share"]) for row in rows if row["rank"] == k) == pytest.approx(1.0)


def test_a_cache_that_never_hits_is_no_faster_than_host_memory() -> None:
    cfg = small_config(num_tables=8, dim=64)
    host = estimate(cfg, A100, batch_size=8192, placement="host").step_time
    cold = estimate(cfg, A100, batch_size=8192, placement="cache", cache_hit_rate=0.0).step_time
    assert cold >= host * (1 - 1e-9)


def test_sweep_rejects_unknown_parameters_and_pointless_sweeps() -> None:
    from recnotebooks.perf.sweeps import sweep

    with pytest.raises(ValueError, match="param must be one of"):
        sweep("tables", [1])
    with pytest.raises(ValueError, match="needs placement='cache'"):
        sweep("cache_hit_rate", [0.5, 0.9])


def test_the_all_reduce_counts_refuse_bad_input() -> None:
    from recnotebooks.perf.components import all_reduce_seconds
    from recnotebooks.perf.traffic import all_reduce_calls, ddp_buckets

    with pytest.raises(TypeError, match="config must be a DLRMConfig"):
        ddp_buckets("tiny")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dtype must be one of"):
        ddp_buckets(preset("tiny"), "fp8")
    with pytest.raises(ValueError, match=r"rows\[0\] must be a collective_bytes row of a rank in \[0, 1\]"):
        all_reduce_calls([{"component": "all_reduce", "rank": 5, "calls": 1}], 2)
    with pytest.raises(ValueError, match="world"):
        all_reduce_calls([], 0)
    with pytest.raises(ValueError, match="calls"):
        all_reduce_seconds(1e6, 2, 2, A100, A100.nic_bw, calls=0)


def test_each_bag_adds_its_row_bytes_times_the_per_byte_cost_forward() -> None:
    """A CPU's short bags are slower per row (``bag_seconds_per_byte``): the forward grows by
    bags x row bytes x that figure, one bag per sample and table; backward is unchanged."""
    cfg = preset("criteo_kaggle")  # 26 tables, pooling 1: one lookup per bag
    base = HARDWARE["this_machine"].replace(bag_seconds_per_byte=0.0)
    per_byte = 4e-10  # ~100 ns per bag of 256 B rows
    a = estimate(cfg, base, batch_size=2048).breakdown()
    b = estimate(cfg, base.replace(bag_seconds_per_byte=per_byte), batch_size=2048).breakdown()
    bags = 2048 * len(cfg.tables)
    added = bags * cfg.embedding_dim * 4 * per_byte
    assert b["embedding_forward"] - a["embedding_forward"] == pytest.approx(added)
    assert b["embedding_backward"] == pytest.approx(a["embedding_backward"])
    assert HARDWARE["dgx_a100"].bag_seconds_per_byte == 0.0  # GPUs pool bags in parallel


# ----- DLRM-DCNv2: the cross layers and multi-hot lookups ---------------------------------------------
@pytest.mark.parametrize("name", ["dcnv2_small", "mlperf_dcnv2"])
@pytest.mark.parametrize("dtype", ["fp32", "amp_bf16"])
@pytest.mark.parametrize("batch", [1, 4096])
def test_cross_layers_are_their_gemm_flops_over_peak_on_an_ideal_gpu(
    name: str, dtype: str, batch: int
) -> None:
    """On a GPU whose GEMMs run at peak and whose memory is free, the interaction of a DCN model is
    its cross layers' GEMMs: per layer 4wr FLOPs forward and 8wr backward per sample (the config's
    FLOPs less its 3w + 6w elementwise ones), at the precision's GEMM peak."""
    cfg = preset(name)
    hw = ideal_gpu()
    r = estimate(cfg, hw, batch_size=batch, dtype=dtype)
    fl = cfg.flops_per_sample()["interaction"]
    w, layers = cfg.interaction_output_dim, cfg.dcn_layers
    gemm_flops = fl["forward"] + fl["backward"] - 9 * w * layers
    assert gemm_flops == 12 * w * cfg.dcn_rank * layers
    peak = hw.peak_flops["fp32" if dtype == "fp32" else "bf16"]
    assert r.per_rank[0]["interaction"] == pytest.approx(gemm_flops * batch / peak, rel=1e-6)


def test_cross_layers_by_hand_on_a_real_gpu() -> None:
    from recnotebooks.perf.components import cross_layers, interaction

    cfg, hw, b = preset("mlperf_dcnv2"), HARDWARE["dgx_h100"], 6912.0
    w, r = 3456, 512
    gemms = (
        2 * (gemm_time(hw, b, r, w) + gemm_time(hw, b, w, r))
        + gemm_time(hw, w, r, b)
        + gemm_time(hw, r, w, b)
    )
    elementwise = 19 * b * w * 4  # bytes: the product, the residual sum and their gradients
    got = cross_layers(cfg, hw, b, "fp32")
    assert got.seconds == pytest.approx(3 * (gemms + elementwise / hw.hbm_bw), rel=1e-12)
    assert got.device_bytes == pytest.approx(3 * elementwise, rel=1e-12)
    concat = 3 * b * (27 * 128 + w) * 2 * 4  # three passes over the concatenation's inputs and output
    inter = interaction(cfg, hw, b, "fp32")
    assert inter.seconds == pytest.approx(got.seconds + concat / hw.hbm_bw, rel=1e-12)
    assert cross_layers(preset("mlperf_v1"), hw, b, "fp32").seconds == 0.0
    # the cross layers are most of the modeled dense compute of the model of record
    step = estimate(cfg, "dgx_h100", batch_size=55_296, gpus=8, dtype="amp_bf16").per_rank[0]
    assert step["interaction"] > step["top_mlp"] + step["bottom_mlp"]


def test_multi_hot_lookups_are_priced_table_by_table() -> None:
    """dcnv2_small's 214 lookups per sample (1 to 100 per table): the forward reads one row per
    lookup of each table, as the naive loop counts them."""
    cfg = preset("dcnv2_small")
    hw = A100.replace(gather_efficiency=1.0, gather_half_row_bytes=1e-9, llc_bytes=0.0)
    batch = 2048
    r = estimate(cfg, hw, batch_size=batch, placement="hbm")
    row_bytes = cfg.embedding_dim * 4
    want = sum(
        (batch * t.pooling_factor * (row_bytes + 8) + batch * row_bytes) / hw.hbm_bw for t in cfg.tables
    )
    assert r.per_rank[0]["embedding_forward"] == pytest.approx(want, rel=1e-6)
    assert sum(t.pooling_factor for t in cfg.tables) == 214


def test_the_op_count_adds_the_cross_layers() -> None:
    cfg = preset("dcnv2_small")
    cat = cfg.replace(interaction="cat", dcn_rank=512)
    assert op_count(cfg) - op_count(cat) == 43 * 3
    assert op_count(cfg.replace(dcn_layers=1)) - op_count(cat) == 43
    # DDP replicates V, W and b of each cross layer beside the MLPs' weights and biases
    assert op_count(cfg, 2, True) - op_count(cfg) == op_count(cat, 2, True) - op_count(cat) + 3 * 3 * 3


# ----- dense optimizer -------------------------------------------------------------------------
class _PassCounter(TorchDispatchMode):
    """Counts, for every aten op, the distinct ``numel``-sized tensors it reads and those it
    writes: passes over a parameter of ``numel`` elements."""

    def __init__(self, numel: int) -> None:
        super().__init__()
        self.numel, self.passes = numel, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        big = [
            t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and t.numel() == self.numel
        ]
        written = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.numel() == self.numel]
        self.passes += len({t.data_ptr() for t in big}) + len(written)
        return out


class _ElementwisePasses(_PassCounter):
    """:class:`_PassCounter` without the GEMMs (their own reads and writes are the GEMM's time):
    an ``addmm`` counts only its added input's read."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = func.__name__
        if name.startswith(("mm", "t.", "view", "detach", "_to_copy", "clone")):
            return func(*args, **(kwargs or {}))
        if name.startswith("addmm"):
            self.passes += int(args[0].numel() == self.numel)
            return func(*args, **(kwargs or {}))
        return super().__torch_dispatch__(func, types, args, kwargs)


@pytest.mark.parametrize("layers", [1, 3])
def test_cross_layer_bytes_are_the_passes_autograd_makes(layers: int) -> None:
    """The modeled elementwise bytes of the cross layers (fp32: no casts) equal the passes over
    (B, width) tensors that a training step of LowRankCrossNet makes through autograd (as
    TorchRec's does), counted op by op: 19 a layer."""
    from recnotebooks.nn import LowRankCrossNet

    b, w, rank = 64, 40, 8
    net = LowRankCrossNet(w, layers, rank)
    x0, grad = torch.randn(b, w, requires_grad=True), torch.randn(b, w)
    with _ElementwisePasses(b * w) as counter:
        net(x0).backward(grad)
    cfg = small_config().replace(interaction="dcn", dcn_layers=layers, dcn_rank=rank)
    modeled = C.cross_layers(cfg, A100, b, "fp32").device_bytes
    assert modeled / (b * cfg.interaction_output_dim * 4) == counter.passes == 19 * layers


@pytest.mark.parametrize("name", ["sgd", "adagrad", "adam"])
def test_dense_optimizer_bytes_are_the_passes_torch_makes(name: str) -> None:
    """The modeled bytes of each dense optimizer equal the passes torch.optim's update makes over a
    parameter, counted op by op under a dispatch mode (fp32: no loss-scale pass)."""
    n = 1000
    p = torch.nn.Parameter(torch.randn(n))
    p.grad = torch.randn(n)
    opt = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad, "adam": torch.optim.Adam}[name](
        [p], lr=0.1
    )
    opt.step()  # state created
    with _PassCounter(n) as counter:
        opt.step()
    cfg = small_config()
    modeled = C.dense_optimizer(cfg, A100, "fp32", name)
    assert modeled.device_bytes == pytest.approx(cfg.dense_parameters * 4 * counter.passes)
    assert estimate(cfg, A100, batch_size=512, dense_optimizer=name).breakdown()["dense_optimizer"] == (
        pytest.approx(modeled.seconds)
    )
    with pytest.raises(ValueError, match="optimizer"):
        C.dense_optimizer(cfg, A100, "fp32", "rmsprop")
