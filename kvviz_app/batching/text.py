"""Strings of the Batching page and the room's batching timeline (English source strings)."""

TITLE = "Continuous batching"
INTRO = (
    "Every page of this server sends its prompts to one engine. Each step, the engine's scheduler (as vLLM "
    "v1's) takes the running requests' next tokens first (one decode token each, or the next chunk of a "
    "prompt), then admits waiting prompts, up to a token budget. All those tokens go through the model in "
    "one forward pass: every weight matrix is read once for all of them, while each request attends only to "
    "its own K/V, read through its own block table. This is how serving engines (vLLM, SGLang) keep a GPU "
    "busy; here it runs on this machine's CPU."
)
KINDS_HEADER = "Three kinds of work in one step"
KINDS = (
    "- **Prefill from scratch**: nothing cached, every prompt token is computed (a long orange bar).\n"
    "- **Tail of a cached prompt**: the prefix's K/V are in blocks another request filled (grey: read, not "
    "computed); only the tail is computed (a short blue bar). This is what a prompt-cache hit saves.\n"
    "- **Decode step**: one new token over everything before it (a sliver of purple). Generation is a "
    "chain of these; batching many requests' decode steps is where serving engines win most.\n\n"
    "A prompt admitted in the same step as the prompt that computes its prefix reuses those blocks at once: "
    "in every layer the step's K/V are written into the blocks before any request attends."
)
SETTINGS = (
    "Engine: token budget {tokens:,} tokens per step (`max_num_batched_tokens`), at most {seqs} running "
    "requests (`max_num_seqs`), blocks of {bs} tokens, {blocks:,} blocks of K/V; long prompts are cut into "
    "chunks (chunked prefill)."
)
PROBES_ALONE = (
    "Timed probes of the side-channel page run in a step of their own: a probe sharing a step would time "
    "the others' tokens too."
)

DEMO_HEADER = "Send a burst"
DEMO_INTRO = (
    "Caches a system prompt first, then sends at the same moment one prompt from scratch and three prompts "
    "that start with the cached system prompt; each then generates {new} tokens (decode steps). Watch them "
    "share steps in the timeline below."
)
DEMO_BUTTON = "Send the burst"
DEMO_RUNNING = "Running the burst on the engine..."
DEMO_DONE = "{requests} requests in {steps} steps; {shared} of these steps held more than one request."

TIMELINE_HEADER = "The engine's last steps"
LIVE = "Live (refresh every 3 s)"
NO_STEPS = "The engine has not run a step since the server started. Send the burst, or a prompt on any page."
M_STEPS = "Steps shown"
M_BATCH = "Requests per step"
M_BATCH_HELP = "Mean over the steps shown; the largest step held {max} requests."
M_TOKENS = "Tokens computed per step"
M_TOKENS_HELP = "Mean over the steps shown: prompt tokens and decode tokens computed in the step."
M_STEP_MS = "Time per step (median)"
M_STEP_MS_HELP = "Measured wall time of each engine step (schedule, forward pass, sampling), every request in it included."

FIG_TITLE = "Tokens per step, request by request (newest at the top)"
FIG_TIME_TITLE = "Time per step"
FIG_TOKENS = "tokens"
FIG_MS = "ms"
FIG_REUSED = "read from its blocks, not computed in this step"
FIG_SCRATCH = "computed: prefill from scratch"
FIG_CACHED = "computed: tail of a cached prompt"
FIG_DECODE = "computed: decode step"
FIG_PADDING = "padding a padded batch would add (packed here: not computed)"
FIG_STEP_LABEL = "step {id} · {n} req"
FIG_SEGMENT_HOVER = "%{customdata[0]}<br>%{customdata[1]}: %{customdata[2]:,} tokens<extra></extra>"
FIG_STEP_TIME_HOVER = "step %{customdata[0]}: %{x:,.0f} ms, requests: %{customdata[1]}<extra></extra>"
WHO_YOU = "yours"
WHO_OTHER = "another session's"
STEP_REQUEST_LABEL = "{id} ({who})"

TABLE = "Step by step"
TABLE_COLUMNS = {"step": "Step", "ago": "Started", "ms": "Time (ms)", "requests": "Requests",
                 "computed": "Computed tokens", "reused": "Tokens read from blocks", "padding": "Padding avoided",
                 "kinds": "Kinds", "preempted": "Preempted"}
KIND_NAMES = {"scratch": "from scratch", "cached": "cached prompt", "decode": "decode"}


# Values with their units (a translated template writes the number the session's way).
MEAN_VALUE = "{mean:.1f}"
MS_VALUE = "{ms:,.0f} ms"
AGO_VALUE = "{s:,.0f} s ago"
