"""Tokenizing user text into ids and human-readable pieces, with input limits.

A piece is the text a token completes: byte-level tokens are mapped back to bytes and decoded
incrementally as UTF-8, so Cyrillic, CJK and emoji display as characters. A token that only starts a
multi-byte character shows its bytes as ``<0xF0>``-style escapes; the token completing it shows the
character.
"""

from __future__ import annotations

import codecs
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from kvviz.errors import CodedLine
from kvviz.model.loader import load_tokenizer
from kvviz.model.settings import MAX_INPUT_CHARS, InputError, check_max_tokens, max_tokens_default
from kvviz.util.blank import is_blank
from kvviz.util.utf8 import letters

if TYPE_CHECKING:  # types only: transformers is imported where a tokenizer is loaded
    from transformers import PreTrainedTokenizerBase

_SP_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
# transformers may reconfigure a fast tokenizer's backend (truncation, padding) inside a call, which
# fails with "Already borrowed" when two threads (two Streamlit sessions) do it at once.
_TOKENIZER_CALL_LOCK = threading.RLock()

# The English lines of the input codes (the app words the codes: kvviz_app.shell.text).
EMPTY_TEXT = "The text is empty: type or paste at least one visible character."
NO_TOKENS = "The input produced no tokens: give at least one token."
TRUNCATION_NOTICE = (
    "The input has {total} tokens; only the first {kept:,} are used (the limit is {limit:,} tokens)."
)
#: Text the sidebar measures the model's KV bytes per token with (fed to the model; the same in every language).
MODEL_PROBE_TEXT = "A prompt cache keeps the keys and values of every token at every layer."


@dataclass(frozen=True)
class Tokenized:
    """Token ids of a text (after truncation to the limit) and the readable text of each token."""

    ids: list[int]
    pieces: list[str]
    truncated: bool
    num_tokens_before_truncation: int
    notice: str | None
    max_tokens: int = 0
    model_name: str | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.ids)


@lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """Inverse of the GPT-2 byte-level alphabet: printable stand-in character -> byte value (all 256)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def _tokenizer_style(tokenizer: PreTrainedTokenizerBase) -> str:
    """'bytelevel' (GPT-2 style), 'sentencepiece' (▁ and <0xNN>), or 'other'."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = repr(getattr(backend, "decoder", "")) if backend is not None else ""
    if "ByteLevel" in decoder:
        return "bytelevel"
    if "Metaspace" in decoder or "ByteFallback" in decoder or "▁" in decoder:
        return "sentencepiece"
    return "other"


