"""The calculator in a real browser: a typed number outside its range reaches the page and is refused in
words, with no result computed from the number the field showed before."""

from __future__ import annotations

import pytest
from browser_util import assert_no_errors, metric_values, open_page, screenshot, wait_for_metrics, wait_idle

from kvviz.analysis.sizes import kv_formula, kvsize
from kvviz.util.units import format_bytes
from kvviz_app.shell.i18n import localize, texts, use_lang

T = texts("calculator")

pytestmark = pytest.mark.browser


def _in(lang: str, name: str) -> str:
    with use_lang(lang):
        return getattr(T, name)


_NO_METRIC_JS = """(label) => ![...document.querySelectorAll('[data-testid="stMetricLabel"]')]
  .some((m) => m.innerText.trim() === label)"""


def _alerts(page) -> str:
    return " ".join(page.locator('[data-testid="stAlertContentError"]').all_inner_texts())


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_a_typed_layer_count_out_of_range_is_refused_in_words(app_server, browser, lang):
    page = open_page(browser, app_server, f"calculator?mode=typed&lang={lang}", width=1024, height=900,
                     wait_text=_in(lang, "TYPED_LAYERS"))
    per_token = _in(lang, "M_PER_TOKEN")
    limits = [localize(f"{n:,}", lang) for n in (1, kvsize.MAX_LAYERS)]
    try:
        field = page.get_by_label(_in(lang, "TYPED_LAYERS"), exact=True)
        for typed, shown in (("0", "0"), ("-5", "-5"), ("1000000000000", localize("1,000,000,000,000", lang))):
            field.fill(typed)
            field.press("Enter")
            page.locator('[data-testid="stAlertContentError"]', has_text=shown).first.wait_for()
            # the results of the last good number leave the page (they stayed, from 32 layers, before)
            page.wait_for_function(_NO_METRIC_JS, arg=per_token)
            wait_idle(page)
            text = _alerts(page)
            assert _in(lang, "TYPED_LAYERS") in text and all(n in text for n in limits), text
            assert per_token not in metric_values(page), f"a result for layers={typed} from a stale value"
        screenshot(page, f"calculator-refused-{lang}")
        field.fill("48")
        field.press("Enter")
        shape = kvsize.shape_from_counts("x", 48, 8, 128, heads=32)
        expected = localize(format_bytes(kv_formula.bytes_per_token(shape, list(kvsize.DTYPES)[1])), lang)
        values = wait_for_metrics(page, lambda v: v.get(per_token) == expected)
        assert values.get(per_token) == expected, values
        assert_no_errors(page)
    finally:
        page.close()
