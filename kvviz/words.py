"""One English line per reason code of the engine mirror and the simulations: why a block hit, missed or
was invalidated, why each block-pool event happened, why a trace step was refused, which NONE_HASH seed
is in force. A library module that the CLI and the app share: the library speaks in codes and parameters,
``render_*`` turns them into these sentences for the CLI, and the app passes its translated view of the same
tables as ``words`` (kvviz_app/shell/text_concepts.py: these lines are its msgids)."""

import sys
from collections.abc import Mapping
from typing import Any, Protocol

from kvviz.util.plural import Plural


class Template(Protocol):
    """A line with ``{name}`` fields: a str, or a ``Plural`` that picks its form by a count among the params."""

    def format(self, **params: Any) -> str: ...


class ReasonWords(Protocol):
    """The tables ``render_*`` word codes with: this module, or the app's translated view of it."""

    EVENT_TEXT: Mapping[str, Template]
    STEP_ERROR_TEXT: Mapping[str, Template]
    BLOCK_REASON_TEXT: Mapping[str, Template]
    SEED_RANDOM_SHOWN: str
    SEED_REASON_TEXT: Mapping[str, str]
    SEED_IN_FORCE: str

# compare_prompts: one short sentence per block of prompt B, against a cache filled by prompt A.
REASON_HIT = "Same tokens and same parent hash as A's block {index}: reused from the cache."
REASON_HIT_CAPPED = (
    "Cached, but recomputed: the engine always recomputes the last prompt token to have something to "
    "sample from."
)
REASON_MISS_TOKENS = "Its tokens differ from A's block {index} (first change at token {token})."
REASON_MISS_NO_BLOCK = "A has no full block {index}, so nothing is cached at this position."
REASON_INVALIDATED_SALT = "Same tokens as A's block 0, but a different cache salt gives it a different hash."
REASON_INVALIDATED_CHAIN_SALT = (
    "Same tokens as A's block {index}, but the different salt changed block 0's hash and the chain "
    "carries it here."
)
REASON_INVALIDATED_CHAIN = (
    "Same tokens as A's block {index}, but block {changed} changed, so its parent hash differs."
)
REASON_PARTIAL = "Only {count} of {block_size} tokens: a partial block is never cached."

# Block-pool and manager events (kvviz.mirror.events.Event.reason).
EVENT_HIT = Plural("{count} cached block covers the first {tokens} tokens of the prompt.",
                   "{count} cached blocks cover the first {tokens} tokens of the prompt.", count="count")
EVENT_MISS = Plural("{tokens} token must be computed, from block {index} on.",
                    "{tokens} tokens must be computed, from block {index} on.", count="tokens")
EVENT_MISS_CAPPED = Plural(
    "{tokens} token must be computed; the whole prompt is cached but its last token is always recomputed.",
    "{tokens} tokens must be computed; the whole prompt is cached but its last token is always recomputed.",
    count="tokens",
)
EVENT_MISS_HOST = Plural(
    "{loaded} tokens are copied back from host memory; {tokens} token must be computed, from block {index} on.",
    "{loaded} tokens are copied back from host memory; {tokens} tokens must be computed, from block {index} on.",
    count="tokens",
)
EVENT_TOUCH = "Cache hit: ref_cnt + 1, and blocks with ref_cnt 0 leave the free queue."
EVENT_ALLOCATE = Plural("Popped {count} block from the head of the free queue for tokens up to {tokens}.",
                        "Popped {count} blocks from the head of the free queue for tokens up to {tokens}.",
                        count="count")
EVENT_ALLOCATE_NONE = "The last block still has room: no new block for tokens up to {tokens}."
EVENT_EVICT = "Popped for reuse: a cached block loses its hash, so it can no longer be hit."
EVENT_CACHE = "Each full block gets its chained hash and enters the hash -> block map."
EVENT_FREE = (
    "Request finished: ref_cnt - 1, last block first. Blocks at 0 without a hash (a partial block) jump "
    "to the free-queue head, since they can never be hit; cached ones go to the tail."
)
EVENT_FREE_WINDOW = "Left the sliding window: these blocks are no longer attended to and are freed."
EVENT_REFUSE = Plural("Refused: needs {needed} free block but only {free} are free; nothing was changed.",
                      "Refused: needs {needed} free blocks but only {free} are free; nothing was changed.",
                      count="needed")
EVENT_RESET = Plural("reset_prefix_cache: {dropped} cached hash dropped; no block can be hit any more.",
                     "reset_prefix_cache: {dropped} cached hashes dropped; no block can be hit any more.",
                     count="dropped")
EVENT_RESET_REFUSED = Plural("reset_prefix_cache refused: {in_use} block is still in use; nothing was changed.",
                             "reset_prefix_cache refused: {in_use} blocks are still in use; nothing was changed.",
                             count="in_use")
