"""AppTests of the language: the sidebar switch, ?lang=, hostile values, and two sessions in two languages
at once on one server process (the language is session state, never a process-wide choice)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from kvviz_app.shell.i18n import texts, use_lang

E = texts("block_table")
G = texts("glossary")
P = texts("paging")

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "pages"
SWITCH = """
import streamlit as st
from kvviz_app.shell import ui
ui.render_language_switch()
from kvviz_app.shell.i18n import texts
T = texts("glossary")
st.title(T.TITLE)
"""


def _ru(value):
    with use_lang("ru"):
        return value()


def run_in(app: AppTest, lang: str) -> AppTest:
    """Run ``app``; AppTest calls widgets' format_func again in the test thread (no session there), so
    that thread reads ``lang`` too. The script thread reads the session's own language."""
    with use_lang(lang):
        return app.run()


def test_the_switch_changes_the_language_and_the_url():
    at = AppTest.from_string(SWITCH, default_timeout=60).run()
    assert not at.exception
    assert at.title[0].value == "Glossary"  # AppTest has no browser locale: English
    switch = at.sidebar.radio(key="kvviz_lang_switch")
    assert switch.options == ["English", "Русский"] and switch.value == "en"
    switch.set_value("ru").run()
    assert at.title[0].value == "Глоссарий"
    assert at.query_params["lang"] == "ru"
    assert at.sidebar.radio(key="kvviz_lang_switch").label == "Язык"
    at.sidebar.radio(key="kvviz_lang_switch").set_value("en").run()
    assert at.title[0].value == "Glossary" and at.query_params["lang"] == "en"


def test_lang_query_parameter_selects_russian():
    at = AppTest.from_string(SWITCH, default_timeout=60)
    at.query_params["lang"] = "ru"
    at.run()
    assert not at.exception
    assert at.title[0].value == "Глоссарий"
    assert at.sidebar.radio(key="kvviz_lang_switch").value == "ru"


def test_hostile_lang_values_fall_back_to_english():
    for bad in ["xx", "<script>alert(1)</script>", "ru" * 500, "../../etc", ""]:
        at = AppTest.from_string(SWITCH, default_timeout=60)
        at.query_params["lang"] = bad
        at.run()
        assert not at.exception, bad
        assert at.title[0].value == "Glossary"
        assert at.query_params["lang"] == "en"


def test_two_sessions_in_two_languages_at_once():
    ru = AppTest.from_file(str(PAGES / "paging.py"), default_timeout=120)
    ru.query_params["lang"] = "ru"
    en = AppTest.from_file(str(PAGES / "paging.py"), default_timeout=120)
    run_in(ru, "ru")
    run_in(en, "en")
    run_in(ru, "ru")  # again after the English session ran: nothing process-wide switched
    assert not ru.exception and not en.exception
    assert ru.title[0].value == _ru(lambda: P.TITLE) != en.title[0].value == P.TITLE
    ru_metrics = {m.label: m.value for m in ru.metric}
    en_metrics = {m.label: m.value for m in en.metric}
    assert en_metrics["Utilisation"] == "27.5% → 94.6%"  # one definition, the chart's
    assert ru_metrics["Заполнение"] == "27,5% → 94,6%"  # the same numbers, written the Russian way
    assert "Reservation" not in " ".join(r.label for r in ru.radio)


def test_block_table_events_follow_each_sessions_language():
    # The scenario replay is cached per process; its event sentences must still be per language.
    en = AppTest.from_file(str(PAGES / "block_table.py"), default_timeout=120).run()
    ru = AppTest.from_file(str(PAGES / "block_table.py"), default_timeout=120)
    ru.query_params["lang"] = "ru"
    run_in(ru, "ru")
    for app, lang in ((en, "en"), (ru, "ru"), (en, "en"), (ru, "ru")):
        app.button(key="bt_fwd").click()
        run_in(app, lang)
        assert not app.exception
    ru_text = "\n".join(m.value for m in ru.markdown)
    en_text = "\n".join(m.value for m in en.markdown)
    assert "Popped" in en_text and "Popped" not in ru_text
    assert "Из головы очереди свободных блоков" in ru_text
    assert any(h.value.startswith("Шаг 2 из") for h in ru.subheader)
    assert _ru(lambda: E.TITLE) == ru.title[0].value


def test_widget_values_are_codes_with_translated_labels():
    at = AppTest.from_file(str(PAGES / "paging.py"), default_timeout=120)
    at.query_params["lang"] = "ru"
    run_in(at, "ru")
    radio = at.radio(key="pg_reservation")
    assert radio.value == "max"  # the code, whatever the language
    assert "максимальная длина" in radio.options
    at.radio(key="pg_reservation").set_value("oracle")
    run_in(at, "ru")
    assert not at.exception
    assert at.radio(key="pg_reservation").value == "oracle"


def test_glossary_lists_every_term_in_both_languages():
    at = AppTest.from_file(str(PAGES / "glossary.py"), default_timeout=60).run()
    assert not at.exception
    table = next(m.value for m in at.markdown if "| block |" in m.value)
    assert "| block | блок | `KVCacheBlock` |" in table
    assert "| hash chain | хэш-цепочка | `hash_block_tokens` |" in table
    assert "| cache salt | соль кэша | `cache_salt` |" in table
    assert table.count("\n| ") == len(vars(G.module)["TERMS"])
    # The fidelity page is linked and shown under the glossary.
    assert any(c.value == G.FIDELITY_LINK for c in at.caption)
    assert any(m.value.startswith("# Fidelity") for m in at.markdown)
    at.text_input(key="glossary_filter").input("вытесн").run()
    rows = [line for line in next(m.value for m in at.markdown if "|" in m.value).splitlines()[2:]]
    assert rows and all("вытесн" in r.casefold() for r in rows)
    at.text_input(key="glossary_filter").input("zzzz").run()
    assert at.info and "zzzz" in at.info[0].value
