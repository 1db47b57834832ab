"""Block pool and free queue: vLLM v1 semantics, one rule per test."""

from __future__ import annotations

import pytest

from kvviz.mirror.block_pool import BlockPool, FreeKVCacheBlockQueue, KVCacheBlock
from kvviz.mirror.events import EventKind
from kvviz.mirror.replay import replay


def ids(blocks):
    return [b.block_id for b in blocks]


def test_free_queue_starts_in_id_order_and_pops_head():
    blocks = [KVCacheBlock(i) for i in range(4)]
    q = FreeKVCacheBlockQueue(blocks)
    assert ids(q.get_all_free_blocks()) == [0, 1, 2, 3] and len(q) == 4
    assert q.popleft().block_id == 0
    assert ids(q.popleft_n(2)) == [1, 2]
    assert ids(q) == [3] and q.num_free_blocks == 1


def test_free_queue_remove_from_middle_and_append_to_tail():
    blocks = [KVCacheBlock(i) for i in range(5)]
    q = FreeKVCacheBlockQueue(blocks)
    q.remove(blocks[2])
    assert ids(q) == [0, 1, 3, 4]
    q.append(blocks[2])
    assert ids(q) == [0, 1, 3, 4, 2]
    q.remove(blocks[0])
    q.remove(blocks[2])
    assert ids(q) == [1, 3, 4] and len(q) == 3
    with pytest.raises(RuntimeError):
        q.remove(blocks[0])  # not in the queue
    with pytest.raises(RuntimeError):
        q.append(blocks[1])  # already in the queue


def test_free_queue_empty_errors():
    q = FreeKVCacheBlockQueue([])
    with pytest.raises(ValueError):
        q.popleft()
    with pytest.raises(ValueError):
        q.popleft_n(1)
    assert q.popleft_n(0) == []


def test_get_new_blocks_sets_ref_cnt_and_refuses_when_short():
    pool = BlockPool(4)  # block 0 is the null block: 3 usable
    got = pool.get_new_blocks(2, "r")
    assert ids(got) == [1, 2] and [b.ref_cnt for b in got] == [1, 1]
    assert pool.get_num_free_blocks() == 1
    before = pool.snapshot()
    with pytest.raises(ValueError):
        pool.get_new_blocks(2, "r")
    assert pool.snapshot() == before


def test_cached_block_keeps_hash_in_queue_and_loses_it_when_popped():
    pool = BlockPool(3)
    blocks = pool.get_new_blocks(2, "r")
    pool.cache_full_blocks(blocks, [b"h0", b"h1"], 0, 2, "r")
    pool.free_blocks(reversed(blocks), "r")
    assert ids(pool.free_block_queue) == [2, 1]
    assert pool.get_cached_block(b"h1") is blocks[1]  # free but still hittable
    got = pool.get_new_blocks(1, "s")
    assert ids(got) == [2] and got[0].block_hash is None  # evicted on reuse
    assert pool.get_cached_block(b"h1") is None and pool.get_cached_block(b"h0") is blocks[0]
    assert pool.num_evictions == 1
    kinds = [e.kind for e in pool.events]
    assert kinds[-2:] == [EventKind.EVICT, EventKind.ALLOCATE]
    assert pool.events[-2].block_hashes == (b"h1",)


def test_touch_removes_from_queue_and_counts_refs():
    pool = BlockPool(4)
    blocks = pool.get_new_blocks(1, "a")
    pool.cache_full_blocks(blocks, [b"h"], 0, 1, "a")
    pool.touch(blocks, "b")
    assert blocks[0].ref_cnt == 2
    pool.free_blocks(blocks, "a")
    pool.free_blocks(blocks, "b")
    assert blocks[0].ref_cnt == 0 and ids(pool.free_block_queue) == [2, 3, 1]
    pool.touch(blocks, "c")  # hit on a free cached block: it leaves the queue
    assert blocks[0].ref_cnt == 1 and ids(pool.free_block_queue) == [2, 3]
    pool.check_invariants()


def test_duplicate_hashes_are_not_deduplicated_and_first_wins():
    pool = BlockPool(3)
    a, b = pool.get_new_blocks(2, "r")
    pool.cache_full_blocks([a], [b"same"], 0, 1, "r")
    pool.cache_full_blocks([b], [b"same"], 0, 1, "s")
    assert pool.cached_block_hash_to_block[b"same"].keys() == {1, 2}
    assert pool.get_cached_block(b"same") is a
    pool.free_blocks([a, b], "r")
    pool.get_new_blocks(1, "t")  # evicts block 1
    assert pool.get_cached_block(b"same") is b
    pool.check_invariants()


def test_cache_full_blocks_skips_null_and_hit_blocks():
    pool = BlockPool(4)
    blocks = pool.get_new_blocks(2, "r")
    pool.cache_full_blocks(blocks, [b"x", b"y"], 0, 1, "r")
    cached = pool.cache_full_blocks([None, blocks[0], blocks[1]], [b"n", b"x", b"y"], 0, 3, "r")
    assert ids(cached) == [2]
    assert pool.cache_full_blocks(blocks, [b"x"], 1, 1, "r") == []
    with pytest.raises(ValueError):
        pool.cache_full_blocks(blocks, [b"x"], 0, 2, "r")


def test_free_rejects_double_free():
    pool = BlockPool(2)
    blocks = pool.get_new_blocks(1, "r")
    pool.free_blocks(blocks, "r")
    with pytest.raises(RuntimeError):
        pool.free_blocks(blocks, "r")


def test_pool_events_replay_to_pool_state():
    pool = BlockPool(5, block_size=2)
    a = pool.get_new_blocks(3, "a")
    pool.cache_full_blocks(a, [b"1", b"2"], 0, 2, "a")
    pool.free_blocks(list(reversed(a)), "a")
    pool.touch([a[0]], "b")
    pool.get_new_blocks(3, "b")
    state = replay(5, pool.events, block_size=2)
    live = pool.snapshot()
    assert (state.ref_cnt, state.block_hash, state.free_queue, state.hash_to_blocks) == (
        live.ref_cnt, live.block_hash, live.free_queue, live.hash_to_blocks)
    assert state.counters.evictions == live.counters.evictions == 1


@pytest.mark.parametrize("bad", [0, 1, -1, 1.5, True, "3"])
def test_pool_size_validation(bad):
    with pytest.raises(ValueError):
        BlockPool(bad)
