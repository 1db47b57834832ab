"""Words for the errors of reading a user's JSON file, upload or stdin (kvviz.util.jsonio codes); the
trace, scenario and session readers' own words fall back to these (the English words are the CLI's line)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvviz_app.shell.i18n.texts import Texts

# kvviz.util.jsonio.ERROR_CODES. {what} is the reader's English name of the source ("trace file").
JSON_ERRORS = {
    "json_is_dir": "{path} is a directory, not a {what}",
    "json_file_too_big": "{path}: {size:,} bytes is too large for a {what} (at most {limit:,})",
    "json_no_file": "cannot read {path}: no such file",
    "json_unreadable": "cannot read {path}: {cause}",
    "json_grew": "{path} is too large for a {what} (at most {limit:,} bytes)",
    "json_stream_too_big": "{where} is too large for a {what} (at most {limit:,} bytes)",
    "json_not_utf8": "{where} is not UTF-8 text (byte {byte})",
    "json_invalid": "{where} is not valid JSON: {detail} at line {line}, column {column}",
    "json_too_deep": "{where} is nested too deeply",
    "json_long_number": "{where} holds a number too long to read (over {digits:,} digits)",
}

# Python's json decoder's reasons (JSONDecodeError.msg: the {detail} above and in the readers' words), each
# matched as the start of the reason; English keeps the decoder's words (the CLI's line), another language
# has them translated; any other detail is shown as it is.
JSON_DETAILS = (
    "Expecting value",
    "Expecting property name enclosed in double quotes",
    "Expecting ':' delimiter",
    "Expecting ',' delimiter",
    "Unterminated string starting at",
    "Invalid control character at",
    "Invalid \\uXXXX escape",
    "Invalid \\escape",
    "Extra data",
    "Illegal trailing comma before end of object",
    "Illegal trailing comma before end of array",
    "nested too deeply or a number too long",
)

# The readers' {what} (kvviz.util.jsonio callers), as the view names it.
SOURCE_NAMES = {"trace file": "trace file", "scenario file": "scenario file", "session file": "session file",
                "trace": "trace", "scenario": "scenario"}


def json_detail(t: Texts, detail: Any) -> str:
    """A JSON decoder's reason in the view's language (known reasons by their start; others as they are)."""
    text = str(detail)
    for i, start in enumerate(vars(t.module)["JSON_DETAILS"]):
        if text.startswith(start):
            return t.JSON_DETAILS[i] + text[len(start):]
    return text


def json_error(t: Texts, exc: Exception) -> str:
    """An error with a kvviz.util.jsonio code as one line in the view's language (its own line otherwise)."""
    code = getattr(exc, "code", "")
    params: dict[str, Any] = dict(getattr(exc, "params", {}) or {})
    if code not in t.JSON_ERRORS:
        return str(exc)
    if "what" in params:
        params["what"] = t.SOURCE_NAMES.get(params["what"], params["what"])
    if "detail" in params:
        params["detail"] = json_detail(t, params["detail"])
    try:
        return t.JSON_ERRORS[code].format(**params)
    except (KeyError, IndexError, ValueError):
        return str(exc)


def coded_words(t: Texts, exc: Exception, table: Mapping[str, str],
                adjust: Callable[[str, dict[str, Any]], str] | None = None) -> str:
    """A reader's coded error as one line in the view's language: a JSON-reading code goes to
    :func:`json_error`; a code in ``table`` is filled from its params (``adjust(code, params)`` may
    rewrite them and returns a prefix); anything else, or a missing param, is the exception's own line."""
    code = getattr(exc, "code", "")
    if code.startswith("json_"):  # reading the file or upload failed (kvviz.util.jsonio)
        return t.json_error(exc)
    if code not in table:
        return str(exc)
    params: dict[str, Any] = dict(getattr(exc, "params", {}) or {})
    if "detail" in params:
        params["detail"] = json_detail(t, params["detail"])
    try:
        prefix = adjust(code, params) if adjust is not None else ""
        return prefix + table[code].format(**params)
    except (KeyError, IndexError, ValueError):
        return str(exc)
