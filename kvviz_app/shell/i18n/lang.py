"""Which language the current session reads: a ``use_lang`` override, else the Streamlit session's choice.

The session's choice is resolved once (``?lang=`` in the URL, else the browser's language from
``st.context.locale``, else English) and kept in ``st.session_state[SESSION_KEY]``. Outside a running
app (tests, scripts) the language is English unless overridden; Streamlit is imported only when a
session exists.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

LANGS: tuple[str, ...] = ("en", "ru")
DEFAULT_LANG = "en"
#: Each language in its own words (the language switch shows these, never translated).
LANG_NAMES = {"en": "English", "ru": "Русский"}
SESSION_KEY = "kvviz_lang"
QUERY_KEY = "lang"

_override: ContextVar[str | None] = ContextVar("kvviz_lang_override", default=None)


def normalize_lang(code: object) -> str | None:
    """``'ru'``, ``'ru-RU'``, ``'RU_ru'`` -> ``'ru'``; anything that is not a supported language -> None."""
    if not isinstance(code, str) or not code or len(code) > 35:
        return None
    base = code.strip().replace("_", "-").split("-")[0].lower()
    return base if base in LANGS else None


@contextmanager
def use_lang(lang: str) -> Iterator[None]:
    """Within the block, this thread/task reads ``lang`` whatever the session says (CLI, tests)."""
    token = _override.set(normalize_lang(lang) or DEFAULT_LANG)
    try:
        yield
    finally:
        _override.reset(token)


def current_lang() -> str:
    """The language of the calling context: override, else the running Streamlit session, else English."""
    forced = _override.get()
    if forced is not None:
        return forced
    if "streamlit" not in sys.modules:
        return DEFAULT_LANG
    return _session_lang()


def _session_lang() -> str:
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return DEFAULT_LANG
    state = ctx.session_state
    try:
        lang = state[SESSION_KEY]
    except KeyError:
        lang = None
    if lang in LANGS:
        return lang
    lang = initial_lang()
    state[SESSION_KEY] = lang
    return lang


def initial_lang() -> str:
    """A new session's language: ``?lang=`` if valid, else the browser's locale, else English."""
    import streamlit as st

    try:
        from_url = normalize_lang(st.query_params.get(QUERY_KEY))
    except Exception:  # noqa: BLE001 - no query string in this context
        from_url = None
    if from_url:
        return from_url
    try:
        from_browser = normalize_lang(st.context.locale)
    except Exception:  # noqa: BLE001 - older Streamlit, or no browser (AppTest)
        from_browser = None
    return from_browser or DEFAULT_LANG
