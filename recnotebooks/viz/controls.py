"""Widgets of the explorer apps, built from plain specifications, and number formatting.

A control specification is a dict: ``options`` (values, or ``(label, value)`` pairs) or
``min``/``max`` for an integer slider; ``value`` (the default); ``label``; and
``dropdown: True`` for a long list of names. :func:`build_controls` checks the settings a
caller asks for against the specifications before any widget exists, so a bad setting
fails at the entry point with its name, value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as W

from recnotebooks.checks import check_bool, check_choice, check_float, check_int

__all__ = ["build_controls", "check_control_value", "human", "option_values", "percent"]


def human(v: float, unit: str = "") -> str:
    """``1234567 -> '1.23 M'`` (three significant digits, SI prefix, optional unit)."""
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g} {suffix}{unit}"
    return f"{v:.3g} {unit}".rstrip()


def percent(fraction: float) -> str:
    """``0.0036 -> '0.36%'``, ``0.041 -> '4.1%'``, ``0.67 -> '67%'``: two significant digits, so
    two labels that read the same stand for bars of (nearly) the same length."""
    pct = fraction * 100
    if pct == 0 or abs(pct) >= 9.95:
        return f"{pct:.0f}%"
    return f"{pct:#.2g}%"  # '#' keeps the trailing zero: "0.50%", "1.0%"


def option_values(spec: Mapping[str, object]) -> list[object]:
    """The values a control with ``options`` allows (labels of ``(label, value)`` pairs dropped)."""
    return [o[1] if isinstance(o, tuple) else o for o in spec.get("options", [])]  # type: ignore[union-attr]


def check_control_value(name: str, widget: W.ValueWidget, value: object) -> object:
    """``value`` checked against what the control ``name`` allows, before the widget sees it.

    A widget would clamp an out-of-range number, round a float or take ``True`` as 1 without
    a word; this refuses them instead (``TypeError`` for the wrong kind of value, ``ValueError``
    for one outside the options or range), naming the control, the value and what is allowed.
    Returns the value as the widget should receive it (NumPy scalars as Python numbers).
    """
    options = getattr(widget, "options", None)
    if options is not None:
        return check_choice(name, value, [o[1] if isinstance(o, tuple) else o for o in options])
    if isinstance(widget, W.Checkbox | W.ToggleButton):
        return check_bool(name, value)
    if isinstance(widget, W.IntSlider | W.BoundedIntText):
        return check_int(name, value, lo=widget.min, hi=widget.max)
    if isinstance(widget, W.FloatSlider | W.BoundedFloatText):
        return check_float(name, value, lo=widget.min, hi=widget.max)
    if isinstance(widget, W.FloatLogSlider):
        return check_float(name, value, lo=widget.base**widget.min, hi=widget.base**widget.max)
    return value


def _widget(spec: Mapping[str, object], value: object) -> W.ValueWidget:
    style = {"description_width": "initial"}
    layout = W.Layout(width="300px")
    label = str(spec["label"])
    if spec.get("dropdown"):
        return W.Dropdown(options=spec["options"], value=value, description=label, style=style)
    if "options" in spec and all(isinstance(o, str) for o in spec["options"]):  # type: ignore[union-attr]
        return W.ToggleButtons(options=spec["options"], value=value, description=label, style=style)
    if "options" in spec:
        return W.SelectionSlider(
            options=spec["options"],
            value=value,
            description=label,
            continuous_update=False,
            style=style,
            layout=layout,
        )
    return W.IntSlider(
        min=spec["min"],
        max=spec["max"],
        value=value,
        description=label,
        continuous_update=False,
        style=style,
        layout=layout,
    )


def build_controls(
    specs: Mapping[str, Mapping[str, object]], values: Mapping[str, object], app: str = "the explorer"
) -> dict[str, W.ValueWidget]:
    """One widget per specification, starting at ``values[name]`` or the spec's default.

    Raises ``KeyError`` for a setting ``app`` does not have, ``ValueError`` for a value
    outside a control's options or range and ``TypeError`` for the wrong kind of value (a
    float or a bool for an integer slider).
    """
    unknown = sorted(set(values) - set(specs))
    if unknown:
        raise KeyError(f"unknown setting(s) {unknown}; {app} has {sorted(specs)}")
    start = {}
    for name, spec in specs.items():
        v = values.get(name, spec["value"])
        if "options" in spec:
            start[name] = check_choice(name, v, option_values(spec))
        else:
            start[name] = check_int(name, v, lo=spec["min"], hi=spec["max"])  # type: ignore[arg-type]
    return {name: _widget(spec, start[name]) for name, spec in specs.items()}
