"""Events to try on a session (tool restart, file read, long pause, unstable JSON): rewrite it before it runs."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvviz.experiments.sessions.schema import DEFAULT_PAUSE_S, MAX_PAUSE_S, Session, SessionError, ToolCall

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


NO_EVENTS = SessionEvents()  # the session as written

EVENT_NAMES = ("restart_tools", "file_read", "long_pause", "unstable_json")


def default_event_turn(session: Session, event: str) -> int:
    """Where an event lands by default: in the middle of the session (never on turn 1)."""
    n = len(session.turns)
    return max(2, min(n, n // 2 + 1)) if n > 1 else 1


def _check_turn(value: int | None, n: int, name: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= n:
        if n > 1:
            raise SessionError(f"{name} must be a turn number in 2..{n}", "bad_turn", name=name, high=n)
        raise SessionError(f"{name} needs a session with at least 2 turns", "needs_two_turns", name=name)


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
        raise SessionError(f"pause_s must be in 0..{MAX_PAUSE_S:,.0f} seconds", "bad_pause", high=MAX_PAUSE_S)
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
