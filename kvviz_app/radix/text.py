"""Every string of the "Radix tree vs hash chain" page and its figures."""

from __future__ import annotations

from kvviz.util.plural import Plural

TITLE = "Radix tree vs hash chain"
INTRO = (
    "Two engines, one idea: reuse the KV cache of a shared token prefix. **SGLang** keeps cached tokens in "
    "a **radix tree**: each edge holds a run of tokens, and the tree branches exactly where two prompts "
    "diverge. **vLLM** keeps fixed 16-token **blocks** identified by a **chained hash**: a block's hash "
    "includes its parent's, so a chain is a path in a tree of blocks too, but only whole blocks can be "
    "shared. vLLM's **sliding-window** manager adds a third way to search: with window attention a request "
    "needs only the last few blocks before the token it computes. Below, the same request history goes into "
    "all three, with the same memory (the pool's blocks x 16 token slots)."
)
LEGEND_HEADER = "How to read the pictures"
LEGEND = (
    "- **Radix tree** (top): one bar per node, placed on the token axis where its run starts; a branch "
    "drops to a new row where prompts diverge. `lock` = running requests using the node (locked nodes "
    "cannot be evicted); `LRU 1` = the evictable leaf that goes first.\n"
    "- **Hash chain** (bottom): one bar per physical block holding a hash (or the partly filled last "
    "block of a running request), linked to the block whose hash is its parent. `ref` = ref_cnt, `Q1` = "
    "head of the free queue (the next eviction).\n"
    "- **Dotted lines** are block boundaries: where a radix branch point falls between two of them, the "
    "tokens after the last boundary are reused by the tree but not by the block pool: the **partial tail**.\n"
    "- Every engine recomputes the last prompt token (it needs a query to sample from), so reuse is "
    "capped at the prompt length minus one."
)

SCENARIO = "Request history"
SCENARIO_HELP = "The same built-in scenarios as the block-table page."
STEP = "After step"
STEP_HELP = "The state of all three engines after this many steps of the history."
WINDOW = "Sliding window (tokens)"
WINDOW_HELP = (
    "For the third engine: attention sees only the last W tokens, so a hit needs only "
    "ceil((W - 1) / block size) cached blocks right before the recomputed token."
)
PAGE_SIZE = "Radix page size (tokens)"
PAGE_SIZE_HELP = "SGLang's default is 1 (token granularity). Set it to the block size to make the tree match whole blocks."
CAPTION = (
    "Memory: {blocks} blocks (block 0 is vLLM's null block, so {usable} usable) x {bs} tokens = {capacity:,} token "
    "slots for each engine · step {k} of {n}: {action}"
)
ACTION = {"add": "{id} arrives ({tokens} tokens{salt})", "append": Plural("{id} decodes {tokens} token", "{id} decodes {tokens} tokens", count="tokens"),
          "free": "{id} finishes", None: "nothing yet"}
SALT = ", salt {salt}"

# --- metrics -------------------------------------------------------------------------------------
METRICS_HEADER = "Reused prompt tokens, all requests so far"
METRIC_RADIX = "Radix tree"
METRIC_POOL = "Block pool"
METRIC_WINDOW = "Sliding window"
METRIC_TAIL = "Partial tails"
METRIC_VALUE = "{tokens:,} tokens"
METRIC_HELP = {
    "radix": "Tokens matched in the tree (token granularity), capped at each prompt's length - 1.",
    "pool": "Tokens in whole cached blocks found by the chained-hash lookup, capped the same way.",
    "window": "Tokens the sliding-window search counts as computed; only the blocks inside the window are kept.",
    "tail": "Tokens the tree reused past the last full block of its match: a block cache cannot reuse those.",
}

# --- figures -------------------------------------------------------------------------------------
STRUCTURES_HEADER = "The tree and the chain"
TREE_TITLE = "Radix tree after step {k}: {tokens:,} of {capacity:,} token slots in the tree"
CHAIN_TITLE = Plural("Hash chain after step {k}: {blocks} cached block of {bs} tokens",
                     "Hash chain after step {k}: {blocks} cached blocks of {bs} tokens", count="blocks")
TREE_EMPTY = "The tree is empty."
CHAIN_EMPTY = "No block holds a hash."
AXIS_TOKENS = "token position"
NODE_LABEL = "#{id} · {tokens} tok · lock {lock}"
NODE_LRU = " · LRU {rank}"
NODE_SHORT = "#{id}"
NODE_TOKENS = " · {tokens} tok"
NODE_SALT = "[{salt}] "
NODE_STATUS = {"locked": "locked (in use)", "evictable": "evictable leaf", "inner": "unlocked inner node"}
NO_SALT = "none"
HOVER_NODE = (
    "<b>radix node #{id}</b>: tokens {first}-{last} ({tokens} tokens)<br>{status}{lru}<br>lock count {lock} · "
    "last access {access}<br>salt {salt}<br>{text}"
)
HOVER_LRU = " · LRU position {rank}"
BLOCK_LABEL = "#{block} · {hash} · ref {ref}"
BLOCK_QUEUE = " · Q{pos}"
BLOCK_STATUS = {"used": "in use", "shared": "shared (ref_cnt > 1)", "cached": "cached, in the free queue",
                "partial": "partial block (never cached)"}
