"""The browser helpers wait on the condition a test checks, not on time: a chart that moves into view a
moment after the script ends (a page still settling on a loaded machine) is measured where it ends up."""

from __future__ import annotations

import pytest
from browser_util import get_browser, require_chromium, settled_box  # the plugin module: one Chromium

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
