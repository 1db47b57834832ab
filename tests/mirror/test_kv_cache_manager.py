"""KV-cache manager: lookup cap, allocation, decode, freeing order, refusal, salt, sliding window, events."""

from __future__ import annotations

import pytest

from kvviz.mirror.block_pool import KVCacheBlock
from kvviz.mirror.events import EventKind
from kvviz.mirror.hashing import hash_block_chain, init_none_hash
from kvviz.mirror.manager import (
    KVCacheManager,
    find_longest_cache_hit,
    find_longest_cache_hit_sliding_window,
)
from kvviz.mirror.replay import replay


def test_vllm_example_block_size_4():
    m = KVCacheManager(16, block_size=4)
    m.add_request("A", list(range(1, 13)))
    r = m.add_request("B", list(range(1, 11)) + [13, 14])
    assert r.num_computed_tokens == 8 and len(r.hit_block_ids) == 2


def test_full_hit_is_capped_at_num_tokens_minus_one():
    m = KVCacheManager(16, block_size=4)
    m.add_request("a", list(range(12)))
    m.free_request("a")
    r = m.add_request("b", list(range(12)))  # all 3 blocks cached, but the last token is recomputed
    assert r.num_computed_tokens == 8 and r.hit_block_ids == (1, 2)  # block 0 is the null block
    miss = [e for e in r.events if e.kind is EventKind.MISS][0]
    assert miss.num_tokens == 4 and miss.code == "miss_capped" and miss.params == {"tokens": 4}
    r = m.add_request("c", list(range(13)))  # one more token: all 3 blocks reused
    assert r.num_computed_tokens == 12


def test_partial_block_never_hits():
    m = KVCacheManager(8, block_size=4)
    m.add_request("a", [1, 2, 3, 4, 5, 6])
    m.free_request("a")
    assert m.peek_cache_hit([1, 2, 3, 4, 5, 6, 7, 8, 9], cap=False).num_computed_tokens == 4


def test_tail_first_eviction_order():
    m = KVCacheManager(7, block_size=4)
    m.add_request("a", list(range(1, 13)))  # blocks 1,2,3, all cached (0 is the null block)
    m.free_request("a")
    assert m.snapshot().free_queue == (4, 5, 6, 3, 2, 1)  # reverse order: tail block 3 before head 1
    r = m.add_request("b", list(range(100, 116)))  # 4 blocks: 4,5,6 then evicts a's tail block 3
    assert r.new_block_ids == (4, 5, 6, 3) and r.evicted_block_ids == (3,)
    m.free_request("b")
    r = m.add_request("a2", list(range(1, 13)) + [7, 7, 7, 7])
    assert r.hit_block_ids == (1, 2)  # the head of a's chain survived


def test_refused_allocation_changes_nothing():
    m = KVCacheManager(4, block_size=4)
    m.add_request("a", list(range(8)))
    before = m.snapshot()
    n_events = len(m.events)
    r = m.add_request("b", list(range(100, 112)))
    assert not r.ok and r.error == "refuse" and r.events[-1].params == {"needed": 3, "free": 1}
    after = m.snapshot()
    assert after.ref_cnt == before.ref_cnt and after.free_queue == before.free_queue
    assert after.block_hash == before.block_hash and after.requests == before.requests
    assert after.counters.refused == 1 and "b" not in m.request_ids
    assert [e.kind for e in m.events[n_events:]] == [EventKind.REFUSE]


def test_refusal_counts_hit_blocks_that_must_leave_the_free_queue():
    # vLLM counts a hit on a free (ref_cnt 0) block as consuming a free block.
    m = KVCacheManager(4, block_size=4)
    m.add_request("a", list(range(9)))  # blocks 1,2,3; 1 and 2 cached
    m.free_request("a")
    m.add_request("x", [50])  # the queue is [3, 2, 1]: pops block 3 (an uncached partial block)
    r = m.add_request("c", list(range(9)))  # hits 1,2 (both free) + 1 new block = 3 > 2 free
    assert not r.ok and r.events[-1].params == {"needed": 3, "free": 2}
    r = m.add_request("d", list(range(8)))  # cap 7 tokens: hits 1 + 1 new block = 2 free blocks
    assert r.ok and r.hit_block_ids == (1,) and r.new_block_ids == (2,) and r.evicted_block_ids == (2,)


