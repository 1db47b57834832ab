"""Response bodies and stream chunks in the OpenAI shapes vLLM 0.33.0 returns (``CompletionResponse``,
``ChatCompletionResponse``, their ``...StreamResponse`` chunks, ``UsageInfo`` with
``prompt_tokens_details.cached_tokens``). Server-sent events end with ``data: [DONE]``.

Invariant: ``cached_tokens`` is the engine's own count for the request (``RequestOutput.num_cached_tokens``:
whole blocks found in the prefix cache), never recomputed here. A request with n choices or several
prompts answers one choice per engine request, ``index`` = prompt index x n + child index (vLLM's order);
its usage counts each prompt once. Logprobs come from the engine (``RequestOutput.logprobs``), shaped as
vLLM 0.33.0's ``completion/serving.py`` and ``chat_completion/serving.py`` shape them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # types only: the engine (torch) is imported when the first request needs it
    from kvviz.engine import RequestOutput

DONE = "data: [DONE]\n\n"
FLOOR = -9999.0  # vLLM's stand-in for -inf in JSON


class Decoder(Protocol):
    def decode(self, token_ids: list[int], skip_special_tokens: bool = ...) -> str: ...


def usage(out: RequestOutput | list[RequestOutput], n: int = 1) -> dict[str, Any]:
    """Usage of one output, or of a request's outputs (``out`` a list, ``n`` choices per prompt): each
    prompt counted once, its cached tokens the most any of its n sequences found."""
    outs = out if isinstance(out, list) else [out]
    groups = [outs[i:i + n] for i in range(0, len(outs), n)]
    prompt = sum(g[0].num_prompt_tokens for g in groups)
    completion = sum(len(o.token_ids) for o in outs)
    cached = sum(max(o.num_cached_tokens for o in g) for g in groups)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def token_text(tok: Decoder, token_id: int) -> str:
    return tok.decode([token_id], skip_special_tokens=False)


def completion_logprobs(tok: Decoder, entries: Sequence[Any], k: int, offset: int) -> dict[str, Any]:
    """vLLM's completions ``logprobs`` object for ``entries`` (engine TokenLogprobs): the sampled token,
    its logprob, the sampled token and the top ``k`` by decoded text (k + 1 at most), text offsets from
    ``offset``."""
    tokens, lps, tops, offsets = [], [], [], []
    for e in entries:
        text = token_text(tok, e.token_id)
        top = {text: max(e.logprob, FLOOR)}  # the sampled token first, as vLLM's engine orders them
        for tid, lp in e.top:
            if len(top) > k:
                break
            top.setdefault(token_text(tok, tid), max(lp, FLOOR))
        tokens.append(text)
        lps.append(max(e.logprob, FLOOR))
        tops.append(top)
        offsets.append(offset)
        offset += len(text)
    return {"text_offset": offsets, "token_logprobs": lps, "tokens": tokens, "top_logprobs": tops}


def _chat_entry(tok: Decoder, token_id: int, logprob: float) -> dict[str, Any]:
    text = token_text(tok, token_id)
    return {"token": text, "logprob": max(logprob, FLOOR), "bytes": list(text.encode("utf-8", errors="replace"))}


def chat_logprobs(tok: Decoder, entries: Sequence[Any], k: int) -> dict[str, Any]:
    """vLLM's chat ``logprobs.content``: each token with its logprob, bytes and the first ``k`` of
    (sampled token, then the most likely others)."""
    content = []
    for e in entries:
        ranked = [(e.token_id, e.logprob)] + [(t, lp) for t, lp in e.top if t != e.token_id]
        item = _chat_entry(tok, e.token_id, e.logprob)
        item["top_logprobs"] = [_chat_entry(tok, t, lp) for t, lp in ranked[:k]]
        content.append(item)
    return {"content": content}


def new_entries(out: RequestOutput) -> list[Any]:
    """The logprob entries of ``out``'s new tokens (a stream's delta)."""
    if out.logprobs is None:
        return []
    return out.logprobs[len(out.token_ids) - len(out.new_token_ids):]


def sse(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def _finish_reason(out: RequestOutput) -> str | None:
    return out.finish_reason if out.finished else None


def completion(rid: str, model: str, created: int, outs: list[RequestOutput], n: int, choice: Any) -> dict[str, Any]:
    """The whole completions answer: ``choice(index, out)`` gives each choice's text and logprobs."""
    choices = []
    for index, out in enumerate(outs):
        text, logprobs = choice(index, out)
        choices.append({"index": index, "text": text, "logprobs": logprobs, "finish_reason": out.finish_reason,
                        "stop_reason": out.stop_reason})
    return {"id": rid, "object": "text_completion", "created": created, "model": model, "choices": choices,
            "usage": usage(outs, n)}


def chat(rid: str, model: str, created: int, outs: list[RequestOutput], n: int, logprobs: Any) -> dict[str, Any]:
    """The whole chat answer: ``logprobs(out)`` gives a choice's logprobs object (or None)."""
    choices = [{"index": index, "message": {"role": "assistant", "content": out.text},
                "logprobs": logprobs(out), "finish_reason": out.finish_reason, "stop_reason": out.stop_reason}
               for index, out in enumerate(outs)]
    return {"id": rid, "object": "chat.completion", "created": created, "model": model, "choices": choices,
            "usage": usage(outs, n)}


def completion_chunk(rid: str, model: str, created: int, out: RequestOutput, with_usage: bool, index: int = 0,
                     text: str | None = None, logprobs: Any = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"id": rid, "object": "text_completion", "created": created, "model": model,
                             "choices": [{"index": index, "text": out.delta_text if text is None else text,
                                          "logprobs": logprobs, "finish_reason": _finish_reason(out),
                                          "stop_reason": out.stop_reason if out.finished else None}]}
    if with_usage:
        chunk["usage"] = usage(out)
    return chunk


def chat_chunk(rid: str, model: str, created: int, delta: dict[str, Any], finish_reason: str | None,
               usage_of: Any = None, index: int = 0, logprobs: Any = None,
               stop_reason: int | str | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason,
                              "stop_reason": stop_reason}
    chunk: dict[str, Any] = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                             "choices": [choice]}
    if usage_of is not None:
        chunk["usage"] = usage(usage_of)
    return chunk


def usage_chunk(rid: str, model: str, created: int, obj: str, outs: list[RequestOutput], n: int = 1) -> dict[str, Any]:
    """The last chunk when ``stream_options.include_usage``: no choices, the whole request's usage."""
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": [],
            "usage": usage(list(outs), n)}


def models(model: str, max_model_len: int | None) -> dict[str, Any]:
    created = int(time.time())
    card: dict[str, Any] = {"id": model, "object": "model", "created": created, "owned_by": "kvviz", "root": model,
                            "parent": None}
    if max_model_len is not None:
        card["max_model_len"] = max_model_len
    return {"object": "list", "data": [card]}
