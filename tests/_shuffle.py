"""A pytest plugin (``tests/conftest.py`` loads it): the tests in a random order, on request.

With ``RECNB_SHUFFLE=<seed>`` (a whole number) set, the collected tests run in an order drawn
from that seed: the modules shuffled, then the tests within each module (as pytest-randomly
orders them, so a module's fixtures are still set up once). A test that passes only after
another one (state left behind by a test or a module before it) fails in some order, and the
seed, printed at the start and at the end of the run, gives that order again. Without the
variable nothing changes.
"""

from __future__ import annotations

import os
import random

import pytest

SEED_ENV = "RECNB_SHUFFLE"


def shuffle_seed() -> int | None:
    """The seed in ``RECNB_SHUFFLE``, or ``None`` when it is unset or empty."""
    text = os.environ.get(SEED_ENV, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise pytest.UsageError(f"{SEED_ENV} must be a whole number (a seed), got {text!r}") from None


def shuffled(items: list[pytest.Item], seed: int) -> list[pytest.Item]:
    """``items`` with their modules in an order drawn from ``seed``, and the tests within each
    module shuffled too; every item kept once."""
    rng = random.Random(seed)
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    groups = list(modules.values())
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    return [item for group in groups for item in group]


def _line(seed: int) -> str:
    return f"tests shuffled: {SEED_ENV}={seed} runs them in this order again"


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = shuffle_seed()
    return None if seed is None else _line(seed)


@pytest.hookimpl(trylast=True)  # after the other hooks have marked and deselected what they do
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = shuffle_seed()
    if seed is None:
        return
    items[:] = shuffled(items, seed)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and config.get_verbosity() < 0:  # -q prints no header: say it here
        reporter.write_line(_line(seed))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    seed = shuffle_seed()
    if seed is not None:
        terminalreporter.write_line(_line(seed))
