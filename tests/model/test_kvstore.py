"""The content-addressed K/V store: longest-prefix lookup, LRU eviction under a byte budget, salt and
model namespaces, thread safety (synthetic tensors, no model)."""

from __future__ import annotations

import threading

import pytest
import torch

from kvviz.mirror.hashing import hash_block_chain, init_none_hash
from kvviz.model.block_store import (
    DEFAULT_BUDGET_MB,
    KVStore,
    budget_from_env,
    concat_blocks,
    store_block_hashes,
)
from kvviz.model.kvstore import get_kv_store, reusable_blocks
from kvviz.model.settings import InputError

LAYERS, HEADS, DIM, BS = 3, 2, 4, 4
BLOCK_BYTES = 2 * LAYERS * HEADS * BS * DIM * 4  # float32


def kv_for(ids: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Fake per-layer K/V whose values encode (layer, position, token) so slices can be checked."""
    n = len(ids)
    tok = torch.tensor(ids, dtype=torch.float32).view(1, n, 1)
    pos = torch.arange(n, dtype=torch.float32).view(1, n, 1)
    keys = [(tok * 1000 + pos + layer * 0.5).expand(HEADS, n, DIM).contiguous() for layer in range(LAYERS)]
    values = [-k for k in keys]
    return keys, values


def put_prompt(store: KVStore, ids: list[int], key: str = "m", salt: str | None = None) -> list[bytes]:
    hashes = store_block_hashes(ids, BS, salt)
    keys, values = kv_for(ids)
    store.put(key, hashes, keys, values, ids, BS)
    return hashes


def test_hashes_are_the_cores_sha256_chain_and_salt_changes_every_block():
    ids = list(range(1, 14))
    # The store keys with the engine's own code and vLLM's defaults: sha256, NONE_HASH from "vllm-none-hash".
    expected = hash_block_chain(tuple(ids), BS, "sha256", init_none_hash("sha256", None))
    assert store_block_hashes(ids, BS) == expected and len(expected) == 3  # partial tail excluded
    # ... or with the algorithm and seed a page shows.
    xx = hash_block_chain(tuple(ids), BS, "xxhash_cbor", init_none_hash("xxhash_cbor", "7"))
    assert store_block_hashes(ids, BS, hash_name="xxhash_cbor", seed="7") == xx
    salted = store_block_hashes(ids, BS, cache_salt="tenant-a")
    assert all(a != b for a, b in zip(expected, salted, strict=True))
    # a block size reaches the store as a checked BlockSize (edge errors: tests/core/test_limits.py)


def test_lookup_returns_the_longest_stored_run_from_the_start():
    store = KVStore(budget_bytes=10**9)
    a = list(range(1, 17))  # 4 full blocks
    put_prompt(store, a)
    b = a[:9] + [99] + a[10:]  # token 9 changed: block 2 and every later block differ
    hashes_b = store_block_hashes(b, BS)
    found = store.lookup("m", hashes_b)
    assert [blk.block_hash for blk in found] == hashes_b[:2]
    assert store.peek("m", hashes_b) == 2
    assert len(store.lookup("m", store_block_hashes(a, BS), max_blocks=3)) == 3
    keys, values = concat_blocks(found)
    ref_k, ref_v = kv_for(a)
    assert len(keys) == LAYERS and keys[0].shape == (HEADS, 8, DIM)
    for layer in range(LAYERS):
        assert torch.equal(keys[layer], ref_k[layer][:, :8]) and torch.equal(values[layer], ref_v[layer][:, :8])
    stats = store.stats()
    assert stats.blocks == 4 and stats.bytes == 4 * BLOCK_BYTES
    assert stats.hit_blocks == 5 and stats.miss_blocks == 1 and stats.hit_tokens == 20 and stats.lookups == 2


def test_a_middle_block_matches_nothing_without_its_prefix():
    store = KVStore(budget_bytes=10**9)
    a = list(range(1, 17))
    put_prompt(store, a)
    other_start = [7, 7, 7, 7] + a[4:]  # same blocks 1..3 tokens after a different block 0
    assert store.peek("m", store_block_hashes(other_start, BS)) == 0


def test_model_and_salt_namespaces_are_separate():
    store = KVStore(budget_bytes=10**9)
    ids = list(range(1, 9))
    put_prompt(store, ids, key="model-a")
    assert store.peek("model-b", store_block_hashes(ids, BS)) == 0
    assert store.peek("model-a", store_block_hashes(ids, BS, cache_salt="x")) == 0
    assert store.peek("model-a", store_block_hashes(ids, BS)) == 2


def test_budget_holds_and_a_prompts_tail_is_evicted_before_its_head():
    store = KVStore(budget_bytes=5 * BLOCK_BYTES)
    first = put_prompt(store, list(range(1, 17)))  # 4 blocks
    second = put_prompt(store, list(range(100, 116)))  # 4 more: 3 must go
    stats = store.stats()
    assert stats.bytes <= store.budget_bytes and stats.blocks == 5 and stats.evictions == 3
    # the first prompt lost its tail first: blocks 3, 2, 1 went, block 0 stayed
    assert ("m", first[0]) in store and all(("m", h) not in store for h in first[1:])
    assert all(("m", h) in store for h in second)
    assert store.stats().evicted_bytes == 3 * BLOCK_BYTES


def test_a_lookup_protects_its_blocks_from_eviction():
    store = KVStore(budget_bytes=8 * BLOCK_BYTES)
    old = put_prompt(store, list(range(1, 17)))
    put_prompt(store, list(range(100, 116)))
    store.lookup("m", old)  # the older prompt is used again: now most recently used
    put_prompt(store, list(range(200, 208)))  # 2 new blocks evict 2 of the second prompt's
    assert all(("m", h) in store for h in old)


def test_zero_budget_keeps_nothing_and_bad_budgets_are_refused():
    store = KVStore(budget_bytes=0)
    put_prompt(store, list(range(1, 9)))
    assert len(store) == 0 and store.stats().bytes == 0
    with pytest.raises(InputError):
        KVStore(budget_bytes=-1)
    full = KVStore(budget_bytes=10**9)
    put_prompt(full, list(range(1, 17)))
    assert full.set_budget(2 * BLOCK_BYTES) == 2 and full.stats().bytes == 2 * BLOCK_BYTES


def test_budget_from_env(monkeypatch):
    monkeypatch.delenv("KVVIZ_KVSTORE_MB", raising=False)
    assert budget_from_env() == (int(DEFAULT_BUDGET_MB * 2**20), None)
    monkeypatch.setenv("KVVIZ_KVSTORE_MB", "1.5")
    assert budget_from_env() == (int(1.5 * 2**20), None)
    monkeypatch.setenv("KVVIZ_KVSTORE_MB", "0")
    assert budget_from_env() == (0, None)
    for bad in ("lots", "-3", "nan", "1e99"):
        monkeypatch.setenv("KVVIZ_KVSTORE_MB", bad)
        budget, note = budget_from_env()
        assert budget == int(DEFAULT_BUDGET_MB * 2**20) and note and "KVVIZ_KVSTORE_MB" in note


def test_put_only_stores_blocks_the_tensors_cover_and_never_aliases_them():
    store = KVStore(budget_bytes=10**9)
    ids = list(range(1, 17))
    keys, values = kv_for(ids)
    short_k, short_v = [k[:, :9] for k in keys], [v[:, :9] for v in values]
    assert store.put("m", store_block_hashes(ids, BS), short_k, short_v, ids, BS) == 2
    keys[0].fill_(0.0)  # the caller's tensors change; the stored copy must not
    found = store.lookup("m", store_block_hashes(ids, BS))
    assert len(found) == 2 and float(found[0].kv[0, 0].abs().sum()) > 0
    assert store.put("m", store_block_hashes(ids, BS), short_k, short_v, ids, BS) == 0  # already there


def test_concurrent_puts_and_lookups_keep_the_accounting_exact():
    store = KVStore(budget_bytes=40 * BLOCK_BYTES)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            for i in range(15):
                ids = [seed * 1000 + (i % 5) * 10 + t for t in range(16)]
                hashes = put_prompt(store, ids)
                store.lookup("m", hashes)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = store.stats()
    entries = store.entries()
    assert stats.bytes == sum(e.nbytes for e in entries) <= store.budget_bytes
    assert stats.blocks == len(entries) and [e.lru_rank for e in entries] == list(range(len(entries)))


def test_reusable_blocks_keeps_the_last_token_for_the_engine():
    assert reusable_blocks(16, 4, 4) == 3  # 16 tokens all cached: 12 reused, the last block recomputed
    assert reusable_blocks(17, 4, 4) == 4
    assert reusable_blocks(1, 4, 0) == 0
    assert reusable_blocks(40, 16, 1) == 1


def test_the_process_wide_store_is_one_object():
    assert get_kv_store() is get_kv_store()
