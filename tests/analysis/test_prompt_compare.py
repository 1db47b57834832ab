"""Comparing prompt B against a cache filled by prompt A."""

from __future__ import annotations

import pytest

from kvviz.analysis.prompt_compare import compare_prompts
from kvviz.mirror.manager import KVCacheManager
from kvviz.words import render_block_reason


def test_vllm_documented_example():
    cmp = compare_prompts(list(range(1, 13)), list(range(1, 11)) + [13, 14], block_size=4)
    assert cmp.common_prefix_tokens == 10
    assert cmp.reused_tokens == 8
    assert cmp.recompute_tokens == 4
    assert cmp.first_changed_token == 10
    assert [b.status for b in cmp.blocks] == ["hit", "hit", "miss"]
    assert (cmp.num_tokens_a, cmp.num_tokens_b) == (12, 12)
    assert (cmp.blocks[2].code, cmp.blocks[2].params) == ("miss_tokens", {"index": 2, "token": 10})
    assert "first change at token 10" in render_block_reason(cmp.blocks[2].code, cmp.blocks[2].params)


def test_early_change_cascades_as_invalidated():
    a = list(range(1, 17))
    b = [99] + a[1:]
    cmp = compare_prompts(a, b, block_size=4)
    assert [blk.status for blk in cmp.blocks] == ["miss", "invalidated", "invalidated", "invalidated"]
    assert cmp.reused_tokens == 0 and cmp.first_changed_token == 0
    blk = cmp.blocks[2]
    assert blk.tokens_a == blk.tokens_b and blk.hash_a != blk.hash_b and blk.parent_a != blk.parent_b
    assert blk.code == "invalidated_chain" and blk.params == {"index": 2, "changed": 0}
    assert "block 0 changed" in render_block_reason(blk.code, blk.params)


def test_different_salts_invalidate_everything():
    tokens = list(range(12))
    cmp = compare_prompts(tokens, tokens, block_size=4, salt_a="alice", salt_b="bob")
    assert [b.status for b in cmp.blocks] == ["invalidated"] * 3
    assert cmp.common_prefix_tokens == 12 and cmp.reused_tokens == 0
    assert [b.code for b in cmp.blocks] == ["invalidated_salt"] + ["invalidated_chain_salt"] * 2
    same = compare_prompts(tokens, tokens + [0], block_size=4, salt_a="alice", salt_b="alice")
    assert same.reused_tokens == 12


def test_partial_and_capped_blocks():
    a = list(range(8))
    cmp = compare_prompts(a, a, block_size=4)
    assert [b.status for b in cmp.blocks] == ["hit", "hit"]
    assert [b.reused for b in cmp.blocks] == [True, False]  # last token always recomputed
    assert cmp.reused_tokens == 4 and cmp.first_changed_token is None
    assert cmp.blocks[1].code == "hit_capped"
    assert "recomputed" in render_block_reason(cmp.blocks[1].code, cmp.blocks[1].params)
    cmp = compare_prompts(a, a + [8, 9], block_size=4)
    assert [b.status for b in cmp.blocks] == ["hit", "hit", "partial"]
    assert cmp.reused_tokens == 8 and cmp.first_changed_token == 8
    assert cmp.blocks[2].hash_b is None and cmp.blocks[2].params == {"count": 2, "block_size": 4}
    assert "2 of 4" in render_block_reason(cmp.blocks[2].code, cmp.blocks[2].params)


def test_b_longer_than_a_misses_where_a_has_no_block():
    cmp = compare_prompts([1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9], block_size=4)
    assert [b.status for b in cmp.blocks] == ["hit", "miss", "partial"]
    assert cmp.blocks[1].code == "miss_no_block"
    assert cmp.blocks[1].hash_a is None and cmp.blocks[1].tokens_a == (5,)


def test_matches_the_manager():
    a = list(range(30))
    for b in ([0, 1] + list(range(40, 60)), list(range(29)), a + [1, 2, 3], list(range(16)), [5] * 20):
        cmp = compare_prompts(a, b, block_size=4)
        m = KVCacheManager(64, block_size=4)
        m.add_request("a", a)
        assert m.add_request("b", b).num_computed_tokens == cmp.reused_tokens


def test_hash_functions_and_seed():
    a, b = list(range(10)), list(range(10))
    for name in ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor", "python_hash"):
        cmp = compare_prompts(a, b, block_size=4, hash_name=name)
        assert cmp.reused_tokens == 8 and cmp.hash_name == name
    s0 = compare_prompts(a, b, block_size=4, seed="0")
    s1 = compare_prompts(a, b, block_size=4, seed="1")
    assert s0.blocks[0].hash_b != s1.blocks[0].hash_b and s1.reused_tokens == 8


@pytest.mark.parametrize("kwargs", [
    {"tokens_a": [], "tokens_b": [1]}, {"tokens_a": [1], "tokens_b": [-1]},
    {"tokens_a": [1], "tokens_b": [1], "hash_name": "x"},
])  # a block size is a checked BlockSize: its edge errors are in test_limits.py
def test_bad_input(kwargs):
    with pytest.raises(ValueError):
        compare_prompts(**kwargs)
