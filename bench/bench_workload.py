"""Workload analyzer speed: the one-pass 500-point LRU curve vs one plain replay at one capacity.

A generated trace (kvviz.workload.gen, seed 0) of 10,000 requests in 256-token blocks (over
250,000 block accesses). ``workload_curve_500_s``: one stack-distance pass plus 500 curve points;
``workload_replay_1cap_s``: one plain LRU replay (an OrderedDict) at one capacity; medians of 3
interleaved runs. Re-running the replay per capacity would cost 500x the replay. Memory: tracemalloc
peak of the pass on the first half and on the whole trace, per distinct block (flat = linear).
"""

from __future__ import annotations

import json
import statistics
import time
import tracemalloc

from kvviz.workload.gen import WorkloadGenConfig, generate
from kvviz.workload.report import curve
from kvviz.workload.reuse_distance import analyze, log_grid, replay_lru
from kvviz.workload.trace import parse_trace

NUM_REQUESTS = 10_000
BLOCK_SIZE = 256
POINTS = 500
REPEATS = 3

TARGETS = [
    ("workload_curve_vs_replay", "<= 20 (500-point curve / one replay at one capacity, same run)",
     lambda r: r["workload_curve_vs_replay"] <= 20),
    ("workload_block_accesses", ">= 250,000 block accesses in >= 10,000 requests",
     lambda r: r["workload_block_accesses"] >= 250_000 and r["workload_requests"] >= 10_000),
]


def _peak_bytes(trace) -> int:
    tracemalloc.start()
    analyze(trace)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


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
