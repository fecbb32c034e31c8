"""Widgets of the explorer apps, built from plain specifications, and number formatting.

A control specification is a dict: ``options`` (values, or ``(label, value)`` pairs) or
``min``/``max`` for an integer slider; ``value`` (the default); ``label``; and
``dropdown: True`` for a long list of names. :func:`build_controls` checks the settings a
caller asks for against the specifications before any widget exists, so a bad setting
fails at the entry point with its name, value and what is allowed.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import ipywidgets as W

__all__ = ["build_controls", "human", "option_values"]


def human(v: float, unit: str = "") -> str:
    """``1234567 -> '1.23 M'`` (three significant digits, SI prefix, optional unit)."""
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g} {suffix}{unit}"
    return f"{v:.3g} {unit}".rstrip()


def option_values(spec: Mapping[str, object]) -> list[object]:
    """The values a control with ``options`` allows (labels of ``(label, value)`` pairs dropped)."""
    return [o[1] if isinstance(o, tuple) else o for o in spec.get("options", [])]  # type: ignore[union-attr]


def _widget(spec: Mapping[str, object], value: object) -> W.ValueWidget:
    style = {"description_width": "initial"}
    layout = W.Layout(width="300px")
    label = str(spec["label"])
    if spec.get("dropdown"):
        return W.Dropdown(options=spec["options"], value=value, description=label, style=style)
    if "options" in spec and all(isinstance(o, str) for o in spec["options"]):  # type: ignore[union-attr]
        return W.ToggleButtons(options=spec["options"], value=value, description=label, style=style)
    if "options" in spec:
        return W.SelectionSlider(options=spec["options"], value=value, description=label, continuous_update=False,
                                 style=style, layout=layout)  # fmt: skip
    return W.IntSlider(min=spec["min"], max=spec["max"], value=value, description=label, continuous_update=False,
                       style=style, layout=layout)  # fmt: skip


def build_controls(specs: Mapping[str, Mapping[str, object]], values: Mapping[str, object],
                   app: str = "the explorer") -> dict[str, W.ValueWidget]:  # fmt: skip
    """One widget per specification, starting at ``values[name]`` or the spec's default.

    Raises ``KeyError`` for a setting ``app`` does not have and ``ValueError`` for a value
    outside a control's options or range.
    """
    unknown = sorted(set(values) - set(specs))
    if unknown:
        raise KeyError(f"unknown setting(s) {unknown}; {app} has {sorted(specs)}")
    start = {}
    for name, spec in specs.items():
        v = values.get(name, spec["value"])
        if "options" in spec:
            opts = option_values(spec)
            if v not in opts or (isinstance(v, bool) and not any(isinstance(o, bool) for o in opts)):
                raise ValueError(f"{name}={v!r} is not one of the options {spec['options']}")
        else:
            if (
                isinstance(v, bool)
                or not isinstance(v, numbers.Integral)
                or not spec["min"] <= v <= spec["max"]
            ):  # type: ignore[operator]
                raise ValueError(f"{name}={v!r} must be an int in [{spec['min']}, {spec['max']}]")
            v = int(v)
        start[name] = v
    return {name: _widget(spec, start[name]) for name, spec in specs.items()}
