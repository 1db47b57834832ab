"""Real-browser test of the "Paged vs contiguous memory" page: charts draw, numbers shown, no errors."""

from __future__ import annotations

import pytest
from browser_util import (  # noqa: F401 - fixtures
    app_server,
    assert_no_errors,
    browser,
    metric_values,
    open_page,
    screenshot,
    wait_idle,
)

from kvviz.text import common as C
from kvviz.text import paging as T

pytestmark = pytest.mark.browser


def _title(path: str) -> str:
    return next(title for p, title, _ in C.PAGES if p == path)


def test_paging_page_in_the_browser(app_server, browser):  # noqa: F811
    page = open_page(browser, app_server, "", wait_text=C.APP_TITLE)
    try:
        # through the app's navigation, as a user gets there (sidebar, wide layout)
        page.locator('[data-testid="stSidebarNav"]').get_by_text(_title("pages/paging.py"), exact=True).click()
        page.get_by_text(T.WASTE_HEADER).first.wait_for()
        page.wait_for_selector(".main-svg")
        page.locator('[data-testid="stPlotlyChart"]').nth(3).wait_for()
        wait_idle(page)
        metrics = metric_values(page)
        assert metrics[T.M_UTIL] == "29.0% → 96.1%" and metrics[T.M_FIT] == "4 → 23"
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert "20.4%-38.2%" in main and T.LAYOUT_HEADER in main
        assert_no_errors(page)
        screenshot(page, "paging")
    finally:
        page.close()
