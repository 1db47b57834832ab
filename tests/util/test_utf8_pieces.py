"""Byte tokens of Cyrillic letters paired with the character they complete."""

from __future__ import annotations

from kvviz.util.utf8 import (
    completed_chars,
    cyrillic_letters,
    escaped_bytes,
    is_byte_piece,
    letters,
    utf8_length,
)


def test_byte_piece_is_paired_with_the_letter_it_starts():
    pieces = ["<0xD0>", "П", "о", "ч", " <0xD0>", "к", "!", "<0xF0><0x9F>", "<0x98>", "😀"]
    assert completed_chars(pieces) == ["П", None, None, None, "к", None, None, "😀", "😀", None]


def test_a_trailing_byte_piece_completes_nothing():
    assert completed_chars(["a", "<0xD0>"]) == [None, None]


def test_byte_helpers():
    assert is_byte_piece("<0xD0>") and is_byte_piece(" <0xD1>") and not is_byte_piece("П")
    assert escaped_bytes(" <0xD0><0x9F>") == [0xD0, 0x9F]
    assert [utf8_length(b) for b in (0x41, 0x9F, 0xD0, 0xE2, 0xF0)] == [1, 0, 2, 3, 4]
    assert utf8_length(0xD0) == len("П".encode())


def test_letter_counts():
    assert cyrillic_letters("Привет, world!") == 6 and letters("Привет, world!") == 11
