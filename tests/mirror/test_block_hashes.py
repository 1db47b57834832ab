"""Chained block hashes: byte-identical to vLLM's formula, extra keys in vLLM's order."""

from __future__ import annotations

import hashlib
import struct

import pytest
import xxhash

from kvviz.mirror import limits
from kvviz.mirror.hashing import (
    HASH_FUNCTIONS,
    MMFeature,
    generate_block_hash_extra_keys,
    get_hash_fn,
    hash_block_chain,
    hash_block_tokens,
    hash_request_blocks,
    init_none_hash,
    python_hash,
    sha256_cbor,
    short_hash,
    validate_token_ids,
    xxhash_cbor,
)


# A tiny independent CBOR encoder (RFC 8949 shortest form), so the byte-identity check does not
# trust cbor2's canonical flag.
def _head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, n)
    raise ValueError(n)


def cbor(obj) -> bytes:
    if obj is None:
        return b"\xf6"
    if isinstance(obj, int):
        return _head(0, obj) if obj >= 0 else _head(1, -1 - obj)
    if isinstance(obj, bytes):
        return _head(2, len(obj)) + obj
    if isinstance(obj, str):
        raw = obj.encode()
        return _head(3, len(raw)) + raw
    if isinstance(obj, (tuple, list)):
        return _head(4, len(obj)) + b"".join(cbor(x) for x in obj)
    raise TypeError(obj)


def test_sha256_cbor_is_sha256_of_canonical_cbor():
    parent = bytes(range(32))
    obj = (parent, (1, 2, 300, 70000, 2**32 - 1), None)
    assert sha256_cbor(obj) == hashlib.sha256(cbor(obj)).digest()
    assert sha256_cbor("0") == hashlib.sha256(b"\x610").digest()


def test_xxhash_cbor_is_xxh3_128_of_the_same_bytes():
    obj = (b"\x01" * 16, (5, 6, 7), ("lora", "salt"))
    digest = xxhash_cbor(obj)
    assert digest == xxhash.xxh3_128_digest(cbor(obj))
    assert len(digest) == 16


def test_python_hash_is_builtin_hash_as_8_bytes():
    obj = (b"p", (1, 2), None)
    assert python_hash(obj) == hash(obj).to_bytes(8, "big", signed=True)
    assert len(python_hash(obj)) == 8


def test_none_hash_from_seed_string_like_pythonhashseed():
    # vLLM: NONE_HASH = hash_fn(os.getenv("PYTHONHASHSEED")), a string.
    assert init_none_hash(sha256_cbor, "0") == hashlib.sha256(cbor("0")).digest()
    assert init_none_hash("xxhash_cbor", "42") == xxhash.xxh3_128_digest(cbor("42"))
    # No seed (PYTHONHASHSEED unset): vLLM's resolution, see tests/mirror/test_vllm_kv_cache_utils.py.
    assert init_none_hash(sha256_cbor, None) == hashlib.sha256(cbor("vllm-none-hash")).digest()
    with pytest.raises(ValueError):
        init_none_hash(sha256_cbor, 0)  # type: ignore[arg-type]


def test_hash_block_tokens_formula():
    none = init_none_hash(sha256_cbor, "0")
    h0 = hash_block_tokens(sha256_cbor, none, [1, 2, 3, 4])
    assert h0 == hashlib.sha256(cbor((none, (1, 2, 3, 4), None))).digest()
    h1 = hash_block_tokens("sha256_cbor", h0, [5, 6, 7, 8], ("salt",))
    assert h1 == hashlib.sha256(cbor((h0, (5, 6, 7, 8), ("salt",)))).digest()
    with pytest.raises(ValueError, match="NONE_HASH"):
        hash_block_tokens(sha256_cbor, b"", [1])


def test_extra_keys_order_lora_mm_salt_embeds():
    mm = [MMFeature("img0", 2, 6), MMFeature("img1", 20, 4)]
    keys = generate_block_hash_extra_keys(
        0, 8, lora_name="adapter", lora_path="/a", mm_features=mm, cache_salt="s", prompt_embeds_hash=b"e"
    )
    # vLLM 0.33.0 tags each key with its source.
    assert keys == (("lora", "adapter", "/a"), ("mm", "img0", 2), ("cache_salt", "s"), ("prompt_embeds", b"e"))
    # Later blocks: no salt; the mm offset is relative to the block start (may be negative).
    assert generate_block_hash_extra_keys(4, 8, lora_name="adapter", lora_path="/a", mm_features=mm,
                                          cache_salt="s") == (("lora", "adapter", "/a"), ("mm", "img0", -2))
    assert generate_block_hash_extra_keys(8, 16, mm_features=mm, cache_salt="s") is None
    assert generate_block_hash_extra_keys(16, 24, mm_features=mm) == (("mm", "img1", 4),)
    # An empty salt is no salt, as in vLLM (`start == 0 and request.cache_salt`).
    assert generate_block_hash_extra_keys(0, 4, cache_salt="") is None


