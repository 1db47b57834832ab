"""The Live engine page's fleet view in Chromium: three test publishers watched at once, a prompt routed,
and at 1024 px no table scrolls sideways and no chart text is cut (the score table once did), in English
and Russian."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, metric_values, open_page, wait_idle, wait_settled
from live_testpub import WirePublisher, free_port
from test_layout_1024 import check_layout, tall_screenshot

from kvviz.mirror.hashing import hash_block_chain, init_none_hash
from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser


def _publishers() -> tuple[dict[str, int], dict[str, WirePublisher], list[int]]:
    """Ports and publishers a, b and c, holding the prompt's first 1, 3 and 2 blocks; the prompt."""
    ports = {n: free_port(2) for n in "abc"}
    pubs = {n: WirePublisher(p, p + 1, rank=0) for n, p in ports.items()}
    tokens = list(range(900, 964))
    d = hash_block_chain(tokens, 16, "sha256", init_none_hash("sha256", None))
    for name, blocks in (("a", 1), ("b", 3), ("c", 2)):
        pub = pubs[name]
        pub.publish([pub.s["BlockStored"](d[:blocks], None, tokens[:16 * blocks], 16, None, "GPU", None)])
    # two more prefixes, as a demo fleet has (system prompts): shared by a and c, and b's own; the prefix
    # chart then has a legend of three entries beside the router's pick mark
    other = list(range(2000, 2032))
    d2 = hash_block_chain(other, 16, "sha256", init_none_hash("sha256", None))
    own = list(range(3000, 3016))
    d3 = hash_block_chain(own, 16, "sha256", init_none_hash("sha256", None))
    for name, hashes, toks in (("a", d2, other), ("c", d2, other), ("b", d3, own)):
        pub = pubs[name]
        pub.publish([pub.s["BlockStored"](hashes, None, toks, 16, None, "GPU", None)])
    # b's own prefix also in host memory (a host tier, medium "CPU"): the health table's media columns and
    # the lines under the prefix columns must fit too; the prompt's routing does not change
    pubs["b"].publish([pubs["b"].s["BlockStored"](d3, None, own, 16, None, "CPU", None)])
    return ports, pubs, tokens


def _type(page, label: str, text: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Control+Enter")  # a text area sends its value on Ctrl+Enter
    wait_idle(page)


@pytest.mark.parametrize("lang,width", [("en", 1024), ("en", 1400), ("ru", 1024)])
def test_fleet_view_routes_and_fits(app_server, browser, lang, width):
    T, L = texts("fleet", lang), texts("live", lang)
    ports, pubs, tokens = _publishers()
    page = open_page(browser, app_server, f"live?lang={lang}", wait_text=L.TITLE, width=width, height=900)
    try:
        page.get_by_text(T.MODE_FLEET, exact=True).first.click()
        wait_idle(page)
        _type(page, T.REPLICAS, "\n".join(f"{n}=tcp://127.0.0.1:{p} tcp://127.0.0.1:{p + 1}"
                                          for n, p in ports.items()))
        page.get_by_role("button", name=T.FLEET_CONNECT).click()
        page.locator('[class*="st-key-wordwrap_fleet_health"] table').first.wait_for()
        wait_idle(page)
        _type(page, T.PROMPT, ",".join(map(str, tokens)))
        page.get_by_text(T.TOKENIZERS["ids"], exact=True).first.click()
        wait_idle(page)
        page.get_by_role("button", name=T.ROUTE_CHECK).click()
        page.wait_for_function(
            "(label) => [...document.querySelectorAll('[data-testid=\"stMetric\"]')].some((m) =>"
            " m.innerText.startsWith(label) && m.innerText.trim().endsWith('b'))", arg=T.PICKS["longest_prefix"])
        wait_idle(page)
        wait_settled(page)
        assert metric_values(page)[T.PICKS["longest_prefix"]] == "b"
        assert_no_errors(page)
        problems = check_layout(page)
        assert problems == [], problems
        tall_screenshot(page, f"fleet-{lang}-{width}", width)
    finally:
        page.close()
        for p in pubs.values():
            p.close()
