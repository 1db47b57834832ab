"""The app's words for the config.json reader's and KV-size checks' codes: the library's English lines
(kvviz.config_words, which the CLI prints) are the msgids; a view of this module reads them translated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvviz import config_words as _en
from kvviz.config_words import (
    CONFIG_ERRORS,
    CONFIG_NOTES,
    FAMILY_GENERIC,
    FIELD_NAMES,
    JSON_KINDS,
    SIZE_ERRORS,
    UNKNOWN_MODEL_TYPE,
)

if TYPE_CHECKING:
    from kvviz.analysis.sizes.hf_config import ConfigNote
    from kvviz_app.shell.i18n.texts import Texts

__all__ = ["CONFIG_ERRORS", "CONFIG_NOTES", "FAMILY_GENERIC", "FIELD_NAMES", "JSON_KINDS", "SIZE_ERRORS",
           "UNKNOWN_MODEL_TYPE", "config_note", "ordinal", "size_error"]


def ordinal(t: Texts, n: int) -> str:
    """``n`` as an ordinal in the view's language: 2nd, 6th (English), 2-й, 6-й (Russian)."""
    return f"{n}-й" if t.language == "ru" else _en.ordinal(n)


def config_note(t: Texts, note: ConfigNote) -> str:
    """One ``ConfigNote`` in the view's language."""
    return _en.config_note(note, t)


def size_error(t: Texts, exc: Exception) -> str:
    """A ``ConfigError`` or ``KVSizeError`` as one line in the view's language (its own line without a code)."""
    return _en.size_error(exc, t)
