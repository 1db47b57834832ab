"""Property tests over random request traces: pool invariants, replay, hit correctness, radix agreement."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.analysis.prompt_compare import compare_prompts
from kvviz.mirror.events import EventKind
from kvviz.mirror.manager import KVCacheManager
from kvviz.mirror.radix import RadixCache

# Prompts share one of a few prefixes so that hits, sharing and evictions are common.
PREFIXES = [(), (0, 1, 2, 0, 1, 2, 0, 1), (2, 2, 1, 1, 0, 0, 2, 2), (0, 1, 2, 0, 1)]
suffix = st.lists(st.integers(0, 2), max_size=6)
tokens = st.builds(lambda p, s: list(p) + s, st.sampled_from(PREFIXES), suffix).filter(bool)
# (op, tokens, salt, pick): add starts a new request; append/free act on running request pick % n.
add = st.tuples(st.just("add"), tokens, st.sampled_from([None, None, "s"]), st.just(0))
op = st.one_of(
    add,
    add,
    st.tuples(st.just("append"), st.lists(st.integers(0, 2), min_size=1, max_size=5), st.none(),
              st.integers(0, 7)),
    st.tuples(st.just("free"), st.just([]), st.none(), st.integers(0, 7)),
    st.tuples(st.just("reset"), st.just([]), st.none(), st.just(0)),  # reset_prefix_cache
)
trace = st.lists(op, min_size=8, max_size=30)
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def apply(m: KVCacheManager, step, salts: dict | None = None) -> object | None:
    """Apply one step to the manager; None when there is no running request to act on."""
    kind, toks, salt, pick = step
    if kind == "reset":
        first = len(m.events)
        ok = m.reset_prefix_cache()
        assert ok == (not m.request_ids)  # refused exactly while some request holds blocks
        return _Reset(ok, tuple(m.events[first:]))
    if kind == "add":
        rid = f"r{len(m.events)}"
        if salts is not None:
            salts[rid] = salt
        return m.add_request(rid, toks, salt)
    running = m.request_ids
    if not running:
        return None
    rid = running[pick % len(running)]
    return m.append_tokens(rid, toks) if kind == "append" else m.free_request(rid)


class _Reset:
    def __init__(self, ok: bool, events: tuple) -> None:
        self.ok, self.events = ok, events


def check_invariants(m: KVCacheManager, prefix_of: dict[bytes, tuple]) -> None:
    m.block_pool.check_invariants()
    state = m.snapshot()
    assert all(r >= 0 for r in state.ref_cnt)
    in_queue = set(state.free_queue)
    # Block 0 is the null block: never in the free queue, never referenced, never cached.
    assert 0 not in in_queue and state.ref_cnt[0] == 0 and state.block_hash[0] is None
    assert all((state.ref_cnt[b] == 0) == (b in in_queue) for b in range(1, m.num_blocks))
    used = sum(1 for r in state.ref_cnt if r > 0)
    assert len(state.free_queue) + used == m.num_blocks - 1 == state.num_usable

    # ref_cnt = number of running requests whose table holds the block.
    holders = [0] * m.num_blocks
    for rid in m.request_ids:
        for entry in m.block_table(rid):
            if entry.block_id is not None:
                holders[entry.block_id] += 1
    assert tuple(holders) == state.ref_cnt
    # The hash map and the blocks' hashes agree.
    for h, block_ids in state.hash_to_blocks.items():
        assert block_ids and all(state.block_hash[b] == h for b in block_ids)
    assert sorted(b for ids in state.hash_to_blocks.values() for b in ids) == state.cached_block_ids
    # A held block's hash is the request's own chained hash at that position.
    for rid in m.request_ids:
        toks = m.request_tokens(rid)
        for entry in m.block_table(rid):
            h = state.block_hash[entry.block_id] if entry.block_id is not None else None
            if h is not None:
                assert prefix_of[h][0] == toks[: entry.end]


def record_and_check_hits(m: KVCacheManager, result, prefix_of: dict[bytes, tuple], salts: dict) -> None:
    for ev in result.events:
        if ev.kind is EventKind.CACHE:
            toks = m.request_tokens(ev.request_id)
            for pos, h in zip(ev.positions, ev.block_hashes, strict=True):
                entry = (toks[: (pos + 1) * m.block_size], salts[ev.request_id])
                assert prefix_of.setdefault(h, entry) == entry  # no two prefixes share a hash
        if ev.kind is EventKind.HIT:
            # Every hit's token prefix (and salt) equals the request that cached the block.
            toks = m.request_tokens(ev.request_id)
            for pos, h in zip(ev.positions, ev.block_hashes, strict=True):
                assert prefix_of[h] == (toks[: (pos + 1) * m.block_size], salts[ev.request_id])


@SETTINGS
@given(trace=trace, num_blocks=st.integers(2, 24), block_size=st.integers(1, 4),
       window=st.sampled_from([None, None, 2, 5]))
def test_pool_invariants_and_replay(trace, num_blocks, block_size, window):
    m = KVCacheManager(num_blocks, block_size=block_size, sliding_window=window)
    prefix_of: dict[bytes, tuple] = {}
    salts: dict[str, str | None] = {}
    boundaries = [0]
    for step in trace:
        result = apply(m, step, salts)
        if result is None:
            continue
        if isinstance(result, _Reset):
            assert [e.kind for e in result.events] == [EventKind.RESET]
            if result.ok:
                assert not m.snapshot().cached_block_ids
        elif result.ok:
            record_and_check_hits(m, result, prefix_of, salts)
        else:
            assert [e.kind for e in result.events] == [EventKind.REFUSE]
        check_invariants(m, prefix_of)
        boundaries.append(len(m.events))
        assert m.replay() == m.snapshot()
    # Replaying any prefix of the log gives the state at that step (checked at step boundaries).
    states = [m.replay(k) for k in boundaries]
    assert states[-1] == m.snapshot()
    assert all(s.num_events == k for s, k in zip(states, boundaries, strict=True))


@SETTINGS
@given(trace=trace, block_size=st.integers(1, 4), query=tokens)
def test_radix_and_pool_agree_without_eviction(trace, block_size, query):
    m = KVCacheManager(200, block_size=block_size)  # large enough: nothing is ever evicted
    tree = RadixCache(page_size=block_size)
    for kind, toks, _salt, pick in trace:
        if kind == "reset":
            continue  # the radix tree has no reset
        result = apply(m, (kind, toks, None, pick))
        if result is not None and kind in ("add", "append"):
            assert result.ok
            tree.insert(m.request_tokens(result.request_id))
    assert m.snapshot().counters.evictions == 0
    pool_hit = m.peek_cache_hit(query, cap=False).num_computed_tokens
    assert tree.match_prefix(query).length == pool_hit


@settings(max_examples=60, deadline=None)
@given(a=tokens, b=tokens, block_size=st.integers(1, 4), salt=st.sampled_from([None, "x"]))
def test_compare_agrees_with_manager(a, b, block_size, salt):
    cmp = compare_prompts(a, b, block_size=block_size, salt_b=salt)
    m = KVCacheManager(64, block_size=block_size)
    m.add_request("a", a)
    assert m.add_request("b", b, cache_salt=salt).num_computed_tokens == cmp.reused_tokens
    assert cmp.reused_tokens + cmp.recompute_tokens == len(b)
    if salt is None:
        assert cmp.reused_tokens <= cmp.common_prefix_tokens
    statuses = [blk.status for blk in cmp.blocks]
    # Hits form a prefix; after the first non-hit nothing can hit (the chain).
    first_non_hit = next((i for i, s in enumerate(statuses) if s != "hit"), len(statuses))
    assert "hit" not in statuses[first_non_hit:]
