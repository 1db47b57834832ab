"""Every string of the security chapter: the shared room and the timing side channel (collisions: ``collisions``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvviz.experiments.room.records import Admission, ResetResult
    from kvviz_app.shell.i18n.texts import Texts

# ----------------------------------------------------------------------------- the room (kvviz.experiments.room.room)
WHO_YOU = "you"
WHO_OTHER = "another session"
AGE_NOW = "just now"
AGE_S = "{n} s ago"
AGE_MIN = "{n} min ago"
AGE_H = "{n} h ago"
ERR_UNKNOWN_SESSION = "This browser session is not in the room (it may have been idle too long); reload the page."
ERR_SALT_MODE = "Unknown salt mode {mode!r}; use one of {modes}."
ERR_TEAM_EMPTY = "Type a team name: everyone who types the same name shares one salt."
ERR_TEAM_LONG = "The team name is too long (at most {limit} characters)."
ERR_RATE_SESSION = "Too many prompts from this session: wait {wait:.1f} s and send again."
ERR_RATE_ROOM = "The room is busy (too many prompts from everyone): wait {wait:.1f} s and send again."
ERR_RESET_BUSY = "Requests are still running on the engine, so its prefix cache cannot be reset now: try again."
ERR_ENGINE_ABORT = "The engine stopped this prompt before it finished; send it again."
ERR_PRESENTER_KEY = "Wrong presenter key: only the presenter can reset the room."
ERR_PRESENTER_KEY_MISSING = "Type the presenter key first: only the presenter can reset the room."
ERR_RESET_SOON = "The room was reset a moment ago: wait {wait:.1f} s."
#: kvviz.experiments.room.room's error codes (an Admission's or ResetResult's error_code, a CodedError's code).
ROOM_ERRORS = {
    "unknown_session": ERR_UNKNOWN_SESSION, "salt_mode": ERR_SALT_MODE, "team_empty": ERR_TEAM_EMPTY,
    "team_long": ERR_TEAM_LONG, "rate_session": ERR_RATE_SESSION, "rate_room": ERR_RATE_ROOM,
    "reset_busy": ERR_RESET_BUSY, "engine_abort": ERR_ENGINE_ABORT, "presenter_key": ERR_PRESENTER_KEY,
    "presenter_key_missing": ERR_PRESENTER_KEY_MISSING, "reset_soon": ERR_RESET_SOON,
}


def room_error(t: Texts, english: str | None, code: str = "", params: dict | None = None) -> str:
    """A refusal of the room (its English line, code and params) as one line in the view's language; a
    code without words here (a token-list error) is its English line."""
    template = t.ROOM_ERRORS.get(code)
    try:
        return template.format(**(params or {})) if template else (english or "")
    except (KeyError, IndexError, ValueError):
        return english or ""


def refusal(t: Texts, outcome: Admission | ResetResult) -> str:
    """Why the room refused (a kvviz.experiments.security Admission or ResetResult), in the view's language."""
    return t.room_error(outcome.error, outcome.error_code, outcome.error_params)

