"""Strings of the Live engine page's fleet view (kvviz_app/live/fleet.py)."""

MODE = "Watch"
MODE_ONE = "One engine"
MODE_FLEET = "A fleet of engines"
MODE_HELP = "A fleet: several vLLM replicas (or data-parallel ranks) at once, as a KV-aware router sees them."

FLEET_HEADER = "Fleet"
FLEET_INTRO = (
    "A KV-aware router (llm-d's KV-cache indexer, NVIDIA Dynamo's KV router) subscribes to every replica's "
    "KV-cache events, rebuilds a cluster index \"block hash → replicas holding it\" and sends each prompt "
    "where its prefix is cached. kvviz does the same from the events alone: one subscriber per replica, "
    "each with its own replay and health."
)
REPLICAS = "Replicas, one per line: NAME=tcp://HOST:PORT, then optionally the replay endpoint"
REPLICAS_HELP = (
    "For example `a=tcp://10.0.0.5:5557 tcp://10.0.0.5:5558`. A line without NAME= is named by its "
    "position. With data parallelism give each engine once and set the DP ranks: rank N publishes on port + N "
    "and becomes its own replica NAME/dpN."
)
REPLICAS_PLACEHOLDER = "a=tcp://127.0.0.1:5601 tcp://127.0.0.1:5602\nb=tcp://127.0.0.1:5603 tcp://127.0.0.1:5604"
FLEET_DP = "DP ranks per engine"
FLEET_CONNECT = "Watch the fleet"
FLEET_DISCONNECT = "Stop"
FLEET_BAD = "Cannot watch the fleet: {error}"
FLEET_NOT_CONNECTED = "Not watching a fleet. List the replicas and press Watch the fleet."
FLEET_DEMO = (
    "No GPUs? `python -m kvviz publish-demo --replicas 3 --endpoint tcp://127.0.0.1:5601` starts three demo "
    "engines (ports 5601/5602, 5603/5604, 5605/5606) that share the same system prompts."
)

HEALTH_HEADER = "Replicas"
HEALTH_COLS = {"name": "replica", "status": "status", "last_seq": "last seq", "gaps": "gaps filled",
               "errors": "bad messages", "blocks": "blocks held", "prefixes": "distinct prefixes",
               "churn": "stores + removals / s", "pod": "pod (topic)"}
MEDIA_HEADER = "Blocks by medium"
MEDIUM_COLS = {"GPU": "on GPU (device)", "CPU": "in host memory (CPU)"}
MEDIUM_OTHER = "on {medium}"
MEDIA_NOTE = (
    "Blocks by medium come from the events' `medium`: GPU is the engine's device pool, CPU its host-memory "
    "tier (vLLM's KV offloading, `serve --kv-offloading-size`). A block on both tiers counts in both columns; "
    "blocks held counts it once. llm-d's router weighs a leading block on GPU 1.0 and in host memory 0.8."
)
STATUS_STALE = "stale"
STALE_NOTE = (
    "A replica is stale when none of its sockets has been connected for {seconds:g} s (an engine that exits "
    "closes them); a stale replica is never routed to. Capped at {cap:,} blocks per replica."
)
CLUSTER_LINE = "Cluster index: {distinct:,} distinct blocks, {shared:,} of them on two or more replicas."
OVERFLOW_LINE = "{name}: {overflow:,} stored blocks beyond the cap were not tracked."

COLUMNS_TITLE = "Each replica's cached prefixes (a colour = one prefix cached on several replicas)"
COLUMNS_LABELS = {"shared": "prefix {root} on {replicas} replicas", "unshared": "prefixes on one replica only",
                  "blocks": "blocks", "axis": "blocks held", "pick": "▼ router's pick"}

ROUTE_HEADER = "Where would my prompt go?"
ROUTE_INTRO = (
    "kvviz hashes the prompt as the engines do (their hash, seed and block size) and looks each block up in "
    "every replica's cache. Three routers choose among the live replicas:"
)
RULES = (
    "- **Longest prefix (llm-d)**: a replica scores while it holds every block so far from block 0, each "
    "block worth its best tier (GPU 1.0, CPU 0.8); the highest score wins. Source: llm-d-kv-cache, "
    "`pkg/kvcache/kvblock_scorer.go` (`LongestPrefixScorer`), weights in `backend.go`.\n"
    "- **Overlap cost (Dynamo)**: cost = overlap weight × blocks still to prefill + decode blocks (the "
    "replica's load plus this prompt's blocks); the lowest cost wins. Source: ai-dynamo/dynamo, "
    "`lib/llm/src/kv_router/scheduler.rs` (`DefaultWorkerSelector`), router temperature 0.\n"
    "- **Round-robin**: the next replica in turn, whatever it caches.\n\n"
    "Ties go to the replica listed first."
)
LOADS = "Decode load per replica (blocks), for the overlap cost"
LOADS_HELP = "The events do not say how busy a replica is: give its running requests' blocks (0 = idle)."
PROMPT = "Prompt"
TOKENIZER = "Tokenizer"
TOKENIZERS = {"embedded": "Embedded SmolLM2 tokenizer", "named": "Another tokenizer (Hugging Face id or folder)",
              "ids": "Token ids (comma-separated)"}
HASH = "Hash algorithm"
SEED = "Hash seed (PYTHONHASHSEED)"
BLOCK_SIZE = "Block size"
BLOCK_SIZE_HELP = "Tokens per block; 0 = the engines', from their BlockStored events (16 if none yet)."
SALT = "Cache salt"
TOKENIZER_NAME = "Hugging Face id or local folder of the engines' tokenizer"
ROUTE_CHECK = "Route it"
ROUTE_EMPTY = "Paste a prompt first."
ROUTE_ERROR = "Cannot route the prompt: {error}"
ROUTE_TOO_SHORT = "The prompt has {tokens} tokens: fewer than one full block of {bs}; nothing can be reused."
PICKS = {"longest_prefix": "Longest prefix (llm-d)", "overlap_cost": "Overlap cost (Dynamo)",
         "round_robin": "Round-robin"}
PICK_NONE = "no live replica"
PICK_HELP = "{blocks} of the prompt's {total} full blocks are cached on {name}."
ROUTE_COLS = {"name": "replica", "prefix": "leading blocks held", "llmd": "llm-d score", "load": "decode load",
              "prefill": "blocks to prefill", "dynamo": "Dynamo cost", "live": "routable"}
YES = "yes"
NO = "no (stale)"
STRIP_TITLE = "The prompt's blocks on each replica"
STRIP_LABELS = {"gpu": "reusable, on GPU", "other": "reusable, on another tier", "after": "held after a miss (not reused)",
                "none": "not held", "axis": "token position", "pick_row": "▶ {name}", "stale_row": " (stale)"}
STRIP_PICK = "▶ marks the longest-prefix pick; the strip refreshes with the fleet."
