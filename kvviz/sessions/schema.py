"""A session as data: turns, tool calls, limits; parsing and validating session files (the edge)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvviz.core.blank import is_blank
from kvviz.core.jsonio import parse_json, read_limited

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
