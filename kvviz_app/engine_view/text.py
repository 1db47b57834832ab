"""Strings of the Engine (live) page: kvviz's own serving engine, its block tables and real K/V."""

TITLE = "Engine (live)"
INTRO = (
    "kvviz's own serving engine, in the spirit of vLLM v1: one preallocated K and V tensor per layer cut "
    "into blocks, the block pool and free queue of the other pages handing out the block ids, a scheduler "
    "that runs decode tokens first and then prefill chunks, all within one token budget per step. The block "
    "numbers below are the memory the model actually read and wrote."
)
SIZES = (
    "{blocks:,} blocks of {bs} tokens ({tokens:,} tokens, block 0 is the null block), {mib:.1f} MiB of K/V "
    "measured from the tensors, {block_kib:.1f} KiB per block."
)
UNSUPPORTED = (
    "This page runs kvviz's engine, which serves Llama-family models on its native decoder; {model} "
    "({architecture}) runs through transformers, so the engine refuses it. The pages that only prefill "
    "(Overview, Edit, the calculator) work with it; start kvviz with a Llama-family model to use this page."
)
BURST_HEADER = "Send a burst"
BURST_INTRO = (
    "Sends six prompts at once: four share a long system prompt, two are different. Each generates "
    "{new} tokens. The shared prefix is computed once: the others' block tables point at the same blocks."
)
BURST_BUTTON = "Send the burst"
BURST_SENT = "Sent {n} requests to the engine."
LIVE = "Refresh every second"
M_RUNNING = "Running"
M_WAITING = "Waiting"
M_USAGE = "KV cache usage"
M_HIT = "Prefix cache hit rate"
M_HIT_HELP = "vLLM's counters: prompt tokens found in the cache / prompt tokens looked up, since start."
M_PREEMPTIONS = "Preemptions"
REQUESTS_HEADER = "Requests and their block tables"
NO_REQUESTS = "No request in the engine now. Send a burst, then watch it run."
COL_REQUEST = "request"
COL_STATUS = "status"
COL_PROMPT = "prompt tokens"
COL_CACHED = "cached tokens"
COL_COMPUTED = "computed tokens"
COL_OUTPUT = "output tokens"
COL_TABLE = "block table"
COL_CLIENT = "client"
API_HEADER = "Requests from API clients"
API_INTRO = (
    "The last requests sent to this process's OpenAI-compatible API ({url}/v1), newest first: who sent them "
    "and how many of their prompt tokens the prefix cache gave them (whole blocks, as vLLM counts)."
)
API_OFF = "The OpenAI-compatible API is off in this process (KVVIZ_API=0)."
API_NONE = "No API request yet: an attendee can send one with curl or the openai package (docs/SERVER.md)."
COL_TTFT = "time to first token, s"
STEPS_HEADER = "Steps"
NO_STEPS = "The engine has not run a step yet."
FIG_STEPS_TITLE = "Tokens computed per step: prefill chunks and decode tokens"
FIG_PREFILL = "prefill tokens"
FIG_DECODE = "decode tokens"
FIG_STEP_AXIS = "step"
FIG_TOKENS_AXIS = "tokens"
POOL_HEADER = "Block pool"
POOL_CAPTION = (
    "Each cell is a physical block: its colour is its ref_cnt (requests using it); an outlined cell holds a "
    "hash, so a later prompt with the same prefix can reuse it. Free queue head (evicted first): {head}."
)
FIG_POOL_TITLE = "ref_cnt per block"
FIG_BLOCK_HOVER = "block {id}"
BLOCK_HEADER = "A block's real K/V"
BLOCK_PICK = "Block"
BLOCK_LAYER = "Layer"
BLOCK_WHICH = "Tensor"
BLOCK_TOKENS = "Tokens in block {id}: {tokens}"
BLOCK_EMPTY = "Block {id} is free and holds no hash: its slots keep stale values until the next owner writes."
NO_BLOCKS = "No block holds K/V yet."
FIG_KV_TITLE = "{which} of block {id}, layer {layer}: one row per token slot, one column per head x dimension"
FIG_KV_X = "kv head x dimension"
FIG_KV_Y = "slot"
TIERS_HEADER = "Two tiers: the device pool and host memory"
TIERS_OFF = (
    "This engine has no host tier (the default). Start kvviz with `KVVIZ_KV_OFFLOADING_SIZE=0.5` (GiB of host "
    "memory, vLLM's `--kv-offloading-size`) to see both tiers here; `kvviz serve --kv-offloading-size 0.5` "
    "gives a separate API server one."
)
TIERS_INTRO = (
    "vLLM 0.33.0's native offloading: after each step the newly computed full blocks are copied to a host "
    "memory pool ({host:,} blocks, {mib:.1f} MiB, {policy}). When the device pool evicts a cached block, its "
    "copy can still be hit: the blocks right after a prompt's device hit are looked up in host memory and "
    "copied back instead of computed."
)
TIERS_CPU_ONLY = (
    "This machine has no accelerator: the device pool is CPU memory too, so both tiers are host memory here. "
    "The bookkeeping, the hits and the copies are the same as on a GPU; only the copy speed is not."
)
FIG_TIERS_TITLE = "Blocks in each tier"
FIG_TIER_DEVICE = "device pool"
FIG_TIER_HOST = "host memory"
FIG_HELD_CACHED_IN_HOST = "cached, copy in host memory"
FIG_HELD_CACHED = "cached, device only"
FIG_HELD_IN_USE = "in use, not cached"
FIG_HOST_HELD = "held in host memory"
FIG_FREE = "free blocks"
FIG_BLOCKS_AXIS = "blocks"
TIERS_COUNTS = (
    "Device pool: {dheld:,} of {dblocks:,} blocks held, {dfree:,} free; {dcached:,} hold a hash, and "
    "{in_host:,} of those hashes are in host memory too. Host memory: {hheld:,} of {hblocks:,} blocks held, "
    "{hfree:,} free."
)
JOURNEY_HEADER = "A block's journey, counted since start"
JOURNEY = (
    "**{computed:,}** blocks computed and cached in the device pool → **{stored:,}** copied to host memory "
    "→ **{evicted:,}** evicted from the device pool → **{loaded:,}** loaded back from host memory on a hit; "
    "**{dropped:,}** dropped from host memory (its {policy}), **{skipped:,}** stores skipped (host memory full "
    "of blocks in use)."
)
JOURNEY_NOTE = (
    "A block whose hash host memory holds already is not copied again (only marked recently used). A load "
    "for a preempted request's re-admission counts here but not in its tokens below: as vLLM, a prompt's "
    "hits are counted once, when it is first scheduled."
)
HITS_HEADER = "Prompt tokens by source, recent requests"
HITS_NONE = "No request admitted yet: send a burst."
FIG_HITS_TITLE = "Each request's prompt: device hit, host hit, computed"
FIG_SRC_DEVICE = "device pool hit"
FIG_SRC_HOST = "copied back from host memory"
FIG_SRC_COMPUTED = "computed in prefill"
FIG_TOKENS_COUNT = "prompt tokens"
PREDICT_QUESTION = "This prompt's prefix was evicted from the device pool. Will it be computed again?"
PREDICT_YES = "Yes, computed again"
PREDICT_NO = "No, copied back from host memory"
PREDICT_ANSWER_NO = (
    "not computed again: request {id} found {host:,} of its {prompt:,} prompt tokens in host memory "
    "and copied them back (device pool hit {device:,}, computed {computed:,})"
)
PREDICT_NOT_YET = (
    "Nothing measured yet: no request has been copied back from host memory. Send the burst, then other "
    "prompts until the device pool evicts its blocks, then the burst again; the answer comes from that "
    "request's numbers."
)
