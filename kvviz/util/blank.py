"""The one rule for blank text: a prompt, a name or a file field counts as empty when it has no visible
character. Spaces, tabs, newlines, zero-width and other format characters (U+200B, U+200C, U+200D,
U+2060, U+FEFF, soft hyphen) and control characters are all invisible. Every place that accepts text
(pages, CLI, file readers) asks ``is_blank``; nothing else decides it.
"""

from __future__ import annotations

import unicodedata

#: Unicode general categories that draw nothing: controls, format characters (zero-width space,
#: joiners, BOM), line and paragraph separators, space separators; plus unassigned and surrogates.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs", "Cn", "Cs"})


def is_invisible(ch: str) -> bool:
    """True for one character that draws nothing on screen (whitespace, zero-width, control)."""
    return ch.isspace() or unicodedata.category(ch) in INVISIBLE_CATEGORIES


def is_blank(text: str) -> bool:
    """True when ``text`` has no visible character (empty, spaces only, zero-width spaces only, ...)."""
    return all(is_invisible(ch) for ch in text)
