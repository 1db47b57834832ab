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
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kvviz.core.blank import is_blank
from kvviz.core.events import EventKind
from kvviz.core.hashing import get_hash_fn, hash_block_chain, hash_block_tokens, init_none_hash
from kvviz.core.jsonio import parse_json, read_limited
from kvviz.core.manager import MAX_NUM_BLOCKS, KVCacheManager
from kvviz.core.providers import USAGE_FIELDS, CachePolicy, get_policy

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "sessions"

MAX_TURNS = 60
MAX_TEXT_CHARS = 60_000
MAX_SESSION_BYTES = 2_000_000  # a session file or upload; each text in it is capped by MAX_TEXT_CHARS
MAX_SESSION_TOKENS = 400_000
MAX_PAUSE_S = 7 * 24 * 3600.0
DEFAULT_GAP_S = 30.0
DEFAULT_PAUSE_S = 600.0

SEGMENT_KINDS = ("tools", "system", "user", "tool", "assistant", "prompt_end")

# Checkpoint marks an explicit-checkpoint policy can place (Anthropic cache_control).
MARKS = ("system", "last")
MARK_LABELS = {
    "system": "after the tools and system instructions",
    "last": "at the end of every prompt (a moving checkpoint)",
}

Tokenizer = Callable[[str], list[int]]


class SessionError(ValueError):
    """A session file or option that cannot be used; the message is one line."""


# ---------------------------------------------------------------- the session as data


