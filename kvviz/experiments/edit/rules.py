"""Rules of the Edit page that are numbers, not words (the page and the CLI read them from here)."""

from __future__ import annotations

from kvviz.util.utf8 import cyrillic_letters, letters

#: The tokens-per-letter note needs at least this many Cyrillic letters in the prompt ...
MIN_NOTE_LETTERS = 20
#: ... and letters must be at least this share of its non-space characters (emoji, digits and symbols
#: cost tokens that no letter accounts for, so a ratio over letters would mean nothing).
MIN_LETTER_SHARE = 0.6


def cyrillic_note_applies(text: str) -> bool:
    """True when ``text`` is mostly Cyrillic letters: at least ``MIN_NOTE_LETTERS`` of them, at least half
    of its letters, and letters at least ``MIN_LETTER_SHARE`` of its non-space characters."""
    n_letters = letters(text)
    n_cyrillic = cyrillic_letters(text)
    visible = sum(1 for ch in text if not ch.isspace())
    return (n_cyrillic >= MIN_NOTE_LETTERS and n_cyrillic * 2 >= n_letters
            and n_letters >= MIN_LETTER_SHARE * visible)
