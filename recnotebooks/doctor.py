"""Environment report behind ``recnb doctor`` and notebook 00's first cell."""

from __future__ import annotations

import importlib
import os
import platform
import sys
from typing import Any

import torch

from recnotebooks.checks import available_memory_bytes

__all__ = ["doctor_report", "print_doctor", "available_memory_bytes"]

_PACKAGES = (
    "torch",
    "numpy",
    "tqdm",
    "jupyterlab",
    "ipywidgets",
    "anywidget",
    "altair",
    "vl_convert",
    "torchrec",
    "fbgemm_gpu",
)


def _version(name: str) -> str | None:
    try:
        mod = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any import failure means "not usable"
        return None
    return str(getattr(mod, "__version__", "installed"))


def _altair_offline() -> tuple[bool, str]:
    try:
        import altair as alt
        import vl_convert as vlc
    except ImportError as e:
        return False, f"missing {e.name}: pip install 'recnotebooks[lab]'"
    try:
        spec = alt.Chart(alt.Data(values=[{"x": 1, "y": 2}])).mark_point().encode(x="x:Q", y="y:Q").to_dict()
        svg = vlc.vegalite_to_svg(spec)
    except Exception as e:  # noqa: BLE001 - report, don't crash
        return False, f"vl-convert could not render offline: {e}"
    return ("<svg" in svg), "renders offline with vl-convert"


def doctor_report() -> dict[str, Any]:
    """Versions, devices, threads, memory, and whether widgets and offline charts work."""
    from recnotebooks import __version__

    devices = [{"name": "cpu", "kind": "cpu", "detail": platform.processor() or platform.machine()}]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            devices.append(
                {
                    "name": f"cuda:{i}",
                    "kind": "cuda",
                    "detail": p.name,
                    "memory_gib": round(p.total_memory / 2**30, 1),
                }
            )
    versions = {name: _version(name) for name in _PACKAGES}
    widgets_ok = all(versions.get(k) is not None for k in ("ipywidgets", "jupyterlab", "anywidget"))
    charts_ok, charts_msg = _altair_offline()
    mem = available_memory_bytes("cpu")
    return {
        "command": "doctor",
        "recnotebooks": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": versions,
        "devices": devices,
        "cuda_available": torch.cuda.is_available(),
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "host_memory_available_gib": None if mem is None else round(mem / 2**30, 1),
        "widgets": {
            "ok": widgets_ok,
            "detail": "ipywidgets + anywidget + jupyterlab"
            if widgets_ok
            else "missing: pip install 'recnotebooks[lab]'",
        },
        "offline_charts": {"ok": charts_ok, "detail": charts_msg},
    }


def print_doctor(r: dict[str, Any]) -> None:
    print(f"recnotebooks {r['recnotebooks']} on Python {r['python']} ({r['platform']})")
    for name, v in r["versions"].items():
        print(f"  {name:<12} {v or '-'}")
    for d in r["devices"]:
        extra = f", {d['memory_gib']} GiB" if "memory_gib" in d else ""
        print(f"  device {d['name']}: {d['detail']}{extra}")
    free_gib = r["host_memory_available_gib"]
    print(f"  threads {r['threads']} of {r['cpu_count']} cores; host memory free {free_gib} GiB")
    for key in ("widgets", "offline_charts"):
        ok = "ok" if r[key]["ok"] else "NOT OK"
        print(f"  {key:<15} {ok}: {r[key]['detail']}")
