"""Radix tree vs block pool vs sliding window over one history: reuse, partial tails, evictions, capacity."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from kvviz.analysis.radix_compare import compare_radix_pool
from kvviz.analysis.scenarios.load import load_builtin, parse_scenario
from kvviz.analysis.scenarios.play import play_scenario
from kvviz.analysis.scenarios.records import Scenario, ScenarioError, ScenarioStep
from kvviz.mirror.radix_engine import RadixEngine
from tests.analysis.test_scenario import scenarios


def make(num_blocks: int, block_size: int, *steps: tuple) -> Scenario:
    return Scenario("t", "t", "", num_blocks, tuple(ScenarioStep(*s) for s in steps), block_size=block_size)


def test_vllm_example_radix_reuses_the_partial_tail():
    # vLLM's documented example: block 4, A = 1..12, B = 1..10, 13, 14 -> 10 tokens match, 8 reused.
    s = make(16, 4, ("add", "A", tuple(range(1, 13))), ("add", "B", tuple(range(1, 11)) + (13, 14)))
    c = compare_radix_pool(s, sliding_window=8)
    a, b = c.requests
    assert (a.radix_tokens, a.pool_tokens) == (0, 0)
    assert b.history_prefix_tokens == 10 and b.radix_tokens == 10 and b.pool_tokens == 8
    assert b.partial_tail_tokens == 2 and b.aligned_radix_tokens == 8 and b.eviction_gap_tokens == 0
    # window 8: a hit needs cdiv(7, 4) = 2 blocks; both are found, so nothing is skipped
    assert b.window_tokens == 8 and b.window_block_ids == c.pool_run.state_at(2).requests["B"].block_ids[:2]


def test_capped_at_num_tokens_minus_one():
    s = make(16, 4, ("add", "A", tuple(range(8))), ("free", "A"), ("add", "B", tuple(range(8))))
    b = compare_radix_pool(s, 8).requests[1]
    assert b.radix_tokens == 7 and b.pool_tokens == 4 and b.partial_tail_tokens == 3


def test_salts_are_separate_namespaces_in_both():
    s = make(16, 4, ("add", "a", tuple(range(12)), "x"), ("add", "b", tuple(range(12)), "y"),
             ("add", "c", tuple(range(12)), "x"))
    c = compare_radix_pool(s, 8)
    _, b, cc = c.requests
    assert (b.radix_tokens, b.pool_tokens, b.history_prefix_tokens) == (0, 0, 0)
    assert (cc.radix_tokens, cc.pool_tokens) == (11, 8)
    roots = [n for n in c.radix_states[3].nodes if n.parent_id == 0]
    assert sorted(n.extra_key for n in roots) == ["x", "y"]


def test_branching_tree_and_chain():
    c = compare_radix_pool(load_builtin("branching_prompts"), 32)
    by_id = {r.request_id: r for r in c.requests}
    assert by_id["a-end"].radix_tokens == 77 and by_id["a-end"].pool_tokens == 64
    assert by_id["b-cat"].radix_tokens == 25 and by_id["b-cat"].pool_tokens == 16
    state = c.radix_states[5]  # a-end and b-cat running: the tree branches twice
    branching = [n for n in state.nodes if sum(1 for m in state.nodes if m.parent_id == n.id) > 1]
    assert len(branching) >= 2
    locked = [n for n in state.nodes if n.lock_ref > 0 and n.parent_id is not None]
    assert locked and all(n.id not in state.lru_leaves for n in locked)
    chain = c.chain_at(5)
    by_hash = {n.hash: n for n in chain if n.hash is not None}
    for node in chain:
        if node.parent is not None and node.parent in by_hash:
            assert by_hash[node.parent].index == node.index - 1
        if node.index == 0:
            assert node.parent is None
    # the two requests' chains share block 0 only (their prompts diverge inside block 1)
    pool = c.pool_run.state_at(5)
    assert pool.ref_cnt[1] == 2 and pool.requests["a-end"].block_ids[1] != pool.requests["b-cat"].block_ids[1]
    assert any(n.hash is None for n in chain)  # the partly filled last blocks of running requests


def test_totals_and_default_step_the_radix_page_shows():
    scenario = load_builtin("branching_prompts")
    k = scenario.last_arrival_step
    assert scenario.steps[k - 1].op == "add" and all(s.op != "add" for s in scenario.steps[k:])
    c = compare_radix_pool(scenario, 32)
    requests = c.requests_until(k)
    totals = c.reuse_totals(k)
    assert totals == {"radix": 260, "pool": 208, "window": 224, "tail": 36}  # the radix page's metrics
    assert totals["radix"] == sum(r.radix_tokens or 0 for r in requests)
    assert totals["radix"] - totals["tail"] >= totals["pool"]  # the pool reuses whole blocks only
    assert c.reuse_totals(0) == {"radix": 0, "pool": 0, "window": 0, "tail": 0}
    for r in requests:
        assert 0 <= r.window_kept_blocks <= len(r.window_block_ids)
    assert any(r.window_kept_blocks < len(r.window_block_ids) for r in requests)  # some blocks skipped


def test_eviction_radix_drops_whole_lru_leaf_pool_evicts_tail_first():
    c = compare_radix_pool(load_builtin("pool_pressure"), 32)
    at4 = c.evictions[4]
    radix = [e for e in at4 if e.engine == "radix"]
    pool = [e for e in at4 if e.engine == "pool"]
    assert [e.node_or_block for e in pool] == [10, 9, 8]  # report-1's tail blocks, last first
    assert [(e.start, e.end) for e in pool] == [(144, 160), (128, 144), (112, 128)]
    assert sum(e.num_tokens for e in radix) >= 74 - c.radix_states[3].free_tokens
    assert all(e.request_id == "report-1" for e in radix + pool)
    report2 = next(r for r in c.requests if r.request_id == "report-2")
    assert report2.pool_tokens == 96 and report2.radix_tokens < report2.pool_tokens
    assert report2.eviction_gap_tokens < 0  # the tree lost what the pool kept
    letter2 = next(r for r in c.requests if r.request_id == "letter-2")
    assert letter2.radix_tokens is None and letter2.pool_tokens is None and c.radix_errors[9]


def test_sliding_window_skips_blocks_outside_the_window():
    c = compare_radix_pool(load_builtin("pool_pressure"), 32)
    report2 = next(r for r in c.requests if r.request_id == "report-2")
    ids = report2.window_block_ids
    assert report2.window_tokens == len(ids) * 16 and ids[-2:].count(None) == 0
    assert ids.count(None) == len(ids) - 2  # only cdiv(31, 16) = 2 blocks are kept
    window_state = c.window_run.state_at(7)
    assert window_state.requests["report-2"].block_ids[: len(ids)] == ids


def test_radix_engine_respects_capacity_and_locks():
    engine = RadixEngine(10)
    assert engine.add("a", [1, 2, 3, 4, 5, 6], None)[0] == 0
    reused, evicted, error = engine.add("b", [7, 8, 9, 10, 11], None)
    assert reused is None and "needs 5 token slot(s) but only 4 are free" in error and evicted == []
    engine.free("a")
    reused, evicted, error = engine.add("b", [7, 8, 9, 10, 11], None)
    assert error is None and [(e.start, e.end) for e in evicted] == [(0, 6)]
    assert engine.state().tree_tokens + engine.state().private_tokens <= 10
    assert engine.append("b", [1, 2, 3, 4, 5, 6])[2] is not None  # no room and nothing evictable
    ok, _, _ = engine.append("b", [1, 2])
    assert ok and engine.state().private_tokens == 2


def test_to_dict_and_settings():
    c = compare_radix_pool(load_builtin("shared_prompt"), 48, 4)
    data = json.loads(json.dumps(c.to_dict(6)))
    assert data["step"] == 6 and data["sliding_window"] == 48 and data["radix_page_size"] == 4
    assert [r["request_id"] for r in data["requests"]] == ["u1", "u2", "u3", "u4"]
    assert data["radix"]["tree_tokens"] + data["radix"]["private_tokens"] <= data["capacity_tokens"]
    assert all(r["radix_tokens"] % 4 == 0 for r in data["requests"])  # page size 4: whole pages only
    for bad in ({"sliding_window": 1}, {"sliding_window": True}, {"radix_page_size": 0}):
        with pytest.raises(ScenarioError):
            compare_radix_pool(load_builtin("shared_prompt"), **{"sliding_window": 32, **bad})


def test_text_of_node_runs():
    c = compare_radix_pool(load_builtin("shared_prompt"), 32)
    state = c.radix_states[2]
    first = next(n for n in state.nodes if n.parent_id == 0)
    assert c.text_of(first.start, first.tokens_preview, first.num_tokens).startswith("<|im_start|>system\nYou are")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_histories_keep_every_engine_consistent(scenario):
    c = compare_radix_pool(scenario, sliding_window=3)
    assert c.pool_run.events == play_scenario(scenario, sliding_window=None).events
    for state in c.radix_states:
        assert 0 <= state.tree_tokens + state.private_tokens <= state.capacity
        assert state.evictable_tokens + state.protected_tokens == state.tree_tokens
    for r in c.requests:
        if r.radix_tokens is not None:
            assert r.radix_tokens <= r.history_prefix_tokens <= r.num_tokens - 1
            assert 0 <= r.partial_tail_tokens < scenario.block_size
        if r.pool_tokens is not None:
            assert r.pool_tokens % scenario.block_size == 0 and r.pool_tokens <= r.num_tokens - 1
            # whole blocks of the same chain: never more than the token-level shared prefix
            assert r.pool_tokens <= r.history_prefix_tokens


def test_parse_json_scenario_round_trips_through_comparison():
    obj = {"num_blocks": 6, "block_size": 2, "steps": [
        {"op": "add", "id": "a", "tokens": [1, 2, 3, 4, 5]}, {"op": "free", "id": "a"},
        {"op": "add", "id": "b", "tokens": [1, 2, 3, 9]}]}
    c = compare_radix_pool(parse_scenario(obj), 4)
    assert [(r.radix_tokens, r.pool_tokens, r.partial_tail_tokens) for r in c.requests] == [(0, 0, 0), (3, 2, 1)]
