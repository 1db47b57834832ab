"""Every string of the "Paged vs contiguous memory" page and its figures."""

from __future__ import annotations

TITLE = "Paged vs contiguous memory"
INTRO = (
    "A request's KV cache grows by one token per decode step, and nobody knows in advance how long the "
    "answer will be. Servers before vLLM gave each request **one contiguous slab**, sized up front. "
    "**PagedAttention** instead cuts the memory into small fixed **blocks** (16 tokens by default), hands "
    "them out one at a time as a sequence grows, and keeps a per-request **block table** that maps "
    "logical blocks to physical blocks anywhere in the pool. Below, the same seeded stream of requests is "
    "served from the same memory both ways; every number is counted by the simulation, step by step."
)
UNITS_NOTE = (
    "Memory is counted in **token slots**: one slot holds one token's K and V for every layer "
    "(for Llama-2-7B in fp16 that is 512 KiB; the KV-bytes calculator converts slots to bytes)."
)

# --- controls -------------------------------------------------------------------------------------
CONTROLS = "Requests and memory"
MEMORY = "KV memory (token slots)"
MEMORY_HELP = "The whole KV cache, in tokens. Both layouts get exactly this much."
BLOCK = "Block size (tokens)"
BLOCK_HELP = "Paged layout only. vLLM's default is 16: small enough to waste little, big enough for fast kernels."
REQUESTS = "Requests"
REQUESTS_HELP = "All arrive at once and are served first come, first served."
PREFIX = "Shared system prompt (tokens)"
PREFIX_HELP = "Every request starts with the same tokens. Paging stores their full blocks once (ref_cnt > 1)."
PROMPT = "Prompt after the shared part (tokens)"
OUTPUT = "Output length (tokens)"
OUTPUT_HELP = "Drawn at random per request; the server does not know it in advance."
MAX_LEN = "Maximum sequence length (tokens)"
MAX_LEN_HELP = "The longest prompt + output the server accepts; the 'max' reservation reserves this for everyone."
RESERVATION = "Contiguous reservation"
RESERVATION_OPTIONS = {
    "max": "maximum length",
    "pow2": "final length rounded up to a power of 2",
    "oracle": "exact final length (oracle)",
}
RESERVATION_HELP = (
    "How big a slab the contiguous server reserves per request. 'Oracle' knows each output length in "
    "advance, which no real server does: it is the best case for contiguous memory."
)
SHARING = "Paged: share the system prompt's blocks"
SEED = "Random seed"
BAD_CONFIG = "These settings do not make an experiment: {error}"

# --- headline numbers -----------------------------------------------------------------------------
RESULTS = "What each layout achieves"
M_UTIL = "Utilisation"
M_UTIL_VALUE = "{cont:.1%} → {paged:.1%}"
M_UTIL_HELP = (
    "Contiguous → paged. Share of the whole KV memory holding token states, averaged over the steps "
    "when requests wait for memory (every running step if none waits): the same number as the "
    "'token states' bar below."
)
M_FIT = "Requests at once"
M_FIT_VALUE = "{cont} → {paged}"
M_FIT_HELP = "Admitted at step 0, contiguous → paged. Paging admits a request once its prompt's blocks fit."
M_SPEEDUP = "Throughput gain"
M_SPEEDUP_VALUE = "{ratio:.2f}x"
M_SPEEDUP_HELP = (
    "Contiguous steps / paged steps to serve the same requests. The PagedAttention paper reports 2-4x "
    "over FasterTransformer and Orca at the same latency."
)
TABLE_COLUMNS = {"contiguous": "Contiguous", "paged": "Paged"}
COMPARE_ROWS = {
    "utilisation": "utilisation (tokens stored / memory reserved)",
    "requests_fit_at_start": "requests admitted at step 0",
    "max_running": "most requests running at once",
    "mean_running": "requests running, on average",
    "steps": "scheduler steps to serve all requests",
    "tokens_per_step": "output tokens per step",
    "preemptions": "preemptions (recomputed later)",
}
PREEMPT_NOTE = (
    "Paging admits a request once its prompt fits and adds blocks as it grows. When no block is left, "
    "the most recently admitted request is preempted (its blocks freed, recomputed later), as vLLM does: "
    "{count:,} preemptions here."
)
PAPER_NOTE = (
    "**PagedAttention paper:** earlier systems kept only **{low:.1%}-{high:.1%}** of their KV memory for "
    "actual token states (reserving the maximum, a power of two, or the exact length). Contiguous here: "
    "**{cont:.1%}**; paged: **{paged:.1%}**."
)

