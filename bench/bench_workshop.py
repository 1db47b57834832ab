"""A workshop's three slow clicks in headless Chromium, each against the engine compute it caused, with the model warm.

Keys (one app server, one browser page; the model is loaded by a visit to the landing page first, which is
read until its own chart is drawn, as bench_edit does). Each ``<name>_click_to_result_s`` is a click to its
result drawn on the page; each ``<name>_compute_s`` is the engine compute of that click as the page reports
it, so the difference is waiting that is not compute (reruns, drawing, a queue, a busy machine). Target:
``<name>_click_to_result_s <= <name>_compute_s + 1``.
``room_send_*``: the room's "Send to the room" (a fresh session's first prompt, the preset text) to its
"Prefill: compute / wait" metric drawn; compute is that metric's compute, ``room_send_wait_s`` its wait.
``sc_measure_*``: the side channel's "Measure" (default trials and blocks) to its latency chart drawn
(``sc_measure_to_caption_s``: to the results' caption, drawn before the chart); compute is the caption's
"s of model time", the engine compute of every prefill it ran (whole seconds on the page: +-0.5 s).
``chat_turn_*``: one message on the Sessions page's chat to its turn's caption drawn; compute is the turn's
share of the engine steps that ran it (``ChatTurn.compute_ms``, from ``RequestMetrics.compute_share_s``).
Needs Chromium and Playwright (as the browser tests); without them the keys are missing and the run says so.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OVERHEAD_TARGET_S = 1.0
NAMES = ("room_send", "sc_measure", "chat_turn")
CHAT_MESSAGE = "What is a prefix cache?"

TARGETS = [
    (f"{name}_click_to_result_s", f"{what} is drawn <= its engine compute + {OVERHEAD_TARGET_S:.0f} s",
     lambda r, name=name: r[f"{name}_click_to_result_s"] <= r[f"{name}_compute_s"] + OVERHEAD_TARGET_S)
    for name, what in zip(NAMES, ("a room Send's prefill", "the side channel's Measure", "a chat turn's answer"),
                          strict=True)
]

CHART = '[data-testid="stPlotlyChart"] .main-svg'
_NUMBER = re.compile(r"\d[\d,\s\u00a0\u202f]*(?:[.,]\d+)?")


def _numbers(text: str) -> list[float]:
    """The numbers in ``text`` in order (English thousands commas)."""
    return [float(m.group().replace(",", "").replace(" ", "").strip()) for m in _NUMBER.finditer(text)]


def _poll(page, ready: Callable[[], object], what: str, timeout_s: float = 600.0) -> object:
    """``ready()``'s first truthy value, polled every 50 ms (a condition, not a sleep)."""
    deadline = time.monotonic() + timeout_s
    while not (value := ready()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} never appeared")
        page.wait_for_timeout(50)
    return value


def _caption(page, prefix: str) -> str | None:
    """The text of the first caption on the page that starts with ``prefix`` (None when there is none)."""
    return page.evaluate("(p) => { for (const c of document.querySelectorAll('[data-testid=\"stCaptionContainer\"]'))"
                         " { if (c.innerText.trim().startsWith(p)) return c.innerText.trim(); } return null; }",
                         prefix)


def _goto(page, url: str, ready_text: str) -> None:
    from tests.browser_util import wait_idle

    page.goto(url, wait_until="domcontentloaded")
    page.get_by_text(ready_text, exact=False).first.wait_for()
    wait_idle(page)


def _room_send(page, url: str, results: dict) -> None:
    from kvviz_app.shell.i18n import texts
    from tests.browser_util import metric_values
    T = texts("security")

    _goto(page, f"{url}/room", T.LAST_PROMPT)
    button = page.get_by_role("button", name=T.SEND)
    start = time.perf_counter()
    button.click()
    value = _poll(page, lambda: metric_values(page).get(T.M_PREFILL), "the room's Prefill metric")
    results["room_send_click_to_result_s"] = round(time.perf_counter() - start, 2)
    compute_ms, wait_ms = _numbers(str(value))[:2]
    results["room_send_compute_s"] = round(compute_ms / 1000, 3)
    results["room_send_wait_s"] = round(wait_ms / 1000, 3)


def _sc_measure(page, url: str, results: dict) -> None:
    from kvviz_app.shell.i18n import texts
    T = texts("security")

    _goto(page, f"{url}/side_channel", T.SC_SETUP)
    head = T.SC_LATEST.split("{")[0]
    button = page.get_by_role("button", name=T.SC_RUN)
    start = time.perf_counter()
    button.click()
    caption = _poll(page, lambda: _caption(page, head), "the side channel's results caption")
    results["sc_measure_to_caption_s"] = round(time.perf_counter() - start, 2)
    page.locator(CHART).first.wait_for(state="visible")  # the latency chart: drawn after its caption
    results["sc_measure_click_to_result_s"] = round(time.perf_counter() - start, 2)
    before_secs = T.SC_LATEST.split("{secs")[0].split("}")[-1]  # " (": between {ago} and {secs}
    results["sc_measure_compute_s"] = _numbers(str(caption).rsplit(before_secs, 1)[-1])[0]


def _chat_turn(page, url: str, results: dict) -> None:
    from kvviz_app.shell.i18n import texts
    T = texts("sessions")

    _goto(page, f"{url}/sessions", T.CHAT_HEADER)
    head = T.CHAT_COMPUTE.split("{")[0]
    box = page.get_by_label(T.CHAT_INPUT)
    box.scroll_into_view_if_needed()
    box.fill(CHAT_MESSAGE)
    send = page.locator('[data-testid="stForm"]').get_by_role("button", name=T.CHAT_SEND)
    start = time.perf_counter()
    send.click()
    caption = _poll(page, lambda: _caption(page, head), "the chat turn's compute caption")
    results["chat_turn_click_to_result_s"] = round(time.perf_counter() - start, 2)
    compute_ms, e2e_ms = _numbers(str(caption)[len(head):])[:2]
    results["chat_turn_compute_s"] = round(compute_ms / 1000, 3)
    results["chat_turn_e2e_s"] = round(e2e_ms / 1000, 3)


def run(results: dict) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.browser_util import CHROMIUM, get_browser, get_server, wait_idle

    if not Path(CHROMIUM).exists():
        print(f"[bench] bench_workshop: {CHROMIUM} not found; the workshop keys are not measured")
        return
    server, browser = get_server(), get_browser()
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    page.set_default_timeout(600_000)
    try:
        page.goto(server.url, wait_until="domcontentloaded")  # the Overview: loads the model (warm-up)
        page.wait_for_selector('[data-testid="stApp"]')
        wait_idle(page)
        page.locator(CHART).first.wait_for(state="visible")
        _room_send(page, server.url, results)
        _sc_measure(page, server.url, results)
        _chat_turn(page, server.url, results)
    finally:
        page.close()
