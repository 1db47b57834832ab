"""Replicas and routing: one replica is the single LRU cache under every policy; each policy's choice
follows its rule; prefix-aware routing keeps a prefix's hits that round-robin spreads away; consistent
hashing keeps a prefix on one replica; load imbalance is max over mean of prefill tokens."""

from __future__ import annotations

import json

import pytest

from kvviz.analysis.workload.columns import as_columns
from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.reuse_distance import analyze, replay_lru
from kvviz.analysis.workload.routing import POLICIES, route, routing_report


def _cols(lines, block_size=10):
    return as_columns(parse_trace("\n".join(json.dumps(x) for x in lines), block_size))


@pytest.fixture(scope="module")
def example():
    trace = parse_trace(EXAMPLE_PATH.read_bytes())
    return trace, as_columns(trace)


@pytest.mark.parametrize("policy", POLICIES)
def test_one_replica_is_the_single_cache(example, policy):
    trace, cols = example
    for cap in (50, 700):
        res = route(cols, 1, cap, policy)
        assert res.hit_tokens == sum(replay_lru(trace, cap)) == analyze(trace).hit_tokens(cap)
        assert res.load_imbalance == 1.0 and res.prefill_per_replica == (res.input_tokens - res.hit_tokens,)


def test_prefix_routing_keeps_a_shared_prefix_round_robin_spreads_it():
    # Prefixes A (blocks 1, 2) and B (3, 4) as A B B A A B B A ...; each replica holds one prefix (2 blocks).
    # Round-robin gives each replica A B A B ...: every request evicts the other prefix, no hit ever.
    # Prefix-aware routing sends A to the replica holding A: all hit after the first A and the first B.
    seq = [[1, 2] if i % 4 in (0, 3) else [3, 4] for i in range(40)]
    cols = _cols([{"hash_ids": ids, "input_length": 20} for ids in seq])
    assert route(cols, 2, 2, "round_robin").hit_tokens == 0
    assert route(cols, 2, 2, "prefix").hit_tokens == 38 * 20


def test_consistent_hash_keeps_one_prefix_on_one_replica():
    lines = [{"hash_ids": [7, 100 + i], "input_length": 20} for i in range(30)]
    res = route(_cols(lines), 4, 8, "consistent_hash")
    assert sorted(res.prefill_per_replica)[:3] == [0, 0, 0]  # all on one replica
    assert res.load_imbalance == 4.0 and res.hit_tokens == 29 * 10


def test_least_loaded_evens_the_load():
    lines = [{"hash_ids": [i], "input_length": 10 + 90 * (i % 3 == 0), "timestamp": i} for i in range(60)]
    cols = _cols(lines, 100)
    ll, rr = route(cols, 3, 10, "least_loaded"), route(cols, 3, 10, "round_robin")
    assert rr.load_imbalance > 2.0 and ll.load_imbalance < rr.load_imbalance


def test_report_rows_and_bad_arguments(example):
    _, cols = example
    out = routing_report(cols, [1, 2], ["round_robin", "prefix"], [100])
    assert [r["replicas"] for r in out["results"]["prefix"]] == [1, 2]
    assert set(out["results"]["round_robin"][0]) == {"policy", "replicas", "capacity_blocks", "hit_rate",
                                                     "prefill_tokens_saved", "load_imbalance"}
    with pytest.raises(ValueError, match="unknown routing policy"):
        route(cols, 2, 10, "random")
