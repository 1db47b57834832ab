"""Request-stream traces for the workload analyzer: JSON Lines, one request a line, in arrival order.

Two line kinds reach the core (prompt/messages lines are tokenized by ``kvviz.analysis.workload`` first):

- Mooncake (FAST'25): ``{"hash_ids": [...], "input_length": n, "timestamp": ms, "output_length": n}``.
  ``hash_ids`` are chained block ids (equal id = same prefix block); the last may cover a partial
  block. Every block may hit; a hit is ``min(run x block_size, input_length)`` tokens.
- ``{"token_ids": [...]}``: hashed into chained full blocks with kvviz's vLLM hashing (default
  algorithm and seed). Only full blocks are cached and the lookup is capped at
  ``(len - 1) // block_size`` blocks (vLLM always recomputes the last prompt token).

Block ids are interned to dense ints ``0..U-1`` (``WorkloadTrace.block_labels`` keeps the originals),
so every later structure is a list indexed by block, linear in distinct blocks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kvviz.errors import CodedError, json_kind
from kvviz.mirror import limits
from kvviz.mirror.hashing import (
    DEFAULT_HASH,
    DEFAULT_SEED,
    hash_block_chain,
    init_none_hash,
)

MOONCAKE_BLOCK_SIZE = 512
MAX_TRACE_BYTES = 256 * 1024 * 1024
MAX_REQUESTS = 2_000_000
MAX_BLOCKS_PER_REQUEST = 1_000_000
MAX_LENGTH = 10**9
MAX_TOKEN_ID = 2**32 - 1
MAX_BLOCK = 1 << 20


ERROR_CODES: tuple[str, ...] = (
    "not_integer", "out_of_range", "bad_timestamp", "negative_timestamp", "not_id_list", "too_many_ids", "bad_id",
    "bad_block_size", "needs_input_length", "repeated_id", "ids_exceed_length", "ids_short_of_length", "no_tokens", "hashed_block_size",
    "out_of_order", "too_many_requests", "too_big", "not_utf8", "invalid_json", "not_object", "empty", "no_kind",
    "several_kinds", "unknown_key", "mixed_kinds", "token_too_big", "needs_tokenizer",
    # raised by kvviz.analysis.workload.load (prompt and messages lines) and the CLI
    "messages_not_list", "message_not_object", "text_part_without_text", "content_not_text", "prompt_not_text",
    "prompt_too_long", "messages_too_long", "template_rejected", "ttl_needs_timestamps",
    # raised by kvviz.analysis.workload.stream (files read line by line, Parquet and Arrow tables)
    "line_not_utf8", "id_too_big", "all_bad", "bad_table",
)
"""Every ``WorkloadError.code``; the words are kvviz_app.workload.text's ``TRACE_ERRORS``."""


class WorkloadError(CodedError):
    """The trace is malformed: an English line naming the line (1-based) and what is wrong, and a code
    from ``ERROR_CODES`` with its params (``line`` among them when a line is to blame)."""


@dataclass(frozen=True, slots=True)
class WorkloadRequest:
    """One request: its blocks (interned ids, prompt order), how many leading blocks the lookup may
    hit (``lookup_blocks``), its prompt length in tokens, and its arrival time in ms (or None)."""

    blocks: tuple[int, ...]
    input_tokens: int
    lookup_blocks: int
    timestamp_ms: float | None = None
    output_tokens: int = 0
    full_blocks: int = 0
    """Blocks whose tokens are all in the prompt (what a vLLM block pool can cache)."""


