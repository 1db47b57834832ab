"""The OpenAI request bodies kvviz accepts, validated once at the HTTP edge (pydantic, strict types).

Field names and meanings follow vLLM 0.33.0's OpenAI server (``vllm/entrypoints/openai/completion/
protocol.py`` and ``chat_completion/protocol.py``), including vLLM's extra fields ``cache_salt``,
``priority``, ``ignore_eos`` and ``stop_token_ids``. Unlike vLLM, an unknown field is refused (400 naming
it), and OpenAI fields kvviz does not model (penalties, ``logit_bias``, ...) are accepted only at their
no-op value. ``n``, ``logprobs`` / ``top_logprobs``, ``echo`` and lists of prompts are served as vLLM does.
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
MAX_STOP = 4  # vLLM 0.33.0's VLLM_MAX_STOP_STRINGS default (and OpenAI's limit)
MAX_STOP_CHARS = 256
MAX_SALT_CHARS = 128  # vLLM 0.33.0's validate_cache_salt
SALT_FORBIDDEN = frozenset("@/\\\x00")
INT32 = 2**31 - 1
INT64 = 2**63 - 1
MAX_N = 16384  # vLLM 0.33.0's VLLM_MAX_N_SEQUENCES default
MAX_LOGPROBS = 20  # vLLM 0.33.0's --max-logprobs default
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


_NOOP_COMMON = {"presence_penalty": (None, 0, 0.0), "frequency_penalty": (None, 0, 0.0), "logit_bias": (None, {})}


class _Sampling(_Edge):
    """The sampling and routing fields both endpoints share."""

    model: str | None = Field(None, max_length=256)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=-INT64 - 1, le=INT64)  # vLLM's int64; -1 means none (vLLM)
    stop: str | list[str] | None = None
    stop_token_ids: list[TokenId] | None = Field(None, max_length=1024)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False
    cache_salt: str | None = None
    priority: int = Field(0, ge=-INT32, le=INT32)
    user: str | None = Field(None, max_length=256)
    n: int | None = 1
    # accepted at their no-op values only (see _NOOP_COMMON)
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
        if len(items) > MAX_STOP:  # the words of vLLM's pydantic check (max_length=VLLM_MAX_STOP_STRINGS)
            raise ValueError(f"List should have at most {MAX_STOP} items after validation, not {len(items)}")
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
        n = 1 if self.n is None else self.n
        if not 1 <= n <= MAX_N:  # vLLM 0.33.0's _verify_num_sequences words
            raise FieldError("n", f"n must be at least 1, got {n}." if n < 1 else
                             f"n must be at most {MAX_N}, got {n}.")
        if n > 1 and self.temperature == 0:  # vLLM: greedy sampling gives n copies of one answer
            raise FieldError("n", f"n must be 1 when using greedy sampling, got {n}.")
        return self

    @property
    def num_choices(self) -> int:
        return 1 if self.n is None else self.n

    def real_seed(self) -> int | None:
        """The engine's seed: None for none or -1 (vLLM's 'no seed')."""
        return None if self.seed == -1 else self.seed

    def stop_strings(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    @property
    def continuous_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.continuous_usage_stats)


def _logprobs_count(value: int | None, param: str) -> int | None:
    """vLLM 0.33.0's checks of a logprobs count: -1 (the whole vocabulary) or 0..max_logprobs."""
    if value is None:
        return None
    if value < 0 and value != -1:
        raise FieldError(param, f"`{param}` must be a positive value or -1.")
    if value == -1 or value > MAX_LOGPROBS:  # -1 asks for the whole vocabulary, over any max_logprobs here
        shown = "the whole vocabulary (-1)" if value == -1 else str(value)
        raise FieldError(param, f"Requested sample logprobs of {shown}, which is greater than max allowed: "
                         f"{MAX_LOGPROBS}")
    return value


