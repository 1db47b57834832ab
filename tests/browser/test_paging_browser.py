"""Real-browser test of the "Paged vs contiguous memory" page: charts draw, numbers shown, no errors."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, metric_values, open_via_nav, screenshot, wait_idle

from kvviz_app.shell.i18n import texts

T = texts("paging")


pytestmark = pytest.mark.browser


def test_paging_page_in_the_browser(app_server, browser):
    page = open_via_nav(browser, app_server, "pages/paging.py", wait_text=T.WASTE_HEADER)
    try:
        page.wait_for_selector(".main-svg")
        page.locator('[data-testid="stPlotlyChart"]').nth(3).wait_for()
        wait_idle(page)
        metrics = metric_values(page)
        # utilisation has one definition (share of all KV memory holding token states, over
        # the chart's steps), the one the bar chart prints: the headline moved from 29.0% / 96.1% to this.
        assert metrics[T.M_UTIL] == "27.5% → 94.6%" and metrics[T.M_FIT] == "4 → 23"
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert "20.4%-38.2%" in main and T.LAYOUT_HEADER in main
        assert_no_errors(page)
        screenshot(page, "paging")
    finally:
        page.close()
