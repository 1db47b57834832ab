"""Detokenizer: output token ids to text, holding back an unfinished UTF-8 character while streaming."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: transformers is imported where a tokenizer is loaded
    from transformers import PreTrainedTokenizerBase


class Detokenizer:
    """Decodes a request's output ids (special tokens skipped), as vLLM's detokenizer does by default."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer

    def text(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True) if token_ids else ""

    @staticmethod
    def stable(text: str) -> str:
        """``text`` without a trailing replacement character (bytes of a character still to come)."""
        return text.rstrip("\ufffd")
