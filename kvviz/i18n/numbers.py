"""Numbers and byte sizes per language: English ``1,234.5 KiB``; Russian ``1 234,5 КиБ``.

Russian groups thousands with a narrow no-break space (U+202F, the thin space that never wraps) and
writes a decimal comma; byte units are binary in both languages (КиБ/МиБ/ГиБ in Russian).
"""

from __future__ import annotations

import string
from typing import Any

THIN_SPACE = "\u202f"
_SWAP_RU = str.maketrans({",": THIN_SPACE, ".": ","})
BYTE_UNITS = {
    "en": ("B", "KiB", "MiB", "GiB", "TiB"),
    "ru": ("Б", "КиБ", "МиБ", "ГиБ", "ТиБ"),
}


def localize_digits(text: str, lang: str) -> str:
    """Rewrite a number Python formatted (``1,234.5``) in ``lang``'s separators."""
    return text.translate(_SWAP_RU) if lang == "ru" else text


def format_number(value: float, lang: str, decimals: int | None = None, group: bool = True) -> str:
    """``value`` with thousands grouped and ``decimals`` places (None: an int as is, a float with up to 2)."""
    sep = "," if group else ""
    if decimals is None:
        if isinstance(value, int) or float(value).is_integer():
            text = f"{int(value):{sep}d}"
        else:
            text = f"{value:{sep}.2f}".rstrip("0").rstrip(".")
    else:
        text = f"{value:{sep}.{decimals}f}"
    return localize_digits(text, lang)


def format_bytes(value: float, lang: str) -> str:
    """Binary units with one decimal where useful: ``900 B``, ``45 KiB``, ``1.5 MiB`` (``1,5 МиБ``)."""
    units = BYTE_UNITS.get(lang, BYTE_UNITS["en"])
    size = float(value)
    for i, unit in enumerate(units):
        if abs(size) < 1024 or i == len(units) - 1:
            if i == 0:
                return f"{format_number(round(size), lang)} {unit}"
            text = format_number(size, lang, decimals=1)
            zero = ",0" if lang == "ru" else ".0"
            return f"{text.removesuffix(zero)} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


class _LocaleFormatter(string.Formatter):
    """str.format whose numeric fields follow the language's separators."""

    def __init__(self, lang: str) -> None:
        self.lang = lang

    def format_field(self, value: Any, format_spec: str) -> str:
        text = super().format_field(value, format_spec)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return localize_digits(text, self.lang)
        return text


def locale_format(template: str, lang: str, *args: Any, **kwargs: Any) -> str:
    """``template.format(...)`` with numbers written the ``lang`` way."""
    if lang == "en":
        return str.format(template, *args, **kwargs)
    return _LocaleFormatter(lang).vformat(template, args, kwargs)


class LocaleStr(str):
    """A translated string whose ``.format`` writes numbers in its language (``{n:,}`` -> ``1 024``)."""

    lang: str = "en"

    def __new__(cls, text: str = "", lang: str = "en") -> LocaleStr:
        obj = super().__new__(cls, text)
        obj.lang = lang
        return obj

    def __reduce__(self) -> tuple:  # pickled by st.cache_data and copy: keep the language
        return (LocaleStr, (str(self), self.lang))

    def format(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        return locale_format(str(self), self.lang, *args, **kwargs)

    def format_map(self, mapping: Any) -> str:  # type: ignore[override]
        return self.format(**mapping)
