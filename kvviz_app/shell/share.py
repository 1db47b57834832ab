"""Shareable page state: typed URL query parameters, read with validation and written back.

A page declares a schema, ``{param name: Param}``; :func:`read` turns raw query values into typed values
(anything malformed, out of range, unknown or repeated with different values is rejected by name, never
raised), :func:`write` turns values back into the short strings a link carries (defaults are left out).
Also the LAN address a workshop server is reachable at and its QR code. Pure Python, no UI.
"""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

#: Parameters every page carries along in its links: presenter mode, the guided path and the language.
GLOBAL_PARAMS = ("present", "path", "lang")
#: Longest raw value any parameter accepts (a prompt); anything longer is rejected before parsing.
MAX_VALUE_CHARS = 8000
_INT_RE = re.compile(r"[+-]?\d{1,15}")
_FLOAT_RE = re.compile(r"[+-]?(\d{1,15}(\.\d{0,12})?|\.\d{1,12})([eE][+-]?\d{1,3})?")


def dump_str(value: Any) -> str:
    """The default dumper: the value's text; an unset value (None) has no link form (never "None")."""
    if value is None:
        raise TypeError("unset")
    return str(value)


@dataclass(frozen=True)
class Param:
    """One query parameter: the session_state ``key`` it fills, its parser (str -> value, raises
    ValueError/KeyError/TypeError on bad input), its default (never written to a link) and its dumper."""

    key: str
    parse: Callable[[str], Any]
    default: Any = None
    dump: Callable[[Any], str] = field(default=dump_str)


# ----------------------------------------------------------------------------- parsers


def integer(lo: int, hi: int) -> Callable[[str], int]:
    """Parser for a whole number in [lo, hi] (digits only: no floats, no exponent, at most 15 digits)."""

    def parse(raw: str) -> int:
        text = raw.strip()
        if not _INT_RE.fullmatch(text):
            raise ValueError(raw)
        value = int(text)
        if not lo <= value <= hi:
            raise ValueError(raw)
        return value

    return parse


def number(lo: float, hi: float) -> Callable[[str], float]:
    """Parser for a finite decimal number in [lo, hi] (no nan/inf, no hex)."""

    def parse(raw: str) -> float:
        text = raw.strip()
        if not _FLOAT_RE.fullmatch(text):
            raise ValueError(raw)
        value = float(text)
        if not math.isfinite(value) or not lo <= value <= hi:
            raise ValueError(raw)
        return value

    return parse


def choice(options: Sequence[Any]) -> Callable[[str], Any]:
    """Parser for one of ``options``, matched by its string form (so ints and floats work too)."""
    by_text = {str(o): o for o in options}

    def parse(raw: str) -> Any:
        return by_text[raw.strip()]

    return parse


def coded(codes: Mapping[str, Any]) -> tuple[Callable[[str], Any], Callable[[Any], str]]:
    """(parser, dumper) for a value shown as a label but carried in links as a short code."""
    back = {v: k for k, v in codes.items()}

    def parse(raw: str) -> Any:
        return codes[raw.strip()]

    def dump(value: Any) -> str:
        return back[value]

    return parse, dump


def text(max_chars: int) -> Callable[[str], str]:
    """Parser for free text up to ``max_chars`` characters, without NUL or other C0 controls except
    tab and newline (text widgets show it literally: markup or script in it stays text)."""

    def parse(raw: str) -> str:
        if len(raw) > max_chars or any(ord(c) < 32 and c not in "\t\n\r" for c in raw):
            raise ValueError("text")
        return raw.replace("\r\n", "\n")

    return parse


class TooLong(ValueError):
    """A value too long for a link (it stays out of the URL; the page says so); ``limit`` in characters."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"longer than {limit} characters")
        self.limit = limit


def dump_text(max_chars: int) -> Callable[[Any], str]:
    """Dumper for free text: the text itself, or :class:`TooLong` past ``max_chars`` characters (a link
    never carries more than its parser reads back)."""

    def dump(value: Any) -> str:
        if value is None:
            raise TypeError("unset")
        if len(str(value)) > max_chars:
            raise TooLong(max_chars)
        return str(value)

    return dump


def subset(options: Sequence[str]) -> tuple[Callable[[str], list[str]], Callable[[Any], str]]:
    """(parser, dumper) for a choice of several ``options`` (a multi-select), carried as "a,b" in the
    options' order; "" is the empty choice. An unknown or repeated name is rejected."""
    order = {o: i for i, o in enumerate(options)}

    def parse(raw: str) -> list[str]:
        names = [n.strip() for n in raw.split(",")] if raw.strip() else []
        if len(set(names)) != len(names) or any(n not in order for n in names):
            raise ValueError(raw)
        return sorted(names, key=order.__getitem__)

    def dump(value: Any) -> str:
        return ",".join(sorted((str(v) for v in value or ()), key=lambda n: order.get(n, len(order))))

    return parse, dump


