"""At the projector's 1024 px, in English and Russian: widget labels and table headers wrap between
words, never inside one ("kv_lora_r" / "ank", "Blo" / "ck"), and a chart's dashed band runs through no
label."""

from __future__ import annotations

import pytest
from browser_util import (
    PAGE_TIMEOUT_MS,
    assert_no_errors,
    dashed_crossings,
    open_page,
    screenshot,
    split_words,
    wait_idle,
    wait_settled,
)

pytestmark = pytest.mark.browser

LABELS = '[data-testid="stWidgetLabel"] p, [data-testid="stCheckbox"] p, [data-testid="stMetricLabel"] p'
HEADERS = '[data-testid="stTable"] th, [data-testid="stDataFrame"] [role="columnheader"]'


def _open(browser, base, path, lang, width=1024):
    sep = "&" if "?" in path else "?"
    page = open_page(browser, base, f"{path}{sep}lang={lang}", width=width, height=900)
    page.locator('[data-testid="stMain"] h1').first.wait_for()
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSpinner\"]')", timeout=PAGE_TIMEOUT_MS)
    wait_idle(page)
    wait_settled(page)
    return page


@pytest.mark.parametrize("lang", ["en", "ru"])
@pytest.mark.parametrize("path", ["calculator?mode=typed&mla=1&sliding=1", "collisions"])
def test_labels_and_table_headers_wrap_between_words(app_server, browser, path, lang):
    page = _open(browser, app_server, path, lang)
    try:
        assert_no_errors(page)
        split = split_words(page, f"{LABELS}, {HEADERS}")
        screenshot(page, f"words-{path.split('?')[0]}-{lang}-1024")
        assert not split, f"{path} ({lang}) at 1024 px splits these words: {split}"
    finally:
        page.close()


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_papers_dashed_band_runs_through_no_bar_label(app_server, browser, lang):
    page = _open(browser, app_server, "paging", lang)
    try:
        page.locator(".shapelayer path").first.wait_for(state="attached")
        crossed = dashed_crossings(page)
        screenshot(page, f"paging-band-{lang}-1024")
        assert not crossed, f"the dashed band crosses {crossed}"
    finally:
        page.close()


#: Marks the hash-cost table (the page's last HTML table) so that split_words can select its cells.
_MARK_COSTS = """() => { const t = [...document.querySelectorAll('[data-testid="stTable"]')].pop();
  if (t) t.setAttribute('data-costs', '1'); return !!t; }"""


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_hash_cost_tables_cells_keep_names_whole(app_server, browser, lang):
    """The cost table's hash names ("cbor_only", "sha256_cbor") break at most after an underscore, its
    words nowhere: a table free to break anywhere printed "cbor_o" / "nly" and "sha2" / "56"."""
    open_page(browser, app_server, "").close()  # the app's own run first: it registers st.navigation
    page = _open(browser, app_server, "collisions", lang)
    try:
        assert_no_errors(page)
        # the cost table comes after the page's model work (its prefill runs on the shared engine): wait for it
        page.wait_for_function(_MARK_COSTS, timeout=PAGE_TIMEOUT_MS)
        split = split_words(page, "[data-costs] td, [data-costs] th")  # a zero-width space ends a word
        screenshot(page, f"collisions-costs-{lang}-1024")
        assert not split, f"collisions ({lang}) at 1024 px splits these words in the cost table: {split}"
    finally:
        page.close()
