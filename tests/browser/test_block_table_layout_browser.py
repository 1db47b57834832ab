"""Block-table page in Chromium at 1024x768 (a projector): after Play, the pool and the free queue are
on screen beside the controls, without scrolling; the null block is greyed; at 1400 px too."""

from __future__ import annotations

import re

import pytest
from browser_util import assert_no_errors, open_via_nav, screenshot, wait_idle

from kvviz_app.shell.i18n import texts

T = texts("block_table")


pytestmark = pytest.mark.browser


def _box_in_viewport(page, locator) -> tuple[float, float, float]:
    """(top, bottom, viewport height) of ``locator`` relative to the viewport, as the user sees it now."""
    box = locator.evaluate("el => { const r = el.getBoundingClientRect(); return [r.top, r.bottom]; }")
    return box[0], box[1], page.viewport_size["height"]


def _step_pattern(n: int) -> str:
    """A JavaScript regex source matching the step header "Step k of n" for any k (k captured)."""
    head, tail = T.STEP_HEADER.split("{k}")
    return re.escape(head) + r"(\d+)" + re.escape(tail.format(n=n))


@pytest.mark.parametrize("width, height", [(1024, 768), (1400, 1000)])
def test_pool_and_queue_visible_after_play_without_scrolling(app_server, browser, width, height):
    page = open_via_nav(browser, app_server, "pages/block_table.py", wait_text=T.EVENTS_HEADER,
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
        # and the timer really advances the player: some step >= 3 is shown. Not "step 3" itself: on a loaded
        # machine a fragment run can be cut short by the next tick after it advanced the step, so a given step
        # may never be drawn (the 240 s only ends a hang).
        page.wait_for_function("re => Array.from(document.body.innerText.matchAll(new RegExp(re, 'g')))"
                               ".some(m => Number(m[1]) >= 3)", arg=_step_pattern(15), timeout=240_000)
        charts = page.locator('[data-testid="stPlotlyChart"]')
        # the control: Pause while it plays, Play again once the 15 steps are through (same place)
        control = pause.or_(page.get_by_role("button", name=T.PLAY)).first
        for locator in (charts.nth(0), charts.nth(1), control):  # pool, free queue, the control
            top, bottom, vh = _box_in_viewport(page, locator)
            assert top >= 0 and bottom <= vh, (locator, top, bottom, vh)  # wholly on screen, no scrolling
        screenshot(page, f"block_table_play_{width}", full_page=False)
        if pause.count():
            pause.click()
        wait_idle(page)
        # the null block is drawn greyed with its own tooltip text in the figure data
        svg_text = charts.nth(0).inner_text()
        assert "null" in svg_text
        assert_no_errors(page)
        screenshot(page, f"block_table_{width}")
    finally:
        page.close()
