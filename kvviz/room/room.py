"""The room: one block pool shared by every browser session connected to the server.

A workshop room is a ``KVCacheManager`` behind one lock, plus what the engine itself does not keep:
which session computed each cached block (shown anonymised: "you" or "another session", and how long
ago), per-session cache salts, and the room's totals. A prompt is admitted (longest cached prefix
reused, new full blocks cached) and finished at once, so its blocks stay cached in the LRU free queue
until the pool needs them: the pool size is the room's memory bound, as in vLLM.

Invariants (``check_invariants``):

- after every call no request is running: every block has ``ref_cnt`` 0 and sits in the free queue;
- an origin is recorded exactly for hashes cached in the pool (an evicted hash loses its origin);
- the room's counters equal the manager's (prompts, prompt tokens, hit tokens since the last reset),
  and hit tokens never exceed prompt tokens;
- sessions, the event log, the feed and the timing history stay under their bounds.

Bounded input: prompts are cut to ``max_prompt_tokens`` (the prefix is what a cache reuses); each
session has a token bucket (``burst`` prompts, refilled at ``refill_per_s``) and the room one more
(``room_burst``/``room_refill_per_s``), so thousands of tiny prompts are refused cheaply; resets have
a cool-down; the oldest idle session is dropped beyond ``max_sessions``. Pure Python, no torch. Limits
live in ``room_limits``, the records it returns in ``room_records``, per-session state in
``room_session``, the process-wide room in ``room_service``.
"""

from __future__ import annotations

import hmac
import secrets
import statistics
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

from kvviz.mirror.errors import CodedError
from kvviz.mirror.events import EventKind
from kvviz.mirror.hashing import (
    DEFAULT_HASH,
    DEFAULT_SEED,
    BlockHashRecord,
    hash_request_blocks,
    validate_token_ids,
)
from kvviz.mirror.manager import KVCacheManager
from kvviz.room.limits import RoomLimits
from kvviz.room.rate_limit import TokenBucket
from kvviz.room.records import (
    OTHER,
    YOU,
    Admission,
    BlockOutcome,
    FeedEntry,
    ResetResult,
    RoomTotals,
    SessionView,
)
from kvviz.room.session import SALT_MODES, BlockOrigin, RoomSession


