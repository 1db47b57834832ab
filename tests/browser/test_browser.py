"""Real-browser smoke test of the landing page: headless Chromium against ``streamlit run app.py``."""

from __future__ import annotations

import re

import pytest
from browser_util import (
    ROOT,
    AppServer,
    assert_no_errors,
    metric_values,
    open_page,
    page_title,
    screenshot,
    wait_idle,
)

from kvviz_app.shell.i18n import texts

C = texts("common")
T = texts("home")


pytestmark = pytest.mark.browser


def test_landing_page_shows_the_real_model_card(app_server, browser):
    page = open_page(browser, app_server, "", wait_text=C.MODEL_KV_MEASURED)
    try:
        main = page.locator('[data-testid="stMain"]')
        main.get_by_text(T.CARD_HEADER).wait_for()
        page.locator('[data-testid="stMetricValue"]').nth(7).wait_for()
        cards = metric_values(page)
        assert cards[C.MODEL_FIELDS["layers"]] == "30" and cards[C.MODEL_FIELDS["head_dim"]] == "64"
        assert cards[C.MODEL_FIELDS["kv_heads"]] == "3 (GQA)" and cards[C.MODEL_FIELDS["heads"]] == "9"
        assert re.fullmatch(r"45 KiB|22\.5 KiB", cards[C.MODEL_KV_MEASURED]), cards
        sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
        assert "SmolLM2-135M-Instruct" in sidebar and "46,080 B" in sidebar
        assert_no_errors(page)
        screenshot(page, "home")
    finally:
        page.close()


def test_measure_a_prompt_and_navigation(app_server, browser):
    page = open_page(browser, app_server, "", wait_text=T.TRY_HEADER)
    try:
        page.get_by_role("button", name=T.TRY_BUTTON).click()
        page.get_by_text(T.TRY_NEXT).wait_for()
        page.locator(".kvviz-tok").nth(10).wait_for()
        wait_idle(page)
        assert int(metric_values(page)[T.TRY_TOKENS].replace(",", "")) > 10
        assert_no_errors(page)
        nav = page.locator('[data-testid="stSidebarNav"]')
        shown = [(title, path) for path, title, _ in C.PAGES if (ROOT / path).exists()]
        if len(shown) > 1:  # Streamlit shows the page list once there is more than one page
            # With more than 12 pages and other widgets in the sidebar, Streamlit lists the first 10 and a
            # "View N more" button (since the merge the app has 14 pages): expand it as a user would.
            more = nav.get_by_role("button", name=re.compile(r"View \d+ more"))
            if more.count():
                more.click()
                nav.get_by_text(shown[-1][0], exact=True).wait_for()
            nav_text = nav.inner_text()
            for title, _ in shown:
                assert title in nav_text
        screenshot(page, "home-prefill")
    finally:
        page.close()


def test_unknown_model_in_the_sidebar_shows_one_clear_error(app_server, browser):
    page = open_page(browser, app_server, "", wait_text=C.MODEL_KV_MEASURED)
    try:
        sidebar = page.locator('[data-testid="stSidebar"]')
        sidebar.get_by_text(C.MODEL_CHOICE_CUSTOM).click()
        box = sidebar.get_by_label(C.MODEL_INPUT_LABEL, exact=True)
        box.fill("kvviz-tests/no-such-model")
        sidebar.get_by_role("button", name=C.MODEL_INPUT_SUBMIT).click()
        sidebar.locator('[data-testid="stAlertContentError"]').wait_for()
        wait_idle(page)
        errors = sidebar.locator('[data-testid="stAlertContentError"]')
        assert errors.count() == 1 and "kvviz-tests/no-such-model" in errors.inner_text()
        assert "SmolLM2-135M-Instruct" in sidebar.inner_text()  # the embedded model stays in use
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()


def test_first_deep_link_on_a_fresh_server_goes_through_app_navigation(browser):
    """Opening /calculator before anyone opened / still shows app.py's sidebar and page titles."""
    server = AppServer()
    try:
        server.wait_until_up()
        page = open_page(browser, server.url, "calculator", wait_text=C.MODEL_KV_MEASURED)
        try:
            nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
            calculator_title = page_title("pages/calculator.py")
            assert calculator_title in nav and "app" not in nav.split()
            assert_no_errors(page)
        finally:
            page.close()
    finally:
        server.stop()
