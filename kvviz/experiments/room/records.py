"""What the room reports: per-block outcomes, an admission, the feed, totals, a session's view (plain data)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvviz.experiments.room.timing import HitMissComparison

YOU = "you"
OTHER = "other"
@dataclass(frozen=True)
class BlockOutcome:
    """One logical block of an admitted prompt. ``status``: ``hit`` (reused), ``computed`` (a full block
    computed now; it was cached or was already cached under another block), ``partial`` (a tail block,
    never cached). ``computed_by`` is ``you``/``other``/None; ``computed_at`` the clock time."""

    index: int
    start: int
    end: int
    status: str
    block_hash: bytes | None
    computed_by: str | None
    computed_at: float | None

    @property
    def from_other(self) -> bool:
        return self.status == "hit" and self.computed_by == OTHER


@dataclass(frozen=True)
class Admission:
    """The outcome of one prompt sent to the room. ``ok`` False: refused (``error`` says why), nothing
    changed. ``hit_tokens`` is the engine's own count of prompt tokens it read from the prefix cache
    (``RequestOutput.num_cached_tokens``); ``token_ids`` the (possibly cut) prompt.

    Timing of its prefill on the engine (None when refused): ``compute_ms``, the prompt's share of the
    engine steps that computed it (step time x its share of the step's tokens); ``wait_ms``, the rest of
    ``latency_ms`` (submit to first token as the caller saw it): the step already running, the queue, and the
    other prompts' share of its step; ``step_requests``, the most
    requests one of its steps computed (1: alone). ``first_token_id``: the token the engine sampled."""

    ok: bool
    session_id: str
    error: str | None = None  # one English line (CLI, logs); the app words error_code and error_params
    error_code: str = ""
    error_params: dict[str, Any] = field(default_factory=dict)
    prompt_no: int = 0
    request_id: str = ""
    token_ids: tuple[int, ...] = ()
    num_tokens_before_truncation: int = 0
    truncated: bool = False
    cache_salt: str | None = None
    salt_mode: str = "off"
    hit_tokens: int = 0
    blocks: tuple[BlockOutcome, ...] = ()
    at: float = 0.0
    retry_after_s: float = 0.0
    compute_ms: float | None = None
    wait_ms: float | None = None
    latency_ms: float | None = None
    step_requests: int = 0
    first_token_id: int | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def computed_tokens(self) -> int:
        return self.num_tokens - self.hit_tokens

    @property
    def hit_blocks(self) -> int:
        return sum(1 for b in self.blocks if b.status == "hit")

    @property
    def blocks_from_others(self) -> int:
        return sum(1 for b in self.blocks if b.from_other)


@dataclass(frozen=True)
class FeedEntry:
    """One prompt in the room feed, anonymised for the viewer: ``who`` is ``you`` or ``other``. No text."""

    prompt_no: int
    who: str
    num_tokens: int
    hit_tokens: int
    blocks_from_others: int
    salted: bool
    age_s: float
    prefill_ms: float | None  # the prompt's share of its engine steps' time (compute, not waiting)
    wait_ms: float | None = None  # the rest of its time to the first token (running step, queue, others' share)
    step_requests: int = 0  # the most requests one of its engine steps computed (prompts sent together share one)


@dataclass(frozen=True)
class RoomTotals:
    """The room's numbers since the last reset. ``shared_blocks``: cached blocks that a session other
    than the one that computed them has hit; ``cross_session_hits``: such block hits in total.
    ``cached_blocks``, ``num_blocks``, ``evictions``: the engine's pool (shared with every client)."""

    sessions_active: int
    sessions_total: int
    salted_sessions: int
    prompts: int
    prompt_tokens: int
    hit_tokens: int
    cross_session_hits: int
    shared_blocks: int
    cached_blocks: int
    num_blocks: int
    block_size: int
    evictions: int
    refused: int
    truncated: int
    resets: int
    since_s: float
    median_prefill_hit_ms: float | None
    median_prefill_miss_ms: float | None
    prefills_hit: int
    prefills_miss: int
    median_wait_ms: float | None = None
    timing: HitMissComparison | None = None  # recent hits vs misses per 100 prompt tokens, with a verdict

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens served from the shared pool."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["hit_rate"] = self.hit_rate
        out["timing"] = None if self.timing is None else asdict(self.timing)
        return out


@dataclass(frozen=True)
class SessionView:
    """One session as it sees itself: salt, its counters and its last admitted prompt."""

    session_id: str
    salt_mode: str
    cache_salt: str | None
    team_salt: str
    prompts: int
    prompt_tokens: int
    hit_tokens: int
    blocks_from_others: int
    last: Admission | None

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True)
class ResetResult:
    ok: bool
    error: str | None = None  # one English line; the app words error_code and error_params
    dropped_blocks: int = 0
    error_code: str = ""
    error_params: dict[str, Any] = field(default_factory=dict)
