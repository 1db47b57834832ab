"""Response bodies and stream chunks in the OpenAI shapes vLLM 0.33.0 returns (``CompletionResponse``,
``ChatCompletionResponse``, their ``...StreamResponse`` chunks, ``UsageInfo`` with
``prompt_tokens_details.cached_tokens``). Server-sent events end with ``data: [DONE]``.

Invariant: ``cached_tokens`` is the engine's own count for the request (``RequestOutput.num_cached_tokens``:
whole blocks found in the prefix cache), never recomputed here.
"""

from __future__ import annotations

import json
import time
from typing import Any

DONE = "data: [DONE]\n\n"


def usage(out: Any) -> dict[str, Any]:
    completion = len(out.token_ids)
    return {"prompt_tokens": out.num_prompt_tokens, "completion_tokens": completion,
            "total_tokens": out.num_prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": out.num_cached_tokens}}


def sse(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def _finish_reason(out: Any) -> str | None:
    return out.finish_reason if out.finished else None


def completion(rid: str, model: str, created: int, out: Any) -> dict[str, Any]:
    return {"id": rid, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": out.text, "logprobs": None, "finish_reason": out.finish_reason,
                         "stop_reason": None}],
            "usage": usage(out)}


def chat(rid: str, model: str, created: int, out: Any) -> dict[str, Any]:
    return {"id": rid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": out.text},
                         "logprobs": None, "finish_reason": out.finish_reason, "stop_reason": None}],
            "usage": usage(out)}


def completion_chunk(rid: str, model: str, created: int, out: Any, with_usage: bool) -> dict[str, Any]:
    chunk: dict[str, Any] = {"id": rid, "object": "text_completion", "created": created, "model": model,
                             "choices": [{"index": 0, "text": out.delta_text, "logprobs": None,
                                          "finish_reason": _finish_reason(out), "stop_reason": None}]}
    if with_usage:
        chunk["usage"] = usage(out)
    return chunk


def chat_chunk(rid: str, model: str, created: int, delta: dict[str, Any], finish_reason: str | None,
               usage_of: Any = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                             "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": finish_reason}]}
    if usage_of is not None:
        chunk["usage"] = usage(usage_of)
    return chunk


def usage_chunk(rid: str, model: str, created: int, obj: str, out: Any) -> dict[str, Any]:
    """The last chunk when ``stream_options.include_usage``: no choices, the whole request's usage."""
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": [], "usage": usage(out)}


def models(model: str, max_model_len: int | None) -> dict[str, Any]:
    created = int(time.time())
    card: dict[str, Any] = {"id": model, "object": "model", "created": created, "owned_by": "kvviz", "root": model,
                            "parent": None}
    if max_model_len is not None:
        card["max_model_len"] = max_model_len
    return {"object": "list", "data": [card]}
