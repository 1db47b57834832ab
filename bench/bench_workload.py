"""Workload analyzer speed: the one-pass 500-point LRU curve vs one plain replay at one capacity.

A generated trace (kvviz.analysis.workload.gen, seed 0) of 10,000 requests in 256-token blocks (over
250,000 block accesses). ``workload_curve_500_s``: one stack-distance pass plus 500 curve points;
``workload_replay_1cap_s``: one plain LRU replay (an OrderedDict) at one capacity; medians of 3
interleaved runs. Re-running the replay per capacity would cost 500x the replay. Memory: tracemalloc
peak of the pass on the first half and on the whole trace, per distinct block (flat = linear).

At scale: the same generated trace played ``TILES`` times with fresh block ids (about 5.4
million block accesses), as columns. ``workload_exact_accesses_per_s``: block accesses per second of the
exact one-pass curve (median of 3, the kernel compiled before timing); ``workload_bytes_per_unique_block``:
tracemalloc peak of that pass (its state and its outputs) per distinct block; the trace's own columns
are ``workload_trace_bytes_per_access``. ``workload_load_avg_1m``: the machine's load when measured
(a shared machine inflates times; read the rate with it).

Sampled: the same trace played ``SAMPLED_TILES`` times with fresh block ids (about 100 million
block accesses), fed tile by tile to kvviz.analysis.workload.sample's ``Sampler`` at the rate a ``SAMPLED_MEMORY_MB``
bound gives, so only the kept accesses are ever held. ``workload_sampled_100m_s``: wall time of sampling
and the sampled passes (the sub-samples and the 8 moved-distance replicates for the error bar
included); ``workload_sampled_error``: the largest reported error bar (about 95%) over a 60-point grid
from the resolved capacity (10 kept blocks) up, and ``workload_sampled_actual_error`` the largest distance
from the exact curve there (the tiled trace's exact curve is the base trace's); ``workload_sampled_peak_mb``:
tracemalloc peak of a second, untimed run.

Reading: ``workload_parquet_read_accesses_per_s``, block accesses a second read from a Parquet
file of the trace played ``PARQUET_TILES`` times (Mooncake columns checked as arrays), and
``workload_jsonl_read_accesses_per_s`` from the base trace as JSON Lines (a line at a time); medians of 3.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import tracemalloc

import numpy as np

from kvviz.analysis.workload.columns import as_columns, tile
from kvviz.analysis.workload.gen import WorkloadGenConfig, generate
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.report import curve
from kvviz.analysis.workload.reuse_distance import analyze, log_grid, replay_lru
from kvviz.analysis.workload.sample import Sampler, rate_for_memory
from kvviz.analysis.workload.stream import read_trace

NUM_REQUESTS = 10_000
BLOCK_SIZE = 256
POINTS = 500
REPEATS = 3
TILES = 12
SAMPLED_TILES = 223
SAMPLED_MEMORY_MB = 768
PARQUET_TILES = 4

TARGETS = [
    ("workload_curve_vs_replay", "<= 20 (500-point curve / one replay at one capacity, same run)",
     lambda r: r["workload_curve_vs_replay"] <= 20),
    ("workload_block_accesses", ">= 250,000 block accesses in >= 10,000 requests",
     lambda r: r["workload_block_accesses"] >= 250_000 and r["workload_requests"] >= 10_000),
    ("workload_exact_accesses_per_s", ">= 3,000,000 block accesses a second (exact curve, one pass)",
     lambda r: r["workload_exact_accesses_per_s"] >= 3_000_000),
    ("workload_bytes_per_unique_block", "<= 100 bytes of peak memory per distinct block (the exact pass)",
     lambda r: r["workload_bytes_per_unique_block"] <= 100),
    ("workload_sampled_100m_s", "<= 60 s for 100 million block accesses, sampled, reported error <= 0.01",
     lambda r: r["workload_sampled_100m_s"] <= 60 and r["workload_sampled_error"] <= 0.01),
]


def _sampled(trace, results: dict) -> None:
    base = as_columns(trace)
    u = base.num_blocks
    rate = rate_for_memory(SAMPLED_MEMORY_MB, u * SAMPLED_TILES)
    keys = np.arange(u, dtype=np.int64)
    start = time.perf_counter()
    sampler = Sampler(rate)
    for k in range(SAMPLED_TILES):  # each tile: the base trace with fresh block ids
        sampler.add(base, keys + k * u)
    sp = sampler.finish()
    results["workload_sampled_100m_s"] = time.perf_counter() - start
    grid = [c for c in log_grid(sp.unique_blocks, 60) if c >= sp.resolved_from]
    results["workload_sampled_block_accesses"] = sp.num_block_accesses
    results["workload_sampled_rate"] = rate
    results["workload_sampled_kept_accesses"] = sp.kept_accesses
    results["workload_sampled_error"] = max(sp.error(c) for c in grid)
    # the exact curve of the tiled trace is the base trace's: a block lives in one tile, so the blocks
    # touched since its last touch are its own tile's, and every distance is the base trace's
    exact = analyze(base)
    results["workload_sampled_actual_error"] = max(abs(sp.hit_rate(c) - exact.hit_rate(c)) for c in grid)
    results["workload_sampled_load_avg_1m"] = os.getloadavg()[0]
    tracemalloc.start()  # a second run, for its peak memory (tracemalloc slows allocations: not timed)
    sampler = Sampler(rate)
    for k in range(SAMPLED_TILES):
        sampler.add(base, keys + k * u)
    again = sampler.finish()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    results["workload_sampled_peak_mb"] = peak / 2**20
    results["workload_sampled_bytes_per_kept_block"] = peak / again.kept_blocks


def _reading(lines: list, results: dict) -> None:
    """Reading a trace file into columns: Parquet (Mooncake columns as arrays) and JSON Lines, the same
    requests (the base trace played PARQUET_TILES times with fresh ids for Parquet), medians of 3."""
    import tempfile
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "t.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
        shift = 1 + max(max(x["hash_ids"]) for x in lines)
        span = lines[-1]["timestamp"] + 1
        table = pa.table({
            "timestamp": [x["timestamp"] + k * span for k in range(PARQUET_TILES) for x in lines],
            "input_length": [x["input_length"] for _ in range(PARQUET_TILES) for x in lines],
            "output_length": [x["output_length"] for _ in range(PARQUET_TILES) for x in lines],
            "hash_ids": pa.array([[h + k * shift for h in x["hash_ids"]] for k in range(PARQUET_TILES)
                                  for x in lines], pa.list_(pa.int64()))})
        pq.write_table(table, d / "t.parquet")
        for name, key in (("t.parquet", "workload_parquet_read_accesses_per_s"),
                          ("t.jsonl", "workload_jsonl_read_accesses_per_s")):
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                cols, _ = read_trace(d / name, BLOCK_SIZE)
                times.append(time.perf_counter() - start)
            results[key] = cols.num_accesses / statistics.median(times)
    results["workload_read_load_avg_1m"] = os.getloadavg()[0]


def _peak_bytes(trace) -> int:
    as_columns(trace)  # the trace's columns are its input, not the pass's memory
    tracemalloc.start()
    analyze(trace)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def _at_scale(trace, results: dict) -> None:
    big = tile(as_columns(trace), TILES)
    analyze(big)  # compile (or load the compiled kernel) before timing
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        profile = analyze(big)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    analyze(big)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    results["workload_exact_block_accesses"] = big.num_accesses
    results["workload_exact_unique_blocks"] = big.num_blocks
    results["workload_exact_s"] = statistics.median(times)
    results["workload_exact_accesses_per_s"] = big.num_accesses / statistics.median(times)
    results["workload_bytes_per_unique_block"] = peak / profile.unique_blocks
    results["workload_trace_bytes_per_access"] = big.nbytes() / big.num_accesses
    results["workload_load_avg_1m"] = os.getloadavg()[0]


def run(results: dict) -> None:
    lines = generate(WorkloadGenConfig(num_requests=NUM_REQUESTS, block_size=BLOCK_SIZE))
    text = "\n".join(json.dumps(x) for x in lines)
    trace = parse_trace(text, BLOCK_SIZE)
    curve_s, replay_s = [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        profile = analyze(trace)
        points = curve(profile, log_grid(profile.unique_blocks, POINTS))
        curve_s.append(time.perf_counter() - start)
        cap = profile.capacity_for(0.5)
        start = time.perf_counter()
        hits = replay_lru(trace, cap)
        replay_s.append(time.perf_counter() - start)
        if sum(hits) != profile.hit_tokens(cap):
            raise AssertionError("the one-pass curve differs from the replay")
    half = parse_trace("\n".join(json.dumps(x) for x in lines[: NUM_REQUESTS // 2]), BLOCK_SIZE)
    results["workload_requests"] = trace.num_requests
    results["workload_block_accesses"] = profile.num_block_accesses
    results["workload_unique_blocks"] = profile.unique_blocks
    results["workload_curve_points"] = len(points)
    results["workload_curve_500_s"] = statistics.median(curve_s)
    results["workload_replay_1cap_s"] = statistics.median(replay_s)
    results["workload_curve_vs_replay"] = results["workload_curve_500_s"] / results["workload_replay_1cap_s"]
    results["workload_peak_bytes_per_block_half"] = _peak_bytes(half) / half.num_blocks
    results["workload_peak_bytes_per_block_full"] = _peak_bytes(trace) / trace.num_blocks
    _at_scale(trace, results)
    _sampled(trace, results)
    _reading(lines, results)
