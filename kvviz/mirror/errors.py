"""``CodedError``: a bad-input error that says what is wrong twice: one English line (``str()``, for the
CLI and logs) and a ``code`` with ``params`` that a view words in the session's language (kvviz.text).

Invariant: ``params`` hold only numbers and strings (line numbers, keys, limits, names), so any language
can word them; ``code`` is "" only for an error that has its English line alone.
"""

from __future__ import annotations

from typing import Any


def json_kind(value: Any) -> str:
    """The JSON name of a decoded value's type: object, array, string, number, boolean or null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", tuple: "array", str: "string"}.get(type(value), "number")


class CodedError(ValueError):
    """A one-line English message plus ``code`` and ``params`` for the view."""

    def __init__(self, message: str, code: str = "", **params: Any) -> None:
        super().__init__(message)
        self.code = code
        self.params = params
