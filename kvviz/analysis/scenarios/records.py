"""Scenario records: a named request history (``Scenario``, ``ScenarioStep``) and the user's own steps.

A scenario is a request trace (``kvviz.analysis.scenarios.block_trace``: ``add`` = a prompt arrives and is prefilled,
``append`` = decoded tokens, ``free`` = the request finished) plus what a person needs to follow it:
a title, the text and readable token pieces of each step, a note on what to watch, and the shared
system prompt that "add a request" can put in front of a user's own question. Reading and validating
files is ``kvviz.analysis.scenarios.load``; playing a scenario through the block manager is
``kvviz.analysis.scenarios.play``. Invariant: a ``Scenario`` holds at most ``MAX_SCENARIO_STEPS`` steps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from kvviz.analysis.scenarios.block_trace import Trace, TraceError, TraceStep
from kvviz.errors import CodedError
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED
from kvviz.mirror.limits import DEFAULT_BLOCK_SIZE
from kvviz.mirror.manager import KVCacheManager

MAX_SCENARIO_STEPS = 500
MAX_REQUEST_TOKENS = 4096
EXCERPT_CHARS = 40
USER_PLACEHOLDER = "{text}"
HOST_TIER_CHOICES = (0, 4, 8, 16, 32)  # host-tier sizes (blocks) a page offers for any scenario; 0 = none

Tokenizer = Callable[[str], tuple[Sequence[int], Sequence[str]]]


ERROR_CODES: tuple[str, ...] = (
    "too_many_steps", "no_tokens", "too_many_tokens", "bad_step_index", "bad_trace", "bad_window", "bad_page_size",
    # scenario files (kvviz.analysis.scenarios.load)
    "not_string", "not_object", "unknown_keys", "steps_not_list", "missing_steps", "file_too_many_steps",
    "too_many_blocks", "step_not_object", "step_unknown_keys", "text_without_tokens", "empty_text",
    "pieces_not_strings", "pieces_length", "step_too_many_tokens", "bad_user_template", "unknown_scenario",
)
"""Every ``ScenarioError.code``; the words are kvviz_app.block_table.text's ``SCENARIO_ERRORS``. ``bad_trace`` carries
the replay's English line as ``detail`` and the trace's code as ``trace_code`` (words: ``TRACE_ERRORS``) with
its params; a ``step`` param (1-based) names the step to blame."""


class ScenarioError(CodedError):
    """A scenario is malformed or impossible: one English line naming the step or key, and a code from
    ``ERROR_CODES`` with its params."""


@dataclass(frozen=True)
class ScenarioStep:
    """One step: ``op`` (add / append / free) on request ``id``, or ``reset`` (reset_prefix_cache, no
    id); ``tokens`` are the prompt (add) or the decoded tokens (append); ``pieces`` their readable text
    when known."""

    op: str
    id: str
    tokens: tuple[int, ...] = ()
    salt: str | None = None
    text: str | None = None
    pieces: tuple[str, ...] | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.op == "reset":
            return {"op": "reset", **({"note": self.note} if self.note is not None else {})}
        out: dict[str, Any] = {"op": self.op, "id": self.id}
        if self.op != "free":
            if self.text is not None:
                out["text"] = self.text
            out["tokens"] = list(self.tokens)
            if self.pieces is not None:
                out["pieces"] = list(self.pieces)
        if self.salt is not None:
            out["salt"] = self.salt
        if self.note is not None:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Scenario:
    """A named request history for a pool of ``num_blocks`` blocks of ``block_size`` tokens."""

    name: str
    title: str
    description: str
    num_blocks: int
    steps: tuple[ScenarioStep, ...]
    block_size: int = DEFAULT_BLOCK_SIZE
    hash: str = DEFAULT_HASH
    seed: str | None = DEFAULT_SEED
    sliding_window: int | None = None
    prefix_text: str | None = None
    user_template: str | None = None
    host_blocks: int | None = None  # a host tier under the pool (vLLM's CPU offloading); None: none
    # how that tier evicts, "lru" or "arc" (vLLM's eviction_policy): a player's choice, not a file key
    host_eviction_policy: str = "lru"

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of every field (their repr): equal scenarios, and only they, share it; a cheap cache key
        for a scenario of hundreds of steps (computed once per instance; the record is frozen)."""
        return hashlib.sha256(repr(self).encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def last_arrival_step(self) -> int:
        """The step (1-based) of the last ``add``, where requests still hold their blocks; the last step
        when nothing arrives."""
        arrivals = [i + 1 for i, s in enumerate(self.steps) if s.op == "add"]
        return arrivals[-1] if arrivals else self.num_steps

    def trace(self) -> Trace:
        """The bare request trace the mirror replays."""
        return Trace(self.num_blocks, tuple(TraceStep(s.op, s.id, s.tokens, s.salt, s.note) for s in self.steps),
                     self.block_size, self.hash, self.seed, self.sliding_window, self.name, self.description,
                     self.host_blocks)

    def new_manager(self, sliding_window: int | None | str = "default") -> KVCacheManager:
        window = self.sliding_window if sliding_window == "default" else sliding_window
        return KVCacheManager(self.num_blocks, self.block_size, self.hash, self.seed, window,  # type: ignore[arg-type]
                              self.host_blocks, self.host_eviction_policy)

    def with_host_tier(self, host_blocks: int | None, policy: str = "lru") -> Scenario:
        """The same scenario over a host tier of ``host_blocks`` blocks (None or 0: without one) evicting by
        ``policy`` ("lru" or "arc")."""
        return replace(self, host_blocks=host_blocks or None, host_eviction_policy=policy)

    def with_steps(self, extra: Sequence[ScenarioStep]) -> Scenario:
        """The same scenario with ``extra`` steps appended (validated by ``play_scenario``)."""
        if len(self.steps) + len(extra) > MAX_SCENARIO_STEPS:
            raise ScenarioError(f"a scenario holds at most {MAX_SCENARIO_STEPS} steps", "too_many_steps",
                                limit=MAX_SCENARIO_STEPS)
        return replace(self, steps=self.steps + tuple(extra))

    def compose_prompt(self, user_text: str, with_prefix: bool = True) -> str:
        """The prompt text for a user's own question: the shared prefix and the user template around
        it when ``with_prefix`` (and the scenario has them), else the text as typed."""
        if not with_prefix:
            return user_text
        template = self.user_template or USER_PLACEHOLDER
        return (self.prefix_text or "") + template.replace(USER_PLACEHOLDER, user_text)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form that ``parse_scenario`` reads back unchanged."""
        out: dict[str, Any] = {"name": self.name, "title": self.title, "description": self.description,
                               "block_size": self.block_size, "num_blocks": self.num_blocks, "hash": self.hash,
                               "seed": self.seed}
        if self.sliding_window is not None:
            out["sliding_window"] = self.sliding_window
        if self.prefix_text is not None:
            out["prefix_text"] = self.prefix_text
        if self.user_template is not None:
            out["user_template"] = self.user_template
        if self.host_blocks is not None:
            out["host_blocks"] = self.host_blocks
        out["steps"] = [s.to_dict() for s in self.steps]
        return out



def from_trace_error(exc: TraceError) -> ScenarioError:
    """A trace's error as the scenario's ``bad_trace``: the English line and ``step`` counted from 1, the
    trace's own code as ``trace_code`` and its params beside it (for kvviz_app.block_table.text's TRACE_ERRORS)."""
    detail = renumber_step_error(str(exc))
    params = {k: v for k, v in exc.params.items() if k not in ("detail", "trace_code")}
    if isinstance(params.get("step"), int):
        params["step"] += 1
    return ScenarioError(detail, "bad_trace", detail=detail, trace_code=exc.code, **params)


def renumber_step_error(message: str) -> str:
    """Trace errors count steps from 0; scenarios count them from 1 like the player does."""
    if message.startswith("step "):
        head, _, rest = message.partition(":")
        number = head.split()[1]
        if number.isdigit():
            return f"step {int(number) + 1}{head[len('step ') + len(number):]}:{rest}"
    return message



def running_ids(scenario: Scenario) -> set[str]:
    """Request ids still running after the last step (added, not freed)."""
    running: set[str] = set()
    for s in scenario.steps:
        if s.op == "add":
            running.add(s.id)
        elif s.op == "free":
            running.discard(s.id)
    return running


def next_request_id(scenario: Scenario, prefix: str = "you") -> str:
    """A request id not used by any step of the scenario: ``you1``, ``you2``, ..."""
    used = {s.id for s in scenario.steps}
    n = 1
    while f"{prefix}{n}" in used:
        n += 1
    return f"{prefix}{n}"


def user_request_steps(
    request_id: str,
    tokens: Sequence[int],
    pieces: Sequence[str] | None = None,
    *,
    text: str | None = None,
    salt: str | None = None,
    answer_tokens: Sequence[int] = (),
    answer_pieces: Sequence[str] | None = None,
    answer_text: str | None = None,
    finish: bool = False,
    note: str | None = None,
) -> list[ScenarioStep]:
    """The steps of one user request: it arrives, optionally decodes an answer, optionally finishes."""
    if not tokens:
        raise ScenarioError("the request has no tokens", "no_tokens")
    if len(tokens) > MAX_REQUEST_TOKENS:
        raise ScenarioError(f"the request has more than {MAX_REQUEST_TOKENS:,} tokens, the most one step takes",
                            "too_many_tokens", limit=MAX_REQUEST_TOKENS)
    steps = [ScenarioStep("add", request_id, tuple(tokens), salt or None, text,
                          tuple(pieces) if pieces is not None else None, note)]
    if answer_tokens:
        steps.append(ScenarioStep("append", request_id, tuple(answer_tokens), None, answer_text,
                                  tuple(answer_pieces) if answer_pieces is not None else None))
    if finish:
        steps.append(ScenarioStep("free", request_id))
    return steps


