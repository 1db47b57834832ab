"""The one-pass stack-distance curve equals a brute-force LRU simulation at every capacity, with and
without a TTL, and follows the stated rules (touch last to first, prefix run, lookup cap)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from reuse_reference_util import tree_trace

from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.reuse_distance import analyze, distance_histogram, log_grid, replay_lru
from kvviz.analysis.workload.trace import WorkloadTrace


def brute_force(trace: WorkloadTrace, capacity: int | None, ttl_ms: float | None = None) -> int:
    """Independent LRU: a plain list, most recent last; expired blocks are removed physically."""
    stack: list[int] = []
    touched: dict[int, float] = {}
    total, bs = 0, trace.block_size
    for req in trace.requests:
        now = req.timestamp_ms or 0.0
        if ttl_ms is not None:
            stack = [b for b in stack if now - touched[b] < ttl_ms]
        run = 0
        while run < min(req.lookup_blocks, len(req.blocks)) and req.blocks[run] in stack:
            run += 1
        total += min(run * bs, req.input_tokens)
        for b in reversed(req.blocks):
            if b in stack:
                stack.remove(b)
            stack.append(b)
            touched[b] = now
            if capacity is not None and len(stack) > capacity:
                stack.pop(0)
    return total


# Requests as paths in a small tree of chained blocks: shared prefixes, branches, partial tails.
request = st.tuples(
    st.lists(st.integers(0, 3), min_size=1, max_size=6),  # branch choice per block
    st.integers(0, 40),  # tokens cut from the last block
    st.integers(0, 90_000),  # gap to the previous request, ms
)


def _trace(reqs: list[tuple[list[int], int, int]], block_size: int = 8) -> WorkloadTrace:
    return tree_trace(reqs, block_size)


@settings(max_examples=150, deadline=None)
@given(st.lists(request, min_size=1, max_size=25), st.sampled_from([None, 30.0, 120.0]))
def test_curve_equals_brute_force_at_every_capacity(reqs, ttl_s):
    trace = _trace(reqs)
    profile = analyze(trace, ttl_s)
    for cap in range(1, trace.num_blocks + 2):
        assert profile.hit_tokens(cap) == brute_force(trace, cap)
        assert profile.hit_tokens(cap) == sum(replay_lru(trace, cap))
        if ttl_s is not None:
            assert profile.hit_tokens(cap, ttl=True) == brute_force(trace, cap, ttl_s * 1000)
            assert profile.hit_tokens(cap, ttl=True) == sum(replay_lru(trace, cap, ttl_s))
    assert profile.hit_tokens_infinite == brute_force(trace, None)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=40), min_size=1, max_size=12),
       st.integers(1, 6))
def test_token_ids_curve_equals_brute_force(prompts, block_size):
    lines = "\n".join(json.dumps({"token_ids": p}) for p in prompts)
    trace = parse_trace(lines, block_size)
    profile = analyze(trace)
    for cap in range(1, trace.num_blocks + 2):
        assert profile.hit_tokens(cap) == brute_force(trace, cap)


def test_touch_last_to_first_keeps_the_head():
    # A 3-block request, then a 1-block intruder; capacity 3: the intruder evicts the LRU block, which is
    # the request's TAIL (touched first), so the request's head still hits 2 blocks.
    lines = [{"hash_ids": [1, 2, 3], "input_length": 30}, {"hash_ids": [9], "input_length": 10},
             {"hash_ids": [1, 2, 3], "input_length": 30}]
    trace = parse_trace("\n".join(json.dumps(x) for x in lines), 10)
    profile = analyze(trace)
    assert profile.hit_tokens(3) == 20
    assert profile.hit_tokens(4) == 30 == profile.hit_tokens_infinite


def test_hit_is_a_run_from_the_start_and_partial_last_block_counts_its_tokens():
    lines = [{"hash_ids": [1, 2, 3], "input_length": 25}, {"hash_ids": [1, 2, 3], "input_length": 25},
             {"hash_ids": [7, 2, 3], "input_length": 25}]
    profile = analyze(parse_trace("\n".join(json.dumps(x) for x in lines), 10))
    assert profile.hit_tokens_infinite == 25  # 10 + 10 + 5 (partial), then a miss at the first block
    assert profile.input_tokens == 75
    assert abs(profile.hit_rate(10) - 25 / 75) < 1e-12


def test_token_ids_lookup_is_capped_at_len_minus_one():
    tokens = list(range(32))  # exactly two blocks of 16: the second can never hit (last token recomputed)
    trace = parse_trace("\n".join(json.dumps({"token_ids": tokens}) for _ in range(2)), 16)
    assert analyze(trace).hit_tokens_infinite == 16
    trace = parse_trace("\n".join(json.dumps({"token_ids": tokens + [5]}) for _ in range(2)), 16)
    assert analyze(trace).hit_tokens_infinite == 32


def test_ttl_expires_blocks_and_needs_timestamps():
    lines = [{"hash_ids": [1], "input_length": 10, "timestamp": 0},
             {"hash_ids": [1], "input_length": 10, "timestamp": 4_000},
             {"hash_ids": [1], "input_length": 10, "timestamp": 9_500}]
    trace = parse_trace("\n".join(json.dumps(x) for x in lines), 10)
    profile = analyze(trace, ttl_seconds=5)
    assert profile.hit_tokens_infinite == 20
    assert profile.hit_tokens(1, ttl=True) == 10  # 4 s after the touch: hit; 5.5 s after: expired
    notime = parse_trace('{"hash_ids": [1], "input_length": 3}', 10)
    try:
        analyze(notime, ttl_seconds=5)
    except ValueError as exc:
        assert "timestamp" in str(exc)
    else:
        raise AssertionError("a TTL without timestamps must be refused")


def test_capacity_for_fraction_and_histogram():
    lines = [{"hash_ids": [i % 7], "input_length": 10} for i in range(50)]
    profile = analyze(parse_trace("\n".join(json.dumps(x) for x in lines), 10))
    assert profile.capacity_for(0.9) == 7 and profile.hit_tokens(6) == 0
    hist = distance_histogram(profile)
    assert sum(c for _, _, c in hist) == profile.num_block_accesses - profile.cold_accesses == 43
    assert log_grid(1000, 5) == [1, 6, 32, 178, 1000]


def test_tracked_per_request_hits_match_a_replay():
    lines = [{"hash_ids": [i % 5, 100 + i % 3], "input_length": 20} for i in range(40)]
    trace = parse_trace("\n".join(json.dumps(x) for x in lines), 10)
    profile = analyze(trace, track=[3, 0])
    assert profile.tracked[3] == replay_lru(trace, 3)
    assert profile.tracked[0] == replay_lru(trace, None)
