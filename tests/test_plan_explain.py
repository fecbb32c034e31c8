"""The planner explains its plan (issue 40): decisions recorded without changing a plan, replayed to
the same placement; an explanation whose numbers add up against independent sums; ``recnb plan
--explain``'s text and JSON; bad input named."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.cli import main
from recnotebooks.config import DLRMConfig, TableConfig, Workload, preset
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.explain import PHASES, STORAGE, explain_plan
from recnotebooks.perf.hardware import HARDWARE
from recnotebooks.perf.memory import memory_report
from recnotebooks.perf.mlperf_plan import HugeCTRSharding, hugectr_plan, mlperf_plan, submitted_sharding
from recnotebooks.perf.planner import Decision, plan_tables
from recnotebooks.perf.result import COMPONENTS
from recnotebooks.plan import Plan, TableShard, table_wise

V100 = HARDWARE["big_basin"]


def config_of(rows: list[int], pooling: list[float] | None = None) -> DLRMConfig:
    pools = pooling or [1.0] * len(rows)
    tables = tuple(TableConfig(f"T{i}", r, p) for i, (r, p) in enumerate(zip(rows, pools, strict=True)))
    return DLRMConfig(13, tables, 64, (64, 64), (64, 1), name="explained")


def placement(plan: Plan) -> dict[str, set[tuple[int, str, str]]]:
    """Each table's (rank, sharding, placement) set, read off the plan's shards."""
    out: dict[str, set[tuple[int, str, str]]] = defaultdict(set)
    for s in plan.shards:
        out[s.table].add((s.rank, s.sharding, s.placement))
    return dict(out)


def replayed(decisions: list[Decision]) -> dict[str, set[tuple[int, str, str]]]:
    """The same, rebuilt from the decisions alone."""
    out: dict[str, set[tuple[int, str, str]]] = defaultdict(set)
    for d in decisions:
        out[d.table] |= {(r, d.sharding, d.placement) for r in d.ranks}
    return dict(out)


def check_choices_replay(decisions: list[Decision], world: int) -> None:
    """Each rank-keyed decision chose the least cost among its candidates, and each candidate's
    cost is its rank's running total of what the earlier decisions added (plus this table's, for the
    strategies that compare the total after adding it)."""
    load = [0.0] * world
    for d in decisions:
        ranked = {int(k.split()[1]): v for k, v in d.compared.items() if k.startswith("rank ")}
        if d.chosen.startswith("rank "):
            assert d.compared[d.chosen] == pytest.approx(min(d.compared.values()), rel=1e-12), d
        after = d.rule.startswith("longest modeled table first")
        for r, v in ranked.items():
            assert v == pytest.approx(load[r] + (d.added if after else 0.0), rel=1e-9, abs=1e-15), (d, r)
        for r in d.ranks:
            load[r] += d.added


# ----- recording changes nothing, and the decisions give back the plan ---------------------------
@settings(max_examples=15, deadline=None)
@given(
    rows=st.lists(st.integers(1, 50_000_000), min_size=1, max_size=7),
    world=st.integers(1, 5),
    strategy=st.sampled_from(["naive", "greedy", "cost"]),
)
def test_recording_changes_no_plan_and_the_decisions_replay_it(
    rows: list[int], world: int, strategy: str
) -> None:
    cfg = config_of(rows, [1.0 + (i % 3) for i in range(len(rows))])
    if strategy != "cost" and world > len(rows):
        world = len(rows)
    kw: dict[str, Any] = {"strategy": strategy, "batch_size": 4096}
    decisions: list[Decision] = []
    plan = plan_tables(cfg, V100, world, decisions=decisions, **kw)
    assert plan == plan_tables(cfg, V100, world, **kw)
    assert replayed(decisions) == placement(plan)
    if strategy == "greedy":
        check_choices_replay(decisions, world)
    if strategy == "cost":  # the table-wise choices: least time after adding the table, over running totals
        check_choices_replay(decisions, world)


def test_the_cost_strategy_records_its_offloads_with_the_options_it_priced() -> None:
    cfg = preset("criteo_terabyte")
    decisions: list[Decision] = []
    plan = plan_tables(cfg, V100, 1, strategy="cost", decisions=decisions)
    assert plan == plan_tables(cfg, V100, 1, strategy="cost")
    assert replayed(decisions) == placement(plan)
    moved = [d for d in decisions if d.placement != "hbm"]
    assert moved and all(d.unit == "seconds" and d.chosen == d.placement for d in moved)
    for d in moved:  # the place of least modeled time among those offered
        assert d.compared[d.chosen] == min(d.compared.values())
    check_choices_replay(decisions, 1)
    # the explanation's host DRAM: the moved tables' fp32 rows and row-wise Adagrad state, summed here
    e = explain_plan(Workload(cfg, 8192), V100, plan, decisions=decisions)
    rows = {t.name: t.num_rows for t in cfg.tables}
    host = sum(
        rows[s.table] * (cfg.embedding_dim * 4 + 4) for s in plan.shards if s.placement in ("host", "cache")
    )
    assert host > 0 and e.host_bytes == pytest.approx((host,))
    assert [w["reason"] for w in e.why()] == [d.reason for d in decisions]


def hugectr_cases() -> list[tuple[str, Plan, list[Decision], int]]:
    cfg = preset("mlperf_dcnv2")
    out = []
    for hw, gpus, nodes in (("gb200_nvl72", 4, 16), ("dgx_h100", 8, 8), ("dgx_h100", 8, 2)):
        sharding = submitted_sharding(hw, gpus, nodes)
        decisions: list[Decision] = []
        plan = hugectr_plan(cfg, gpus, nodes, sharding, decisions=decisions)
        assert plan == hugectr_plan(cfg, gpus, nodes, sharding)
        out.append((sharding.plan, plan, decisions, gpus))
    for nodes in (1, 4):
        decisions = []
        plan = mlperf_plan(cfg, 8, nodes, 80e9, decisions=decisions)
        assert plan == mlperf_plan(cfg, 8, nodes, 80e9)
        out.append(("mlperf", plan, decisions, 8))
    return out


def test_hugectr_and_mlperf_plans_record_their_decisions_without_changing() -> None:
    """HugeCTR's planner (auto over 64 GPUs of a rack, hier_auto over 8 DGX nodes) and the model's MLPerf
    rule: the decisions give back the plan; each shard went to the bucket of least cost among those
    with room, whose costs are the running sums of the earlier shards' (lookups + MEM_COMM_BW_RATIO / 4)."""
    for kind, plan, decisions, gpus in hugectr_cases():
        assert replayed(decisions) == placement(plan), kind
        shards = [d for d in decisions if d.rule.startswith("hottest shard")]
        if kind == "mlperf" and plan.world_size == 8:
            assert not shards and any(d.rule.startswith("whole") for d in decisions)
            check_choices_replay([d for d in decisions if d.sharding != "data_parallel"], plan.world_size)
            continue
        assert shards and all("MEM_COMM_BW_RATIO" in d.unit for d in shards)
        per = 1 if kind == "auto" else gpus
        cost: dict[str, float] = defaultdict(float)
        for d in shards:
            assert d.compared[d.chosen] == pytest.approx(min(d.compared.values()))
            for k, v in d.compared.items():
                assert v == pytest.approx(cost[k]), (kind, d.table, k)
            cost[d.chosen] += d.added
            assert d.ranks == tuple(
                range(int(d.chosen.split()[1]) * per, (int(d.chosen.split()[1]) + 1) * per)
            )
        dp = [d for d in decisions if d.sharding == "data_parallel"]
        for d in dp:
            assert d.compared["table"] < d.compared["DP_SHARDING_THRESHOLD"]


