"""vLLM's ``tests/v1/core/test_kv_cache_utils.py``, re-expressed in kvviz's API.

Read at vllm-project/vllm commit 002f10e0cfa1373a19a0d2756598a34b700d20e5 (with the NONE_HASH seed
resolution of PR #51875 and ``FreeKVCacheBlockQueue.prepend_n``). Each test names the vLLM test it
ports; expected digests are computed here with hashlib + pickle / a hand-rolled CBOR encoder, never
with kvviz's hashing code. The vLLM tests of what kvviz does not model are named in docs/FIDELITY.md's
"What kvviz does not model" (tests/repo/test_fidelity_doc.py holds the list).
"""

from __future__ import annotations

import hashlib
import pickle
import struct

import pytest
import xxhash

from kvviz.mirror.block_pool import FreeKVCacheBlockQueue, KVCacheBlock
from kvviz.mirror.hashing import (
    DEFAULT_HASH,
    DEFAULT_NONE_HASH_SEED,
    SEED_DEFAULT_CRYPTO,
    SEED_EXPLICIT,
    SEED_RANDOM_NON_CRYPTO,
    BlockHash,
    MMFeature,
    generate_block_hash_extra_keys,
    hash_block_tokens,
    hash_request_blocks,
    init_none_hash,
    resolve_none_hash_seed,
)

P = pickle.HIGHEST_PROTOCOL


def _cbor(obj) -> bytes:
    """Canonical CBOR for None/int/bytes/str/tuple, written out by hand (RFC 8949 shortest form)."""
    def head(major: int, n: int) -> bytes:
        if n < 24:
            return bytes([major << 5 | n])
        for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
            if n < 1 << (8 * struct.calcsize(fmt)):
                return bytes([major << 5 | info]) + struct.pack(fmt, n)
        raise ValueError(n)
    if obj is None:
        return b"\xf6"
    if isinstance(obj, int):
        return head(0, obj) if obj >= 0 else head(1, -1 - obj)
    if isinstance(obj, bytes):
        return head(2, len(obj)) + obj
    if isinstance(obj, str):
        return head(3, len(obj.encode())) + obj.encode()
    if isinstance(obj, tuple):
        return head(4, len(obj)) + b"".join(_cbor(x) for x in obj)
    raise TypeError(obj)


# Independent re-statements of vLLM's four algorithms (vllm/utils/hashing.py).
EXPECTED = {
    "sha256": lambda o: hashlib.sha256(pickle.dumps(o, protocol=P)).digest(),
    "sha256_cbor": lambda o: hashlib.sha256(_cbor(o)).digest(),
    "xxhash": lambda o: xxhash.xxh3_128_digest(pickle.dumps(o, protocol=P)),
    "xxhash_cbor": lambda o: xxhash.xxh3_128_digest(_cbor(o)),
}


def test_default_algorithm_is_vllms():
    # vllm/config/cache.py: prefix_caching_hash_algo defaults to "sha256" (pickle), not sha256_cbor.
    assert DEFAULT_HASH == "sha256"


# vLLM: test_none_hash
@pytest.mark.parametrize("hash_fn", ["sha256", "sha256_cbor"])
def test_none_hash(hash_fn):
    # case 1: PYTHONHASHSEED unset -> the deterministic default seed.
    none_hash = init_none_hash(hash_fn, None)
    assert isinstance(none_hash, bytes) and none_hash != b""
    assert none_hash == EXPECTED[hash_fn]("vllm-none-hash")
    assert none_hash == init_none_hash(hash_fn, None)  # deterministic across re-initialisation
    # case 2: PYTHONHASHSEED set (kvviz: --seed) -> hash_fn(seed).
    assert init_none_hash(hash_fn, "python hash seed") == EXPECTED[hash_fn]("python hash seed")


# vLLM: test_none_hash_seed_random_for_non_crypto
@pytest.mark.parametrize("non_crypto_fn", ["xxhash", "xxhash_cbor"])
def test_none_hash_seed_random_for_non_crypto(non_crypto_fn):
    seeds = {resolve_none_hash_seed(non_crypto_fn, None, per_process=False)[0] for _ in range(5)}
    assert len(seeds) == 5 and DEFAULT_NONE_HASH_SEED not in seeds
    assert resolve_none_hash_seed(non_crypto_fn, None)[1] == SEED_RANDOM_NON_CRYPTO
    # An explicit seed (vLLM: PYTHONHASHSEED) wins, so peers can share a cache.
    assert resolve_none_hash_seed(non_crypto_fn, "12345") == ("12345", SEED_EXPLICIT)
    # kvviz: one engine process = one seed, so a page's hashes stay put across reruns.
    assert init_none_hash(non_crypto_fn, None) == init_none_hash(non_crypto_fn, None)
    assert init_none_hash(non_crypto_fn, None) != EXPECTED[non_crypto_fn](DEFAULT_NONE_HASH_SEED)


