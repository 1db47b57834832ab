"""Chat messages to prompt token ids with the model's own chat template (``apply_chat_template`` with
the generation prompt, as vLLM's chat endpoint renders a conversation before prefill)."""

from __future__ import annotations

from typing import Any

from kvviz.server.errors import bad_request
from kvviz.server.protocol import ChatMessage


def render_chat(tokenizer: Any, messages: list[ChatMessage]) -> list[int]:
    """Token ids of ``messages`` under ``tokenizer``'s chat template; 400 when the template refuses them."""
    plain = [{"role": m.role, "content": m.text()} for m in messages]
    if all(not m["content"].strip() for m in plain):
        raise bad_request("messages: every message is empty", "messages")
    try:
        ids = tokenizer.apply_chat_template(plain, tokenize=True, add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - a template that rejects these roles (jinja's TemplateError): a 400
        raise bad_request(f"messages: the chat template refused them ({str(exc)[:200]})", "messages") from None
    if hasattr(ids, "keys"):  # newer transformers return a BatchEncoding
        ids = ids["input_ids"]
    return [int(t) for t in ids]


def encode_prompt(tokenizer: Any, prompt: str | list[int]) -> list[int]:
    """A completion prompt's token ids: text through the tokenizer (with its BOS, if any), ids as given."""
    if isinstance(prompt, list):
        return list(prompt)
    check_unicode(prompt, "prompt")
    return [int(t) for t in tokenizer(prompt, add_special_tokens=True, return_attention_mask=False)["input_ids"]]


def check_unicode(text: str, param: str) -> None:
    """400 for text that is not valid Unicode (JSON allows a lone surrogate such as ``\\ud800``; no tokenizer
    can encode it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad_request(f"{param}: the text has a lone surrogate (U+{ord(text[exc.start]):04X}) at "
                          f"character {exc.start}: it is not valid Unicode", param) from None
