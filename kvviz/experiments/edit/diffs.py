"""Character and token diffs of two prompts, invisible characters, and a token's printable text."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from kvviz.model.loader import LoadedModel
from kvviz.model.settings import MAX_INPUT_CHARS, InputError
from kvviz.model.tokens import Tokenized, byte_decoder, token_pieces, tokenize

# ----------------------------------------------------------------------------- text and token diffs


def replace_char(text: str, position: int, replacement: str) -> str:
    """``text`` with the character at ``position`` replaced by ``replacement`` (one character, or
    empty to delete it). A position equal to ``len(text)`` appends."""
    if not isinstance(text, str) or not isinstance(replacement, str):
        raise InputError("text and replacement must be strings")
    if len(replacement) > 1:
        raise InputError(f"the replacement must be one character, got {len(replacement)}")
    if not 0 <= position <= len(text):
        raise InputError(f"position {position} is outside the text (0..{len(text)})")
    return text[:position] + replacement + text[position + 1 :]


@dataclass(frozen=True)
class CharEdit:
    """The smallest span that differs between two texts: ``a[start:end_a]`` became ``b[start:end_b]``."""

    start: int
    end_a: int
    end_b: int
    removed: str
    added: str

    @property
    def identical(self) -> bool:
        return self.end_a == self.start and self.end_b == self.start


def char_diff(a: str, b: str) -> CharEdit:
    """Common character prefix and suffix of two texts; what lies between is the edit."""
    n = min(len(a), len(b))
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    s = 0
    while s < n - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    return CharEdit(p, len(a) - s, len(b) - s, a[p : len(a) - s], b[p : len(b) - s])


@dataclass(frozen=True)
class TokenEdit:
    """How the token sequences differ: ``ids_a[start:end_a]`` became ``ids_b[start:end_b]`` (common
    prefix and common suffix removed); every token after the edit moved by ``shift`` positions."""

    start: int
    end_a: int
    end_b: int
    num_tokens_a: int
    num_tokens_b: int

    @property
    def identical(self) -> bool:
        return self.num_tokens_a == self.num_tokens_b and self.end_a == self.start

    @property
    def removed_tokens(self) -> int:
        return self.end_a - self.start

    @property
    def added_tokens(self) -> int:
        return self.end_b - self.start

    @property
    def shift(self) -> int:
        return self.num_tokens_b - self.num_tokens_a

    @property
    def changed_positions_a(self) -> list[int]:
        return list(range(self.start, self.end_a))

    @property
    def changed_positions_b(self) -> list[int]:
        return list(range(self.start, self.end_b))

    @property
    def moved_tokens(self) -> int:
        """Tokens after the edit whose position changed (0 when the token count stayed the same)."""
        return 0 if self.shift == 0 else self.num_tokens_b - self.end_b


def token_diff(ids_a: Sequence[int], ids_b: Sequence[int]) -> TokenEdit:
    """Common token prefix and suffix of two sequences; the rest is the edited span."""
    na, nb = len(ids_a), len(ids_b)
    n = min(na, nb)
    p = 0
    while p < n and ids_a[p] == ids_b[p]:
        p += 1
    s = 0
    while s < n - p and ids_a[na - 1 - s] == ids_b[nb - 1 - s]:
        s += 1
    return TokenEdit(p, na - s, nb - s, na, nb)


def token_char_offsets(lm: LoadedModel, text: str, num_tokens: int) -> list[int]:
    """The character offset where each of the first ``num_tokens`` tokens of ``text`` starts (for
    mapping a clicked token to a character); falls back to summing the pieces' lengths."""
    try:
        enc = lm.tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        offsets = [int(s) for s, _e in enc["offset_mapping"]][:num_tokens]
        if len(offsets) == num_tokens:
            return offsets
    except Exception:  # noqa: BLE001 - slow tokenizers have no offsets; use the fallback below
        pass
    out, pos = [], 0
    for piece in tokenize(text, model_name=lm.source.key, max_tokens=max(1, num_tokens)).pieces[:num_tokens]:
        out.append(min(pos, max(0, len(text) - 1)))
        pos += len(piece)
    return out


def kept_chars(lm: LoadedModel, text: str, tok: Tokenized) -> int | None:
    """How many leading characters of ``text`` the kept tokens of a cut prompt cover (None if not cut)."""
    if not tok.truncated:
        return None
    n = len(tok.ids)
    try:
        enc = lm.tokenizer(text[:MAX_INPUT_CHARS], add_special_tokens=True, return_offsets_mapping=True)
        ends = [int(e) for _s, e in enc["offset_mapping"][:n]]
        if len(ends) == n:
            return max(ends, default=0)
    except Exception:  # noqa: BLE001 - slow tokenizers have no offsets: sum the pieces instead
        pass
    return min(len(text), sum(len(p) for p in tok.pieces))


def describe_char(ch: str) -> str:
    """A character with its code point and Unicode name, for messages about invisible edits."""
    if not ch:
        return "nothing"
    parts = []
    for c in ch:
        name = unicodedata.name(c, "control character" if unicodedata.category(c) == "Cc" else "unnamed")
        shown = c if c.isprintable() and not c.isspace() else ""
        parts.append(f"{shown!r} U+{ord(c):04X} {name}" if shown else f"U+{ord(c):04X} {name}")
    return ", ".join(parts)


def invisible_chars(text: str) -> list[str]:
    """The distinct control and format characters in ``text`` (Unicode Cc/Cf: zero-width spaces, BOMs,
    bidi marks...), other than newline, tab and carriage return, in order of first appearance."""
    return list(dict.fromkeys(c for c in text if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t\r"))




def _bytes_text(raw: bytes) -> str:
    """UTF-8 text of ``raw``, with bytes that are not part of a whole character as ``<0xNN>``."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        for width in (1, 2, 3, 4):
            try:
                out.append(raw[i : i + width].decode("utf-8"))
                i += width
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append(f"<0x{raw[i]:02X}>")
            i += 1
    return "".join(out)


def piece_text(lm: LoadedModel, token_id: int) -> str:
    """One token's text; bytes that do not complete a character are shown as ``<0xNN>``."""
    try:
        text = str(lm.tokenizer.decode([token_id]))
        if "\ufffd" not in text:
            return text
        raw_token = lm.tokenizer.convert_ids_to_tokens([token_id])[0]
        byte_map = byte_decoder()
        if raw_token and all(ch in byte_map for ch in raw_token):
            raw = bytes(byte_map[ch] for ch in raw_token)
            return _bytes_text(raw)
        return token_pieces(lm.tokenizer, [token_id])[0]
    except Exception:  # noqa: BLE001 - display only
        return f"<{token_id}>"
