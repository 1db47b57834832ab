"""Real-browser test of the "Edit one character" page: the charts draw, the counts match the mirror, the
cascade animation plays, and clicking a token of A switches to the one-character editor."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, metric_values, open_via_nav, screenshot, wait_idle

from kvviz.analysis.prompt_compare import compare_prompts
from kvviz.experiments.edit.presets import load_edit_presets
from kvviz.model import tokenize
from kvviz_app.shell.i18n import texts

T = texts("edit")

pytestmark = pytest.mark.browser

def _open_edit_page(browser, base_url):
    page = open_via_nav(browser, base_url, "pages/edit.py", wait_text=T.REUSE_EXACT_HEADER, height=1400)
    page.locator('[data-testid="stPlotlyChart"]').nth(2).locator(".main-svg").first.wait_for()
    wait_idle(page)
    return page


def test_edit_page_story_in_the_browser(app_server, browser):
    page = _open_edit_page(browser, app_server)
    try:
        preset = {p.id: p for p in load_edit_presets()}["cat_tail"]
        cmp = compare_prompts(tokenize(preset.a).ids, tokenize(preset.b).ids, block_size=preset.block_size)
        metrics = metric_values(page)
        assert metrics[T.M_REUSED] == f"{cmp.reused_tokens} tokens"
        assert metrics[T.M_RECOMPUTE] == f"{cmp.recompute_tokens} tokens"
        assert metrics[T.M_FULL_MS].endswith(" ms") and metrics[T.M_REUSE_MS].endswith(" ms")
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert "every layer is identical (max |Δ| = 0)" in main and T.WRONG_HEADER in main
        assert_no_errors(page)
        screenshot(page, "edit")

        # the cascade animation: Play walks to the last block, one frame per block
        chain = page.locator('[data-testid="stPlotlyChart"]').nth(1)
        chain.scroll_into_view_if_needed()
        chain.locator(".updatemenu-button").first.click()
        last = len(cmp.blocks) - 1
        title = chain.locator(".gtitle")
        page.wait_for_function(
            "([el, want]) => el && el.textContent.includes(want)",
            arg=[title.element_handle(), f"Block #{last}"],
        )
        screenshot(page, "edit-cascade-played")

        # clicking a token of A (column 3 of the grid row "A t16") opens the one-character editor there
        tokens_chart = page.locator('[data-testid="stPlotlyChart"]').nth(0)
        tokens_chart.scroll_into_view_if_needed()
        tick = tokens_chart.locator(".ytick text", has_text="A t16").first.bounding_box()
        box = tokens_chart.locator(".xy .nsewdrag").first.bounding_box()
        page.mouse.click(box["x"] + box["width"] * 3.5 / 16, tick["y"] + tick["height"] / 2)
        page.get_by_text(T.CHAR_POS_LABEL).first.wait_for()
        wait_idle(page)
        main = page.locator('[data-testid="stMain"]')
        checked = main.locator('[data-testid="stRadio"] input[type="radio"]:checked').first
        assert checked.evaluate("el => el.closest('label').innerText").strip() == T.MODE_CHAR
        assert "Character " in main.inner_text()  # the caption naming the chosen character
        assert_no_errors(page)
    finally:
        page.close()