# ----------------------------------------------------------------------------- room page
ROOM_TITLE = "This cache is not yours: the shared room"
ROOM_INTRO = (
    "Everyone connected to this server shares **one block pool**, exactly as every user of an inference "
    "service shares its prefix cache. The cache is keyed by content, not by conversation: if another "
    "attendee already sent a prompt that starts like yours, your prompt reuses **their** blocks and skips "
    "that part of the prefill. Send a prompt below; the page shows which of your blocks somebody else "
    "computed (anonymised), and what the salt switch changes."
)
ROOM_TOTALS = "The room"
ROOM_LIVE = "Live totals (refresh every 5 s)"
M_SESSIONS = "Sessions"
M_SESSIONS_HELP = "Browser sessions seen in the last 10 minutes ({total} since the last reset; {salted} with a salt)."
M_PROMPTS = "Prompts"
M_PROMPTS_HELP = "Prompts admitted since the last reset ({refused} refused by the rate or size limits)."
M_HIT_RATE = "Room hit rate"
M_HIT_RATE_HELP = "Prompt tokens served from the shared pool / all prompt tokens ({hit:,} of {total:,})."
M_SHARED = "Blocks shared"
M_SHARED_HELP = (
    "Cached blocks that a session other than the one that computed them has reused. {hits:,} cross-session "
    "block hits in total."
)
M_POOL = "Pool in use"
M_POOL_HELP = (
    "Cached blocks / the engine's pool ({block_size} tokens per block), shared by the room, the API and "
    "every page. Beyond it, the least recently used blocks are evicted ({evictions:,} since the last "
    "reset). No timer: vLLM evicts only when it needs a block."
)
M_ROOM_TIMING = "Compute per 100 tokens: hit / miss"
M_ROOM_TIMING_VALUE = "{hit} / {miss} ms"
M_ROOM_TIMING_HELP = (
    "Measured in this room over the last {window} s: each prompt's share of the engine steps that ran its "
    "prefill (its wait in the queue left out), per 100 prompt tokens, so prompts of different lengths "
    "compare. Hits ({n_hit}): median {hit} ms, middle half {hit_lo}–{hit_hi} ms. Misses ({n_miss}): median "
    "{miss} ms, middle half {miss_lo}–{miss_hi} ms. Median wait for the engine: {wait} ms."
)
TIMING_VERDICTS = {
    "faster": "Hits compute less per token: their reused blocks were not computed again.",
    "noise": "Hits and misses are within the noise here: the middle halves of their times overlap.",
    "inverted": ("Hits measured slower than misses: that is noise or a change in the machine's speed, not the "
                 "cache. Compare again after a reset."),
    "busy": "The machine is busy (load {load} per core): these times are not comparable now.",
    "too_few": "Too few prompts in the last {window} s to compare: 3 hits and 3 misses are needed.",
}
NO_TIMING = "n/a"

YOUR_SESSION = "Your session"
SALT_LABEL = "Cache salt"
SALT_OPTIONS = {"off": "Off (share with everyone)", "private": "Private salt (this browser only)",
                "team": "Team salt (same name = same salt)"}
SALT_HELP = (
    "vLLM's `cache_salt` request field. It is added to the extra keys of the **first block only**; "
    "because every block hash includes its parent's, it changes every hash after it. Requests share "
    "blocks only when their salts are equal."
)
TEAM_LABEL = "Team name"
TEAM_HELP = "Everyone typing the same team name uses the same salt, so the team shares blocks with itself only."
SALT_NOW_OFF = "No salt: your blocks and everyone else's are interchangeable."
SALT_NOW_PRIVATE = "Private salt `{salt}…`: nobody else can hit your blocks, and you cannot hit theirs."
SALT_NOW_TEAM = "Team salt `{team}`: only sessions with the same team name share blocks with you."
PRESET_LABEL = "Start from"
PROMPT_LABEL = "Your prompt"
PROMPT_HELP = (
    "Sent to the shared room and prefilled by the engine on the real model. Other sessions never see your text, only "
    "that some of their blocks were computed by another session. Prompts over {limit:,} tokens are cut."
)
SEND = "Send to the room"
PROMPT_EMPTY = "Type a prompt first."
LAST_PROMPT = "Your last prompt"
M_TOKENS = "Tokens"
M_FROM_OTHERS = "Reused from others"
M_FROM_OTHERS_HELP = "Prompt tokens whose K/V another session computed (whole blocks only)."
M_FROM_YOU = "Reused from yourself"
M_COMPUTED = "Computed now"
M_COMPUTED_HELP = "Tokens the engine computed for this prompt (the last prompt token is always computed)."
M_PREFILL = "Prefill: compute / wait"
M_PREFILL_VALUE = "{compute:,.0f} / {wait:,.0f} ms"
M_PREFILL_HELP = (
    "Measured on the engine ({computed} tokens computed, {reused} read from the prefix cache). Compute: "
    "your prompt's share of the engine step that ran its prefill (the step's time x your share of its "
    "tokens; {step} prompt(s) in that step). Wait: the rest of the time to your first token (the step "
    "already running when you sent it, the engine's queue, the other prompts' share of your step). Prompts "
    "sent together share one step, and a prefix one of them computes there is a hit for the others. "
    "Only compute says what a cache hit saves."
)
TRUNCATED = "Your prompt had {before:,} tokens; the room keeps the first {kept:,} (the limit per prompt)."
STRIP_TITLE = "Your prompt's blocks: who computed them"
BLOCK_TABLE = "Block by block"
BLOCK_COLUMNS = {"index": "Block", "tokens": "Tokens", "status": "Status", "origin": "Computed by",
                 "hash": "Block hash"}