def flag(raw: str) -> bool:
    """Parser for an on/off switch: 1/0, true/false, on/off, yes/no."""
    value = raw.strip().lower()
    if value in ("1", "true", "on", "yes"):
        return True
    if value in ("0", "false", "off", "no"):
        return False
    raise ValueError(raw)


def dump_flag(value: Any) -> str:
    return "1" if value else "0"


def int_pair(lo: int, hi: int) -> Callable[[str], tuple[int, int]]:
    """Parser for an ordered range "a-b" of whole numbers in [lo, hi] (a range slider's value)."""
    one = integer(lo, hi)

    def parse(raw: str) -> tuple[int, int]:
        left, sep, right = raw.partition("-")
        if not sep:
            raise ValueError(raw)
        a, b = one(left), one(right)
        if a > b:
            raise ValueError(raw)
        return (a, b)

    return parse


def dump_pair(value: Any) -> str:
    return f"{int(value[0])}-{int(value[1])}"


def dump_number(value: Any) -> str:
    """A number as its shortest text: 40.0 -> 40, 0.5 -> 0.5."""
    as_float = float(value)
    return str(int(as_float)) if as_float.is_integer() else repr(as_float)


# ----------------------------------------------------------------------------- read and write


def read(schema: Mapping[str, Param], raw: Mapping[str, Sequence[str]]) -> tuple[dict[str, Any], list[str]]:
    """(typed values by param name, names rejected) for the schema's params present in ``raw``.

    A repeated param whose values differ is rejected; an over-long value is rejected before parsing.
    Params not in the schema are ignored (they belong to other pages or are global)."""
    values: dict[str, Any] = {}
    rejected: list[str] = []
    for name, param in schema.items():
        given = list(raw.get(name) or [])
        if not given:
            continue
        if len(set(given)) > 1 or len(given[0]) > MAX_VALUE_CHARS:
            rejected.append(name)
            continue
        try:
            values[name] = param.parse(given[0])
        except (ValueError, KeyError, TypeError, OverflowError, IndexError):
            rejected.append(name)
    return values, rejected


def write(schema: Mapping[str, Param], values: Mapping[str, Any]) -> dict[str, str]:
    """The link form of ``values``: {param name: text} for every value that differs from its default."""
    out: dict[str, str] = {}
    for name, param in schema.items():
        if name not in values:
            continue
        value = values[name]
        if param.default is not None and value == param.default:
            continue
        try:
            out[name] = param.dump(value)
        except (KeyError, TypeError, ValueError):
            continue  # a value the link cannot carry (e.g. an uploaded file's label) stays out
    return out


def too_long(schema: Mapping[str, Param], values: Mapping[str, Any]) -> dict[str, int]:
    """{param name: its limit in characters} for the values too long for a link."""
    out: dict[str, int] = {}
    for name, param in schema.items():
        value = values.get(name)
        if value is None or (param.default is not None and value == param.default):
            continue
        try:
            param.dump(value)
        except TooLong as exc:
            out[name] = exc.limit
        except (KeyError, TypeError, ValueError):
            continue
    return out


def link(base_url: str, params: Mapping[str, str]) -> str:
    """``base_url`` (query and fragment dropped) with ``params`` as its query string."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(dict(params)), ""))


# ----------------------------------------------------------------------------- joining from the LAN

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"}


def lan_address() -> str:
    """This machine's address on the local network (the source address of the default route, found by
    connecting a UDP socket, which sends nothing), or ``localhost`` when there is no network."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))  # any routable address: no packet leaves the machine
        address = probe.getsockname()[0]
    except OSError:
        return "localhost"
    finally:
        probe.close()
    return "localhost" if address.startswith("127.") or address == "0.0.0.0" else address


def is_local_host(host: str) -> bool:
    """True for the loopback names a link cannot hand to another machine."""
    return host.lower() in _LOCAL_HOSTS or host.startswith("127.")


def public_url(url: str, lan: str) -> str:
    """``url`` with a loopback host replaced by the LAN address (so a link copied on the presenter's
    own browser works on an attendee's laptop); other hosts are kept."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not is_local_host(host) or is_local_host(lan):
        return url
    netloc = lan + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def qr_svg(data: str, scale: int = 6) -> str:
    """An SVG QR code (error correction M, quiet zone kept) for ``data``, rendered locally by segno."""
    import io

    import segno

    buffer = io.BytesIO()
    segno.make(data, error="m", micro=False).save(buffer, kind="svg", scale=scale, border=4,
                                                  xmldecl=False, svgns=True)
    return buffer.getvalue().decode("utf-8")
