"""Real-browser test of the engine pages: the block-table player steps and plays in Chromium, the radix
page draws the tree, the chain and the reuse lanes; no error boxes."""

from __future__ import annotations

import time

import pytest
from browser_util import (
    assert_no_errors,
    metric_values,
    open_via_nav,
    screenshot,
    wait_for_metrics,
    wait_idle,
)

from kvviz_app.shell.i18n import texts

T = texts("block_table")
R = texts("radix")


pytestmark = pytest.mark.browser


def _step(page) -> str:
    return page.locator("h3").filter(has_text="Step ").first.inner_text().strip()


def test_block_table_page_in_the_browser(app_server, browser):
    page = open_via_nav(browser, app_server, "pages/block_table.py", wait_text=T.EVENTS_HEADER)
    try:
        page.wait_for_selector(".main-svg")
        wait_idle(page)
        assert _step(page) == "Step 0 of 15"
        for k in (1, 2):  # each click is one step; wait for it before the next (a click that lands while
            # the previous rerun is still starting can be merged into it by Streamlit)
            page.get_by_role("button", name=T.FORWARD).click()
            page.get_by_text(f"Step {k} of 15").first.wait_for()
            wait_idle(page)
        assert metric_values(page)[T.COUNTERS["hit_tokens"][0]] == "64"
        page.get_by_role("button", name=T.PLAY).click()  # the fragment's timer advances the player
        page.get_by_text("Step 4 of 15").first.wait_for()
        page.get_by_role("button", name=T.PAUSE).click()
        # the run that shows Play again is the first one after Pause; a read before it can be stale
        page.get_by_role("button", name=T.PLAY).wait_for()
        wait_idle(page)
        paused = _step(page)
        time.sleep(2.5)
        assert _step(page) == paused  # Pause stops the timer
        page.locator('[data-testid="stPlotlyChart"]').nth(2).wait_for()
        assert_no_errors(page)
        screenshot(page, "block_table")
    finally:
        page.close()


def test_radix_page_in_the_browser(app_server, browser):
    page = open_via_nav(browser, app_server, "pages/radix.py", wait_text=R.EVICTIONS_HEADER)
    try:
        page.locator('[data-testid="stPlotlyChart"]').nth(1).wait_for()
        page.wait_for_selector(".main-svg")
        wait_idle(page)
        metrics = wait_for_metrics(page, lambda m: R.METRIC_RADIX in m)  # the metric row draws last
        assert metrics[R.METRIC_RADIX] == "260 tokens" and metrics[R.METRIC_POOL] == "208 tokens"
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert "Radix tree after step 11" in main and "Hash chain after step 11" in main
        assert_no_errors(page)
        screenshot(page, "radix")
    finally:
        page.close()