STATUS_LABELS = {"hit_other": "reused: another session's", "hit_you": "reused: your own",
                 "computed": "computed now", "partial": "partial (never cached)"}
NO_PROMPT_YET = "Send a prompt to see which of its blocks were already in the room."

SALT_WHY = "Why the salt isolates you"
SALT_WHY_INTRO = (
    "The same tokens, hashed twice: without a salt and with **{salt_name}**. The salt enters only block "
    "0's extra keys, as the tagged key `(\"cache_salt\", salt)` ({release}; vLLM 0.23.0, which the seed "
    "articles quote, hashed the bare salt string), yet every hash after it changes, because each block hash "
    "includes its parent's hash. A block is found only if its exact hash is in the pool."
)
SALT_WHY_OFF = (
    "Your salt is off. Below: your last prompt without a salt (as sent) and with a private salt, to show "
    "what switching it on would do."
)
SALT_NAME_ILLUSTRATIVE = "a private salt"
SALT_NAME_TEAM = "your team salt"
SALT_NAME_PRIVATE = "your private salt"
SALT_EXTRA_KEY = '("cache_salt", salt)'
SALT_COLUMNS = {"index": "Block", "plain": "Hash without salt", "plain_cached": "In the room?",
                "salted": "Hash with salt", "salted_cached": "In the room?", "extra": "Extra keys (salted)"}
YES = "yes"
NO = "no"

FEED = "Room feed (anonymised, newest first)"
FEED_COLUMNS = {"who": "Who", "tokens": "Tokens", "reused": "Reused", "from_others": "Blocks from others",
                "salted": "Salted", "prefill": "Compute (ms)", "wait": "Wait (ms)", "step": "Prompts in its step",
                "age": "When"}
FEED_TABLE = "Prompt by prompt"
FEED_EMPTY = "Nobody has sent a prompt since the last reset."
FEED_CHART_TITLE = "Last prompts: reused vs computed tokens"
API_REQUESTS = "Requests from the API (same engine, same prefix cache)"
API_REQUESTS_INTRO = (
    "Clients of the OpenAI-compatible API at {url} run on the engine this room runs on: their prompts and "
    "the room's hit each other's blocks (unless a cache salt separates them). The last finished ones:"
)
API_REQUESTS_OFF = "The app's API is off (KVVIZ_API=0): only the room's own sessions use the engine."
API_REQUESTS_NONE = "No request has come through the API yet."
API_COLUMNS = {"client": "Client", "prompt": "Prompt tokens", "cached": "Cached tokens", "output": "Output tokens",
               "age": "When"}

PRESENTER = "Presenter"
PRESENTER_INTRO = (
    "Reset empties the engine's prefix cache (vLLM's reset_prefix_cache, for the API's clients too) and the "
    "room's totals for everyone (salt settings stay). The engine's pool holds {blocks:,} blocks of "
    "{block_size} tokens ({tokens:,} tokens, {kv} of K/V; LRU beyond that). Per session: {burst} prompts "
    "at once, then one every {every:.0f} s; at most {max_tokens:,} tokens per prompt."
)
PRESENTER_KEY = "Presenter key"
PRESENTER_KEY_HELP = (
    "Printed in the server's log when the app starts (or the KVVIZ_PRESENTER_KEY you set): only the "
    "presenter can reset the room."
)
RESET = "Reset the room"
RESET_DONE = "The room was reset ({dropped:,} cached blocks dropped)."
WORKSHOP_HINT = (
    "Workshop: start the server with `make run HOST=0.0.0.0`; attendees open http://<presenter-ip>:8501. "
    "Everyone lands in this room."
)

