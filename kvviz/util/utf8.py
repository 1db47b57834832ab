"""Byte-level tokens of multi-byte characters, made readable.

A byte-level BPE tokenizer with few merges for an alphabet (SmolLM2 for Cyrillic) splits one letter
into tokens that each carry some of its UTF-8 bytes: "П" is D0 9F, often two tokens. kvviz's token
pieces show a token that only starts a character as ``<0xD0>``; the token that completes it shows the
character. ``completed_chars`` pairs each byte-only piece with the character it helps to complete.
Pure functions of text; no UI words (the figures and pages word them).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

BYTE_ESCAPE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_ONLY_BYTES = re.compile(r"^(?:\s*<0x[0-9A-Fa-f]{2}>)+$")


def escaped_bytes(piece: str) -> list[int]:
    """The byte values written as ``<0xNN>`` in ``piece``, in order."""
    return [int(m.group(1), 16) for m in BYTE_ESCAPE.finditer(piece)]


def is_byte_piece(piece: str) -> bool:
    """True for a piece made only of ``<0xNN>`` escapes (optionally after a space): it completes no character."""
    return bool(_ONLY_BYTES.match(piece))


def utf8_length(lead: int) -> int:
    """Bytes in the UTF-8 character that starts with ``lead`` (0 for a continuation byte 80-BF)."""
    if lead < 0x80:
        return 1
    if lead < 0xC0:
        return 0
    if lead < 0xE0:
        return 2
    if lead < 0xF0:
        return 3
    return 4


def completed_chars(pieces: Sequence[str]) -> list[str | None]:
    """Per piece: for a byte-only piece, the character its bytes help to complete (the first character
    of the next piece that is not byte-only); None for every other piece or when nothing completes it."""
    out: list[str | None] = [None] * len(pieces)
    pending: list[int] = []
    for i, piece in enumerate(pieces):
        if is_byte_piece(piece):
            pending.append(i)
            continue
        text = piece.lstrip(" ") if pending else ""
        if pending and text:
            for j in pending:
                out[j] = text[0]
        pending = []
    return out


def is_cyrillic(ch: str) -> bool:
    """True for a Cyrillic letter."""
    return ch.isalpha() and unicodedata.name(ch, "").startswith("CYRILLIC")


def cyrillic_letters(text: str) -> int:
    """How many Cyrillic letters ``text`` has."""
    return sum(1 for ch in text if is_cyrillic(ch))


def letters(text: str) -> int:
    """How many letters (any script) ``text`` has."""
    return sum(1 for ch in text if ch.isalpha())
