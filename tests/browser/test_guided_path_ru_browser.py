"""Browser: the guided path names its steps in each session's language, Russian at 1024 px (the step titles
and the Next link were built once, in the language of the first session that imported the page layer:
"Далее: Paged vs contiguous memory")."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, open_page, screenshot

from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser

C_RU = texts("common", "ru")
S_RU = texts("share", "ru")


def _title(path: str, common) -> str:
    return next(title for p, title, _ in common.PAGES if p == path)


def _next_link_text(browser, app_server, lang: str) -> str:
    page = open_page(browser, app_server, f"paging?path=workshop&lang={lang}", width=1024, height=768)
    try:
        link = page.locator('[data-testid="stPageLink-NavLink"][href^="block_table?"]').last
        link.wait_for(state="visible", timeout=60_000)
        assert_no_errors(page)
        if lang == "ru":
            link.scroll_into_view_if_needed()
            screenshot(page, "guided_path_next_ru_1024")
        # The link's text is its icon's name, then the label.
        return link.inner_text().strip().splitlines()[-1].strip()
    finally:
        page.close()


def test_the_paging_steps_next_link_names_the_next_page_in_each_sessions_language(app_server, browser):
    """English first, then Russian on the same server: whichever language imported the page layer first,
    the other one saw its titles."""
    en_common, en_share = texts("common", "en"), texts("share", "en")
    en = _title("pages/block_table.py", en_common)
    ru = _title("pages/block_table.py", C_RU)
    assert ru != en
    assert _next_link_text(browser, app_server, "en") == en_share.NEXT_LINK.format(title=en)
    assert _next_link_text(browser, app_server, "ru") == S_RU.NEXT_LINK.format(title=ru)