# ----- the explanation's numbers add up --------------------------------------------------------
def explained(world: int = 4, strategy: str = "cost", preset_name: str = "criteo_kaggle") -> tuple[Any, ...]:
    w = Workload(preset(preset_name), 8192)
    decisions: list[Decision] = []
    plan = plan_tables(w, "dgx_a100", world, strategy=strategy, decisions=decisions)
    return w, plan, explain_plan(w, "dgx_a100", plan, gpus=world, decisions=decisions)


def test_the_numbers_add_up_against_independent_sums() -> None:
    w, plan, e = explained()
    ref = estimate(w, "dgx_a100", gpus=4, plan=plan)
    mem = memory_report(w, HARDWARE["dgx_a100"], plan, gpus=4)
    steps = [sum(c.values()) for c in ref.per_rank]
    assert e.step_time == pytest.approx(ref.step_time) == pytest.approx(max(steps))
    for r, rank in enumerate(e.ranks):
        assert sum(rank.seconds.values()) == pytest.approx(rank.step) == pytest.approx(steps[r])
        assert sum(rank.storage.values()) == pytest.approx(rank.reserved)
        assert rank.reserved == pytest.approx(mem.device[r]["total"])
        assert rank.headroom == pytest.approx(HARDWARE["dgx_a100"].hbm_bytes - mem.device[r]["total"])
        assert rank.all_to_all_seconds == ref.per_rank[r]["all_to_all"]
    # imbalance: max over mean, by a plain loop over the model's own per-rank numbers
    mean_step, mean_mem = sum(steps) / 4, sum(d["total"] for d in mem.device) / 4
    assert e.time_imbalance == pytest.approx(max(steps) / mean_step)
    assert e.memory_imbalance == pytest.approx(max(d["total"] for d in mem.device) / mean_mem)
    # every lookup of the global batch is on some rank, at the table's row bytes
    lookups = w.batch_size * sum(t.pooling_factor for t in w.config.tables)
    assert sum(r.lookups for r in e.ranks) == pytest.approx(lookups)
    assert sum(r.bytes_gathered for r in e.ranks) == pytest.approx(lookups * w.config.embedding_dim * 4)
    # the critical path: the slowest rank, its largest term, its phases adding up to its step
    cp = e.critical_path
    assert cp.rank == max(range(4), key=lambda r: steps[r])
    assert cp.term_seconds == max(ref.per_rank[cp.rank].values())
    assert sum(s for _, s in cp.phases) == pytest.approx(cp.step)
    assert cp.overlap_step == pytest.approx(ref.step_time_overlap)
    assert f"rank {cp.rank} bounds the step" in cp.sentence()


