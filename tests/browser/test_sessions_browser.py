"""Real-browser test of the "Multi-turn sessions" page: defaults, then an event toggled on."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, metric_values, open_via_nav, screenshot, wait_idle

from kvviz_app.shell.i18n import texts

T = texts("sessions")


pytestmark = pytest.mark.browser


def test_sessions_page_in_the_browser(app_server, browser):
    page = open_via_nav(browser, app_server, "pages/sessions.py", wait_text=T.PICTURE_HEADER)
    try:
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
