"""Parquet and Arrow traces for kvviz.analysis.workload.stream: tables whose columns are the JSONL fields.

Mooncake tables (a ``hash_ids`` list column) are checked as arrays (``hash_table_bad``) and stored in whole
runs of good rows; a flagged row, and every row of a token, prompt or messages table, goes through the
line reader, which judges it with the same words and line number as a JSONL line. Also the tables' row
counts and, from Parquet metadata, a cheap upper bound on a trace's block accesses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from kvviz.analysis.workload.parse import LineReader
from kvviz.analysis.workload.trace import WorkloadError

TABLE_SUFFIXES = (".parquet", ".arrow", ".feather")
MAX_ID = 2**63 - 1
TABLE_COLUMNS = ("timestamp", "input_length", "output_length", "hash_ids", "token_ids", "prompt", "messages")
MIN_JSONL_BYTES_PER_ACCESS = 4
"""A cheap bound for --memory-mb: a JSONL block access takes at least this many bytes ("12, ")."""


def _numbers(batch: Any, name: str, fill: float, integer: bool = True) -> tuple[np.ndarray, np.ndarray, bool]:
    """A column as (float64 values with nulls as ``fill``, null mask, whether its type is one the row reader
    takes: integers, or any number when not ``integer``); an absent column is all null."""
    import pyarrow as pa

    n = batch.num_rows
    if name not in batch.schema.names:
        return np.full(n, fill, np.float64), np.ones(n, bool), True
    col = batch.column(name)
    if not (pa.types.is_integer(col.type) or (pa.types.is_floating(col.type) and not integer)):
        return np.full(n, fill, np.float64), np.ones(n, bool), False
    nulls = np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool)
    values = np.asarray(col.cast(pa.float64()).fill_null(fill).to_numpy(zero_copy_only=False), np.float64)
    return values, nulls, True


def hash_table_bad(batch: Any, block_size: int, last_ts: float | None) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """A Mooncake batch checked as arrays: a mask of rows the row-at-a-time reader must judge (every row it
    would refuse is in it, and maybe a few it accepts) and the rows' columns (ids, counts, input and output
    lengths, timestamps). ``last_ts`` is the timestamp of the last accepted line before the batch."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from kvviz.analysis.workload.trace import MAX_BLOCKS_PER_REQUEST, MAX_LENGTH

    ids = batch.column("hash_ids")
    n = batch.num_rows
    ids_null = np.asarray(ids.is_null().to_numpy(zero_copy_only=False), bool)
    ids = pc.fill_null(ids, pa.scalar([], ids.type))
    counts = np.asarray(pc.list_value_length(ids).to_numpy(zero_copy_only=False), np.int64)
    values = np.asarray(pc.list_flatten(ids).to_numpy(zero_copy_only=False))
    row = np.repeat(np.arange(n), counts)
    lengths, len_null, ok_len = _numbers(batch, "input_length", 0)
    outputs, out_null, ok_out = _numbers(batch, "output_length", 0)
    stamps, ts_null, ok_ts = _numbers(batch, "timestamp", np.nan, integer=False)
    bad = ids_null | len_null | (counts > MAX_BLOCKS_PER_REQUEST)
    if not (ok_len and ok_out and ok_ts):  # a column of strings or lists: every row to the row reader
        bad |= True
    if not np.issubdtype(values.dtype, np.integer):
        bad |= True
    elif len(values):
        bad |= np.bincount(row, values < 0, minlength=n) > 0
        if values.dtype == np.uint64:
            bad |= np.bincount(row, values > np.uint64(MAX_ID), minlength=n) > 0
        order = np.lexsort((values, row))
        same = (row[order][1:] == row[order][:-1]) & (values[order][1:] == values[order][:-1])
        bad[row[order][1:][same]] = True
    for col in (lengths, outputs):
        bad |= (col < 0) | (col > MAX_LENGTH) | (col != np.floor(col))
    need = -(-lengths.astype(np.int64) // block_size)
    bad |= counts != need
    bad |= ~ts_null & (~np.isfinite(stamps) | (stamps < 0))
    # a line is out of order when before the latest accepted timestamp: the running maximum of the rows
    # that pass every other check (a line refused for its order never raises it)
    ok_ts = np.where(~bad & ~ts_null, stamps, -np.inf)
    before = np.maximum.accumulate(np.concatenate(([-np.inf if last_ts is None else last_ts], ok_ts)))[:-1]
    bad |= ~ts_null & (stamps < before)
    return bad, (values.astype(np.int64, copy=False), counts, lengths.astype(np.int64),
                 np.where(out_null, 0, outputs).astype(np.int64), stamps)


TABLE_BATCH_ROWS = 65536


def _table_batches(path: Path, rows: int = TABLE_BATCH_ROWS) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.suffix.lower() == ".parquet":
        table = pq.ParquetFile(path)
        names = table.schema_arrow.names
        yield from table.iter_batches(batch_size=rows, columns=[c for c in TABLE_COLUMNS if c in names])
    else:
        reader = pa.ipc.open_file(path)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


def _is_mooncake_table(batch: Any) -> bool:
    import pyarrow as pa

    names = batch.schema.names
    if "hash_ids" not in names or any(k in names for k in ("token_ids", "prompt", "messages")):
        return False
    t = batch.schema.field("hash_ids").type
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type)


