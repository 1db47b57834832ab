"""Radix tree with SGLang RadixCache semantics."""

from __future__ import annotations

import pytest

from kvviz.mirror.radix import RadixCache


def test_insert_and_match_prefix():
    tree = RadixCache()
    assert tree.insert([1, 2, 3]) == 0
    assert tree.insert([1, 2, 3]) == 3
    assert tree.match_prefix([1, 2, 3, 4]).length == 3
    assert tree.match_prefix([9]).length == 0
    assert tree.match_prefix([]).length == 0
    assert tree.total_size() == 3


def test_divergence_splits_the_node():
    tree = RadixCache()
    tree.insert([1, 2, 3])
    assert tree.insert([1, 2, 4, 5]) == 2
    nodes = {v.id: v for v in tree.snapshot()}
    root = nodes[0]
    assert root.parent_id is None and root.num_tokens == 0
    shared = [v for v in nodes.values() if v.parent_id == 0]
    assert len(shared) == 1 and shared[0].tokens_preview == (1, 2) and not shared[0].is_leaf
    leaves = sorted((v.tokens_preview, v.start) for v in nodes.values() if v.parent_id == shared[0].id)
    assert leaves == [((3,), 2), ((4, 5), 2)]
    assert tree.total_size() == 5


def test_match_inside_a_node_splits_it():
    tree = RadixCache()
    tree.insert([1, 2, 3, 4])
    result = tree.match_prefix([1, 2, 9])
    assert result.length == 2
    assert result.last_node.key == (1, 2) and len(result.node_ids) == 1
    assert len(tree.snapshot()) == 3  # root, (1, 2), (3, 4)


def test_sglang_main_example():
    tree = RadixCache()
    tree.insert([1, 2, 3])
    tree.insert([1, 2, 3])
    tree.insert([1, 2, 4, 5])
    tree.insert([1, 2, 4, 5, 6, 7])
    tree.insert([8, 9, 10, 11, 12])
    assert tree.match_prefix([1, 2, 3, 13, 14]).length == 3
    assert tree.match_prefix([1, 2, 4, 5, 6, 7, 8]).length == 6
    assert tree.total_size() == 12


def test_page_granular_matching():
    tree = RadixCache(page_size=4)
    assert tree.insert(list(range(10))) == 0  # truncated to 8 tokens (two pages)
    assert tree.total_size() == 8
    assert tree.match_prefix(list(range(7)) + [99]).length == 4  # whole pages only
    assert tree.match_prefix(list(range(12))).length == 8
    assert tree.insert([0, 1, 2, 3, 9, 9, 9, 9]) == 4


def test_extra_key_namespaces_never_share():
    tree = RadixCache()
    tree.insert([1, 2, 3], extra_key="alice")
    assert tree.match_prefix([1, 2, 3], extra_key="bob").length == 0
    assert tree.match_prefix([1, 2, 3]).length == 0
    assert tree.match_prefix([1, 2, 3], extra_key="alice").length == 3


def test_lock_protects_from_eviction():
    tree = RadixCache()
    tree.insert([1, 2, 3])
    tree.insert([4, 5])
    held = tree.lock([1, 2, 3])
    assert tree.protected_size() == 3 and tree.evictable_size() == 2
    result = tree.evict(100)
    assert result.num_tokens_evicted == 2
    assert tree.match_prefix([1, 2, 3]).length == 3
    tree.unlock(held)
    assert tree.evictable_size() == 3 and tree.protected_size() == 0
    assert tree.evict(1).num_tokens_evicted == 3
    assert tree.total_size() == 0
    with pytest.raises(RuntimeError):
        tree.dec_lock_ref(held.last_node)


def test_lock_on_split_node_is_inherited():
    tree = RadixCache()
    tree.insert([1, 2, 3, 4])
    held = tree.lock([1, 2, 3, 4])
    tree.insert([1, 2, 7])  # splits the locked node
    views = {v.tokens_preview: v for v in tree.snapshot()}
    assert views[(1, 2)].lock_ref == 1 and views[(3, 4)].lock_ref == 1 and views[(7,)].lock_ref == 0
    assert tree.evict(10).num_tokens_evicted == 1  # only the unlocked leaf (7,)
    tree.unlock(held)
    assert tree.evictable_size() == 4


def test_evict_least_recently_used_leaf_first():
    tree = RadixCache()
    tree.insert([1, 1])
    tree.insert([2, 2])
    tree.insert([3, 3])
    tree.match_prefix([1, 1])  # refresh [1, 1]
    result = tree.evict(2)
    assert result.num_tokens_evicted == 2
    assert tree.match_prefix([2, 2]).length == 0
    assert tree.match_prefix([1, 1]).length == 2 and tree.match_prefix([3, 3]).length == 2


def test_evict_cascades_to_childless_parent():
    tree = RadixCache()
    tree.insert([1, 2, 3])
    tree.insert([1, 2, 4])
    result = tree.evict(3)
    assert result.num_tokens_evicted == 4 and len(result.node_ids) == 3
    assert tree.total_size() == 0 and [v.id for v in tree.snapshot()] == [0]


def test_snapshot_fields_for_drawing():
    tree = RadixCache()
    tree.insert(list(range(20)))
    views = tree.snapshot()
    leaf = views[1]
    assert leaf.parent_id == 0 and leaf.num_tokens == 20 and len(leaf.tokens_preview) == 8
    assert leaf.is_leaf and leaf.evictable and leaf.lock_ref == 0 and leaf.last_access == tree.clock
    assert not views[0].evictable and views[0].lock_ref == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_page_size_validation(bad):
    with pytest.raises(ValueError):
        RadixCache(page_size=bad)
