"""Read a trace of any size into columns, a line at a time: JSON Lines (plain, ``.gz``, ``.zst``), Parquet
or Arrow tables with the JSONL fields as columns, or a directory of such files (read in name order).

Nothing holds the whole file: lines are decoded one by one, validated by kvviz.analysis.workload.trace's checks
(the same words as the in-memory reader), and appended to compact arrays (stdlib ``array``). Mooncake ids
are interned at the end with numpy, in first-seen order, so the columns equal ``from_trace(parse_trace(..))``.
With ``skip_bad`` a bad line is counted and skipped (the first few kept with their line numbers); a trace
with no usable line is an error. Progress (bytes or rows read, rate, ETA) goes to a callback. Parquet and
Arrow tables are read by kvviz.analysis.workload.tables into the same builders.
"""

from __future__ import annotations

import gzip
import io
import time
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from kvviz.analysis.workload.columns import TraceColumns
from kvviz.analysis.workload.parse import Encoder, LineReader
from kvviz.analysis.workload.sample import SampledProfile, Sampler
from kvviz.analysis.workload.tables import (
    MAX_ID,
    MIN_JSONL_BYTES_PER_ACCESS,
    TABLE_BATCH_ROWS,
    TABLE_SUFFIXES,
    parquet_accesses,
    read_table,
    table_rows,
)
from kvviz.analysis.workload.trace import BadLines, Progress, TraceBuilder, WorkloadError, decode_line
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED

JSONL_SUFFIXES = (".jsonl", ".json", ".txt", ".ndjson")


