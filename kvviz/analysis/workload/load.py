"""Read a workload trace of any supported line kind, tokenizing ``prompt`` and ``messages`` lines.

The tokenizer is passed in as a zero-argument loader and called only when the first such line
appears, so hash_ids and token_ids traces never load transformers. ``messages`` lines use the
tokenizer's chat template (with the generation prompt, as a server does before prefill).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvviz.analysis.workload.parse import Encoder, parse_trace
from kvviz.analysis.workload.trace import BadLines, Progress, WorkloadError, WorkloadTrace
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED

TokenizerLoader = Callable[[], Any]
MAX_PROMPT_CHARS = 1_000_000


def default_tokenizer() -> Any:
    """The embedded model's tokenizer (kvviz.model's loader, cached per process)."""
    from kvviz.model.loader import load_tokenizer

    return load_tokenizer(None)


def _messages(value: Any, line: int) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise WorkloadError(f"line {line}: 'messages' must be a non-empty list of {{role, content}} objects",
                            "messages_not_list", line=line)
    out = []
    for i, msg in enumerate(value):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str) or "content" not in msg:
            raise WorkloadError(f"line {line}: messages[{i}] must be an object with a 'role' and a 'content'",
                                "message_not_object", line=line, index=i)
        content = msg["content"]
        if isinstance(content, list):  # OpenAI content parts: keep the text parts
            parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            if not all(isinstance(p, str) for p in parts):
                raise WorkloadError(f"line {line}: messages[{i}] has a text part without text",
                                    "text_part_without_text", line=line, index=i)
            content = "".join(parts)
        if not isinstance(content, str):
            raise WorkloadError(f"line {line}: messages[{i}].content must be a string or a list of text parts",
                                "content_not_text", line=line, index=i)
        out.append({"role": msg["role"], "content": content})
    return out


def _encode(tokenizer: Any, kind: str, value: Any, line: int) -> list[int]:
    if kind == "prompt":
        if not isinstance(value, str) or not value.strip():
            raise WorkloadError(f"line {line}: 'prompt' must be a non-empty string", "prompt_not_text", line=line)
        if len(value) > MAX_PROMPT_CHARS:
            raise WorkloadError(f"line {line}: the prompt has {len(value):,} characters (at most {MAX_PROMPT_CHARS:,})",
                                "prompt_too_long", line=line, chars=len(value), limit=MAX_PROMPT_CHARS)
        return list(tokenizer(value, add_special_tokens=True, return_attention_mask=False)["input_ids"])
    messages = _messages(value, line)
    if sum(len(m["content"]) for m in messages) > MAX_PROMPT_CHARS:
        raise WorkloadError(f"line {line}: the messages have more than {MAX_PROMPT_CHARS:,} characters",
                            "messages_too_long", line=line, limit=MAX_PROMPT_CHARS)
    try:
        ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - a template that rejects these roles: one line
        raise WorkloadError(f"line {line}: the chat template rejected the messages ({exc})", "template_rejected",
                            line=line, detail=str(exc)) from None
    if hasattr(ids, "keys"):  # newer transformers return a BatchEncoding
        ids = ids["input_ids"]
    return [int(t) for t in ids]


def lazy_encoder(tokenizer: TokenizerLoader = default_tokenizer) -> Encoder:
    """An encoder for ``prompt``/``messages`` lines that loads the tokenizer at its first call."""
    loaded: list[Any] = []

    def encode(kind: str, value: Any, line: int) -> list[int]:
        if not loaded:
            loaded.append(tokenizer())
        return _encode(loaded[0], kind, value, line)

    return encode


def load_trace(data: bytes | str, block_size: int | None = None,
               tokenizer: TokenizerLoader = default_tokenizer,
               hash_name: str = DEFAULT_HASH, seed: str | None = DEFAULT_SEED,
               progress: Callable[[Progress], None] | None = None, bad: BadLines | None = None) -> WorkloadTrace:
    """Parse every line kind; the tokenizer is loaded at the first prompt or messages line; ``progress``
    and ``bad`` (count and skip bad lines) as ``parse_trace``'s."""
    return parse_trace(data, block_size, lazy_encoder(tokenizer), hash_name, seed, progress, bad=bad)