@dataclass
class WorkloadTrace:
    """A parsed trace: requests in arrival order, the block size, and each interned block's original
    id (Mooncake id or block-hash hex prefix) and its parent block (-1 for a first block)."""

    block_size: int
    requests: list[WorkloadRequest] = field(default_factory=list)
    block_labels: list[str] = field(default_factory=list)
    block_parent: list[int] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)
    _index: dict[Any, int] = field(default_factory=dict, repr=False)
    _columns: Any = field(default=None, repr=False, compare=False)
    """kvviz.analysis.workload.columns' arrays of this trace, built once (``as_columns``)."""

    @property
    def num_requests(self) -> int:
        return len(self.requests)

    @property
    def num_blocks(self) -> int:
        """Distinct blocks in the whole trace."""
        return len(self.block_labels)

    @property
    def has_timestamps(self) -> bool:
        return bool(self.requests) and all(r.timestamp_ms is not None for r in self.requests)

    def intern(self, key: Any, label: str, parent: int) -> int:
        """The dense id of block ``key`` (a new one on first sight)."""
        idx = self._index.get(key)
        if idx is None:
            idx = len(self.block_labels)
            self._index[key] = idx
            self.block_labels.append(label)
            self.block_parent.append(parent)
        return idx


def _int_field(obj: dict[str, Any], key: str, line: int, *, low: int = 0, high: int = MAX_LENGTH) -> int:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int):
        got = json.dumps(value)[:40]
        raise WorkloadError(f"line {line}: {key!r} must be an integer, got {got}", "not_integer",
                            line=line, key=key, got=got)
    if not low <= value <= high:
        raise WorkloadError(f"line {line}: {key!r} must be in {low}..{high:,}, got {value}", "out_of_range",
                            line=line, key=key, low=low, high=high, value=value)
    return value


def _timestamp(obj: dict[str, Any], line: int) -> float | None:
    if "timestamp" not in obj or obj["timestamp"] is None:
        return None
    ts = obj["timestamp"]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts != ts or ts in (float("inf"), float("-inf")):
        got = json.dumps(ts)[:40]
        raise WorkloadError(f"line {line}: 'timestamp' must be a number of milliseconds, got {got}", "bad_timestamp",
                            line=line, got=got)
    if ts < 0:
        raise WorkloadError(f"line {line}: 'timestamp' must be >= 0, got {ts}", "negative_timestamp",
                            line=line, value=ts)
    return float(ts)


def id_list(value: Any, key: str, line: int) -> list[int]:
    if not isinstance(value, list):
        kind = json_kind(value)
        raise WorkloadError(f"line {line}: {key!r} must be a list of integers, got a JSON {kind}", "not_id_list",
                            line=line, key=key, kind=kind)
    if len(value) > MAX_BLOCKS_PER_REQUEST:
        raise WorkloadError(f"line {line}: {key!r} has {len(value):,} entries (at most {MAX_BLOCKS_PER_REQUEST:,})",
                            "too_many_ids", line=line, key=key, count=len(value), limit=MAX_BLOCKS_PER_REQUEST)
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            got = json.dumps(v)[:40]
            raise WorkloadError(f"line {line}: {key!r}[{i}] must be a non-negative integer, got {got}", "bad_id",
                                line=line, key=key, index=i, got=got)
    return value


