"""The host tier's eviction-policy choice in Chromium at 1024 and 1400 px, in English and Russian: the
block-table page opened from a share link with ARC (host memory drawn as T1 and T2, the choice beside the
host tier) and the "Your traffic" page's second-tier section with ARC chosen; nothing overflows."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, open_page, screenshot, settled_page, wait_idle, wait_settled
from test_layout_1024 import check_layout, tall_screenshot

from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser

SIZES = [(1024, 768), (1400, 900)]


@pytest.mark.parametrize("lang", ["en", "ru"])
@pytest.mark.parametrize("width,height", SIZES)
def test_block_table_with_arc_fits(app_server, browser, lang, width, height):
    T = texts("block_table", lang)
    url = f"block_table?scenario=pool_pressure&host=8&host_policy=arc&step=6&lang={lang}"
    with settled_page(browser, app_server, url, T.HITS_HEADER, width, height) as page:
        screenshot(page, f"block_table_arc_{lang}_{width}_top", full_page=False)  # the controls' row as seen
        tall_screenshot(page, f"block_table_arc_{lang}_{width}", width)
        charts = page.locator('[data-testid="stPlotlyChart"]')
        assert T.HOST_QUEUE_TITLE_ARC.format(n=0).split("0")[0] in charts.nth(3).text_content()
        assert T.HOST_ARC_T1_TICK in charts.nth(3).text_content()
        problems = check_layout(page)
        assert not problems, f"{lang} at {width} px: {problems[:12]}"


@pytest.mark.parametrize("lang", ["en", "ru"])
@pytest.mark.parametrize("width,height", SIZES)
def test_workload_second_tier_with_arc_fits(app_server, browser, lang, width, height):
    T = texts("workload", lang)
    page = open_page(browser, app_server, f"workload?lang={lang}", wait_text=T.STATS_HEADER, width=width,
                     height=height)
    try:
        header = page.get_by_text(T.TIER_HEADER)
        header.scroll_into_view_if_needed()
        page.get_by_text(T.TIER_DEVICE).first.wait_for()
        wait_idle(page)
        policy = page.locator('[data-testid="stSelectbox"]').filter(has_text=T.TIER_POLICY)
        policy.get_by_role("combobox").click()
        page.get_by_role("option", name="ARC", exact=True).click()
        wait_idle(page)
        wait_settled(page)
        page.wait_for_function("() => Array.from(document.querySelectorAll('[data-testid=\"stSelectbox\"] input'))"
                               ".some(i => i.value === 'ARC')")  # the choice shows ARC
        assert_no_errors(page)
        header.scroll_into_view_if_needed()
        screenshot(page, f"workload_tier_arc_{lang}_{width}", full_page=False)
        problems = check_layout(page)
        assert not problems, f"{lang} at {width} px: {problems[:12]}"
    finally:
        page.close()
