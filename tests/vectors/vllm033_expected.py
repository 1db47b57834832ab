"""Output of tests/vectors/vllm033_vectors.py (vLLM 0.33.0's formula applied without kvviz), pasted here as
the known answers tests/mirror/test_vllm033_vectors.py and tests/cli/test_cli_hash_vllm033.py check."""

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