# vLLM: test_none_hash_seed_deterministic_for_crypto
@pytest.mark.parametrize("hash_fn", ["sha256", "sha256_cbor"])
def test_none_hash_seed_deterministic_for_crypto(hash_fn):
    seed = resolve_none_hash_seed(hash_fn, None)
    assert seed == (DEFAULT_NONE_HASH_SEED, SEED_DEFAULT_CRYPTO) == resolve_none_hash_seed(hash_fn, None)



# vLLM: test_kv_cache_block
def test_kv_cache_block():
    block = KVCacheBlock(block_id=0)
    assert (block.block_id, block.ref_cnt, block.block_hash) == (0, 0, None)
    block.ref_cnt += 1
    assert block.ref_cnt == 1
    block.ref_cnt -= 1
    assert block.ref_cnt == 0
    block.block_hash = BlockHash(b"abc")
    assert block.block_hash == b"abc"
    block.block_hash = None  # kvviz: the pool resets the hash on eviction
    assert block.block_hash is None


# vLLM: test_kv_cache_block_uses_slots
def test_kv_cache_block_uses_slots():
    block = KVCacheBlock(block_id=0)
    assert not hasattr(block, "__dict__")
    with pytest.raises(AttributeError):
        block.unexpected_field = True  # type: ignore[attr-defined]


def _ids(queue: FreeKVCacheBlockQueue) -> list[int]:
    return [b.block_id for b in queue.get_all_free_blocks()]


# vLLM: test_free_kv_cache_block_queue_initialization
def test_free_kv_cache_block_queue_initialization():
    block = KVCacheBlock(block_id=0)
    queue = FreeKVCacheBlockQueue([block])
    assert queue.num_free_blocks == 1 and _ids(queue) == [0]


# vLLM: test_free_kv_cache_block_queue_operations
def test_free_kv_cache_block_queue_operations():
    blocks = [KVCacheBlock(block_id=i) for i in range(5)]
    queue = FreeKVCacheBlockQueue(blocks)
    assert queue.num_free_blocks == 5 and _ids(queue) == [0, 1, 2, 3, 4]
    assert queue.popleft() is blocks[0]
    assert queue.num_free_blocks == 4 and _ids(queue) == [1, 2, 3, 4]
    queue.remove(blocks[2])
    assert queue.num_free_blocks == 3 and blocks[1].next_free is blocks[3] and blocks[3].prev_free is blocks[1]
    queue.append(blocks[2])
    assert queue.num_free_blocks == 4 and _ids(queue) == [1, 3, 4, 2] and blocks[2].prev_free is blocks[4]
    for _ in range(4):
        queue.popleft()
    assert queue.num_free_blocks == 0 and _ids(queue) == []
    with pytest.raises(ValueError) as e:
        queue.popleft()
    assert str(e.value) == "No free blocks available"


# vLLM: test_free_kv_cache_block_queue_append_n
def test_free_kv_cache_block_queue_append_n():
    queue = FreeKVCacheBlockQueue([])
    blocks = [KVCacheBlock(block_id=i) for i in range(6)]
    queue.append_n([])
    assert queue.num_free_blocks == 0 and _ids(queue) == []
    queue.append_n(blocks[0:1])
    assert queue.num_free_blocks == 1 and _ids(queue) == [0]
    queue.append_n(blocks[4:6])
    assert queue.num_free_blocks == 3 and _ids(queue) == [0, 4, 5]
    queue.append_n(blocks[1:4])
    assert queue.num_free_blocks == 6 and _ids(queue) == [0, 4, 5, 1, 2, 3]
    assert blocks[5].next_free is blocks[1] and blocks[1].prev_free is blocks[5]


# vLLM: test_free_kv_cache_block_queue_prepend_n
def test_free_kv_cache_block_queue_prepend_n():
    blocks = [KVCacheBlock(block_id=i) for i in range(6)]
    queue = FreeKVCacheBlockQueue(blocks[0:1])
    queue.prepend_n([])
    assert queue.num_free_blocks == 1 and _ids(queue) == [0]
    queue.prepend_n(blocks[4:6])  # they land in front of the head, in order
    assert queue.num_free_blocks == 3 and _ids(queue) == [4, 5, 0]
    assert blocks[5].next_free is blocks[0] and blocks[0].prev_free is blocks[5]
    queue.prepend_n(blocks[1:3])  # ahead of everything prepended before
    assert queue.num_free_blocks == 5 and _ids(queue) == [1, 2, 4, 5, 0]
    assert [queue.popleft().block_id for _ in range(5)] == [1, 2, 4, 5, 0]
    assert queue.num_free_blocks == 0


