"""The prepared GPU check (benchmarks/gpu_check.py) runs its CPU-side self-test: every step's
command exists and runs here, and the report is written whole."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_self_test_runs_every_step_and_writes_the_report(tmp_path: Path) -> None:
    gc = _module()
    code = gc.main(["--out", str(tmp_path), "--self-test"])
    report = json.loads((tmp_path / "report.json").read_text())
    # a failure names the steps that did not pass: status, seconds against their limit, output's end
    bad = [{k: s.get(k) for k in ("step", "status", "seconds", "limit_s", "tail")}
           for s in report["steps"] if s["status"] != "pass"]  # fmt: skip
    assert code == 0 and not bad, bad
    names = [s.name for s in gc.steps("cpu", True)]
    assert [s["step"] for s in report["steps"]] == names
    figures = {s["step"]: s["figures"] for s in report["steps"]}
    assert figures["environment"]["torch"].startswith("2.")
    assert figures["train"]["samples_per_s"] > 0
    assert 0.0 <= figures["cached_step"]["hit_rate"] <= 1.0
    assert (tmp_path / "calibration.json").exists()  # written under --out, never over a saved one
    md = (tmp_path / "report.md").read_text()
    assert f"{len(names)}/{len(names)} steps passed" in md


def test_a_failing_step_is_recorded_and_the_next_still_runs(tmp_path: Path) -> None:
    gc = _module()
    bad = gc.Step("broken", [sys.executable, "-c", "raise SystemExit(3)"], 30, "fails on purpose")
    slow = gc.Step("slow", [sys.executable, "-c", "import time; time.sleep(30)"], 1, "times out")
    good = gc.Step("ok", [sys.executable, "-c", "print('{\"x\": 1}')"], 30, "passes")
    rows = [gc.run_step(s, {}) for s in (bad, slow, good)]
    assert [r["status"] for r in rows] == ["fail", "timeout", "pass"]
    assert rows[0]["exit_code"] == 3 and rows[2]["figures"] == {"x": 1}


def test_without_cuda_the_real_check_refuses_and_names_the_self_test(tmp_path: Path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert _module().main(["--out", str(tmp_path)]) == 2
    assert "--self-test" in capsys.readouterr().err


def test_no_step_names_a_port() -> None:
    """torchrun's rendezvous takes a port the system picks (``:0``), under an id of the run's own:
    the sharding step on the fixed port 29531 failed whenever another run on the machine held it."""
    gc = _module()
    for self_test in (True, False):
        commands = [s.command for s in gc.steps("cpu", self_test)]
        assert not any("--master-port" in c for c in commands)
        endpoints = [c[c.index("--rdzv-endpoint") + 1] for c in commands if "--rdzv-endpoint" in c]
        assert endpoints == ["127.0.0.1:0"]
    twice = [s.command for s in gc.steps("cpu", True) + gc.steps("cpu", True)]
    assert len({c[c.index("--rdzv-id") + 1] for c in twice if "--rdzv-id" in c}) == 2  # an id per run


def test_the_self_test_validates_in_one_pass_and_the_gpu_run_in_five() -> None:
    """The self-test checks that each step runs, not what it measures: its validate step takes one
    pass over the sweep (``--repeats 1``). With five passes, each re-measured once on a busy
    machine, the step took 30 s idle, 111 s beside two CPU-bound programs and ran past its 150 s
    limit in a suite run beside other work; the GPU run takes five (``--repeats 5``: validate's
    default of ten would double it on the lent GPU's clock)."""
    gc = _module()
    quick = {s.name: s.command for s in gc.steps("cpu", True)}["validate"]
    full = {s.name: s.command for s in gc.steps("cuda", False)}["validate"]
    assert quick[quick.index("--repeats") + 1] == "1" and full[full.index("--repeats") + 1] == "5"


def test_the_self_tests_limits_follow_the_share_of_the_cpu_left_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step's limit is a hang guard sized for the GPU run: the self-test's CPU steps get it times
    the machine's load per core (2 s of sleep passes a 1 s limit scaled by 3, not unscaled)."""
    gc = _module()
    nap = gc.Step("nap", [sys.executable, "-c", "import time; time.sleep(2)"], 1, "sleeps")
    assert gc.run_step(nap, {}, 1.0)["status"] == "timeout"
    row = gc.run_step(nap, {}, 3.0)
    assert row["status"] == "pass" and row["limit_s"] == 3.0
    monkeypatch.setattr(gc.os, "getloadavg", lambda: (8.0, 0.0, 0.0))
    monkeypatch.setattr(gc.os, "cpu_count", lambda: 2)
    assert gc.cpu_share_factor() == 4.0
    monkeypatch.setattr(gc.os, "getloadavg", lambda: (0.3, 0.0, 0.0))
    assert gc.cpu_share_factor() == 1.0  # never below the GPU run's limits