def test_full_num_tokens_refuses_unless_the_whole_sequence_fits_and_allocates_only_the_chunk():
    """vLLM 0.33.0's allocate_slots(full_sequence_must_fit=True): the whole sequence less the hit (plus hit
    blocks leaving the free queue) must fit; the pool is unchanged on refusal; only the chunk gets blocks."""
    m = KVCacheManager(4, block_size=4)
    m.add_request("a", list(range(9)))  # blocks 1,2,3; 1 and 2 cached
    m.free_request("a")
    m.add_request("x", [50])  # pops block 3: free 2, 1 (both cached)
    before, n_events = m.snapshot(), len(m.events)
    r = m.add_request("c", list(range(5)), full_num_tokens=9)  # chunk: hit 1 + 1 new = 2 fit; whole: 3 do not
    assert not r.ok and r.error == "refuse" and r.events[-1].params == {"needed": 3, "free": 2}
    assert r.events[-1].num_tokens == 9 and m.snapshot().free_queue == before.free_queue
    assert [e.kind for e in m.events[n_events:]] == [EventKind.REFUSE] and "c" not in m.request_ids
    r = m.add_request("d", list(range(5)), full_num_tokens=8)  # whole 8: hit 1 + 1 new = 2 blocks
    assert r.ok and r.hit_block_ids == (1,) and r.new_block_ids == (2,) and m.num_tokens("d") == 5
    m.free_request("d")
    m.add_request("y", [60, 61, 62, 63, 64])  # blocks 2 and 1, evicted: free 0
    m.free_request("x")  # block 3 is the one free block
    held = m.add_request("e", [60, 61, 62, 63, 1], full_num_tokens=5)  # hit on y's held block 2: needs 1 block
    assert held.ok and held.hit_block_ids == (2,) and held.new_block_ids == (3,)


@pytest.mark.parametrize("bad", [3, -1, 2.5, True, "9"])
def test_full_num_tokens_below_the_chunk_or_not_an_int_is_a_value_error(bad):
    with pytest.raises(ValueError, match="full_num_tokens"):
        KVCacheManager(8, block_size=4).add_request("a", list(range(5)), full_num_tokens=bad)


def test_full_num_tokens_with_a_sliding_window_is_refused_as_not_mirrored():
    with pytest.raises(ValueError, match="full attention only"):
        KVCacheManager(8, block_size=4, sliding_window=4).add_request("a", list(range(5)), full_num_tokens=9)


def test_salt_isolation_shares_zero_blocks():
    m = KVCacheManager(16, block_size=4)
    text = list(range(20))
    a = m.add_request("alice", text, cache_salt="alice")
    b = m.add_request("bob", text, cache_salt="bob")
    assert b.num_computed_tokens == 0 and not set(a.new_block_ids) & set(b.new_block_ids)
    assert m.snapshot().shared_blocks == 0
    c = m.add_request("alice2", text, cache_salt="alice")
    assert c.num_computed_tokens == 16
    assert m.add_request("nosalt", text).num_computed_tokens == 0


def test_shared_blocks_show_ref_cnt_above_one():
    m = KVCacheManager(16, block_size=4)
    m.add_request("a", list(range(10)))
    r = m.add_request("b", list(range(10)) + [99])
    state = m.snapshot()
    assert [state.ref_cnt[i] for i in r.hit_block_ids] == [2, 2]
    assert state.shared_blocks == 2 and state.state_of(1) == "used" and state.state_of(0) == "null"


