"""App latency: widget change → new chart data, and the smoke run of every notebook.

For each app, many widget changes are timed from setting the value to the chart widget
holding the new spec (compute + render + in-place update), and p50/p95 are printed.
Targets (issue 3): p95 <= 100 ms for analytic apps, <= 1.5 s for measured updates, and the
smoke run of all notebooks (``RECNB_SMOKE=1``, headless) <= 3 minutes.

Measured updates are timed as a learner explores: from the default setting, one slider is
moved to a random position (the reset to defaults is not timed). A random walk, where
changes accumulate and can reach heavy settings, is printed too for information.

The baseline, in the same process, is the naive pattern: build a new chart widget for
every change instead of updating one in place; its ratio is printed.

Run: ``python benchmarks/app_latency.py`` (``--quick`` for fewer changes, ``--no-notebooks``
to skip the smoke run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import time
from pathlib import Path

import altair as alt

from recnotebooks.viz.app import App, AppError, HistoryEntry
from recnotebooks.viz.architecture import ARCHITECTURE_CONTROLS, architecture_explorer
from recnotebooks.viz.traffic import lookup_traffic_app

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _options(w: object) -> list[object]:
    opts = getattr(w, "options", None)
    if opts is not None:
        return [o[1] if isinstance(o, tuple) else o for o in opts]
    return list(range(w.min, w.max + 1))  # type: ignore[attr-defined]


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def time_changes(
    app: App, n: int, rng: random.Random, from_defaults: bool, defaults: dict[str, object]
) -> dict:
    """Time ``n`` single-control changes; returns p50/p95 (s) and how many were refused."""
    times, refused = [], 0
    for _ in range(n):
        if from_defaults:
            with contextlib.suppress(AppError):
                app.set(**defaults)
        name = rng.choice(list(app.controls))
        value = rng.choice([v for v in _options(app.controls[name]) if v != app.values[name]])
        t0 = time.perf_counter()
        try:
            app.set(**{name: value})
        except AppError:
            refused += 1
            continue
        times.append(time.perf_counter() - t0)
    return {"n": len(times), "refused": refused, "p50_s": _pct(times, 0.5), "p95_s": _pct(times, 0.95),
            "max_s": max(times)}  # fmt: skip


def naive_recreate(app: App, n: int, rng: random.Random) -> float:
    """Median seconds per change when a new JupyterChart is built each time (the baseline)."""
    times = []
    for _ in range(n):
        name = rng.choice(list(app.controls))
        value = rng.choice(_options(app.controls[name]))
        app.controls[name].value = value
        t0 = time.perf_counter()
        result = app.compute(**app.values)
        alt.JupyterChart(app.render([HistoryEntry("now", app.values, result, "")]))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def smoke_run() -> dict[str, float]:
    """Seconds to run each notebook headless with RECNB_SMOKE=1 (kernel start included)."""
    import nbclient
    import nbformat

    os.environ["RECNB_SMOKE"] = "1"
    out = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()  # fmt: skip
        out[path.stem] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer changes")
    ap.add_argument("--no-notebooks", action="store_true", help="skip the notebook smoke run")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    rng = random.Random(0)
    n_fast, n_meas = (40, 12) if args.quick else (300, 40)
    arch_defaults = {k: v["value"] for k, v in ARCHITECTURE_CONTROLS.items()}
    rows = []

    traffic = lookup_traffic_app()
    traffic_defaults = traffic.values
    rows.append(("Embedding traffic (00)", "analytic", 0.100,
                 time_changes(traffic, n_fast, rng, False, traffic_defaults)))  # fmt: skip
    naive_t = naive_recreate(traffic, n_fast // 2, rng)
    analytic = architecture_explorer(measure=False)
    rows.append(("Architecture Explorer, sizes only (01)", "analytic", 0.100,
                 time_changes(analytic, n_fast, rng, False, arch_defaults)))  # fmt: skip
    naive_a = naive_recreate(analytic, n_fast // 2, rng)
    from recnotebooks.viz.efficiency import EFFICIENCY_CONTROLS, efficiency_explorer

    eff_defaults = {k: v["value"] for k, v in EFFICIENCY_CONTROLS.items()}
    eff = efficiency_explorer(measure=False)
    rows.append(("Efficiency Explorer, modeled only (02)", "analytic", 0.100,
                 time_changes(eff, n_fast, rng, False, eff_defaults)))  # fmt: skip
    from recnotebooks.viz.servers import SERVER_CONTROLS, server_explorer

    servers = server_explorer()
    rows.append(("Server Design Explorer, modeled (05)", "analytic", 0.100,
                 time_changes(servers, n_fast, rng, False, {k: v["value"] for k, v in SERVER_CONTROLS.items()})))  # fmt: skip
    eff_m = efficiency_explorer(measure=True)
    rows.append(("Efficiency Explorer, one slider from defaults (02)", "measured", 1.5,
                 time_changes(eff_m, n_meas, rng, True, eff_defaults)))  # fmt: skip
    measured = architecture_explorer(measure=True)
    rows.append(("Architecture Explorer, one slider from defaults (01)", "measured", 1.5,
                 time_changes(measured, n_meas, rng, True, arch_defaults)))  # fmt: skip
    rows.append(("Architecture Explorer, random walk (01, info)", "measured", None,
                 time_changes(measured, n_meas, rng, False, arch_defaults)))  # fmt: skip

    print(
        f"{'app':<55} {'kind':<9} {'n':>4} {'refused':>7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  target"
    )
    results = []
    for name, kind, target, r in rows:
        verdict = (
            ""
            if target is None
            else ("PASS" if r["p95_s"] <= target else "FAIL") + f" p95 <= {target * 1e3:.0f} ms"
        )
        print(f"{name:<55} {kind:<9} {r['n']:>4} {r['refused']:>7} {r['p50_s'] * 1e3:>8.1f} {r['p95_s'] * 1e3:>8.1f} "
              f"{r['max_s'] * 1e3:>8.1f}  {verdict}")  # fmt: skip
        results.append({"app": name, "kind": kind, "target_s": target, **r})
    for name, naive, r in (("traffic", naive_t, rows[0][3]), ("explorer sizes", naive_a, rows[1][3])):
        print(f"in-place update vs new widget per change ({name}): {naive * 1e3:.1f} ms / {r['p50_s'] * 1e3:.1f} ms "
              f"= {naive / r['p50_s']:.2f}x")  # fmt: skip
    report: dict[str, object] = {"apps": results}
    if not args.no_notebooks:
        runs = smoke_run()
        total = sum(runs.values())
        for k, v in runs.items():
            print(f"smoke run {k:<28} {v:6.1f} s")
        print(
            f"smoke run, all notebooks         {total:6.1f} s  {'PASS' if total <= 180 else 'FAIL'} <= 180 s"
        )
        report["smoke_run_s"] = runs
    if args.json:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
