"""The browser helpers wait on the condition a test checks, not on time: a chart that moves into view a
moment after the script ends (a page still settling on a loaded machine) is measured where it ends up."""

from __future__ import annotations

import pytest
from browser_util import (  # the plugin module: one Chromium
    get_browser,
    open_page,
    require_chromium,
    settled_box,
    wait_idle,
)

pytestmark = [pytest.mark.browser]

# A box that starts below a 768 px screen and moves into view 1.5 s later, as a chart does while the
# page above it is still being drawn.
LATE_LAYOUT = """<html><body style="margin:0">
<div id="spacer" style="height:1573px"></div><div id="chart" style="height:300px;background:#ccc"></div>
<script>setTimeout(() => { document.getElementById('spacer').style.height = '200px'; }, 1500);</script>
</body></html>"""


def test_settled_box_waits_until_the_box_fits_the_screen():
    require_chromium()
    page = get_browser().new_page(viewport={"width": 1024, "height": 768})
    try:
        page.set_content(LATE_LAYOUT)
        chart = page.locator("#chart")
        early = chart.bounding_box()
        assert early is not None and early["y"] > 768  # measured at once, it is still below the screen
        box = settled_box(chart, lambda b: b["y"] + b["height"] <= 768, timeout_ms=20_000)
        assert box is not None and box["y"] == 200, box
    finally:
        page.close()


def test_settled_box_returns_the_last_box_when_the_condition_never_holds():
    require_chromium()
    page = get_browser().new_page(viewport={"width": 1024, "height": 768})
    try:
        page.set_content(LATE_LAYOUT)
        box = settled_box(page.locator("#chart"), lambda b: b["y"] < 0, timeout_ms=2_500)
        assert box is not None and box["y"] == 200, box  # the caller's assertion shows what is wrong
    finally:
        page.close()


# Streamlit marks a script run on the app's root element; with the toolbar in "minimal" mode there is no
# status widget to read, so a wait on that widget alone returned while the page was still running.
RUNNING_APP = """<html><body><div data-testid="stApp" data-test-script-state="running">page</div>
<script>setTimeout(() => { document.querySelector('[data-testid="stApp"]')
  .setAttribute('data-test-script-state', 'notRunning'); }, 1500);</script></body></html>"""


def test_wait_idle_waits_for_the_script_run_to_end():
    require_chromium()
    page = get_browser().new_page()
    try:
        page.set_content(RUNNING_APP)
        wait_idle(page, timeout_ms=20_000)
        state = page.locator('[data-testid="stApp"]').get_attribute("data-test-script-state")
        assert state == "notRunning", state
    finally:
        page.close()


def test_the_app_marks_its_script_run_where_wait_idle_reads_it(app_server):
    page = open_page(get_browser(), app_server, "")
    try:
        state = page.locator('[data-testid="stApp"]').get_attribute("data-test-script-state")
        assert state == "notRunning", state  # the attribute wait_idle waits on exists and has settled
    finally:
        page.close()
