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

__all__ = ["build_controls", "check_control_value", "control_width", "human", "option_values", "percent"]

#: px of one character of a control's label or option at JupyterLab's 13 px UI font (a wide
#: font, rounded up: a label is never cut because its width was guessed short).
UI_CHAR_PX = 7.2
#: A slider's track is at least this long (px) in the width :func:`control_width` asks for.
SLIDER_TRACK_PX = 100
#: px a toggle button adds to its words: 10 px of padding each side, and room to spare
BUTTON_PAD_PX = 28


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
    return [o[1] if isinstance(o, tuple) else o for o in spec.get("options", [])]  # type: ignore[attr-defined]


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


def _text_px(text: object) -> float:
    return len(str(text)) * UI_CHAR_PX


def _labels(widget: W.Widget) -> list[str]:
    """What a control shows for its options (or its value's range), to size it."""
    labels = getattr(widget, "_options_labels", None)
    if labels:
        return [str(x) for x in labels]
    if isinstance(widget, W.IntSlider | W.FloatSlider | W.BoundedIntText | W.BoundedFloatText):
        return [str(widget.min), str(widget.max)]
    return [str(getattr(widget, "value", ""))]


def control_width(widget: W.Widget) -> int:
    """The px ``widget`` needs to show its whole label, its longest option or readout and, for a
    slider, a track of :data:`SLIDER_TRACK_PX` (JupyterLab's widget CSS: a label's 8 px margin,
    the slider handle's margins, a readout of at least 70 px, 2 px around a toggle button)."""
    label = _text_px(getattr(widget, "description", "")) + 8 if getattr(widget, "description", "") else 0
    widest = max((_text_px(x) for x in _labels(widget)), default=0.0)
    if isinstance(widget, W.ToggleButtons):  # each button its words, 10 px padding each side, 2 px margins
        need = label + sum(_text_px(x) + BUTTON_PAD_PX + 4 for x in _labels(widget))
    elif isinstance(widget, W.Dropdown):
        need = label + widest + 40  # the arrow and the padding
    elif isinstance(widget, W.SelectionSlider | W.IntSlider | W.FloatSlider | W.FloatLogSlider):
        need = label + 16 + SLIDER_TRACK_PX + max(70.0, widest + 12)
    else:
        need = label + max(150.0, widest + 24)
    return round(need)


def _widget(spec: Mapping[str, object], value: object) -> W.ValueWidget:
    """A control of ``spec``: as wide as its place in the app's grid (``App`` sizes the grid's
    cells with :func:`control_width`), its label whole."""
    style = {"description_width": "initial"}
    layout = W.Layout(width="auto")
    label = str(spec["label"])
    if spec.get("dropdown"):
        return W.Dropdown(options=spec["options"], value=value, description=label, style=style, layout=layout)
    if "options" in spec and all(isinstance(o, str) for o in spec["options"]):  # type: ignore[attr-defined]
        # each button as wide as its words (ipywidgets' default is 148 px each: a row of four wraps)
        return W.ToggleButtons(
            options=spec["options"],
            value=value,
            description=label,
            layout=layout,
            style={**style, "button_width": "auto"},
        )
    # a slider: its value read when the handle is let go (every step of a drag would recompute)
    slider = {
        "value": value,
        "description": label,
        "continuous_update": False,
        "style": style,
        "layout": layout,
    }
    if "options" in spec:
        return W.SelectionSlider(options=spec["options"], **slider)
    return W.IntSlider(min=spec["min"], max=spec["max"], **slider)


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
