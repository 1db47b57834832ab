"""The room: every browser session connected to the server sends its prompts to the one engine.

The pool is the engine's ``KVCacheManager`` (``kvviz.engine``), shared with the API and the other pages.
The room keeps what the engine does not: which session computed each cached block (shown anonymised:
"you" or "another session", and how long ago), per-session cache salts, rate limits and the room's
totals. An admitted prompt is submitted to the engine loop with the session's cache salt and
``max_tokens=1`` (the room teaches prefill; the engine samples the first token at the end of it); the
tokens it reused are the engine's own ``num_cached_tokens``. Prompts that arrive together share a step,
and a prefix one of them computes there is a hit for the others: the scheduler caches a block when it
allocates it, and each layer writes the step's K/V before attention. Finished prompts' blocks stay
cached in the LRU free queue until the pool needs them.

Invariants (``check_invariants``, after every call while no other client steps the engine):

- the engine's pool keeps its own invariants, and none of the room's requests is left in the engine;
- an origin is recorded only for hashes the engine's pool caches (an evicted hash loses its origin);
- hit tokens never exceed prompt tokens; cross-session block hits never exceed hit tokens;
- sessions, the feed and the timing history stay under their bounds.

Lock order: the engine loop's lock, then the room's; the room never waits for the engine holding its own.
Bounded input: prompts are cut to ``max_prompt_tokens``; a token bucket per session and one for the room
refuse floods before the engine; resets have a cool-down; the oldest idle session leaves beyond
``max_sessions``. Limits live in ``limits``, records in ``records``, per-session state in ``session``,
the bookkeeping of finished prompts in ``recording``.
"""

from __future__ import annotations

import hmac
import secrets
import statistics
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence

from kvviz.engine import EngineLoop, LLMEngine, SamplingParams, get_engine_loop
from kvviz.engine.loop import started_engine_loop
from kvviz.errors import CodedError
from kvviz.experiments.room.limits import RoomLimits
from kvviz.experiments.room.rate_limit import TokenBucket
from kvviz.experiments.room.recording import PromptRecords
from kvviz.experiments.room.records import (
    OTHER,
    YOU,
    Admission,
    FeedEntry,
    ResetResult,
    RoomTotals,
    SessionView,
)
from kvviz.experiments.room.session import SALT_MODES, BlockOrigin, RoomSession
from kvviz.experiments.room.timing import TimingSample, compare_hit_miss, machine_load_per_core
from kvviz.mirror.hashing import BlockHashRecord, hash_request_blocks, validate_token_ids
from kvviz.mirror.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch

#: The room runs each prompt's prefill and samples one token (greedy): what its page shows.
ROOM_PARAMS = SamplingParams(max_tokens=1)
#: The client label of the room's requests in the engine (the Engine page's client column).
ROOM_CLIENT = "room"