# ----------------------------------------------------------------------------- side-channel page
SC_TITLE = "The timing side channel"
SC_INTRO = (
    "A cache hit skips prefill work, so it answers sooner, and the difference is visible from outside. "
    "An attacker who can send prompts to the same server can test whether **someone else** already sent "
    "a given prefix: send it, time the first token. This is the attack the InputSnatch paper builds on. "
    "Everything below is measured now, on the real model, on the same engine (one pool, one prefix cache) "
    "the room page and the API use."
)
SC_SETUP = "Experiment"
SC_TRIALS = "Trials per group"
SC_TRIALS_HELP = "Each trial times one probe whose prefix is cached and one whose prefix is not, in random order."
SC_BLOCKS = "Probe prefix (blocks of 16 tokens)"
SC_BLOCKS_HELP = (
    "How much of the victim's prompt the probe repeats. Longer prefixes skip more work on a hit. On a GPU a "
    "short prefill costs about the same as a one-token step, so use 16 or more blocks there."
)
SC_RUN = "Measure"
SC_RUNNING = "Timing probes on the model: {done}/{total}"
SC_HOW = (
    "Victim: a session sends the secret prompt (its K/V land in the shared pool). Attacker: another "
    "session times two probes per trial: the victim's first {blocks} blocks plus one token (cached) and "
    "the same tokens with the first one changed (not cached: through the chain, every block misses). "
    "What is timed: the compute of the probe's prefill on the engine (its scheduler step, forward pass and "
    "first token), with no other request in that step: each probe waits until the engine is quiet, and "
    "that wait is not timed. Each trial runs in a fresh namespace (a cache salt victim and attacker "
    "share), so no trial hits another's blocks."
)
SC_BUSY = "Another session is running an experiment on the model right now; try again in a few seconds."
SC_LATEST = "Latest measurement, {ago} ({secs:.0f} s of model time). Everyone on this server sees it."
SC_RESULTS = "Measured latency: cached vs not cached prefix"
SC_NO_RESULTS = (
    "Press **Measure** to time the probes, with salts off and then on (each trial runs three prefills; "
    "a few seconds per trial on two CPU cores)."
)
GROUP_CACHED = "prefix cached"
GROUP_UNCACHED = "prefix not cached"
SALT_OFF = "salts off"
SALT_ON = "salts on (victim salted)"
M_MEDIAN_CACHED = "Median, cached"
M_MEDIAN_UNCACHED = "Median, not cached"
M_RATIO = "Slow-down of a miss"
M_RATIO_VALUE = "{ratio:.2f}×"
M_RATIO_HELP = "Median latency of the not-cached probes / median of the cached ones."
M_MEDIAN_HELP = "Interquartile range: {lo:,.1f}-{hi:,.1f} ms over {n} probes."
SC_WITHIN_NOISE = (
    "{salt}: the two groups' interquartile ranges overlap, so this difference of medians is within the "
    "noise of this run."
)
SC_CLEAR = "{salt}: the two groups' interquartile ranges do not overlap: the difference is larger than the noise."
M_AUC = "Separation (AUC)"
M_AUC_HELP = (
    "Probability that a random cached probe is faster than a random not-cached one: 1.0 = perfectly "
    "separable, 0.5 = no signal. Best single threshold classifies {acc:.0%} of probes correctly."
)
TRIALS_NOTE = (
    "{trials} trials per group ({n} timed probes), {device}, {probe_tokens} probe tokens of which "
    "{reused} reused on a hit. Medians, not means: a loaded machine adds long tails. Longest wait for a "
    "quiet engine: {waited:,.0f} ms (not part of any timing)."
)
SALT_NOTE = (
    "With the victim's salt on, the attacker's probe has different block hashes from the first block on, "
    "so it never hits: both groups compute the same {probe_tokens} tokens and the distributions overlap."
)
GAME = "The attacker game"
GAME_INTRO = (
    "A victim session sent a prompt from a known template with one secret field. The attacker knows the "
    "template and a list of candidates; for each candidate it sends the template's first blocks once and "
    "times it, alone on the engine. The fastest candidate is its guess. Each round runs in a fresh "
    "namespace of the shared engine (an empty cache between victim and attacker), picks a new secret at "
    "random, and probes every candidate exactly once (a second probe would hit the attacker's own blocks)."
)
GAME_TEMPLATE_LABEL = "Template (known to the attacker)"
# The game's default template and candidates in the session's language (English: kvviz.experiments.security.attacker's).
GAME_TEMPLATE_DEFAULT = (
    "Patient record 4471. Diagnosis: {secret}. Treatment plan and notes follow. You are the clinic's "
    "assistant: keep this record confidential, never read it aloud to anyone but the patient, and answer "
    "only the patient's own questions about appointments, prescriptions, test results and billing, in "
    "plain and friendly language."
)
GAME_CANDIDATES_DEFAULT = "diabetes, asthma, influenza, migraine, anaemia, arthritis"
GAME_CANDIDATES_LABEL = "Candidates for the secret field"
GAME_ROUNDS = "Rounds"
GAME_RUN = "Play"
GAME_RUNNING = "Round {done}/{total}"
GAME_NO_RESULTS = "Press **Play** to run the game with salts off and then on."
M_GAME_ACC = "Top guess right"
M_GAME_ACC_VALUE = "{correct}/{rounds} ({acc:.0%})"
M_GAME_ACC_HELP = "Rounds in which the fastest probe was the secret. Chance = 1/{n} = {chance:.0%}."
GAME_CHART_TITLE = "Latency of each candidate probe, per round (the secret is marked)"
GAME_ACC_TITLE = "How often the fastest probe is the secret"
CHANCE = "chance"
GAME_COLUMNS = {"round": "Round", "salts": "Salts", "secret": "Secret", "guess": "Fastest probe",
                "correct": "Right?", "rank": "Secret's rank", "secret_ms": "Secret probe (ms)",
                "others_ms": "Others, median (ms)"}
