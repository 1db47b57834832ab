"""Strings of the Live engine page (pages/live.py)."""

from kvviz.util.plural import Plural

TITLE = "Live engine"
INTRO = (
    "Watch a real engine's prefix cache. vLLM started with `--kv-events-config` publishes every block it "
    "stores or evicts over ZeroMQ; kvviz subscribes, rebuilds which prefixes the engine holds right now, "
    "and tells whether the blocks of your prompt are among them. No GPU at hand? Start the demo engine: "
    "kvviz's own block pool under a generated multi-user chat, publishing the same messages."
)
HOW_TO_HEADER = "How to start vLLM with KV-cache events"
HOW_TO = (
    "```bash\n"
    "vllm serve HuggingFaceTB/SmolLM2-135M-Instruct --enable-prefix-caching \\\n"
    "  --kv-events-config '{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\",\n"
    "    \"endpoint\": \"tcp://*:5557\", \"replay_endpoint\": \"tcp://*:5558\"}'\n"
    "```\n"
    "Then connect below to `tcp://ENGINE-HOST:5557` (replay `tcp://ENGINE-HOST:5558`). Given a specific "
    "address instead (`\"endpoint\": \"tcp://127.0.0.1:5800\"`), vLLM connects to it: choose "
    "\"My engine connects to kvviz\" and listen on that address. With data "
    "parallelism, rank N publishes on port 5557 + N: set the number of DP ranks. The engine's "
    "`/metrics` (e.g. `http://ENGINE-HOST:8000/metrics`) adds its own prefix-cache hit rate."
)

CONNECT_HEADER = "Engine"
TOPOLOGY = "Who connects?"
TOPOLOGY_CONNECT = "kvviz connects to my engine"
TOPOLOGY_LISTEN = "My engine connects to kvviz (listen)"
TOPOLOGY_HELP = (
    "vLLM decides from its kv-events endpoint: with `*`, `::`, ipc or inproc in it, it binds and waits; "
    "with a specific address, it connects. Its replay endpoint always binds."
)
TOPOLOGY_EXPLAIN = (
    "vLLM given `tcp://*:5557` binds that port and waits: kvviz connects to the engine's host and port.  \n"
    "vLLM given a specific address such as `tcp://127.0.0.1:5800` connects to it: kvviz must listen "
    "there (its replay socket still binds, and kvviz connects to that)."
)
LISTEN_ENDPOINT = "Listen address (the engine's endpoint)"
LISTEN_ENDPOINT_HELP = (
    "The address kvviz binds, tcp://ADDRESS:PORT on this machine; give the engine the same one as its "
    "endpoint. tcp://127.0.0.1:PORT keeps it to this machine."
)
LISTEN = "Listen"
BAD_LISTEN = "Cannot listen: {error}"
ENDPOINT = "Event endpoint (PUB)"
ENDPOINT_HELP = "The engine's KV-event endpoint, tcp://HOST:PORT. vLLM binds tcp://*:5557; kvviz connects to it."
REPLAY = "Replay endpoint (ROUTER)"
REPLAY_HELP = (
    "Optional. kvviz asks it for the batches published before it connected and for any it missed "
    "(a gap in sequence numbers). Leave empty to follow the live stream only."
)
TOPIC = "Topic"
TOPIC_HELP = "Topic prefix to subscribe to; vLLM's default topic is empty."
DP_SIZE = "DP ranks"
DP_SIZE_HELP = "Data-parallel ranks to follow: rank N publishes on the endpoint's port + N."
METRICS_URL = "Metrics URL (optional)"
METRICS_URL_HELP = "The engine's Prometheus endpoint, e.g. http://127.0.0.1:8000/metrics: adds its prefix-cache hit rate."
CONNECT = "Connect"
DISCONNECT = "Disconnect"
BAD_CONFIG = "Cannot connect: {error}"

DEMO_HEADER = "No GPU? The demo engine"
DEMO_TEXT = (
    "Starts, once for this whole server, kvviz's block manager ({blocks} blocks of {bs} tokens, hash "
    "`{hash}`) under a seeded chat workload: {users} users over three shared system prompts, publishing "
    "vLLM's wire format on {endpoint} (replay {replay}). Every browser connected here sees the same engine."
)
DEMO_START = "Start the demo engine"
DEMO_RUNNING = "Demo engine running on {endpoint}."
# Under the live numbers (refreshed with them): what the demo sent, beside the Batches it applied here.
DEMO_PUBLISHED = Plural(
    "The demo engine has published {n:,} batch so far; Batches counts those kvviz applied here.",
    "The demo engine has published {n:,} batches so far; Batches counts those kvviz applied here.",
)
DEMO_NOT_LOCAL = "The demo engine binds on this machine only: use a tcp://127.0.0.1:PORT endpoint to start it."
DEMO_FAILED = "Could not start the demo engine: {error}"
DEMO_PROMPT_HINT = "Try the demo's first system prompt:"
USE_DEMO_PROMPT = "Use the demo's system prompt"

