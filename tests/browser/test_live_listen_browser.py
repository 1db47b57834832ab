"""The Live engine page in Chromium in listen mode: the page binds a loopback address, a publisher built
like vLLM 0.33.0's for a specific address (PUB connect()s to the page, replay ROUTER bound) connects, and
the page shows its batches, one of them from the replay (published before the page subscribed)."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, open_via_nav, screenshot, wait_for_metrics, wait_idle
from live_testpub import WirePublisher, free_port

from kvviz_app.shell.i18n import texts

T = texts("live")
pytestmark = pytest.mark.browser
WAIT_S = 120


def _fill(page, label: str, value: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")
    wait_idle(page)


def test_live_page_listens_for_a_publisher_that_connects(app_server, browser):
    port, replay = free_port(), free_port()
    page = open_via_nav(browser, app_server, "pages/live.py", wait_text=T.DEMO_HEADER,
                        width=1400, height=1400)
    pub = None
    try:
        page.get_by_text(T.TOPOLOGY_LISTEN, exact=True).first.click()
        wait_idle(page)
        page.get_by_text(T.TOPOLOGY_EXPLAIN.split("`")[0].strip()).first.wait_for()
        _fill(page, T.LISTEN_ENDPOINT, f"tcp://127.0.0.1:{port}")
        _fill(page, T.REPLAY, f"tcp://127.0.0.1:{replay}")
        page.get_by_role("button", name=T.LISTEN, exact=True).click()
        page.get_by_text(T.STATUS["listening"].split("{")[0].strip()).first.wait_for(timeout=WAIT_S * 1000)
        pub = WirePublisher(port, replay, connect=True)
        pub.publish([pub.stored([1, 2], None, list(range(8)))], send=False)  # before the page subscribed
        pub.wait_subscribed(WAIT_S)
        pub.wait_replay_served(WAIT_S)  # the replay asked on connecting answered first: the next batch is live
        pub.publish([pub.stored([3], 2, list(range(8, 12)))])
        values = wait_for_metrics(page, lambda v: v.get(T.M_BATCHES) == "2" and v.get(T.M_REPLAYED) == "1",
                                  timeout_s=WAIT_S)
        assert (values.get(T.M_BATCHES), values.get(T.M_REPLAYED), values.get(T.M_BLOCKS)) == ("2", "1", "3"), values
        wait_idle(page)
        assert_no_errors(page)
        screenshot(page, "live_listen_1400")
    finally:
        page.close()
        if pub is not None:
            pub.close()
