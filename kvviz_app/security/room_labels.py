"""Anonymised labels of the room, in the session's language: a block's origin and its age."""

from __future__ import annotations

from kvviz.experiments.room.records import YOU
from kvviz_app.shell.i18n import texts

T = texts("security")


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


def origin_label(computed_by: str | None, age_s: float | None) -> str:
    """Anonymised origin of a block: ``another session, 12 s ago`` / ``you, 3 s ago``."""
    if computed_by is None:
        return ""
    who = T.WHO_YOU if computed_by == YOU else T.WHO_OTHER
    return who if age_s is None else f"{who}, {age_label(age_s)}"
