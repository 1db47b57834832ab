"""A first deep link on a freshly started server (a shared link, before anyone opened the root) gets the
whole app: the language switch, the model sidebar and the pages' titles in the navigation, not the page
file run alone with file names in the sidebar (Streamlit's legacy mode for a pages/ folder)."""

from __future__ import annotations

import pytest
from browser_util import AppServer, assert_no_errors, get_browser, open_page, require_chromium

from kvviz_app.shell.i18n import texts, use_lang

pytestmark = pytest.mark.browser
C = texts("common")


def _ru(value):
    with use_lang("ru"):
        return value()


@pytest.fixture
def fresh_server():
    require_chromium()
    server = AppServer()
    try:
        server.wait_until_up()
        yield server.url
    finally:
        server.stop()


def test_first_deep_link_runs_through_the_app(fresh_server):
    title = _ru(lambda: dict((path, t) for path, t, _ in C.PAGES)["pages/paging.py"])
    page = open_page(get_browser(), fresh_server, "paging?lang=ru", wait_text=_ru(lambda: C.LANGUAGE_LABEL))
    try:
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert title in nav, nav  # the app's titles, in the session's language
        assert "block table" not in nav.lower(), nav  # not file names
        assert page.url.split("?")[0].endswith("/paging"), page.url
        assert_no_errors(page)
    finally:
        page.close()
