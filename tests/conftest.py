"""Shared fixtures and settings for the test suite."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

#: The run ends with what failed and the first lines of each failure (tests/_summary.py); every
#: test module stops the processes it starts (tests/_leftovers.py); RECNB_SHUFFLE=<seed> runs the
#: tests in a random order drawn from the seed (tests/_shuffle.py).
pytest_plugins = ["_summary", "_leftovers", "_shuffle"]

settings.register_profile("ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=25, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_saved_calibration(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts from the uncalibrated ``this_machine`` (a calibration file that does
    not exist yet), never from the one ``recnb calibrate`` saved for this user: results must
    not depend on it. Tests that calibrate point ``RECNB_CALIBRATION`` elsewhere themselves.
    Subprocesses (the CLI, notebook kernels, ranks) inherit the variable."""
    monkeypatch.setenv("RECNB_CALIBRATION", str(tmp_path_factory.mktemp("calibration") / "this_machine.json"))


@pytest.fixture(autouse=True)
def _fixed_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests measure on the fixed thread count set above (``RECNB_THREADS``), not on what the
    thread policy would choose from the machine's load at that moment: a test's result must not
    depend on what else runs. The policy itself is tested with a scripted load
    (``tests/test_threads.py``), which removes the variable. Subprocesses inherit it."""
    monkeypatch.setenv("RECNB_THREADS", str(torch.get_num_threads()))


@pytest.fixture
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every measurement counts as reliable (:func:`recnotebooks.timing.reliability` says ``""``),
    for tests of what is done with a reliable one (reuse, an exercise judged): whether the steps of
    a test's measurement varied depends on what else the machine runs. The reliability rule and
    what follows from an unreliable measurement are tested with scripted loads and spreads."""
    import recnotebooks.measure.cache_overhead as overhead
    import recnotebooks.measure.step as measure
    import recnotebooks.train as train

    for module in (measure, overhead, train):
        monkeypatch.setattr(module, "reliability", lambda *a: "")


@pytest.fixture(params=["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def device(request: pytest.FixtureRequest) -> torch.device:
    return torch.device(request.param)
