"""The side-channel page after a measurement and a game, as a user sees it: in Russian at 1024 and 1400 px
no chart text is clipped, overlaps other chart text or is smaller than 12 px (the game's
charts once sat side by side in a third and two thirds of the page: titles cut, "1/6" on "случайно 17%",
the log axis' minor digits at 9 px)."""

from __future__ import annotations

import pytest
from browser_util import PAGE_TIMEOUT_MS, assert_no_errors, wait_idle, wait_settled
from test_i18n_browser import _open_in_russian, _ru
from test_layout_1024 import check_layout, tall_screenshot

from kvviz_app.shell.i18n import texts

C = texts("common")

pytestmark = pytest.mark.browser

PATH = "pages/side_channel.py"


def _run(page, key: str) -> None:
    page.locator(f".st-key-{key} button").click()
    page.wait_for_timeout(500)
    wait_idle(page)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stProgress\"]')", timeout=PAGE_TIMEOUT_MS)
    wait_idle(page)


def test_measurement_and_game_charts_fit(app_server, browser):
    title = next(t for p, t, _ in _ru(lambda: C.PAGES) if p == PATH)
    page = _open_in_russian(browser, app_server, PATH, title, 1024)
    try:
        _run(page, "sc_run")
        _run(page, "sc_play")
        wait_settled(page)
        assert_no_errors(page)
        assert page.locator('[data-testid="stPlotlyChart"]').count() == 3  # latencies, game accuracy, rounds
        problems = check_layout(page)
        tall_screenshot(page, "ru-side_channel-game-1024", 1024)
        assert not problems, f"side channel in Russian at 1024 px: {problems[:12]}"
        page.set_viewport_size({"width": 1400, "height": 1000})
        wait_idle(page)
        wait_settled(page)
        problems = check_layout(page)
        tall_screenshot(page, "ru-side_channel-game-1400", 1400)
        assert not problems, f"side channel in Russian at 1400 px: {problems[:12]}"
    finally:
        page.close()
