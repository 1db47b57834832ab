"""A real multi-turn chat on the engine: each turn's answer is generated and becomes part of the next
prompt, and each turn reports what it read from the prefix cache (vLLM's cached-token count).

The next prompt continues the previous one token for token: previous prompt ids + the generated ids + the
tokens of what the chat template adds for the new user message (found by rendering the conversation with
and without it). Invariant: a turn's prompt starts with every token of the turn before it, so the cache
can serve all of it but the last partial block; only when the template rewrites earlier text (it never
does for ChatML) are the ids re-tokenized whole, and the count shows the lost reuse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvviz.errors import CodedError

if TYPE_CHECKING:  # types only: no torch or engine import at run time
    from transformers import PreTrainedTokenizerBase

    from kvviz.engine import EngineLoop

MAX_CHAT_TURNS = 24
MAX_MESSAGE_CHARS = 2000
CHAT_TOP_LOGPROBS = 3  # alternatives kept per answer token


@dataclass(frozen=True)
class TokenChoice:
    """One answer token as the model chose it: its text, its probability under the model's raw
    distribution, and the most likely tokens at that position as ``(text, probability)``."""

    text: str
    prob: float
    top: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class ChatTurn:
    """One exchange: the prompt (the whole conversation so far), what of it came from the cache, the answer."""

    user: str
    answer: str
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    ttft_ms: float | None
    e2e_ms: float | None
    finish_reason: str | None
    choices: tuple[TokenChoice, ...] = ()  # one per answer token (the engine's logprobs)
    compute_ms: float | None = None  # the engine's step time spent on it (its share of each step's tokens)

    @property
    def computed_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


@dataclass
class Chat:
    """A conversation: messages (role, content) for the template, the token ids of the last prompt plus
    its answer, and the turns' records."""

    messages: list[dict[str, str]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    turns: list[ChatTurn] = field(default_factory=list)


def _render(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]]) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def next_prompt_ids(tokenizer: PreTrainedTokenizerBase, chat: Chat, user: str) -> list[int]:
    """The token ids of the next prompt: the conversation so far, token for token, then the new message."""
    messages = [*chat.messages, {"role": "user", "content": user}]
    if not chat.turns:
        return tokenizer(_render(tokenizer, messages), add_special_tokens=False).input_ids
    before = _render(tokenizer, chat.messages[:-1]) + chat.messages[-1]["content"]
    after = _render(tokenizer, messages)
    if not after.startswith(before):  # the template rewrote earlier text: re-tokenize whole
        return tokenizer(after, add_special_tokens=False).input_ids
    suffix = after[len(before):]
    eos = tokenizer.eos_token or ""
    if eos and chat.turns[-1].finish_reason == "stop" and chat.ids and chat.ids[-1] == tokenizer.eos_token_id:
        suffix = suffix.removeprefix(eos)  # the model already wrote the end-of-turn token
    return chat.ids + tokenizer(suffix, add_special_tokens=False).input_ids


def token_choices(tokenizer: PreTrainedTokenizerBase, logprobs: list[Any]) -> tuple[TokenChoice, ...]:
    """Each answer token's text, probability and top alternatives from the engine's logprob entries."""
    def piece(token_id: int) -> str:
        return tokenizer.decode([token_id], skip_special_tokens=False)

    return tuple(TokenChoice(piece(e.token_id), math.exp(e.logprob),
                             tuple((piece(t), math.exp(lp)) for t, lp in e.top)) for e in logprobs)


def chat_turn(loop: EngineLoop, chat: Chat, user: str, *, max_tokens: int = 48, request_id: str) -> ChatTurn:
    """Send ``user`` through the engine loop, append the exchange to ``chat``; the turn's record."""
    from kvviz.engine import SamplingParams

    text = user.strip()
    if not text or len(text) > MAX_MESSAGE_CHARS:
        raise CodedError(f"a message has 1..{MAX_MESSAGE_CHARS} characters", "bad_chat_message",
                         high=MAX_MESSAGE_CHARS)
    if len(chat.turns) >= MAX_CHAT_TURNS:
        raise CodedError(f"a chat has at most {MAX_CHAT_TURNS} turns: start a new one", "chat_too_long",
                         high=MAX_CHAT_TURNS)
    tokenizer = loop.engine.tokenizer
    ids = next_prompt_ids(tokenizer, chat, text)
    out = loop.submit(request_id, ids, SamplingParams(max_tokens=max_tokens, logprobs=CHAT_TOP_LOGPROBS)).result()
    m = out.metrics
    turn = ChatTurn(text, out.text.strip(), out.num_prompt_tokens, out.num_cached_tokens, len(out.token_ids),
                    None if m.ttft_s is None else m.ttft_s * 1000, None if m.e2e_s is None else m.e2e_s * 1000,
                    out.finish_reason, token_choices(tokenizer, out.logprobs or []), m.compute_share_s * 1000)
    chat.messages += [{"role": "user", "content": text}, {"role": "assistant", "content": out.text}]
    chat.ids = ids + list(out.token_ids)
    chat.turns.append(turn)
    return turn
