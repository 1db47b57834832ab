"""Every string of the "Multi-turn sessions and agents" page and its figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvviz_app.shell.i18n.texts import Texts

TITLE = "Multi-turn sessions and agents"
INTRO = (
    "A model keeps no state between requests: every turn, the client sends the **whole conversation "
    "again** (tools, instructions, every message, the model's own earlier answers) plus the new "
    "message. If the start of the new prompt is identical to what was processed before, its keys and "
    "values are **read from the cache** and only the increment is computed. Below, a real session is "
    "tokenized with the embedded model's tokenizer and run turn by turn through the block manager or a "
    "provider's cache policy. Try the events to see what keeps the cache warm and what voids it."
)

# --- session and policy ---------------------------------------------------------------------------
SESSION_LABEL = "Session"
SESSION_UPLOAD = "your JSON file"
UPLOAD_LABEL = "Upload a session (JSON)"
UPLOAD_HELP = "The format of assets/sessions/*.json: tools, system, turns with user / tool_results / answer."
UPLOAD_FORMAT_HEADER = "Session file format"
UPLOAD_FORMAT = """```json
{
  "name": "mine",
  "tools": [{"name": "search", "description": "...", "parameters": {}}],
  "system": "You are ...",
  "turns": [
    {"user": "first question", "answer": "first answer"},
    {"gap_s": 40, "user": "second question", "answer": "calling a tool",
     "tool_calls": [{"name": "search", "arguments": {"q": "x", "k": 3}}]},
    {"tool_results": [{"name": "search", "content": "..."}], "answer": "final answer"}
  ]
}
```
`gap_s` is the time since the previous request started (default 30 s). Optional: `restart_tools` (the tool
list after a restart) and `file_read` (`path`, `content`) for the events below."""
UPLOAD_NONE = "Upload a session file to run it, or pick one of the built-in sessions."
UPLOAD_ERROR = "Cannot use this session: {error}"
RUN_ERROR = "Cannot run this session: {error}"
POLICY_LABEL = "Cache model"
POLICY_HELP = (
    "vLLM shows the engine's mechanics: every full block is cached, nothing expires on a timer. The "
    "provider options overlay a product policy on the same mechanics."
)
MECHANICS_BADGE = "mechanics"
POLICY_BADGE = "policy"
MECHANICS_NOTE = (
    "**Mechanics.** The real block manager: prompts are hashed in blocks of {block} tokens; a hit is the "
    "longest run of cached blocks from the start; the answer is decoded into the pool and cached too, so "
    "the next turn can read it. There is no TTL: blocks leave only when the pool needs room (LRU)."
)
POLICY_NOTE = (
    "**Policy, not mechanics.** {label}. These are product decisions that change over time; the values "
    "below are dated and sourced. The mechanics underneath are the same: only an identical prefix can "
    "be reused."
)
MARKS_LABEL = "Checkpoints (cache_control marks)"
MARK_LABELS = {
    "system": "after tools + system",
    "last": "end of each prompt",
}
MARKS_HELP = (
    "Entries exist only where a mark is placed. Reuse reaches the nearest checkpoint before the first "
    "difference, even if more of the text matched."
)
AUTOMATIC_NOTE = "Automatic caching: the server picks the points; kvviz assumes every {block}-token boundary."
MIN_LABEL = "Minimum cacheable prompt (tokens)"
MIN_HELP = "Documented as about 500 to a few thousand tokens depending on the model; shorter prompts are not cached."
TTL_LABEL = "Entry lifetime"
TTL_VALUE = "{ttl}, refreshed on every hit"
TTL_NONE = "no TTL (LRU under memory pressure)"

# --- events ---------------------------------------------------------------------------------------
EVENTS_HEADER = "Events to try"
EVENT_LABELS = {
    "restart_tools": "Restart with a changed tool list",
    "file_read": "Read a file mid-session",
    "long_pause": "Long pause",
    "unstable_json": "Unstable JSON key order",
}
EVENT_HELP = {
    "restart_tools": "The agent restarts and sends a different tool list. Tools sit at the very start of "
                     "the prompt, so everything after the change misses.",
    "file_read": "A tool reads a file; its content arrives as a tool result at the end of the prompt. "
                 "Nothing earlier changes, so only the file is new.",
    "long_pause": "The user comes back later. A provider's entries expire; vLLM has no timer, only LRU "
                  "eviction when other requests need the memory.",
    "unstable_json": "Tool-call arguments are re-serialised each request with the keys in a different order "
                     "(as Go maps or Swift dictionaries may). The prompt changes where the first tool call is.",
}
EVENT_SHORT = {
    "restart_tools": "restart",
    "file_read": "file read",
    "long_pause": "long pause",
    "unstable_json": "key order changed",
}
EVENT_TURN = "at turn"
PAUSE_LABEL = "pause (minutes)"
RESET_EVENTS = "Clear all events"

# --- headline numbers -----------------------------------------------------------------------------
M_SENT = "Prompt tokens sent"
M_SENT_HELP = "Sum of every turn's prompt: what would be computed without any cache."
M_COMPUTED = "Prompt tokens computed"
M_COMPUTED_HELP = "cache_creation_input_tokens + input_tokens over all turns: the prefill work actually done."
M_READ = "Read from cache"
M_READ_HELP = "cache_read_input_tokens over all turns, as a share of all prompt tokens sent."
M_PROJECTION = "Less work at {turns} turns"
M_PROJECTION_VALUE = "{ratio:,.0f}x"
M_PROJECTION_HELP = (
    "Projected with this session's first prompt ({first:,} tokens) and average growth ({step:,} tokens "
    "per turn): {without:,} tokens without a cache vs {with_cache:,} with a perfect one."
)

# --- figures --------------------------------------------------------------------------------------
PICTURE_HEADER = "Each turn's prompt"
PICTURE_INTRO = (
    "One bar per request, drawn to scale in tokens: the start that was **read from the cache**, the part "
    "**written** to the cache, and **uncached** input. Each turn re-sends the previous prompt plus the "
    "previous answer plus the new message."
)
PICTURE_TITLE = "Prompt of each turn: what the cache did, by token position"
STATUS_LABELS = {
    "read": "read from cache",
    "written": "written to cache",
    "uncached": "uncached input",
}
TURN_LABEL = "turn {turn}"
TOKEN_AXIS = "token position in the prompt"
HOVER_PIECE = "turn {turn}, {label}<br>tokens {start:,}-{end:,} ({length:,})<br>{status}"
DIFF_NOTE = "changed: {segment}"

USAGE_HEADER = "Usage fields per turn"
USAGE_INTRO = (
    "What an Anthropic-style API reports per response: `cache_read_input_tokens`, "
    "`cache_creation_input_tokens` and `input_tokens`. If both cache fields are 0, nothing was cached "
    "(often: the prompt is below the minimum length)."
)
USAGE_TITLE = "Prompt tokens per turn by usage field"
USAGE_AXIS = "tokens"
USAGE_TABLE = {
    "turn": "turn",
    "at": "sent at",
    "prompt": "prompt tokens",
    "cache_read_input_tokens": "cache_read_input_tokens",
    "cache_creation_input_tokens": "cache_creation_input_tokens",
    "input_tokens": "input_tokens",
    "answer": "answer tokens",
    "why": "what happened",
}
WHY_FIRST = "first request: nothing cached yet"
WHY_BELOW_MIN = "prompt below the minimum cacheable length"
WHY_DIFF = "prompt differs from the previous one in “{segment}” (token {pos:,})"
WHY_EXPIRED = "{count} cache entries expired before this request"
WHY_APPEND = "previous prompt + answer re-sent unchanged"
#: SessionResult.turn_reasons codes -> text (``diff`` takes segment and pos, ``expired`` takes count).
WHY = {"first": WHY_FIRST, "diff": WHY_DIFF, "expired": WHY_EXPIRED, "below_min": WHY_BELOW_MIN,
       "append": WHY_APPEND}
WHY_SEPARATOR = "; "


DURATION_H = "{value:,.1f} h"
DURATION_MIN = "{value:,.1f} min"
DURATION_S = "{value:,.0f} s"


def duration(t: Texts, seconds: float) -> str:
    """A time span the way people read it: ``45 s``, ``5.0 min``, ``1.5 h``."""
    if seconds >= 3600:
        return t.DURATION_H.format(value=seconds / 3600)
    if seconds >= 60:
        return t.DURATION_MIN.format(value=seconds / 60)
    return t.DURATION_S.format(value=seconds)


WORK_HEADER = "Cumulative prefill work"
WORK_INTRO = (
    "Without a cache every turn recomputes its whole prompt, so the total grows with the square of the "
    "number of turns. With a cache each turn pays only for what is new, so the total grows linearly."
)
WORK_TITLE = "This session: prefill tokens, summed over turns"
WORK_PROJECTION_TITLE = "Projected to {turns} turns ({first:,} tokens, then +{step:,} per turn)"
WORK_WITHOUT = "without cache"
WORK_WITH = "with cache"
WORK_AXIS = "tokens computed (cumulative)"
TURN_AXIS = "turn"
USAGE_LEGEND = "{field} ({label})"
# Plotly hover templates (%{...} is filled in by Plotly, {...} by kvviz)
HOVER_USAGE = "turn %{{x}}<br>{field}: %{{y:,}} tokens<extra></extra>"
HOVER_WORK = "turn %{x}: %{y:,} tokens<extra></extra>"
PROJECT_TURNS = "Project to this many turns"

POLICY_HEADER = "The policy values used"
POLICY_LINE = "- **{name}**: {value} _({source}; as of {as_of})_"
SOURCES_LINE = "Sources (checked {as_of}): {sources}."
SOURCE_SEPARATOR = "; "
BADGE_LINE = "{badge}: {label}"
POLICY_CAVEAT = (
    "Provider values change and differ per model; check the provider's current documentation before "
    "you budget with them."
)

EVENT_LINES = {
    "restart_tools": "Turn {turn}: the tool list changed at the very start of the prompt, so {read:,} of "
                     "{prompt:,} tokens were read from the cache.",
    "file_read": "Turn {turn}: the file arrived at the end; {read:,} of {prompt:,} tokens were still read "
                 "from the cache and {new:,} were new.",
    "long_pause": "Turn {turn}: sent {gap} after the previous request; {read:,} of {prompt:,} tokens were "
                  "read from the cache{expired}.",
    "unstable_json": "From turn {turn}: earlier tool calls are re-serialised in a new key order; the cache "
                     "reads {read:,} of {prompt:,} tokens on turn {turn}.",
}
EXPIRED_SUFFIX = " ({count} entries had expired)"

# Anthropic's usage fields (kvviz.analysis.providers.USAGE_FIELDS) in words.
USAGE_LABELS = {
    "cache_read_input_tokens": "read from cache",
    "cache_creation_input_tokens": "written to cache",
    "input_tokens": "uncached input",
}

# The prompt segments of kvviz.experiments.sessions.render; their ``label`` is a code ("tools", "user 3", "answer 2
# starts", "tool result 4", "file read"), shown through ``segment_label``.
SEGMENT_LABELS = {
    "tools": "tools",
    "system": "system",
    "file read": "file read",
    "user": "user {n}",
    "answer": "answer {n}",
    "answer starts": "answer {n} starts",
    "tool result": "tool result {n}",
}


def segment_label(t: Texts, code: str | None) -> str | None:
    """A segment's label code (kvviz.experiments.sessions.render) in the session's language; unknown codes as they are."""
    import re

    if code is None:
        return None
    m = re.fullmatch(r"(user|answer|tool result) (\d+)( starts)?", code)
    if m is None:
        return t.SEGMENT_LABELS.get(code, code)
    return t.SEGMENT_LABELS[m.group(1) + (" starts" if m.group(3) else "")].format(n=int(m.group(2)))

# kvviz.experiments.sessions.SessionError, by code (the English words are the CLI's line). {field} is worded first by
# SESSION_FIELDS (kvviz.experiments.sessions.schema.FIELDS' keys).
SESSION_FIELDS = {
    "system": "'system'", "tools": "'tools'", "restart_tools": "'restart_tools'",
    "user": "turn {turn} 'user'", "answer": "turn {turn} 'answer'", "gap_s": "turn {turn} 'gap_s'",
    "result_name": "turn {turn} tool result {item} name", "result_content": "turn {turn} tool result {item} content",
    "file_read_path": "file_read path", "file_read_content": "file_read content",
}
SESSION_ERRORS = {
    "not_text": "{field} must be a non-empty string",
    "text_too_long": "{field} is longer than {limit:,} characters",
    "bad_tools": "{field} must be a list of objects, each with a string 'name'",
    "bad_seconds": "{field} must be a number of seconds in 0..{high:,.0f}",
    "not_object": "a session must be a JSON object with 'system' and 'turns'",
    "turns_not_list": "'turns' must be a non-empty list",
    "too_many_turns": "at most {limit} turns, got {count}",
    "turn_not_object": "turn {turn} must be an object",
    "results_not_list": "turn {turn}: 'tool_results' must be a list",
    "result_not_object": "turn {turn}: tool result {item} must be an object with 'name' and 'content'",
    "turn_needs_input": "turn {turn} needs a 'user' message or 'tool_results'",
    "calls_not_list": "turn {turn}: 'tool_calls' must be a list",
    "bad_call": "turn {turn}: tool call {item} needs a string 'name' and an object 'arguments'",
    "bad_file_read": "'file_read' must be an object with 'path' and 'content'",
    "too_big": "{where} is larger than {limit:,} bytes",
    "unknown_example": "unknown example {name!r}; choose one of {choices}",
    "bad_block_size": "block size must be in {low}..{high}, got {got}",
    "bad_mark": "unknown checkpoint mark {mark!r}; choose from {choices}",
    "bad_min_cacheable": "min_cacheable_tokens must be an integer in 0..{high:,}",
    "bad_ttl": "ttl_s must be a positive number of seconds or None",
    "too_many_tokens": "the session re-sends more than {limit:,} tokens in total",
    "bad_pool": "the engine pool of {blocks:,} blocks cannot be built: {detail}",
    "pool_too_small": "the engine pool is too small for {request}: {reason}",
    "bad_turn": "{name} must be a turn number in 2..{high}",
    "needs_two_turns": "{name} needs a session with at least 2 turns",
    "bad_pause": "pause_s must be in 0..{high:,.0f} seconds",
    "bad_projection": "projection needs first_prompt, increment >= 0 and 1..{limit:,} turns",
}


def session_error(t: Texts, exc: Exception) -> str:
    """A ``SessionError`` as one line in the view's language (its own English line when it has no code)."""
    from kvviz_app.shell.i18n import texts
    TJ = texts("jsonio", t.lang)

    def adjust(code: str, params: dict[str, Any]) -> str:
        if "field" in params:
            params["field"] = t.SESSION_FIELDS[params["field"]].format(**params)
        return ""

    return TJ.coded_words(exc, t.SESSION_ERRORS, adjust)