def test_decode_fills_and_caches_blocks():
    m = KVCacheManager(8, block_size=4)
    m.add_request("a", [1, 2, 3, 4, 5])  # blocks 1 (cached) and 2 (1 token)
    r = m.append_tokens("a", [6, 7])
    assert r.new_block_ids == () and r.cached_block_ids == ()
    assert [e.kind for e in r.events] == [EventKind.ALLOCATE]  # allocate_slots with no new block
    r = m.append_tokens("a", [8, 9])
    assert r.cached_block_ids == (2,) and r.new_block_ids == (3,)
    assert m.block_pool.blocks[2].block_hash == m.request_block_hashes([1, 2, 3, 4, 5, 6, 7, 8, 9])[1]
    # Another prompt that includes the generated tokens hits them.
    assert m.add_request("b", [1, 2, 3, 4, 5, 6, 7, 8, 0]).num_computed_tokens == 8


def test_block_table_spans():
    m = KVCacheManager(8, block_size=4)
    m.add_request("a", list(range(10)))
    table = m.block_table("a")
    assert [(e.index, e.block_id, e.start, e.end) for e in table] == [(0, 1, 0, 4), (1, 2, 4, 8), (2, 3, 8, 10)]
    assert m.snapshot().block_table("a") == table


def test_snapshot_states_and_counters():
    m = KVCacheManager(5, block_size=2)
    m.add_request("a", [1, 2, 3])  # blocks 1 (full, cached) and 2 (partial)
    m.free_request("a")
    s = m.snapshot()
    assert [b.state for b in s.blocks] == ["null", "cached", "free", "free", "free"]
    # vLLM frees [2, 1]: the unhashed partial block 2 jumps to the head, cached block 1 to the tail.
    assert s.free_queue == (2, 3, 4, 1) and s.cached_block_ids == [1]
    c = s.counters
    assert (c.requests, c.prompt_tokens, c.hit_tokens, c.computed_tokens) == (1, 3, 0, 3)
    d = s.to_dict()
    assert d["counters"]["shared_blocks"] == 0 and d["blocks"][1]["hash"] == s.block_hash[1].hex()


def test_free_request_frees_in_reverse_order():
    m = KVCacheManager(5, block_size=1)
    m.add_request("a", [1, 2, 3])
    r = m.free_request("a")
    assert r.freed_block_ids == (3, 2, 1)
    assert m.snapshot().free_queue == (4, 3, 2, 1)


def test_user_errors_raise_without_events():
    m = KVCacheManager(4, block_size=2)
    m.add_request("a", [1])
    n = len(m.events)
    for call in (
        lambda: m.add_request("a", [1]),  # duplicate running id
        lambda: m.add_request("", [1]),
        lambda: m.add_request("b", []),
        lambda: m.add_request("b", [-1]),
        lambda: m.add_request("b", [1], cache_salt=5),
        lambda: m.append_tokens("zz", [1]),
        lambda: m.append_tokens("a", []),
        lambda: m.free_request("zz"),
    ):
        with pytest.raises(ValueError):
            call()
    assert len(m.events) == n


@pytest.mark.parametrize("kwargs", [
    {"num_blocks": 0}, {"num_blocks": 1}, {"num_blocks": 10**9},
    {"num_blocks": 4, "hash_name": "md5"}, {"num_blocks": 4, "sliding_window": 1},
])  # block sizes are checked at the edge (test_limits.py)
def test_manager_config_validation(kwargs):
    with pytest.raises(ValueError):
        KVCacheManager(**kwargs)


def test_append_refused_when_pool_is_full():
    m = KVCacheManager(3, block_size=2)
    m.add_request("a", [1, 2, 3, 4])
    before = m.snapshot()
    r = m.append_tokens("a", [5])
    assert not r.ok and m.snapshot().ref_cnt == before.ref_cnt
    assert m.request_tokens("a") == (1, 2, 3, 4)


