"""Every page at the projector's 1024 x 768 (and at 1400 px): no table or chart overflows its container,
no chart text is clipped, overlaps other chart text or is smaller than 12 px, and no label or page-link
title is cut short."""

from __future__ import annotations

import pytest
from browser_util import (
    PAGE_TIMEOUT_MS,
    ROOT,
    assert_no_errors,
    open_page,
    screenshot,
    split_words,
    wait_idle,
    wait_settled,
)

from kvviz_app.shell.i18n import texts

PAGES = texts("common").PAGES


pytestmark = pytest.mark.browser

#: Page files to check (url path = file stem); the landing page is "".
LAYOUT_PAGES = [path for path, _title, _icon in PAGES if (ROOT / path).exists()]

# Runs in the page: a list of human-readable problems (empty when the layout is right).
CHECK_JS = r"""
() => {
  const problems = [];
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  const mainBox = main.getBoundingClientRect();
  const right = Math.min(mainBox.right, document.documentElement.clientWidth);
  const name = (el) => (el.innerText || el.textContent || '').trim().slice(0, 40);
  // 1. charts: inside their container and the main area; every text inside the chart's svg, >= 12 px
  document.querySelectorAll('.stPlotlyChart, [data-testid="stPlotlyChart"]').forEach((chart, ci) => {
    const box = chart.getBoundingClientRect();
    if (box.width === 0) return;
    const svg = chart.querySelector('svg.main-svg');
    if (!svg) return;
    const sbox = svg.getBoundingClientRect();
    if (sbox.right > box.right + 1 || sbox.right > right + 1) problems.push(`chart ${ci} wider than its container`);
    const texts = [];
    chart.querySelectorAll('svg text').forEach((t) => {
      const label = (t.textContent || '').trim();
      if (!label) return;
      const style = getComputedStyle(t);
      if (style.display === 'none' || style.visibility === 'hidden' || style.opacity === '0') return;
      const tb = t.getBoundingClientRect();
      if (tb.width === 0 || tb.height === 0) return;
      const size = parseFloat(style.fontSize);
      if (size < 11.5) problems.push(`chart ${ci}: text "${label.slice(0, 30)}" is ${size} px`);
      // 4 px of slack: a text's line box reaches a little above and below its glyphs
      if (tb.left < sbox.left - 4 || tb.right > sbox.right + 4 || tb.top < sbox.top - 4 || tb.bottom > sbox.bottom + 4)
        problems.push(`chart ${ci}: text "${label.slice(0, 30)}" is clipped by the chart's edge`);
      texts.push({label, tb, hover: !!t.closest('.hoverlayer')});
    });
    const shown = texts.filter((x) => !x.hover);
    for (let i = 0; i < shown.length && i < 600; i++) {
      for (let j = i + 1; j < shown.length && j < 600; j++) {
        const a = shown[i].tb, b = shown[j].tb;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 2 && h > 2 && w * h > 0.25 * Math.min(a.width * a.height, b.width * b.height))
          problems.push(`chart ${ci}: "${shown[i].label.slice(0, 20)}" overlaps "${shown[j].label.slice(0, 20)}"`);
      }
    }
  });
  // 2. tables: no horizontal scrolling, inside the main area
  document.querySelectorAll('[data-testid="stDataFrame"], [data-testid="stTable"]').forEach((table, ti) => {
    const box = table.getBoundingClientRect();
    if (box.width === 0) return;
    if (box.right > right + 1) problems.push(`table ${ti} reaches past the main area`);
    // a data grid scrolls in its .dvn-scroller; an HTML table is cut by any of its wrappers
    const inner = table.matches('[data-testid="stDataFrame"]') ? table.querySelectorAll('.dvn-scroller')
      : [table, ...table.querySelectorAll('*')];
    inner.forEach((s) => {
      if (s.clientWidth > 0 && s.scrollWidth > s.clientWidth + 2)
        problems.push(`table ${ti} scrolls or is cut sideways (${s.scrollWidth} > ${s.clientWidth})`);
    });
    table.querySelectorAll('table').forEach((t) => {
      if (t.getBoundingClientRect().right > box.right + 2) problems.push(`table ${ti} is wider than its container`);
    });
  });
  // 3. labels, page links, checkbox and radio labels: never cut
  document.querySelectorAll('[data-testid="stWidgetLabel"] p, [data-testid="stPageLink"] p, [data-testid="stPageLink-NavLink"] span, [data-testid="stCheckbox"] p, [data-testid="stMetricLabel"] p').forEach((el) => {
    if (el.offsetParent === null) return;
    if (el.scrollWidth > el.clientWidth + 2 && getComputedStyle(el).overflow !== 'visible')
      problems.push(`label "${name(el)}" is cut`);
  });
  return problems;
}
"""


#: 4. the cells of tables that keep words whole (ui_table.wrapping_table): no word split over two lines
WORDWRAP_CELLS = '[class*="st-key-wordwrap_"] th, [class*="st-key-wordwrap_"] td'


def check_layout(page) -> list[str]:
    problems = page.evaluate(CHECK_JS)
    return problems + [f'table word "{word[:30]}" is split over lines' for word in split_words(page, WORDWRAP_CELLS)]


def tall_screenshot(page, name: str, width: int) -> None:
    """The whole page in one PNG (Streamlit scrolls inside its main area, so a full-page shot of the
    window shows one screen): the window is made as tall as the content first."""
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]'); return m ? m.scrollHeight : 768; }")
    page.set_viewport_size({"width": width, "height": min(max(int(height), 768), 9000)})
    wait_settled(page)  # charts redraw at the new size
    screenshot(page, name, full_page=False)


@pytest.mark.parametrize("width,height", [(1024, 768), (1400, 900)])
@pytest.mark.parametrize("path", LAYOUT_PAGES)
def test_page_fits_its_width(app_server, browser, path, width, height):
    stem = "" if path == "pages/home.py" else path.split("/")[-1].removesuffix(".py")
    page = open_page(browser, app_server, stem, width=width, height=height)
    try:
        page.locator('[data-testid="stMain"] h1').first.wait_for()
        wait_idle(page)
        # a page may still show a spinner (the model's work) after the status widget went quiet
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stSpinner\"]')",
                               timeout=PAGE_TIMEOUT_MS)
        wait_idle(page)
        wait_settled(page)  # charts draw after the script finished
        assert_no_errors(page)
        problems = check_layout(page)
        tall_screenshot(page, f"layout-{stem or 'home'}-{width}", width)
        assert not problems, f"{path} at {width} px: {problems[:12]}"
    finally:
        page.close()