NOT_CONNECTED = "Not connected. Fill in the engine's endpoints and press Connect, or start the demo engine."
STATUS = {
    "receiving": "Receiving events from {endpoint}.",
    "connected": "Connected to {endpoint}; no event in the last 5 s (an idle engine publishes nothing).",
    "connecting": "Waiting for {endpoint}: nobody publishes there yet (kvviz keeps retrying).",
    "listening": "Listening on {endpoint}: no engine has connected yet (give the engine this address as its endpoint).",
    "stopped": "The subscriber stopped: {error}",
}
AUTO_REFRESH = "Refresh every 2 s"

M_STATUS = "Status"
STATUS_WORD = {"receiving": "live", "connected": "idle", "connecting": "waiting",
               "listening": "listening", "stopped": "stopped"}
M_BATCHES = "Batches"
M_BATCHES_HELP = "Distinct batches applied (live and replayed; each sequence number once per DP rank)."
M_RATE = "Events/s"
M_RATE_HELP = "BlockStored + BlockRemoved + AllBlocksCleared events per second over the last {n} s."
M_BLOCKS = "Blocks cached"
M_BLOCKS_HELP = "Distinct block hashes the engine holds now, on any medium and rank."
M_TOKENS = "Tokens cached"
M_TOKENS_HELP = "Tokens in those blocks (block size x blocks)."
M_MEDIA = "GPU / CPU blocks"
M_MEDIA_HELP = "Blocks held per medium (vLLM's GPU cache, CPU offload); one hash on two DP ranks counts twice."
M_REPLAYED = "Replayed"
M_REPLAYED_HELP = "Batches that came from the replay socket (history on connect, or a gap filled)."
M_MISSED = "Missed / bad"
M_MISSED_HELP = "Sequence numbers lost: neither the live stream nor the replay delivered them."
M_ERRORS = "Bad messages"
M_ERRORS_HELP = "Messages that were not KV-event batches: counted and skipped."
OVERFLOW = (
    "Tracking is capped at {cap:,} blocks to bound memory: {overflow:,} stored blocks were not tracked, so "
    "block counts and trees are lower bounds."
)
SKIPPED = "Skipped {kinds:,} events of unknown kinds and {fields:,} unknown fields (a newer engine's schema)."
NO_EVENTS_YET = "No events yet. An engine publishes only when it caches or evicts blocks: send it a request."

RATE_TITLE = "Events per second"
RATE_LABELS = {"stored": "BlockStored", "removed": "BlockRemoved", "cleared": "AllBlocksCleared"}
BLOCKS_TITLE = "Blocks held"
BLOCKS_LABELS = {"distinct": "distinct hashes", "gpu": "GPU", "cpu": "CPU"}
X_SECONDS = "seconds (0 = now)"
Y_EVENTS = "events / s"
Y_BLOCKS = "blocks"

TREES_HEADER = "Largest cached prefix trees"
TREES_CAPTION = (
    "Chains rebuilt from each BlockStored's parent_block_hash: a tree's root is a block whose parent is "
    "not cached; requests sharing a prefix share its trunk. Text is the deepest chain, shown when a "
    "tokenizer is known."
)
TREES_DECODE = "Show the token text with the embedded SmolLM2 tokenizer"
TREES_DECODE_HELP = "Correct for the demo engine and for engines serving a SmolLM2 model; gibberish otherwise."
COL_ROOT = "root hash"
COL_BLOCKS = "blocks"
COL_TOKENS = "tokens"
COL_DEPTH = "depth (blocks)"
COL_LEAVES = "branches"
COL_TEXT = "deepest chain"
COL_WHERE = "root held on"
COL_SESSION = "session"
COL_TEXT_TOKENS = "{n} tokens"
NO_TREES = "The engine holds no blocks right now."