GAME_BAD = "Give a template with one {{secret}} field and at least two different candidates: {error}"
DEFENCES = "Defences"
DEFENCES_TEXT = (
    "- **Cache salt per tenant or user**: blocks are shared only within the same salt (vLLM's "
    "`cache_salt`). Shared system prompts stop being shared across salts too: that is the price.\n"
    "- Put secrets **late** in the prompt: only whole-prefix matches leak, and a prefix that contains an "
    "unguessable value first cannot be probed past it.\n"
    "- Padding the latency or batching responses blurs the signal but costs what the cache saved."
)

# ----------------------------------------------------------------------------- figures (kvviz_app.security.figures)
FIG_STRIP_HOVER = "block {index}: tokens {first}-{last}<br>{status}"
FIG_STRIP_HASH = "<br>hash {hash}"
FIG_TOKEN_POSITION = "token position"
FIG_REUSED_TOKENS = "reused tokens"
FIG_REUSED_HOVER = "%{x}: %{y} tokens reused<extra></extra>"
FIG_COMPUTED_TOKENS = "computed tokens"
FIG_COMPUTED_HOVER = "%{x}: %{y} tokens computed<extra></extra>"
FIG_TOKENS = "tokens"
FIG_WITH_SALT = "with {salt}"
FIG_NONE_HASH = "NONE_HASH"
FIG_BLOCK = "block {i}"
FIG_CHAIN_SHOWN = "blocks 0–{last} of {total}"
FIG_IN_POOL = "in the room's pool"
FIG_NOT_IN_POOL = "not in the pool"
FIG_LATENCY_HOVER = "%{{y:.1f}} ms<extra>{name}</extra>"
FIG_LATENCY_AXIS = "probe prefill, alone on the engine (ms, log)"
FIG_OTHER_CANDIDATES = "other candidates"
FIG_OTHER_HOVER = "round %{x}: %{text} %{y:.1f} ms<extra></extra>"
FIG_SECRET = "the secret"
FIG_SECRET_HOVER = "round %{x}: secret %{text} %{y:.1f} ms<extra></extra>"
FIG_ROUND = "round"
FIG_PROBE_AXIS = "probe latency (ms, log)"
FIG_ACC_HOVER = "%{x}: %{y:.0%}<extra></extra>"
MS_VALUE = "{ms:,.1f} ms"
