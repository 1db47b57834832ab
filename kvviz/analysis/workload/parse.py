"""Reading a JSON Lines trace: each line's kind, routed to a ``TraceBuilder`` by ``LineReader``, and ``parse_trace``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kvviz.analysis.workload.trace import (
    MAX_TOKEN_ID,
    MOONCAKE_BLOCK_SIZE,
    BadLines,
    Progress,
    TraceBuilder,
    WorkloadError,
    WorkloadTrace,
    id_list,
    iter_lines,
)
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED

LINE_KINDS = ("hash_ids", "token_ids", "prompt", "messages")
_OPTIONAL = {"timestamp", "output_length", "input_length", "id", "request_id", "session_id", "model"}


def line_kind(obj: dict[str, Any], line: int) -> str:
    """Which of ``LINE_KINDS`` the line is; WorkloadError when none or several."""
    kinds = [k for k in LINE_KINDS if k in obj]
    valid = ", ".join(LINE_KINDS)
    if not kinds:
        raise WorkloadError(f"line {line}: give exactly one of {valid} (found none)", "no_kind",
                            line=line, valid=valid)
    if len(kinds) > 1:
        found = ", ".join(kinds)
        raise WorkloadError(f"line {line}: give exactly one of {valid} (found {found})", "several_kinds",
                            line=line, valid=valid, found=found)
    unknown = set(obj) - set(LINE_KINDS) - _OPTIONAL
    if unknown:
        key = sorted(unknown)[0]
        raise WorkloadError(f"line {line}: unknown key {key!r}", "unknown_key", line=line, key=key)
    return kinds[0]


Encoder = Callable[[str, Any, int], list[int]]
"""Turns a ``prompt`` or ``messages`` value (kind, value, line number) into token ids."""


class LineReader:
    """Routes each line to a builder made at the first line (``make(block_size)``): the block size defaults
    to 512 when that line is a Mooncake line, 16 otherwise; Mooncake lines cannot be mixed with token lines
    (their blocks could never match); ``prompt``/``messages`` lines need ``encode``."""

    def __init__(self, make: Callable[[int], TraceBuilder], block_size: int | None = None,
                 encode: Encoder | None = None) -> None:
        self.make, self.block_size, self.encode = make, block_size, encode
        self.builder: TraceBuilder | None = None
        self.first = ""

    def add(self, number: int, obj: dict[str, Any]) -> None:
        kind = line_kind(obj, number)
        if self.builder is None:
            size = self.block_size if self.block_size is not None else (
                MOONCAKE_BLOCK_SIZE if kind == "hash_ids" else 16)
            self.builder = self.make(size)
            self.first = kind
        first, builder = self.first, self.builder
        if (kind == "hash_ids") != (first == "hash_ids"):
            raise WorkloadError(f"line {number}: a {kind!r} line in a trace that began with {first!r} lines "
                                "(Mooncake hash_ids cannot be mixed with token lines)", "mixed_kinds",
                                line=number, kind=kind, first=first)
        if kind == "hash_ids":
            builder.add_hash_ids(obj, number)
            return
        if kind == "token_ids":
            tokens = id_list(obj["token_ids"], "token_ids", number)
            if any(t > MAX_TOKEN_ID for t in tokens):
                raise WorkloadError(f"line {number}: a token id is over {MAX_TOKEN_ID:,}", "token_too_big",
                                    line=number, limit=MAX_TOKEN_ID)
        elif self.encode is None:
            raise WorkloadError(f"line {number}: a {kind!r} line needs the model's tokenizer", "needs_tokenizer",
                                line=number, kind=kind)
        else:
            tokens = self.encode(kind, obj[kind], number)
        builder.add_token_ids(tokens, obj, number, kind)


def parse_trace(data: bytes | str, block_size: int | None = None, encode: Encoder | None = None,
                hash_name: str = DEFAULT_HASH, seed: str | None = DEFAULT_SEED,
                progress: Callable[[Progress], None] | None = None, every_s: float = 0.25,
                bad: BadLines | None = None) -> WorkloadTrace:
    """Parse a JSONL trace held in memory (see ``LineReader`` for the block size and line kinds); the first
    bad line is the error, or with ``bad`` each bad line is counted there and skipped (a trace with no
    usable line is still an error). ``progress`` gets the lines read, requests, rate and ETA at most every
    ``every_s`` seconds while it reads."""
    reader = LineReader(lambda size: TraceBuilder(size, hash_name, seed), block_size, encode)
    state = Progress("lines", 0)
    start = last = time.perf_counter()

    def tick(done: int, total: int) -> None:
        nonlocal last
        now = time.perf_counter()
        if progress is not None and now - last >= every_s:
            last = now
            state.done, state.total, state.seconds = done, total, now - start
            state.requests = reader.builder.trace.num_requests if reader.builder is not None else 0
            progress(state)

    lines = iter_lines(data, tick if progress is not None else None, strict=bad is None)
    for number, obj in lines:
        if isinstance(obj, WorkloadError):
            bad.add("", obj)  # type: ignore[union-attr]
            continue
        try:
            reader.add(number, obj)
        except WorkloadError as exc:
            if bad is None:
                raise
            bad.add("", exc)
    if reader.builder is None or not reader.builder.trace.num_requests:
        raise (bad or BadLines()).nothing_usable()
    return reader.builder.trace
