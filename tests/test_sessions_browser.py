"""Real-browser test of the "Multi-turn sessions" page: defaults, then an event toggled on."""

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
from kvviz.text import sessions as T

pytestmark = pytest.mark.browser


def _title(path: str) -> str:
    return next(title for p, title, _ in C.PAGES if p == path)


def test_sessions_page_in_the_browser(app_server, browser):  # noqa: F811
    page = open_page(browser, app_server, "", wait_text=C.APP_TITLE)
    try:
        # through the app's navigation, as a user gets there (sidebar, wide layout)
        page.locator('[data-testid="stSidebarNav"]').get_by_text(_title("pages/sessions.py"), exact=True).click()
        page.get_by_text(T.PICTURE_HEADER).first.wait_for()
        page.locator('[data-testid="stPlotlyChart"]').nth(3).wait_for()
        wait_idle(page)
        sent = int(metric_values(page)[T.M_SENT].replace(",", ""))
        assert sent > 5000
        page.get_by_text(T.EVENT_LABELS["restart_tools"], exact=True).click()
        page.locator('[data-testid="stAlertContentInfo"]').first.wait_for()
        wait_idle(page)
        info = page.locator('[data-testid="stAlertContentInfo"]').first.inner_text()
        assert "tool list changed" in info and "0 of" in info
        assert int(metric_values(page)[T.M_SENT].replace(",", "")) > sent  # the new tool is re-sent
        assert_no_errors(page)
        screenshot(page, "sessions-restart")
    finally:
        page.close()
