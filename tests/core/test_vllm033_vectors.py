"""Known-answer block hashes of vLLM 0.33.0 (tagged extra keys: salt, LoRA, multimodal, prompt embeds).

The expected hex strings come from tests/vectors/vllm033_vectors.py, which applies 0.33.0's formula with
hashlib/cbor2/pickle/xxhash alone (it imports nothing from kvviz); this test checks kvviz against them,
and that the untagged event form is what 0.33.0's ``to_event_extra_keys`` publishes."""

from __future__ import annotations

import pytest

from kvviz.core.hashing import (
    REFERENCE_RELEASE,
    MMFeature,
    generate_block_hash_extra_keys,
    hash_block_chain,
    hash_block_tokens,
    hash_request_blocks,
    init_none_hash,
    to_event_extra_keys,
)

VECTORS = {
    'salt_bs1_sha256_cbor': ['9219b3328c5a182ecba9af42b7321598cf3dfb0eb2ab266f405340d83b0b296e'],
    'salt_bs4_sha256': ['749184ef43d40d21d4804393c2861535202b942ed016446cb8c2e5427ce513de',
                        '47f98c3a70f8ecb1a95a78ab60e95f2004eef1bfe167a216864d8851a07a4de6',
                        '417eba3eb42820154a6e698e133fb6a38cc5468a8abb1947a3ed49440dc736e4'],
    'lora_salt_sha256': ['b20cf66e7d6ec6e29829dc39df4b95f61d89761e29c1c3dca56950a2d95dd4b0',
                         '85f79f8b399b9dc40744628c887204893dae2cfae32d53ad683e5049ecfca97d'],
    'mm_xxhash_cbor_seed7': ['4dd5cb46a821874c3c259eb18498875c', 'c97ba3139edfb7cbd71a266a0b6b9472',
                             '3269940ab3217d0d7f56e3e2093e7115', '0a9d6663e7e022f81dd7c2db2cd627d5'],
    'prompt_embeds_sha256_cbor': ['c6049c1660c5d823f73f2cdfafc17d18cc1c3ada0d94e053b70c5276c0cb789a'],
}
MM = (MMFeature("img0", 2, 6), MMFeature("img1", 9, 2))


def _hex(hashes) -> list[str]:
    return [h.hex() for h in hashes]


def test_release_named_once() -> None:
    assert REFERENCE_RELEASE == "vLLM 0.33.0"


@pytest.mark.parametrize("name,algo,tokens,bs,salt", [
    ("salt_bs1_sha256_cbor", "sha256_cbor", [473], 1, "s2"),  # the example
    ("salt_bs4_sha256", "sha256", list(range(100, 112)), 4, "tenant-a"),
])
def test_salted_chain(name: str, algo: str, tokens: list[int], bs: int, salt: str) -> None:
    none = init_none_hash(algo, None)  # no seed: the fixed "vllm-none-hash"
    assert _hex(hash_block_chain(tokens, bs, algo, none, salt)) == VECTORS[name]
    records = hash_request_blocks(tokens, bs, algo, none, cache_salt=salt)
    assert [r.hash.hex() for r in records] == VECTORS[name]
    assert records[0].extra_keys == (("cache_salt", salt),)


def test_lora_chain_tags_name_and_path_on_every_block() -> None:
    none = init_none_hash("sha256", None)
    got = hash_block_chain(list(range(8)), 4, "sha256", none, "s", "sql-adapter", lora_path="/adapters/sql")
    assert _hex(got) == VECTORS["lora_salt_sha256"]
    records = hash_request_blocks(list(range(8)), 4, "sha256", none, cache_salt="s", lora_name="sql-adapter",
                                  lora_path="/adapters/sql")
    assert [r.extra_keys for r in records] == [(("lora", "sql-adapter", "/adapters/sql"), ("cache_salt", "s")),
                                              (("lora", "sql-adapter", "/adapters/sql"),)]
    with pytest.raises(ValueError, match="path"):
        hash_block_chain(list(range(8)), 4, "sha256", none, lora_name="sql-adapter")


def test_multimodal_chain() -> None:
    none = init_none_hash("xxhash_cbor", "7")
    got = hash_block_chain(list(range(500, 516)), 4, "xxhash_cbor", none, mm_features=MM)
    assert _hex(got) == VECTORS["mm_xxhash_cbor_seed7"]
    keys = [generate_block_hash_extra_keys(s, s + 4, mm_features=MM) for s in range(0, 16, 4)]
    assert keys == [(("mm", "img0", 2),), (("mm", "img0", -2),), (("mm", "img1", 1),), None]


def test_prompt_embeds_key() -> None:
    none = init_none_hash("sha256_cbor", None)
    extra = generate_block_hash_extra_keys(0, 2, prompt_embeds_hash=b"\x01" * 32)
    assert hash_block_tokens("sha256_cbor", none, (1, 2), extra).hex() == VECTORS["prompt_embeds_sha256_cbor"][0]


def test_event_extra_keys_are_untagged() -> None:
    per_block = [generate_block_hash_extra_keys(0, 4, lora_name="L", lora_path="/p", mm_features=MM,
                                                cache_salt="s", prompt_embeds_hash=b"e"),
                 generate_block_hash_extra_keys(12, 16, mm_features=MM)]
    assert to_event_extra_keys(per_block) == [("L", ("img0", 2), "s", b"e"), None]
    assert to_event_extra_keys([]) is None and to_event_extra_keys(None) is None
