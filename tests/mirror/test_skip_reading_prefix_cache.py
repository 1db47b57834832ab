"""``KVCacheManager.add_request(skip_reading_prefix_cache=True)`` (vLLM 0.33.0's flag): no device hit and no
host-tier load, every block computed and still cached afterwards (a later prompt hits them)."""

from __future__ import annotations

from kvviz.mirror.events import EventKind
from kvviz.mirror.manager import KVCacheManager

BS = 4
A = list(range(1, 14))  # 13 tokens: 3 full blocks and a partial one
B = list(range(100, 117))  # 17 tokens: fills the device pool below


def test_a_cached_prompt_is_computed_again_and_its_blocks_are_cached():
    m = KVCacheManager(16, BS)
    first = m.add_request("a", A)
    m.free_request("a")
    r = m.add_request("again", A, skip_reading_prefix_cache=True)
    assert r.ok and r.num_computed_tokens == 0
    assert EventKind.HIT not in [e.kind for e in r.events]
    assert not set(r.new_block_ids) & set(first.new_block_ids[:3])  # not a's cached blocks
    assert m.counters.hit_tokens == 0
    m.free_request("again")
    later = m.add_request("later", A)  # a normal lookup hits the cached blocks
    assert later.num_computed_tokens == 12
    m.free_request("later")
    m.block_pool.check_invariants()


def test_the_host_tier_is_not_read_either():
    m = KVCacheManager(6, BS, host_blocks=8)  # 5 usable device blocks
    m.add_request("a", A)
    m.free_request("a")
    m.add_request("b", B)  # a's blocks leave the device pool; the host tier keeps them
    m.free_request("b")
    r = m.add_request("skip", A, skip_reading_prefix_cache=True)
    assert r.ok and r.num_computed_tokens == 0
    assert EventKind.HOST_LOAD not in [e.kind for e in r.events]
    assert m.counters.host_hit_tokens == 0
