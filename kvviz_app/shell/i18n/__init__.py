"""Translations: English source strings (kvviz_app/text), Russian catalog (locale/ru/LC_MESSAGES/kvviz.po).

The language is per session, never per process: ``current_lang()`` reads the Streamlit session of the
calling script thread (or a ``use_lang`` override, for tests), and ``texts(name)`` reads a text module
in it (``texts(name, lang)`` in a given language).
"""

from __future__ import annotations

from kvviz.util.plural import Plural
from kvviz_app.shell.i18n.catalog import LocalePlural, gettext, ngettext, tr, translate
from kvviz_app.shell.i18n.lang import DEFAULT_LANG, LANG_NAMES, LANGS, current_lang, normalize_lang, use_lang
from kvviz_app.shell.i18n.numbers import LocaleStr, format_number, localize
from kvviz_app.shell.i18n.texts import Texts, texts

__all__ = [
    "DEFAULT_LANG", "LANGS", "LANG_NAMES", "LocalePlural", "LocaleStr", "Plural", "Texts", "current_lang",
    "format_number", "gettext", "localize", "ngettext", "normalize_lang", "texts", "tr", "translate", "use_lang",
]