class CompletionRequest(_Sampling):
    """``POST /v1/completions``: one prompt or a list of them, as text or token ids."""

    prompt: str | list[TokenId] | list[str] | list[list[TokenId]]
    max_tokens: int | None = Field(DEFAULT_COMPLETION_MAX_TOKENS, ge=1, le=INT32)
    echo: bool | None = False
    logprobs: int | None = None
    suffix: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _noop(cls, data: Any) -> Any:
        return _check_noop(data, {**_NOOP_COMMON, "suffix": (None,)})

    @model_validator(mode="after")
    def _logprobs(self) -> CompletionRequest:
        _logprobs_count(self.logprobs, "logprobs")
        if self.echo and self.logprobs is not None:  # vLLM returns prompt logprobs here; kvviz computes none
            raise FieldError("echo", "kvviz does not compute prompt logprobs, so `echo` with `logprobs` is "
                             "refused (vLLM 0.33.0 returns them)")
        return self

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_kind(cls, value: Any) -> Any:
        if not isinstance(value, (str, list)):
            raise FieldError("prompt", "must be a string or a list of token ids (integers)")
        return value

    @field_validator("prompt")
    @classmethod
    def _prompts_fit(cls, value: Any) -> Any:
        prompts = value if isinstance(value, list) and value and isinstance(value[0], (str, list)) else [value]
        chars = 0
        for one in prompts:
            if isinstance(one, str):
                if not one:
                    raise ValueError("the prompt is empty")
                chars += len(one)
            elif not one:
                raise ValueError("the prompt has no token ids")
        if chars > MAX_PROMPT_CHARS:
            raise ValueError(f"the prompts have {chars:,} characters (at most {MAX_PROMPT_CHARS:,})")
        return value

    def prompts(self) -> list[str | list[int]]:
        """Each prompt of the request, in order (a choice's index is prompt index x n + child index)."""
        p = self.prompt
        if isinstance(p, list) and p and isinstance(p[0], (str, list)):
            return list(p)  # type: ignore[arg-type]
        return [p]  # type: ignore[list-item]

    @property
    def num_logprobs(self) -> int | None:
        return self.logprobs


class TextPart(_Edge):
    type: Literal["text"]
    text: str


class FunctionCall(_Edge):
    name: str = Field(max_length=256)
    arguments: str  # JSON text, as OpenAI sends it


class ToolCall(_Edge):
    """One tool call an assistant message made earlier in the conversation (an agent's history)."""

    id: str = Field(max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Edge):
    """A message; as vLLM 0.33.0 takes them, an assistant message may carry ``tool_calls`` with ``content``
    null, and a ``tool`` message answers one call (``tool_call_id``)."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None
    name: str | None = Field(None, max_length=64)
    tool_calls: list[ToolCall] | None = Field(None, max_length=128)
    tool_call_id: str | None = Field(None, max_length=256)

    @model_validator(mode="after")
    def _roles(self) -> ChatMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content may be null only in an assistant message with tool_calls")
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("only an assistant message has tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        return self

    def text(self) -> str:
        if self.content is None:
            return ""
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class ChatCompletionRequest(_Sampling):
    """``POST /v1/chat/completions``: messages rendered with the model's own chat template."""

    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_tokens: int | None = Field(None, ge=1, le=INT32)
    max_completion_tokens: int | None = Field(None, ge=1, le=INT32)

    logprobs: bool | None = False
    top_logprobs: int | None = 0  # null means 0, as in vLLM 0.33.0

    @model_validator(mode="before")
    @classmethod
    def _noop(cls, data: Any) -> Any:
        if isinstance(data, dict):  # both need guided decoding, which kvviz's engine does not have
            for name, allowed in (("tools", (None, [])), ("tool_choice", (None, "none")),
                                  ("response_format", (None, {"type": "text"}))):
                if name in data and data[name] not in allowed:
                    raise FieldError(name, f"kvviz has no guided decoding, so it serves neither tool calling nor "
                                     f"structured output: send no `{name}` (tool messages in `messages` are fine)")
        return _check_noop(data, _NOOP_COMMON)

    @model_validator(mode="after")
    def _logprobs(self) -> ChatCompletionRequest:
        top = _logprobs_count(self.top_logprobs, "top_logprobs")
        if top and not self.logprobs:
            raise FieldError("top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true.")
        return self

    @property
    def num_logprobs(self) -> int | None:
        """The engine's count of top alternatives per token (None: no logprobs at all)."""
        return (self.top_logprobs or 0) if self.logprobs else None

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
