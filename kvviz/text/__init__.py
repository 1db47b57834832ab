"""Every user-facing string of the app, one module per page, so a translation can follow.

Pages import their strings from here and never hard-code UI text. The modules hold English; each one
is loaded as a ``TranslatedModule``, so ``T.NAME`` returns the value in the *calling session's*
language (kvviz.i18n.current_lang): str, Plural, and tuple/list/dict values go through the catalog
(locale/<lang>/LC_MESSAGES/kvviz.po) on every read. ``vars(module)`` still holds the English source.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

from kvviz.i18n.catalog import translate
from kvviz.i18n.lang import current_lang

#: "module.NAME" of values that are data, not UI text (prompts fed to the model, file names, ...):
#: never translated, never in the catalog.
UNTRANSLATED: set[str] = {
    "common.APP_TITLE",
    "common.MODEL_PROBE_TEXT",
    "glossary.ENGINE_NAMES",
    "engine.EVENT_BADGE_COLOUR",
    # Shared-room presets and the collision demo's prompts: the same text in every language, so sessions
    # in different languages still share blocks, and the demo's answer stays the one the model gives.
    "security.PRESETS",
    # The batching burst: prompts fed to the model, shared with the room's presets (same blocks).
    "batching.DEMO_PROMPT",
    "batching.DEMO_QUESTIONS",
    "batching.DEMO_FRESH",
    # The server log's presenter-key banner: one terminal for the whole process, not a session's language.
    "security.PRESENTER_KEY_LOG",
    "security.PRESENTER_KEY_LOG_ENV",
    # Documentation links: page names and URLs, the same in every language.
    "sessions.SOURCE_ITEM",
    "sessions.SOURCE_NAMES",
}


#: "module.NAME" of dicts whose *keys* are UI text (shown through ``kvviz.i18n.tr``); they are extracted too.
KEYS_ARE_TEXT: set[str] = {
    "security.PRESETS",
}


class TranslatedModule(types.ModuleType):
    """A kvviz.text module whose public values read in the current session's language."""

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if name.startswith("_") or isinstance(value, (types.ModuleType, type)):
            return value
        lang = current_lang()
        if lang == "en":
            return value
        module_name = super().__getattribute__("__name__")
        if isinstance(value, types.FunctionType):
            # A helper that composes text (e.g. a LaTeX formula) reads the module's constants translated.
            if value.__module__ != module_name:
                return value
            return _with_globals(value, _translated_globals(super().__getattribute__("__dict__"), lang))
        if f"{module_name.rsplit('.', 1)[-1]}.{name}" in UNTRANSLATED:
            return value
        return translate(value, lang)


_GLOBALS_CACHE: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}


def _translated_globals(namespace: dict[str, Any], lang: str) -> dict[str, Any]:
    """The module's namespace in ``lang``, built once per module and language (the catalog is fixed)."""
    key = (namespace["__name__"], lang)
    cached = _GLOBALS_CACHE.get(key)
    if cached is not None and cached[0] == len(namespace):
        return cached[1]
    short = namespace["__name__"].rsplit(".", 1)[-1]
    out = {
        k: v if k.startswith("_") or isinstance(v, (types.ModuleType, type, types.FunctionType))
        or f"{short}.{k}" in UNTRANSLATED else translate(v, lang)
        for k, v in namespace.items()
    }
    _GLOBALS_CACHE[key] = (len(namespace), out)
    return out


def _with_globals(fn: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    out = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__doc__ = fn.__doc__
    return out


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._inner.exec_module(module)
        module.__class__ = TranslatedModule

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for inspect and tracebacks
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Loads every ``kvviz.text.<name>`` module as a TranslatedModule."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(__name__ + ".") or fullname.count(".") != 2:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
