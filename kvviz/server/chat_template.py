"""Chat messages to prompt token ids with the model's own chat template (``apply_chat_template`` with
the generation prompt, as vLLM's chat endpoint renders a conversation before prefill).

Messages reach the template as vLLM 0.33.0's ``renderers/chat_utils/chat_message.py`` hands them over: a
null content is an empty string, an assistant's ``tool_calls`` pass through with their arguments parsed
to objects (as its ``_postprocess_messages``), a tool message keeps its ``tool_call_id``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kvviz.server.openai_errors import bad_request
from kvviz.server.protocol import ChatMessage

if TYPE_CHECKING:  # types only: transformers is imported where a tokenizer is loaded
    from transformers import PreTrainedTokenizerBase


def template_message(m: ChatMessage) -> dict[str, Any]:
    """One message as the chat template sees it."""
    out: dict[str, Any] = {"role": m.role, "content": m.text()}
    if m.name is not None:
        out["name"] = m.name
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": c.type,
                              "function": {"name": c.function.name, "arguments": _arguments(c.function.arguments)}}
                             for c in m.tool_calls]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    return out


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # not JSON: the template gets the text as sent
        return text


def render_chat(tokenizer: PreTrainedTokenizerBase, messages: list[ChatMessage], *, add_generation_prompt: bool = True,
                continue_final_message: bool = False, tokenize: bool = True) -> Any:
    """Token ids (or, ``tokenize=False``, the text) of ``messages`` under ``tokenizer``'s chat template;
    400 when the template refuses them."""
    plain = [template_message(m) for m in messages]
    if all(not m["content"].strip() and "tool_calls" not in m for m in plain):
        raise bad_request("messages: every message is empty", "messages")
    for i, m in enumerate(messages):
        check_unicode(m.text(), f"messages.{i}.content")
    extra = {"continue_final_message": True} if continue_final_message else {}
    try:
        ids = tokenizer.apply_chat_template(plain, tokenize=tokenize, add_generation_prompt=add_generation_prompt,
                                            **extra)
    except Exception as exc:  # noqa: BLE001 - a template that rejects these roles (jinja's TemplateError): a 400
        raise bad_request(f"messages: the chat template refused them ({str(exc)[:200]})", "messages") from None
    if not tokenize:
        return str(ids)
    if hasattr(ids, "keys"):  # newer transformers return a BatchEncoding
        ids = ids["input_ids"]
    return [int(t) for t in ids]


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str | list[int], add_special_tokens: bool = True) -> list[int]:
    """A completion prompt's token ids: text through the tokenizer (with its BOS, if any), ids as given."""
    if isinstance(prompt, list):
        return list(prompt)
    check_unicode(prompt, "prompt")
    return [int(t) for t in tokenizer(prompt, add_special_tokens=add_special_tokens,
                                      return_attention_mask=False)["input_ids"]]


def check_unicode(text: str, param: str) -> None:
    """400 for text that is not valid Unicode (JSON allows a lone surrogate such as ``\\ud800``; no tokenizer
    can encode it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad_request(f"{param}: the text has a lone surrogate (U+{ord(text[exc.start]):04X}) at "
                          f"character {exc.start}: it is not valid Unicode", param) from None
