"""Block-table page with the host tier on, in Chromium at 1024 and 1400 px, in English and Russian, opened from
a share link (scenario, host tier, step): host memory and its LRU order are drawn under the pool, the table
of prompt tokens by source is there, and nothing overflows (the layout check of every page)."""

from __future__ import annotations

import pytest
from browser_util import settled_page
from test_layout_1024 import check_layout, tall_screenshot

from kvviz.analysis.scenarios.load import load_builtin
from kvviz.analysis.scenarios.play import play_scenario
from kvviz.mirror.events import EventKind
from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser

HOST = 16


def _load_step() -> int:
    run = play_scenario(load_builtin("pool_pressure").with_host_tier(HOST))
    return next(k for k in range(1, run.num_steps + 1)
                if any(e.kind is EventKind.HOST_LOAD for e in run.events_of_step(k)))


@pytest.mark.parametrize("lang", ["en", "ru"])
@pytest.mark.parametrize("width,height", [(1024, 768), (1400, 900)])
def test_host_tier_fits_in_both_languages(app_server, browser, lang, width, height):
    T = texts("block_table", lang)
    url = f"block_table?scenario=pool_pressure&host={HOST}&step={_load_step()}&lang={lang}"
    with settled_page(browser, app_server, url, T.HITS_HEADER, width, height) as page:
        tall_screenshot(page, f"block_table_host_{lang}_{width}", width)  # as tall as the page: every chart drawn
        svg = page.locator('[data-testid="stPlotlyChart"]')
        assert T.HOST_QUEUE_HEAD in svg.nth(3).text_content()  # pool, free queue, host memory, host LRU
        problems = check_layout(page)
        assert not problems, f"{lang} at {width} px: {problems[:12]}"
