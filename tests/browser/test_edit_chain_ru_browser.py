"""Issue 27 item 4 (rest): on the Russian Edit page in presenter mode at 1024 px the chain chart's title was
clipped at the top and the "Цепочка B (поиск)" header sat on the legend."""

from __future__ import annotations

import pytest
from browser_util import open_page, wait_idle

from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser

BOXES_JS = r"""
(chart) => {
  const box = (el) => { const b = el.getBoundingClientRect(); return {top: b.top, bottom: b.bottom, left: b.left, right: b.right}; };
  const svg = chart.querySelector('.main-svg');
  const title = chart.querySelector('.gtitle');
  const legend = chart.querySelector('.legend');
  const header = [...chart.querySelectorAll('.annotation')].find((a) => a.textContent.includes('B'));
  return {svg: box(svg), title: title ? box(title) : null, legend: legend ? box(legend) : null,
          header: header ? box(header) : null};
}
"""


def test_the_russian_chain_chart_title_and_header_are_whole_and_apart_at_1024px(app_server, browser):
    T = texts("edit", "ru")
    page = open_page(browser, app_server, "edit?lang=ru&present=1", wait_text=T.STEP_CHANGE, width=1024, height=900)
    try:
        chart = page.locator('[data-testid="stPlotlyChart"]').filter(has=page.locator(".gtitle")).first
        chart.locator(".main-svg").first.wait_for()
        wait_idle(page)
        b = chart.evaluate(BOXES_JS)
        assert b["title"] and b["legend"] and b["header"], b
        assert b["title"]["top"] >= b["svg"]["top"] - 0.5, b  # the title starts inside the figure
        assert b["title"]["bottom"] <= b["legend"]["top"] + 0.5, b  # and ends above the legend
        apart = b["header"]["top"] >= b["legend"]["bottom"] - 0.5 or b["header"]["left"] >= b["legend"]["right"]
        assert apart, (b["legend"], b["header"])  # the B header does not sit on the legend
    finally:
        page.close()
