"""A pytest plugin (``tests/conftest.py`` loads it): the run ends with what failed and how.

Just before pytest's short summary (``-ra``), every failed or errored test gets its id, where it
failed and the first lines of its error, so that a failure seen once can be found again from the
end of the log alone. pytest's own summary line drops the message where the test id fills the
terminal's width (80 columns in a log), and prints the whole message, however long, on CI.
"""

from __future__ import annotations

import pytest

#: Lines of each failure's message shown, and characters of each line.
FIRST_LINES, LINE_CHARS = 6, 200


def _first_lines(report: pytest.CollectReport | pytest.TestReport) -> tuple[str, list[str]]:
    """Where ``report`` failed (``path:line``, or ``""``) and the first lines of its error."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return f"{crash.path}:{crash.lineno}", crash.message.splitlines()[:FIRST_LINES]
    text = str(report.longrepr).strip().splitlines()  # a collection error, a skip's tuple
    return "", text[-FIRST_LINES:]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The failures' first lines, printed just before pytest's short summary ends the run."""
    reports = [r for key in ("failed", "error") for r in terminalreporter.stats.get(key, [])]
    if not reports:
        return
    terminalreporter.section("what failed, first lines", sep="=", red=True, bold=True)
    for report in reports:
        kind = "FAILED" if report.failed and getattr(report, "when", "call") == "call" else "ERROR"
        if getattr(report, "when", "call") not in ("call", "collect"):
            kind += f" at {report.when}"
        where, lines = _first_lines(report)
        terminalreporter.write_line(f"{kind} {report.nodeid}" + (f" ({where})" if where else ""))
        for line in lines:
            terminalreporter.write_line(
                "    " + (line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " ...")
            )
