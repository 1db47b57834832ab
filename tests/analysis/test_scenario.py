"""Scenario player: the state at step k is the replay of the first k steps' events, equals the live
manager after k steps, and the views (block tables, touched blocks, counters) read that state."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.analysis.scenarios.block_trace import run_trace
from kvviz.analysis.scenarios.load import (
    SCENARIO_DIR,
    builtin_names,
    load_builtin,
    parse_scenario,
    parse_scenario_text,
    tokenize_scenario,
)
from kvviz.analysis.scenarios.play import block_owner_spans, play_scenario, scenario_state
from kvviz.analysis.scenarios.records import (
    Scenario,
    ScenarioError,
    ScenarioStep,
    next_request_id,
    running_ids,
    user_request_steps,
)
from kvviz.mirror.events import EventKind
from kvviz.mirror.replay import replay

BUILTINS = builtin_names()


def live_snapshot(scenario: Scenario, k: int):
    """The manager's own state after running only the first k steps (no event replay involved)."""
    manager = scenario.new_manager()
    run_trace(replace(scenario, steps=scenario.steps[:k]).trace(), manager)
    manager.block_pool.check_invariants()
    return manager.snapshot()


def test_builtins_exist_in_display_order():
    assert BUILTINS[:4] == ["shared_prompt", "tenant_salts", "pool_pressure", "branching_prompts"]
    for name in BUILTINS:
        s = load_builtin(name)
        assert 8 <= s.num_blocks <= 64 and s.block_size == 16 and s.title and s.description
        assert all(st.pieces is not None and len(st.pieces) == len(st.tokens) for st in s.steps if st.op != "free")


@pytest.mark.parametrize("name", BUILTINS)
def test_state_at_k_is_the_replay_of_the_first_k_steps_and_the_live_manager(name):
    scenario = load_builtin(name)
    run = play_scenario(scenario)
    assert run.bounds[0] == 0 and list(run.bounds) == sorted(run.bounds) and run.bounds[-1] == len(run.events)
    assert sum(len(run.events_of_step(k)) for k in range(run.num_steps + 1)) == len(run.events)
    for k in range(run.num_steps + 1):
        state = run.state_at(k)
        assert state == replay(scenario.num_blocks, run.events[: run.bounds[k]], scenario.block_size)
        assert state == live_snapshot(scenario, k), f"step {k}"
        assert state.num_events == run.bounds[k]
    assert run.state_at(run.num_steps) == run.final_snapshot


def test_step_zero_is_an_empty_pool():
    run = play_scenario(load_builtin("shared_prompt"))
    view = run.view_at(0)
    assert view.action is None and view.events == () and view.requests == ()
    assert view.state.free_queue == tuple(range(1, 25)) and view.next_eviction == 1  # 0: the null block
    assert view.counters["hit_tokens"] == 0 and view.counters["free_blocks"] == 24


def test_shared_prompt_blocks_are_shared_with_ref_cnt_4():
    run = play_scenario(load_builtin("shared_prompt"))
    view = run.view_at(6)  # u4 arrives while u1, u2, u3 run
    assert view.action.id == "u4" and view.counters["shared_blocks"] == 4
    assert [view.state.ref_cnt[b] for b in range(1, 5)] == [4, 4, 4, 4]
    u4 = next(r for r in view.requests if r.request_id == "u4")
    assert [row.source for row in u4.rows[:4]] == ["hit"] * 4 and u4.hit_tokens == 64
    assert u4.rows[0].label == "tokens 1-16 -> block 1" and u4.rows[0].excerpt.startswith("<|im_start|>system")
    assert u4.rows[-1].hash is None  # the partly filled last block is never cached
    assert u4.rows[-1].source == "new" and u4.rows[-1].shown_source == "partial"
    assert [row.shown_source for row in u4.rows[:4]] == ["hit"] * 4
    kinds = {e.kind for e in view.events}
    assert kinds == {EventKind.HIT, EventKind.MISS, EventKind.TOUCH, EventKind.ALLOCATE, EventKind.CACHE}
    assert set(view.touched[1]) == {"hit", "touch"}
    # u5 asks u1's question after everyone left: a hit straight out of the free queue
    view = run.view_at(13)
    assert view.action.id == "u5" and view.counters["running"] == 1
    u5 = view.requests[0]
    assert u5.hit_tokens == 64 and [r.source for r in u5.rows[:4]] == ["hit"] * 4


def test_salts_isolate_tenants():
    run = play_scenario(load_builtin("tenant_salts"))
    acme1 = run.view_at(1).requests[0]
    globex1 = next(r for r in run.view_at(2).requests if r.request_id == "globex-1")
    assert globex1.hit_tokens == 0 and globex1.salt == "globex"
    assert {r.block_id for r in acme1.rows}.isdisjoint({r.block_id for r in globex1.rows})
    assert acme1.rows[0].hash != globex1.rows[0].hash
    acme2 = next(r for r in run.view_at(3).requests if r.request_id == "acme-2")
    assert acme2.hit_tokens == 48 and [r.block_id for r in acme2.rows[:3]] == [r.block_id for r in acme1.rows[:3]]
    anon = next(r for r in run.view_at(5).requests if r.request_id == "anon-1")
    assert anon.hit_tokens == 0 and anon.salt is None


