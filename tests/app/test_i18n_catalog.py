"""The Russian catalog against the English source strings, plurals, and locale number formatting."""

from __future__ import annotations

import shutil
import string
from pathlib import Path

import pytest

from kvviz.util.units import format_bytes
from kvviz_app.shell.i18n import (
    Plural,
    format_number,
    gettext,
    localize,
    ngettext,
    normalize_lang,
    texts,
    use_lang,
)
from kvviz_app.shell.i18n import catalog as catalog_mod
from kvviz_app.shell.i18n import extract as extract_mod
from kvviz_app.shell.i18n.catalog import load_catalog
from kvviz_app.shell.i18n.extract import extract, missing, unused
from kvviz_app.shell.i18n.numbers import THIN_SPACE

C = texts("common")
CONCEPTS = texts("concepts")


def test_every_ui_string_has_a_russian_translation():
    untranslated = missing("ru")
    assert not untranslated, (
        f"{len(untranslated)} UI string(s) without Russian (run `make i18n`, then fill the msgstr in "
        f"locale/ru/LC_MESSAGES/kvviz.po): {untranslated[:20]}"
    )


def test_no_catalog_entry_is_unused():
    stale = unused("ru")
    assert not stale, f"catalog entries no UI string uses (run `make i18n` to drop them): {stale[:20]}"


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def test_translations_keep_every_placeholder():
    catalog = load_catalog("ru")
    bad = []
    for msgid in extract():
        if isinstance(msgid, tuple):
            bad += [(msgid, form) for form in catalog[msgid] if _fields(form) != _fields(msgid[1])]
        elif _fields(catalog[msgid]) != _fields(msgid):
            bad.append((msgid, catalog[msgid]))
    assert not bad, bad[:5]


def test_the_catalog_is_read_per_language_not_per_process():
    with use_lang("ru"):
        ru_title = dict((p, t) for p, t, _ in C.PAGES)["pages/paging.py"]
    en_title = dict((p, t) for p, t, _ in C.PAGES)["pages/paging.py"]
    assert en_title == "Paged vs contiguous memory"
    assert ru_title == "Страничная и непрерывная память"
    assert vars(C.module)["PAGES"][3][1] == en_title  # the module itself keeps the English source


def test_data_that_is_not_ui_text_is_never_translated():
    from kvviz.model.tokens import MODEL_PROBE_TEXT

    assert not hasattr(C.module, "MODEL_PROBE_TEXT") and MODEL_PROBE_TEXT not in extract()
    with use_lang("ru"):
        assert C.PAGES[0][0] == "pages/home.py" and C.PAGES[0][2] == ":material/home:"


@pytest.mark.parametrize(("n", "form"), [
    (1, "блок"), (2, "блока"), (4, "блока"), (5, "блоков"), (11, "блоков"), (12, "блоков"), (14, "блоков"),
    (21, "блок"), (22, "блока"), (25, "блоков"), (101, "блок"), (111, "блоков"), (0, "блоков"),
])
def test_russian_has_three_plural_forms(n, form):
    text = CONCEPTS.EVENT_HIT
    with use_lang("ru"):
        out = CONCEPTS.EVENT_HIT.format(count=n, tokens=16 * n)
    assert out.startswith(f"{n} {form} ")
    assert text.format(count=n, tokens=1).startswith(f"{n} cached block{'' if n == 1 else 's'} ")


def test_ngettext_falls_back_to_english_forms():
    assert ngettext("{n} apple", "{n} apples", 1, "ru") == "{n} apple"
    assert ngettext("{n} apple", "{n} apples", 5, "ru") == "{n} apples"
    assert Plural("{n} apple", "{n} apples").format(n=2) == "2 apples"


def test_numbers_and_bytes_per_locale():
    assert format_number(1234567.5, "en", 1) == "1,234,567.5"
    assert format_number(1234567.5, "ru", 1) == f"1{THIN_SPACE}234{THIN_SPACE}567,5"
    assert format_number(49152, "ru") == f"49{THIN_SPACE}152"
    # bytes: the one formatter (kvviz.util.units.format_bytes), localised for display
    assert format_bytes(900) == "900 B" and localize(format_bytes(900), "ru") == "900 Б"
    assert localize(format_bytes(46080), "en") == "45 KiB" and localize(format_bytes(46080), "ru") == "45 КиБ"
    assert localize(format_bytes(1.5 * 2**20), "ru") == "1,5 МиБ"
    assert localize(format_bytes(48.83 * 2**30), "ru") == "≈48,83 ГиБ"


def test_translated_format_strings_write_numbers_the_russian_way():
    with use_lang("ru"):
        text = C.TRUNCATION_NOTICE.format(total=5000, kept=2048, limit=2048)
    assert f"2{THIN_SPACE}048" in text and "2,048" not in text
    assert C.TRUNCATION_NOTICE.format(total=5000, kept=2048, limit=2048).count("2,048") == 2


