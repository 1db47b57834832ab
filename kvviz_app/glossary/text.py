"""Strings of the glossary page: each term in English and Russian (the Russian comes from the catalog,
so the page and the rest of the UI can never disagree) and the engine's own name for it."""

TITLE = "Glossary"
INTRO = (
    "The words this app uses, in English and in Russian, with the name the engine's code gives each one. "
    "Russian follows the usage of the articles kvviz is built from; names of code stay in Latin letters."
)
FILTER_LABEL = "Filter"
FILTER_PLACEHOLDER = "a word in either language, or a code name"
COL_EN = "English"
COL_RU = "Russian"
COL_ENGINE = "In the engine"
COL_MEANING = "Meaning"
NO_MATCH = "No term matches {query!r}."
FIDELITY_LINK = (
    "Which engine rules kvviz follows, after which vLLM or SGLang release and file, the test that checks "
    "each, and what kvviz does not model: `docs/FIDELITY.md` in the repository (below)."
)
FIDELITY_EXPANDER = "Fidelity: what kvviz follows, and how it is tested (English)"
SOURCES = (
    "Engine names are vLLM's (vllm/v1/core: `KVCacheManager`, `BlockPool`, `KVCacheBlock`) and SGLang's "
    "(`RadixCache`), and the model's config.json fields."
)

# {code: English term}. The Russian column is this term's catalog translation.
TERMS: dict[str, str] = {
    "block": "block",
    "block_table": "block table",
    "block_size": "block size",
    "hash": "hash",
    "hash_chain": "hash chain",
    "parent_hash": "parent hash",
    "none_hash": "NONE_HASH",
    "prefix": "prefix",
    "shared_prefix": "shared prefix",
    "prompt": "prompt",
    "token": "token",
    "cache": "KV cache",
    "prompt_caching": "prompt caching",
    "hit": "cache hit",
    "miss": "cache miss",
    "reuse": "reuse",
    "recompute": "recompute",
    "eviction": "eviction",
    "lru": "LRU",
    "free_queue": "free queue",
    "pool": "block pool",
    "ref_cnt": "reference count",
    "salt": "cache salt",
    "kv": "K/V tensors",
    "causal": "causal attention",
    "heads": "attention heads",
    "kv_heads": "KV heads",
    "layer": "layer",
    "window": "sliding window",
    "radix": "radix tree",
    "prefill": "prefill",
    "decode": "decode",
}

# {code: one line on what it is}.
MEANINGS: dict[str, str] = {
    "block": "A fixed run of tokens whose K/V tensors sit together in one slot of the pool.",
    "block_table": "A request's list of block ids, in token order.",
    "block_size": "Tokens per block (16 by default in vLLM).",
    "hash": "A full block's identity: a hash of its parent's hash, its tokens and extra keys.",
    "hash_chain": "Each block's hash includes its parent's, so one change re-keys every later block.",
    "parent_hash": "The hash of the previous block; block 0 uses NONE_HASH instead.",
    "none_hash": "The seed value that stands in for the parent hash of block 0.",
    "prefix": "The start of a prompt; caching reuses the longest prefix already computed.",
    "shared_prefix": "A prefix several prompts have in common, e.g. a system prompt.",
    "prompt": "The text (as tokens) a request sends to the model.",
    "token": "The unit the model reads: a word or a piece of one.",
    "cache": "Stored K/V tensors of blocks already computed, found by hash.",
    "prompt_caching": "Reusing the K/V tensors of a prompt's cached prefix instead of computing them again.",
    "hit": "A block whose hash is in the cache: its K/V tensors are reused.",
    "miss": "A block whose hash is not in the cache: it is computed.",
    "reuse": "Read cached K/V tensors instead of running the model over those tokens.",
    "recompute": "Run the model over tokens again because their K/V tensors are not cached.",
    "eviction": "A cached block taken for new tokens: it loses its hash and can no longer be hit.",
    "lru": "Least recently used: the free queue hands out the block unused for the longest time first.",
    "free_queue": "Blocks with ref_cnt 0, in eviction order; new blocks are taken from its head.",
    "pool": "All KV blocks of the GPU memory given to the cache.",
    "ref_cnt": "How many running requests use a block; only blocks at 0 can be evicted.",
    "salt": "An extra value mixed into block 0's hash, so only requests with the same salt share blocks.",
    "kv": "The keys and values every layer computes for every token; what a prompt cache stores.",
    "causal": "Each token attends only to itself and earlier tokens, so a prefix's K/V never depend on what follows.",
    "heads": "Parallel attention computations in a layer, each with its own queries.",
    "kv_heads": "Heads that have their own keys and values; fewer than query heads in GQA and MQA.",
    "layer": "One transformer block of the model; each keeps its own K/V tensors.",
    "window": "Attention to only the last N tokens; older blocks can be freed.",
    "radix": "SGLang's prefix tree over token sequences; matches prefixes token by token, not by block.",
    "prefill": "The pass over the prompt that computes its K/V tensors, the part caching skips.",
    "decode": "Generating the answer one token at a time, each reading all cached K/V tensors.",
}

