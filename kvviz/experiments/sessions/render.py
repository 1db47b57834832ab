"""Rendering one request of a session, segment by segment, in the embedded model's ChatML format."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvviz.experiments.sessions.schema import Session, ToolCall, Turn
from kvviz.experiments.sessions.session_events import DEFAULT_RESTART_TOOL, NO_EVENTS, SessionEvents

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


def render_request(session: Session, k: int, events: SessionEvents = NO_EVENTS) -> tuple[list[Segment], Segment]:
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
