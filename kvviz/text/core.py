"""Sentences the prefix-cache core produces: why a block hit, missed or was invalidated, and why each
block-pool event happened. Format templates; the core fills in the numbers."""

from kvviz.i18n.plural import Plural

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

# Block-pool and manager events (kvviz.core.events.Event.reason).
EVENT_HIT = Plural("{count} cached block covers the first {tokens} tokens of the prompt.",
                   "{count} cached blocks cover the first {tokens} tokens of the prompt.", count="count")
EVENT_MISS = Plural("{tokens} token must be computed, from block {index} on.",
                    "{tokens} tokens must be computed, from block {index} on.", count="tokens")
EVENT_MISS_CAPPED = (
    "{tokens} token(s) must be computed; the whole prompt is cached but its last token is always "
    "recomputed."
)
EVENT_TOUCH = "Cache hit: ref_cnt + 1, and blocks with ref_cnt 0 leave the free queue."
EVENT_ALLOCATE = Plural("Popped {count} block from the head of the free queue for tokens up to {tokens}.",
                        "Popped {count} blocks from the head of the free queue for tokens up to {tokens}.",
                        count="count")
EVENT_ALLOCATE_NONE = "The last block still has room: no new block for tokens up to {tokens}."
EVENT_EVICT = "Popped for reuse: cached block(s) lose their hash, so they can no longer be hit."
EVENT_CACHE = "Full block(s) get their chained hash and enter the hash -> block map."
EVENT_FREE = "Request finished: ref_cnt - 1, blocks at 0 go to the free-queue tail, last block first."
EVENT_FREE_WINDOW = "Left the sliding window: these blocks are no longer attended to and are freed."
EVENT_REFUSE = Plural("Refused: needs {needed} free block but only {free} are free; nothing was changed.",
                      "Refused: needs {needed} free blocks but only {free} are free; nothing was changed.",
                      count="needed")
