"""kvviz's vLLM block pool replayed over a workload trace, against the pure-LRU definition."""

from __future__ import annotations

import json
import random

import pytest

from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.pool import replay_block_pool
from kvviz.analysis.workload.report import curve, parse_capacities, top_prefixes
from kvviz.analysis.workload.reuse_distance import analyze, replay_lru


def _token_trace(seed: int, block_size: int = 4, n: int = 60):
    rng = random.Random(seed)
    systems = [[rng.randrange(50) for _ in range(block_size * rng.randint(1, 3))] for _ in range(3)]
    lines = []
    for _ in range(n):
        # whole blocks plus one token, so the vLLM cap and the LRU rule see the same cacheable blocks
        body = [rng.randrange(3) for _ in range(block_size * rng.randint(0, 2))]
        lines.append({"token_ids": rng.choice(systems) + body + [7]})
    return parse_trace("\n".join(json.dumps(x) for x in lines), block_size)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("concurrency", [1, 3])
def test_pool_without_evictions_equals_the_infinite_cache(seed, concurrency):
    trace = _token_trace(seed)
    pool = replay_block_pool(trace, 10_000, concurrency=concurrency)
    assert pool.evictions == 0 and pool.refused == 0
    assert pool.per_request == replay_lru(trace, None)


def test_partial_last_block_takes_a_pool_block():
    # bs 4, pool of 4 blocks. A = 2 full blocks + 1 token (3 pool blocks), B likewise, then A again.
    # Pure LRU at 4 blocks keeps A's 2 and B's 2 cached blocks: A hits 8 tokens. The pool also spends a
    # block on each partial tail, so B's allocation evicts A's second block: A hits 4 tokens.
    lines = [{"token_ids": [1, 1, 1, 1, 2, 2, 2, 2, 3]}, {"token_ids": [5, 5, 5, 5, 6, 6, 6, 6, 3]},
             {"token_ids": [1, 1, 1, 1, 2, 2, 2, 2, 3]}]
    trace = parse_trace("\n".join(json.dumps(x) for x in lines), 4)
    assert analyze(trace).hit_tokens(4) == 8
    pool = replay_block_pool(trace, 4)
    assert pool.per_request == [0, 0, 4] and pool.uncached_partial_blocks == 3 and pool.evictions == 2


def test_running_requests_pin_blocks_so_admissions_wait():
    trace = _token_trace(1, n=120)
    longest = max(-(-r.input_tokens // trace.block_size) for r in trace.requests)
    many = replay_block_pool(trace, 2 * longest, concurrency=4)
    assert many.waited > 0 and many.refused == 0
    assert many.hit_tokens <= analyze(trace).hit_tokens_infinite
    assert replay_block_pool(trace, 2 * longest, concurrency=1).waited == 0


def test_refused_and_bad_sizes():
    trace = parse_trace('{"hash_ids": [1, 2, 3], "input_length": 1500}', 512)
    out = replay_block_pool(trace, 2)
    assert out.refused == 1 and out.hit_tokens == 0
    with pytest.raises(ValueError):
        replay_block_pool(trace, 0)
    with pytest.raises(ValueError):
        replay_block_pool(trace, 4, concurrency=0)


def test_mooncake_partial_and_whole_last_blocks_in_the_pool():
    # 1024 tokens = 2 whole blocks: pure LRU hits both on the repeat; vLLM recomputes the last token -> 1 block
    trace = parse_trace('{"hash_ids": [1, 2], "input_length": 1024}\n{"hash_ids": [1, 2], "input_length": 1024}')
    assert analyze(trace).hit_tokens_infinite == 1024
    assert replay_block_pool(trace, 10).hit_tokens == 512


def test_report_helpers():
    assert parse_capacities("30, 10,10") == [10, 30]
    for bad in ("", "0", "-5", "1.5", "a", ","):
        with pytest.raises(ValueError):
            parse_capacities(bad)
    trace = _token_trace(2)
    profile = analyze(trace)
    points = curve(profile, [1, 5, 10**9])
    assert [p.hit_tokens for p in points] == [profile.hit_tokens(1), profile.hit_tokens(5),
                                              profile.hit_tokens_infinite]
    nodes = top_prefixes(trace, profile, k=5)
    by_block = {n.block: n for n in nodes}
    for n in nodes:
        assert n.parent == -1 or (n.parent in by_block and by_block[n.parent].saved_tokens >= n.saved_tokens)
    assert sum(n.saved_tokens for n in nodes if n.depth == 1) <= profile.hit_tokens_infinite


def test_timeline_slices_by_time_and_by_index():
    from kvviz.analysis.workload.report import timeline

    lines = [{"hash_ids": [1], "input_length": 10, "timestamp": 60_000 * i} for i in range(10)]
    trace = parse_trace("\n".join(json.dumps(x) for x in lines), 10)
    xs, a, b, by_time = timeline(trace, replay_lru(trace, 1), replay_lru(trace, None), slices=5)
    assert by_time and len(xs) == 5 and a == b and a[0] == 0.5 and a[-1] == 1.0
    notime = parse_trace("\n".join(json.dumps({"hash_ids": [1], "input_length": 10}) for _ in range(4)), 10)
    xs, a, _, by_time = timeline(notime, replay_lru(notime, 1), replay_lru(notime, 1), slices=2)
    assert not by_time and xs == [1.0, 3.0] and a == [0.5, 1.0]