class Room:
    """A server-wide shared block pool (see the module docstring for its invariants and bounds).

    Every public method holds one re-entrant lock, so concurrent sessions see a consistent pool.
    ``clock`` is injectable for tests (seconds, monotonic).
    """

    def __init__(self, limits: RoomLimits | None = None, *, presenter_key: str | None = None,
                 hash_name: str = DEFAULT_HASH, seed: str | None = DEFAULT_SEED,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = (limits or RoomLimits()).validate()
        self.presenter_key = presenter_key or None
        self.hash_name = hash_name
        self.seed = seed
        self._clock = clock
        self._lock = threading.RLock()
        self._sessions: OrderedDict[str, RoomSession] = OrderedDict()  # least recently seen first
        self._reset_hooks: list[Callable[[], None]] = []
        self.generation = 0
        self._resets = 0
        self._last_reset = -float("inf")
        self._fresh_state(clock())

    def _fresh_state(self, now: float) -> None:
        lim = self.limits
        self.manager = KVCacheManager(lim.num_blocks, lim.block_size, self.hash_name, self.seed)
        self._origins: dict[bytes, BlockOrigin] = {}
        self._feed: deque[dict] = deque(maxlen=lim.feed_size)
        self._timings: deque[tuple[bool, float, float | None]] = deque(maxlen=lim.timing_history)
        self._room_bucket = TokenBucket(lim.room_burst, lim.room_refill_per_s, lim.room_burst, now)
        self._prompts = self._prompt_tokens = self._hit_tokens = self._cross_hits = 0
        self._refused = self._truncated = 0
        self._since = now
        self._seq = 0

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
        """Admit one prompt of the session: rate limits, truncation to ``max_prompt_tokens``, then the
        engine step (reuse the longest cached prefix under the session's salt, cache the new full
        blocks) and the request's end (its blocks stay cached, LRU). Never raises for bad input: a
        refused prompt comes back with ``ok`` False and a one-line ``error``."""
        with self._lock:
            now = self._clock()
            if not isinstance(session_id, str) or session_id not in self._sessions:
                return self._refuse(session_id, CodedError("unknown room session (idle too long, or never joined)", "unknown_session"))
            session = self._touch(session_id, now)
            try:
                tokens = validate_token_ids(token_ids)
            except ValueError as exc:  # a CodedError: token_not_int, token_out_of_range, no_tokens, ...
                coded = exc if isinstance(exc, CodedError) else CodedError(str(exc), "bad_tokens")
                return self._refuse(session_id, coded)
            wait = session.bucket.take(now)
            if wait > 0:
                return self._refuse(session_id, CodedError(f"session rate limit: wait {wait:.1f} s", "rate_session",
                                                           wait=round(wait, 2)), wait)
            wait = self._room_bucket.take(now)
            if wait > 0:
                return self._refuse(session_id, CodedError(f"room rate limit: wait {wait:.1f} s", "rate_room",
                                                           wait=round(wait, 2)), wait)
            before = max(len(tokens), num_tokens_before_truncation or 0)
            limit = self.limits.max_prompt_tokens
            truncated = before > len(tokens) or len(tokens) > limit
            tokens = tokens[:limit]
            self._seq += 1
            request_id = f"{session_id}:{self._seq}"
            salt = session.cache_salt
            result = self.manager.add_request(request_id, tokens, salt)
            if not result.ok:  # cannot happen while every request is freed at once; kept as a guard
                return self._refuse(session_id, CodedError(result.error or "no free block in the pool", "pool_full"))
            blocks = self._outcomes(session_id, tokens, salt, result.num_computed_tokens, now)
            evicted = 0
            for event in self.manager.free_request(request_id).events + result.events:
                if event.kind is EventKind.EVICT:
                    evicted += len(event.block_ids)
                    for h in event.block_hashes:
                        if h is not None and self.manager.block_pool.get_cached_block(h) is None:
                            self._origins.pop(h, None)
            self._trim_events()
            adm = Admission(
                ok=True, session_id=session_id, prompt_no=self._seq, request_id=request_id, token_ids=tokens,
                num_tokens_before_truncation=before, truncated=truncated, cache_salt=salt,
                salt_mode=session.salt_mode, hit_tokens=result.num_computed_tokens, blocks=blocks,
                evicted_blocks=evicted, at=now,
            )
            from_others = adm.blocks_from_others
            session.prompts += 1
            session.prompt_tokens += adm.num_tokens
            session.hit_tokens += adm.hit_tokens
            session.blocks_from_others += from_others
            session.last = adm
            self._prompts += 1
            self._prompt_tokens += adm.num_tokens
            self._hit_tokens += adm.hit_tokens
            self._cross_hits += from_others
            self._truncated += int(truncated)
            self._feed.append({"prompt_no": adm.prompt_no, "session_id": session_id, "num_tokens": adm.num_tokens,
                               "hit_tokens": adm.hit_tokens, "from_others": from_others, "salted": salt is not None,
                               "at": now, "prefill_ms": None, "wait_ms": None})
            return adm

    def _refuse(self, session_id: object, error: CodedError, retry_after: float = 0.0) -> Admission:
        self._refused += 1
        sid = session_id if isinstance(session_id, str) else ""
        return Admission(ok=False, session_id=sid, error=str(error), error_code=error.code,
                         error_params=dict(error.params), at=self._clock(), retry_after_s=round(retry_after, 2))

    def _outcomes(self, sid: str, tokens: tuple[int, ...], salt: str | None, hit_tokens: int,
                  now: float) -> tuple[BlockOutcome, ...]:
        """Per logical block: reused (with its anonymised origin), computed now, or partial. Records the
        origin of newly cached hashes and counts hits by other sessions."""
        bs = self.limits.block_size
        hashes = self.manager.request_block_hashes(tokens, salt)
        num_hit = hit_tokens // bs
        out: list[BlockOutcome] = []
        for index, start in enumerate(range(0, len(tokens), bs)):
            end = min(start + bs, len(tokens))
            if end - start < bs:
                out.append(BlockOutcome(index, start, end, "partial", None, None, None))
                continue
            h = hashes[index]
            origin = self._origins.get(h)
            if index < num_hit:
                if origin is None:  # defensive: every cached hash has an origin (an invariant)
                    origin = self._origins[h] = BlockOrigin(sid, now)
                who = YOU if origin.session_id == sid else OTHER
                if who == OTHER:
                    origin.hits_by_others += 1
                out.append(BlockOutcome(index, start, end, "hit", h, who, origin.created_at))
                continue
            if origin is None:  # first computed here (a recomputed cached block keeps its first origin)
                self._origins[h] = BlockOrigin(sid, now)
            out.append(BlockOutcome(index, start, end, "computed", h, YOU, now))
        return tuple(out)

    def _trim_events(self) -> None:
        """Keep the manager's event log bounded (the room never replays it)."""
        events = self.manager.events
        if len(events) > self.limits.max_events:
            del events[: len(events) - self.limits.max_events // 2]

    def record_prefill(self, session_id: str, prompt_no: int, prefill_ms: float, reused_tokens: int,
                       wait_ms: float | None = None) -> None:
        """Attach the measured compute time of an admitted prompt's prefill, and its wait for the model
        (kept apart: the room's hit/miss medians compare compute only, so load does not invert them)."""
        if not isinstance(prefill_ms, (int, float)) or not 0 <= prefill_ms < 1e9:
            return
        if not isinstance(wait_ms, (int, float)) or not 0 <= wait_ms < 1e9:
            wait_ms = None
        with self._lock:
            for entry in reversed(self._feed):
                if entry["prompt_no"] == prompt_no and entry["session_id"] == session_id:
                    entry["prefill_ms"] = float(prefill_ms)
                    entry["wait_ms"] = None if wait_ms is None else float(wait_ms)
                    break
            self._timings.append((reused_tokens > 0, float(prefill_ms), None if wait_ms is None else float(wait_ms)))

    def peek(self, token_ids: Sequence[int], cache_salt: str | None = None) -> int:
        """Prompt tokens the room would reuse now for ``token_ids`` under ``cache_salt`` (no change)."""
        with self._lock:
            return self.manager.peek_cache_hit(token_ids, cache_salt).num_computed_tokens

    def block_records(self, token_ids: Sequence[int], cache_salt: str | None = None) -> list[BlockHashRecord]:
        """Every block of ``token_ids`` with its chained hash under the room's hash function and seed."""
        return hash_request_blocks(tuple(token_ids), self.limits.block_size, self.manager.hash_fn,
                                   self.manager.none_hash, cache_salt or None)

    def is_cached(self, block_hash: bytes | None) -> bool:
        with self._lock:
            return block_hash is not None and self.manager.block_pool.get_cached_block(block_hash) is not None

    # ------------------------------------------------------------------ views

    def totals(self) -> RoomTotals:
        with self._lock:
            now = self._clock()
            window = self.limits.active_window_s
            active = [s for s in self._sessions.values() if now - s.last_seen <= window]
            hits = [ms for hit, ms, _ in self._timings if hit]
            misses = [ms for hit, ms, _ in self._timings if not hit]
            waits = [w for _, _, w in self._timings if w is not None]
            snap = self.manager.block_pool
            return RoomTotals(
                sessions_active=len(active),
                sessions_total=len(self._sessions),
                salted_sessions=sum(1 for s in active if s.cache_salt is not None),
                prompts=self._prompts,
                prompt_tokens=self._prompt_tokens,
                hit_tokens=self._hit_tokens,
                cross_session_hits=self._cross_hits,
                shared_blocks=sum(1 for o in self._origins.values() if o.hits_by_others),
                cached_blocks=sum(len(d) for d in snap.cached_block_hash_to_block.values()),
                num_blocks=self.limits.num_blocks,
                block_size=self.limits.block_size,
                evictions=snap.num_evictions,
                refused=self._refused,
                truncated=self._truncated,
                resets=self._resets,
                since_s=now - self._since,
                median_prefill_hit_ms=statistics.median(hits) if hits else None,
                median_prefill_miss_ms=statistics.median(misses) if misses else None,
                prefills_hit=len(hits),
                prefills_miss=len(misses),
                median_wait_ms=statistics.median(waits) if waits else None,
            )

    def feed(self, viewer: str | None, limit: int = 20) -> list[FeedEntry]:
        """The most recent prompts, newest first, anonymised for ``viewer`` (no text, no session ids)."""
        with self._lock:
            now = self._clock()
            entries = list(self._feed)[-limit:][::-1]
            return [FeedEntry(e["prompt_no"], YOU if e["session_id"] == viewer else OTHER, e["num_tokens"],
                              e["hit_tokens"], e["from_others"], e["salted"], now - e["at"], e["prefill_ms"],
                              e.get("wait_ms"))
                    for e in entries]

    def now(self) -> float:
        return self._clock()

    # ------------------------------------------------------------------ presenter

    def add_reset_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` after every reset (the model side clears the room's KV store this way)."""
        with self._lock:
            self._reset_hooks.append(hook)

    def reset(self, presenter_key: str | None = None, *, force: bool = False) -> ResetResult:
        """The presenter's reset: an empty pool, no origins, zero totals (sessions and their salt
        settings stay). Needs ``presenter_key`` when the room has one; refused within the cool-down.
        ``force`` skips both checks and starts no cool-down (tests, the CLI)."""
        with self._lock:
            now = self._clock()
            if not force:
                if self.presenter_key is not None and not (presenter_key or "").strip():
                    return ResetResult(False, "the presenter key is needed", error_code="presenter_key_missing")
                if self.presenter_key is not None and not hmac.compare_digest(
                        (presenter_key or "").encode(), self.presenter_key.encode()):
                    return ResetResult(False, "wrong presenter key", error_code="presenter_key")
                wait = self._last_reset + self.limits.reset_cooldown_s - now
                if wait > 0:
                    return ResetResult(False, f"reset cool-down: wait {wait:.1f} s", error_code="reset_soon",
                                       error_params={"wait": round(wait, 2)})
            dropped = len(self._origins)
            self._fresh_state(now)
            for s in self._sessions.values():
                s.prompts = s.prompt_tokens = s.hit_tokens = s.blocks_from_others = 0
                s.last = None
            self.generation += 1
            self._resets += 1
            if not force:  # a forced reset (tests, the CLI) does not start the presenter's cool-down
                self._last_reset = now
            hooks = list(self._reset_hooks)
        for hook in hooks:
            hook()
        return ResetResult(True, None, dropped)

    # ------------------------------------------------------------------ invariants

    def check_invariants(self) -> None:
        """Raise AssertionError when a room invariant (module docstring) is broken."""
        with self._lock:
            pool = self.manager.block_pool
            pool.check_invariants()
            assert not self.manager.request_ids, f"requests still running: {self.manager.request_ids}"
            assert pool.get_num_free_blocks() == pool.num_usable_blocks, "a block is still referenced"
            cached = set(pool.cached_block_hash_to_block)
            assert set(self._origins) == cached, "origins differ from the cached hashes"
            c = self.manager.counters
            assert c.requests == self._prompts, (c.requests, self._prompts)
            assert c.prompt_tokens == self._prompt_tokens and c.hit_tokens == self._hit_tokens
            assert 0 <= self._hit_tokens <= self._prompt_tokens
            assert self._cross_hits * self.limits.block_size <= self._hit_tokens
            assert len(self._sessions) <= self.limits.max_sessions
            assert len(self.manager.events) <= self.limits.max_events
            assert len(self._feed) <= self.limits.feed_size
            assert len(self._timings) <= self.limits.timing_history