def test_phases_and_storage_cover_each_term_once() -> None:
    names = [c for _, comps in PHASES for c in comps]
    assert sorted(names) == sorted(COMPONENTS)
    _, _, e = explained(2, "greedy", "tiny")
    kinds = [k for keys in STORAGE.values() for k in keys]
    device_kinds = {k for k in memory_report(Workload(preset("tiny"), 8192), HARDWARE["dgx_a100"], e.plan,
                                             gpus=2).device[0] if k != "total"}  # fmt: skip
    assert sorted(kinds) == sorted(device_kinds)


def test_every_table_has_a_why_and_the_json_is_plain() -> None:
    _, plan, e = explained(3, "greedy", "tiny")
    rows = e.why()
    assert sorted(r["table"] for r in rows) == sorted(t.name for t in preset("tiny").tables)
    for r in rows:
        assert r["chosen"] == f"rank {r['ranks'][0]}" and r["chosen_cost"] <= r["other_cost"]
    assert json.loads(json.dumps(e.to_dict()))["why"] == rows
    one = e.why("C3")
    assert len(one) == 1 and one[0]["table"] == "C3"
    # a plan written by hand: no decision recorded, and the explanation says so
    w = Workload(preset("tiny"), 8192)
    manual = table_wise(list(preset("tiny").table_names), 2)
    hand = explain_plan(w, "dgx_a100", manual)
    assert {r["reason"] for r in hand.why()} == {"no decision recorded for it"}


# ----- recnb plan --explain -------------------------------------------------------------------
def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_explain_names_every_rank_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--explain", "--preset", "tiny", "--hardware", "dgx_a100", "--gpus", "4",
            "--strategy", "greedy"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "MODELED" in text and "critical path: rank " in text and "imbalance (max/mean" in text
    lines = text.splitlines()
    for r in range(4):
        assert sum(line.split()[:1] == [str(r)] for line in lines) == 2, r  # cost terms and storage rows
    why = text.split("why each table went where it went")[1].splitlines()
    for t in preset("tiny").table_names:
        assert sum(line.split()[:1] == [t] for line in why) == 1, t
    out = run_json(capsys, *argv)
    e = out["explanation"]
    assert e["source"] == "modeled" and len(e["ranks"]) == 4 and len(e["why"]) == 8
    assert e["step_time_s"] == pytest.approx(max(r["step_s"] for r in e["ranks"]))
    assert run_json(capsys, *argv, "--table", "C2")["explanation"]["why"][0]["table"] == "C2"
    assert "explanation" not in run_json(capsys, *argv[:1], *argv[2:])