def read_table(path: Path, reader: LineReader, on_bad: Callable[[WorkloadError], None],
               tick: Callable[[int], None], batch_rows: int = TABLE_BATCH_ROWS) -> None:
    """Add a Parquet or Arrow file to ``reader``: Mooncake tables as arrays (``hash_table_bad`` picks the
    rows the row reader must judge; the rest go in whole runs), any other table a row at a time."""
    import pyarrow as pa

    number = 0
    try:
        for batch in _table_batches(path, batch_rows):
            if not _is_mooncake_table(batch):
                for row in batch.to_pylist():
                    number += 1
                    _add_row(reader, number, {k: v for k, v in row.items() if k in TABLE_COLUMNS and v is not None},
                             on_bad)
                tick(number)
                continue
            start = 0
            builder = reader.builder
            if builder is None or reader.first != "hash_ids":  # the first line picks the builder: rows
                for row in batch.slice(0, 1).to_pylist():
                    number += 1
                    _add_row(reader, number, {k: v for k, v in row.items() if v is not None}, on_bad)
                start, builder = 1, reader.builder
            rest = batch.slice(start)
            if builder is None or reader.first != "hash_ids":
                for row in rest.to_pylist():
                    number += 1
                    _add_row(reader, number, {k: v for k, v in row.items() if v is not None}, on_bad)
                tick(number)
                continue
            _add_hash_batch(reader, builder, rest, number, on_bad)
            number += rest.num_rows
            tick(number)
    except (pa.ArrowException, OSError) as exc:
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise WorkloadError(f"{path}: cannot read the table ({detail})", "bad_table", path=str(path),
                            detail=detail) from None


def _add_row(reader: LineReader, number: int, row: dict[str, Any], on_bad: Callable[[WorkloadError], None]) -> None:
    try:
        reader.add(number, row)
    except WorkloadError as exc:
        on_bad(exc)


def _add_hash_batch(reader: LineReader, builder: Any, batch: Any, number: int,
                    on_bad: Callable[[WorkloadError], None]) -> None:
    """Whole runs of good rows in bulk; each flagged row through the row reader, in order."""
    bad, (values, counts, lengths, outputs, stamps) = hash_table_bad(batch, builder.block_size, builder._last_ts)
    ends = np.cumsum(counts)
    flagged = np.flatnonzero(bad)
    lo = 0
    for i in [*flagged.tolist(), batch.num_rows]:
        if i > lo:  # rows lo..i-1 are good
            a, b = (int(ends[lo - 1]) if lo else 0), int(ends[i - 1])
            builder.add_hash_rows(values[a:b], counts[lo:i], lengths[lo:i], outputs[lo:i], stamps[lo:i])
        if i < batch.num_rows:
            row = {k: v for k, v in batch.slice(i, 1).to_pylist()[0].items() if v is not None}
            _add_row(reader, number + i + 1, row, on_bad)
        lo = i + 1


def table_rows(path: Path) -> int:
    """Rows of a Parquet or Arrow file (from its metadata)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if path.suffix.lower() == ".parquet":
            return pq.ParquetFile(path).metadata.num_rows
        reader = pa.ipc.open_file(path)
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except (pa.ArrowException, OSError) as exc:
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise WorkloadError(f"{path}: cannot read the table ({detail})", "bad_table", path=str(path),
                            detail=detail) from None


def parquet_accesses(path: Path) -> int:
    """Block accesses of a Parquet trace from its metadata (the ``hash_ids`` value count), else its
    uncompressed bytes / ``MIN_JSONL_BYTES_PER_ACCESS``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError):
        return path.stat().st_size // MIN_JSONL_BYTES_PER_ACCESS + 1
    ids = raw = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            col = group.column(c)
            raw += col.total_uncompressed_size
            if col.path_in_schema.split(".")[0] == "hash_ids":
                ids += col.num_values
    return ids if ids else raw // MIN_JSONL_BYTES_PER_ACCESS + 1
