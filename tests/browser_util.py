"""Real-browser testing: one ``streamlit run app.py`` server and one headless Chromium per test process.

tests/conftest.py registers this module as a pytest plugin, so the ``app_server`` and ``browser``
fixtures need no import; import only the helpers::

    from browser_util import assert_no_errors, open_via_nav, screenshot

    def test_my_page(app_server, browser):
        page = open_via_nav(browser, app_server, "pages/my_page.py", wait_text="Some heading")
        page.wait_for_selector(".main-svg")          # Plotly charts draw a moment after the text
        assert_no_errors(page)
        screenshot(page, "my_page")
        page.close()

The server and the browser are process-wide singletons (started on first use, stopped at exit), so
every browser test shares them (modules that still import the fixtures explicitly keep working). Without
/usr/bin/chromium the tests are skipped, unless the CI environment variable is set: then they fail.
"""

from __future__ import annotations

import atexit
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("KVVIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SERVER_START_TIMEOUT_S = 90
#: The first page load may include a cold model load (de-quantising the GGUF): allow for it.
PAGE_TIMEOUT_MS = 240_000

_lock = threading.Lock()
_server: AppServer | None = None
_playwright: Any = None
_browser: Any = None


def require_chromium() -> None:
    """Skip (locally) or fail (CI set) when Chromium or Playwright is missing."""
    reason = None
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} not found (install Debian's chromium: apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "Python package playwright is not installed"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests need Chromium and Playwright in CI: {reason}")
        pytest.skip(reason)


def free_port() -> int:
    """A TCP port on localhost that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: The presenter key the test server's room uses (unless KVVIZ_PRESENTER_KEY is set already).
PRESENTER_KEY = "kvviz-test-presenter"


class AppServer:
    """``streamlit run app.py`` on a free localhost port, as a child process with the test env."""

    def __init__(self, script: str = "app.py", port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / f"streamlit-{self.port}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        cmd = [
            sys.executable, "-m", "streamlit", "run", script,
            "--server.headless", "true", "--server.port", str(self.port), "--server.address", "127.0.0.1",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
        ]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.setdefault("KVVIZ_PRESENTER_KEY", PRESENTER_KEY)  # the room's reset needs it
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_until_up(self, timeout_s: float = SERVER_START_TIMEOUT_S) -> None:
        """Poll the health endpoint until the server answers 'ok'."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as resp:
                    if resp.read().strip() == b"ok":
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"streamlit did not answer within {timeout_s:.0f} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


def get_server() -> AppServer:
    """The process-wide app server, started on first use."""
    global _server
    with _lock:
        if _server is None:
            server = AppServer()
            try:
                server.wait_until_up()
            except Exception:
                server.stop()
                raise
            _server = server
        return _server


def get_browser() -> Any:
    """The process-wide headless Chromium (Playwright), launched on first use."""
    global _playwright, _browser
    with _lock:
        if _browser is None:
            from playwright.sync_api import sync_playwright

            _playwright = sync_playwright().start()
            _browser = _playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        return _browser


def _shutdown() -> None:
    global _server, _browser, _playwright
    with _lock:
        if _browser is not None:
            try:
                _browser.close()
                _playwright.stop()
            except Exception:  # noqa: BLE001 - best effort at exit
                pass
            _browser = _playwright = None
        if _server is not None:
            _server.stop()
            _server = None


atexit.register(_shutdown)


@pytest.fixture(scope="session")
def app_server() -> str:
    """Base URL of the running app (``http://127.0.0.1:PORT``)."""
    require_chromium()
    return get_server().url


@pytest.fixture(scope="session")
def browser(app_server: str) -> Any:
    """The shared headless Chromium browser."""
    return get_browser()


def open_page(browser: Any, base_url: str, url_path: str = "", wait_text: str | None = None,
              width: int = 1400, height: int = 1000, timeout_ms: int = PAGE_TIMEOUT_MS) -> Any:
    """Open ``base_url/url_path`` in a new page; wait for the app to run and for ``wait_text``."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(timeout_ms)
    page.goto(f"{base_url}/{url_path.lstrip('/')}", wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stApp"]')
    if wait_text:
        page.get_by_text(wait_text, exact=False).first.wait_for(state="visible")
    wait_idle(page, timeout_ms)
    return page


@contextmanager
def settled_page(browser: Any, base_url: str, url_path: str, wait_text: str, width: int,
                 height: int) -> Iterator[Any]:
    """The page at ``url_path`` once idle, its layout settled and no error shown on it; closed afterwards."""
    page = open_page(browser, base_url, url_path, wait_text=wait_text, width=width, height=height)
    try:
        wait_idle(page)
        wait_settled(page)
        assert_no_errors(page)
        yield page
    finally:
        page.close()


def page_title(path: str) -> str:
    """The sidebar title of a page file (``"pages/paging.py"``), from kvviz_app.shell.text.PAGES."""
    from kvviz_app.shell.i18n import texts
    PAGES = texts("common").PAGES

    return next(title for p, title, _ in PAGES if p == path)


def open_via_nav(browser: Any, base_url: str, path: str, wait_text: str | None = None, **kwargs: Any) -> Any:
    """Open the app's landing page, then click ``path``'s entry in the sidebar navigation, as a user gets
    there (sidebar, wide layout); wait for ``wait_text`` when given. ``kwargs`` go to :func:`open_page`."""
    from kvviz_app.shell.navigation import APP_TITLE

    page = open_page(browser, base_url, "", wait_text=APP_TITLE, **kwargs)
    nav = page.locator('[data-testid="stSidebarNav"]')
    link = nav.get_by_text(page_title(path), exact=True)
    # With more than 12 pages and widgets in the sidebar, Streamlit lists 10 and a "View N more" button.
    more = nav.get_by_role("button", name=re.compile(r"View \d+ more"))
    if not link.count() and more.count():
        more.click()
    link.click()
    if wait_text:
        page.get_by_text(wait_text).first.wait_for()
    return page


def wait_idle(page: Any, timeout_ms: int = PAGE_TIMEOUT_MS) -> None:
    """Wait until the script run finished: the app root's run state (``data-test-script-state``) is no
    longer starting or running, and no status widget says 'Running' (the toolbar's minimal mode has none)."""
    page.wait_for_function(
        "() => { const app = document.querySelector('[data-testid=\"stApp\"]');"
        " const state = app ? app.getAttribute('data-test-script-state') : null;"
        " if (['initial', 'running', 'rerunRequested', 'stopRequested'].includes(state)) return false;"
        " const w = document.querySelector('[data-testid=\"stStatusWidget\"]');"
        " return !w || !w.innerText.match(/Running|Stop/); }",
        timeout=timeout_ms,
    )


#: A fingerprint of the page's drawn state: main area height, and per chart its box, svg box and text count.
_LAYOUT_SIGNATURE_JS = r"""
() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const parts = [main ? main.scrollHeight : 0, document.documentElement.clientWidth];
  let pending = 0;
  document.querySelectorAll('[data-testid="stPlotlyChart"], .stPlotlyChart').forEach((c) => {
    const b = c.getBoundingClientRect();
    const svg = c.querySelector('svg.main-svg');
    if (b.width > 0 && !svg) pending += 1;
    const s = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    parts.push(Math.round(b.width), Math.round(b.height), Math.round(s.width), Math.round(s.height),
               c.querySelectorAll('svg text').length);
  });
  return JSON.stringify([pending, parts]);
}
"""


def wait_settled(page: Any, timeout_ms: int = 60_000, interval_ms: int = 250, stable_polls: int = 3) -> None:
    """Wait until every chart is drawn and nothing on the page changes size for ``stable_polls``
    consecutive polls (charts draw, and redraw after a viewport change, a moment after the script ends).
    Gives up quietly after ``timeout_ms``: the checks that follow report what is still wrong. The default
    is long (a settled page returns at once): 5 s let a loaded machine measure a page still drawing."""
    deadline = time.monotonic() + timeout_ms / 1000
    last, same = None, 0
    while time.monotonic() < deadline:
        sig = page.evaluate(_LAYOUT_SIGNATURE_JS)
        drawn = sig.startswith("[0,")
        same = same + 1 if (sig == last and drawn) else 0
        if same >= stable_polls - 1:
            return
        last = sig
        page.wait_for_timeout(interval_ms)


def settled_box(locator: Any, fits: Any, timeout_ms: int = 60_000, interval_ms: int = 250,
                stable_polls: int = 3) -> dict | None:
    """``locator``'s bounding box once ``fits(box)`` holds and the box stayed the same for ``stable_polls``
    consecutive polls (a chart moves while the page above it is still drawn, longer on a loaded machine);
    after ``timeout_ms`` the last box, for the caller's assertion to show."""
    deadline = time.monotonic() + timeout_ms / 1000
    box, last, same = None, None, 0
    while time.monotonic() < deadline:
        box = locator.bounding_box()
        same = same + 1 if (box is not None and box == last and fits(box)) else 0
        if same >= stable_polls - 1:
            return box
        last = box
        locator.page.wait_for_timeout(interval_ms)
    return box


def scroll_into_view(locator: Any, tries: int = 10) -> None:
    """Scroll ``locator`` into view, retrying when a live fragment redrew it between finding and scrolling
    (Playwright: "Element is not attached to the DOM")."""
    for attempt in range(tries):
        try:
            locator.scroll_into_view_if_needed(timeout=30_000)
            return
        except Exception as exc:  # noqa: BLE001 - playwright.Error; only a detached element is retried
            if "not attached" not in str(exc) or attempt == tries - 1:
                raise
            locator.page.wait_for_timeout(200)


def errors_on(page: Any) -> list[str]:
    """Texts of every exception box and error alert on the page."""
    boxes = page.locator('[data-testid="stException"], .stException, [data-testid="stAlertContentError"]')
    return [boxes.nth(i).inner_text() for i in range(boxes.count())]


def assert_no_errors(page: Any) -> None:
    """Fail if the page shows an exception or an error box."""
    found = errors_on(page)
    assert not found, f"error boxes on the page: {found}"


#: Every st.metric's label and value, read in one pass: counting the metrics and then reading each one
#: raced a rerun that removed one in between (a wait of PAGE_TIMEOUT_MS for an element that was gone).
_METRICS_JS = r"""
() => Object.fromEntries([...document.querySelectorAll('[data-testid="stMetric"]')].map((m) => [
  (m.querySelector('[data-testid="stMetricLabel"]') || {innerText: ''}).innerText.trim(),
  (m.querySelector('[data-testid="stMetricValue"]') || {innerText: ''}).innerText.trim()]))
"""


def metric_values(page: Any) -> dict[str, str]:
    """{label: value} of every st.metric on the page, as one snapshot."""
    return page.evaluate(_METRICS_JS)


def wait_for_metrics(page: Any, ready: Any, timeout_s: float = PAGE_TIMEOUT_MS / 1000) -> dict[str, str]:
    """Poll the page's metrics until ``ready(values)`` holds (a metric row is drawn, or redrawn after a
    rerun, a moment after the script ends) and return them; after ``timeout_s`` the last values, for the
    caller's assertion to show."""
    deadline = time.monotonic() + timeout_s
    values = metric_values(page)
    while not ready(values) and time.monotonic() < deadline:
        page.wait_for_timeout(300)
        values = metric_values(page)
    return values


def screenshot(page: Any, name: str, full_page: bool = True) -> Path:
    """Save a PNG under test-artifacts/ and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


#: Runs in the page with a CSS selector: the words (runs of non-space characters) inside the matched,
#: visible elements that the browser split over two or more lines ("kv_lora_r" / "ank").
_SPLIT_WORDS_JS = r"""
(selector) => {
  const split = [];
  document.querySelectorAll(selector).forEach((el) => {
    if (el.offsetParent === null) return;
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const re = /[^\s\u200b]+/g;
      let m;
      while ((m = re.exec(node.data)) !== null) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (lines.size > 1) split.push(m[0]);
      }
    }
  });
  return split;
}
"""


def split_words(page: Any, selector: str) -> list[str]:
    """Words inside ``selector``'s visible elements that wrap mid-word over two or more lines."""
    return page.evaluate(_SPLIT_WORDS_JS, selector)


