"""Browser: what a workshop does in a real browser. The guided path survives every hop (each step's Next
link opens the next step with ``path=workshop`` kept, in English and Russian); a copied Edit link opens
the same hashes in a fresh browser (no seed of "None")."""

from __future__ import annotations

import re

import pytest
from browser_util import assert_no_errors, open_page, wait_for_metrics, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.model]


def _next_link(page, url_path: str):
    """The page's Next link (the guided path's), found by where it points."""
    return page.locator(f'[data-testid="stPageLink-NavLink"][href^="{url_path}?"]').last


def _visible(locator, timeout_ms: int = 60_000) -> bool:
    try:
        locator.wait_for(state="visible", timeout=timeout_ms)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: the assertion says what is missing
        return False
    return True


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_guided_path_keeps_its_next_link_across_hops(app_server, browser, lang):
    # English: the presenter picks the path on the landing page; Russian: the path comes in a link.
    page = open_page(browser, app_server, f"?lang={lang}" if lang == "en" else f"?path=workshop&lang={lang}")
    try:
        page.set_default_timeout(90_000)  # the model is loaded by now: a page that does not come is a failure
        page.wait_for_selector('[data-testid="stButtonGroup"]')  # the path control: the landing page ran
        if lang == "en":
            page.locator('[data-testid="stButtonGroup"] button', has_text="Workshop in 45 minutes").click()
            wait_idle(page)
        # The landing page lists the steps: open the calculator step, as a presenter does.
        first = _next_link(page, "calculator")
        first.wait_for(state="visible")
        first.click()
        page.wait_for_url(re.compile(r"/calculator\?"))
        wait_idle(page)
        # Each hop's page must again show its Next link, and the URL keep the path.
        for here, there in (("calculator", "paging"), ("paging", "block_table"), ("block_table", "radix")):
            link = _next_link(page, there)
            assert _visible(link), f"no Next link on {here}: {page.url}"
            assert "path=workshop" in page.url, (here, page.url)
            link.click()
            page.wait_for_url(re.compile(rf"/{there}\?"))
            wait_idle(page)
            assert_no_errors(page)
        assert _visible(_next_link(page, "sessions")), f"no Next link on radix: {page.url}"
        assert "path=workshop" in page.url and f"lang={lang}" in page.url, page.url
    finally:
        page.close()


def _reuse(values: dict[str, str], lang: str) -> tuple:
    """The edit's token counts (timings and the server-wide store's counts differ from run to run)."""
    from kvviz_app.shell.i18n import texts, translate
    T = texts("edit")

    return tuple(values.get(translate(label, lang)) for label in (T.M_COMMON, T.M_REUSED, T.M_RECOMPUTE, T.M_SAVED))


def _copied_link(page) -> str:
    page.locator('[data-testid="stPopover"] button').first.click()
    code = page.locator('[data-testid="stPopoverBody"] code').first
    code.wait_for(state="visible")
    return code.inner_text().strip()


@pytest.mark.parametrize("lang", ["en"])  # the seed has no words: one language is enough
def test_a_copied_edit_link_keeps_the_seed_unset_in_a_fresh_browser(app_server, browser, lang):
    page = open_page(browser, app_server, f"edit?lang={lang}")
    try:
        page.set_default_timeout(120_000)
        before = wait_for_metrics(page, lambda v: None not in _reuse(v, lang), timeout_s=120)
        url = _copied_link(page)
    finally:
        page.close()
    assert "seed=" not in url, url
    context = browser.new_context(viewport={"width": 1400, "height": 1000})  # no cookies, no session
    try:
        fresh = context.new_page()
        fresh.set_default_timeout(120_000)
        fresh.goto(url, wait_until="domcontentloaded")
        after = wait_for_metrics(fresh, lambda v: None not in _reuse(v, lang), timeout_s=120)
        seed = fresh.locator('[data-testid="stTextInput"] input').last.input_value()
        assert seed == "", seed
        assert_no_errors(fresh)
        assert _reuse(after, lang) == _reuse(before, lang) and None not in _reuse(after, lang), (before, after)
    finally:
        context.close()


@pytest.mark.parametrize("lang", ["ru"])  # the notice in Russian (the English one is the AppTest's)
def test_a_200_kb_prompt_is_kept_and_stays_out_of_the_url(app_server, browser, lang):
    from kvviz_app.shell.i18n import texts, translate
    T_SHARE = texts("share")

    page = open_page(browser, app_server, f"edit?mode=free&lang={lang}")
    try:
        page.set_default_timeout(180_000)
        areas = page.locator('[data-testid="stTextArea"] textarea')
        areas.nth(1).wait_for(state="visible")
        b_before = areas.nth(1).input_value()
        long_a = "Кот сидит на коврике у окна. " * 7000  # about 200 K characters
        areas.nth(0).fill(long_a)
        areas.nth(0).press("Control+Enter")  # submit the text area (a rerun), as leaving it does
        wait_idle(page)
        assert areas.nth(0).input_value() == long_a and areas.nth(1).input_value() == b_before
        assert len(page.url) < 20_000, len(page.url)
        page.locator('[data-testid="stPopover"] button').first.click()
        note = translate(T_SHARE.TOO_LONG_TO_SHARE, lang).split("{")[0].strip()
        page.get_by_text(note, exact=False).first.wait_for(state="visible")
        assert_no_errors(page)
    finally:
        page.close()