HOVER_BLOCK = (
    "<b>block {block}</b>: logical block {index} (tokens {first}-{last}) of {request}<br>{status} · ref_cnt {ref}"
    "{queue}<br>hash {hash}<br>parent {parent}"
)
HOVER_QUEUE_POS = " · free-queue position {pos}"
PARTIAL_HASH = "none (partial block)"
PARTIAL_SHORT = "partial"
NONE_HASH_LABEL = "NONE_HASH (first block)"

REUSE_HEADER = "What each engine reuses, per request"
REUSE_TITLE = "Reuse per request, up to step {k} (hover a bar for details)"
REUSE_EMPTY = "No request has arrived yet."
REQUEST_LABEL = "{id} (step {step})"
ENGINE_LABELS = {"radix": "radix", "pool": "block pool", "window": "window"}
REUSE_PARTS = {
    "reused": "reused",
    "tail": "partial tail (tree only)",
    "evicted": "evicted from the pool",
    "skipped": "outside the window (null)",
    "computed": "computed",
    "refused": "refused",
}
HOVER_PART = {
    "reused": "{n} tokens reused",
    "computed": "{n} tokens computed",
    "evicted": "{n} tokens the tree still held but the pool had evicted",
    "tail": "{n} tokens past the last full block: the tree reuses them, {bs}-token blocks cannot",
    "skipped": "tokens {first}-{last}: cached, but outside the window, so not needed (null block)",
}
HOVER_BLOCK_HIT = "tokens {first}-{last}: a cached block"
HOVER_REFUSED = "refused: not enough free memory"

TABLE_HEADER = "Per request"
TABLE_COLUMNS = {
    "request": "Request", "tokens": "Prompt tokens", "history": "Shared with history",
    "radix": "Radix reuse", "pool": "Pool reuse", "tail": "Partial tail", "window": "Window reuse",
    "window_blocks": "Window blocks kept",
}
TABLE_REFUSED = "refused"
REQUEST_SALT = "{id} [{salt}]"
WINDOW_BLOCKS = "{kept} of {total} ({skipped} null)"
WINDOW_NONE = "—"  # not "-": a table cell renders Markdown, and a lone "-" is a list bullet
TABLE_NOTE = (
    "**Shared with history**: the longest prefix this prompt shares with any earlier request of the same "
    "salt, capped at its length - 1: what an unlimited token-level cache would reuse."
)

EVICTIONS_HEADER = "What each engine evicts under pressure"
EVICTIONS_INTRO = (
    "The radix tree evicts whole **leaves**, least recently used first, so one eviction can drop a long "
    "token run. The block pool pops blocks from the **head of the free queue**; a finished request put its "
    "blocks there **tail first**, so the end of a chain goes before its shared head. The sliding-window "
    "manager has already freed blocks that left the window, so it evicts different ones."
)
EVICTIONS_NONE = "Nothing was evicted up to this step: memory was never short."
EVICTION_COLUMNS = {"step": "Step", "engine": "Engine", "what": "Evicted", "tokens": "Token positions",
                    "request": "From request", "count": "Tokens"}
EVICT_NODE = "node #{id}"
EVICT_BLOCK = "block {id}"
EVICT_TOKENS = "{first}-{last}"

LRU_LINE = "Evictable radix leaves, next eviction first: {leaves}."
LRU_NONE = "No radix leaf is evictable: every leaf is locked by a running request."
LRU_ITEM = "#{id} ({tokens} tokens)"
QUEUE_LINE = "Cached blocks in the free queue, next eviction first: {blocks}."
QUEUE_NONE = "No cached block is free: nothing cached can be evicted."
QUEUE_ITEM = "block {id} (Q{pos})"
RADIX_REFUSED = "The radix engine refused step {k}: {error}."
BAD_SETTINGS = "These settings do not work: {error}"
LEGEND_TREE = {"locked": "tree: locked (in use)", "evictable": "tree: evictable leaf",
               "inner": "tree: unlocked inner node"}
LEGEND_CHAIN = {"used": "chain: in use", "shared": "chain: shared (ref_cnt > 1)",
                "cached": "chain: cached, in the free queue", "partial": "chain: partial block (never cached)"}
