"""recnotebooks.kernels.allocator: glibc's malloc told to keep what a step frees.

The setting is the process's and cannot be undone, so the step's page faults are counted in a
child process; the calls themselves are checked against a stand-in C library."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from recnotebooks.kernels import allocator


class _FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "_applied", None)


def test_sets_both_thresholds_to_glibcs_ceiling_once(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _FakeLibc()
    monkeypatch.setattr(allocator, "_glibc", lambda: lib)
    assert allocator.keep_freed_memory() is True
    # M_MMAP_THRESHOLD (-3) first: setting either switches glibc's rule off
    assert lib.calls == [(-3, 32 * 2**20), (-1, 64 * 2**20)]
    assert allocator.keep_freed_memory() is True
    assert len(lib.calls) == 2  # once a process


def test_does_nothing_without_glibc_or_when_refused(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "_glibc", lambda: None)
    assert allocator.keep_freed_memory() is False
    monkeypatch.setattr(allocator, "_applied", None)
    refusing = _FakeLibc(answer=0)
    monkeypatch.setattr(allocator, "_glibc", lambda: refusing)
    assert allocator.keep_freed_memory() is False
    assert refusing.calls == [(-3, 32 * 2**20)]  # stops at the first refusal


#: Steps of the jagged HSTU stack on 8 Yambda-shaped histories (the validation's batch), the
#: minor page faults of each counted after three warm-up steps. Before the setting, the same
#: steps took 1,500-2,600 faults each here (glibc trimmed the heap's top after every step).
_CHILD = """
import json, resource, sys, torch
from recnotebooks.data.listening import ListeningConfig, SyntheticListening
from recnotebooks.kernels import allocator
from recnotebooks.nn.hstu import HSTU
torch.set_num_threads(1)
torch.manual_seed(0)
b = SyntheticListening(ListeningConfig(), 8).batch(0)
model = HSTU(64, num_layers=2, heads=2, max_len=512)
x, w = torch.randn(b.num_tokens, 64), torch.randn(b.num_tokens, 64)
def step():
    (model(x.clone().requires_grad_(True), b.offsets, b.timestamps) * w).sum().backward()
for _ in range(3):
    step()
faults = []
for _ in range(5):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    step()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"glibc": allocator._glibc() is not None, "applied": allocator._applied, "faults": faults}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts glibc's page faults (Linux)")
def test_an_hstu_step_reuses_its_memory() -> None:
    """The bucketed attention applies the setting itself, and a step then faults in (almost) no
    fresh memory: a few pages at most, against thousands a step without it."""
    env = {**os.environ, "RECNB_FUSED": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    if not got["glibc"]:
        pytest.skip("the C library is not glibc: nothing to set")
    assert got["applied"] is True, got  # the kernel applied it
    # 0-100 a step measured; 1,500-2,600 without the setting
    assert sum(got["faults"]) / len(got["faults"]) <= 250, got
