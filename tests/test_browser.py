"""Real-browser tests: JupyterLab + headless Chromium run a notebook and move a slider.

Notebooks 01 (Architecture Explorer) and 02 (Efficiency Explorer) are opened, all their
cells run, a slider is moved with the keyboard and the app's chart must re-render.

Needs Debian's ``chromium`` (``apt-get install chromium``) and the ``playwright`` Python
package, which drives that browser through ``executable_path`` (no browser download). In
CI (``CI`` set) a missing browser is a failure; elsewhere the test skips with the reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHROMIUM = os.environ.get("RECNB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
NOTEBOOK_DONE = """() => {
  const nb = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!nb || !nb.content || !nb.sessionContext || !nb.sessionContext.session) return false;
  const kernel = nb.sessionContext.session.kernel;
  const cells = nb.content.widgets.filter(c => c.model.type === 'code');
  return !!kernel && kernel.status === 'idle' && cells.length > 0
         && cells.every(c => c.model.executionCount !== null);
}"""
ERRORS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(c => c.model.type === 'code')
  .flatMap(c => c.model.outputs.toJSON())
  .filter(o => o.output_type === 'error')
  .map(o => o.ename + ': ' + o.evalue)"""


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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyterlab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """JupyterLab on a free localhost port over a scratch copy of the notebooks."""
    _require_browser()
    root = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, root)
    port, token = _free_port(), "recnb-browser-test"
    env = {**os.environ, "RECNB_SMOKE": "1", "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws"), "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings")}  # fmt: skip
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True"]  # fmt: skip
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--ServerApp.allow_root=True")
    log = open(tmp_path / "jupyterlab.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("JupyterLab did not start:\n" + (tmp_path / "jupyterlab.log").read_text()[-3000:])
            time.sleep(0.3)
        yield f"{url}/lab/tree/{{notebook}}?token={token}", root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.mark.parametrize(
    ("notebook", "slider", "change", "label"),
    [("01_dlrm_anatomy.ipynb", "pooling factor", "pooling 1→2", "MEASURED on this machine"),  # Architecture Explorer
     ("02_gpu_efficiency.ipynb", "pooling factor", "pooling 40→80", "MEASURED on this machine"),  # Efficiency Explorer
     ("05_server_design.ipynb", "table rows x", "rows_scale 30→100", "MODELED")],  # Server Design Explorer
)  # fmt: skip
def test_notebook_runs_in_jupyterlab_and_a_slider_redraws_the_chart(
    jupyterlab: tuple[str, Path], notebook: str, slider: str, change: str, label: str
) -> None:
    from playwright.sync_api import sync_playwright

    url = jupyterlab[0].format(notebook=notebook)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(url)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                                   "&& window.jupyterapp.shell.currentWidget.sessionContext", timeout=90_000)  # fmt: skip
            page.wait_for_function("() => window.jupyterapp.shell.currentWidget.sessionContext.session "
                                   "&& window.jupyterapp.shell.currentWidget.sessionContext.session.kernel", timeout=90_000)  # fmt: skip
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_function(NOTEBOOK_DONE, timeout=240_000, polling=500)
            assert page.evaluate(ERRORS) == []

            app = page.locator(".recnb-app").first
            app.scroll_into_view_if_needed()
            chart = app.locator(".recnb-chart svg").first
            chart.wait_for(timeout=60_000)
            before = chart.inner_html()
            assert label in before and "now: " in before

            handle = app.locator(".widget-slider", has_text=slider).locator(".noUi-handle").first
            handle.focus()
            page.keyboard.press("ArrowRight")  # one step to the right, as a learner would with the keyboard
            page.wait_for_function(
                "([sel, old]) => { const s = document.querySelector(sel); return s && s.innerHTML !== old; }",
                arg=[".recnb-app .recnb-chart svg", before],
                timeout=60_000,
                polling=250,
            )
            after = app.locator(".recnb-chart svg").first.inner_html()
            assert change in after  # the history trail names the change
            assert "recnb-error" not in app.inner_html()
            if os.environ.get("RECNB_BROWSER_SCREENSHOT"):  # for debugging: what the browser showed
                app.screenshot(path=os.environ["RECNB_BROWSER_SCREENSHOT"])
        finally:
            browser.close()