def test_pool_pressure_evicts_tail_first_and_refuses_without_change():
    scenario = load_builtin("pool_pressure")
    run = play_scenario(scenario)
    after_free = run.state_at(3)
    # report-1's partial last block (no hash) jumps to the head, ahead of the never-used block 12;
    # its cached blocks go to the tail, last block first (vLLM's free_blocks split).
    assert after_free.free_queue[:3] == (11, 12, 10)
    assert after_free.free_queue[-1] == 1  # its first block is evicted last
    letter = run.view_at(4)
    evicted = [b for e in letter.events if e.kind is EventKind.EVICT for b in e.block_ids]
    assert evicted == [10, 9, 8] and letter.counters["evictions"] == 3
    owners = block_owner_spans(scenario, run)
    assert owners[after_free.block_hash[8]] == ("report-1", 112, 128)
    report2 = run.view_at(7).requests[0]
    assert report2.request_id == "report-2" and report2.hit_tokens == 96  # the head survived
    refused = run.view_at(9)
    assert refused.error == "refuse" and [e.kind for e in refused.events] == [EventKind.REFUSE]
    before = run.state_at(8)
    assert refused.state.ref_cnt == before.ref_cnt and refused.state.free_queue == before.free_queue
    assert refused.counters["refused"] == 1


def test_fingerprint_names_the_content():
    """Equal scenarios (a fresh load) share a fingerprint; any changed field or step changes it."""
    a, b = load_builtin("shared_prompt"), load_builtin("shared_prompt")
    assert a is not b and a.fingerprint == b.fingerprint and len(a.fingerprint) == 64
    first = a.steps[0]
    changed = [
        replace(a, num_blocks=a.num_blocks + 1),
        replace(a, seed="other"),
        replace(a, steps=a.steps[:-1]),
        replace(a, steps=(replace(first, tokens=(*first.tokens[:-1], first.tokens[-1] + 1)), *a.steps[1:])),
        replace(a, steps=(replace(first, salt="tenant-b"), *a.steps[1:])),
    ]
    assert len({a.fingerprint, *(c.fingerprint for c in changed)}) == 1 + len(changed)
    assert load_builtin("tenant_salts").fingerprint != a.fingerprint


def test_to_dict_is_json_and_complete():
    view = scenario_state(load_builtin("shared_prompt"), 4)
    data = json.loads(json.dumps(view.to_dict()))
    assert set(data) == {"scenario", "title", "block_size", "num_blocks", "step", "num_steps", "action", "error",
                         "block_tables", "pool", "free_queue", "next_eviction", "events", "counters"}
    assert data["step"] == 4 and data["action"]["id"] == "u3" and set(data["block_tables"]) == {"u1", "u2", "u3"}
    assert data["next_eviction"] == data["free_queue"][0]
    assert len(data["pool"]) == 25 and {b["state"] for b in data["pool"]} <= {"null", "used", "cached", "free"}
    assert data["pool"][0]["state"] == "null"
    assert data["block_tables"]["u3"]["block_table"][0]["tokens"] == "1-16"
    assert data["counters"]["shared_blocks"] == 4


def test_step_out_of_range_and_bad_types():
    run = play_scenario(load_builtin("tenant_salts"))
    for bad in (-1, run.num_steps + 1, True, "2", 1.5):
        with pytest.raises(ScenarioError, match="step must be an integer in 0..10"):
            run.view_at(bad)


def test_parse_round_trip_and_errors():
    scenario = load_builtin("tenant_salts")
    assert parse_scenario(scenario.to_dict()) == scenario
    bad = [
        ([], "a scenario is a JSON object"),
        ({"num_blocks": 4}, "missing 'steps'"),
        ({"num_blocks": 4, "steps": [], "colour": 1}, "unknown scenario key"),
        ({"num_blocks": 999, "steps": []}, "at most 256"),
        ({"num_blocks": 4, "steps": [{"op": "jump", "id": "a"}]}, "step 1: 'op' must be one of"),
        ({"num_blocks": 4, "steps": [{"op": "add", "id": "a", "tokens": [1], "x": 2}]}, "step 1: unknown key"),
        ({"num_blocks": 4, "steps": [{"op": "add", "id": "a", "tokens": [1, 2], "pieces": ["a"]}]},
         "one entry per token"),
        ({"num_blocks": 4, "steps": [{"op": "add", "id": "a", "text": "hi"}]}, "tokenize the scenario first"),
        ({"num_blocks": 4, "steps": [{"op": "add", "id": "a", "tokens": [-1]}]}, "step 1: token 0 is out of range"),
        ({"num_blocks": 4, "user_template": "no placeholder", "steps": []}, "must contain"),
    ]
    for obj, message in bad:
        with pytest.raises(ScenarioError, match=message):
            parse_scenario(obj)
    with pytest.raises(ScenarioError, match="not valid JSON"):
        parse_scenario_text(b"{nope")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        parse_scenario_text(b"\xff\xfe")
    impossible = parse_scenario({"num_blocks": 4, "steps": [{"op": "free", "id": "ghost"}]})
    with pytest.raises(ScenarioError, match=r"step 1: free .ghost.: unknown request"):
        play_scenario(impossible)
    with pytest.raises(ScenarioError, match="unknown scenario 'nope'; built-in: shared_prompt"):
        load_builtin("nope")


