"""Anonymised labels of the room: a block's origin, an age, the salt a view illustrates."""

from __future__ import annotations

from kvviz.security.room_records import YOU
from kvviz.text import security as T


def age_label(age_s: float) -> str:
    """``12 s ago``, ``3 min ago``, ``2 h ago``."""
    age = max(0.0, age_s)
    if age < 1:
        return T.AGE_NOW
    if age < 60:
        return T.AGE_S.format(n=int(age))
    if age < 3600:
        return T.AGE_MIN.format(n=int(age // 60))
    return T.AGE_H.format(n=int(age // 3600))


DEMO_SALT_PREFIX = "private:"


def salt_for_view(session_id: str, cache_salt: str | None) -> tuple[str, bool]:
    """The salt the "why the salt isolates" view hashes a prompt with: the session's own ``cache_salt``, or,
    when its salt is off, an illustrative private salt derived from ``session_id`` (never sent to the room).
    Returns ``(salt, illustrative)``."""
    if cache_salt is not None:
        return cache_salt, False
    return DEMO_SALT_PREFIX + session_id[:4], True


def origin_label(computed_by: str | None, age_s: float | None) -> str:
    """Anonymised origin of a block: ``another session, 12 s ago`` / ``you, 3 s ago``."""
    if computed_by is None:
        return ""
    who = T.WHO_YOU if computed_by == YOU else T.WHO_OTHER
    return who if age_s is None else f"{who}, {age_label(age_s)}"
