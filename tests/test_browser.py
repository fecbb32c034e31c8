"""Real-browser tests: JupyterLab + headless Chromium run every notebook, as a learner would.

Each notebook in ``notebooks/`` is opened in JupyterLab, all its cells run (smoke mode), and
the page must show: no error output, no warning on stderr or from Vega on the browser console, no
element id twice inside the outputs (two charts sharing a clip path id clip each other), no output,
chart or app control wider than its area, no chart text cut short (Vega ends a label past its limit
with "…") nor a control's words (a button, a label or a readout narrower than its text), every
slider with a visible track, no text of an output or a markdown cell typeset as math (a "$50 > $30" stays as
written), and bars of every step-time breakdown drawn at a length proportional to their value,
up to their end (the SVG geometry against the value each bar carries). In the notebooks with an
app, a slider is then moved with the keyboard: the chart must redraw, name the change in its
history trail, and pass the same checks.

Every notebook is checked in two windows (:data:`LAYOUTS`): a 1280-px laptop window with
JupyterLab's file browser open (an output area of about 850 px), and one whose output area is
1000 px wide. It runs once, in the laptop window; the page is checked there, the window is
widened and the page checked again, the slider moved and the page checked wide, then narrowed
back to the laptop and checked once more, so that both windows see the apps before and after
the slider (a learner resizes a window too: the outputs reflow, the kernel draws nothing anew).

Needs Debian's ``chromium`` (``apt-get install chromium``) and the ``playwright`` Python
package, which drives that browser through ``executable_path`` (no browser download). In
CI (``CI`` set) a missing browser is a failure; elsewhere the test skips with the reason.
Set ``RECNB_SHOTS=/some/dir`` to keep screenshots of every chart output, and of each app before and
after the slider, in ``/some/dir/wide`` and ``/some/dir/laptop``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK_FILES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
CHROMIUM = os.environ.get("RECNB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: The windows every notebook is checked in: "laptop" is a 1280-px window with the file browser
#: open (an output area of about 850 px); "wide" is that window widened until an output area is
#: 1000 px.
LAYOUTS: dict[str, dict[str, int | None]] = {
    "laptop": {"window": 1280, "output": None},
    "wide": {"window": None, "output": 1000},
}
LAPTOP_MAX_OUTPUT = 870  # px: the laptop window's output area must be this narrow or narrower
MIN_TRACK_PX = 80  # px: a slider's track must be at least this long to be read and dragged
#: How Vega's and Vega-Lite's logger starts a console message: a chart spec it had to mend or could
#: not scale ("WARN Infinite extent for field ...": a layer with no rows; "WARN strokeDash dropped ...").
VEGA_LOG = ("WARN", "ERROR")
#: notebook -> (slider label, text the history trail must show after one step right, source label)
SLIDERS = {
    "00_start_here.ipynb": ("pooling factor", "pooling 20→40", "COMPUTED"),  # lookup traffic
    "01_dlrm_anatomy.ipynb": ("pooling factor", "pooling 1→2", "MEASURED on this machine"),  # Architecture
    "02_gpu_efficiency.ipynb": ("pooling factor", "pooling 40→80", "MEASURED on this machine"),  # Efficiency
    "03_embedding_placement_and_caches.ipynb": ("cache size", "cache_fraction 10%→20%", "SIMULATED"),  # Cache
    "04_multi_gpu_sharding.ipynb": ("processes (ranks)", "ranks 2→4", "MODELED"),  # Sharding
    "05_server_design.ipynb": ("table rows x", "rows_scale 30x→100x", "MODELED"),  # Server Design
    "06_capstone.ipynb": ("global batch", "batch_size 65536→131072", "MODELED"),  # Training Job Planner
    "07_generative_recommenders.ipynb": ("layers", "layers 3→4", "MODELED"),  # Generative Recommender
}
#: notebooks whose outputs must hold a step-time breakdown (its bars are checked)
BREAKDOWNS = {"01_dlrm_anatomy.ipynb", "03_embedding_placement_and_caches.ipynb",
              "04_multi_gpu_sharding.ipynb", "05_server_design.ipynb", "06_capstone.ipynb",
              "07_generative_recommenders.ipynb"}  # fmt: skip

PANEL = "window.jupyterapp.shell.currentWidget"
NOTEBOOK_STATE = f"""() => {{
  const nb = window.jupyterapp && {PANEL};
  if (!nb || !nb.content || !nb.sessionContext || !nb.sessionContext.session) return 'loading';
  const kernel = nb.sessionContext.session.kernel;
  const cells = nb.content.widgets.filter(c => c.model.type === 'code');
  if (!kernel || kernel.status !== 'idle' || cells.length === 0) return 'running';
  const outputs = cells.flatMap(c => c.model.outputs.toJSON());
  if (outputs.some(o => o.output_type === 'error')) return 'error';
  return cells.every(c => c.model.executionCount !== null) ? 'done' : 'running';
}}"""
OUTPUTS = f"""() => {PANEL}.content.widgets.filter(c => c.model.type === 'code')
  .flatMap((c, i) => c.model.outputs.toJSON().map(o => ({{...o, cell: i}})))"""
# every chart widget (class recnb-chart) drawn, and as many of them as chart outputs in the model
CHARTS_READY = f"""() => {{
  const charts = [...{PANEL}.node.querySelectorAll('.jp-OutputArea .recnb-chart')];
  const drawn = charts.filter(e => e.querySelector('svg.marks, canvas.marks'));
  return {{total: charts.length, drawn: drawn.length}};
}}"""
PAGE_FAULTS = f"""() => {{
  const root = {PANEL}.node;
  const ids = [...root.querySelectorAll('.jp-OutputArea [id]')].map(e => e.id);
  const dup = [...new Set(ids.filter((id, i) => ids.indexOf(id) !== i))];
  const wide = [];
  for (const area of root.querySelectorAll('.jp-OutputArea-output')) {{
    const edge = area.getBoundingClientRect().right + 1;
    const over = [...area.querySelectorAll('svg.marks, canvas.marks, .recnb-app')]
      .filter(e => e.getBoundingClientRect().right > edge);
    if (area.scrollWidth > area.clientWidth + 1 || over.length)
      wide.push({{scrollWidth: area.scrollWidth, clientWidth: area.clientWidth,
                 overflow_px: Math.max(0, ...over.map(e => Math.round(e.getBoundingClientRect().right
                                                                   - edge))),
                 text: area.innerText.slice(0, 60)}});
  }}
  const widths = [...root.querySelectorAll('.jp-OutputArea-output')].map(a => a.clientWidth);
  // a control of an app past its area's right edge (a row of widgets too wide for the window)
  const controls = [];
  for (const area of root.querySelectorAll('.jp-OutputArea-output')) {{
    const edge = area.getBoundingClientRect().right + 1;
    for (const w of area.querySelectorAll('.recnb-app .widget-inline-hbox, .recnb-app .widget-toggle-button, '
                                          + '.recnb-app .widget-html, .recnb-app .widget-button'))
      if (w.getBoundingClientRect().width > 0 && w.getBoundingClientRect().right > edge)
        controls.push({{overflow_px: Math.round(w.getBoundingClientRect().right - edge),
                        text: (w.innerText || '').slice(0, 60)}});
  }}
  // a control's words cut short (a button, a label or a readout narrower than its text)
  const cutControls = [...root.querySelectorAll('.jp-OutputArea .recnb-app :is(button, .widget-label, '
                                                + '.widget-readout)')]
    .filter(e => e.getBoundingClientRect().width > 0 && e.scrollWidth > e.clientWidth + 1)
    .map(e => e.innerText || e.title || '');
  // chart text Vega cut short: it ends a text past its limit with an ellipsis
  const cut = [...root.querySelectorAll('.jp-OutputArea svg.marks text')]
    .map(t => t.textContent).filter(t => t.includes('…'));
  // every slider's track, long enough to read and drag
  const tracks = [...root.querySelectorAll('.jp-OutputArea .widget-slider')].map(s => {{
    const track = s.querySelector('.slider-container, .noUi-target');
    return {{label: (s.querySelector('.widget-label') || s).innerText.slice(0, 40),
             track_px: track ? Math.round(track.getBoundingClientRect().width) : 0}};
  }}).filter(t => t.track_px < {MIN_TRACK_PX});
  // output or markdown text typeset as math ("$50 > $30" read as TeX); a markdown cell says which
  // cell it is (its index among the notebook's cells), so a cell whose math is all formulas passes
  const typeset = ':is(.jp-OutputArea-output, .jp-MarkdownOutput)';
  const cells = [...root.querySelectorAll('.jp-Cell')];
  const math = [...root.querySelectorAll(`${{typeset}} :is(mjx-container, .MathJax)`)].map(m => ({{
    cell: m.closest('.jp-MarkdownOutput') ? cells.indexOf(m.closest('.jp-Cell')) : -1,
    text: (m.closest(typeset).innerText || '').slice(0, 80)}}));
  return {{duplicate_ids: dup, too_wide: wide, area_width: Math.max(0, ...widths),
           controls_too_wide: controls, cut_text: [...new Set(cut)], cut_controls: cutControls,
           short_tracks: tracks, math: math}};
}}"""
BREAKDOWN_SVGS = f"""() => [...{PANEL}.node.querySelectorAll('.jp-OutputArea svg.marks')]
  .map((s, i) => [i, s.querySelectorAll('path[aria-label^="milliseconds per step: "]').length])
  .filter(([i, n]) => n > 0).map(([i, n]) => i)"""
# every bar of one breakdown: its value (from its aria-label), drawn width, and whether the
# browser paints it at both ends (a clip path of another chart would hide its far end; the chart's
# own text and rule marks over a bar are annotations, not clipping)
BARS = f"""async (index) => {{
  const svg = [...{PANEL}.node.querySelectorAll('.jp-OutputArea svg.marks')][index];
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  svg.scrollIntoView({{block: 'center'}});
  await frame();
  const out = [];
  for (const p of svg.querySelectorAll('path[aria-label^="milliseconds per step: "]')) {{
    // an app taller than the window: bring each bar into view before asking what is painted there
    let r = p.getBoundingClientRect();
    if (r.top < 0 || r.bottom > window.innerHeight) {{
      p.scrollIntoView({{block: 'center'}});
      await frame();
      r = p.getBoundingClientRect();
    }}
    const y = r.top + r.height / 2;
    // painted: the bar itself is on top there, or one of its own chart's annotations drawn over it
    // (the measured chart's "NOT RELIABLE" text and spread whiskers on a busy machine), never
    // another chart or the page
    const painted = x => {{
      const e = document.elementFromPoint(x, y);
      return e === p || (!!e && e.closest('svg') === svg && !!e.closest('g.mark-text, g.mark-rule'));
    }};
    const cell = p.closest('g[class*="concat_"]');  // charts side by side have scales of their own
    out.push({{value: parseFloat(p.getAttribute('aria-label').split(';')[0].split(':')[1]),
               chart: cell ? [...cell.classList].find(c => c.startsWith('concat_')) : 'single',
               width: r.width, label: p.getAttribute('aria-label').slice(0, 120),
               start: r.width < 4 || painted(r.left + 1.5), end: r.width < 4 || painted(r.right - 1.5)}});
  }}
  return out;
}}"""


def _require_browser() -> None:
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install playwright)")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    if missing:
        msg = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(msg + "; CI must install them (.ci/run does)")
        pytest.skip(msg)


def _free_port() -> int:
    """A free port *below* the kernel's ephemeral range, for JupyterLab.

    JupyterLab binds the port it is given after checking it (bind, close, bind again), and
    everything on the machine that binds port 0 or connects out takes ports of the ephemeral
    range: a port of that range found free here can be gone by the time the server binds it.
    Below the range only a program that names the port can take it (:func:`_start_lab` then
    tries another)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    rng = random.Random()
    for _ in range(200) if low > 20_000 else ():
        port = rng.randrange(20_000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # no such range here: let the system pick
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Ports JupyterLab is given before the test gives up, when another program takes each first.
LAB_TRIES = 3
#: What JupyterLab's log says when its port was taken (jupyter_server's ServerApp._find_http_port
#: and _bind_http_server).
PORT_TAKEN = ("is already in use", "could not be started because")


def _lab_settings(settings: Path) -> None:
    """Render every cell (no windowing: outputs off screen are checked too); no news popups."""
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """JupyterLab on a free localhost port over a scratch copy of the notebooks: a URL template."""
    _require_browser()
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "notebooks"
    shutil.copytree(NOTEBOOKS, root)
    _lab_settings(tmp / "settings")
    token = "recnb-browser-test"
    env = {
        **os.environ,
        "RECNB_SMOKE": "1",
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "ws"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
    }
    proc, url = _start_lab(_lab_command(root, token), env, tmp, token)
    try:
        # a workspace per notebook, reset: a page opens its notebook alone, not the ones before it
        yield f"{url}/lab/workspaces/{{workspace}}/tree/{{notebook}}?token={token}&reset"
    finally:
        _stop(proc)


def _lab_command(root: Path, token: str) -> list[str]:
    """JupyterLab over ``root`` on 127.0.0.1, answering with ``token``, on the port added after."""
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.expose_app_in_browser=True"]  # fmt: skip
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--ServerApp.allow_root=True")
    return cmd


def _start_lab(cmd: list[str], env: dict[str, str], tmp: Path, token: str) -> tuple[subprocess.Popen, str]:
    """JupyterLab started on a free port (:func:`_free_port`), answering with ``token``; another
    port when the one it was given is taken before it binds it (up to ``LAB_TRIES``); its log in
    ``tmp``. Fails with the log when it does not start for another reason, or within 90 s."""
    logs = []
    for attempt in range(LAB_TRIES):
        port, log_path = _free_port(), tmp / f"jupyterlab-{attempt}.log"
        logs.append(log_path)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [*cmd, f"--ServerApp.port={port}"], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        return proc, url
            except OSError:
                pass
            time.sleep(0.3)
        _stop(proc)
        text = log_path.read_text(errors="replace")
        if not any(words in text for words in PORT_TAKEN):
            pytest.fail("JupyterLab did not start:\n" + text[-3000:])
    pytest.fail(f"JupyterLab's port was taken by another program {LAB_TRIES} times:\n"
                + "\n".join(p.read_text(errors="replace")[-1000:] for p in logs))  # fmt: skip


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def browser(jupyterlab: str) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _wait_for_charts(page: Page, expected: int, timeout_s: float = 60) -> None:
    """Until every chart is drawn and their number has not changed for a second, once there are
    ``expected`` of them (widget outputs; some may be other widgets: then after 8 steady s)."""
    deadline, last, stable = time.monotonic() + timeout_s, None, 0
    while time.monotonic() < deadline:
        state = page.evaluate(CHARTS_READY)
        stable = stable + 1 if state == last and state["drawn"] == state["total"] else 0
        if stable >= (4 if state["total"] >= expected else 32):
            return
        last = state
        time.sleep(0.25)
    pytest.fail(f"charts did not finish drawing: {last}")


def _run_all(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_function(
        f"() => window.jupyterapp && {PANEL} && {PANEL}.sessionContext "
        f"&& {PANEL}.sessionContext.session && {PANEL}.sessionContext.session.kernel",
        timeout=90_000,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        f"() => ['done', 'error'].includes(({NOTEBOOK_STATE})())",
        timeout=300_000,
        polling=500,
    )


def _fit_viewport(page: Page, layout: str) -> None:
    """Size the window for ``layout``: resize it until an output area is as wide as the layout
    says, or make it the laptop window (1280 px, file browser open) and check its output area is
    narrow."""
    want = LAYOUTS[layout]["output"]
    if want is None:  # the laptop: a 1280-px window, with the file browser open beside the notebook
        size = page.viewport_size
        assert size is not None
        page.set_viewport_size({"width": int(LAYOUTS[layout]["window"] or 0), "height": size["height"]})
        page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")
        time.sleep(0.5)
        width = page.evaluate(PAGE_FAULTS)["area_width"]
        assert 0 < width <= LAPTOP_MAX_OUTPUT, f"the laptop window's output area is {width} px wide"
        return
    width = page.evaluate(PAGE_FAULTS)["area_width"]
    if width and abs(width - want) > 2:
        size = page.viewport_size
        assert size is not None
        page.set_viewport_size({"width": size["width"] + want - width, "height": size["height"]})
        time.sleep(0.5)


def _bar_faults(page: Page, must_have: bool) -> list[str]:
    """Every breakdown's bars: drawn width proportional to value, painted up to both ends."""
    charts = page.evaluate(BREAKDOWN_SVGS)
    faults = [] if charts or not must_have else ["no step-time breakdown chart found in the outputs"]
    for index in charts:
        bars = [b for b in page.evaluate(BARS, index) if b["value"] > 0]
        for chart in {b["chart"] for b in bars}:
            same = [b for b in bars if b["chart"] == chart]
            scale = sorted(b["width"] / b["value"] for b in same)[len(same) // 2]  # px per ms
            faults += [
                f"bar length {b['width']:.1f} px is not {b['value'] * scale:.1f} px for its value: {b}"
                for b in same
                if abs(b["width"] - b["value"] * scale) > 1 + 0.01 * b["width"]
            ]
        faults += [
            f"bar not painted to its end (clipped?): {b}" for b in bars if not (b["start"] and b["end"])
        ]
    return faults


def _formula_cells(notebook: str) -> set[int]:
    """Indices of the markdown cells whose typeset pieces are all formulas (notebook 01's cross
    layer): MathJax may typeset those, and nothing else (tests/test_markdown_render.py)."""
    from test_markdown_render import is_formula, typeset_as_math

    cells = json.loads((NOTEBOOKS / notebook).read_text())["cells"]
    pieces = {
        i: typeset_as_math("".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "markdown"
    }
    return {i for i, found in pieces.items() if found and all(is_formula(m) for m in found)}


def _page_faults(page: Page, notebook: str) -> list[str]:
    found = page.evaluate(PAGE_FAULTS)
    formulas = _formula_cells(notebook)
    area = found["area_width"]
    return (
        [f"element id used twice in the outputs: {i!r}" for i in found["duplicate_ids"]]
        + [f"output wider than its {area} px area: {w}" for w in found["too_wide"]]
        + [f"app control past the right edge of its {area} px area: {w}" for w in found["controls_too_wide"]]
        + [f"chart text cut short: {t!r}" for t in found["cut_text"]]
        + [f"control text cut short: {t!r}" for t in found["cut_controls"]]
        + [f"slider track shorter than {MIN_TRACK_PX} px: {t}" for t in found["short_tracks"]]
        + [f"text typeset as math: {m['text']!r}" for m in found["math"] if m["cell"] not in formulas]
    )


def _shoot(page: Page, shots: str | None, layout: str, name: str) -> None:
    """Screenshots of every output that holds a chart (RECNB_SHOTS), to look at, in the folder of
    ``layout``."""
    if not shots:
        return
    areas = page.locator(".jp-OutputArea-output", has=page.locator(".vega-embed"))
    for k in range(areas.count()):
        areas.nth(k).screenshot(path=f"{shots}/{layout}/{name}_{k}.png")


def _app(page: Page, notebook: str) -> Locator:
    """The app of ``notebook`` whose slider :func:`_move_slider` moves."""
    return page.locator(".recnb-app", has=page.locator(".widget-slider", has_text=SLIDERS[notebook][0])).first


def _shoot_app(page: Page, notebook: str, shots: str | None, layout: str, when: str) -> None:
    """A screenshot of the app (RECNB_SHOTS) ``when`` (before or after the slider) in ``layout``."""
    if shots:
        app = _app(page, notebook)
        app.scroll_into_view_if_needed()
        app.screenshot(path=f"{shots}/{layout}/{Path(notebook).stem}_{when}.png")


def _move_slider(page: Page, notebook: str) -> None:
    slider, change, label = SLIDERS[notebook]
    app = _app(page, notebook)
    app.scroll_into_view_if_needed()
    chart = app.locator(".recnb-chart svg.marks").first
    chart.wait_for(timeout=60_000)
    before = chart.inner_html()
    assert label in before and "now" in before
    handle = app.locator(".widget-slider", has_text=slider).locator(".noUi-handle").first
    handle.focus()
    page.keyboard.press("ArrowRight")  # one step right, as with the keyboard
    chart.evaluate(
        "(svg, old) => new Promise(done => { const t = setInterval(() => { const s = "
        "svg.isConnected ? svg : document.querySelector('.recnb-chart svg.marks'); "
        "if (s && s.innerHTML !== old) { clearInterval(t); done(); } }, 250); })",
        before,
    )
    time.sleep(1.0)  # the redraw of every panel
    after = app.locator(".recnb-chart svg.marks").first.inner_html()
    assert change in after, f"the history trail does not name the change {change!r}"
    assert "recnb-error" not in app.inner_html()


@pytest.mark.parametrize("notebook", NOTEBOOK_FILES)
def test_notebook_runs_clean_in_jupyterlab(jupyterlab: str, browser: Browser, notebook: str) -> None:
    page = browser.new_page(viewport={"width": int(LAYOUTS["laptop"]["window"] or 0), "height": 2000})
    console: list[str] = []  # Vega's own warnings ("WARN Infinite extent ...", "WARN strokeDash dropped ...")
    page.on("console", lambda m: console.append(m.text) if m.text.startswith(VEGA_LOG) else None)
    shots, stem = os.environ.get("RECNB_SHOTS"), Path(notebook).stem
    for layout in LAYOUTS if shots else ():
        Path(f"{shots}/{layout}").mkdir(parents=True, exist_ok=True)
    breakdown = notebook in BREAKDOWNS

    def look(layout: str, when: str) -> list[str]:
        """The window made ``layout``'s, its outputs (RECNB_SHOTS) kept, what is wrong there."""
        _fit_viewport(page, layout)
        if when == "before":
            _shoot(page, shots, layout, stem)
        if notebook in SLIDERS:
            _shoot_app(page, notebook, shots, layout, when)
        found = _page_faults(page, notebook) + _bar_faults(page, must_have=breakdown)
        return [f"{layout}, {when} the slider: {f}" for f in found]

    try:
        _run_all(page, jupyterlab.format(notebook=notebook, workspace=stem.replace("_", "-")))
        outputs = page.evaluate(OUTPUTS)
        errors = [
            f"cell {o['cell']}: {o['ename']}: {o['evalue']}" for o in outputs if o["output_type"] == "error"
        ]
        assert errors == [], "error outputs"
        faults = [
            f"warning on stderr, cell {o['cell']}: {''.join(o['text'])[:300]}"
            for o in outputs
            if o.get("name") == "stderr" and "warn" in "".join(o.get("text", "")).lower()
        ]
        widgets = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        _wait_for_charts(page, expected=len(widgets))
        faults += look("laptop", "before") + look("wide", "before")
        if notebook in SLIDERS:
            _move_slider(page, notebook)
            faults += look("wide", "after") + look("laptop", "after")
        faults += [f"Vega on the console: {t[:300]}" for t in dict.fromkeys(console)]
        assert faults == [], f"{notebook}: what a learner would see wrong:\n" + "\n".join(faults)
    finally:
        try:  # the kernel, which closing the page leaves running
            page.evaluate(f"() => {PANEL} && {PANEL}.sessionContext.shutdown()")
        finally:
            page.close()


def test_a_port_taken_before_jupyterlab_binds_it_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another program takes the first port chosen for JupyterLab before it binds it: the lab
    starts on another one (not "JupyterLab did not start"). Needs no browser."""
    pytest.importorskip("jupyterlab")
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        ports = iter([taken, _free_port()])
        monkeypatch.setattr(sys.modules[__name__], "_free_port", lambda: next(ports))
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
        proc, url = _start_lab(_lab_command(tmp_path, "t"), env, tmp_path, "t")
        _stop(proc)
    assert url != f"http://127.0.0.1:{taken}"
    assert "is already in use" in (tmp_path / "jupyterlab-0.log").read_text()