def test_plan_explain_says_why_hugectr_placed_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    """MLPerf's 2-node DGX H100 job, HugeCTR's auto plan as v5.1's config sets it: the why table shows
    the planner's costs (MEM_COMM_BW_RATIO) and the tables under DP_SHARDING_THRESHOLD."""
    argv = ["plan", "--explain", "--preset", "mlperf_dcnv2", "--hardware", "dgx_h100", "--gpus", "8",
            "--nodes", "2", "--batch-size", "55296", "--dtype", "amp_fp16", "--strategy", "mlperf",
            "--implementation", "hugectr"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "MEM_COMM_BW_RATIO" in text and "DP_SHARDING_THRESHOLD" in text and "hugectr's step" in text
    e = run_json(capsys, *argv)["explanation"]
    assert e["strategy"] == "hugectr_auto" and e["world_size"] == 16
    assert sorted(w["table"] for w in e["why"]) == sorted(preset("mlperf_dcnv2").table_names)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plan", "--explain", "--table", "nope"], "table must be one of"),
        (["plan", "--table", "C1"], "--table C1 applies to recnb plan --explain"),
        (["plan", "--explain", "--gpus", "9", "--hardware", "dgx_a100"], "--gpus must be <= 8"),
        (
            [
                "plan",
                "--explain",
                "--preset",
                "mlperf_dcnv2",
                "--gpus",
                "8",
                "--hardware",
                "dgx_h100",
                "--implementation",
                "hugectr",
                "--dtype",
                "bf16",
            ],
            "dtype",
        ),  # fmt: skip
    ],
)
def test_plan_explain_refuses_bad_input(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_plan_explain_argparse_refuses_ranks_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["plan", "--explain", "--gpus", "0"], ["plan", "--explain", "--implementation", "tf"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and argv[-2] in capsys.readouterr().err


def test_explain_plan_refuses_bad_input() -> None:
    w = Workload(preset("tiny"), 8192)
    plan = table_wise(list(preset("tiny").table_names), 2)
    ghost = Decision("ghost", "rule", (0,), "table_wise", "hbm")
    with pytest.raises(ValueError, match=r"decisions\[0\]\.table must be one of the plan's tables"):
        explain_plan(w, "dgx_a100", plan, decisions=[ghost])
    far = Decision("C1", "rule", (5,), "table_wise", "hbm")
    with pytest.raises(ValueError, match=r"decisions\[0\]\.ranks must be in \[0, 1\]"):
        explain_plan(w, "dgx_a100", plan, decisions=[far])
    with pytest.raises(ValueError, match=r"nodes must be an int in \[1, 4096\], got 0"):
        explain_plan(w, "dgx_a100", plan, nodes=0)
    with pytest.raises(ValueError, match=r"gpus must be an int in \[1, 4096\], got 0"):
        explain_plan(w, "dgx_a100", plan, gpus=0)
    with pytest.raises(ValueError, match="nodes must divide plan.world_size=2"):
        explain_plan(w, "dgx_a100", plan, nodes=3)
    with pytest.raises(ValueError, match="plan is for 2 ranks"):
        explain_plan(w, "dgx_a100", plan, gpus=4)
    wrong: Any = preset("tiny")
    with pytest.raises(TypeError, match="workload must be a Workload"):
        explain_plan(wrong, "dgx_a100", plan)
    with pytest.raises(TypeError, match=r"decisions\[0\] must be a Decision"):
        explain_plan(w, "dgx_a100", plan, decisions=[wrong])
    with pytest.raises(ValueError, match="table must be one of"):
        explain_plan(w, "dgx_a100", plan).why("nope")
    with pytest.raises(TypeError, match="decisions must be a list"):
        plan_tables(w, "dgx_a100", 2, decisions=wrong)
    with pytest.raises(ValueError, match="exchange must be one of"):
        explain_plan(w, "dgx_a100", plan, exchange="ring")
    assert math.isfinite(explain_plan(w, "dgx_a100", plan).step_time)
    assert TableShard("C1", 0) in plan.shards and isinstance(HugeCTRSharding, type)