# A real chat on the engine (kvviz_app/sessions/chat.py)
CHAT_HEADER = "A real chat on the model"
CHAT_INTRO = (
    "The tables above count tokens; here the model really answers. Each answer is generated by kvviz's "
    "engine and becomes part of the next prompt, token for token, so the next turn finds the whole "
    "conversation in the cache except its last partial block. Answers are short ({new} tokens at most)."
)
CHAT_TINY = (
    "The model is tiny (SmolLM2-135M, 4-bit weights): its answers are often wrong, and in languages other "
    "than English it mostly repeats the question. The lesson here is the cache, not the answer."
)
CHAT_INPUT = "Your message"
CHAT_SEND = "Send"
CHAT_NEW = "New chat"
CHAT_EMPTY = "No message yet: type one and press Send."
CHAT_TABLE = {"turn": "turn", "prompt": "prompt tokens", "cached": "from cache", "computed": "computed tokens",
              "answer": "answer tokens", "ttft": "TTFT, ms"}
CHAT_LINE = "Turn {turn}: {cached:,} of {prompt:,} prompt tokens came from the cache, {computed:,} were computed."
CHAT_COMPUTE = ("Engine compute of this turn: {compute:,.0f} ms (its share of the steps that ran it); "
                "{e2e:,.0f} ms from its arrival to its last token.")
CHAT_PROBS = "Show the model's choice for each answer token"
CHAT_PROBS_HELP = (
    "Under each answer, a table: every token of the answer, the probability the model gave it (its raw "
    "distribution, before any sampling setting, as vLLM's logprobs) and the three tokens it found most likely "
    "at that place. This chat picks the most likely token each time."
)
CHAT_PROBS_TABLE = {"token": "token", "prob": "probability", "others": "most likely tokens there"}
