"""Issue 27 item 9: at 1024 px the Edit token strip clipped its first column ("⟨D0⟩→К" read "D0)→K"): every
cell text of column 0 must start inside the plot area, in English and in Russian."""

from __future__ import annotations

import pytest
from browser_util import open_page, wait_idle

from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser

# left edge of each column-0 cell text vs the plot area's left edge (the heatmap's drag rectangle)
FIRST_COLUMN_JS = r"""
(chart) => {
  const area = chart.querySelector('.xy .nsewdrag').getBoundingClientRect();
  const texts = [...chart.querySelectorAll('.hm text, .heatmaplayer text, g.textpoint text, text.textpoint')];
  const cell = area.width / 16;
  return texts.filter((t) => {
    const b = t.getBoundingClientRect();
    return b.width > 0 && (b.left + b.right) / 2 < area.left + cell;
  }).map((t) => ({text: t.textContent, left: t.getBoundingClientRect().left, area: area.left}));
}
"""


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_token_strip_keeps_its_first_column_inside_the_plot_at_1024px(app_server, browser, lang):
    T = texts("edit", lang)
    page = open_page(browser, app_server, f"edit?lang={lang}", wait_text=T.STEP_CHANGE, width=1024, height=900)
    try:
        chart = page.locator('[data-testid="stPlotlyChart"]').first
        chart.locator(".main-svg").first.wait_for()
        wait_idle(page)
        cells = chart.evaluate(FIRST_COLUMN_JS)
        assert cells, "no column-0 cell text found"
        assert any("→" in c["text"] for c in cells), cells  # the default prompt has a ⟨D1⟩→ё cell there
        clipped = [c for c in cells if c["left"] < c["area"] - 0.5]
        assert not clipped, clipped
    finally:
        page.close()
