"""Translations: English source strings (kvviz/text), Russian catalog (locale/ru/LC_MESSAGES/kvviz.po).

The language is per session, never per process: ``current_lang()`` reads the Streamlit session of the
calling script thread (or a ``use_lang`` override, for the CLI and tests), and every attribute read from
a ``kvviz.text`` module is translated into it on the fly (see kvviz/text/__init__.py).
"""

from __future__ import annotations

from kvviz.i18n.catalog import gettext, ngettext, tr, translate
from kvviz.i18n.lang import DEFAULT_LANG, LANG_NAMES, LANGS, current_lang, normalize_lang, use_lang
from kvviz.i18n.numbers import LocaleStr, format_number, localize
from kvviz.i18n.plural import Plural

__all__ = [
    "DEFAULT_LANG", "LANGS", "LANG_NAMES", "LocaleStr", "Plural", "current_lang",
    "format_number", "gettext", "localize", "ngettext", "normalize_lang", "tr", "translate", "use_lang",
]