def test_a_plain_trace_is_a_scenario():
    scenario = parse_scenario(json.loads((SCENARIO_DIR.parent / "traces" / "tail_first_eviction.json").read_text()))
    run = play_scenario(scenario)
    view = run.view_at(3)
    assert scenario.title == "Tail blocks are evicted first"
    assert [b for e in view.events if e.kind is EventKind.EVICT for b in e.block_ids] == [3]


def test_user_request_steps_append_and_compose():
    scenario = load_builtin("shared_prompt")
    prompt = scenario.compose_prompt("Is the app free?")
    assert prompt.startswith(scenario.prefix_text) and "<|im_start|>user\nIs the app free?<|im_end|>" in prompt
    assert scenario.compose_prompt("raw", with_prefix=False) == "raw"
    rid = next_request_id(scenario)
    assert rid == "you1"
    u1 = scenario.steps[0]
    steps = user_request_steps(rid, u1.tokens, u1.pieces, salt="eve", answer_tokens=[5, 6], answer_pieces=["a", "b"],
                               finish=True)
    assert [s.op for s in steps] == ["add", "append", "free"] and steps[0].salt == "eve"
    longer = scenario.with_steps(steps)
    assert next_request_id(longer) == "you2" and "you1" not in running_ids(longer)
    run = play_scenario(longer)
    arrival = run.view_at(scenario.num_steps + 1)
    you = next(r for r in arrival.requests if r.request_id == "you1")
    assert you.hit_tokens == 0 and you.salt == "eve"  # another salt: u1's cached blocks are not hers
    same = play_scenario(scenario.with_steps(user_request_steps("you1", u1.tokens))).view_at(scenario.num_steps + 1)
    assert next(r for r in same.requests if r.request_id == "you1").hit_tokens == 64
    with pytest.raises(ScenarioError, match="no tokens"):
        user_request_steps("x", [])
    with pytest.raises(ScenarioError, match="more than 4,096 tokens"):
        user_request_steps("x", [1] * 4097)
    dup = scenario.with_steps([ScenarioStep("add", "x", (1,)), ScenarioStep("add", "x", (2,))])
    with pytest.raises(ScenarioError, match="already running"):
        play_scenario(dup)


def test_tokenize_scenario_fills_tokens_and_pieces():
    obj = {"num_blocks": 4, "block_size": 2, "steps": [{"op": "add", "id": "a", "text": "ab c"}, {"op": "free", "id": "a"}]}

    def fake(text):
        return [ord(ch) for ch in text], list(text)

    filled = tokenize_scenario(obj, fake)
    assert filled["steps"][0]["tokens"] == [97, 98, 32, 99] and filled["steps"][0]["pieces"] == ["a", "b", " ", "c"]
    assert "tokens" not in obj["steps"][0]  # the input is not modified
    assert parse_scenario(obj, tokenizer=fake).steps[0].tokens == (97, 98, 32, 99)


# ----------------------------------------------------------------------------- random scenarios

@st.composite
def scenarios(draw):
    block_size = draw(st.integers(1, 4))
    num_blocks = draw(st.integers(2, 10))
    steps: list[ScenarioStep] = []
    running: list[str] = []
    next_id = 0
    for _ in range(draw(st.integers(1, 14))):
        choice = draw(st.sampled_from(["add", "add", "append", "free"]))
        if choice == "add" or not running:
            rid = f"r{next_id}"
            next_id += 1
            tokens = tuple(draw(st.lists(st.integers(0, 2), min_size=1, max_size=12)))
            steps.append(ScenarioStep("add", rid, tokens, draw(st.sampled_from([None, None, "t"]))))
            running.append(rid)
        elif choice == "append":
            rid = draw(st.sampled_from(running))
            steps.append(ScenarioStep("append", rid, tuple(draw(st.lists(st.integers(0, 2), min_size=1, max_size=5)))))
        else:
            rid = draw(st.sampled_from(running))
            running.remove(rid)
            steps.append(ScenarioStep("free", rid))
    return Scenario("random", "random", "", num_blocks, tuple(steps), block_size=block_size)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_scenarios_replay_equals_live_manager(scenario):
    run = play_scenario(scenario)
    for k in range(run.num_steps + 1):
        state = run.state_at(k)
        assert state == live_snapshot(scenario, k)
        view = run.view_at(k)
        for req in view.requests:
            assert [row.block_id for row in req.rows] == list(state.requests[req.request_id].block_ids)
            for row in req.rows:
                assert row.ref_cnt == state.ref_cnt[row.block_id] >= 1
                assert row.source in ("hit", "new")
        assert sum(1 for b in state.blocks if b.ref_cnt > 1) == view.counters["shared_blocks"]
