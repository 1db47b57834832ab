"""Per-turn usage and a session's result (Anthropic usage-field naming); cumulative prefill work."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kvviz.analysis.providers import USAGE_FIELDS, CachePolicy
from kvviz.experiments.sessions.schema import SessionError
from kvviz.experiments.sessions.session_events import SessionEvents

# ---------------------------------------------------------------- per-turn usage


@dataclass(frozen=True)
class SegmentSpan:
    """A segment's token span ``[start, end)`` inside one turn's prompt."""

    kind: str
    label: str
    start: int
    end: int
    turn: int


@dataclass(frozen=True)
class TurnUsage:
    """What one turn's prompt cost, in Anthropic's usage-field naming.

    ``cache_read_input_tokens`` + ``cache_creation_input_tokens`` + ``input_tokens`` ==
    ``prompt_tokens``; the first ``cache_read_input_tokens`` tokens of the prompt were reused, the
    next ``cache_creation_input_tokens`` were computed and written, the rest computed only."""

    turn: int
    at_s: float
    prompt_tokens: int
    answer_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    input_tokens: int
    common_prefix: int  # tokens equal to the previous request's prompt + answer
    first_difference: str | None  # the segment where the prompt first differs, if it does
    expired_entries: int
    events: tuple[str, ...]
    segments: tuple[SegmentSpan, ...]

    @property
    def computed_tokens(self) -> int:
        """Prefill work this turn: every prompt token not read from the cache."""
        return self.cache_creation_input_tokens + self.input_tokens

    def usage(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in USAGE_FIELDS}


@dataclass(frozen=True)
class SessionResult:
    """Every turn of one session under one policy, plus the cumulative prefill work."""

    session: str
    title: str
    policy: CachePolicy
    block_size: int
    marks: tuple[str, ...]
    min_cacheable_tokens: int
    ttl_s: float | None
    events: SessionEvents
    turns: list[TurnUsage]
    cumulative_without_cache: list[int]
    cumulative_with_cache: list[int]

    @property
    def total_prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def total_computed_tokens(self) -> int:
        return sum(t.computed_tokens for t in self.turns)

    @property
    def total_read_tokens(self) -> int:
        return sum(t.cache_read_input_tokens for t in self.turns)

    def gap_before(self, turn: int) -> float | None:
        """Seconds between turn ``turn - 1`` and turn ``turn`` (1-based); None for the first turn."""
        if turn <= 1:
            return None
        return self.turns[turn - 1].at_s - self.turns[turn - 2].at_s

    def turn_reasons(self, turn: TurnUsage) -> tuple[str, ...]:
        """Why ``turn`` read what it read, as codes in display order: ``first`` (nothing cached yet),
        ``diff`` (the prompt differs from the previous request: ``turn.first_difference`` at token
        ``turn.common_prefix``), ``expired`` (entries outlived their TTL), ``below_min`` (a policy's
        minimum cacheable length: nothing read or written); ``append`` when none of these holds."""
        reasons = []
        if turn.turn == 1:
            reasons.append("first")
        if turn.first_difference:
            reasons.append("diff")
        if turn.expired_entries:
            reasons.append("expired")
        if (self.policy.is_policy and turn.prompt_tokens < self.min_cacheable_tokens
                and turn.cache_read_input_tokens == turn.cache_creation_input_tokens == 0):
            reasons.append("below_min")
        return tuple(reasons) or ("append",)

    def to_dict(self, segments: bool = False) -> dict[str, Any]:
        turns = []
        for t in self.turns:
            row = {
                "turn": t.turn, "at_s": t.at_s, "prompt_tokens": t.prompt_tokens,
                "answer_tokens": t.answer_tokens, **t.usage(), "computed_tokens": t.computed_tokens,
                "common_prefix": t.common_prefix, "first_difference": t.first_difference,
                "expired_entries": t.expired_entries, "events": list(t.events),
            }
            if segments:
                row["segments"] = [asdict(s) for s in t.segments]
            turns.append(row)
        return {
            "session": self.session,
            "policy": self.policy.key,
            "policy_label": self.policy.label,
            "is_policy": self.policy.is_policy,
            "block_size": self.block_size,
            "marks": list(self.marks),
            "min_cacheable_tokens": self.min_cacheable_tokens,
            "ttl_s": self.ttl_s,
            "events": self.events.active(),
            "turns": turns,
            "total_prompt_tokens": self.total_prompt_tokens,
            "total_computed_tokens": self.total_computed_tokens,
            "total_read_tokens": self.total_read_tokens,
            "cumulative_without_cache": self.cumulative_without_cache,
            "cumulative_with_cache": self.cumulative_with_cache,
        }



# ---------------------------------------------------------------- prefill work


def cumulative_work(turns: list[TurnUsage]) -> tuple[list[int], list[int]]:
    """Running totals of prefill tokens: without a cache (every prompt token, every turn) and with it
    (only the tokens not read from the cache)."""
    without, with_cache = [], []
    a = b = 0
    for t in turns:
        a += t.prompt_tokens
        b += t.computed_tokens
        without.append(a)
        with_cache.append(b)
    return without, with_cache


MAX_PROJECTION_TURNS = 10_000  # turns of the quadratic-vs-linear projection, at most


def projected_work(first_prompt: int, increment: int, turns: int) -> tuple[list[int], list[int]]:
    """Cumulative prefill tokens of an idealised session whose prompt starts at ``first_prompt`` and
    grows by ``increment`` per turn: without a cache turn k costs its whole prompt, so the total is
    quadratic, ``n*first + increment*n*(n-1)/2``; with a perfect cache turn k costs only its
    increment, so the total is linear, ``first + (n-1)*increment``."""
    if min(first_prompt, increment) < 0 or not 1 <= turns <= MAX_PROJECTION_TURNS:
        raise SessionError(f"projection needs first_prompt, increment >= 0 and 1..{MAX_PROJECTION_TURNS:,} turns",
                           "bad_projection", limit=MAX_PROJECTION_TURNS)
    without = [n * first_prompt + increment * n * (n - 1) // 2 for n in range(1, turns + 1)]
    with_cache = [first_prompt + (n - 1) * increment for n in range(1, turns + 1)]
    return without, with_cache


def session_increment(result: SessionResult) -> tuple[int, int]:
    """(first prompt, mean growth per turn) of a session, for :func:`projected_work`."""
    sizes = [t.prompt_tokens for t in result.turns]
    if len(sizes) < 2:
        return sizes[0], 0
    return sizes[0], round((sizes[-1] - sizes[0]) / (len(sizes) - 1))
