"""Message catalogs: ``locale/<lang>/LC_MESSAGES/kvviz.po`` read with Babel, once per process.

msgids are the English strings of kvviz_app/text (and of the library's data the app shows); an empty or missing msgstr falls back to English (the
missing-translation test keeps that from shipping).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvviz.util.plural import Plural
from kvviz_app.shell.i18n.numbers import LocaleStr, locale_format

LOCALE_DIR = Path(__file__).resolve().parents[3] / "locale"
DOMAIN = "kvviz"


def po_path(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


@lru_cache(maxsize=8)
def load_catalog(lang: str) -> dict[Any, Any]:
    """{msgid: msgstr} and {(singular, plural): (forms...)} for ``lang``; untranslated entries left out."""
    path = po_path(lang)
    if not path.exists():
        return {}
    from babel.messages.pofile import read_po

    with path.open("rb") as fh:
        catalog = read_po(fh, locale=lang, domain=DOMAIN)
    out: dict[Any, Any] = {}
    for msg in catalog:
        if not msg.id or msg.fuzzy:
            continue
        if isinstance(msg.id, (tuple, list)):
            forms = tuple(msg.string or ())
            if forms and all(forms):
                out[tuple(msg.id[:2])] = forms
        elif msg.string:
            out[msg.id] = msg.string
    return out


def gettext(message: str, lang: str) -> str:
    """``message`` in ``lang`` (English when ``lang`` is English or the entry is missing)."""
    if lang == "en":
        return message
    return load_catalog(lang).get(message, message)


def tr(message: str) -> str:
    """``message`` (an English catalog msgid, e.g. a scenario title from assets/) in the current language."""
    from kvviz_app.shell.i18n.lang import current_lang

    return translate(message, current_lang())


def ngettext(singular: str, plural: str, n: float, lang: str) -> str:
    """The form of ``singular``/``plural`` for the count ``n`` in ``lang``."""
    return translate(Plural(singular, plural), lang).form(n)


@dataclass(frozen=True)
class LocalePlural(Plural):
    """A translated ``Plural``: its forms are the catalog's and ``format`` writes numbers the language's way."""

    def format(self, **kwargs: object) -> str:
        return locale_format(self.form(kwargs[self.count]), self.lang, **kwargs)  # type: ignore[arg-type]


def translate(value: Any, lang: str) -> Any:
    """A text-module value in ``lang``: str, Plural, and recursively tuple/list/dict values (not keys)."""
    if lang == "en":
        return value
    if isinstance(value, str):
        return LocaleStr(gettext(value, lang), lang)
    if isinstance(value, Plural):
        forms = load_catalog(lang).get((value.singular, value.plural))
        return LocalePlural(value.singular, value.plural, value.count, lang, forms or ())
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(translate(v, lang) for v in value)
    if isinstance(value, list):
        return [translate(v, lang) for v in value]
    if isinstance(value, dict):
        return {k: translate(v, lang) for k, v in value.items()}
    return value
