"""Multi-turn chat and agent sessions: what each turn reads from the cache, writes, and computes.

A session is a list of turns. Each turn's prompt is the previous prompt, plus the previous answer,
plus the new messages (a user message, tool results), because requests are stateless and the client
re-sends the whole dialogue. The prompt is rendered segment by segment in the embedded model's
ChatML chat format (tools, system, user, assistant, tool result) and each segment is tokenized with
the real tokenizer, so every count is a real token count.

Two views of the same turns:

* **Engine mechanics** (policy ``vllm``): the real block manager (``KVCacheManager``) admits each
  prompt, decodes the answer into the pool and frees the request; cache reads are its hit tokens,
  writes are the tokens of the full blocks it cached (counted from its ``cache`` events), the rest
  is computed but not cached (the partly filled last block). No time limit: only LRU eviction when
  the pool needs room.
* **Provider policy** (``anthropic-*``, ``openai-*``): cache entries exist only at checkpoints
  (explicit ``cache_control`` marks, or server-chosen points modelled as block boundaries), each
  keyed by the chained block hash of the prefix that ends there; reuse reaches the longest live
  entry that is a prefix of the new prompt; entries below the minimum cacheable length are never
  written; entries expire ``ttl_s`` after the request that wrote or last hit them started.

Events to try (``SessionEvents``) rewrite the session before it runs: a restart with a changed tool
list, a file read mid-session, a long pause, JSON tool arguments with unstable key order.

Files: ``schema`` (the session as data, parsing), ``events`` (changes to try), ``render`` (ChatML
segments), ``results`` (per-turn usage), ``policy`` (provider checkpoints), ``runner`` (``run_session``).
"""

from kvviz.experiments.sessions.render import Segment, render_request
from kvviz.experiments.sessions.results import (
    SegmentSpan,
    SessionResult,
    TurnUsage,
    cumulative_work,
    projected_work,
    session_increment,
)
from kvviz.experiments.sessions.run import default_tokenizer, run_session
from kvviz.experiments.sessions.schema import (
    DEFAULT_GAP_S,
    DEFAULT_PAUSE_S,
    MARK_LABELS,
    MARKS,
    MAX_PAUSE_S,
    MAX_SESSION_BYTES,
    MAX_SESSION_TOKENS,
    MAX_TEXT_CHARS,
    MAX_TURNS,
    SEGMENT_KINDS,
    Session,
    SessionError,
    ToolCall,
    Turn,
    example_names,
    load_example,
    load_session_file,
    load_session_text,
    session_from_dict,
)
from kvviz.experiments.sessions.session_events import (
    DEFAULT_FILE,
    DEFAULT_RESTART_TOOL,
    EVENT_NAMES,
    NO_EVENTS,
    SessionEvents,
    apply_events,
    default_event_turn,
)

__all__ = [
    "DEFAULT_FILE", "DEFAULT_GAP_S", "DEFAULT_PAUSE_S", "DEFAULT_RESTART_TOOL", "EVENT_NAMES", "MARKS",
    "MARK_LABELS", "MAX_PAUSE_S", "MAX_SESSION_BYTES", "MAX_SESSION_TOKENS", "MAX_TEXT_CHARS", "MAX_TURNS",
    "NO_EVENTS", "SEGMENT_KINDS", "Segment", "SegmentSpan", "Session", "SessionError", "SessionEvents",
    "SessionResult", "ToolCall", "Turn", "TurnUsage", "apply_events", "cumulative_work", "default_event_turn",
    "default_tokenizer", "example_names", "load_example", "load_session_file", "load_session_text",
    "projected_work", "render_request", "run_session", "session_from_dict", "session_increment",
]
