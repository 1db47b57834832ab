"""The session runner: tokenizes each rendered request and runs it through the engine or a provider policy."""

from __future__ import annotations

from kvviz.analysis.providers import get_policy
from kvviz.experiments.sessions.policy import CheckpointCache, policy_turn
from kvviz.experiments.sessions.render import Segment, render_request
from kvviz.experiments.sessions.results import SegmentSpan, SessionResult, TurnUsage, cumulative_work
from kvviz.experiments.sessions.schema import MARKS, MAX_SESSION_TOKENS, Session, SessionError, Tokenizer
from kvviz.experiments.sessions.session_events import NO_EVENTS, SessionEvents, apply_events
from kvviz.mirror import limits
from kvviz.mirror.events import EventKind
from kvviz.mirror.manager import MAX_NUM_BLOCKS, KVCacheManager

# ---------------------------------------------------------------- the runner


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _spans(segments: list[Segment], ids: list[list[int]]) -> tuple[SegmentSpan, ...]:
    spans, pos = [], 0
    for seg, seg_ids in zip(segments, ids, strict=True):
        spans.append(SegmentSpan(seg.kind, seg.label, pos, pos + len(seg_ids), seg.turn))
        pos += len(seg_ids)
    return tuple(spans)



def default_tokenizer() -> Tokenizer:
    """The embedded model's tokenizer, one segment at a time (imported lazily: it loads transformers)."""
    from kvviz.model import MAX_TOKENS_CEILING, tokenize

    return lambda text: tokenize(text, max_tokens=MAX_TOKENS_CEILING).ids


def run_session(
    session: Session,
    policy: str = "anthropic-5m",
    events: SessionEvents = NO_EVENTS,
    *,
    block_size: int = limits.DEFAULT_BLOCK_SIZE,
    marks: tuple[str, ...] = MARKS,
    min_cacheable_tokens: int | None = None,
    ttl_s: float | None | str = "policy",
    pool_blocks: int | None = None,
    tokenizer: Tokenizer | None = None,
) -> SessionResult:
    """Run every turn of ``session`` under ``policy`` and return the per-turn usage.

    ``min_cacheable_tokens`` and ``ttl_s`` override the policy's values (ttl_s None = no TTL);
    ``pool_blocks`` sizes the engine's block pool (default: big enough that nothing is evicted)."""
    pol = get_policy(policy)
    try:
        block_size = limits.block_size(block_size)
    except ValueError:
        low, high = limits.MIN_BLOCK_SIZE, limits.MAX_BLOCK_SIZE
        raise SessionError(f"block size must be in {low}..{high}, got {block_size!r}", "bad_block_size",
                           low=low, high=high, got=repr(block_size)) from None
    bad_marks = [m for m in marks if m not in MARKS]
    if bad_marks:
        choices = ", ".join(MARKS)
        raise SessionError(f"unknown checkpoint mark {bad_marks[0]!r}; choose from {choices}", "bad_mark",
                           mark=bad_marks[0], choices=choices)
    min_len = pol.min_cacheable_tokens if min_cacheable_tokens is None else min_cacheable_tokens
    if isinstance(min_len, bool) or not isinstance(min_len, int) or not 0 <= min_len <= MAX_SESSION_TOKENS:
        raise SessionError(f"min_cacheable_tokens must be an integer in 0..{MAX_SESSION_TOKENS:,}",
                           "bad_min_cacheable", high=MAX_SESSION_TOKENS)
    ttl = pol.ttl_s if ttl_s == "policy" else ttl_s
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= 1e7):
        raise SessionError("ttl_s must be a positive number of seconds or None", "bad_ttl")
    if not pol.is_policy:
        min_len, ttl = 0, None  # the engine has neither: only full blocks and LRU eviction
    changed, event_turns = apply_events(session, events)
    tok = tokenizer or default_tokenizer()
    memo: dict[str, list[int]] = {}

    def ids_of(text: str) -> list[int]:
        if text not in memo:
            memo[text] = list(tok(text))
        return memo[text]

    rendered = []
    total = 0
    for k in range(1, len(changed.turns) + 1):
        segments, answer = render_request(changed, k, events)
        seg_ids = [ids_of(s.text) for s in segments]
        ans_ids = ids_of(answer.text)
        total += sum(map(len, seg_ids)) + len(ans_ids)
        if total > MAX_SESSION_TOKENS:
            raise SessionError(f"the session re-sends more than {MAX_SESSION_TOKENS:,} tokens in total",
                               "too_many_tokens", limit=MAX_SESSION_TOKENS)
        rendered.append((segments, seg_ids, ans_ids))

    manager = None
    store = CheckpointCache(block_size)
    if not pol.is_policy:
        need = sum(-(-(sum(map(len, s)) + len(a)) // block_size) for _, s, a in rendered) + 8
        blocks = pool_blocks or min(need, MAX_NUM_BLOCKS)
        try:
            manager = KVCacheManager(blocks, block_size=block_size)
        except ValueError as exc:
            raise SessionError(f"the engine pool of {blocks:,} blocks cannot be built: {exc}", "bad_pool",
                               blocks=blocks, detail=str(exc)) from None

    turns: list[TurnUsage] = []
    now = 0.0
    previous: list[int] = []
    for k, (segments, seg_ids, ans_ids) in enumerate(rendered, start=1):
        turn = changed.turns[k - 1]
        now += turn.gap_s if k > 1 else 0.0
        prompt = [t for ids in seg_ids for t in ids]
        spans = _spans(segments, seg_ids)
        common = _common_prefix(previous, prompt)
        diff = None
        turn_events = list(event_turns.get(k, []))
        if k > 1 and common < len(previous):
            where = next((s for s in spans if s.start <= common < s.end), None)
            diff = where.label if where else None
            if events.unstable_json and where is not None and where.kind == "assistant":
                turn_events.append("unstable_json")  # an earlier tool call came out in a new key order
        expired = 0
        if manager is not None:
            read, written = _engine_turn(manager, f"turn-{k}", prompt, ans_ids, block_size)
        else:
            expired = store.expire(now)
            read, written = policy_turn(store, pol, marks, spans, prompt, now, ttl, min_len, block_size)
        turns.append(TurnUsage(
            turn=k, at_s=now, prompt_tokens=len(prompt), answer_tokens=len(ans_ids),
            cache_read_input_tokens=read, cache_creation_input_tokens=written,
            input_tokens=len(prompt) - read - written, common_prefix=common, first_difference=diff,
            expired_entries=expired, events=tuple(turn_events), segments=spans,
        ))
        previous = prompt + ans_ids
    without, with_cache = cumulative_work(turns)
    return SessionResult(
        session=session.name, title=session.title, policy=pol, block_size=block_size, marks=tuple(marks),
        min_cacheable_tokens=min_len, ttl_s=ttl, events=events, turns=turns,
        cumulative_without_cache=without, cumulative_with_cache=with_cache,
    )


def _engine_turn(manager: KVCacheManager, rid: str, prompt: list[int], answer: list[int],
                 block_size: int) -> tuple[int, int]:
    """One request through the real block manager: (tokens read, tokens written) from its events."""
    added = manager.add_request(rid, prompt)
    if not added.ok:
        raise SessionError(f"the engine pool is too small for {rid}: {added.error}", "pool_too_small", request=rid,
                           reason=str(added.error))
    written = sum(len(e.block_ids) for e in added.events if e.kind is EventKind.CACHE) * block_size
    if answer:
        manager.append_tokens(rid, answer)  # decoding fills and caches blocks with the answer
    manager.free_request(rid)
    return added.num_computed_tokens, written
