"""Known-answer block hashes for vLLM 0.33.0, computed straight from its formula with hashlib, cbor2,
pickle and xxhash: no kvviz import, so the vectors do not come from the code they check.

The formula (vllm/v1/core/kv_cache_utils.py, 0.33.0): NONE_HASH = H(seed), seed = PYTHONHASHSEED or
"vllm-none-hash" for sha256/sha256_cbor; block i's hash = H((parent, tuple(tokens_i), extra_i)) with
extra_i = tuple(lora keys + mm keys + salt key + embeds key) or None, where the keys are
("lora", name, path) on every block, ("mm", identifier, offset - block_start) for each overlapping
input, ("cache_salt", salt) on block 0 only and ("prompt_embeds", digest).

Run: python tests/vectors/vllm033_vectors.py   (prints the table tests/mirror/test_vllm033_vectors.py holds)
"""

import hashlib
import pickle

import cbor2
import xxhash


def H(name, obj):
    raw = cbor2.dumps(obj, canonical=True) if name.endswith("_cbor") else pickle.dumps(obj, protocol=5)
    return hashlib.sha256(raw).digest() if name.startswith("sha256") else xxhash.xxh3_128_digest(raw)


def chain(name, seed, tokens, bs, per_block_extra):
    parent = H(name, seed)
    out = []
    for i in range(len(tokens) // bs):
        parent = H(name, (parent, tuple(tokens[i * bs:(i + 1) * bs]), per_block_extra(i)))
        out.append(parent.hex())
    return out


def cases():
    salt1 = chain("sha256_cbor", "vllm-none-hash", [473], 1, lambda i: (("cache_salt", "s2"),) if i == 0 else None)
    salt4 = chain("sha256", "vllm-none-hash", list(range(100, 112)), 4,
                  lambda i: (("cache_salt", "tenant-a"),) if i == 0 else None)
    lora_key = ("lora", "sql-adapter", "/adapters/sql")
    lora = chain("sha256", "vllm-none-hash", list(range(8)), 4,
                 lambda i: (lora_key, ("cache_salt", "s")) if i == 0 else (lora_key,))

    def mm_extra(i):  # image "img0" at tokens 2..7, "img1" at 9..10; blocks of 4
        keys = []
        for ident, off, ln in (("img0", 2, 6), ("img1", 9, 2)):
            if off < 4 * i + 4 and 4 * i < off + ln:
                keys.append(("mm", ident, off - 4 * i))
        return tuple(keys) or None

    mm = chain("xxhash_cbor", "7", list(range(500, 516)), 4, mm_extra)
    embeds = H("sha256_cbor", (H("sha256_cbor", "vllm-none-hash"), (1, 2), (("prompt_embeds", b"\x01" * 32),))).hex()
    return {"salt_bs1_sha256_cbor": salt1, "salt_bs4_sha256": salt4, "lora_salt_sha256": lora,
            "mm_xxhash_cbor_seed7": mm, "prompt_embeds_sha256_cbor": [embeds]}


if __name__ == "__main__":
    for key, hashes in cases().items():
        print(f"    {key!r}: {hashes!r},")
