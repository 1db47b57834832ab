"""Numbers and byte sizes per language: English ``1,234.5 KiB``; Russian ``1 234,5 КиБ``.

Russian groups thousands with a narrow no-break space (U+202F, the thin space that never wraps) and
writes a decimal comma; byte units are binary in both languages (КиБ/МиБ/ГиБ in Russian).
"""

from __future__ import annotations

import re
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


#: Plotly's ``layout.separators`` (decimal mark, then thousands separator) per language.
PLOTLY_SEPARATORS = {"en": ".,", "ru": "," + THIN_SPACE}
_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])\d+\.\d+(?![\w.])")
_UNIT = re.compile(r"(?<=[\d\s])(B|KiB|MiB|GiB|TiB)(?![\w])")
_UNIT_RU = dict(zip(BYTE_UNITS["en"], BYTE_UNITS["ru"], strict=True))


def localize(text: str, lang: str) -> str:
    """An English-formatted value (``1,234.5 KiB``, ``≈48.83 GiB``, ``29.0%``) rewritten for ``lang``:
    numbers get the language's separators, byte units its names. Other text is left alone."""
    if lang != "ru":
        return text
    text = _NUMBER.sub(lambda m: localize_digits(m.group(0), lang), text)
    return _UNIT.sub(lambda m: _UNIT_RU[m.group(1)], text)


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
