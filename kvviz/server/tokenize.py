"""``POST /tokenize`` and ``POST /detokenize`` as vLLM 0.33.0 serves them (``vllm/entrypoints/serve/
tokenize/protocol.py`` and ``serving.py``): a prompt or chat messages to token ids (``count``, ``tokens``,
``max_model_len``, ``token_strs`` when ``return_token_strs``), and token ids back to text (``prompt``).

Invariant: ``/tokenize`` with messages gives the ids the chat endpoint prefills (same template, same
rendering), so a client can count a conversation's tokens before sending it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from kvviz.server.chat_template import encode_prompt, render_chat
from kvviz.server.openai_errors import bad_request
from kvviz.server.protocol import INT64, MAX_MESSAGES, MAX_PROMPT_CHARS, ChatMessage, FieldError, _Edge

if TYPE_CHECKING:  # types only: transformers is imported where a tokenizer is loaded
    from transformers import PreTrainedTokenizerBase


class TokenizeCompletionRequest(_Edge):
    """A prompt's tokens; ``add_special_tokens`` (default true) adds the tokenizer's BOS, if it has one."""

    model: str | None = Field(None, max_length=256)
    prompt: str = Field(max_length=MAX_PROMPT_CHARS)
    add_special_tokens: bool = True
    return_token_strs: bool | None = False


class TokenizeChatRequest(_Edge):
    """A conversation's tokens under the chat template; ``add_special_tokens`` defaults to false (the
    template already writes the special tokens), as vLLM's."""

    model: str | None = Field(None, max_length=256)
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    return_token_strs: bool | None = False

    @model_validator(mode="after")
    def _one_ending(self) -> TokenizeChatRequest:
        if self.add_generation_prompt and self.continue_final_message:  # vLLM 0.33.0's check, same meaning
            raise FieldError("continue_final_message", "`continue_final_message` and `add_generation_prompt` "
                             "cannot both be true")
        return self


class DetokenizeRequest(_Edge):
    model: str | None = Field(None, max_length=256)
    tokens: list[int] = Field(max_length=1_000_000)


def tokenize_model(body: dict[str, Any]) -> type[TokenizeCompletionRequest] | type[TokenizeChatRequest]:
    """The request type a body is: messages make it the chat form (vLLM's union picks the same)."""
    return TokenizeChatRequest if "messages" in body else TokenizeCompletionRequest


def tokenize(tokenizer: PreTrainedTokenizerBase, req: TokenizeCompletionRequest | TokenizeChatRequest, max_model_len: int) -> dict:
    """vLLM's ``TokenizeResponse`` body."""
    if isinstance(req, TokenizeChatRequest):
        options = {"add_generation_prompt": req.add_generation_prompt,
                   "continue_final_message": req.continue_final_message}
        if req.add_special_tokens:  # the template's text, then the tokenizer with its own specials on top
            text = render_chat(tokenizer, req.messages, tokenize=False, **options)
            ids = encode_prompt(tokenizer, text, add_special_tokens=True)
        else:
            ids = render_chat(tokenizer, req.messages, **options)
    else:
        ids = encode_prompt(tokenizer, req.prompt, add_special_tokens=req.add_special_tokens)
    strs = [str(t) for t in tokenizer.convert_ids_to_tokens(ids)] if req.return_token_strs else None
    return {"count": len(ids), "max_model_len": max_model_len, "tokens": ids, "token_strs": strs}


def detokenize(tokenizer: PreTrainedTokenizerBase, req: DetokenizeRequest) -> dict:
    """vLLM's ``DetokenizeResponse`` body; an id outside the vocabulary is a 400 naming it."""
    vocab = len(tokenizer)
    for i, t in enumerate(req.tokens):
        if not 0 <= t < vocab:
            shown = t if -INT64 <= t <= INT64 else f"{str(t)[:20]}..."
            raise bad_request(f"tokens.{i}: token id {shown} is outside the vocabulary (0..{vocab - 1})", "tokens")
    return {"prompt": tokenizer.decode(req.tokens)}
