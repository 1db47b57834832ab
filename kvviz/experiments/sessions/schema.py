"""A session as data: turns, tool calls, limits; parsing and validating session files (the edge)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvviz.errors import CodedError
from kvviz.util.blank import is_blank
from kvviz.util.jsonio import parse_json, read_limited

ASSETS = Path(__file__).resolve().parents[3] / "assets" / "sessions"

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


ERROR_CODES: tuple[str, ...] = (
    "not_text", "text_too_long", "bad_tools", "bad_seconds", "not_object", "turns_not_list", "too_many_turns",
    "turn_not_object", "results_not_list", "result_not_object", "turn_needs_input", "calls_not_list", "bad_call",
    "bad_file_read", "too_big", "unknown_example",
    # kvviz.experiments.sessions.run / session_events / results
    "bad_block_size", "bad_mark", "bad_min_cacheable", "bad_ttl", "too_many_tokens", "bad_pool", "pool_too_small",
    "bad_turn", "needs_two_turns", "bad_pause", "bad_projection",
)
"""Every ``SessionError.code``; the words are kvviz_app.sessions.text' ``SESSION_ERRORS``. A ``field`` param is a
key of ``FIELDS`` (with ``turn`` and ``item`` params where the field needs them)."""

#: The fields a session error can name (the English words of the CLI's line; the view has its own).
FIELDS = {
    "system": "'system'", "tools": "'tools'", "restart_tools": "'restart_tools'",
    "user": "turn {turn} 'user'", "answer": "turn {turn} 'answer'", "gap_s": "turn {turn} 'gap_s'",
    "result_name": "turn {turn} tool result {item} name", "result_content": "turn {turn} tool result {item} content",
    "file_read_path": "file_read path", "file_read_content": "file_read content",
}


class SessionError(CodedError):
    """A session file or option that cannot be used: one English line, and a code from ``ERROR_CODES``
    with its params."""


def _field_error(template: str, code: str, field: str, **params: Any) -> SessionError:
    """A SessionError about ``field`` (a ``FIELDS`` key); ``template`` has ``{where}`` for its English name."""
    names = {k: v for k, v in params.items() if k in ("turn", "item")}
    where = FIELDS[field].format(**names)
    return SessionError(template.format(where=where, **params), code, field=field, **params)


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


def _text(obj: Any, field: str, *, optional: bool = False, **names: int) -> str | None:
    if obj is None and optional:
        return None
    if not isinstance(obj, str) or is_blank(obj):
        raise _field_error("{where} must be a non-empty string", "not_text", field, **names)
    if len(obj) > MAX_TEXT_CHARS:
        raise _field_error("{where} is longer than {limit:,} characters", "text_too_long", field, limit=MAX_TEXT_CHARS,
                           **names)
    return obj


def _tools(obj: Any, field: str) -> tuple[dict[str, Any], ...]:
    if obj is None:
        return ()
    if not isinstance(obj, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in obj):
        raise _field_error("{where} must be a list of objects, each with a string 'name'", "bad_tools", field)
    if len(json.dumps(obj)) > MAX_TEXT_CHARS:
        raise _field_error("{where} is longer than {limit:,} characters", "text_too_long", field, limit=MAX_TEXT_CHARS)
    return tuple(obj)


def _number(obj: Any, field: str, default: float, **names: int) -> float:
    if obj is None:
        return default
    if isinstance(obj, bool) or not isinstance(obj, (int, float)) or not 0 <= obj <= MAX_PAUSE_S:
        raise _field_error("{where} must be a number of seconds in 0..{high:,.0f}", "bad_seconds", field,
                           high=MAX_PAUSE_S, **names)
    return float(obj)


def session_from_dict(data: Any, name: str = "custom") -> Session:
    """Validate and convert a session object (the JSON format of ``assets/sessions``)."""
    if not isinstance(data, dict):
        raise SessionError("a session must be a JSON object with 'system' and 'turns'", "not_object")
    turns_data = data.get("turns")
    if not isinstance(turns_data, list) or not turns_data:
        raise SessionError("'turns' must be a non-empty list", "turns_not_list")
    if len(turns_data) > MAX_TURNS:
        raise SessionError(f"at most {MAX_TURNS} turns, got {len(turns_data)}", "too_many_turns", limit=MAX_TURNS,
                           count=len(turns_data))
    turns = []
    for i, t in enumerate(turns_data, start=1):
        where = f"turn {i}"
        if not isinstance(t, dict):
            raise SessionError(f"{where} must be an object", "turn_not_object", turn=i)
        results_raw = t.get("tool_results") or []
        if not isinstance(results_raw, list):
            raise SessionError(f"{where}: 'tool_results' must be a list", "results_not_list", turn=i)
        results = []
        for j, r in enumerate(results_raw, start=1):
            if not isinstance(r, dict):
                raise SessionError(f"{where}: tool result {j} must be an object with 'name' and 'content'",
                                   "result_not_object", turn=i, item=j)
            results.append((_text(r.get("name"), "result_name", turn=i, item=j),
                            _text(r.get("content"), "result_content", turn=i, item=j)))
        user = _text(t.get("user"), "user", optional=True, turn=i)
        if user is None and not results:
            raise SessionError(f"{where} needs a 'user' message or 'tool_results'", "turn_needs_input", turn=i)
        calls_raw = t.get("tool_calls") or []
        if not isinstance(calls_raw, list):
            raise SessionError(f"{where}: 'tool_calls' must be a list", "calls_not_list", turn=i)
        calls = []
        for j, c in enumerate(calls_raw, start=1):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(
                c.get("arguments", {}), dict
            ):
                raise SessionError(f"{where}: tool call {j} needs a string 'name' and an object 'arguments'",
                                   "bad_call", turn=i, item=j)
            calls.append(ToolCall(c["name"], dict(c.get("arguments", {}))))
        turns.append(Turn(
            answer=_text(t.get("answer"), "answer", turn=i),  # type: ignore[arg-type]
            user=user,
            tool_results=tuple(results),  # type: ignore[arg-type]
            tool_calls=tuple(calls),
            gap_s=_number(t.get("gap_s"), "gap_s", 0.0 if i == 1 else DEFAULT_GAP_S, turn=i),
        ))
    file_read = data.get("file_read")
    if file_read is not None:
        if not isinstance(file_read, dict):
            raise SessionError("'file_read' must be an object with 'path' and 'content'", "bad_file_read")
        file_read = (_text(file_read.get("path"), "file_read_path"), _text(file_read.get("content"),
                                                                             "file_read_content"))
    return Session(
        name=str(data.get("name") or name),
        title=str(data.get("title") or data.get("name") or name),
        description=str(data.get("description") or ""),
        tools=_tools(data.get("tools"), "tools"),
        system=_text(data.get("system"), "system"),  # type: ignore[arg-type]
        turns=tuple(turns),
        restart_tools=_tools(data.get("restart_tools"), "restart_tools"),
        file_read=file_read,  # type: ignore[arg-type]
    )


def load_session_text(text: str | bytes, name: str = "custom", where: str = "the session") -> Session:
    """Parse a session from JSON text or UTF-8 bytes (an upload); SessionError (one line) for content
    over MAX_SESSION_BYTES, bytes that are not UTF-8, bad JSON or a bad shape."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SESSION_BYTES:
        raise SessionError(f"{where} is larger than {MAX_SESSION_BYTES:,} bytes", "too_big", where=where,
                           limit=MAX_SESSION_BYTES)
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
        choices = ", ".join(example_names())
        raise SessionError(f"unknown example {name!r}; choose one of {choices}", "unknown_example", name=name,
                           choices=choices)
    return load_session_text((ASSETS / f"{name}.json").read_text(encoding="utf-8"), name)
