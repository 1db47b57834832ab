"""vLLM's ``tests/v1/core/test_prefix_caching.py``, re-expressed in kvviz's API.

Read at vllm-project/vllm commit 003df2961dd8830c317a61f9745ccd557da9fa06 (``free_blocks`` prepends
unhashed blocks, PR #52076; block 0 is the null block). vLLM's ``make_kv_cache_config(16, 11)`` is
``KVCacheManager(11, block_size=16)`` here; ``get_computed_blocks`` + ``allocate_slots`` is
``add_request``; ``manager.free(req)`` is ``free_request``. Block hashes are computed with
hashlib + pickle, not kvviz's code. Each case would fail against kvviz's previous behaviour where
that changed: block ids without the null block, append-all free order, NONE_HASH from seed "0".
The vLLM tests of what kvviz does not model are named in docs/FIDELITY.md ("What kvviz does not model").
"""

from __future__ import annotations

import hashlib
import pickle

from kvviz.mirror.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
from kvviz.mirror.manager import KVCacheManager
from kvviz.mirror.replay import replay

BS = 16


def sha256(obj) -> bytes:
    return hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()


NONE_HASH = sha256("vllm-none-hash")  # vLLM's default: sha256, PYTHONHASHSEED unset


def queue(m: KVCacheManager) -> list[int]:
    return [b.block_id for b in m.block_pool.free_block_queue.get_all_free_blocks()]


def make_manager(num_blocks: int = 11) -> KVCacheManager:
    m = KVCacheManager(num_blocks, block_size=BS)  # vLLM's defaults: sha256, no seed
    assert m.none_hash == NONE_HASH
    return m


# vLLM: test_prefill
def test_prefill():
    m = make_manager()
    common = [i for i in range(3) for _ in range(16)]  # 3 full blocks
    req0 = common + [3] * 7
    r = m.add_request("0", req0)
    assert r.num_computed_tokens == 0 and r.new_block_ids == (1, 2, 3, 4)
    # Full blocks: chained hashes, ref_cnt 1. Partial block: no hash.
    parent = NONE_HASH
    for block_id in (1, 2, 3):
        expected = sha256((parent, tuple(req0[(block_id - 1) * 16: block_id * 16]), None))
        block = m.block_pool.blocks[block_id]
        assert block.block_hash == expected and block.ref_cnt == 1
        parent = expected
    assert m.block_pool.blocks[4].block_hash is None and m.block_pool.blocks[4].ref_cnt == 1

    # Cache hit in the common prefix while the original block is in use.
    r = m.add_request("1", common + [3] * 5)
    assert r.hit_block_ids == (1, 2, 3) and r.num_computed_tokens == 3 * 16 and r.new_block_ids == (5,)
    assert [m.block_pool.blocks[b].ref_cnt for b in (1, 2, 3)] == [2, 2, 2]
    assert m.block_pool.get_num_free_blocks() == 5
    m.free_request("0")
    m.free_request("1")
    assert m.block_pool.get_num_free_blocks() == 10
    # [partial blocks without hash (5, 4), prepended] [never used 6..10] [common (3, 2, 1)]
    assert queue(m) == [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]

    # Cache hit in the common prefix when the original blocks are free.
    r = m.add_request("2", common + [3] * 6)
    assert r.hit_block_ids == (1, 2, 3) and r.num_computed_tokens == 48
    assert r.new_block_ids == (5,)  # the partial block 5 is reused first
    assert m.block_pool.get_num_free_blocks() == 6
    assert all(m.block_pool.blocks[b].ref_cnt == 0 for b in queue(m)) and len(queue(m)) == 6
    m.free_request("2")

    # Cache miss and eviction: the block order is the eviction order.
    r = m.add_request("3", [99] * (16 * 10))
    assert r.num_computed_tokens == 0 and r.new_block_ids == (5, 4, 6, 7, 8, 9, 10, 3, 2, 1)
    assert m.block_pool.get_num_free_blocks() == 0 and queue(m) == []




