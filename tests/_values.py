"""Typed helpers the tests share, so that a test states its types instead of silencing the checker.

The library's tables are rows of ``dict[str, object]`` (a number, a name or a flag per column):
:func:`num`, :func:`whole` and :func:`text` read one column with its type checked, so a test fails
with the column's name when a row holds something else. :func:`bad` passes a value of the wrong type
on purpose, for the tests of the run-time checks (``recnotebooks.checks``) a type checker would stop.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

Row = Mapping[str, object]


def num(row: Row, key: str) -> float:
    """``row[key]`` as a float; fails unless the column holds a number."""
    value = row[key]
    assert isinstance(value, Real), f"{key!r} holds {value!r}, not a number"
    return float(value)


def whole(row: Row, key: str) -> int:
    """``row[key]`` as an int; fails unless the column holds a whole number."""
    value = row[key]
    assert isinstance(value, Integral), f"{key!r} holds {value!r}, not a whole number"
    return int(value)


def text(row: Row, key: str) -> str:
    """``row[key]``; fails unless the column holds a string."""
    value = row[key]
    assert isinstance(value, str), f"{key!r} holds {value!r}, not a string"
    return value


def bad(value: object) -> Any:
    """A value the type checker lets through, for tests of the run-time checks: the value itself,
    unchanged, so the test passes exactly what it names."""
    return value
