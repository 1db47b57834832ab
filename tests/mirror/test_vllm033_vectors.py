"""Known-answer block hashes of vLLM 0.33.0 (tagged extra keys: salt, LoRA, multimodal, prompt embeds).

The expected hex strings (tests/vectors/vllm033_expected.py) are the output of tests/vectors/vllm033_vectors.py,
which applies 0.33.0's formula with hashlib/cbor2/pickle/xxhash alone (it imports nothing from kvviz); this
test checks kvviz against them, that the script still prints them,
and that the untagged event form is what 0.33.0's ``to_event_extra_keys`` publishes."""

from __future__ import annotations

import pytest
from vectors.vllm033_expected import VECTORS

from kvviz.mirror.hashing import (
    REFERENCE_RELEASE,
    MMFeature,
    generate_block_hash_extra_keys,
    hash_block_chain,
    hash_block_tokens,
    hash_request_blocks,
    init_none_hash,
    to_event_extra_keys,
)

MM = (MMFeature("img0", 2, 6), MMFeature("img1", 9, 2))


def _hex(hashes) -> list[str]:
    return [h.hex() for h in hashes]


def test_release_named_once() -> None:
    assert REFERENCE_RELEASE == "vLLM 0.33.0"


def test_independent_script_still_gives_the_table() -> None:
    from vectors.vllm033_vectors import cases

    assert cases() == VECTORS


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
