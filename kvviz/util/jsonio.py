"""Reading user-supplied JSON (trace, scenario and session files, uploads, stdin) with one-line errors.

Every failure raises the caller's error class (a ValueError subclass) with a single line that names
the source: a directory, a missing or unreadable file, a file over the size limit, bytes that are not
UTF-8, invalid JSON, or JSON nested too deeply to decode. A UTF-8 byte-order mark is accepted. When the
class is a ``CodedError`` it also carries one of ``ERROR_CODES`` and its params (words:
kvviz_app.shell.text_jsonio); ``what`` (e.g. "trace file") stays an English param.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from kvviz.errors import CodedError

_MAX_DIGITS = 4300  # sys.get_int_max_str_digits() default

ERROR_CODES: tuple[str, ...] = (
    "json_is_dir", "json_file_too_big", "json_no_file", "json_unreadable", "json_grew", "json_stream_too_big",
    "json_not_utf8", "json_invalid", "json_too_deep", "json_long_number",
)
"""Every code this module gives a ``CodedError``; ``path`` / ``where`` params name the source."""


def _error(error: type[Exception], message: str, code: str, **params: Any) -> Exception:
    """``error(message)``, with ``code`` and ``params`` when it is a ``CodedError``."""
    if isinstance(error, type) and issubclass(error, CodedError):
        return error(message, code, **params)
    return error(message)


def read_limited(path: str | os.PathLike[str], max_bytes: int, what: str,
                 error: type[Exception] = ValueError) -> bytes:
    """The bytes of file ``path`` (a ``what``, e.g. "trace file"); ``error`` if it is not a readable
    regular file or is larger than ``max_bytes`` (checked before reading)."""
    p = Path(path)
    try:
        if p.is_dir():
            raise _error(error, f"{p} is a directory, not a {what}", "json_is_dir", path=str(p), what=what)
        size = p.stat().st_size
        if size > max_bytes:
            raise _error(error, f"{p}: {size:,} bytes is too large for a {what} (at most {max_bytes:,})",
                         "json_file_too_big", path=str(p), size=size, what=what, limit=max_bytes)
        with p.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise _error(error, f"cannot read {p}: no such file", "json_no_file", path=str(p)) from None
    except OSError as exc:
        cause = exc.strerror or type(exc).__name__
        raise _error(error, f"cannot read {p}: {cause}", "json_unreadable", path=str(p), cause=cause) from None
    if len(raw) > max_bytes:  # grew while we read it, or a special file that reports size 0
        raise _error(error, f"{p} is too large for a {what} (at most {max_bytes:,} bytes)", "json_grew",
                     path=str(p), what=what, limit=max_bytes)
    return raw


def read_stream_limited(stream: IO[Any], max_bytes: int, what: str, where: str = "stdin",
                        error: type[Exception] = ValueError) -> bytes | str:
    """At most ``max_bytes`` from a stream such as stdin (its binary buffer when it has one, so that
    non-UTF-8 input is reported, not raised while reading); ``error`` if there is more."""
    raw = getattr(stream, "buffer", stream).read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise _error(error, f"{where} is too large for a {what} (at most {max_bytes:,} bytes)",
                     "json_stream_too_big", where=where, what=what, limit=max_bytes)
    return raw


def parse_json(raw: bytes | str, where: str, error: type[Exception] = ValueError) -> Any:
    """Decode JSON given as bytes (UTF-8, optional BOM) or text; ``where`` names the source in errors."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise _error(error, f"{where} is not UTF-8 text (byte {exc.start})", "json_not_utf8", where=where,
                         byte=exc.start) from None
    if raw.startswith("\ufeff"):
        raw = raw[1:]
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _error(error, f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                     "json_invalid", where=where, detail=exc.msg, line=exc.lineno, column=exc.colno) from None
    except RecursionError:
        raise _error(error, f"{where} is nested too deeply", "json_too_deep", where=where) from None
    except ValueError:  # json's only other failure: an integer literal over Python's 4,300-digit limit
        raise _error(error, f"{where} holds a number too long to read (over {_MAX_DIGITS:,} digits)",
                     "json_long_number", where=where, digits=_MAX_DIGITS) from None
