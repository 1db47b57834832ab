"""Explicit text lookup: ``T = texts("edit")`` is kvviz_app/text/edit.py read in the calling session's
language, ``texts("edit", "ru")`` in Russian. No import hook: the text modules are plain English modules.

Invariant: a view returns the catalog's value of every public constant (str, Plural, and tuples, lists
and dict values of them) and calls a helper defined in its module with itself as the first argument.
"""

from __future__ import annotations

import importlib
import types
from functools import lru_cache, partial
from typing import Any

from kvviz_app.i18n.catalog import translate
from kvviz_app.i18n.lang import current_lang, normalize_lang


class Texts:
    """One text module in one language (``lang``; None: the calling session's, read on every lookup)."""

    __slots__ = ("lang", "module")

    def __init__(self, module: types.ModuleType, lang: str | None = None) -> None:
        self.module = module
        self.lang = lang

    @property
    def language(self) -> str:
        """The language this view reads now."""
        return self.lang or current_lang()

    def __getattr__(self, name: str) -> Any:
        if name in Texts.__slots__:  # not set yet (copy, pickle)
            raise AttributeError(name)
        value = getattr(self.module, name)
        if name.startswith("_") or isinstance(value, (types.ModuleType, type)):
            return value
        if isinstance(value, types.FunctionType):
            return partial(value, self) if value.__module__ == self.module.__name__ else value
        return translate(value, self.language)

    def __repr__(self) -> str:
        return f"texts({self.module.__name__.rsplit('.', 1)[-1]!r}, {self.lang!r})"


@lru_cache(maxsize=128)
def texts(name: str, lang: str | None = None) -> Texts:
    """The words of ``kvviz_app/text/<name>.py`` in ``lang`` (None: the calling session's language)."""
    module = importlib.import_module(f"kvviz_app.text.{name}")
    return Texts(module, (normalize_lang(lang) or "en") if lang else None)
