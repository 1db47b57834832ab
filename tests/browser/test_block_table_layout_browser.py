"""Block-table page in Chromium at 1024x768 (a projector): after Play, the pool and the free queue are
on screen beside the controls, without scrolling; the null block is greyed; at 1400 px too."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, open_via_nav, screenshot, wait_idle

from kvviz_app.i18n import texts

T = texts("engine")


pytestmark = pytest.mark.browser


def _box_in_viewport(page, locator) -> tuple[float, float, float]:
    """(top, bottom, viewport height) of ``locator`` relative to the viewport, as the user sees it now."""
    box = locator.evaluate("el => { const r = el.getBoundingClientRect(); return [r.top, r.bottom]; }")
    return box[0], box[1], page.viewport_size["height"]


@pytest.mark.parametrize("width, height", [(1024, 768), (1400, 1000)])
def test_pool_and_queue_visible_after_play_without_scrolling(app_server, browser, width, height):
    page = open_via_nav(browser, app_server, "kvviz_app/page_scripts/block_table.py", wait_text=T.EVENTS_HEADER,
                        width=width, height=height)
    try:
        page.wait_for_selector(".main-svg")
        wait_idle(page)
        play = page.get_by_role("button", name=T.PLAY)
        play.click()  # Playwright scrolls Play into view first, as a presenter would
        pause = page.get_by_role("button", name=T.PAUSE)
        pause.wait_for(timeout=120_000)
        # the player's progress line appears once the playing run has drawn the pictures (slow on a busy CI)
        page.get_by_text(T.PLAYING, exact=False).first.wait_for(timeout=240_000)
        # and the timer really advances the player (generous: CI machines are shared)
        page.get_by_text(T.STEP_HEADER.format(k=3, n=15)).first.wait_for(state="attached", timeout=240_000)
        charts = page.locator('[data-testid="stPlotlyChart"]')
        for locator in (charts.nth(0), charts.nth(1), pause):  # pool, free queue, the control
            top, bottom, vh = _box_in_viewport(page, locator)
            assert top >= 0 and bottom <= vh, (locator, top, bottom, vh)  # wholly on screen, no scrolling
        screenshot(page, f"block_table_play_{width}", full_page=False)
        pause.click()
        wait_idle(page)
        # the null block is drawn greyed with its own tooltip text in the figure data
        svg_text = charts.nth(0).inner_text()
        assert "null" in svg_text
        assert_no_errors(page)
        screenshot(page, f"block_table_{width}")
    finally:
        page.close()