# The host tier under the pool (kvviz.mirror.offloading, vLLM's CPU offloading).
EVENT_HOST_LOAD = Plural(
    "Loaded from host memory: {count} block the device pool had lost is copied back into a fresh block "
    "({tokens} tokens not computed).",
    "Loaded from host memory: {count} blocks the device pool had lost are copied back into fresh blocks "
    "({tokens} tokens not computed).",
    count="count",
)
EVENT_HOST_EVICT = Plural(
    "Dropped from host memory: its least recently used block makes room (vLLM's BlockRemoved, medium CPU).",
    "Dropped from host memory: its {count} least recently used blocks make room (vLLM's BlockRemoved, "
    "medium CPU).",
    count="count",
)
EVENT_HOST_STORE = Plural(
    "Copied to host memory: {count} newly full block (vLLM's BlockStored, medium CPU); blocks already "
    "there are only marked recently used.",
    "Copied to host memory: {count} newly full blocks (vLLM's BlockStored, medium CPU); blocks already "
    "there are only marked recently used.",
    count="count",
)
EVENT_HOST_STORE_HELD = "Already in host memory: nothing copied, the blocks are only marked recently used."
EVENT_HOST_STORE_SKIPPED = Plural(
    "Not copied to host memory: {count} block offered, but too few host blocks can be dropped to make room.",
    "Not copied to host memory: {count} blocks offered, but too few host blocks can be dropped to make room.",
    count="count",
)
EVENT_TEXT = {
    "hit": EVENT_HIT, "miss": EVENT_MISS, "miss_capped": EVENT_MISS_CAPPED, "touch": EVENT_TOUCH,
    "allocate": EVENT_ALLOCATE, "allocate_none": EVENT_ALLOCATE_NONE, "evict": EVENT_EVICT,
    "cache": EVENT_CACHE, "free": EVENT_FREE, "free_window": EVENT_FREE_WINDOW, "refuse": EVENT_REFUSE,
    "reset": EVENT_RESET, "reset_refused": EVENT_RESET_REFUSED, "miss_host": EVENT_MISS_HOST,
    "host_load": EVENT_HOST_LOAD, "host_evict": EVENT_HOST_EVICT, "host_store": EVENT_HOST_STORE,
    "host_store_held": EVENT_HOST_STORE_HELD, "host_store_skipped": EVENT_HOST_STORE_SKIPPED,
}
BLOCK_REASON_TEXT = {
    "hit": REASON_HIT, "hit_capped": REASON_HIT_CAPPED, "miss_tokens": REASON_MISS_TOKENS,
    "miss_no_block": REASON_MISS_NO_BLOCK, "invalidated_salt": REASON_INVALIDATED_SALT,
    "invalidated_chain_salt": REASON_INVALIDATED_CHAIN_SALT, "invalidated_chain": REASON_INVALIDATED_CHAIN,
    "partial": REASON_PARTIAL,
}

# NONE_HASH seed in force (kvviz.mirror.hashing.resolve_none_hash_seed reason codes).
SEED_REASON_TEXT = {
    "explicit": "seed {seed!r} set explicitly (vLLM: PYTHONHASHSEED); it wins for every algorithm.",
    "default_crypto": (
        "no seed set and {algo} is cryptographic, so vLLM uses the fixed seed \"vllm-none-hash\": "
        "independent processes agree on every block hash."
    ),
    "random_non_crypto": (
        "no seed set and {algo} is not collision resistant, so vLLM draws a random seed per process: "
        "nobody can precompute colliding blocks, and hashes differ between processes."
    ),
}
SEED_IN_FORCE = "NONE_HASH seed: {shown}. Why: {why}"
SEED_RANDOM_SHOWN = "random ({prefix}...)"


def _fill(template: Template, params: dict[str, Any]) -> str:
    try:
        return template.format(**params)
    except (KeyError, IndexError):
        return template


def _words(words: ReasonWords | None) -> ReasonWords:
    return words or sys.modules[__name__]


def render_event(code: str, params: dict[str, Any], words: ReasonWords | None = None) -> str:
    """The sentence for one block-pool event's reason code (English, or from ``words``' EVENT_TEXT)."""
    return _fill(_words(words).EVENT_TEXT.get(code, code), params)


STEP_ERROR_TEXT = {
    "refuse": EVENT_REFUSE,
    "reset_refused": EVENT_RESET_REFUSED,
    "skipped_refused": "request {id!r} was refused, so there is nothing to {op}",
}


def render_step_error(code: str, params: dict[str, Any], words: ReasonWords | None = None) -> str:
    """The sentence for a refused or skipped trace step."""
    return _fill(_words(words).STEP_ERROR_TEXT.get(code, code), params)


def render_block_reason(code: str, params: dict[str, Any], words: ReasonWords | None = None) -> str:
    """The sentence for one compared block's reason code."""
    return _fill(_words(words).BLOCK_REASON_TEXT.get(code, code), params)


def render_seed(seed: str, reason: str, algo: str, words: ReasonWords | None = None) -> str:
    """Which NONE_HASH seed is in force and why (differs between cryptographic and fast algorithms)."""
    w = _words(words)
    shown = w.SEED_RANDOM_SHOWN.format(prefix=seed[:8]) if reason == "random_non_crypto" else repr(seed)
    why = w.SEED_REASON_TEXT.get(reason, reason).format(seed=seed, algo=algo)
    return w.SEED_IN_FORCE.format(shown=shown, why=why)
