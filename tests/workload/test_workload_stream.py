"""Streaming trace input: every format gives the in-memory reader's columns; bad lines are counted with
their line numbers (or stop the read at the first), a trace of only bad lines is an error; progress."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from kvviz.analysis.workload.columns import from_trace
from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.stream import read_trace
from kvviz.analysis.workload.trace import WorkloadError

FIELDS = ("blocks", "offsets", "input_tokens", "lookup_blocks", "full_blocks", "output_tokens", "timestamps",
          "parent")


def _same(a, b) -> None:
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name
    assert [a.label(i) for i in range(a.num_blocks)] == [b.label(i) for i in range(b.num_blocks)]
    assert a.kinds == b.kinds and a.block_size == b.block_size


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The bundled example as JSONL, .gz, .zst, Parquet, Arrow and a directory of two Parquet shards."""
    d = tmp_path_factory.mktemp("traces")
    raw = EXAMPLE_PATH.read_bytes()
    (d / "t.jsonl").write_bytes(raw)
    (d / "t.jsonl.gz").write_bytes(gzip.compress(raw))
    (d / "t.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    rows = [json.loads(x) for x in raw.splitlines()]
    table = pa.table({k: [r[k] for r in rows] for k in ("timestamp", "input_length", "output_length")}
                     | {"hash_ids": pa.array([r["hash_ids"] for r in rows], pa.list_(pa.int64()))})
    pq.write_table(table, d / "t.parquet")
    with pa.ipc.new_file(d / "t.arrow", table.schema) as w:
        w.write_table(table)
    (d / "shards").mkdir()
    pq.write_table(table.slice(0, 600), d / "shards" / "part-0.parquet")
    pq.write_table(table.slice(600), d / "shards" / "part-1.parquet")
    return d, from_trace(parse_trace(raw))


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz", "t.jsonl.zst", "t.parquet", "t.arrow", "shards"])
def test_every_format_reads_the_same_columns(example, name):
    d, reference = example
    cols, bad = read_trace(d / name)
    assert bad.count == 0
    _same(cols, reference)


def test_token_lines_stream_like_the_in_memory_reader(tmp_path):
    text = "\n".join(json.dumps({"token_ids": [i % 3] * (5 + i % 17)}) for i in range(60))
    (tmp_path / "t.jsonl").write_text(text)
    _same(read_trace(tmp_path / "t.jsonl", 4)[0], from_trace(parse_trace(text, 4)))


BAD = [
    '{"hash_ids": [1, 2], "input_length": 900, "timestamp": 10}',
    "not json",  # line 2
    '{"hash_ids": [1, 3], "input_length": 900, "timestamp": 5}',  # 3: before line 1's timestamp
    '{"hash_ids": [1, 2, 3], "input_length": 600, "timestamp": 20}',  # 4: 3 ids do not cover 600 tokens
    '{"hash_ids": [4], "input_length": -5, "timestamp": 30}',  # 5: negative length
    '{"hash_ids": [4], "input_length": 100000000000, "timestamp": 30}',  # 6: huge length
    '{"hash_ids": [1, 2, 5], "input_length": 1100, "timestamp": 40}',
    '\xff\xfe',  # 8: not UTF-8 once written as latin-1
]


def test_bad_lines_are_counted_with_their_numbers(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_bytes("\n".join(BAD).encode("latin-1"))
    cols, bad = read_trace(f, skip_bad=True)
    assert cols.num_requests == 2 and bad.count == 6
    assert [line for _, line, _ in bad.first] == [2, 3, 4, 5, 6]
    assert "not valid JSON" in bad.first[0][2] and "before the previous line" in bad.first[1][2]
    with pytest.raises(WorkloadError, match="line 2: not valid JSON"):
        read_trace(f)


def test_a_trace_of_only_bad_lines_is_an_error(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text("x\n[1]\n{}\n")
    with pytest.raises(WorkloadError, match="all 3 lines are bad") as info:
        read_trace(f, skip_bad=True)
    assert info.value.code == "all_bad" and "line 1: not valid JSON" in str(info.value)
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(WorkloadError, match="empty"):
        read_trace(tmp_path / "empty.jsonl", skip_bad=True)


def test_progress_reports_rate_and_eta(example):
    d, _ = example
    seen = []
    read_trace(d / "t.jsonl", progress=lambda p: seen.append((p.done, p.total, p.rate, p.eta_s, p.requests)),
               every_s=0.0)
    assert seen and seen[-1][0] == seen[-1][1] == (d / "t.jsonl").stat().st_size and seen[-1][4] == 1500
    assert all(rate > 0 for _, _, rate, _, _ in seen) and any(eta is not None for *_, eta, _ in seen[:-1])
    rows = []
    read_trace(d / "shards", progress=lambda p: rows.append((p.unit, p.done, p.total)), every_s=0.0)
    assert rows[-1] == ("rows", 1500, 1500)


def test_a_table_that_is_not_one(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(WorkloadError, match="cannot read the table"):
        read_trace(tmp_path / "x.parquet")


def test_a_mooncake_table_read_as_arrays_judges_rows_like_the_line_reader(tmp_path):
    # The array path must refuse exactly what the line reader refuses, with the same words and line numbers,
    # and keep the rest in order (runs of good rows around each bad one, timestamps across batches).
    rows = [
        {"timestamp": 10, "input_length": 40, "output_length": 3, "hash_ids": [1, 2, 3]},
        {"timestamp": 12, "input_length": 40, "output_length": None, "hash_ids": [1, 2, 4]},
        {"timestamp": 11, "input_length": 16, "output_length": 1, "hash_ids": [1]},  # before 12
        {"timestamp": 13, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 3, 5]},  # too many
        {"timestamp": 14, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]},  # too few
        {"timestamp": 15, "input_length": 20, "output_length": 1, "hash_ids": [7, 7]},  # repeated
        {"timestamp": 16, "input_length": 20, "output_length": 1, "hash_ids": [8, -1]},  # negative
        {"timestamp": -1, "input_length": 20, "output_length": 1, "hash_ids": [8, 9]},  # negative time
        {"timestamp": 17, "input_length": None, "output_length": 1, "hash_ids": [8, 9]},  # no length
        {"timestamp": 18, "input_length": 20, "output_length": -4, "hash_ids": [8, 9]},  # bad output
        {"timestamp": 19, "input_length": 20, "output_length": 1, "hash_ids": None},  # no kind
        {"timestamp": None, "input_length": 32, "output_length": 1, "hash_ids": [1, 2]},
        {"timestamp": 19, "input_length": 33, "output_length": 1, "hash_ids": [1, 2, 6]},
    ]
    table = pa.table({"timestamp": pa.array([r["timestamp"] for r in rows], pa.int64()),
                      "input_length": pa.array([r["input_length"] for r in rows], pa.int64()),
                      "output_length": pa.array([r["output_length"] for r in rows], pa.int64()),
                      "hash_ids": pa.array([r["hash_ids"] for r in rows], pa.list_(pa.int64()))})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=4)  # batches of 4: runs cross batches
    lines = [{k: v for k, v in r.items() if v is not None} for r in rows]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    cols, bad = read_trace(tmp_path / "t.parquet", 16, skip_bad=True)
    ref, ref_bad = read_trace(tmp_path / "t.jsonl", 16, skip_bad=True)
    _same(cols, ref)
    assert cols.num_requests == 4 and bad.count == ref_bad.count == 9
    assert [(n, e) for _, n, e in bad.first] == [(n, e) for _, n, e in ref_bad.first]
    with pytest.raises(WorkloadError, match="line 3: timestamp 11 ms is before"):
        read_trace(tmp_path / "t.parquet", 16)
