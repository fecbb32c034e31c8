"""Typed helpers the tests share, so that a test states its types instead of silencing the checker.

The library's tables are rows of ``dict[str, object]`` (a number, a name or a flag per column):
:func:`num` and :func:`whole` read one column with its type checked, so a test fails
with the column's name when a row holds something else. :func:`bad` passes a value of the wrong type
on purpose, for the tests of the run-time checks (``recnotebooks.checks``) a type checker would stop.
:func:`control_values` lists what a test sweeps an app's control through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, Protocol, runtime_checkable

Row = Mapping[str, object]


def num(row: Row, key: str) -> float:
    """``row[key]`` as a float; fails unless the column holds a number."""
    value = row[key]
    assert isinstance(value, Real), f"{key!r} holds {value!r}, not a number"
    return float(value)


def whole(row: Row, key: str) -> int:
    """``row[key]`` as an int (``int()`` of it: a count a table keeps as a float, too); fails unless the
    column holds a number."""
    value = row[key]
    if isinstance(value, Integral):
        return int(value)
    assert isinstance(value, Real), f"{key!r} holds {value!r}, not a number"
    return int(float(value))


def bad(value: object) -> Any:
    """A value the type checker lets through, for tests of the run-time checks: the value itself,
    unchanged, so the test passes exactly what it names."""
    return value


@runtime_checkable
class _Choice(Protocol):
    options: Sequence[object]


@runtime_checkable
class _Slider(Protocol):
    min: int
    max: int


def control_values(widget: object) -> list[object]:
    """The values a test sweeps an app's control through: every option of a choice (the value of a
    ``(label, value)`` option), the two ends and the middle of an integer slider."""
    if isinstance(widget, _Choice):
        return [o[1] if isinstance(o, tuple) else o for o in widget.options]
    assert isinstance(widget, _Slider), f"a {type(widget).__name__} is neither a choice nor a slider"
    lo, hi = widget.min, widget.max
    return [*sorted({lo, (lo + hi) // 2, hi})]