def test_replay_equals_live_state_after_every_event():
    m = KVCacheManager(6, block_size=2)
    m.add_request("a", [1, 2, 3, 4, 5])
    m.add_request("b", [1, 2, 3, 4, 9], cache_salt=None)
    m.append_tokens("a", [6, 7, 8])
    m.add_request("c", list(range(20, 40)))  # refused
    m.free_request("a")
    m.add_request("d", [7, 7, 7, 7, 7])  # evicts
    m.free_request("b")
    assert m.replay() == m.snapshot()
    assert replay(6, m.events, 2) == m.snapshot()
    assert m.replay(0) == KVCacheManager(6, block_size=2).snapshot()


def test_every_step_result_carries_its_events():
    m = KVCacheManager(8, block_size=2)
    r1 = m.add_request("a", [1, 2, 3])
    r2 = m.add_request("b", [1, 2, 5, 6, 7])
    r3 = m.free_request("a")
    assert [e.seq for e in r1.events + r2.events + r3.events] == list(range(len(m.events)))
    assert [e.kind.value for e in r2.events] == ["hit", "miss", "touch", "allocate", "cache"]


def _chain(n_blocks: int, block_size: int = 4) -> list[bytes]:
    none = init_none_hash("sha256_cbor", "0")
    return hash_block_chain(list(range(n_blocks * block_size)), block_size, "sha256_cbor", none)


def test_full_attention_search_stops_at_first_miss():
    hashes = _chain(5)
    blocks = {h: KVCacheBlock(i) for i, h in enumerate(hashes) if i != 2}
    hit = find_longest_cache_hit(hashes, 100, 4, blocks.get)
    assert [b.block_id for b in hit] == [0, 1]
    assert find_longest_cache_hit(hashes, 7, 4, blocks.get) == [blocks[hashes[0]]]


def test_sliding_window_search_like_vllm():
    # block size 4, window 8: cdiv(7, 4) = 2 contiguous cached blocks suffice.
    hashes = _chain(5)
    blocks = {h: KVCacheBlock(10 + i) for i, h in enumerate(hashes) if i in (0, 2, 3)}
    hit = find_longest_cache_hit_sliding_window(hashes, 100, 4, 8, blocks.get)
    assert [b.block_id if b else None for b in hit] == [None, None, 12, 13]
    # Only one contiguous block anywhere: fall back to the run from the start.
    blocks = {h: KVCacheBlock(10 + i) for i, h in enumerate(hashes) if i in (0, 2)}
    hit = find_longest_cache_hit_sliding_window(hashes, 100, 4, 8, blocks.get)
    assert [b.block_id for b in hit] == [10]
    assert find_longest_cache_hit_sliding_window(hashes, 3, 4, 8, blocks.get) == []


def test_sliding_window_manager_hits_and_frees_out_of_window_blocks():
    m = KVCacheManager(13, block_size=4, sliding_window=8)
    stored = [k for e in m.add_request("a", list(range(1, 21))).events for k in e.kv_events]
    assert (stored[0].kv_cache_spec_kind, stored[0].kv_cache_spec_sliding_window) == ("sliding_window", 8)
    m.free_request("a")
    full = m.peek_cache_hit(list(range(1, 21)), sliding_window=None)
    assert full.num_computed_tokens == 16 and full.block_ids == (1, 2, 3, 4)
    r = m.add_request("b", list(range(1, 21)))
    assert r.num_computed_tokens == 16 and r.hit_block_ids == (3, 4)
    assert [e.block_id for e in m.block_table("b")] == [None, None, 3, 4, 6]  # None = the null block
    assert m.snapshot().ref_cnt[1:3] == (0, 0)  # head blocks stay free and cached
    r = m.append_tokens("b", [90, 91, 92, 93])
    assert r.freed_block_ids == (3,)
    assert [e.block_id for e in m.block_table("b")] == [None, None, None, 4, 6, 7]
    assert m.replay() == m.snapshot()
    m.free_request("b")
    assert m.replay() == m.snapshot() and m.snapshot().requests == {}
