"""Every page rendered in Russian in a real browser (1024 px, screenshots), the browser's language as the
default, and two browsers in two languages on one server at the same time."""

from __future__ import annotations

import re

import pytest
from browser_util import (
    PAGE_TIMEOUT_MS,
    ROOT,
    assert_no_errors,
    open_page,
    screenshot,
    wait_idle,
    wait_settled,
)
from test_layout_1024 import check_layout, tall_screenshot

from kvviz_app.shell.i18n import texts, use_lang

C = texts("common")
TOOLBAR = texts("charts").TOOLBAR

pytestmark = pytest.mark.browser
CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)


def _ru(value):
    with use_lang("ru"):
        return value()


RU_PAGES = [(path, title) for path, title, _ in _ru(lambda: C.PAGES) if (ROOT / path).exists()]


def _open_in_russian(browser, base, path, title, width):
    page = open_page(browser, base, "?lang=ru", wait_text=_ru(lambda: C.LANGUAGE_LABEL), width=width)
    if path != "pages/home.py":
        nav = page.locator('[data-testid="stSidebarNav"]')
        more = nav.get_by_role("button", name=re.compile(r"View \d+ more"))  # pages 11-14 hide behind it
        if not nav.get_by_text(title, exact=True).count() and more.count():
            more.click()
        nav.get_by_text(title, exact=True).click()
    page.locator("h1").first.wait_for()
    wait_idle(page)
    # a page may still show a spinner (the model's work) after the status widget went quiet
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSpinner\"]')", timeout=PAGE_TIMEOUT_MS)
    wait_idle(page)
    wait_idle(page)
    wait_settled(page)  # charts draw a moment after the script ends
    return page


def test_every_registered_page_is_rendered_in_russian():
    # RU_PAGES skips paths that do not exist; none may be missing, so no page escapes the Russian check.
    assert [p for p, _ in RU_PAGES] == [p for p, _, _ in C.PAGES]
    assert {"pages/live.py", "pages/workload.py", "pages/batching.py", "pages/glossary.py"} <= {p for p, _ in RU_PAGES}


@pytest.mark.parametrize(("path", "title"), RU_PAGES, ids=[p.split("/")[-1][:-3] for p, _ in RU_PAGES])
def test_every_page_renders_in_russian_at_1024(app_server, browser, path, title):
    page = _open_in_russian(browser, app_server, path, title, 1024)
    try:
        assert_no_errors(page)
        heading = page.locator("h1").first.inner_text()
        assert CYRILLIC.search(heading), heading
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert title in nav and "Overview" not in nav
        assert "lang=ru" in page.url
        name = path.split("/")[-1][:-3]
        # Russian runs longer than English: nothing may overflow, be clipped or cut (test_layout_1024's check)
        problems = check_layout(page)
        tall_screenshot(page, f"ru-{name}-1024", 1024)
        assert not problems, f"{path} in Russian at 1024 px: {problems[:12]}"
        # Plotly's own toolbar speaks the session's language too (ui_chart); Streamlit's "Fullscreen" is its own
        toolbar = page.eval_on_selector_all(".modebar-btn", "els => els.map(e => e.getAttribute('data-title'))")
        english = sorted({t for t in toolbar if t in TOOLBAR})
        assert not english, f"{path}: Plotly toolbar in English: {english}"
        if name in {"home", "edit", "calculator", "block_table", "glossary", "paging", "live", "workload", "batching"}:
            page.set_viewport_size({"width": 1400, "height": 1000})
            wait_idle(page)
            wait_settled(page)
            problems = check_layout(page)
            tall_screenshot(page, f"ru-{name}-1400", 1400)
            assert not problems, f"{path} in Russian at 1400 px: {problems[:12]}"
    finally:
        page.close()


def test_two_browsers_two_languages_and_the_browser_locale(app_server, browser):
    """A Russian-locale browser gets Russian without ?lang=; an English one stays English, at once."""
    ru_ctx = browser.new_context(locale="ru-RU", viewport={"width": 1024, "height": 900})
    en_ctx = browser.new_context(locale="en-US", viewport={"width": 1024, "height": 900})
    try:
        ru, en = ru_ctx.new_page(), en_ctx.new_page()
        for page in (ru, en):
            page.set_default_timeout(240_000)
            page.goto(app_server, wait_until="domcontentloaded")
        # The glossary: no model work, quick to switch to.
        ru_title = _ru(lambda: next(t for p, t, _ in C.PAGES if p == "pages/glossary.py"))
        en_title = next(t for p, t, _ in C.PAGES if p == "pages/glossary.py")
        ru.get_by_text(_ru(lambda: C.LANGUAGE_LABEL)).first.wait_for()
        en.get_by_text(C.LANGUAGE_LABEL).first.wait_for()
        for page, title in ((ru, ru_title), (en, en_title)):  # 14 pages: the glossary hides behind "View 4 more"
            nav = page.locator('[data-testid="stSidebarNav"]')
            more = nav.get_by_role("button", name=re.compile(r"View \d+ more"))
            if not nav.get_by_text(title, exact=True).count() and more.count():
                more.click()
            nav.get_by_text(title, exact=True).click()
        ru.get_by_text("хэш-цепочка").first.wait_for()
        en.get_by_text("Meaning").first.wait_for()
        assert ru.locator("h1").first.inner_text().strip() == "Глоссарий"
        assert en.locator("h1").first.inner_text().strip() == "Glossary"
        # The English browser switches to Russian; the other one is not affected.
        en.locator('[data-testid="stSidebar"]').get_by_text("Русский").click()
        en.get_by_role("heading", name="Глоссарий").wait_for()
        en.wait_for_function("() => location.search.includes('lang=ru')")  # the URL follows the rerun
        assert "lang=ru" in en.url
        ru.locator('[data-testid="stSidebar"]').get_by_text("English").click()
        ru.get_by_role("heading", name="Glossary").wait_for()
        ru.wait_for_function("() => location.search.includes('lang=en')")
        assert "lang=en" in ru.url
        for page in (ru, en):
            wait_idle(page)
            assert_no_errors(page)
        screenshot(en, "ru-switched-glossary-1024")
    finally:
        ru_ctx.close()
        en_ctx.close()
