"""The compiled one-pass kernel (kvviz.analysis.workload.stack) equals kvviz's first pure-Python pass bit for bit:
hit tokens at every capacity, with a TTL, reuse distances, cold accesses, per-block savings and hits,
per-request tracked hits; on random prefix trees, a generated trace, hashed token lines, and a trace that
wraps the Fenwick tree's times many times (renumbering)."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from reuse_reference_util import analyze_reference, tree_trace

from kvviz.analysis.workload.columns import from_trace
from kvviz.analysis.workload.gen import WorkloadGenConfig, generate
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.reuse_distance import analyze
from kvviz.analysis.workload.trace import WorkloadTrace


def assert_same(trace: WorkloadTrace, ttl_s: float | None, track: tuple[int, ...] = (0, 2, 5)) -> None:
    new, old = analyze(trace, ttl_s, track), analyze_reference(trace, ttl_s, track)
    assert new.hits_at.tolist() == old["hits_at"]
    assert new.distance_counts.tolist() == old["distance_counts"]
    assert new.block_saved_tokens.tolist() == old["block_saved_tokens"]
    assert new.block_hits.tolist() == old["block_hits"]
    assert (new.cold_accesses, new.input_tokens, new.num_block_accesses) == (
        old["cold_accesses"], old["input_tokens"], old["accesses"])
    assert (None if new.ttl_hits_at is None else new.ttl_hits_at.tolist()) == old["ttl_hits_at"]
    assert new.tracked == old["tracked"]


def _lines(objs) -> str:
    return "\n".join(json.dumps(o) for o in objs)


request = st.tuples(st.lists(st.integers(0, 3), min_size=0, max_size=7), st.integers(0, 40),
                    st.integers(0, 90_000))


@settings(max_examples=120, deadline=None)
@given(st.lists(request, min_size=1, max_size=30), st.sampled_from([None, 30.0, 120.0]), st.integers(1, 9))
def test_random_prefix_trees(reqs, ttl_s, block_size):
    assert_same(tree_trace(reqs, block_size), ttl_s)


def test_generated_trace_with_ttl():
    trace = parse_trace(_lines(generate(WorkloadGenConfig(num_requests=1200, block_size=64, seed=5))), 64)
    assert trace.num_blocks > 1024
    assert_same(trace, 90.0, (0, 100, 1000))
    assert_same(trace, None, ())


def test_few_blocks_many_touches_wrap_the_tree_times():
    # 40 distinct blocks touched 30,000 times: the 1,024-slot tree renumbers its times about 30 times.
    rng = random.Random(1)
    lines = []
    for i in range(6000):
        head = rng.randrange(8)
        chain = [head] + [8 + head * 4 + k for k in range(rng.randrange(5))]
        lines.append({"hash_ids": chain, "input_length": 10 * len(chain) - rng.randrange(3), "timestamp": i * 7})
    trace = parse_trace(_lines(lines), 10)
    assert trace.num_blocks <= 40 and sum(len(r.blocks) for r in trace.requests) > 15_000
    assert_same(trace, 0.2)


def test_hashed_token_lines():
    rng = random.Random(2)
    prompts = [[rng.randrange(3) for _ in range(rng.randrange(1, 60))] for _ in range(200)]
    assert_same(parse_trace(_lines({"token_ids": p} for p in prompts), 4), None)


def test_columns_keep_the_trace():
    trace = parse_trace(_lines(generate(WorkloadGenConfig(num_requests=50, block_size=32, seed=1))), 32)
    cols = from_trace(trace)
    assert cols.num_requests == 50 and cols.num_blocks == trace.num_blocks and cols.has_timestamps
    for r, req in enumerate(trace.requests):
        assert tuple(cols.blocks[cols.offsets[r]:cols.offsets[r + 1]].tolist()) == req.blocks
        assert (cols.input_tokens[r], cols.lookup_blocks[r], cols.full_blocks[r]) == (
            req.input_tokens, req.lookup_blocks, req.full_blocks)
    assert cols.parent.tolist() == trace.block_parent and cols.label(0) == trace.block_labels[0]