# --- where the waste is ---------------------------------------------------------------------------
WASTE_HEADER = "Where the memory goes"
WASTE_INTRO = (
    "Share of the whole KV memory in each state, averaged over the steps when requests were waiting "
    "for memory (the server is full, so every slot counts)."
)
WASTE_TITLE = "Memory by state, averaged while requests wait"
KIND_LABELS = {
    "stored": "token states",
    "duplicate": "duplicate prefix copies",
    "reserved": "reserved, written later",
    "internal": "internal fragmentation",
    "external": "external fragmentation",
    "free": "free memory",
}
KIND_HELP = {
    "stored": "K/V of real tokens: the only useful part",
    "duplicate": "each extra copy of the shared system prompt",
    "reserved": "slots set aside for tokens the request has not generated yet",
    "internal": "reserved slots that will never be written (the answer was shorter)",
    "external": "free slots split into holes too small for the next request",
    "free": "free and usable",
}
PAPER_ROW = "Earlier systems (paper)"
PAPER_BAND = "token states: {low:.1%}-{high:.1%}"
LAYOUT_LABELS = {"contiguous": "Contiguous", "paged": "Paged"}

# --- layout picture -------------------------------------------------------------------------------
LAYOUT_HEADER = "The memory at one step"
LAYOUT_INTRO = (
    "Both pictures draw the same {memory:,} slots in the same order, {row:,} slots per row. Contiguous: "
    "one slab per request, first fit. Paged: one cell per block of {block} slots; a request's blocks "
    "can be anywhere."
)
STEP = "Step"
STEP_HELP = "Scheduler step to draw (0 = after the first admissions)."
CONT_TITLE = "Contiguous at step {step:,}: {running} requests running, {waiting} waiting"
PAGED_TITLE = "Paged at step {step:,}: {running} requests running, {waiting} waiting"
SLOT_AXIS = "slot within the row"
ROW_AXIS = "row"
BLOCK_AXIS = "block within the row"
BLOCK_KINDS = {
    "shared": "shared prefix block",
    "full": "full block",
    "partial": "partly filled block",
    "free": "free block",
}
HOVER_SPAN = "request {request}<br>{kind}<br>slots {start:,}-{end:,} ({length:,})"
HOVER_HOLE = "{kind}<br>slots {start:,}-{end:,} ({length:,})"
HOVER_BLOCK = "block {block}<br>{kind}<br>{used}/{size} slots used<br>ref_cnt {ref}<br>{owner}"
OWNER_REQUEST = "request {request}"
OWNER_SHARED = "shared by {ref} requests"
OWNER_NONE = "no owner"
FINISHED = "Every request has finished by step {step:,} in this layout: the memory is empty."

# --- block table ----------------------------------------------------------------------------------
TABLE_HEADER = "A block table"
TABLE_INTRO = (
    "The paged layout finds a request's tokens through its block table: logical block i (tokens "
    "16i+1 to 16i+16 with 16-token blocks) lives in whatever physical block was free when it was needed."
)
TABLE_REQUEST = "Request"
TABLE_REQUEST_LABEL = "request {rid} ({length:,} tokens)"
TABLE_TOKENS = "tokens"
TABLE_BLOCK = "physical block"
TABLE_NOTE = "shared (ref_cnt {ref})"
TABLE_STATE = "block state"
TABLE_NONE = "No request is running at this step."
TABLE_ROW = "{first:,}-{last:,}"

# --- over time ------------------------------------------------------------------------------------
TIME_HEADER = "Over time"
TIME_TITLE = "Token states as a share of memory, and requests running"
TIME_UTIL_AXIS = "token states / memory"
TIME_RUNNING_AXIS = "running"
# Plotly hover templates (%{...} is filled in by Plotly, {...} by kvviz)
HOVER_WASTE = "{kind}: %{{x:.1%}}<br>{help}<extra>%{{y}}</extra>"
HOVER_STORED = "{layout}, step %{{x:,}}: %{{y:.1%}}<extra></extra>"
HOVER_RUNNING = "{layout}, step %{{x:,}}: %{{y}} running<extra></extra>"
TIME_STEP_AXIS = "scheduler step"
# A share of memory written inside its bar.
SHARE_VALUE = "{share:.1%}"