def test_chain_matches_plain_loop_for_every_hash_function():
    tokens = list(range(37))
    for name, fn in HASH_FUNCTIONS.items():
        none = init_none_hash(fn, "0")
        parent, expected = none, []
        for start in range(0, 36, 4):
            extra = (("cache_salt", "s"),) if start == 0 else None
            parent = fn((parent, tuple(tokens[start:start + 4]), extra))
            expected.append(parent)
        assert hash_block_chain(tokens, 4, name, none, cache_salt="s") == expected


def test_salt_on_first_block_only_changes_every_hash():
    none = init_none_hash(sha256_cbor, "0")
    plain = hash_request_blocks(range(12), 4, sha256_cbor, none)
    salted = hash_request_blocks(range(12), 4, sha256_cbor, none, cache_salt="tenant-a")
    assert [r.extra_keys for r in salted] == [(("cache_salt", "tenant-a"),), None, None]
    assert all(p.hash != s.hash for p, s in zip(plain, salted, strict=True))


def test_lora_name_on_every_block():
    none = init_none_hash(sha256_cbor, "0")
    recs = hash_request_blocks(range(9), 4, sha256_cbor, none, cache_salt="s", lora_name="L", lora_path="/p")
    lora = ("lora", "L", "/p")
    assert [r.extra_keys for r in recs] == [(lora, ("cache_salt", "s")), (lora,), (lora,)]
    assert recs[1].hash == hash_block_tokens(sha256_cbor, recs[0].hash, (4, 5, 6, 7), (lora,))


def test_records_partial_block_has_no_hash():
    none = init_none_hash(sha256_cbor, "0")
    recs = hash_request_blocks([1, 2, 3, 4, 5], 2, sha256_cbor, none)
    assert [(r.index, r.start, r.end, r.full) for r in recs] == [(0, 0, 2, True), (1, 2, 4, True), (2, 4, 5, False)]
    assert recs[0].parent == none and recs[1].parent == recs[0].hash and recs[2].parent == recs[1].hash
    assert recs[2].hash is None and recs[2].tokens == (5,)
    assert hash_request_blocks([1], 16, sha256_cbor, none)[0].hash is None


def test_incremental_chain_equals_full_chain():
    none = init_none_hash(sha256_cbor, "0")
    tokens = list(range(50))
    full = hash_block_chain(tokens, 4, sha256_cbor, none, cache_salt="x")
    head = hash_block_chain(tokens[:17], 4, sha256_cbor, none, cache_salt="x")
    tail = hash_block_chain(tokens, 4, sha256_cbor, none, cache_salt="x", start_block=len(head),
                            parent_block_hash=head[-1])
    assert head + tail == full
    with pytest.raises(ValueError, match="parent_block_hash"):
        hash_block_chain(tokens, 4, sha256_cbor, none, start_block=2)


def test_same_block_after_different_prefix_has_different_hash():
    none = init_none_hash(sha256_cbor, "0")
    a = hash_block_chain([1, 2, 9, 9], 2, sha256_cbor, none)
    b = hash_block_chain([3, 4, 9, 9], 2, sha256_cbor, none)
    assert a[1] != b[1]


def test_get_hash_fn_lists_valid_names():
    assert get_hash_fn("xxhash_cbor") is xxhash_cbor
    with pytest.raises(ValueError, match="sha256, sha256_cbor, xxhash, xxhash_cbor, python_hash"):
        get_hash_fn("md5")


def test_short_hash():
    assert short_hash(bytes.fromhex("deadbeef0102")) == "deadbeef"
    assert short_hash(bytes.fromhex("deadbeef0102"), 4) == "dead"
    assert short_hash(None) == ""


@pytest.mark.parametrize("bad", [0, 257, -1, 1.5, "16", True])
def test_block_size_validation(bad):
    """Block sizes are checked once, at the edge, by ``limits.block_size`` (hashing trusts a BlockSize)."""
    with pytest.raises(ValueError):
        limits.block_size(bad)


@pytest.mark.parametrize("bad", [[1, -1], [1, 2**32], [1, "2"], [True], [1.0], "123", [], None])
def test_token_validation(bad):
    with pytest.raises(ValueError):
        validate_token_ids(bad)


def test_token_validation_accepts_bounds():
    assert validate_token_ids([0, 2**32 - 1]) == (0, 2**32 - 1)
    assert limits.block_size(1) == 1 and limits.block_size(256) == 256
