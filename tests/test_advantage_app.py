"""The GPU Advantage Explorer (finding (a), notebook 02), the explorers' words for CPU
presets, and the energy and placement components behind notebook 05's story."""

from __future__ import annotations

import math
from typing import Any

import pytest
from _values import control_values

from recnotebooks.config import preset
from recnotebooks.perf import estimate, hardware
from recnotebooks.perf.components import PARAMETER_SERVER
from recnotebooks.viz.advantage import ADVANTAGE_CONTROLS, advantage_explorer, gpu_advantage


# ----- the app ----------------------------------------------------------------------------------
def test_advantage_is_the_ratio_of_two_plain_estimates() -> None:
    r = gpu_advantage(hardware_name="dgx_a100", batch_per_device=1024)
    for row in r.tables["advantage"]:
        if row["name"] == "explorer":
            continue
        cfg = preset(str(row["name"]))  # tables fit in HBM and in the CPU node's DRAM: one device each
        gpu = estimate(cfg, "dgx_a100", batch_size=1024)
        cpu = estimate(cfg, "cpu_cluster", batch_size=1024)
        assert row["gpu_placement"] == "hbm" and row["cpu_placement"] == "dram"
        assert row["ratio"] == pytest.approx(gpu.throughput / cpu.throughput, rel=1e-12)
    steps = r.tables["steps"]
    assert {s["source"] for s in steps} == {"modeled"} and all(s["seconds_per_step"] >= 0 for s in steps)


def test_advantage_explorer_sweeps_each_control() -> None:
    app = advantage_explorer()
    defaults = {k: v["value"] for k, v in ADVANTAGE_CONTROLS.items()}
    for name in ADVANTAGE_CONTROLS:
        app.set(**defaults)
        for value in control_values(app.controls[name]):
            if value == app.values[name]:
                continue
            before, data = app.result.tables, app.chart_data()
            result = app.set(**{name: value})
            assert app.error is None, (name, value, app.error)
            assert result.tables != before and app.chart_data() != data, f"{name}={value} changed nothing"
            assert all(math.isfinite(r["value"]) and r["value"] > 0 for r in result.tables["advantage"])
    app.altair_chart.to_dict()  # validates the spec


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"hardware_name": "cpu_cluster"}, "hardware_name"),
        ({"gpus": 3}, "gpus"),
        ({"gpus": True}, "gpus"),
        ({"rows_scale": 7}, "rows_scale"),
        ({"batch_per_device": 100}, "batch_per_device"),
    ],
)
def test_advantage_rejects_bad_settings(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        gpu_advantage(**kwargs)
    with pytest.raises(KeyError, match="unknown"):
        gpu_advantage(tabels=3)


# ----- words that fit a CPU preset ------------------------------------------------------------------
def test_efficiency_explorer_speaks_of_cpu_nodes_and_dram_on_a_cpu_preset() -> None:
    from recnotebooks.viz.efficiency import explore_efficiency

    r = explore_efficiency(hardware_name="cpu_cluster", gpus=8, measure=False)
    text = " ".join(r.notes)
    assert "CPU node" in text and "GPU" not in text and "modeled on 1, not 8" in text
    bw = next(m for m in r.tables["metrics"] if m["metric"] == "memory bandwidth used")
    assert str(bw["display"]).endswith("of DRAM")
    gpu = explore_efficiency(hardware_name="dgx_a100", measure=False)
    assert "GPU" in gpu.notes[0]
    assert str(
        next(m for m in gpu.tables["metrics"] if m["metric"] == "memory bandwidth used")["display"]
    ).endswith("of HBM")
    for place in ("host", "cache"):
        with pytest.raises(ValueError, match=f"placement='{place}' does not exist on cpu_cluster"):
            explore_efficiency(hardware_name="cpu_cluster", placement=place, measure=False)


# ----- energy: parameter servers and host power ---------------------------------------------------
def test_energy_counts_the_parameter_servers_remote_rows_need() -> None:
    cfg = preset("rm2").with_rows_scale(100)  # 410 GB of fp32 tables (+ row-wise Adagrad state)
    r = estimate(cfg, "cpu_cluster", batch_size=8192, placement="remote")
    need = math.ceil(
        sum(t.num_rows * (cfg.embedding_dim * 4 + 4) for t in cfg.tables) / PARAMETER_SERVER.host_mem_bytes
    )
    assert r.parameter_servers == need == 2
    cpu = hardware("cpu_cluster")
    watts = cpu.power_w + cpu.host_power_w + need * (PARAMETER_SERVER.power_w + PARAMETER_SERVER.host_power_w)
    assert r.power_w == pytest.approx(watts)
    assert r.joules_per_million_samples == pytest.approx(watts * r.step_time / 8192 * 1e6)
    assert any("parameter server" in n for n in r.notes)
    local = estimate(preset("rm2"), "cpu_cluster", batch_size=8192)
    assert local.parameter_servers == 0 and local.power_w == pytest.approx(cpu.power_w + cpu.host_power_w)


def test_zion_pools_host_rows_on_its_cpus_far_faster_than_uvm_reads() -> None:
    cfg = preset("rm1").with_rows_scale(10)  # 41 GB: not in one 32 GB GPU
    zion = hardware("zion")
    pooled = estimate(cfg, zion, batch_size=4096, placement="host")
    uvm = estimate(cfg, zion.replace(host_pools_embeddings=False), batch_size=4096, placement="host")
    assert pooled.fits and uvm.fits
    assert pooled.step_time < uvm.step_time / 10
    assert pooled.parameter_servers == 0


def test_parameter_server_bandwidth_is_shared_by_the_ranks_that_use_it() -> None:
    cfg = preset("rm2")
    one = estimate(cfg, "dgx_a100", batch_size=8192, gpus=1, placement="remote")
    eight = estimate(cfg, "dgx_a100", batch_size=8192 * 8, gpus=8, placement="remote")
    assert one.parameter_servers == eight.parameter_servers == 1
    # the same server serves eight ranks: the node gains far less than 8x over one GPU
    assert eight.throughput < 4 * one.throughput


def test_advantage_explorer_takes_the_efficiency_explorers_architecture() -> None:
    from recnotebooks.viz.efficiency import efficiency_explorer

    eff = efficiency_explorer(measure=False, pooling=40, num_tables=16)
    app = advantage_explorer(architecture=eff.values)  # run settings (batch, hardware, ...) are left out
    own = next(r for r in app.result.tables["advantage"] if r["name"] == "explorer")
    ref = next(
        r for r in gpu_advantage(pooling=40, num_tables=16).tables["advantage"] if r["name"] == "explorer"
    )
    assert own["ratio"] == ref["ratio"]
    default = next(r for r in gpu_advantage().tables["advantage"] if r["name"] == "explorer")
    assert own["ratio"] != default["ratio"]
    with pytest.raises(ValueError, match="pooling"):
        advantage_explorer(architecture={"pooling": -1})
