"""The Continuous batching page in Chromium at 1400 and 1024 px: the burst fills the timeline with the
engine's steps, nothing overflows, no error box."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, open_via_nav, screenshot, scroll_into_view, wait_idle

from kvviz_app.shell.i18n import texts

T = texts("batching")


pytestmark = pytest.mark.browser


def _overflowing(page) -> list[str]:
    """Charts or tables wider than the main block."""
    return page.evaluate("""() => {
        const main = document.querySelector('[data-testid="stMainBlockContainer"]') || document.body;
        const limit = main.getBoundingClientRect().right + 1;
        return [...document.querySelectorAll('.js-plotly-plot, [data-testid="stDataFrame"]')]
            .filter(e => e.getBoundingClientRect().right > limit).map(e => e.className || e.dataset.testid);
    }""")


@pytest.mark.parametrize("width", [1400, 1024])
def test_batching_page_after_a_burst(app_server, browser, width):
    page = open_via_nav(browser, app_server, "pages/batching.py", wait_text=T.KINDS_HEADER, width=width, height=1400)
    page.get_by_role("button", name=T.DEMO_BUTTON).click()
    page.get_by_text("requests in").first.wait_for(timeout=600_000)
    wait_idle(page)
    page.wait_for_selector(".main-svg")
    assert_no_errors(page)
    assert page.get_by_text(T.FIG_TITLE).count() >= 1
    assert not _overflowing(page)
    scroll_into_view(page.get_by_text(T.TIMELINE_HEADER).first)  # the timeline redraws every 3 s while live
    screenshot(page, f"batching_{width}")
    scroll_into_view(page.locator(".js-plotly-plot").first)
    screenshot(page, f"batching_{width}_chart", full_page=False)
    page.close()
