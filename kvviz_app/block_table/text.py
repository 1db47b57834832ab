"""Every string of the "Block table and LRU free queue" page and the engine figures it shares with the
radix page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvviz.util.plural import Plural

if TYPE_CHECKING:
    from kvviz_app.shell.i18n.texts import Texts

TITLE = "Block table and LRU free queue"
INTRO = (
    "Watch a vLLM-style block manager serve a few requests. Every prompt is cut into **blocks** of 16 "
    "tokens; each request keeps a **block table** that maps its logical blocks (tokens 1-16, 17-32, ...) to "
    "physical blocks anywhere in a small **pool**. A full block gets a **chained hash**, so a later prompt "
    "with the same prefix (and the same **cache salt**) finds it and shares it: its **ref_cnt** counts the "
    "requests holding it. Finished requests return their blocks to the **free queue**, last block first; "
    "they keep their hashes and can still be hit until the pool needs the space and pops them from the "
    "head: an **eviction**. Every picture below is rebuilt from the block manager's recorded events."
)
INTRO_SHORT = (
    "A vLLM-style block manager serving a few requests: block tables, the physical pool and the LRU free "
    "queue, step by step."
)
LEGEND_HEADER = "What this page shows and how to read the pictures"
LEGEND = (
    "- **Block tables**: one row per running request, one cell per logical block; the column says which "
    "tokens, the cell which physical block holds them. Green = reused from the cache (a hit), blue = "
    "computed for this request and cached, light blue = the last, partly filled block (never cached). "
    "`x4` = four requests share the block.\n"
    "- **Pool**: every physical block with its short hash and ref_cnt. Blue = in use, teal = shared "
    "(ref_cnt > 1), amber = free but still cached (a future hit, or the next victim), grey = empty.\n"
    "- **Outlines** mark the blocks this step touched: green hit, blue allocated, purple cached, grey "
    "freed, red evicted (in the block tables: only what this step gave the request).\n"
    "- **Free queue**: the order in which free blocks are handed out. The head (left) is the **next "
    "eviction**; freed cached blocks join the tail, a freed block without a hash (a partial last block) "
    "jumps to the head.\n"
    "- **Block 0** (pale grey) is vLLM's **null block**: reserved when the pool starts, never handed out, "
    "never in the free queue and not counted in usage.\n"
    "- **Host tier** (when it is on): a second pool in host memory under the device pool, as vLLM 0.33.0's "
    "native CPU offloading (`--kv-offloading-size`). Every full block is copied there as soon as it is "
    "computed; when a later prompt misses a block the device pool has evicted, the block is copied back "
    "into a fresh device block (magenta in the block tables) instead of being computed. Host memory keeps "
    "its own LRU order: its head (left) is dropped first, a request's first blocks last. Magenta cells hold "
    "a block only host memory still has; pink ones a block the device pool has cached too. In the pool, a "
    "magenta outline marks a block loaded back from host memory, a pink one a block copied there. With "
    "**Host eviction** ARC, host memory keeps two lists, T1 (blocks only stored) and T2 (blocks a request "
    "reused), each oldest first on rows of its own; a red frame marks the block dropped next."
)

# --- scenario and controls -------------------------------------------------------------------------
SCENARIO = "Scenario"
SCENARIO_HELP = "Built-in request histories. Each replays identically: token ids come from the model's tokenizer."
HOST_TIER = "Host tier (blocks)"
HOST_TIER_HELP = (
    "A second pool in host memory under the device pool, as vLLM 0.33.0's CPU offloading: full blocks are "
    "copied there as they are computed, and a prompt copies back what the device pool lost. Off = the "
    "device pool alone. Under it, once on: LRU or ARC, how host memory picks the block to drop."
)
HOST_TIER_OFF = "off"
POOL_CAPTION_HOST = "host tier: {host} blocks ({policy})"
POOL_CAPTION = (
    "Pool: {blocks} blocks x {block_size} tokens (block 0 is the null block, so {usable} usable = {tokens:,} "
    "token slots) · hash {hash} · {steps} steps"
)
RESET_CACHE = "reset_prefix_cache"
RESET_CACHE_HELP = (
    "Append a reset_prefix_cache step, as vLLM's /reset_prefix_cache endpoint does (after a weight update, "
    "or between benchmark runs): every cached hash is dropped. vLLM refuses while any request holds "
    "blocks; the step then shows the refusal."
)
RESET = "Reset"
BACK = "Step back"
FORWARD = "Step forward"
PLAY = "Play"
PAUSE = "Pause"
SPEED = "Speed (steps per second)"
SPEED_HELP = "How fast Play advances. Step back and forward pause the playback."
JUMP = "Step"
JUMP_HELP = "Drag to any step; the state is replayed from the events of the steps before it."
STEP_HEADER = "Step {k} of {n}"
STEP_START = "Start: an empty pool of {blocks} free blocks. Press **Step forward** or **Play**."
PLAYING = "Playing..."
PLAYING_PROGRESS = "{step} · " + PLAYING
DELTA_POINTS = "{points:+.0f} pt"  # change of a rate, in percentage points
AT_END = "End of the scenario. **Reset** or step back to look again."

ACTION = {
    "add": "**{id}** arrives: a {tokens}-token prompt{salt}",
    "append": Plural("**{id}** decodes {tokens} token", "**{id}** decodes {tokens} tokens", count="tokens"),
    "free": "**{id}** finishes",
    "reset": "**reset_prefix_cache**: drop every cached hash (refused while any block is in use)",
}
SALT_SUFFIX = " (salt `{salt}`)"
PROMPT_TEXT = "Prompt text"
DECODED_TEXT = "Decoded text"
REFUSED = "{error}"
SKIPPED = "Skipped: {error}"

# --- counters ------------------------------------------------------------------------------------
COUNTERS = {
    "hit_tokens": ("Hit tokens", "Prompt tokens served from cached blocks (whole blocks only)."),
    "computed_tokens": ("Computed tokens", "Prompt tokens prefilled plus tokens decoded."),
    "hit_rate": ("Hit rate", "Hit tokens / prompt tokens of every admitted request."),
    "evictions": ("Evictions", "Cached blocks that lost their hash because the pool needed the block."),
    "shared_blocks": ("Shared blocks", "Blocks held by more than one request now (ref_cnt > 1)."),
    "running": ("Running requests", "Requests holding blocks after this step."),
}
COUNTERS_HOST = {
    "host_hit_tokens": ("From host memory", "Prompt tokens copied back from the host tier instead of computed."),
    "host_stored": ("Copied to host", "Blocks copied to host memory as they were computed."),
    "host_dropped": ("Dropped from host", "Blocks host memory dropped (its LRU) to make room for new ones."),
}
HOST_LINE = (
    "Host memory: {held} of {blocks} blocks held · {loaded} loaded back · {skipped} stores skipped (too few "
    "blocks could be dropped)"
)
POOL_LINE = "{used} in use · {cached} free but cached · {free} empty · {refused} refused so far"

# --- events --------------------------------------------------------------------------------------
EVENTS_HEADER = "What happened in this step"
EVENTS_NONE = "No events: nothing has happened yet."
EVENT_KIND_LABEL = {
    "hit": "hit",
    "miss": "miss",
    "touch": "touch",
    "allocate": "allocate",
    "cache": "cache",
    "free": "free",
    "evict": "evict",
    "refuse": "refuse",
    "reset": "reset",
    "host_load": "load from host",
    "host_store": "copy to host",
    "host_evict": "drop from host",
}
ENGINE_REQUEST = "engine"  # the request column of an event no request caused (reset_prefix_cache)
FREE_JUMP_WHY = Plural(
    "Block {ids} had no hash (a partly filled last block), so it jumped to the free-queue head: it can "
    "never be a cache hit, so vLLM spends it before any cached block.",
    "Blocks {ids} had no hash (partly filled last blocks), so they jumped to the free-queue head: they "
    "can never be a cache hit, so vLLM spends them before any cached block.",
    count="n",
)
EVENT_LINE = "{badge} **{request}** · {blocks} · {reason}"
EVENT_BLOCKS = Plural("block {ids}", "blocks {ids}", count="n")
EVENT_NO_BLOCKS = "no block"
EVENT_HOST_BLOCKS = Plural("host block {ids}", "host blocks {ids}", count="n")
EVICTED_SPAN = "block {block} held tokens {first}-{last} of {request}"

# --- figures -------------------------------------------------------------------------------------
TABLES_HEADER = "Block tables"
TABLES_NONE = "No request is running after this step."
TABLES_TITLE = "Block tables after step {k}: logical blocks (tokens) -> physical blocks"
TABLES_TEXT = "Block tables as text"
TABLE_COLUMNS = {"request": "Request", "mapping": "Logical -> physical", "source": "Source", "ref_cnt": "ref_cnt",
                 "hash": "Hash", "text": "Text"}
SOURCE_LABELS = {"hit": "hit (reused)", "host": "loaded from host memory", "new": "computed",
                 "partial": "partial (not cached)", "skipped": "outside the window (null block)"}
CELL_BLOCK = "block {block}"
CELL_SHARED = " x{ref}"
CELL_NULL = "null"
MAPPING = "tokens {first}-{last} -> {target}"
MAPPING_NULL = "null block"
AXIS_TOKENS = "tokens {first}-{last}"
ROW_LABEL = "{id} · {tokens} tok"
ROW_LABEL_SALT = "{id} · {tokens} tok · salt {salt}"
HOVER_CELL = (
    "<b>{request}</b>: tokens {first}-{last} -> block {block}<br>{source}<br>hash {hash} · ref_cnt {ref}"
    "<br>{text}"
)

POOL_HEADER = "Physical block pool"
POOL_TITLE = "Step {k}: {used} in use, {cached} cached, {free} empty"
POOL_STATE_LABELS = {"used": "in use", "shared": "shared (ref_cnt > 1)", "cached": "free, still cached",
                     "free": "empty", "null": "null block (reserved)"}
NULL_CELL = "#0<br>null"
HOVER_NULL = (
    "block 0 · vLLM's null block<br>Reserved when the pool starts: never allocated, never in the free<br>"
    "queue, not counted in usage. It stands in for blocks a sliding window skipped."
)
TOUCH_LABELS = {"hit": "hit", "touch": "hit", "allocate": "allocated", "cache": "cached", "free": "freed",
                "evict": "evicted", "host_load": "loaded from host", "host_store": "copied to host"}
POOL_CELL = "#{block}<br>{hash}<br>ref {ref}"
HOVER_POOL = "block {block} · {state}<br>ref_cnt {ref}<br>hash {hash}<br>{touched}"
HOVER_TOUCHED = "this step: {kinds}"
HOVER_NOT_TOUCHED = "not touched this step"
NO_HASH = "no hash"

QUEUE_HEADER = "Free queue (LRU order)"
QUEUE_TITLE = Plural("Step {k}: {n} free block, head first", "Step {k}: {n} free blocks, head first")
QUEUE_EMPTY = "The free queue is empty: the next request that needs a block is refused."
QUEUE_HEAD = "head: next eviction"
QUEUE_TAIL = "tail: freed last"
QUEUE_CELL = "#{block}"
QUEUE_JUMPED = "↑ jumped to head"
QUEUE_JUMP_LEGEND = "freed without a hash this step: jumped to the head"
HOVER_QUEUE = "position {pos} of {n}<br>block {block} · {state}<br>{hash}"

HOST_POOL_TITLE = "Host memory: {held} of {blocks} blocks held"
HOST_STATE_LABELS = {"host_only": "only in host memory", "both": "in host memory, cached on the device too",
                     "empty": "empty"}
HOST_CELL = "H{slot}<br>{hash}"
HOST_EMPTY_CELL = "H{slot}"
HOVER_HOST = "host block H{slot} · {state}<br>hash {hash}<br>{touched}"
HOST_TOUCH_LABELS = {"stored": "copied here this step", "loaded": "loaded back this step",
                     "dropped": "dropped this step (then reused)"}
HOST_QUEUE_TITLE = Plural("Host LRU: {n} block, head first", "Host LRU: {n} blocks, head first")
HOST_QUEUE_TITLE_ARC = Plural("Host ARC: {n} block, T1 then T2", "Host ARC: {n} blocks, T1 then T2")
HOST_DROPPED_NEXT = "red frame: dropped next"
HOST_ARC_T1 = "T1: stored, not reused yet"
HOST_ARC_T2 = "T2: reused by a request"
HOST_ARC_T1_TICK = "T1"
HOST_ARC_T2_TICK = "T2"
HOST_POLICY = "Host eviction"
HOST_POLICY_HELP = (
    "How host memory picks the block to drop, as vLLM 0.33.0's OffloadingConnector `eviction_policy`. LRU: "
    "the least recently used. ARC: two lists, T1 (blocks only stored) and T2 (blocks a request reused); T1's "
    "oldest goes while T1 holds at least its target size, else T2's, and a block stored again after being "
    "dropped moves that target. Needs a host tier."
)
HOST_POLICY_NAMES = {"lru": "LRU", "arc": "ARC"}
HOST_QUEUE_EMPTY = "Host memory is empty: nothing has been copied there yet."
HOST_QUEUE_HEAD = "head: dropped next"
HOST_QUEUE_TAIL = "tail: used last"
HOVER_HOST_QUEUE = "position {pos} of {n}<br>host block H{slot} · {state}<br>hash {hash}"
HITS_HEADER = "Prompt tokens by source"
HITS_NONE = "No prompt has arrived yet."
HITS_COLUMNS = {"request": "Request", "prompt": "Prompt tokens", "device": "Device hit", "host": "From host memory",
                "computed": "Computed"}
EVICTED_IN_HOST = Plural("block {ids} is still in host memory", "blocks {ids} are still in host memory", count="n")

TIMELINE_HEADER = "The whole scenario"
TIMELINE_TITLE = "Counters at every step (the dotted line is the step shown above)"
TIMELINE_SERIES = {"hit_tokens": "hit tokens", "computed_tokens": "computed tokens", "evictions": "evictions (blocks)"}
TIMELINE_HOST = "tokens from host memory"
TIMELINE_X = "step"
TIMELINE_Y = "tokens"
TIMELINE_Y2 = "evicted blocks"
ANIMATION_TITLE = "The pool at every step (press ▶ to animate)"
ANIMATION_PLAY = "▶"
ANIMATION_PAUSE = "❚❚"
ANIMATION_STEP = "step "

# --- add a request -------------------------------------------------------------------------------
ADD_HEADER = "Add a request"
ADD_INTRO = (
    "Type your own question. It is tokenized with the model's tokenizer and appended to the scenario as "
    "new steps; the player jumps to its arrival so you can see what it reuses."
)
ADD_TEXT = "Your prompt"
ADD_TEXT_HELP = "Up to {limit:,} tokens."
ADD_PREFIX = "Put the scenario's shared system prompt in front"
ADD_PREFIX_HELP = "Keep this on to share its blocks; turn it off to send the text exactly as typed."
ADD_SALT = "Cache salt (tenant)"
ADD_SALT_HELP = "Empty = no salt. Requests share blocks only with requests of the same salt."
ADD_ANSWER = "Then decode this answer (optional)"
ADD_FINISH = "Then finish the request"
ADD_SUBMIT = "Add to the scenario"
ADD_EMPTY = "Type a prompt first."
ADD_DONE = "Added {id}: {tokens} prompt tokens, arriving at step {step}."
ADD_MINE = "Your requests in this scenario: {ids}."
ADD_CLEAR = "Remove my requests"
ADD_FAILED = "Could not add the request"

# kvviz.analysis.scenarios.records.ScenarioError, by code (the English words are the CLI's line). A step to blame is
# named first with STEP_PREFIX; {kind} of not_string / not_object / step_not_object is a JSON kind
# (calculator_config.JSON_KINDS); bad_trace's {detail} is the replay's own line.
STEP_PREFIX = "step {step}: "
SCENARIO_ERRORS = {
    "too_many_steps": "a scenario holds at most {limit} steps",
    "no_tokens": "the request has no tokens",
    "too_many_tokens": "the request has more than {limit:,} tokens, the most one step takes",
    "bad_step_index": "step must be an integer in 0..{high}, got {got}",
    "bad_trace": "{detail}",
    "bad_window": "sliding window must be an integer in 2..{high} tokens, got {got}",
    "bad_page_size": "radix page size must be an integer in 1..256, got {got}",
    "not_string": "'{key}' must be a string, got a JSON {kind}",
    "not_object": "a scenario is a JSON object, got a JSON {kind}",
    "unknown_keys": "unknown scenario key(s): {keys}; valid: {valid}",
    "steps_not_list": "'steps' must be a list of steps",
    "missing_steps": "missing 'steps'",
    "file_too_many_steps": "too many steps: {count} (at most {limit})",
    "too_many_blocks": "{key} must be at most {limit} for a scenario (the pool is drawn block by block), "
                       "got {value}",
    "step_not_object": "a step is a JSON object, got a JSON {kind}",
    "step_unknown_keys": "unknown key(s): {keys}",
    "text_without_tokens": "has 'text' but no 'tokens'; tokenize the scenario first",
    "empty_text": "'text' is empty",
    "pieces_not_strings": "'pieces' must be a list of strings",
    "pieces_length": "'pieces' must have one entry per token",
    "step_too_many_tokens": "{count:,} tokens is too many for one step (at most {limit:,})",
    "bad_user_template": "'user_template' must contain {placeholder}",
    "unknown_scenario": "unknown scenario {name!r}; built-in: {builtin}",
}


# kvviz.analysis.scenarios.block_trace.TraceError, by code, as a scenario's bad_trace words it (step prefix first, 1-based); the
# English words repeat the trace's own line.
TRACE_ERRORS = {
    "not_int": "{key} must be an integer, got {got}",
    "out_of_range": "{key} must be in {low}..{high}, got {got}",
    "not_object": "a trace is a JSON object, got a JSON {kind}",
    "unknown_keys": "unknown trace key(s): {keys}; valid: {valid}",
    "missing_key": "missing '{key}'",
    "bad_block_size": "block size must be an integer in {low}..{high}, got {got}",
    "unknown_hash": "unknown hash function {name}; valid: {valid}",
    "bad_seed": "seed must be a string or null, got {got}",
    "not_string": "'{key}' must be a string",
    "steps_not_list": "'steps' must be a list, got a JSON {kind}",
    "too_many_steps": "too many steps: {count} (at most {limit})",
    "too_many_tokens": "the trace holds more than {limit:,} tokens",
    "step_not_object": "a step is a JSON object, got a JSON {kind}",
    "bad_op": "'op' must be one of {ops}, got {got}",
    "step_unknown_keys": "unknown key(s) for {op}: {keys}",
    "bad_id": "'id' must be a non-empty string, got {got}",
    "needs_tokens": "{op} needs 'tokens'",
    "tokens_not_list": "'tokens' must be a list of integers",
    "token_not_int": "token {index} is not an integer: {value}",
    "token_out_of_range": "token {index} is out of range 0..{high}: {value}",
    "no_tokens": "no tokens: at least one token id is needed",
    "request_running": "{op} '{id}': request '{id}' is already running",
    "unknown_request": "{op} '{id}': unknown request '{id}'",
    "bad_request_id": "{op} '{id}': request id must be a non-empty string, got {got}",
    "step_failed": "{op} '{id}': {reason}",
}


def scenario_error(t: Texts, exc: Exception) -> str:
    """A ``ScenarioError`` as one line in the view's language (its own English line when it has no code);
    a ``bad_trace`` is worded from its ``trace_code`` (TRACE_ERRORS)."""
    from kvviz.errors import CodedError
    from kvviz_app.shell.i18n import texts
    TC = texts("calculator_config", t.lang)
    TJ = texts("jsonio", t.lang)

    def adjust(code: str, params: dict[str, Any]) -> str:
        if "kind" in params:
            params["kind"] = TC.JSON_KINDS.get(params["kind"], params["kind"])
        return t.STEP_PREFIX.format(step=params["step"]) if "step" in params else ""

    params = dict(getattr(exc, "params", {}) or {})
    if getattr(exc, "code", "") == "bad_trace" and params.get("trace_code") in t.TRACE_ERRORS:
        trace_code = params.pop("trace_code")
        params.pop("detail", None)
        return TJ.coded_words(CodedError(str(exc), trace_code, **params), t.TRACE_ERRORS, adjust)
    return TJ.coded_words(exc, t.SCENARIO_ERRORS, adjust)