# vLLM: test_decode
def test_decode():
    m = make_manager()
    common = [i for i in range(3) for _ in range(16)]
    r = m.add_request("0", common + [3] * 7)
    assert r.new_block_ids == (1, 2, 3, 4)
    # Append slots without a new block: the last block is still partial and unhashed.
    r = m.append_tokens("0", [8] * 4)
    assert r.new_block_ids == () and m.block_table("0")[-1].block_id == 4
    assert m.block_pool.blocks[4].block_hash is None
    # 5 tokens fill block 4, 10 more need a new block.
    r = m.append_tokens("0", [7] * (5 + 10))
    assert len(r.new_block_ids) == 1
    table = m.block_table("0")
    assert m.block_pool.blocks[table[-2].block_id].block_hash is not None
    assert m.block_pool.blocks[table[-1].block_id].block_hash is None


# vLLM: test_evict (with main's free policy: the partial block goes to the head)
def test_evict():
    m = make_manager()
    last_token_id = 5 * 16 + 7
    r = m.add_request("0", list(range(last_token_id)))
    assert r.num_computed_tokens == 0 and len(r.new_block_ids) == 6  # 5 full + 1 partial
    r = m.add_request("1", list(range(last_token_id, last_token_id + 3 * 16)))
    assert len(r.new_block_ids) == 3
    assert m.block_pool.get_num_free_blocks() == 1  # 10 - (6 + 3)
    m.free_request("0")
    m.free_request("1")
    assert m.block_pool.get_num_free_blocks() == 10
    # req0's partial block 6 jumps to the head; its cached blocks 5..1 and req1's 9..7 go to the tail.
    assert queue(m) == [6, 10, 5, 4, 3, 2, 1, 9, 8, 7]
    # Touch the first 2 blocks.
    r = m.add_request("2", list(range(2 * 16 + 3)))
    assert r.hit_block_ids == (1, 2) and r.num_computed_tokens == 2 * 16
    assert r.new_block_ids == (6,)
    assert m.block_pool.get_num_free_blocks() == 7


# vLLM: test_hash_block_correct_reuse
def test_hash_block_correct_reuse():
    # A cached block reused as a new block loses its old hash.
    m = make_manager(2)  # one usable block
    r = m.add_request("0", list(range(16)))
    assert r.new_block_ids == (1,) and m.block_pool.blocks[1].block_hash is not None
    m.free_request("0")
    r = m.add_request("1", list(range(15)))  # partial: pops block 1, evicting its hash
    assert r.new_block_ids == (1,) and r.evicted_block_ids == (1,)
    assert m.block_pool.blocks[1].block_hash is None


# vLLM: test_computed_blocks_not_evicted
def test_computed_blocks_not_evicted():
    m = make_manager(3)
    r = m.add_request("0", list(range(16)))
    assert r.new_block_ids == (1,)
    r = m.add_request("1", list(range(16, 32)))
    assert r.new_block_ids == (2,)
    m.free_request("0")
    m.free_request("1")
    assert queue(m) == [1, 2]
    # req2 hits block 1, so block 2 (not the head block 1) is the one evicted.
    r = m.add_request("2", list(range(16 * 2)))
    assert r.hit_block_ids == (1,) and r.num_computed_tokens == 16
    assert r.new_block_ids == (2,) and r.evicted_block_ids == (2,)


# vLLM: test_cache_blocks (via the manager: cached blocks are the full ones, in chain order)
def test_cache_blocks():
    m = make_manager(6)
    r = m.add_request("0", list(range(14 + 16 + 16)))  # 2 full blocks + 14 tokens
    assert r.new_block_ids == (1, 2, 3) and r.cached_block_ids == (1, 2)
    r = m.append_tokens("0", [0, 0])  # fills block 3
    assert r.cached_block_ids == (3,)
    assert len(m.block_pool.cached_block_hash_to_block) == 3


# vLLM: test_cache_key_salting
def test_cache_key_salting():
    m = make_manager()
    tokens = [i for i in range(3) for _ in range(16)] + [3] * 7
    r = m.add_request("0", tokens, cache_salt="salt1")
    h0 = m.block_pool.blocks[r.new_block_ids[0]].block_hash
    assert h0 == sha256((NONE_HASH, tuple(tokens[:16]), (("cache_salt", "salt1"),)))  # the salt: first block only
    h1 = m.block_pool.blocks[r.new_block_ids[1]].block_hash
    assert h1 == sha256((h0, tuple(tokens[16:32]), None))  # later blocks inherit it via the chain
    stored = [k for e in r.events for k in e.kv_events if isinstance(k, BlockStored)]
    assert stored[0].extra_keys == [("salt1",), None, None]  # the event carries it untagged (to_event_extra_keys)
    r = m.add_request("1", tokens, cache_salt="salt2")
    assert r.num_computed_tokens == 0
    r = m.add_request("2", tokens, cache_salt="salt1")
    assert r.num_computed_tokens == 48


