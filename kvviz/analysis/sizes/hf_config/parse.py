"""The config.json reader's entry points: bytes, text, a file or a decoded dict in, a ``ParsedConfig``
out. Validates the input once (size, binary, encoding, JSON, object) and picks the family's reader.

Invariant: the result either is a valid shape with a ``ConfigNote`` for every default or fallback used,
or a ``ConfigError`` (a code and its params). Nothing here raises anything else.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvviz.analysis.sizes.hf_config.codes import ConfigError, ConfigNote
from kvviz.analysis.sizes.hf_config.fields import NESTED_KEYS, display_name, family_of, json_kind, str_field
from kvviz.analysis.sizes.hf_config.readers import READERS, read_generic
from kvviz.analysis.sizes.kvsize import KVSizeError, ModelShape, normalize_dtype

MAX_CONFIG_BYTES = 1 << 20
"""Largest config accepted (1 MiB); real config.json files are a few KiB."""

_MAX_DIGITS = 4300  # sys.get_int_max_str_digits() default


@dataclass(frozen=True)
class ParsedConfig:
    """A config.json read as a model shape, with what was assumed along the way."""

    shape: ModelShape
    model_type: str
    """The ``model_type`` found (of the nested text config when there is one); "" if absent."""
    family: str
    """The reader used: a known family name, or ``generic`` for the fallback."""
    notes: tuple[ConfigNote, ...]
    """One note per default, fallback or nesting that affected the result."""
    config_dtype: str | None
    """The weights' dtype the config declares (``torch_dtype`` / ``dtype``), normalised, if any."""


def _too_big(size: int) -> ConfigError:
    return ConfigError("too_big", mib=round(size / (1 << 20), 2))


def parse_config_text(text: str | bytes, name: str = "config.json") -> ParsedConfig:
    """Parse pasted or uploaded config.json content (str or bytes)."""
    if isinstance(text, bytes):
        if len(text) > MAX_CONFIG_BYTES:
            raise _too_big(len(text))
        if b"\x00" in text[:4096]:
            raise ConfigError("binary", name=name)
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError("not_utf8", name=name) from None
    if not isinstance(text, str):
        raise ConfigError("not_text", name=name, got=type(text).__name__)
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_CONFIG_BYTES:
        raise _too_big(size)
    if "\x00" in text:
        raise ConfigError("binary", name=name)
    if not text.strip():
        raise ConfigError("empty", name=name)
    return parse_config(_decode_json(text.removeprefix("\ufeff"), name), name)


def _decode_json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError("invalid_json", name=name, detail=exc.msg, line=exc.lineno, column=exc.colno) from None
    except RecursionError:
        raise ConfigError("too_deep", name=name) from None
    except ValueError:  # json's only other failure: an integer literal over Python's 4,300-digit limit
        raise ConfigError("long_number", name=name, digits=_MAX_DIGITS) from None


def load_config_file(path: str | os.PathLike[str], name: str | None = None) -> ParsedConfig:
    """Read a config.json from disk; files over 1 MiB are refused before they are read."""
    p = Path(path)
    label = name or p.name
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise ConfigError("is_dir", name=label)
        if not p.is_file():
            raise ConfigError("not_file", name=label)
        if size > MAX_CONFIG_BYTES:
            raise _too_big(size)
        with p.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError("no_file", name=label) from None
    except PermissionError:
        raise ConfigError("no_permission", name=label) from None
    except IsADirectoryError:
        raise ConfigError("is_dir", name=label) from None
    except OSError as exc:
        raise ConfigError("unreadable", name=label, cause=exc.strerror or type(exc).__name__) from None
    return parse_config_text(raw, label)


def parse_config(data: Any, name: str = "config.json") -> ParsedConfig:
    """Read an already-decoded config dict."""
    if not isinstance(data, dict):
        raise ConfigError("not_object", name=name, kind=json_kind(data))
    notes: list[ConfigNote] = []
    top_type = str_field(data, "model_type")
    cfg = data
    for key in NESTED_KEYS:
        inner = data.get(key)
        if isinstance(inner, dict) and inner:
            cfg = inner
            notes.append(ConfigNote("nested_config", {"key": key, "model_type": top_type}))
            break
    model_type = str_field(cfg, "model_type") or top_type
    family = family_of(model_type)
    display = display_name(data, cfg, model_type, name)
    reader = READERS.get(family)
    if reader is None:
        if model_type:
            notes.append(ConfigNote("unknown_model_type", {"model_type": model_type}))
        else:
            notes.append(ConfigNote("missing_model_type"))
        family = "generic"
        reader = read_generic
    try:
        shape = reader(cfg, family, display, notes)
    except ConfigError:
        raise
    except KVSizeError as exc:
        raise ConfigError.wrap(exc, "bad_shape", source=name) from None
    shape = replace(shape, notes=tuple(notes))
    return ParsedConfig(shape=shape, model_type=model_type, family=family, notes=tuple(notes),
                        config_dtype=_declared_dtype(data, cfg))


def _declared_dtype(top: dict[str, Any], cfg: dict[str, Any]) -> str | None:
    for key in ("torch_dtype", "dtype"):
        raw = cfg.get(key, top.get(key))
        if isinstance(raw, str):
            try:
                return normalize_dtype(raw)
            except KVSizeError:
                return None
    return None