def token_pieces(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[str]:
    """Readable text of each token id (see the module docstring for split characters)."""
    with _TOKENIZER_CALL_LOCK:
        return _token_pieces(tokenizer, ids)


def _token_pieces(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[str]:
    style = _tokenizer_style(tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(list(ids))
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    byte_map = byte_decoder()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces: list[str] = []
    for token_id, token in zip(ids, tokens, strict=True):
        if token is None:
            pieces.append(tokenizer.decode([token_id]))
            continue
        if token_id in special or token_id in added:
            tail = decoder.decode(b"", final=True)
            decoder.reset()
            if tail and pieces:
                pieces[-1] += tail
            pieces.append(str(token))
            continue
        if style == "bytelevel" and all(ch in byte_map for ch in token):
            raw = bytes(byte_map[ch] for ch in token)
        elif style == "sentencepiece":
            match = _SP_BYTE.match(token)
            raw = bytes([int(match.group(1), 16)]) if match else token.replace("▁", " ").encode("utf-8")
        else:
            raw = tokenizer.decode([token_id]).encode("utf-8")
        text = decoder.decode(raw)
        if not text and raw:
            text = "".join(f"<0x{b:02X}>" for b in raw)
        pieces.append(text)
    tail = decoder.decode(b"", final=True)
    if tail and pieces:
        pieces[-1] += tail
    return pieces


#: The English reference for the tokens-per-letter note (the meaning of the Russian preset "cat_window").
ENGLISH_SAMPLE = "The cat sits on the window and waits for its owner to bring its dinner."


def letter_cost(text: str, model_name: str | None = None) -> tuple[int, int]:
    """(tokens, letters) of ``text`` with the model's tokenizer (no special tokens): measured, not assumed."""
    tokenizer = load_tokenizer(model_name)
    with _TOKENIZER_CALL_LOCK:
        ids = tokenizer(clean_text(text)[:MAX_INPUT_CHARS], add_special_tokens=False,
                        return_attention_mask=False)["input_ids"]
    return len(ids), letters(text[:MAX_INPUT_CHARS])


def clean_text(text: object) -> str:
    """Validate user text: a non-blank str; lone surrogates become U+FFFD so any str tokenizes."""
    if isinstance(text, bytes):
        raise InputError("text must be a string, not bytes (decode it first)", "text_bytes")
    if not isinstance(text, str):
        raise InputError(f"text must be a string, got {type(text).__name__}", "text_not_str", got=type(text).__name__)
    if is_blank(text):
        raise InputError(EMPTY_TEXT, "empty_text")
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def tokenize(text: str, model_name: str | None = None, max_tokens: int | None = None) -> Tokenized:
    """Tokenize ``text`` with the model's tokenizer, keeping at most ``max_tokens`` (default 2,048).

    Raises InputError for empty or whitespace-only text and for bad limits. Longer texts keep their
    first ``max_tokens`` tokens (the prefix is what a cache reuses) and carry a notice saying so.
    """
    limit = max_tokens_default() if max_tokens is None else check_max_tokens(max_tokens)
    text = clean_text(text)
    chars_cut = len(text) > MAX_INPUT_CHARS
    if chars_cut:
        text = text[:MAX_INPUT_CHARS]
    tokenizer = load_tokenizer(model_name)
    with _TOKENIZER_CALL_LOCK:
        ids = list(tokenizer(text, add_special_tokens=True, return_attention_mask=False)["input_ids"])
    if not ids:
        raise InputError(NO_TOKENS, "no_tokens")
    return _limit(tokenizer, ids, limit, chars_cut, model_name)


def tokenize_ids(token_ids: object, model_name: str | None = None, max_tokens: int | None = None) -> Tokenized:
    """Validate given token ids against the tokenizer's vocabulary and apply the same limit."""
    limit = max_tokens_default() if max_tokens is None else check_max_tokens(max_tokens)
    if isinstance(token_ids, (str, bytes)) or not hasattr(token_ids, "__iter__"):
        raise InputError("token_ids must be a list of integers")
    ids = list(token_ids)  # type: ignore[call-overload]
    if not ids:
        raise InputError(NO_TOKENS, "no_tokens")
    tokenizer = load_tokenizer(model_name)
    vocab = len(tokenizer)
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab:
            raise InputError(f"token id {i!r} is not in the vocabulary (0..{vocab - 1})")
    return _limit(tokenizer, ids, limit, False, model_name)


def _limit(tokenizer: PreTrainedTokenizerBase, ids: list[int], limit: int, chars_cut: bool, model_name: str | None) -> Tokenized:
    total = len(ids)
    truncated = chars_cut or total > limit
    kept = ids[:limit]
    notice = None
    if truncated:
        params = {"total": total, "kept": len(kept), "limit": limit, "more_than": chars_cut}
        notice = CodedLine(TRUNCATION_NOTICE.format(
            total=("more than " if chars_cut else "") + f"{total:,}", kept=len(kept), limit=limit
        ), "truncated", **params)
    return Tokenized(
        ids=kept,
        pieces=token_pieces(tokenizer, kept),
        truncated=truncated,
        num_tokens_before_truncation=total,
        notice=notice,
        max_tokens=limit,
        model_name=model_name,
    )


def pieces_tokenizer(max_tokens: int) -> Callable[[str], tuple[list[int], list[str]]]:
    """The embedded tokenizer as ``text -> (ids, pieces)``, the shape kvviz.analysis takes when a tokenizer is
    passed in (scenario texts). Texts longer than ``max_tokens`` come back cut to ``max_tokens``."""

    def tok(text: str) -> tuple[list[int], list[str]]:
        t = tokenize(text, max_tokens=max_tokens)
        return t.ids, t.pieces

    return tok