#: Runs in the page: for each Plotly chart, the chart texts that a dashed shape's edge runs through
#: (a dashed band drawn across bar labels). A text wholly inside or outside the shape is fine.
_DASHED_CROSSINGS_JS = r"""
() => {
  const found = [];
  document.querySelectorAll('[data-testid="stPlotlyChart"], .stPlotlyChart').forEach((chart, ci) => {
    const edges = [];
    chart.querySelectorAll('.shapelayer path').forEach((p) => {
      const dash = p.style.strokeDasharray || p.getAttribute('stroke-dasharray') || '';
      if (!dash || dash === 'none') return;
      const b = p.getBoundingClientRect();
      if (b.width === 0 && b.height === 0) return;
      edges.push({x0: b.left, x1: b.left, y0: b.top, y1: b.bottom}, {x0: b.right, x1: b.right, y0: b.top, y1: b.bottom},
                 {x0: b.left, x1: b.right, y0: b.top, y1: b.top}, {x0: b.left, x1: b.right, y0: b.bottom, y1: b.bottom});
    });
    chart.querySelectorAll('svg text').forEach((t) => {
      const label = (t.textContent || '').trim();
      if (!label || t.closest('.hoverlayer')) return;
      const tb = t.getBoundingClientRect();
      if (tb.width === 0 || tb.height === 0) return;
      const inner = {left: tb.left + 1, right: tb.right - 1, top: tb.top + 2, bottom: tb.bottom - 2};
      for (const e of edges) {
        const vertical = e.x0 === e.x1;
        const crosses = vertical
          ? e.x0 > inner.left && e.x0 < inner.right && Math.min(e.y1, inner.bottom) - Math.max(e.y0, inner.top) > 0
          : e.y0 > inner.top && e.y0 < inner.bottom && Math.min(e.x1, inner.right) - Math.max(e.x0, inner.left) > 0;
        if (crosses) { found.push(`chart ${ci}: "${label.slice(0, 30)}"`); break; }
      }
    });
  });
  return found;
}
"""


def dashed_crossings(page: Any) -> list[str]:
    """Chart texts that a dashed shape's edge runs through, named by chart index and text."""
    return page.evaluate(_DASHED_CROSSINGS_JS)
