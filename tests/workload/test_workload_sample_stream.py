"""Sampled mode streams: the trace is sampled piece by piece as it is read, with the same numbers as
sampling the whole trace's columns, and memory that follows the sample, not the trace."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.gen import WorkloadGenConfig, generate
from kvviz.analysis.workload.sample import analyze_sampled
from kvviz.analysis.workload.sample_report import sampled_report
from kvviz.analysis.workload.stream import estimated_accesses, read_trace, sample_trace


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """A generated Mooncake trace as JSONL (with two bad lines), as Parquet in small batches, and a token-line
    trace."""
    d = tmp_path_factory.mktemp("stream")
    rows = generate(WorkloadGenConfig(num_requests=1500, block_size=16, seed=3))
    lines = [json.dumps(r) for r in rows]
    lines.insert(700, "{not json")
    lines.insert(1200, json.dumps({"hash_ids": [1, 1], "input_length": 32}))
    (d / "t.jsonl").write_text("\n".join(lines) + "\n")
    table = pa.table({k: [r[k] for r in rows] for k in ("timestamp", "input_length", "output_length")}
                     | {"hash_ids": pa.array([r["hash_ids"] for r in rows], pa.list_(pa.int64()))})
    pq.write_table(table, d / "t.parquet", row_group_size=100)
    rng = np.random.default_rng(5)
    toks = [json.dumps({"token_ids": [int(t) for t in rng.integers(0, 40, int(rng.integers(1, 90)))]})
            for _ in range(400)]
    (d / "tok.jsonl").write_text("\n".join(toks) + "\n")
    return d


@pytest.mark.parametrize("name,block_size", [("t.jsonl", 16), ("t.parquet", 16), ("tok.jsonl", 4)])
@pytest.mark.parametrize("rate", [0.1, 0.37])
def test_streamed_sample_gives_the_same_numbers_as_the_whole_trace(traces, name, block_size, rate):
    cols, bad = read_trace(traces / name, block_size, skip_bad=True)
    old = sampled_report(analyze_sampled(cols, rate, salt=2), [1, 10, 100, 1000])
    for piece in (1, 777, 1 << 20):  # a piece per line, odd pieces, one piece
        profile, streamed_bad = sample_trace(traces / name, rate, block_size, skip_bad=True, salt=2, piece=piece)
        new = sampled_report(profile, [1, 10, 100, 1000])
        assert json.dumps(new, sort_keys=True) == json.dumps(old, sort_keys=True)
        assert streamed_bad.as_dict() == bad.as_dict()
    assert old["sampled_block_accesses"] > 0


def test_streamed_progress_counts_requests(traces):
    seen = []
    sample_trace(traces / "t.jsonl", 0.2, 16, skip_bad=True, piece=100, every_s=0.0,
                 progress=lambda p: seen.append((p.done, p.requests)))
    assert seen and seen[-1] == ((traces / "t.jsonl").stat().st_size, 1500)
    assert [r for _, r in seen] == sorted(r for _, r in seen)


def test_the_access_estimate_is_an_upper_bound_read_from_metadata(traces):
    cols, _ = read_trace(traces / "t.parquet", 16)
    assert estimated_accesses(traces / "t.parquet") == cols.num_accesses  # the hash_ids value count
    assert estimated_accesses(traces / "t.jsonl") >= cols.num_accesses


def test_sampling_at_a_low_rate_holds_far_less_than_the_trace(tmp_path):
    """tracemalloc's peak while sampling at 1% stays well under what the trace's accesses take as columns."""
    rows = generate(WorkloadGenConfig(num_requests=1500, block_size=16, seed=11))
    table = pa.table({k: [r[k] for r in rows] for k in ("timestamp", "input_length", "output_length")}
                     | {"hash_ids": pa.array([r["hash_ids"] for r in rows], pa.list_(pa.int64()))})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=50)
    del rows, table
    sample_trace(EXAMPLE_PATH, 0.5)  # the lazy imports (pandas, pyarrow) before anything is traced
    tracemalloc.start()
    try:
        cols, _ = read_trace(tmp_path / "t.parquet", 16)
        accesses, whole = cols.num_accesses, tracemalloc.get_traced_memory()[1]
        del cols
        tracemalloc.reset_peak()
        profile, _ = sample_trace(tmp_path / "t.parquet", 0.01, 16, piece=1 << 14, batch_rows=20)
        streamed = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert accesses > 500_000 and profile.kept_accesses < accesses / 20
    assert streamed < 4 * accesses, (streamed, accesses)  # under 4 B per access of the trace (measured 1.6) ...
    assert streamed < whole / 4, (streamed, whole)  # ... and a quarter of reading the whole trace's columns
