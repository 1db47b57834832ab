"""The landing page in a real browser at the projector's 1024 x 768, in English and Russian: a newcomer sees
where to start in the first screen, and the link opens that page."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, open_page, screenshot

from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_landing_page_says_where_to_start_in_its_first_screen(app_server, browser, lang):
    label = texts("share", lang).START_LINK
    page = open_page(browser, app_server, f"?lang={lang}", width=1024, height=768, wait_text=label)
    try:
        link = page.locator('[data-testid="stPageLink"]', has_text=label).first
        box = link.bounding_box()
        screenshot(page, f"landing-start-{lang}-1024", full_page=False)
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 768, box
        assert_no_errors(page)
        link.click()
        page.locator("h1", has_text=texts("edit", lang).TITLE).first.wait_for()
        assert f"lang={lang}" in page.url
    finally:
        page.close()