@dataclass(frozen=True)
class ToolCall:
    """A tool call inside an assistant answer; ``arguments`` keep the order they were written in."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """One request/answer round: new inputs (tool results, then a user message) and the answer."""

    answer: str
    user: str | None = None
    tool_results: tuple[tuple[str, str], ...] = ()  # (tool name, content)
    tool_calls: tuple[ToolCall, ...] = ()
    gap_s: float = DEFAULT_GAP_S  # seconds since the previous request started


@dataclass(frozen=True)
class Session:
    """A chat or agent session: the tool list, the system instructions, the turns.

    ``restart_tools`` is the tool list after a restart and ``file_read`` the (path, content) of a
    file read mid-session; both are only used by the corresponding events."""

    name: str
    title: str
    description: str
    tools: tuple[dict[str, Any], ...]
    system: str
    turns: tuple[Turn, ...]
    restart_tools: tuple[dict[str, Any], ...] = ()
    file_read: tuple[str, str] | None = None


def _text(obj: Any, where: str, *, optional: bool = False) -> str | None:
    if obj is None and optional:
        return None
    if not isinstance(obj, str) or is_blank(obj):
        raise SessionError(f"{where} must be a non-empty string")
    if len(obj) > MAX_TEXT_CHARS:
        raise SessionError(f"{where} is longer than {MAX_TEXT_CHARS:,} characters")
    return obj


def _tools(obj: Any, where: str) -> tuple[dict[str, Any], ...]:
    if obj is None:
        return ()
    if not isinstance(obj, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in obj):
        raise SessionError(f"{where} must be a list of objects, each with a string 'name'")
    if len(json.dumps(obj)) > MAX_TEXT_CHARS:
        raise SessionError(f"{where} is longer than {MAX_TEXT_CHARS:,} characters")
    return tuple(obj)


def _number(obj: Any, where: str, default: float) -> float:
    if obj is None:
        return default
    if isinstance(obj, bool) or not isinstance(obj, (int, float)) or not 0 <= obj <= MAX_PAUSE_S:
        raise SessionError(f"{where} must be a number of seconds in 0..{MAX_PAUSE_S:,.0f}")
    return float(obj)


def session_from_dict(data: Any, name: str = "custom") -> Session:
    """Validate and convert a session object (the JSON format of ``assets/sessions``)."""
    if not isinstance(data, dict):
        raise SessionError("a session must be a JSON object with 'system' and 'turns'")
    turns_data = data.get("turns")
    if not isinstance(turns_data, list) or not turns_data:
        raise SessionError("'turns' must be a non-empty list")
    if len(turns_data) > MAX_TURNS:
        raise SessionError(f"at most {MAX_TURNS} turns, got {len(turns_data)}")
    turns = []
    for i, t in enumerate(turns_data, start=1):
        where = f"turn {i}"
        if not isinstance(t, dict):
            raise SessionError(f"{where} must be an object")
        results_raw = t.get("tool_results") or []
        if not isinstance(results_raw, list):
            raise SessionError(f"{where}: 'tool_results' must be a list")
        results = []
        for j, r in enumerate(results_raw, start=1):
            if not isinstance(r, dict):
                raise SessionError(f"{where}: tool result {j} must be an object with 'name' and 'content'")
            results.append((_text(r.get("name"), f"{where} tool result {j} name"),
                            _text(r.get("content"), f"{where} tool result {j} content")))
        user = _text(t.get("user"), f"{where} 'user'", optional=True)
        if user is None and not results:
            raise SessionError(f"{where} needs a 'user' message or 'tool_results'")
        calls_raw = t.get("tool_calls") or []
        if not isinstance(calls_raw, list):
            raise SessionError(f"{where}: 'tool_calls' must be a list")
        calls = []
        for j, c in enumerate(calls_raw, start=1):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(
                c.get("arguments", {}), dict
            ):
                raise SessionError(f"{where}: tool call {j} needs a string 'name' and an object 'arguments'")
            calls.append(ToolCall(c["name"], dict(c.get("arguments", {}))))
        turns.append(Turn(
            answer=_text(t.get("answer"), f"{where} 'answer'"),  # type: ignore[arg-type]
            user=user,
            tool_results=tuple(results),  # type: ignore[arg-type]
            tool_calls=tuple(calls),
            gap_s=_number(t.get("gap_s"), f"{where} 'gap_s'", 0.0 if i == 1 else DEFAULT_GAP_S),
        ))
    file_read = data.get("file_read")
    if file_read is not None:
        if not isinstance(file_read, dict):
            raise SessionError("'file_read' must be an object with 'path' and 'content'")
        file_read = (_text(file_read.get("path"), "file_read path"), _text(file_read.get("content"),
                                                                             "file_read content"))
    return Session(
        name=str(data.get("name") or name),
        title=str(data.get("title") or data.get("name") or name),
        description=str(data.get("description") or ""),
        tools=_tools(data.get("tools"), "'tools'"),
        system=_text(data.get("system"), "'system'"),  # type: ignore[arg-type]
        turns=tuple(turns),
        restart_tools=_tools(data.get("restart_tools"), "'restart_tools'"),
        file_read=file_read,  # type: ignore[arg-type]
    )


def load_session_text(text: str | bytes, name: str = "custom", where: str = "the session") -> Session:
    """Parse a session from JSON text or UTF-8 bytes (an upload); SessionError (one line) for content
    over MAX_SESSION_BYTES, bytes that are not UTF-8, bad JSON or a bad shape."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SESSION_BYTES:
        raise SessionError(f"{where} is larger than {MAX_SESSION_BYTES:,} bytes")
    return session_from_dict(parse_json(text, where, SessionError), name)


def load_session_file(path: str | Path) -> Session:
    """Read a session JSON file (named after the file); SessionError (one line) for a missing file, a
    directory, or anything :func:`load_session_text` refuses."""
    raw = read_limited(path, MAX_SESSION_BYTES, "session file", SessionError)
    return load_session_text(raw, Path(path).stem, where=str(path))


def example_names() -> list[str]:
    """Names of the built-in example sessions (files in assets/sessions): the chat first, then the rest."""
    names = sorted(p.stem for p in ASSETS.glob("*.json"))
    return sorted(names, key=lambda n: (n != "chat", n))


def load_example(name: str) -> Session:
    """A built-in example session by name."""
    if name not in example_names():
        raise SessionError(f"unknown example {name!r}; choose one of {', '.join(example_names())}")
    return load_session_text((ASSETS / f"{name}.json").read_text(encoding="utf-8"), name)


# ---------------------------------------------------------------- events


DEFAULT_RESTART_TOOL = {
    "name": "fetch_url",
    "description": "Download a web page and return its readable text. Use it for documentation that is "
                   "not in the repository.",
    "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
}
DEFAULT_FILE = (
    "notes/todo.md",
    "# Open items\n\n- measure the cache hit rate per tenant\n- document the block size choice\n"
    "- add a test for the partial last block\n",
)


