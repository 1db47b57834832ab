"""``CodedError``: a bad-input error that says what is wrong twice: one English line (``str()``, for the
CLI and logs) and a ``code`` with ``params`` that a view words in the session's language (kvviz_app.text).

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


class InputError(CodedError):
    """Bad user input (empty text, bad token ids, absurd limits, bad device or dtype names, a bad setting): an
    English line, and a code the app words where it has one."""


class CodedLine(str):
    """A notice as one English line (the str itself: CLI, logs, JSON) plus ``code`` and ``params`` for the view."""

    code: str
    params: dict[str, Any]

    def __new__(cls, text: str, code: str = "", **params: Any) -> CodedLine:
        obj = super().__new__(cls, text)
        obj.code, obj.params = code, params
        return obj

    def __reduce__(self) -> tuple:  # pickled by st.cache_data and copy: keep the code
        return (_coded_line, (str(self), self.code, self.params))


def _coded_line(text: str, code: str, params: dict[str, Any]) -> CodedLine:
    return CodedLine(text, code, **params)