# vLLM: test_free_kv_cache_block_queue_popleft_n
def test_free_kv_cache_block_queue_popleft_n():
    blocks = [KVCacheBlock(block_id=i) for i in range(6)]
    queue = FreeKVCacheBlockQueue([blocks[1], blocks[3], blocks[5], blocks[4], blocks[0], blocks[2]])
    assert queue.num_free_blocks == 6 and _ids(queue) == [1, 3, 5, 4, 0, 2]
    assert queue.popleft_n(0) == [] and queue.num_free_blocks == 6
    got = queue.popleft_n(1)
    assert got == [blocks[1]] and queue.num_free_blocks == 5
    got += queue.popleft_n(2)
    assert got[1:] == [blocks[3], blocks[5]] and queue.num_free_blocks == 3
    got += queue.popleft_n(3)
    assert got[3:] == [blocks[4], blocks[0], blocks[2]] and queue.num_free_blocks == 0
    assert all(b.prev_free is None and b.next_free is None for b in got)


# vLLM: test_free_kv_cache_block_queue_get_all_free_blocks
def test_free_kv_cache_block_queue_get_all_free_blocks():
    blocks = [KVCacheBlock(block_id=i) for i in range(5)]
    queue = FreeKVCacheBlockQueue(blocks)
    assert queue.get_all_free_blocks() == blocks
    queue.popleft()
    assert queue.get_all_free_blocks() == blocks[1:]
    queue.remove(blocks[2])
    assert queue.get_all_free_blocks() == blocks[1:2] + blocks[3:]
    queue.append(blocks[2])
    assert queue.get_all_free_blocks() == blocks[1:2] + blocks[3:] + [blocks[2]]


MM = [MMFeature("hash1", 0, 5), MMFeature("hash2", 10, 5)]


# vLLM: test_generate_block_hash_extra_keys
def test_generate_block_hash_extra_keys():
    # vLLM 0.33.0 tags multimodal keys ("mm", identifier, offset); 0.23.0 had (identifier, offset).
    assert generate_block_hash_extra_keys(0, 5, mm_features=MM) == (("mm", "hash1", 0),)
    assert generate_block_hash_extra_keys(3, 8, mm_features=MM) == (("mm", "hash1", -3),)
    assert generate_block_hash_extra_keys(6, 10, mm_features=MM) is None
    assert generate_block_hash_extra_keys(0, 15, mm_features=MM) == (("mm", "hash1", 0), ("mm", "hash2", 10))


# vLLM: test_generate_block_hash_extra_keys_no_mm_inputs
def test_generate_block_hash_extra_keys_no_mm_inputs():
    assert generate_block_hash_extra_keys(0, 5) is None


# vLLM: test_generate_block_hash_extra_keys_cache_salt
def test_generate_block_hash_extra_keys_cache_salt():
    salt = ("cache_salt", "salt")  # vLLM 0.33.0's tagged salt (0.23.0 hashed the bare string)
    assert generate_block_hash_extra_keys(0, 1, cache_salt="salt") == (salt,)
    assert generate_block_hash_extra_keys(0, 10, cache_salt="salt") == (salt,)
    assert generate_block_hash_extra_keys(1, 2, cache_salt="salt") is None
    assert generate_block_hash_extra_keys(6, 10, cache_salt="salt") is None
    assert generate_block_hash_extra_keys(0, 5, mm_features=MM[:1], cache_salt="salt") == (("mm", "hash1", 0), salt)



# vLLM: test_generate_block_hash_extra_keys_lora
def test_generate_block_hash_extra_keys_lora():
    # vLLM 0.33.0 keys an adapter by name and path, so a name re-pointed at new weights misses.
    assert generate_block_hash_extra_keys(0, 3, lora_name="test_lora_adapter", lora_path="/p") == (
        ("lora", "test_lora_adapter", "/p"),)
    assert generate_block_hash_extra_keys(0, 3, lora_name=None) is None
    with pytest.raises(ValueError, match="path"):
        generate_block_hash_extra_keys(0, 3, lora_name="test_lora_adapter")


# vLLM: test_hash_block_tokens
@pytest.mark.parametrize("hash_fn", ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"])
def test_hash_block_tokens(hash_fn):
    parent, tokens, extra = BlockHash(b"123"), (1, 2, 3), ("key1", "key2")
    assert hash_block_tokens(hash_fn, parent, tokens, extra) == EXPECTED[hash_fn]((parent, tokens, extra))



# vLLM: test_hash_request_tokens_no_mm_inputs
@pytest.mark.parametrize("hash_fn", ["sha256", "sha256_cbor"])
def test_hash_request_tokens_no_mm_inputs(hash_fn):
    none_hash = EXPECTED[hash_fn]("vllm-none-hash")
    blocks = hash_request_blocks(list(range(6)), 3, hash_fn, init_none_hash(hash_fn))
    assert [b.hash is not None for b in blocks] == [True, True]
    assert blocks[0].hash == EXPECTED[hash_fn]((none_hash, (0, 1, 2), None))
    assert blocks[1].hash == EXPECTED[hash_fn]((blocks[0].hash, (3, 4, 5), None))