class ColumnsBuilder(TraceBuilder):
    """TraceBuilder's checks, storing into growable arrays instead of one object per request."""

    def __init__(self, block_size: int, hash_name: str = DEFAULT_HASH, seed: str | None = DEFAULT_SEED) -> None:
        super().__init__(block_size, hash_name, seed)
        self.max_requests = 2**40
        self.raw = array("q")  # Mooncake ids as given, interned in finish()
        self.dense = array("i")  # hashed token blocks, interned as they come
        self.offsets = array("q", [0])
        self.cols = {k: array("q") for k in ("input_tokens", "lookup_blocks", "full_blocks", "output_tokens")}
        self.stamps = array("d")
        self.kinds: set[str] = set()
        self._index: dict[bytes, int] = {}
        self._labels: list[str] = []
        self._parent = array("i")

    @property
    def num_requests(self) -> int:
        return len(self.stamps)

    def add_hash_ids(self, obj: dict[str, Any], line: int) -> None:
        ids, length = self.check_hash_ids(obj, line)
        if any(v > MAX_ID for v in ids):
            raise WorkloadError(f"line {line}: a hash id is over {MAX_ID:,}", "id_too_big", line=line, limit=MAX_ID)
        ts, out = self.check_meta(obj, line, self.num_requests)
        self.raw.extend(array("q", ids))
        self._request(len(self.raw), length, len(ids), length // self.block_size, out, ts, "hash_ids")

    def add_token_ids(self, tokens: list[int], obj: dict[str, Any], line: int, kind: str = "token_ids") -> None:
        hashes = self.hash_tokens(tokens, line, kind)
        ts, out = self.check_meta(obj, line, self.num_requests)
        parent = -1
        for h in hashes:
            idx = self._index.get(h)
            if idx is None:
                idx = self._index[h] = len(self._labels)
                self._labels.append(h.hex()[:12])
                self._parent.append(parent)
            self.dense.append(idx)
            parent = idx
        lookup = (len(tokens) - 1) // self.block_size
        self._request(len(self.dense), len(tokens), lookup, len(hashes), out, ts, kind)

    def _request(self, end: int, length: int, lookup: int, full: int, out: int, ts: float | None,
                 kind: str) -> None:
        self.commit_timestamp(ts)
        self.offsets.append(end)
        for key, value in (("input_tokens", length), ("lookup_blocks", lookup), ("full_blocks", full),
                           ("output_tokens", out)):
            self.cols[key].append(value)
        self.stamps.append(float("nan") if ts is None else ts)
        self.kinds.add(kind)

    def add_hash_rows(self, values: np.ndarray, counts: np.ndarray, lengths: np.ndarray, outputs: np.ndarray,
                      stamps: np.ndarray) -> None:
        """Append Mooncake rows already checked by ``hash_table_bad`` (ids back to back, ids per row, input
        and output lengths, timestamps with NaN for none): what ``add_hash_ids`` does a row at a time."""
        if not len(counts):
            return
        self.raw.frombytes(np.ascontiguousarray(values, np.int64).tobytes())
        ends = len(self.raw) - int(counts.sum()) + np.cumsum(counts, dtype=np.int64)
        self.offsets.frombytes(ends.tobytes())
        for key, col in (("input_tokens", lengths), ("lookup_blocks", counts),
                         ("full_blocks", lengths // self.block_size), ("output_tokens", outputs)):
            self.cols[key].frombytes(np.ascontiguousarray(col, np.int64).tobytes())
        self.stamps.frombytes(np.ascontiguousarray(stamps, np.float64).tobytes())
        known = stamps[~np.isnan(stamps)]
        if len(known):
            self.commit_timestamp(float(known[-1]))
        self.kinds.add("hash_ids")

    def finish(self) -> TraceColumns:
        if "hash_ids" in self.kinds:
            blocks, parent, labels = intern_first_seen(np.frombuffer(self.raw, np.int64),
                                                       np.frombuffer(self.offsets, np.int64))
        else:
            blocks = np.frombuffer(self.dense, np.int32).copy()
            parent, labels = np.frombuffer(self._parent, np.int32).copy(), self._labels
        cols = {k: np.frombuffer(v, np.int64).copy() for k, v in self.cols.items()}
        return TraceColumns(block_size=self.block_size, blocks=blocks,
                            offsets=np.frombuffer(self.offsets, np.int64).copy(),
                            timestamps=np.frombuffer(self.stamps, np.float64).copy(), parent=parent,
                            labels=labels, kinds=set(self.kinds), **cols)


class PieceBuilder(ColumnsBuilder):
    """ColumnsBuilder's checks, handing its requests on in pieces (``drain``) with each access's sampling key
    (the Mooncake id, or a token block's 48-bit label), nothing interned: it holds one piece at a time."""

    def __init__(self, block_size: int, hash_name: str = DEFAULT_HASH, seed: str | None = DEFAULT_SEED) -> None:
        super().__init__(block_size, hash_name, seed)
        self.drained = 0

    @property
    def num_requests(self) -> int:
        return self.drained + len(self.stamps)

    @property
    def buffered(self) -> int:
        """Accesses held since the last ``drain``."""
        return len(self.raw)

    def add_token_ids(self, tokens: list[int], obj: dict[str, Any], line: int, kind: str = "token_ids") -> None:
        hashes = self.hash_tokens(tokens, line, kind)
        ts, out = self.check_meta(obj, line, self.num_requests)
        self.raw.extend(int.from_bytes(h[:6], "big") for h in hashes)  # == int(label, 16), label = hex[:12]
        self._request(len(self.raw), len(tokens), (len(tokens) - 1) // self.block_size, len(hashes), out, ts, kind)

    def drain(self) -> tuple[TraceColumns, np.ndarray] | None:
        """The requests added since the last drain as columns (block i = access i) and their keys; then empty."""
        if not len(self.stamps):
            return None
        keys = np.frombuffer(self.raw, np.int64)
        cols = {k: np.frombuffer(v, np.int64) for k, v in self.cols.items()}
        piece = TraceColumns(block_size=self.block_size, blocks=np.arange(len(keys), dtype=np.int64),
                             offsets=np.frombuffer(self.offsets, np.int64),
                             timestamps=np.frombuffer(self.stamps, np.float64), parent=np.zeros(0, np.int32),
                             labels=keys, kinds=set(self.kinds), **cols)
        self.drained += len(self.stamps)
        self.raw, self.offsets, self.stamps = array("q"), array("q", [0]), array("d")
        self.cols = {k: array("q") for k in self.cols}
        return piece, keys


def intern_first_seen(raw: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense ids 0..U-1 in first-seen order for ``raw`` ids (int64, requests back to back at ``offsets``),
    each block's parent (the block before it in its first request, -1 first) and its original id."""
    if len(raw) == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int64)
    uniq, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    dense = rank[inverse.ravel()]
    before = np.empty(len(dense), np.int32)
    before[0] = -1
    before[1:] = dense[:-1]
    before[offsets[:-1][offsets[:-1] < len(dense)]] = -1  # a request's first block has no parent
    return dense, before[first[order]], uniq[order]


def _open_text(path: Path) -> tuple[Any, Any]:
    """(binary line stream, raw file for progress) of a JSONL file, decompressing .gz and .zst."""
    raw = path.open("rb")
    if path.suffix == ".gz":
        return gzip.GzipFile(fileobj=raw), raw
    if path.suffix == ".zst":
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw)), raw
    return raw, raw


def trace_files(path: str | Path) -> list[Path]:
    """The files of a trace: the file itself, or a directory's trace files in name order."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"cannot read {p}: no such file")
    if not p.is_dir():
        return [p]
    files = sorted(f for f in p.iterdir() if f.is_file() and _kind(f) is not None)
    if not files:
        raise FileNotFoundError(f"{p}: no trace files (.jsonl, .gz, .zst, .parquet, .arrow) in the directory")
    return files


def _kind(path: Path) -> str | None:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in TABLE_SUFFIXES:
        return "table"
    if suffixes and suffixes[-1] in (".gz", ".zst"):
        return "jsonl" if len(suffixes) > 1 and suffixes[-2] in JSONL_SUFFIXES else None
    return "jsonl" if not suffixes or suffixes[-1] in JSONL_SUFFIXES else None


def _jsonl_lines(path: Path, tick: Callable[[int], None]) -> Iterator[tuple[int, Any]]:
    stream, raw = _open_text(path)
    with raw, stream:
        for number, line in enumerate(stream, start=1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if number % 256 == 0:
                tick(raw.tell())
            if line.strip():
                yield number, line


def read_trace(path: str | Path, block_size: int | None = None, encode: Encoder | None = None,
               skip_bad: bool = False, progress: Callable[[Progress], None] | None = None,
               every_s: float = 0.5) -> tuple[TraceColumns, BadLines]:
    """Stream the trace at ``path`` (a file or a directory) into columns; see the module docstring."""
    builder, bad = _stream(path, ColumnsBuilder, block_size, encode, skip_bad, progress, every_s)
    return builder.finish(), bad


SAMPLE_PIECE_ACCESSES = 1 << 18
"""Accesses read before a piece is sampled and dropped (8 bytes a key while buffered)."""
SAMPLE_BATCH_ROWS = 1024
"""Parquet rows decoded at a time while sampling (Arrow holds one batch's ids)."""


def sample_trace(path: str | Path, rate: float, block_size: int | None = None, encode: Encoder | None = None,
                 skip_bad: bool = False, progress: Callable[[Progress], None] | None = None,
                 every_s: float = 0.5, salt: int = 0,
                 piece: int = SAMPLE_PIECE_ACCESSES,
                 batch_rows: int = SAMPLE_BATCH_ROWS) -> tuple[SampledProfile, BadLines]:
    """The trace at ``path`` sampled as it streams: every ``piece`` accesses (and at each file's end) the
    buffered requests go through the spatial sample and only the kept accesses stay; the same profile as
    ``analyze_sampled(read_trace(path)[0], rate, salt)``."""
    sampler = Sampler(rate, salt)

    def flush(builder: PieceBuilder, force: bool) -> None:
        if force or builder.buffered >= piece:
            got = builder.drain()
            if got is not None:
                sampler.add(*got)

    builder, bad = _stream(path, PieceBuilder, block_size, encode, skip_bad, progress, every_s, flush, batch_rows)
    flush(builder, True)
    return sampler.finish(), bad


COMPRESSION_FACTOR = 8
"""Assumed decompressed bytes per byte of a .gz/.zst file, for the same bound."""


def estimated_accesses(path: str | Path) -> int:
    """An upper estimate of the trace's block accesses read without reading it: Parquet metadata's count of
    ``hash_ids`` values (or its uncompressed bytes), else the file's bytes / ``MIN_JSONL_BYTES_PER_ACCESS``
    (x ``COMPRESSION_FACTOR`` when compressed)."""
    total = 0
    for f in trace_files(path):
        if f.suffix.lower() == ".parquet":
            total += parquet_accesses(f)
            continue
        size = f.stat().st_size * (COMPRESSION_FACTOR if f.suffix.lower() in (".gz", ".zst") else 1)
        total += size // MIN_JSONL_BYTES_PER_ACCESS + 1
    return total


def _stream(path: str | Path, make: Callable[[int], ColumnsBuilder], block_size: int | None,
            encode: Encoder | None, skip_bad: bool, progress: Callable[[Progress], None] | None, every_s: float,
            flush: Callable[[Any, bool], None] | None = None,
            batch_rows: int = TABLE_BATCH_ROWS) -> tuple[Any, BadLines]:
    """Every line of the trace's files through one builder (``flush(builder, False)`` between chunks)."""
    files = trace_files(path)
    tables = [_kind(f) == "table" for f in files]
    unit = "rows" if all(tables) else "bytes"
    total = sum(table_rows(f) if t else f.stat().st_size for f, t in zip(files, tables, strict=True))
    state = Progress(unit, total)
    start = last = time.perf_counter()
    base = 0
    reader = LineReader(make, block_size, encode)
    bad = BadLines()

    def tick(done: int, force: bool = False) -> None:
        nonlocal last
        if flush is not None and reader.builder is not None:
            flush(reader.builder, force)
        now = time.perf_counter()
        if progress is not None and (force or now - last >= every_s):
            last = now
            state.done, state.seconds = base + done, now - start
            state.requests = reader.builder.num_requests if reader.builder is not None else 0  # type: ignore[attr-defined]
            progress(state)

    for f, is_table in zip(files, tables, strict=True):
        where = f.name if len(files) > 1 else str(f)

        def on_bad(exc: WorkloadError, where: str = where, name: str = f.name) -> None:
            if not skip_bad or "line" not in exc.params:
                raise WorkloadError(f"{name}: {exc}" if len(files) > 1 else str(exc), exc.code,
                                    **exc.params) from None
            bad.add(where, exc)

        if is_table:
            read_table(f, reader, on_bad, tick, batch_rows)
        else:
            for number, line in _jsonl_lines(f, tick):
                try:
                    reader.add(number, decode_line(line, number))
                except WorkloadError as exc:
                    on_bad(exc)
        base += table_rows(f) if is_table else f.stat().st_size
        tick(0, force=True)
    builder = reader.builder
    if builder is None or builder.num_requests == 0:  # type: ignore[attr-defined]
        raise bad.nothing_usable(len(files) > 1)
    return builder, bad