# vLLM: test_reset_prefix_cache
def test_reset_prefix_cache():
    m = make_manager()
    full = [i for i in range(3) for _ in range(16)]
    r = m.add_request("0", full + [3] * 7)
    assert r.new_block_ids == (1, 2, 3, 4)
    r = m.add_request("1", full + [4] * 7)
    assert r.hit_block_ids == (1, 2, 3) and r.new_block_ids == (5,)
    # Failed: some blocks are not freed yet.
    assert not m.reset_prefix_cache()
    assert m.block_pool.cached_block_hash_to_block
    m.free_request("0")
    m.free_request("1")
    assert m.reset_prefix_cache()
    assert not m.block_pool.cached_block_hash_to_block
    assert all(b.block_hash is None for b in m.block_pool.blocks)
    assert m.add_request("2", full + [5]).num_computed_tokens == 0
    assert replay(11, m.events, BS) == m.snapshot()


# vLLM: test_prefix_cache_stats_disabled's enabled counterpart: queries and hits, in tokens
def test_prefix_cache_stats():
    m = make_manager()
    common = [i for i in range(3) for _ in range(16)]
    m.add_request("0", common + [3] * 7)
    m.add_request("1", common + [4] * 5)
    c = m.counters
    assert (c.requests, c.queries, c.hits) == (2, 55 + 53, 48)


# vLLM: test_kv_cache_events
def test_kv_cache_events():
    m = make_manager(3)
    tokens = list(range(2 * 16))
    r = m.add_request("0", tokens + [1])  # 2 full blocks + 1 token: needs 3 blocks, only 2 usable
    assert not r.ok
    r = m.add_request("0", tokens)
    stored = [k for e in r.events for k in e.kv_events]
    assert len(stored) == 1 and isinstance(stored[0], BlockStored)
    ev = stored[0]
    h0 = sha256((NONE_HASH, tuple(tokens[:16]), None))
    assert ev.block_hashes == [h0, sha256((h0, tuple(tokens[16:]), None))]
    assert ev.parent_block_hash is None and ev.token_ids == tokens and ev.block_size == 16
    assert ev.medium == "GPU" and ev.lora_id is None and ev.lora_name is None
    # vLLM 0.33.0: one (untagged) extra-keys entry per block, the group and its spec kind.
    assert ev.extra_keys == [None, None] and ev.group_idx == 0
    assert (ev.kv_cache_spec_kind, ev.kv_cache_spec_sliding_window) == ("full_attention", None)
    m.free_request("0")
    # A new request evicts both cached blocks: one BlockRemoved each, in eviction order.
    r = m.add_request("1", [99] * 20)
    removed = [k for e in r.events for k in e.kv_events if isinstance(k, BlockRemoved)]
    assert [k.block_hashes for k in removed] == [[ev.block_hashes[1]], [ev.block_hashes[0]]]
    assert all(k.medium == "GPU" and k.group_idx == 0 for k in removed)
    m.free_request("1")
    assert m.reset_prefix_cache()
    assert m.events[-1].kv_events == (AllBlocksCleared(),)



# vLLM: test_prefill_not_enough_free_blocks_with_computed_blocks
def test_prefill_not_enough_free_blocks_with_computed_blocks():
    m = make_manager(11)
    common = [i for i in range(3) for _ in range(16)]
    m.add_request("0", common + [0])  # blocks 1, 2, 3 (cached) and 4 (partial)
    m.free_request("0")  # 4 to the head, 3, 2, 1 to the tail
    r = m.add_request("1", common * 2)  # hits 1..3, 3 new blocks
    assert r.hit_block_ids == (1, 2, 3) and len(r.new_block_ids) == 3
    before = m.snapshot()
    # req1's 6 blocks are computed (all in use), 6 more are needed and only 4 are free: refused, and
    # the computed blocks' ref_cnt does not change.
    r = m.add_request("2", common * 4)
    assert not r.ok and r.num_computed_tokens == 6 * 16 and r.events[-1].params == {"needed": 6, "free": 4}
    after = m.snapshot()
    assert after.ref_cnt == before.ref_cnt and after.free_queue == before.free_queue
