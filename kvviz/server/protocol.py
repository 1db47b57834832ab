"""The OpenAI request bodies kvviz accepts, validated once at the HTTP edge (pydantic, strict types).

Field names and meanings follow vLLM 0.33.0's OpenAI server (``vllm/entrypoints/openai/completion/
protocol.py`` and ``chat_completion/protocol.py``), including vLLM's extra fields ``cache_salt``,
``priority`` and ``ignore_eos``. Unlike vLLM, an unknown field is refused (400 naming it), and OpenAI
fields kvviz does not model (``n``, ``logprobs``, penalties, ...) are accepted only at their no-op value.
Invariant: a model that validates can be turned into engine inputs without further checks except the
context length, which needs the tokenizer (kvviz.server.serving).
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_PROMPT_CHARS = 100_000  # refused before tokenizing: far beyond the model's context in any language
MAX_MESSAGES = 256
MAX_STOP = 4  # OpenAI's limit on stop sequences
MAX_STOP_CHARS = 256
MAX_SALT_CHARS = 128  # vLLM 0.33.0's validate_cache_salt
SALT_FORBIDDEN = frozenset("@/\\\x00")
INT32 = 2**31 - 1
INT64 = 2**63 - 1
DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's and vLLM's default for /v1/completions
DEFAULT_CHAT_MAX_TOKENS = 256  # kvviz's cap when a chat request names none (OpenAI's is the context)

TokenId = Annotated[int, Field(ge=0, le=INT32)]


class FieldError(ValueError):
    """A validation error that names its field (``param`` in the OpenAI error JSON)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


class _Edge(BaseModel):
    """Strict types (no "5" for 5), unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


class StreamOptions(_Edge):
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


def _check_noop(data: Any, noop: dict[str, tuple[Any, ...]]) -> Any:
    """Refuse an OpenAI field kvviz does not model unless it has a value that changes nothing."""
    if isinstance(data, dict):
        for name, allowed in noop.items():
            if name in data and not any(data[name] == a and type(data[name]) is type(a) for a in allowed):
                shown = " or ".join(json.dumps(a) for a in allowed)
                raise FieldError(name, f"kvviz accepts only {shown} here")
    return data


_NOOP_COMMON = {"n": (1, None), "logprobs": (None, False, 0), "presence_penalty": (None, 0, 0.0),
                "frequency_penalty": (None, 0, 0.0), "logit_bias": (None, {}), "top_logprobs": (None, 0)}


class _Sampling(_Edge):
    """The sampling and routing fields both endpoints share."""

    model: str | None = Field(None, max_length=256)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=0, le=INT64)  # the engine's per-request generator takes 0..2**63-1
    stop: str | list[str] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False
    cache_salt: str | None = None
    priority: int = Field(0, ge=-INT32, le=INT32)
    user: str | None = Field(None, max_length=256)
    # accepted at their no-op values only (see _NOOP_COMMON)
    n: int | None = 1
    logprobs: int | bool | None = None
    top_logprobs: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None

    @field_validator("temperature", "top_p")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @field_validator("stop")
    @classmethod
    def _stop(cls, value: str | list[str] | None) -> str | list[str] | None:
        items = [value] if isinstance(value, str) else (value or [])
        if len(items) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop sequences")
        if any(not s or len(s) > MAX_STOP_CHARS for s in items):
            raise ValueError(f"each stop sequence must have 1..{MAX_STOP_CHARS} characters")
        return value

    @field_validator("cache_salt")
    @classmethod
    def _salt(cls, value: str | None) -> str | None:
        if value is not None and (not value or len(value) > MAX_SALT_CHARS or SALT_FORBIDDEN & set(value)):
            raise ValueError(f"must be 1..{MAX_SALT_CHARS} characters without '@', '/', '\\' or NUL")
        return value

    @model_validator(mode="after")
    def _stream_options_need_stream(self) -> _Sampling:
        if self.stream_options is not None and not self.stream:
            raise FieldError("stream_options", "only allowed with stream: true")
        return self

    def stop_strings(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    @property
    def continuous_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.continuous_usage_stats)


class CompletionRequest(_Sampling):
    """``POST /v1/completions``: one prompt, as text or token ids."""

    prompt: str | list[TokenId] | list[str] | list[list[TokenId]]
    max_tokens: int | None = Field(DEFAULT_COMPLETION_MAX_TOKENS, ge=1, le=INT32)
    echo: bool | None = False
    suffix: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _noop(cls, data: Any) -> Any:
        return _check_noop(data, {**_NOOP_COMMON, "echo": (None, False), "suffix": (None,)})

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_kind(cls, value: Any) -> Any:
        if not isinstance(value, (str, list)):
            raise FieldError("prompt", "must be a string or a list of token ids (integers)")
        return value

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, value: Any) -> str | list[int]:
        if isinstance(value, list) and value and isinstance(value[0], (str, list)):
            if len(value) != 1:
                raise ValueError("kvviz serves one prompt per request (give a string or one list of token ids)")
            value = value[0]
        if isinstance(value, str):
            if not value:
                raise ValueError("the prompt is empty")
            if len(value) > MAX_PROMPT_CHARS:
                raise ValueError(f"the prompt has {len(value):,} characters (at most {MAX_PROMPT_CHARS:,})")
        elif not value:
            raise ValueError("the prompt has no token ids")
        return value


class TextPart(_Edge):
    type: Literal["text"]
    text: str


class ChatMessage(_Edge):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]
    name: str | None = Field(None, max_length=64)

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class ChatCompletionRequest(_Sampling):
    """``POST /v1/chat/completions``: messages rendered with the model's own chat template."""

    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_tokens: int | None = Field(None, ge=1, le=INT32)
    max_completion_tokens: int | None = Field(None, ge=1, le=INT32)

    @model_validator(mode="before")
    @classmethod
    def _noop(cls, data: Any) -> Any:
        return _check_noop(data, {**_NOOP_COMMON, "tools": (None, []), "tool_choice": (None, "none"),
                                  "response_format": (None, {"type": "text"})})

    # accepted at their no-op values only
    tools: list[Any] | None = None
    tool_choice: str | None = None
    response_format: dict[str, str] | None = None

    @field_validator("messages")
    @classmethod
    def _size(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        chars = sum(len(m.text()) for m in value)
        if chars > MAX_PROMPT_CHARS:
            raise ValueError(f"the messages have {chars:,} characters (at most {MAX_PROMPT_CHARS:,})")
        return value

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens
