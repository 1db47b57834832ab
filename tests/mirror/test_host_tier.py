"""The mirror's host tier (KVCacheManager(host_blocks=...), kvviz.mirror.offloading over the shared
kvviz.mirror.host_pool): a block is stored once full, a prompt loads from it what the device pool lost, LRU
eviction keeps a request's head longest, a store that cannot make room is skipped, the events carry medium
CPU, a replay rebuilds the tier, and under random traces every invariant holds and every block ends free."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.analysis.scenarios.load import load_builtin
from kvviz.analysis.scenarios.play import play_scenario
from kvviz.mirror.events import EventKind
from kvviz.mirror.kv_events import MEDIUM_CPU, BlockRemoved, BlockStored
from kvviz.mirror.manager import KVCacheManager

BS = 4
A = list(range(1, 14))  # 13 tokens: 3 full blocks and a partial one
B = list(range(100, 117))  # 17 tokens: 4 full blocks and a partial one


def kinds(result) -> list[str]:
    return [e.kind.value for e in result.events]


def host_events(m: KVCacheManager, kind: EventKind) -> list:
    return [e for e in m.events if e.kind is kind]


def test_a_block_is_stored_once_full_and_the_partial_one_never():
    m = KVCacheManager(8, BS, host_blocks=8)
    r = m.add_request("a", A[:9])  # 2 full blocks, 1 token over
    store = r.events[-1]
    assert store.kind is EventKind.HOST_STORE and store.params["stored"] == [0, 1]
    assert len(m.snapshot().host.lru) == 2
    r = m.append_tokens("a", A[9:11])  # 11 tokens: block 2 not full yet, nothing offered
    assert EventKind.HOST_STORE.value not in kinds(r)
    r = m.append_tokens("a", A[11:12])  # 12 tokens: block 2 full, offered alone (its own parent)
    store = r.events[-1]
    assert store.kind is EventKind.HOST_STORE and store.params["stored"] == [2] and store.positions == (2,)
    (stored,) = store.kv_events
    assert isinstance(stored, BlockStored) and stored.medium == MEDIUM_CPU
    assert stored.parent_block_hash == m.request_block_hashes(A[:12])[1]
    assert stored.token_ids == A[8:12]


def test_a_prompt_loads_from_host_what_the_device_pool_lost():
    m = KVCacheManager(6, BS, host_blocks=8)  # 5 usable device blocks
    m.add_request("a", A)
    m.free_request("a")
    m.add_request("b", B)  # needs all 5 blocks: a's cached blocks are evicted from the device
    m.free_request("b")
    assert m.peek_cache_hit(A).num_computed_tokens == 0
    r = m.add_request("a2", A)
    assert r.ok and r.num_computed_tokens == 0  # no device hit
    (load,) = [e for e in r.events if e.kind is EventKind.HOST_LOAD]
    assert load.positions == (0, 1, 2) and load.num_tokens == 12  # 3 full blocks, the 13th token computed
    assert list(load.block_ids) == list(r.new_block_ids[:3])
    miss = next(e for e in r.events if e.kind is EventKind.MISS)
    assert miss.code == "miss_host" and miss.params == {"tokens": 1, "loaded": 12, "index": 3}
    c = m.counters
    assert c.host_hit_tokens == 12 and c.hit_tokens == 0
    assert c.computed_tokens == len(A) + len(B) + 1  # a, b computed whole; a2 only its last token
    # the loaded blocks are cached on the device like computed ones: a third copy hits the device
    assert m.peek_cache_hit(A).num_computed_tokens == 12
    # loaded blocks were in the host tier already: the admission's offer only touches them
    store = r.events[-1]
    assert store.code == "host_store_held" and store.params["held"] == 3


def test_the_last_prompt_token_is_never_loaded():
    m = KVCacheManager(4, BS, host_blocks=4)
    m.add_request("a", A[:8])  # exactly 2 full blocks
    m.free_request("a")
    m.add_request("x", list(range(50, 62)))  # 3 blocks: evicts a's two from the device
    m.free_request("x")
    r = m.add_request("a2", A[:8])
    (load,) = [e for e in r.events if e.kind is EventKind.HOST_LOAD]
    assert load.positions == (0,) and load.num_tokens == 4  # block 1 holds the last token: computed


def test_lru_eviction_drops_a_tail_first_and_a_full_offer_is_skipped():
    m = KVCacheManager(16, BS, host_blocks=4)
    m.add_request("a", A[:8])  # host: a0 a1
    m.free_request("a")
    h = m.request_block_hashes(A[:8])
    r = m.add_request("b", B[:12])  # 3 new blocks, one slot free: one of a's dropped, its tail
    (evict,) = [e for e in r.events if e.kind is EventKind.HOST_EVICT]
    assert evict.block_hashes == (h[1],)
    (removed,) = evict.kv_events
    assert isinstance(removed, BlockRemoved) and removed.medium == MEDIUM_CPU
    assert m.snapshot().host.held == {h[0], *m.request_block_hashes(B[:12])}
    # an offer larger than the tier can ever take: skipped whole, nothing evicted
    r = m.add_request("c", list(range(200, 221)))  # 5 full blocks > 4 host blocks
    assert [e.code for e in r.events if e.kind is EventKind.HOST_STORE] == ["host_store_skipped"]
    assert not [e for e in r.events if e.kind is EventKind.HOST_EVICT]
    assert m.snapshot().host.skipped == 1


def test_reset_clears_the_host_tier_and_replay_rebuilds_it():
    m = KVCacheManager(8, BS, host_blocks=6)
    m.add_request("a", A)
    assert not m.reset_prefix_cache()  # refused while a holds blocks: the tier is kept
    assert len(m.snapshot().host.lru) == 3
    m.free_request("a")
    assert m.reset_prefix_cache()
    assert m.snapshot().host.lru == ()
    assert m.replay() == m.snapshot()


def test_the_engine_uses_the_mirrors_host_pool():
    from kvviz.engine import offload
    from kvviz.mirror import host_pool

    assert offload.HostBlockPool is host_pool.HostBlockPool and offload.StoreMeta is host_pool.StoreMeta


def test_scenario_host_tier_is_off_by_default_and_serves_a_lost_prefix():
    base = load_builtin("pool_pressure")
    assert base.host_blocks is None
    plain = play_scenario(base)
    tier = play_scenario(base.with_host_tier(16))
    end = tier.counters_at(tier.num_steps)
    assert end["host_hit_tokens"] > 0 and "host_hit_tokens" not in plain.counters_at(plain.num_steps)
    assert end["computed_tokens"] == plain.counters_at(plain.num_steps)["computed_tokens"] - end["host_hit_tokens"]
    hits = tier.hits_by_source(tier.num_steps)
    assert sum(r.host for r in hits) == end["host_hit_tokens"]
    assert all(r.device + r.host + r.computed == r.prompt for r in hits)
    loaded = next(k for k in range(1, tier.num_steps + 1)
                  if any(e.kind is EventKind.HOST_LOAD for e in tier.events_of_step(k)))
    view = tier.view_at(loaded)
    assert any(row.source == "host" for req in view.requests for row in req.rows)


# -- random traces ----------------------------------------------------------------------------
PREFIXES = [(), (0, 1, 2, 0, 1, 2, 0, 1), (2, 2, 1, 1, 0, 0, 2, 2), (0, 1, 2, 0, 1)]
tokens = st.builds(lambda p, s: list(p) + s, st.sampled_from(PREFIXES),
                   st.lists(st.integers(0, 2), max_size=8)).filter(bool)
op = st.one_of(
    st.tuples(st.just("add"), tokens, st.integers(0, 7)),
    st.tuples(st.just("add"), tokens, st.integers(0, 7)),
    st.tuples(st.just("append"), st.lists(st.integers(0, 2), min_size=1, max_size=5), st.integers(0, 7)),
    st.tuples(st.just("free"), st.just([]), st.integers(0, 7)),
    st.tuples(st.just("free"), st.just([]), st.integers(0, 7)),
    st.tuples(st.just("reset"), st.just([]), st.just(0)),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=6, max_size=30), st.integers(3, 8), st.integers(1, 6), st.sampled_from(["lru", "arc"]))
def test_random_traces_keep_both_tiers_consistent(trace, num_blocks, host_blocks, policy):
    m = KVCacheManager(num_blocks, BS, host_blocks=host_blocks, host_eviction_policy=policy)
    for n, (kind, toks, pick) in enumerate(trace):
        running = m.request_ids
        if kind == "add":
            r = m.add_request(f"r{n}", toks)
        elif kind == "reset":
            m.reset_prefix_cache()
            r = None
        elif running:
            rid = running[pick % len(running)]
            r = m.append_tokens(rid, toks) if kind == "append" else m.free_request(rid)
        else:
            r = None
        m.block_pool.check_invariants()
        m.host.pool.check_invariants()
        state = m.snapshot()
        assert state == m.replay()  # the host tier too, rebuilt from the events
        for e in (r.events if r is not None else ()):
            if e.kind is EventKind.HOST_LOAD:  # what is loaded was held, ends where the device hit ends
                assert e.num_tokens == len(e.block_ids) * BS
            for kv in e.kv_events if e.kind in (EventKind.HOST_STORE, EventKind.HOST_EVICT) else ():
                assert kv.medium == MEDIUM_CPU
        c = state.counters
        assert c.hit_tokens + c.host_hit_tokens <= c.prompt_tokens
    for rid in m.request_ids:
        m.free_request(rid)
    end = m.snapshot()
    assert all(r == 0 for r in end.ref_cnt) and len(end.free_queue) == num_blocks - 1  # every block free
    m.host.pool.check_invariants()  # nothing pinned or pending; free + held = capacity
    assert m.host.pool.num_free + len(end.host.lru) == host_blocks
    assert not m.host.pool._access  # every request's accesses were applied at its finish (ARC)
