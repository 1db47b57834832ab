"""Real-browser test of the "Your traffic" page at 1024 and 1400 px: charts draw, numbers shown, a bad
upload is one clear message naming the line."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, open_page, open_via_nav, screenshot, wait_for_metrics, wait_idle

from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.reuse_distance import analyze
from kvviz_app.shell.i18n import texts

T = texts("workload")

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1024, 1400])
def test_workload_page_in_the_browser(app_server, browser, width):
    profile = analyze(parse_trace(EXAMPLE_PATH.read_bytes()))
    page = open_via_nav(browser, app_server, "pages/workload.py", wait_text=T.STATS_HEADER, width=width)
    try:
        page.locator('[data-testid="stPlotlyChart"]').nth(4).wait_for()
        wait_idle(page)
        # the metric row is drawn a metric at a time: wait until both are there (the limit only ends a hang)
        metrics = wait_for_metrics(page, lambda v: T.M_BLOCKS in v and T.M_INFINITE in v)
        assert metrics[T.M_BLOCKS] == f"{profile.unique_blocks:,}"
        assert metrics[T.M_INFINITE] == f"{profile.hit_tokens_infinite / profile.input_tokens:.1%}"
        assert page.locator(".main-svg").count() >= 5
        assert_no_errors(page)
        screenshot(page, f"workload_{width}")
    finally:
        page.close()


def test_workload_page_bad_upload(app_server, browser, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hash_ids": [1], "input_length": 5}\n{"hash_ids": [2], "input_length": "many"}\n')
    page = open_via_nav(browser, app_server, "pages/workload.py", wait_text=T.STATS_HEADER)
    try:
        page.get_by_text(T.SOURCE_OPTIONS["upload"]).click()
        page.get_by_text(T.UPLOAD_WAITING).wait_for()
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(bad))
        page.get_by_text("line 2: 'input_length' must be an integer").wait_for()
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert "Traceback" not in main
    finally:
        page.close()


@pytest.mark.parametrize("lang", ["en", "ru"])
@pytest.mark.parametrize("width", [1024, 1400])
def test_workload_host_tier_section(app_server, browser, lang, width):
    """The host-tier section draws both figures in either language; its legend and axis words are the
    catalog's (no English left in Russian), and no word of its caption is split over two lines."""
    TL = texts("workload", lang)
    page = open_page(browser, app_server, f"workload?lang={lang}", wait_text=TL.STATS_HEADER, width=width)
    try:
        header = page.get_by_text(TL.TIER_HEADER)
        header.scroll_into_view_if_needed()
        # the titles may be wrapped over lines (wrap_title): wait for a legend entry and an axis title
        page.get_by_text(TL.TIER_DEVICE).first.wait_for()
        page.get_by_text(TL.TIER_LOAD_Y).first.wait_for()
        wait_idle(page)
        assert_no_errors(page)
        assert screenshot(page, f"workload_tier_{lang}_{width}").exists()
        page.get_by_text(TL.TIER_LOAD_Y).first.scroll_into_view_if_needed()
        assert screenshot(page, f"workload_tier_load_{lang}_{width}").exists()
    finally:
        page.close()
