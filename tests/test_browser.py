"""Real browser: start ``streamlit run app.py``; load the demo, fit, see the annotator scatter;
upload a file that cannot be mapped, then a good one, and see the good one mapped and loaded.

Needs Debian's chromium at /usr/bin/chromium and the playwright package (no browser
download); skipped with the reason otherwise. The screenshot goes to artifacts/annotators.png.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "artifacts"
SIMULATED = "Simulated crowd (small"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no chromium at {CHROMIUM}"),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="the playwright package is not installed (pip install playwright)",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """``streamlit run app.py`` on a free port; killed at the end."""
    port = _free_port()
    log = ARTIFACTS / "streamlit-server.log"
    ARTIFACTS.mkdir(exist_ok=True)
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.headless",
                "true",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--server.fileWatcherType",
                "none",
            ],  # fmt: skip
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not start; see {log}:\n{log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture()
def chromium():
    """Debian's chromium through playwright (never a downloaded browser)."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)  # a cold server reads the TREC demo first
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()
            expect.set_options(timeout=5_000)  # playwright's default


def no_traceback(page) -> None:
    from playwright.sync_api import expect

    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def open_app(browser, url: str):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    page.goto(url)
    # opens on the TREC demo without an upload
    expect(page.get_by_text("Loaded: TREC 2010")).to_be_visible()
    return page


def test_demo_fit_then_annotator_scatter(server, chromium):
    from playwright.sync_api import expect

    page = open_app(chromium, server)
    # switch to the small simulated demo
    page.locator('[data-testid="stSelectbox"]').first.click()
    page.get_by_role("option", name=SIMULATED).click()
    page.get_by_role("button", name="Load demo").click()
    expect(page.get_by_text("Loaded: Simulated crowd")).to_be_visible()
    sidebar = page.locator('[data-testid="stSidebar"]')
    expect(sidebar.get_by_text("Data: Simulated crowd")).to_be_visible()

    nav = page.locator('[data-testid="stSidebarNav"]')
    nav.get_by_text("Fit", exact=True).click()
    restarts = page.get_by_role("spinbutton", name="Restarts")
    restarts.fill("3")
    restarts.press("Enter")
    page.get_by_role("button", name="Run fit").click()
    expect(page.get_by_text("Fit finished in")).to_be_visible()
    expect(page.get_by_text("9 of 30 annotators look like spammers")).to_be_visible()
    expect(page.get_by_text("FitParams")).to_have_count(0)
    no_traceback(page)

    nav.get_by_text("Annotators", exact=True).click()
    expect(page.get_by_role("heading", name="Annotators")).to_be_visible()
    chart = page.locator('[data-testid="stPlotlyChart"]').first
    expect(chart).to_be_visible()
    expect(chart.locator(".js-plotly-plot")).to_have_count(1)
    expect(chart.locator(".scatterlayer .trace").first).to_be_attached()
    expect(chart.get_by_text("Annotators: expertise vs reliability")).to_be_visible()
    points = chart.locator(".scatterlayer .point")
    assert points.count() == 30  # one marker per annotator of the simulated demo
    no_traceback(page)
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "annotators.png"), full_page=True)
    assert (ARTIFACTS / "annotators.png").stat().st_size > 10_000

    # Compare: every default method, the odm ones included, is visible in the methods box
    nav.get_by_text("Compare", exact=True).click()
    box = page.locator('[data-testid="stMultiSelect"]').first
    for method in (
        "mean",
        "glad",
        "odm-paper-global",
        "odm-paper-query",
        "odm-paper-instance",
        "odm",
    ):
        expect(box.get_by_text(method, exact=True)).to_be_visible()
    no_traceback(page)


def test_a_good_upload_after_one_that_could_not_be_mapped(server, chromium):
    from playwright.sync_api import expect

    page = open_app(chromium, server)
    page.get_by_text("Upload a file").click()
    dropzone = page.locator('[data-testid="stFileUploaderDropzoneInput"]').first
    dropzone.set_input_files(
        files=[{"name": "unmapped.csv", "mimeType": "text/csv", "buffer": b"a,b,c\nw,i,1\n"}]
    )
    expect(page.get_by_text("unmapped.csv: 1 rows")).to_be_visible()
    page.get_by_role("button", name="Use this data").click()
    expect(page.get_by_text("choose the annotator, instance, rating column(s)")).to_be_visible()

    good = b"worker,task,label\nw1,i1,1\nw2,i1,2\nw1,i2,3\nw3,i2,3\n"
    dropzone.set_input_files(files=[{"name": "good.csv", "mimeType": "text/csv", "buffer": good}])
    expect(page.get_by_text("good.csv: 4 rows")).to_be_visible()
    page.get_by_role("button", name="Use this data").click()
    expect(page.get_by_text("Loaded: good.csv")).to_be_visible()
    expect(page.get_by_text("choose the annotator")).to_have_count(0)
    sidebar = page.locator('[data-testid="stSidebar"]')
    expect(sidebar.get_by_text("Data: good.csv - 4 ratings")).to_be_visible()
    expect(sidebar.get_by_text("No fit yet.")).to_be_visible()
    no_traceback(page)