class Room(PromptRecords):
    """The room's sessions and bookkeeping over one engine loop (``engine``, or the process-wide one,
    created on first use). Every public method is thread safe; ``clock`` is injectable for tests."""

    def __init__(self, limits: RoomLimits | None = None, *, engine: EngineLoop | None = None,
                 presenter_key: str | None = None, clock: Callable[[], float] = time.monotonic,
                 load: Callable[[], float | None] = machine_load_per_core) -> None:
        self.limits = (limits or RoomLimits()).validate()
        self._load = load
        self.presenter_key = presenter_key or None
        self._clock = clock
        self._lock = threading.RLock()
        self._engine = engine
        self._engine_lock = threading.Lock()
        self._subscribed: EngineLoop | None = None
        self._cached: Counter[bytes] = Counter()  # cached hash -> blocks holding it, kept by the KV events
        self._prefix = f"room-{secrets.token_hex(4)}-"  # request ids: no session id (the engine page shows them)
        self._sent = 0
        self._chains: OrderedDict[tuple[str, str], tuple] = OrderedDict()  # (request id, salt) -> two chains
        self._sessions: OrderedDict[str, RoomSession] = OrderedDict()  # least recently seen first
        self.generation = 0
        self._resets = 0
        self._last_reset = -float("inf")
        self._evictions_base = 0
        self._fresh_state(clock())

    def _fresh_state(self, now: float) -> None:
        lim = self.limits
        self._origins: dict[bytes, BlockOrigin] = {}
        self._feed: deque[dict] = deque(maxlen=lim.feed_size)
        self._timings: deque[tuple[TimingSample, float | None]] = deque(maxlen=lim.timing_history)  # (prefill, wait)
        self._room_bucket = TokenBucket(lim.room_burst, lim.room_refill_per_s, lim.room_burst, now)
        self._prompts = self._prompt_tokens = self._hit_tokens = self._cross_hits = 0
        self._refused = self._truncated = 0
        self._since = now
        self._seq = 0

    # ------------------------------------------------------------------ the engine

    @property
    def loop(self) -> EngineLoop:
        """The engine loop the room runs on, subscribed to its KV events (to learn of resets by others)."""
        with self._engine_lock:
            loop = self._engine if self._engine is not None else get_engine_loop()
            if self._subscribed is not loop:
                loop.call(self._subscribe)
                self._engine = self._subscribed = loop
            return loop

    def _subscribe(self, engine: LLMEngine) -> None:
        """Between two steps: mirror the pool's cached hashes, then follow its KV events."""
        with self._lock:
            self._cached = Counter(engine.pool.cached_hash_counts())
            engine.subscribe_kv_events(self._on_kv_events)

    def _on_kv_events(self, batch: KVEventBatch) -> None:
        """After each step that changed the prefix cache (under the loop's lock, before its outputs reach
        anyone): keep the mirror, drop evicted hashes' origins, reset the room when the engine's cache was."""
        with self._lock:
            for e in batch.events:
                if isinstance(e, BlockStored):
                    self._cached.update(e.block_hashes)  # one more block holding each
                elif isinstance(e, BlockRemoved):
                    for h in e.block_hashes:  # one block fewer; the hash is gone with its last block
                        self._cached[h] -= 1
                        if self._cached[h] <= 0:
                            del self._cached[h]
                            self._origins.pop(h, None)
                elif isinstance(e, AllBlocksCleared):
                    self._cached.clear()
                    self._clear(self._clock())

    def _clear(self, now: float) -> None:
        self._fresh_state(now)
        for s in self._sessions.values():
            s.prompts = s.prompt_tokens = s.hit_tokens = s.blocks_from_others = 0
            s.last = None
        self._evictions_base = self._engine.engine.pool.num_evictions if self._engine is not None else 0
        self.generation += 1
        self._resets += 1

    # ------------------------------------------------------------------ sessions

    def join(self, session_id: str | None = None) -> str:
        """The id of a session in the room: ``session_id`` when it is still known (touched), else a new
        random one. Pages keep the id in ``st.session_state``; it is never shown to anyone else."""
        with self._lock:
            now = self._clock()
            if isinstance(session_id, str) and session_id in self._sessions:
                self._touch(session_id, now)
                return session_id
            sid = secrets.token_hex(8)
            lim = self.limits
            self._sessions[sid] = RoomSession(sid, now, now, TokenBucket(lim.burst, lim.refill_per_s, lim.burst, now))
            while len(self._sessions) > lim.max_sessions:
                self._sessions.popitem(last=False)  # the least recently seen session leaves
            return sid

    def _touch(self, sid: str, now: float) -> RoomSession:
        session = self._sessions[sid]
        session.last_seen = now
        self._sessions.move_to_end(sid)
        return session

    def _session(self, session_id: str) -> RoomSession:
        if not isinstance(session_id, str) or session_id not in self._sessions:
            raise CodedError("unknown room session (idle too long, or never joined)", "unknown_session")
        return self._touch(session_id, self._clock())

    def set_salt(self, session_id: str, mode: str, team: str = "") -> str | None:
        """Switch the session's cache salt: ``off``, ``private`` (a random salt only this session knows)
        or ``team`` (shared by everyone who types the same team name). Returns the salt in use."""
        if mode not in SALT_MODES:
            raise CodedError(f"unknown salt mode {mode!r} (use one of {', '.join(SALT_MODES)})", "salt_mode",
                             mode=str(mode), modes=", ".join(SALT_MODES))
        team = team.strip() if isinstance(team, str) else ""
        if mode == "team":
            if not team:
                raise CodedError("a team salt needs a team name", "team_empty")
            if len(team) > self.limits.max_team_salt_chars:
                limit = self.limits.max_team_salt_chars
                raise CodedError(f"team name longer than {limit} characters", "team_long", limit=limit)
        with self._lock:
            session = self._session(session_id)
            session.salt_mode = mode
            session.team_salt = team if mode == "team" else session.team_salt
            return session.cache_salt

    def session_view(self, session_id: str) -> SessionView:
        with self._lock:
            s = self._session(session_id)
            return SessionView(s.session_id, s.salt_mode, s.cache_salt, s.team_salt, s.prompts, s.prompt_tokens,
                               s.hit_tokens, s.blocks_from_others, s.last)

    # ------------------------------------------------------------------ prompts

    def clip_text(self, text: str) -> tuple[str, bool]:
        """``text`` cut to ``max_prompt_chars`` characters, and whether it was cut."""
        limit = self.limits.max_prompt_chars
        return (text[:limit], True) if len(text) > limit else (text, False)

    def submit(self, session_id: str, token_ids: Sequence[int], *,
               num_tokens_before_truncation: int | None = None) -> Admission:
        """Send one prompt of the session through the room to the engine: rate limits and truncation to
        ``max_prompt_tokens`` first (refusals never reach the engine), then its prefill on the engine under
        the session's salt, then the room's records. Never raises for bad input: a refused prompt comes
        back with ``ok`` False and a one-line ``error``."""
        with self._lock:
            now = self._clock()
            if not isinstance(session_id, str) or session_id not in self._sessions:
                return self._refuse(session_id, CodedError("unknown room session (idle too long, or never joined)",
                                                           "unknown_session"))
            session = self._touch(session_id, now)
            try:
                tokens = validate_token_ids(token_ids)
            except ValueError as exc:  # a CodedError: token_not_int, token_out_of_range, no_tokens, ...
                return self._refuse(session_id, exc if isinstance(exc, CodedError) else CodedError(str(exc), "bad_tokens"))
            for bucket, code, what in ((session.bucket, "rate_session", "session"), (self._room_bucket, "rate_room", "room")):
                wait = bucket.take(now)
                if wait > 0:
                    return self._refuse(session_id, CodedError(f"{what} rate limit: wait {wait:.1f} s", code,
                                                               wait=round(wait, 2)), wait)
            before = max(len(tokens), num_tokens_before_truncation or 0)
            limit = self.limits.max_prompt_tokens
            truncated = before > len(tokens) or len(tokens) > limit
            tokens = tokens[:limit]
            self._sent += 1
            request_id = f"{self._prefix}{self._sent}"
            ticket = (session_id, tokens, before, truncated, session.cache_salt, session.salt_mode, self.generation)
        start = time.perf_counter()
        try:
            out = self.loop.submit(request_id, list(tokens), ROOM_PARAMS, cache_salt=ticket[4],
                                   client=ROOM_CLIENT).result()
        except CodedError as exc:  # the engine refused it (a token outside the vocabulary, too long)
            with self._lock:
                return self._refuse(session_id, exc)
        latency_ms = (time.perf_counter() - start) * 1000.0
        if out.finish_reason == "abort":
            with self._lock:
                return self._refuse(session_id, CodedError("the engine aborted the prompt", "engine_abort"))
        return self._record(self.loop.engine, ticket, out, latency_ms)

    def _refuse(self, session_id: object, error: CodedError, retry_after: float = 0.0) -> Admission:
        self._refused += 1
        sid = session_id if isinstance(session_id, str) else ""
        return Admission(ok=False, session_id=sid, error=str(error), error_code=error.code,
                         error_params=dict(error.params), at=self._clock(), retry_after_s=round(retry_after, 2))

    def peek(self, token_ids: Sequence[int], cache_salt: str | None = None) -> int:
        """Prompt tokens the engine would reuse now for ``token_ids`` under ``cache_salt`` (no change)."""
        ids = list(token_ids)
        return self.loop.read(lambda e: e.manager.peek_cache_hit(ids, cache_salt).num_computed_tokens)

    def block_records(self, token_ids: Sequence[int], cache_salt: str | None = None) -> list[BlockHashRecord]:
        """Every block of ``token_ids`` with its chained hash under the engine's hash function and seed."""
        engine = self.loop.engine
        m = engine.manager
        return hash_request_blocks(tuple(token_ids), engine.block_size, m.hash_fn, m.none_hash, cache_salt or None)

    def salt_chains(self, adm: Admission, salt: str) -> tuple[tuple[BlockHashRecord, ...], tuple[BlockHashRecord, ...]]:
        """The hash chains of an admitted prompt without a salt and with ``salt``, hashed once per
        (prompt, salt): a page rerun reuses them (at most ``max_sessions`` pairs are kept)."""
        key = (adm.request_id, salt)
        with self._lock:
            found = self._chains.get(key)
            if found is not None:
                self._chains.move_to_end(key)
                return found
        chains = (tuple(self.block_records(adm.token_ids, None)), tuple(self.block_records(adm.token_ids, salt)))
        with self._lock:
            self._chains[key] = chains
            while len(self._chains) > self.limits.max_sessions:
                self._chains.popitem(last=False)
        return chains

    def cached_flags(self, block_hashes: Sequence[bytes | None]) -> list[bool]:
        """Whether the engine's pool caches each hash now (the room's mirror of it, kept by the KV events)."""
        self.loop  # noqa: B018 - subscribed (and the mirror filled) on first use
        with self._lock:
            return [h is not None and h in self._cached for h in block_hashes]

    def is_cached(self, block_hash: bytes | None) -> bool:
        return self.cached_flags([block_hash])[0]

    @property
    def block_size(self) -> int:
        return self.loop.engine.block_size

    # ------------------------------------------------------------------ views

    def totals(self) -> RoomTotals:
        engine = self.loop.engine
        with self._lock:
            now = self._clock()
            window = self.limits.active_window_s
            active = [s for s in self._sessions.values() if now - s.last_seen <= window]
            hits = [t.compute_ms for t, _ in self._timings if t.hit]
            misses = [t.compute_ms for t, _ in self._timings if not t.hit]
            waits = [w for _, w in self._timings if w is not None]
            pool = engine.pool  # num_evictions: one int read (the engine's lock is not needed for it)
            return RoomTotals(
                sessions_active=len(active), sessions_total=len(self._sessions),
                salted_sessions=sum(1 for s in active if s.cache_salt is not None),
                prompts=self._prompts, prompt_tokens=self._prompt_tokens, hit_tokens=self._hit_tokens,
                cross_session_hits=self._cross_hits,
                shared_blocks=sum(1 for o in self._origins.values() if o.hits_by_others),
                cached_blocks=self._cached.total(),
                num_blocks=engine.num_blocks, block_size=engine.block_size,
                evictions=pool.num_evictions - self._evictions_base,
                refused=self._refused, truncated=self._truncated, resets=self._resets, since_s=now - self._since,
                median_prefill_hit_ms=statistics.median(hits) if hits else None,
                median_prefill_miss_ms=statistics.median(misses) if misses else None,
                prefills_hit=len(hits), prefills_miss=len(misses),
                median_wait_ms=statistics.median(waits) if waits else None,
                timing=compare_hit_miss((t for t, _ in self._timings), now, self._load()),
            )

    def feed(self, viewer: str | None, limit: int = 20) -> list[FeedEntry]:
        """The most recent prompts, newest first, anonymised for ``viewer`` (no text, no session ids)."""
        with self._lock:
            now = self._clock()
            entries = list(self._feed)[-limit:][::-1]
            return [FeedEntry(e["prompt_no"], YOU if e["session_id"] == viewer else OTHER, e["num_tokens"],
                              e["hit_tokens"], e["from_others"], e["salted"], now - e["at"], e["prefill_ms"],
                              e["wait_ms"], e["step_requests"])
                    for e in entries]

    def now(self) -> float:
        return self._clock()

    # ------------------------------------------------------------------ presenter

    def reset(self, presenter_key: str | None = None, *, force: bool = False) -> ResetResult:
        """The presenter's reset: the engine's ``reset_prefix_cache`` (refused by the engine while a request
        holds blocks: the room waits up to ``reset_wait_s`` for it to go idle), no origins, zero totals
        (sessions and their salt settings stay, their last prompt goes). Needs ``presenter_key`` when the
        room has one; refused within the cool-down. ``force`` skips both checks and starts no cool-down."""
        with self._lock:
            now = self._clock()
            if not force:
                refused = self._check_reset(presenter_key, now)
                if refused is not None:
                    return refused
        loop = self.loop if self._engine is not None or started_engine_loop() is not None else None
        if loop is None:  # no engine yet: nothing is cached
            with self._lock:
                self._clear(now)
            dropped: int | None = 0
        else:
            deadline = time.monotonic() + self.limits.reset_wait_s
            while (dropped := loop.call(self._reset_engine)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return ResetResult(False, "requests are still running on the engine: try again",
                                       error_code="reset_busy")
                loop.wait_idle(min(left, 0.5))
        with self._lock:
            if not force:  # a forced reset (tests, the CLI) does not start the presenter's cool-down
                self._last_reset = now
        return ResetResult(True, None, dropped or 0)

    def _check_reset(self, presenter_key: str | None, now: float) -> ResetResult | None:
        if self.presenter_key is not None and not (presenter_key or "").strip():
            return ResetResult(False, "the presenter key is needed", error_code="presenter_key_missing")
        if self.presenter_key is not None and not hmac.compare_digest(
                (presenter_key or "").encode(), self.presenter_key.encode()):
            return ResetResult(False, "wrong presenter key", error_code="presenter_key")
        wait = self._last_reset + self.limits.reset_cooldown_s - now
        if wait > 0:
            return ResetResult(False, f"reset cool-down: wait {wait:.1f} s", error_code="reset_soon",
                               error_params={"wait": round(wait, 2)})
        return None

    def _reset_engine(self, engine: LLMEngine) -> int | None:
        """Between two steps: the engine's reset and the room's; the cached blocks dropped, None if refused."""
        with self._lock:
            dropped = sum(len(d) for d in engine.pool.cached_block_hash_to_block.values())
            if not engine.reset_prefix_cache():
                return None
            return dropped  # the engine's AllBlocksCleared event reset the room (_on_kv_events)

    # ------------------------------------------------------------------ invariants

    def check_invariants(self) -> None:
        """Raise AssertionError when a room invariant (module docstring) is broken."""
        self.loop.call(self._check)

    def _check(self, engine: LLMEngine) -> None:
        with self._lock:
            pool = engine.pool
            pool.check_invariants()
            running = [rid for rid in engine.requests if rid.startswith(self._prefix)]
            assert not running, f"room requests still in the engine: {running}"
            assert self._cached == Counter(pool.cached_hash_counts()), "the mirror of cached hashes drifted"
            stale = [h for h in self._origins if h not in self._cached]
            assert not stale, f"{len(stale)} origins of hashes the pool no longer caches"
            assert 0 <= self._hit_tokens <= self._prompt_tokens
            assert self._cross_hits * engine.block_size <= self._hit_tokens
            assert len(self._sessions) <= self.limits.max_sessions
            assert len(self._feed) <= self.limits.feed_size
            assert len(self._timings) <= self.limits.timing_history
