"""Block-chain pictures keep their labels apart in Russian at 1024 px: the room's "why the salt isolates you"
chain with 8 blocks (hash labels ran into each other) and the landing page's two chains (A's labels ran
under B's squares)."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, open_page, screenshot, wait_idle

from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser

# Boxes of every non-empty text of a chart (annotations, scatter text) and of its scatter markers and shapes.
BOXES_JS = r"""
(chart) => {
  const box = (el) => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const texts = [...chart.querySelectorAll('.annotation-text, .textpoint text')]
    .filter((e) => e.textContent.trim()).map((e) => ({t: e.textContent.trim(), b: box(e)}));
  const marks = [...chart.querySelectorAll('.scatterlayer .point')].map((e) => ({t: 'marker', b: box(e)}));
  return {texts, marks};
}
"""


def _overlaps(items: list[dict], others: list[dict] | None = None, slack: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of boxes that overlap by more than ``slack`` px each way (within ``items``, or items x others)."""
    def hit(a: list[float], b: list[float]) -> bool:
        return (min(a[2], b[2]) - max(a[0], b[0]) > slack) and (min(a[3], b[3]) - max(a[1], b[1]) > slack)

    pairs = [(x, y) for i, x in enumerate(items) for y in (items[i + 1:] if others is None else others)]
    return [(x["t"], y["t"]) for x, y in pairs if hit(x["b"], y["b"])]


def test_the_rooms_salt_chain_of_a_long_prompt_keeps_its_labels_apart(app_server, browser):
    T = texts("security", "ru")
    page = open_page(browser, app_server, "room?lang=ru", wait_text=T.SEND, width=1024, height=900)
    try:
        page.locator("textarea").first.fill("кэш " * 200)  # more than 8 full blocks of 16 tokens
        page.get_by_role("button", name=T.SEND).click()
        wait_idle(page)
        chart = page.locator('[data-testid="stPlotlyChart"]').filter(has=page.locator(".annotation-text",
                                                                                   has_text="NONE_HASH")).first
        chart.locator(".annotation-text").first.wait_for()
        b = chart.evaluate(BOXES_JS)
        shown = texts("security", "ru").FIG_CHAIN_SHOWN.split("{")[0]  # "блоки 0–": the figure says what it leaves out
        assert any(t["t"].startswith(shown) for t in b["texts"]), b["texts"]
        assert len(b["texts"]) >= 2 * 6 * 2, b["texts"]  # two rows of 6 blocks: a hash and a name each
        assert not _overlaps(b["texts"]), _overlaps(b["texts"])
        assert_no_errors(page)
        chart.screenshot(path=str(screenshot(page, "room_salt_chain_ru_1024").parent / "room_salt_chain_ru.png"))
    finally:
        page.close()


def test_the_landing_chains_keep_as_labels_off_bs_squares(app_server, browser):
    T = texts("home", "ru")
    page = open_page(browser, app_server, "?lang=ru", wait_text=T.PICTURE_HEADER, width=1024, height=900)
    try:
        chart = page.locator('[data-testid="stPlotlyChart"]').filter(has=page.locator(".textpoint")).first
        chart.locator(".textpoint").first.wait_for()
        wait_idle(page)
        b = chart.evaluate(BOXES_JS)
        assert b["texts"] and b["marks"], b
        assert not _overlaps(b["texts"]), _overlaps(b["texts"])
        assert not _overlaps(b["texts"], b["marks"]), _overlaps(b["texts"], b["marks"])
        chart.screenshot(path=str(screenshot(page, "home_chain_ru_1024").parent / "home_chain_ru.png"))
    finally:
        page.close()