STORES_HEADER = "Latest stores"
STORES_CAPTION = (
    "{release} says where each stored block lives and who stored it. KV-cache groups: {groups}. Copies by "
    "locality: {places}."
)
GROUP_ITEM = "group {group} {kind}"
GROUP_WINDOW = " (window {window} tokens)"
UNSPECIFIED = "unspecified"
SESSIONS_LINE = "Blocks stored per session (most first): {sessions}."
OTHER_SESSIONS = "other sessions"
COL_AGO = "s ago"
COL_FIRST = "first hash"
COL_PLACE = "medium · locality · tier"
RANK_ITEM = "DP rank {rank}"
COL_GROUP = "group: kind"
COL_LORA = "LoRA"
COL_EXTRA = "extra keys (block 0)"
COL_LOOKAHEAD = "lookahead tokens"

PROMPT_HEADER = "Is my prompt cached?"
PROMPT_INTRO = (
    "kvviz hashes your prompt's full blocks exactly as vLLM does (same hash function, same NONE_HASH "
    "seed, same chaining) and looks each hash up in what the engine holds now. The engine reuses the "
    "leading run only: the first block not cached ends the hit."
)
PROMPT = "Prompt"
PROMPT_PLACEHOLDER = "Paste the prompt exactly as the engine receives it (chat template included)."
TOKENIZER = "Tokenizer"
TOKENIZER_EMBEDDED = "Embedded SmolLM2 tokenizer"
TOKENIZER_URL = "The engine's /tokenize URL"
TOKENIZER_IDS = "Token ids (comma-separated)"
TOKENIZE_URL = "/tokenize URL"
TOKENIZE_URL_HELP = "vLLM's tokenizer endpoint, e.g. http://127.0.0.1:8000/tokenize: the engine's own tokens."
HASH = "Hash algorithm"
HASH_HELP = "The engine's --prefix-caching-hash-algo (vLLM's default is sha256)."
SEED = "Hash seed (PYTHONHASHSEED)"
SEED_HELP = (
    "Leave empty if the engine runs without PYTHONHASHSEED: sha256 and sha256_cbor then use the fixed "
    "seed 'vllm-none-hash'; xxhash draws a random seed per process, which no outsider can match."
)
RANDOM_SEED_WARNING = (
    "With {hash} and no seed, the engine's NONE_HASH is random per process: kvviz cannot reproduce its "
    "hashes. Start the engine with PYTHONHASHSEED and give the same seed here."
)
BLOCK_SIZE = "Block size"
BLOCK_SIZE_HELP = "Tokens per block; 0 = the engine's, from its BlockStored events (16 if none yet)."
CHECK = "Check"
CHECK_EMPTY = "Paste a prompt first."
CHECK_ERROR = "Cannot check the prompt: {error}"
TOO_SHORT = "The prompt has {tokens} tokens: fewer than one full block of {bs}, and only full blocks are cached."
PROMPT_RESULT = (
    "{cached} of {blocks} full blocks are cached now; the engine would reuse the first {run} "
    "({tokens:,} of {total:,} tokens) and compute the rest."
)
PROMPT_NO_ENGINE_DATA = "No events received yet, so nothing can be cached as far as kvviz knows."
PROMPT_TITLE = "Your prompt's full blocks"
PROMPT_LABELS = {"reused": "cached, reused", "cached_after_miss": "cached, but after a miss (not reused)",
                 "missing": "not cached", "unknown": "unknown: not seen since kvviz joined",
                 "axis": "token position"}
PROMPT_RESULT_PARTIAL = (
    "{cached} of {blocks} full blocks were stored while kvviz listened. The other {unknown} are unknown, not "
    "missing: kvviz joined after the engine's first batch and heard no replay, so it cannot know what was "
    "stored before. The engine would reuse at least the first {run} ({tokens:,} of {total:,} tokens). Give "
    "the engine's replay endpoint to see its whole cache."
)
PROMPT_HOVER = "block {i}: tokens {start}-{end}, hash {hash}"
SALT = "Cache salt"
SALT_HELP = "The request's cache_salt, if it had one: vLLM mixes (\"cache_salt\", salt) into the first block."
LORA_NAME = "LoRA name"
LORA_PATH = "LoRA path"
LORA_HELP = "For a LoRA request: vLLM mixes (\"lora\", name, path) into every block, so give both."
LORA_BOTH = "Give the LoRA adapter's name and its path together, or neither."
HASH_KIND_NOTE = "The engine sends 64-bit int hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES): compared in that form."

HIT_HEADER = "The engine's own hit rate (/metrics)"
HIT_TITLE = "Prefix-cache hit rate between scrapes"
HIT_Y = "hit rate, % of queried tokens"
HIT_NONE = "No tokens were queried between the last two scrapes."
HIT_NOW = "Last interval: {rate:.1%} of {queries:,.0f} queried tokens hit the cache (counters {hits:,.0f} / {total:,.0f})."
METRICS_ERROR = "Metrics: {error}"
