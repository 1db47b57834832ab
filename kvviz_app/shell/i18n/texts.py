"""Explicit text lookup: ``T = texts("edit")`` is kvviz_app/edit/text.py read in the calling session's
language, ``texts("edit", "ru")`` in Russian. No import hook: the text modules are plain English modules.

Invariant: a view returns the catalog's value of every public constant (str, Plural, and tuples, lists
and dict values of them) and calls a helper defined in its module with itself as the first argument.
"""

from __future__ import annotations

import importlib
import types
from functools import lru_cache, partial
from typing import Any

from kvviz_app.shell.i18n.catalog import translate
from kvviz_app.shell.i18n.lang import current_lang, normalize_lang


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
        return f"texts({self.module.__name__!r}, {self.lang!r})"


#: Every text module by its short name: a page's words (``kvviz_app/<page>/text*.py``) and the shell's.
TEXT_MODULES: dict[str, str] = {
    "common": "kvviz_app.shell.text",
    "charts": "kvviz_app.shell.text_charts",
    "concepts": "kvviz_app.shell.text_concepts",
    "jsonio": "kvviz_app.shell.text_jsonio",
    "share": "kvviz_app.shell.text_share",
    "batching": "kvviz_app.batching.text",
    "block_table": "kvviz_app.block_table.text",
    "calculator": "kvviz_app.calculator.text",
    "calculator_config": "kvviz_app.calculator.text_config",
    "collisions": "kvviz_app.collisions.text",
    "edit": "kvviz_app.edit.text",
    "engine_view": "kvviz_app.engine_view.text",
    "glossary": "kvviz_app.glossary.text",
    "home": "kvviz_app.home.text",
    "live": "kvviz_app.live.text",
    "fleet": "kvviz_app.live.text_fleet",
    "paging": "kvviz_app.paging.text",
    "radix": "kvviz_app.radix.text",
    "security": "kvviz_app.security.text",
    "sessions": "kvviz_app.sessions.text",
    "workload": "kvviz_app.workload.text",
}


@lru_cache(maxsize=128)
def texts(name: str, lang: str | None = None) -> Texts:
    """The words of text module ``name`` (``TEXT_MODULES``) in ``lang`` (None: the calling session's language)."""
    module = importlib.import_module(TEXT_MODULES[name])
    return Texts(module, (normalize_lang(lang) or "en") if lang else None)