class TraceBuilder:
    """Adds validated lines to a ``WorkloadTrace``; token_ids lines are hashed here."""

    def __init__(self, block_size: int, hash_name: str = DEFAULT_HASH, seed: str | None = DEFAULT_SEED) -> None:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or not 1 <= block_size <= MAX_BLOCK:
            raise WorkloadError(f"block size must be an integer in 1..{MAX_BLOCK:,}, got {block_size!r}",
                                "bad_block_size", high=MAX_BLOCK, got=repr(block_size))
        self.block_size = block_size
        self.trace = WorkloadTrace(self.block_size)
        self.hash_name = hash_name
        self.none_hash = init_none_hash(hash_name, seed)
        self._last_ts: float | None = None
        self.max_requests = MAX_REQUESTS

    def check_hash_ids(self, obj: dict[str, Any], line: int) -> tuple[list[int], int]:
        """A Mooncake line's ids and input length, validated; WorkloadError naming the line."""
        ids = id_list(obj["hash_ids"], "hash_ids", line)
        if "input_length" not in obj:
            raise WorkloadError(f"line {line}: a 'hash_ids' line needs 'input_length'", "needs_input_length",
                                line=line)
        length = _int_field(obj, "input_length", line)
        if len(set(ids)) != len(ids):
            raise WorkloadError(f"line {line}: 'hash_ids' repeats an id (chained block ids are unique in a request)",
                                "repeated_id", line=line)
        bs = self.block_size
        if len(ids) > -(-length // bs):
            raise WorkloadError(
                f"line {line}: {len(ids)} hash_ids do not cover input_length {length} in blocks of {bs} "
                f"(at most {-(-length // bs)}; is the block size right?)", "ids_exceed_length",
                line=line, count=len(ids), length=length, block_size=bs, most=-(-length // bs))
        if len(ids) < -(-length // bs):
            raise WorkloadError(
                f"line {line}: {len(ids)} hash_ids are too few for input_length {length} in blocks of {bs} "
                f"(need {-(-length // bs)}; is the block size right?)", "ids_short_of_length",
                line=line, count=len(ids), length=length, block_size=bs, need=-(-length // bs))
        return ids, length

    def hash_tokens(self, tokens: list[int], line: int, kind: str) -> list[bytes]:
        """The chained block hashes of a token line (kvviz's vLLM hashing), after its checks."""
        if not tokens:
            raise WorkloadError(f"line {line}: no tokens (an empty prompt)", "no_tokens", line=line)
        try:
            limits.block_size(self.block_size)
        except ValueError as exc:
            raise WorkloadError(f"line {line}: {kind} lines are hashed by kvviz: {exc}", "hashed_block_size",
                                line=line, kind=kind, low=limits.MIN_BLOCK_SIZE, high=limits.MAX_BLOCK_SIZE,
                                value=self.block_size) from None
        return hash_block_chain(tuple(tokens), self.block_size, self.hash_name, self.none_hash)

    def check_meta(self, obj: dict[str, Any], line: int, requests: int) -> tuple[float | None, int]:
        """The line's timestamp (in arrival order) and output length, and room for one more request
        (``requests`` so far); nothing is changed until ``commit_timestamp``."""
        ts = _timestamp(obj, line)
        if ts is not None and self._last_ts is not None and ts < self._last_ts:
            raise WorkloadError(
                f"line {line}: timestamp {ts:g} ms is before the previous line's {self._last_ts:g} ms "
                "(lines must be in arrival order)", "out_of_order", line=line, ts=ts, previous=self._last_ts)
        out = _int_field(obj, "output_length", line) if obj.get("output_length") is not None else 0
        if requests >= self.max_requests:
            raise WorkloadError(f"line {line}: more than {self.max_requests:,} requests", "too_many_requests",
                                line=line, limit=self.max_requests)
        return ts, out

    def commit_timestamp(self, ts: float | None) -> None:
        if ts is not None:
            self._last_ts = ts

    def add_hash_ids(self, obj: dict[str, Any], line: int) -> None:
        ids, length = self.check_hash_ids(obj, line)
        ts, out = self.check_meta(obj, line, len(self.trace.requests))
        trace, parent, blocks = self.trace, -1, []
        for h in ids:
            parent = trace.intern(("m", h), str(h), parent)
            blocks.append(parent)
        self._append(blocks, length, len(blocks), length // self.block_size, "hash_ids", ts, out)

    def add_token_ids(self, tokens: list[int], obj: dict[str, Any], line: int, kind: str = "token_ids") -> None:
        hashes = self.hash_tokens(tokens, line, kind)
        ts, out = self.check_meta(obj, line, len(self.trace.requests))
        trace, parent, blocks = self.trace, -1, []
        for h in hashes:
            parent = trace.intern(h, h.hex()[:12], parent)
            blocks.append(parent)
        lookup = (len(tokens) - 1) // self.block_size
        self._append(blocks, len(tokens), lookup, len(blocks), kind, ts, out)

    def _append(self, blocks: list[int], length: int, lookup: int, full: int, kind: str, ts: float | None,
                out: int) -> None:
        self.commit_timestamp(ts)
        self.trace.requests.append(WorkloadRequest(tuple(blocks), length, lookup, ts, out, full))
        self.trace.kinds.add(kind)


def decode_line(text: str | bytes, number: int) -> dict[str, Any]:
    """One non-blank line (text, or UTF-8 bytes) as a JSON object; WorkloadError naming the line."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WorkloadError(f"line {number}: not UTF-8 text (byte {exc.start})", "line_not_utf8",
                                line=number, byte=exc.start) from None
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply or a number too long"
        raise WorkloadError(f"line {number}: not valid JSON ({msg})", "invalid_json", line=number,
                            detail=msg) from None
    if not isinstance(obj, dict):
        kind = json_kind(obj)
        raise WorkloadError(f"line {number}: expected a JSON object, got a JSON {kind}", "not_object",
                            line=number, kind=kind)
    return obj


KEEP_BAD = 5


@dataclass
class BadLines:
    """Lines skipped as bad: how many, and the first few as ``(file, line, English message)`` with their
    errors (for words in another language)."""

    count: int = 0
    first: list[tuple[str, int, str]] = field(default_factory=list)
    errors: list[WorkloadError] = field(default_factory=list)

    def add(self, where: str, exc: WorkloadError) -> None:
        self.count += 1
        if len(self.first) < KEEP_BAD:
            self.first.append((where, int(exc.params.get("line", 0)), str(exc)))
            self.errors.append(exc)

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "first": [{"file": f, "line": n, "error": e} for f, n, e in self.first]}

    def nothing_usable(self, name_files: bool = False) -> WorkloadError:
        """The error of a trace with no usable line: every line bad (``all_bad``), or none at all."""
        if not self.count:
            return WorkloadError("the trace is empty: expected JSON Lines, one request a line", "empty")
        where, _, first = self.first[0]
        first = f"{where}: {first}" if name_files else first
        exc = WorkloadError(f"no line of the trace is usable: all {self.count:,} lines are bad "
                            f"(the first: {first})", "all_bad", count=self.count, first=first)
        exc.first_error = self.errors[0]  # type: ignore[attr-defined]  # its own words in another language
        return exc


@dataclass
class Progress:
    """How far a read is: ``done`` of ``total`` units (lines of an in-memory trace; bytes of files, or table
    rows), requests read, seconds so far; ``rate`` and ``eta_s`` follow from them."""

    unit: str
    total: int
    done: int = 0
    requests: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        return (self.total - self.done) / self.rate if self.rate > 0 and self.total > self.done else None


def iter_lines(data: bytes | str, tick: Callable[[int, int], None] | None = None, strict: bool = True,
               ) -> Iterator[tuple[int, Any]]:
    """``(line number, object)`` for each non-blank line; WorkloadError naming the first bad line (or, not
    ``strict``, that error yielded in the object's place); ``tick(lines done, lines in all)`` every 512
    lines."""
    if isinstance(data, bytes):
        if len(data) > MAX_TRACE_BYTES:
            raise WorkloadError(f"the trace is {len(data):,} bytes (at most {MAX_TRACE_BYTES:,})", "too_big",
                                size=len(data), limit=MAX_TRACE_BYTES)
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise WorkloadError(f"the trace is not UTF-8 text (byte {exc.start}); expected JSON Lines", "not_utf8",
                                byte=exc.start) from None
    any_line = False
    rows = data.splitlines()
    for number, raw in enumerate(rows, start=1):
        if tick is not None and number % 512 == 0:
            tick(number, len(rows))
        text = raw.strip()
        if not text:
            continue
        any_line = True
        try:
            yield number, decode_line(text, number)
        except WorkloadError as exc:
            if strict:
                raise
            yield number, exc
    if not any_line:
        raise WorkloadError("the trace is empty: expected JSON Lines, one request a line", "empty")