@pytest.mark.parametrize(("raw", "lang"), [
    ("ru", "ru"), ("ru-RU", "ru"), ("RU_ru", "ru"), ("en-GB", "en"), ("en", "en"), ("de", None), ("", None),
    (None, None), ("ru" * 100, None), ("<script>", None), ("../../etc/passwd", None),
])
def test_language_codes_are_validated(raw, lang):
    assert normalize_lang(raw) == lang


def test_gettext_of_an_unknown_message_is_the_message():
    assert gettext("no such message", "ru") == "no such message"
    assert gettext("Glossary", "en") == "Glossary" and gettext("Glossary", "ru") == "Глоссарий"


def test_update_keeps_translations_and_adds_new_strings(tmp_path, monkeypatch):
    locale = tmp_path / "locale"
    shutil.copytree(catalog_mod.LOCALE_DIR, locale)
    monkeypatch.setattr(catalog_mod, "LOCALE_DIR", locale)
    monkeypatch.setattr(extract_mod, "LOCALE_DIR", locale)
    monkeypatch.setattr(C.module, "I18N_TEST_NEW_STRING", "A brand-new sentence.", raising=False)
    load_catalog.cache_clear()
    try:
        extract_mod.update()
        assert missing("ru") == ["A brand-new sentence."]  # new: listed as untranslated
        po = (locale / "ru" / "LC_MESSAGES" / "kvviz.po").read_text(encoding="utf-8")
        assert 'msgid "A brand-new sentence."' in po and "Глоссарий" in po
        assert Path(locale / "kvviz.pot").exists()
        assert extract_mod.main(["--check"]) == 1
    finally:
        monkeypatch.undo()
        load_catalog.cache_clear()


def test_values_formatted_the_english_way_are_localized():
    from kvviz_app.shell.i18n import localize

    assert localize("1,234.5 KiB", "ru") == f"1{THIN_SPACE}234,5 КиБ"
    assert localize("≈48.83 GiB", "ru") == "≈48,83 ГиБ"
    assert localize("29.0% → 96.1%", "ru") == "29,0% → 96,1%"
    assert localize("46,080 B", "ru") == f"46{THIN_SPACE}080 Б"
    assert localize("3 (GQA)", "ru") == "3 (GQA)"
    assert localize("1,234.5 KiB", "en") == "1,234.5 KiB"


def test_data_file_titles_are_in_the_catalog():
    from kvviz_app.shell.i18n import tr

    with use_lang("ru"):
        assert tr("Shared system prompt, 4 users") == "Общий системный промпт, 4 пользователя"
    assert tr("Shared system prompt, 4 users") == "Shared system prompt, 4 users"


def test_text_module_helpers_compose_in_the_session_language():
    from fractions import Fraction

    from kvviz_app.shell.i18n import texts
    K = texts("calculator")
    from kvviz_app.shell.i18n import texts
    S = texts("sessions")

    kw = dict(kv_layers=32, layers=32, kv_heads=32, head_dim=128, bytes_per_value=Fraction(2), dtype="fp16",
              per_token=Fraction(524288), per_token_human="512 KiB")
    assert r"\text{layers}" in K.formula_latex(**kw) and r"524{,}288\ \text{B}" in K.formula_latex(**kw)
    with use_lang("ru"):
        ru = K.formula_latex(**kw)
        assert S.duration(90) == "1,5 мин" and S.duration(7200) == "2,0 ч"
    assert r"\text{слои}" in ru and r"524\,288\ \text{Б}" in ru and "layers" not in ru
    assert S.duration(90) == "1.5 min"


def test_session_segment_labels_are_codes_rendered_per_language():
    from kvviz_app.shell.i18n import texts
    S = texts("sessions")

    codes = ["tools", "system", "user 3", "answer 2", "answer 4 starts", "tool result 5", "file read"]
    assert [S.segment_label(c) for c in codes] == codes  # English: the code reads as the label
    with use_lang("ru"):
        ru = [S.segment_label(c) for c in codes]
    assert ru[2] == "пользователь 3" and ru[4] == "начало ответа 4" and ru[5] == "результат инструмента 5"
    assert not any(c in r for c, r in zip(codes, ru, strict=True))
    assert S.segment_label(None) is None


def test_a_ratio_has_a_decimal_comma_in_russian():
    from kvviz_app.shell.i18n import texts
    T_SEC = texts("security")

    with use_lang("ru"):
        assert T_SEC.M_RATIO_VALUE.format(ratio=0.95) == "0,95×"
    assert T_SEC.M_RATIO_VALUE.format(ratio=0.95) == "0.95×"