@dataclass(frozen=True)
class SessionEvents:
    """Changes to try on a session; turns are 1-based, None = the event is off."""

    restart_tools_at: int | None = None
    file_read_at: int | None = None
    pause_at: int | None = None
    pause_s: float = DEFAULT_PAUSE_S
    unstable_json: bool = False

    def active(self) -> list[str]:
        names = []
        if self.restart_tools_at:
            names.append("restart_tools")
        if self.file_read_at:
            names.append("file_read")
        if self.pause_at:
            names.append("long_pause")
        if self.unstable_json:
            names.append("unstable_json")
        return names


EVENT_NAMES = ("restart_tools", "file_read", "long_pause", "unstable_json")


def default_event_turn(session: Session, event: str) -> int:
    """Where an event lands by default: in the middle of the session (never on turn 1)."""
    n = len(session.turns)
    return max(2, min(n, n // 2 + 1)) if n > 1 else 1


def _check_turn(value: int | None, n: int, name: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= n:
        raise SessionError(f"{name} must be a turn number in 2..{n}" if n > 1 else
                           f"{name} needs a session with at least 2 turns")


def apply_events(session: Session, events: SessionEvents) -> tuple[Session, dict[int, list[str]]]:
    """The session rewritten by ``events`` and, per turn, the names of the events that happen there
    (unstable JSON is applied while rendering; ``run_session`` marks the turns where it changed the prompt)."""
    n = len(session.turns)
    _check_turn(events.restart_tools_at, n, "restart_tools_at")
    _check_turn(events.file_read_at, n, "file_read_at")
    _check_turn(events.pause_at, n, "pause_at")
    if isinstance(events.pause_s, bool) or not isinstance(events.pause_s, (int, float)) or not (
        0 <= events.pause_s <= MAX_PAUSE_S
    ):
        raise SessionError(f"pause_s must be in 0..{MAX_PAUSE_S:,.0f} seconds")
    turns = list(session.turns)
    marks: dict[int, list[str]] = {}
    if events.file_read_at:
        k = events.file_read_at - 1
        path, content = session.file_read or DEFAULT_FILE
        prev = turns[k - 1]
        turns[k - 1] = replace(prev, tool_calls=prev.tool_calls + (ToolCall("read_file", {"path": path}),))
        turns[k] = replace(turns[k], tool_results=(("read_file", content),) + turns[k].tool_results)
        marks.setdefault(events.file_read_at, []).append("file_read")
    if events.pause_at:
        k = events.pause_at - 1
        turns[k] = replace(turns[k], gap_s=float(events.pause_s))
        marks.setdefault(events.pause_at, []).append("long_pause")
    if events.restart_tools_at:
        marks.setdefault(events.restart_tools_at, []).append("restart_tools")
    return replace(session, turns=tuple(turns)), marks


# ---------------------------------------------------------------- rendering


@dataclass(frozen=True)
class Segment:
    """One piece of a prompt: its kind, a label for the pictures, its text, the turn it entered."""

    kind: str
    label: str
    text: str
    turn: int


def _json(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def _render_tools(tools: tuple[dict[str, Any], ...]) -> str:
    lines = "\n".join(_json(t) for t in tools) if tools else "(no tools)"
    return f"<|im_start|>system\nYou can call these tools; reply with <tool_call> JSON to use one.\n{lines}<|im_end|>\n"


def _arguments(call: ToolCall, unstable: bool, request: int) -> dict[str, Any]:
    """The call's arguments as serialised for request ``request``: in their written order, or with
    ``unstable`` rotated by the request number, so consecutive requests never agree (a deterministic
    stand-in for the randomised iteration order of Go maps or Swift dictionaries)."""
    if not unstable or len(call.arguments) < 2:
        return call.arguments
    keys = list(call.arguments)
    shift = request % len(keys)
    return {k: call.arguments[k] for k in keys[shift:] + keys[:shift]}


def _answer_body(turn: Turn, request: int, unstable: bool) -> str:
    calls = "".join(
        "\n<tool_call>\n" + _json({"name": c.name, "arguments": _arguments(c, unstable, request)})
        + "\n</tool_call>"
        for c in turn.tool_calls
    )
    return f"{turn.answer}{calls}<|im_end|>\n"


def render_request(session: Session, k: int, events: SessionEvents = SessionEvents()) -> tuple[list[Segment], Segment]:
    """The segments of turn ``k``'s prompt (1-based) as the client sends it, and its answer segment.

    The answer body of an earlier turn is re-serialised for every request: with ``unstable_json``
    its tool-call arguments come out in a different key order each time, as Go maps or Swift
    dictionaries may."""
    tools = session.tools
    if events.restart_tools_at and k >= events.restart_tools_at:
        tools = session.restart_tools or ((DEFAULT_RESTART_TOOL,) + tuple(session.tools))
    segments = [
        Segment("tools", "tools", _render_tools(tools), 1),
        Segment("system", "system", f"<|im_start|>system\n{session.system}<|im_end|>\n", 1),
    ]
    for i, turn in enumerate(session.turns[:k], start=1):
        if i > 1:
            prev = session.turns[i - 2]
            # In the turn that generated it, the answer's serialisation is the one the model wrote.
            body = _answer_body(prev, k, events.unstable_json)
            segments.append(Segment("assistant", f"answer {i - 1}", "<|im_start|>assistant\n" + body, i - 1))
        for name, content in turn.tool_results:
            label = "file read" if name == "read_file" else f"tool result {i}"
            segments.append(Segment("tool", label, f"<|im_start|>tool\n[{name}]\n{content}<|im_end|>\n", i))
        if turn.user is not None:
            segments.append(Segment("user", f"user {i}", f"<|im_start|>user\n{turn.user}<|im_end|>\n", i))
    segments.append(Segment("prompt_end", f"answer {k} starts", "<|im_start|>assistant\n", k))
    answer = Segment("assistant", f"answer {k}", _answer_body(session.turns[k - 1], k, events.unstable_json), k)
    return segments, answer


# ---------------------------------------------------------------- per-turn usage


@dataclass(frozen=True)
class SegmentSpan:
    """A segment's token span ``[start, end)`` inside one turn's prompt."""

    kind: str
    label: str
    start: int
    end: int
    turn: int


@dataclass(frozen=True)
class TurnUsage:
    """What one turn's prompt cost, in Anthropic's usage-field naming.

    ``cache_read_input_tokens`` + ``cache_creation_input_tokens`` + ``input_tokens`` ==
    ``prompt_tokens``; the first ``cache_read_input_tokens`` tokens of the prompt were reused, the
    next ``cache_creation_input_tokens`` were computed and written, the rest computed only."""

    turn: int
    at_s: float
    prompt_tokens: int
    answer_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    input_tokens: int
    common_prefix: int  # tokens equal to the previous request's prompt + answer
    first_difference: str | None  # the segment where the prompt first differs, if it does
    expired_entries: int
    events: tuple[str, ...]
    segments: tuple[SegmentSpan, ...]

    @property
    def computed_tokens(self) -> int:
        """Prefill work this turn: every prompt token not read from the cache."""
        return self.cache_creation_input_tokens + self.input_tokens

    def usage(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in USAGE_FIELDS}


@dataclass(frozen=True)
class SessionResult:
    """Every turn of one session under one policy, plus the cumulative prefill work."""

    session: str
    title: str
    policy: CachePolicy
    block_size: int
    marks: tuple[str, ...]
    min_cacheable_tokens: int
    ttl_s: float | None
    events: SessionEvents
    turns: list[TurnUsage]
    cumulative_without_cache: list[int]
    cumulative_with_cache: list[int]

    @property
    def total_prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def total_computed_tokens(self) -> int:
        return sum(t.computed_tokens for t in self.turns)

    @property
    def total_read_tokens(self) -> int:
        return sum(t.cache_read_input_tokens for t in self.turns)

    def gap_before(self, turn: int) -> float | None:
        """Seconds between turn ``turn - 1`` and turn ``turn`` (1-based); None for the first turn."""
        if turn <= 1:
            return None
        return self.turns[turn - 1].at_s - self.turns[turn - 2].at_s

    def turn_reasons(self, turn: TurnUsage) -> tuple[str, ...]:
        """Why ``turn`` read what it read, as codes in display order: ``first`` (nothing cached yet),
        ``diff`` (the prompt differs from the previous request: ``turn.first_difference`` at token
        ``turn.common_prefix``), ``expired`` (entries outlived their TTL), ``below_min`` (a policy's
        minimum cacheable length: nothing read or written); ``append`` when none of these holds."""
        reasons = []
        if turn.turn == 1:
            reasons.append("first")
        if turn.first_difference:
            reasons.append("diff")
        if turn.expired_entries:
            reasons.append("expired")
        if (self.policy.is_policy and turn.prompt_tokens < self.min_cacheable_tokens
                and turn.cache_read_input_tokens == turn.cache_creation_input_tokens == 0):
            reasons.append("below_min")
        return tuple(reasons) or ("append",)

    def to_dict(self, segments: bool = False) -> dict[str, Any]:
        turns = []
        for t in self.turns:
            row = {
                "turn": t.turn, "at_s": t.at_s, "prompt_tokens": t.prompt_tokens,
                "answer_tokens": t.answer_tokens, **t.usage(), "computed_tokens": t.computed_tokens,
                "common_prefix": t.common_prefix, "first_difference": t.first_difference,
                "expired_entries": t.expired_entries, "events": list(t.events),
            }
            if segments:
                row["segments"] = [asdict(s) for s in t.segments]
            turns.append(row)
        return {
            "session": self.session,
            "policy": self.policy.key,
            "policy_label": self.policy.label,
            "is_policy": self.policy.is_policy,
            "block_size": self.block_size,
            "marks": list(self.marks),
            "min_cacheable_tokens": self.min_cacheable_tokens,
            "ttl_s": self.ttl_s,
            "events": self.events.active(),
            "turns": turns,
            "total_prompt_tokens": self.total_prompt_tokens,
            "total_computed_tokens": self.total_computed_tokens,
            "total_read_tokens": self.total_read_tokens,
            "cumulative_without_cache": self.cumulative_without_cache,
            "cumulative_with_cache": self.cumulative_with_cache,
        }


@dataclass
class _Entry:
    length: int
    expires_at: float | None


@dataclass
class _CheckpointCache:
    """Provider-side entries: prefix key -> entry; a key is the chained block hash of the prefix."""

    block_size: int
    hash_name: str = "sha256_cbor"
    entries: dict[bytes, _Entry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.hash_fn = get_hash_fn(self.hash_name)
        self.none_hash = init_none_hash(self.hash_fn, "0")

    def keys(self, tokens: list[int]) -> Callable[[int], bytes]:
        """Key of the prefix ``tokens[:n]``: the chain hash of its full blocks, then its tail."""
        chain = hash_block_chain(tokens, self.block_size, self.hash_fn, self.none_hash)

        def key(n: int) -> bytes:
            full, tail = divmod(n, self.block_size)
            parent = chain[full - 1] if full else self.none_hash
            if not tail:
                return parent
            return hash_block_tokens(self.hash_fn, parent, tokens[full * self.block_size : n], ("checkpoint",))

        return key

    def expire(self, now: float) -> int:
        dead = [k for k, e in self.entries.items() if e.expires_at is not None and e.expires_at <= now]
        for k in dead:
            del self.entries[k]
        return len(dead)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _spans(segments: list[Segment], ids: list[list[int]]) -> tuple[SegmentSpan, ...]:
    spans, pos = [], 0
    for seg, seg_ids in zip(segments, ids, strict=True):
        spans.append(SegmentSpan(seg.kind, seg.label, pos, pos + len(seg_ids), seg.turn))
        pos += len(seg_ids)
    return tuple(spans)


def _checkpoint_positions(policy: CachePolicy, marks: tuple[str, ...], spans: tuple[SegmentSpan, ...],
                          n: int, block_size: int) -> list[int]:
    if policy.checkpoints == "automatic":
        return list(range(block_size, n + 1, block_size))
    positions = set()
    if "system" in marks:
        positions.update(s.end for s in spans if s.kind == "system")
    if "last" in marks:
        positions.add(n)
    return sorted(p for p in positions if 0 < p <= n)


def default_tokenizer() -> Tokenizer:
    """The embedded model's tokenizer, one segment at a time (imported lazily: it loads transformers)."""
    from kvviz.model import MAX_TOKENS_CEILING, tokenize

    return lambda text: tokenize(text, max_tokens=MAX_TOKENS_CEILING).ids


def run_session(
    session: Session,
    policy: str = "anthropic-5m",
    events: SessionEvents = SessionEvents(),
    *,
    block_size: int = 16,
    marks: tuple[str, ...] = MARKS,
    min_cacheable_tokens: int | None = None,
    ttl_s: float | None | str = "policy",
    pool_blocks: int | None = None,
    tokenizer: Tokenizer | None = None,
) -> SessionResult:
    """Run every turn of ``session`` under ``policy`` and return the per-turn usage.

    ``min_cacheable_tokens`` and ``ttl_s`` override the policy's values (ttl_s None = no TTL);
    ``pool_blocks`` sizes the engine's block pool (default: big enough that nothing is evicted)."""
    pol = get_policy(policy)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or not 1 <= block_size <= 256:
        raise SessionError("block_size must be an integer in 1..256")
    bad_marks = [m for m in marks if m not in MARKS]
    if bad_marks:
        raise SessionError(f"unknown checkpoint mark {bad_marks[0]!r}; choose from {', '.join(MARKS)}")
    min_len = pol.min_cacheable_tokens if min_cacheable_tokens is None else min_cacheable_tokens
    if isinstance(min_len, bool) or not isinstance(min_len, int) or not 0 <= min_len <= MAX_SESSION_TOKENS:
        raise SessionError(f"min_cacheable_tokens must be an integer in 0..{MAX_SESSION_TOKENS:,}")
    ttl = pol.ttl_s if ttl_s == "policy" else ttl_s
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= 1e7):
        raise SessionError("ttl_s must be a positive number of seconds or None")
    if not pol.is_policy:
        min_len, ttl = 0, None  # the engine has neither: only full blocks and LRU eviction
    changed, event_turns = apply_events(session, events)
    tok = tokenizer or default_tokenizer()
    memo: dict[str, list[int]] = {}

    def ids_of(text: str) -> list[int]:
        if text not in memo:
            memo[text] = list(tok(text))
        return memo[text]

    rendered = []
    total = 0
    for k in range(1, len(changed.turns) + 1):
        segments, answer = render_request(changed, k, events)
        seg_ids = [ids_of(s.text) for s in segments]
        ans_ids = ids_of(answer.text)
        total += sum(map(len, seg_ids)) + len(ans_ids)
        if total > MAX_SESSION_TOKENS:
            raise SessionError(f"the session re-sends more than {MAX_SESSION_TOKENS:,} tokens in total")
        rendered.append((segments, seg_ids, ans_ids))

    manager = None
    store = _CheckpointCache(block_size)
    if not pol.is_policy:
        need = sum(-(-(sum(map(len, s)) + len(a)) // block_size) for _, s, a in rendered) + 8
        blocks = pool_blocks or min(need, MAX_NUM_BLOCKS)
        try:
            manager = KVCacheManager(blocks, block_size=block_size)
        except ValueError as exc:
            raise SessionError(str(exc)) from None

    turns: list[TurnUsage] = []
    now = 0.0
    previous: list[int] = []
    for k, (segments, seg_ids, ans_ids) in enumerate(rendered, start=1):
        turn = changed.turns[k - 1]
        now += turn.gap_s if k > 1 else 0.0
        prompt = [t for ids in seg_ids for t in ids]
        spans = _spans(segments, seg_ids)
        common = _common_prefix(previous, prompt)
        diff = None
        turn_events = list(event_turns.get(k, []))
        if k > 1 and common < len(previous):
            where = next((s for s in spans if s.start <= common < s.end), None)
            diff = where.label if where else None
            if events.unstable_json and where is not None and where.kind == "assistant":
                turn_events.append("unstable_json")  # an earlier tool call came out in a new key order
        expired = 0
        if manager is not None:
            read, written = _engine_turn(manager, f"turn-{k}", prompt, ans_ids, block_size)
        else:
            expired = store.expire(now)
            read, written = _policy_turn(store, pol, marks, spans, prompt, now, ttl, min_len, block_size)
        turns.append(TurnUsage(
            turn=k, at_s=now, prompt_tokens=len(prompt), answer_tokens=len(ans_ids),
            cache_read_input_tokens=read, cache_creation_input_tokens=written,
            input_tokens=len(prompt) - read - written, common_prefix=common, first_difference=diff,
            expired_entries=expired, events=tuple(turn_events), segments=spans,
        ))
        previous = prompt + ans_ids
    without, with_cache = cumulative_work(turns)
    return SessionResult(
        session=session.name, title=session.title, policy=pol, block_size=block_size, marks=tuple(marks),
        min_cacheable_tokens=min_len, ttl_s=ttl, events=events, turns=turns,
        cumulative_without_cache=without, cumulative_with_cache=with_cache,
    )


def _engine_turn(manager: KVCacheManager, rid: str, prompt: list[int], answer: list[int],
                 block_size: int) -> tuple[int, int]:
    """One request through the real block manager: (tokens read, tokens written) from its events."""
    added = manager.add_request(rid, prompt)
    if not added.ok:
        raise SessionError(f"the engine pool is too small for {rid}: {added.error}")
    written = sum(len(e.block_ids) for e in added.events if e.kind is EventKind.CACHE) * block_size
    if answer:
        manager.append_tokens(rid, answer)  # decoding fills and caches blocks with the answer
    manager.free_request(rid)
    return added.num_computed_tokens, written


def _policy_turn(store: _CheckpointCache, pol: CachePolicy, marks: tuple[str, ...],
                 spans: tuple[SegmentSpan, ...], prompt: list[int], now: float, ttl: float | None,
                 min_len: int, block_size: int) -> tuple[int, int]:
    """One request against provider-side checkpoint entries: (tokens read, tokens written)."""
    key = store.keys(prompt)
    read = 0
    read_key = None
    for length in sorted({e.length for e in store.entries.values() if e.length <= len(prompt)}, reverse=True):
        k = key(length)
        if k in store.entries:
            read, read_key = length, k
            break
    expires = None if ttl is None else now + ttl
    if read_key is not None and pol.refresh_on_hit:
        store.entries[read_key].expires_at = expires
    written_to = 0
    for pos in _checkpoint_positions(pol, marks, spans, len(prompt), block_size):
        if pos < min_len:
            continue
        k = key(pos)
        if k in store.entries:
            if pol.refresh_on_hit and pos <= read:
                store.entries[k].expires_at = expires
            continue
        store.entries[k] = _Entry(pos, expires)
        written_to = max(written_to, pos)
    return read, max(0, written_to - read)


# ---------------------------------------------------------------- prefill work


def cumulative_work(turns: list[TurnUsage]) -> tuple[list[int], list[int]]:
    """Running totals of prefill tokens: without a cache (every prompt token, every turn) and with it
    (only the tokens not read from the cache)."""
    without, with_cache = [], []
    a = b = 0
    for t in turns:
        a += t.prompt_tokens
        b += t.computed_tokens
        without.append(a)
        with_cache.append(b)
    return without, with_cache


def projected_work(first_prompt: int, increment: int, turns: int) -> tuple[list[int], list[int]]:
    """Cumulative prefill tokens of an idealised session whose prompt starts at ``first_prompt`` and
    grows by ``increment`` per turn: without a cache turn k costs its whole prompt, so the total is
    quadratic, ``n*first + increment*n*(n-1)/2``; with a perfect cache turn k costs only its
    increment, so the total is linear, ``first + (n-1)*increment``."""
    if min(first_prompt, increment) < 0 or not 1 <= turns <= 10_000:
        raise SessionError("projection needs first_prompt, increment >= 0 and 1..10,000 turns")
    without = [n * first_prompt + increment * n * (n - 1) // 2 for n in range(1, turns + 1)]
    with_cache = [first_prompt + (n - 1) * increment for n in range(1, turns + 1)]
    return without, with_cache


def session_increment(result: SessionResult) -> tuple[int, int]:
    """(first prompt, mean growth per turn) of a session, for :func:`projected_work`."""
    sizes = [t.prompt_tokens for t in result.turns]
    if len(sizes) < 2:
        return sizes[0], 0
    return sizes[0], round((sizes[-1] - sizes[0]) / (len(sizes) - 1))
