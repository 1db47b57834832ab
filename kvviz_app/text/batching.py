"""Strings of the Batching page and the room's batching timeline (English source strings)."""

TITLE = "Continuous batching"
INTRO = (
    "Every session of this server shares one model. When several prompts arrive while a forward pass runs, "
    "the batching scheduler runs them together in the next pass: their new tokens are packed into one "
    "sequence, so every weight matrix is read once for all of them, while each prompt keeps its own cached "
    "prefix, its own positions and its own logits. This is how serving engines (vLLM, SGLang) keep a GPU "
    "busy; here it runs on this machine's CPU."
)
KINDS_HEADER = "Three kinds of work in one pass"
KINDS = (
    "- **Prefill from scratch**: nothing cached, every prompt token is computed (a long orange bar).\n"
    "- **Prefill of a cached prompt**: the prefix's K/V come from the cache (grey, read but not computed); "
    "only the tail is computed (a short blue bar). This is what a prompt-cache hit saves.\n"
    "- **Decode step**: one new token over everything before it (a sliver of purple). Generation is a "
    "chain of these; batching many sessions' decode steps is where serving engines win most.\n\n"
    "A prompt whose prefix another prompt is computing in the same pass borrows those K/V from it (grey as "
    "well): a cold room's shared system prompt is computed once, not once a prompt."
)
SETTINGS = (
    "Scheduler: token budget {tokens:,} new tokens per pass (`KVVIZ_BATCH_TOKENS`), a lone request waits at "
    "most {wait:g} ms for companions (`KVVIZ_BATCH_WAIT_MS`), {mode}."
)
MODE_PACKED = "the native decoder packs requests into one pass"
MODE_ONE = "this backend runs one request a pass (no packing)"
PROBES_ALONE = (
    "Timed probes of the side-channel page always run alone in their pass: a probe sharing a pass would "
    "time the others' tokens too."
)

DEMO_HEADER = "Send a burst"
DEMO_INTRO = (
    "Sends, at the same moment, one prompt from scratch, three prompts whose prefix is cached, and six "
    "decode steps (one token each, one after another). Watch them share passes in the timeline below."
)
DEMO_BUTTON = "Send the burst"
DEMO_RUNNING = "Running the burst on the model..."
DEMO_DONE = "{requests} requests in {passes} passes ({shared} of them shared a pass with another request)."

TIMELINE_HEADER = "The last forward passes"
LIVE = "Live (refresh every 3 s)"
NO_PASSES = "No forward pass yet since the server started. Send the burst, or a prompt on any page."
M_PASSES = "Passes shown"
M_BATCH = "Requests per pass"
M_BATCH_HELP = "Mean over the passes shown; the largest pass held {max} requests."
M_SHARED = "Requests that shared a pass"
M_PASS_MS = "Time per pass (median)"
M_PASS_MS_HELP = "Measured wall time of each forward pass, every request in it included."

FIG_TITLE = "Tokens per forward pass, request by request (newest at the top)"
FIG_TIME_TITLE = "Time per pass"
FIG_TOKENS = "tokens"
FIG_MS = "ms"
FIG_REUSED = "prefix reused (read, not computed)"
FIG_SCRATCH = "computed: prefill from scratch"
FIG_CACHED = "computed: tail of a cached prompt"
FIG_DECODE = "computed: decode step"
FIG_PADDING = "padding a padded batch would add (packed here: no weight matrix computes it)"
FIG_PASS_LABEL = "#{id} · {n} req"
FIG_SEGMENT_HOVER = "%{customdata[0]}<br>%{customdata[1]}: %{customdata[2]:,} tokens<extra></extra>"
FIG_TIME_HOVER = "pass #%{customdata[0]}: %{x:,.0f} ms, requests: %{customdata[1]}<extra></extra>"
REQUEST_LABEL = "request {i} of {n} ({who}, {tag}); waited {wait:,.0f} ms"
WHO_YOU = "yours"
WHO_OTHER = "another session's"
TAGS = {"room": "room", "edit": "edit page", "probe": "side-channel probe", "demo": "burst", "other": "page"}

TABLE = "Pass by pass"
TABLE_COLUMNS = {"pass": "Pass", "ago": "Started", "ms": "Time (ms)", "requests": "Requests",
                 "computed": "Computed tokens", "reused": "Reused tokens", "padding": "Padding avoided",
                 "kinds": "Kinds"}
KIND_NAMES = {"scratch": "from scratch", "cached": "cached prompt", "decode": "decode"}

ROOM_HEADER = "Batching: the model's last forward passes"
ROOM_CAPTION = (
    "Your prompts and everyone else's share the model's forward passes; the Continuous batching page "
    "explains the picture."
)

# Values with their units (a translated template writes the number the session's way).
MEAN_VALUE = "{mean:.1f}"
MS_VALUE = "{ms:,.0f} ms"
AGO_VALUE = "{s:,.0f} s ago"
