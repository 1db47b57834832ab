"""Browser: no English left where the Russian UI shows text: chart titles and legends (bound at import
time, they used to stay English), navigation titles, sentences with Unicode names, decimal points."""

from __future__ import annotations

import re

import pytest
from browser_util import assert_no_errors, open_page, wait_idle, wait_settled

pytestmark = [pytest.mark.browser, pytest.mark.model]
CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)

_TEXT_JS = r"""
() => {
  const svg = [...document.querySelectorAll('[data-testid="stPlotlyChart"] svg text')].map(t => t.textContent);
  const charts = [...document.querySelectorAll('.gtitle, .legendtext')].map(t => t.textContent);
  return {body: document.body.innerText + '\n' + svg.join('\n'), charts};
}
"""

# url path -> English (or English-style) texts the Russian page showed before
PAGES = {
    # (the batching legends and sessions titles bound at import: AppTests in tests/pages, after an English
    # session drew them; the batching page is too slow on a loaded machine to open here once more)
    "edit?mode=char&text=%D0%9A%D0%BE%D1%82%20%D1%81%D0%B8%D0%B4%D0%B8%D1%82&pos=1&repl=%D1%83":
        ["CYRILLIC", "LETTER"],
}


def _open(browser, base, url_path, lang="ru"):
    sep = "&" if "?" in url_path else "?"
    page = open_page(browser, base, f"{url_path}{sep}lang={lang}")
    page.set_default_timeout(180_000)
    page.locator("h1").first.wait_for()
    wait_idle(page)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSpinner\"]')")
    wait_idle(page)
    wait_settled(page)
    return page


@pytest.mark.parametrize("url_path", list(PAGES), ids=[p.split("?")[0] for p in PAGES])
def test_the_russian_page_has_no_english_titles_legends_or_names(app_server, browser, url_path):
    page = _open(browser, app_server, url_path)
    try:
        assert_no_errors(page)
        seen = page.evaluate(_TEXT_JS)
        body = seen["body"]
        left = [text for text in PAGES[url_path] if text in body]
        assert not left, f"{url_path}: English in the Russian UI: {left}"
        # every chart title and legend entry speaks Russian (or is only numbers/identifiers)
        english = [t for t in seen["charts"] if re.search("[A-Za-z]{4,}", t) and not CYRILLIC.search(t)]
        assert not english, f"{url_path}: chart text in English: {english}"
        # the navigation: Russian titles, no "vs"
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert " vs " not in nav and "Radix tree и" not in nav, nav
        # numbers: decimal commas (a ratio like 0,95×, never 0.95x)
        assert not re.search(r"\d\.\d+\s?[x×]", body), re.findall(r".{20}\d\.\d+\s?[x×].{5}", body)
    finally:
        page.close()
