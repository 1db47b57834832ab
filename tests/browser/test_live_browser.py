"""The Live engine page in Chromium against the demo engine started from the page: live numbers and
charts, the prefix-tree table, the prompt check; then a second browser session at 1024 px that sees the
same (process-wide) demo engine, its tables inside the page (no table scrolls or is cut sideways)."""

from __future__ import annotations

import re
import time

import pytest
from browser_util import (
    assert_no_errors,
    metric_values,
    open_via_nav,
    screenshot,
    scroll_into_view,
    wait_idle,
    wait_settled,
)
from live_testpub import free_port
from test_layout_1024 import check_layout

from kvviz_app.shell.i18n import texts

T = texts("live")


pytestmark = pytest.mark.browser
WAIT_S = 120


def _batches(page) -> int:
    return int(metric_values(page).get(T.M_BATCHES, "0").replace(",", "") or 0)


def _fill(page, label: str, value: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")
    wait_idle(page)


def _wait_batches(page, n: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while _batches(page) < n:
        assert time.monotonic() < deadline, f"fewer than {n} batches: {metric_values(page)}"
        page.wait_for_timeout(500)


#: In one pass over the page, so both come from the same refresh: the demo's "published" line and the
#: Batches metric.
_PUBLISHED_AND_BATCHES_JS = r"""
(label) => {
  const line = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')].map((c) => c.innerText)
    .find((t) => t.includes('Batches'));
  const metric = [...document.querySelectorAll('[data-testid="stMetric"]')].find(
    (m) => m.querySelector('[data-testid="stMetricLabel"]').innerText.trim() === label);
  return [line || '', metric ? metric.querySelector('[data-testid="stMetricValue"]').innerText.trim() : ''];
}
"""


def _published_and_applied(page) -> tuple[str, int, int]:
    line, value = page.evaluate(_PUBLISHED_AND_BATCHES_JS, T.M_BATCHES)
    published = re.search(r"published ([\d,]+) batch", line)
    return line, int(published.group(1).replace(",", "")) if published else -1, int(value.replace(",", "") or 0)


def test_live_page_with_the_demo_engine(app_server, browser):
    port = free_port(2)
    page = open_via_nav(browser, app_server, "pages/live.py", wait_text=T.DEMO_HEADER, width=1400, height=1600)
    try:
        _fill(page, T.ENDPOINT, f"tcp://127.0.0.1:{port}")
        _fill(page, T.REPLAY, f"tcp://127.0.0.1:{port + 1}")
        page.get_by_role("button", name=T.DEMO_START).click()
        page.get_by_text(T.DEMO_RUNNING.split("{")[0].strip()).first.wait_for(timeout=WAIT_S * 1000)
        _wait_batches(page, 10)
        # the banner once said "1 batches published" (its count taken when the demo started)
        # beside a Batches metric of 130; the demo's count now refreshes with the metric
        line, published, applied = _published_and_applied(page)
        assert published >= applied >= 10 and f"{published:,} batches" in line, line
        page.locator('[data-testid="stPlotlyChart"]').nth(1).wait_for(timeout=WAIT_S * 1000)
        page.get_by_text(T.TREES_HEADER).first.wait_for()
        page.get_by_role("button", name=T.USE_DEMO_PROMPT).click()
        prompt = page.get_by_label(T.PROMPT, exact=True)
        deadline = time.monotonic() + WAIT_S  # the rerun fills the box; Check before that would check nothing
        while not prompt.input_value().strip():
            assert time.monotonic() < deadline, "the demo prompt never reached the prompt box"
            page.wait_for_timeout(250)
        wait_idle(page)
        page.get_by_role("button", name=T.CHECK).click()
        page.get_by_text("full blocks are cached now").first.wait_for(timeout=WAIT_S * 1000)
        wait_idle(page)
        assert_no_errors(page)
        assert int(metric_values(page)[T.M_BLOCKS].replace(",", "")) > 0
        page.locator(".main-svg").first.wait_for()
        wait_idle(page)
        screenshot(page, "live_1400")
        scroll_into_view(page.locator('[data-testid="stPlotlyChart"]').last)  # redrawn every 2 s while live
        screenshot(page, "live_prompt_1400", full_page=False)
    finally:
        page.close()
    narrow = open_via_nav(browser, app_server, "pages/live.py", wait_text=T.DEMO_HEADER, width=1024, height=1600)
    try:
        _fill(narrow, T.ENDPOINT, f"tcp://127.0.0.1:{port}")
        _fill(narrow, T.REPLAY, f"tcp://127.0.0.1:{port + 1}")
        narrow.get_by_text(T.DEMO_RUNNING.split("{")[0].strip()).first.wait_for()  # the same demo engine
        narrow.get_by_role("button", name=T.CONNECT, exact=True).click()
        _wait_batches(narrow, 10)
        narrow.locator('[data-testid="stPlotlyChart"]').nth(1).wait_for(timeout=WAIT_S * 1000)
        wait_idle(narrow)
        assert_no_errors(narrow)
        narrow.locator(".main-svg").nth(1).wait_for()
        narrow.get_by_text(T.STORES_HEADER).first.wait_for()
        wait_idle(narrow)
        wait_settled(narrow)
        screenshot(narrow, "live_1024")
        problems = check_layout(narrow)
        assert not problems, f"live page at 1024 px: {problems[:12]}"
    finally:
        narrow.close()
