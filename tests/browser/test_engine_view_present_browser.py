"""The Engine (live) page on a projector, in Russian at 1024 px: the step chart's legend sits below its
title (a grown legend touched it), and the ref_cnt colour bar is labelled in whole numbers only."""

from __future__ import annotations

import re

import pytest
from browser_util import assert_no_errors, open_page, screenshot, wait_idle

from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser

BOXES_JS = r"""
(chart) => {
  const box = (el) => { const b = el.getBoundingClientRect(); return {top: b.top, bottom: b.bottom}; };
  const title = chart.querySelector('.gtitle');
  const legend = chart.querySelector('.legend');
  return {title: title ? box(title) : null, legend: legend ? box(legend) : null};
}
"""


def test_engine_view_in_presenter_mode_in_russian_at_1024px(app_server, browser):
    T = texts("engine_view", "ru")
    page = open_page(browser, app_server, "engine_view?lang=ru&present=1", wait_text=T.BURST_BUTTON, width=1024,
                     height=900)
    try:
        page.get_by_role("button", name=T.BURST_BUTTON).click()
        wait_idle(page)
        page.reload()  # the burst ran on the engine; a fresh run draws its steps
        page.get_by_text(T.STEPS_HEADER, exact=True).first.wait_for()
        wait_idle(page)
        steps = page.locator('[data-testid="stPlotlyChart"]').filter(
            has=page.locator(".gtitle", has_text=T.FIG_STEPS_TITLE.split(":")[0])).first
        steps.locator(".legend").first.wait_for()
        b = steps.evaluate(BOXES_JS)
        assert b["title"] and b["legend"], b
        assert b["title"]["bottom"] <= b["legend"]["top"] + 0.5, b  # the legend starts below the title
        pool = page.locator('[data-testid="stPlotlyChart"]').filter(
            has=page.locator(".gtitle", has_text=T.FIG_POOL_TITLE)).first
        texts_js = "els => els.map((e) => e.textContent.trim())"
        ticks = [t for t in pool.locator(".colorbar text").evaluate_all(texts_js) if t and t != "ref_cnt"]
        assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks  # no 0.5 / 1.5
        assert_no_errors(page)
        screenshot(page, "engine_view_present_ru_1024")
        steps.screenshot(path=str(screenshot(page, "engine_view_present_ru_1024").parent / "engine_view_steps_ru.png"))
    finally:
        page.close()
