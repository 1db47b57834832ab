"""Session cost maths: provider checkpoints, TTLs, the engine view, events, quadratic vs linear work.

Most tests use a character-level stand-in tokenizer (one token per character) so lengths are
hand-checkable and no model is loaded; one test runs the real tokenizer on the built-in examples.
"""

from __future__ import annotations

import json

import pytest

from kvviz.analysis.providers import POLICIES, SOURCE_NAMES, USAGE_FIELDS, get_policy
from kvviz.experiments.sessions import (
    SessionError,
    SessionEvents,
    apply_events,
    cumulative_work,
    example_names,
    load_example,
    load_session_text,
    projected_work,
    render_request,
    run_session,
    session_from_dict,
)
from kvviz_app.shell.i18n import texts

USAGE_LABELS = texts("sessions").USAGE_LABELS


def chars(text: str) -> list[int]:
    return [ord(c) for c in text]


def tiny(gaps=(0, 30, 30, 30), **extra) -> dict:
    turns = [{"user": f"question {i}", "answer": f"answer number {i}", "gap_s": g} for i, g in enumerate(gaps, 1)]
    turns[1]["tool_calls"] = [{"name": "lookup", "arguments": {"a": 1, "b": 2, "c": 3, "d": 4}}]
    return {"name": "tiny", "system": "Be brief. " * 20, "tools": [{"name": "lookup"}], "turns": turns, **extra}


def run(policy="anthropic-5m", events=None, data=None, **kw):
    return run_session(session_from_dict(data or tiny()), policy, events or SessionEvents(), tokenizer=chars,
                       min_cacheable_tokens=kw.pop("min_cacheable_tokens", 0), **kw)


def test_usage_fields_add_up_and_cumulative_sums_match():
    for policy in POLICIES:
        res = run(policy)
        for t in res.turns:
            assert sum(t.usage().values()) == t.prompt_tokens
            assert min(t.usage().values()) >= 0
        without, with_cache = cumulative_work(res.turns)
        assert without[-1] == sum(t.prompt_tokens for t in res.turns)
        assert with_cache[-1] == sum(t.computed_tokens for t in res.turns)


def test_moving_checkpoint_reads_previous_prompt_writes_the_increment():
    """The seed's picture: turn k reads all of turn k-1's prompt and writes answer k-1 + question k."""
    res = run("anthropic-5m")
    t = res.turns
    assert (t[0].cache_read_input_tokens, t[0].cache_creation_input_tokens) == (0, t[0].prompt_tokens)
    for prev, cur in zip(t, t[1:], strict=False):
        assert cur.cache_read_input_tokens == prev.prompt_tokens
        assert cur.cache_creation_input_tokens == cur.prompt_tokens - prev.prompt_tokens
        assert cur.input_tokens == 0
        assert cur.common_prefix == prev.prompt_tokens + prev.answer_tokens  # append-only


def test_entries_exist_only_at_marks():
    res = run("anthropic-5m", marks=("system",))
    system_end = next(s.end for s in res.turns[0].segments if s.kind == "system")
    assert res.turns[0].cache_creation_input_tokens == system_end
    for t in res.turns[1:]:
        # stable text after the mark is never reused: no entry exists there
        assert (t.cache_read_input_tokens, t.cache_creation_input_tokens) == (system_end, 0)
        assert t.input_tokens == t.prompt_tokens - system_end


def test_minimum_cacheable_length_means_both_cache_fields_zero():
    res = run("anthropic-5m", min_cacheable_tokens=10_000)
    assert all(t.cache_read_input_tokens == t.cache_creation_input_tokens == 0 for t in res.turns)
    assert all(t.input_tokens == t.prompt_tokens for t in res.turns)


def test_ttl_expires_after_a_pause_but_hits_refresh_it():
    # gaps of 200 s under a 300 s TTL: every hit refreshes the entry, so 600 s in, it still reads
    steady = run("anthropic-5m", data=tiny(gaps=(0, 200, 200, 200)))
    assert all(t.cache_read_input_tokens > 0 for t in steady.turns[1:])
    paused = run("anthropic-5m", SessionEvents(pause_at=3, pause_s=301))
    t3 = paused.turns[2]
    assert t3.at_s == 30 + 301 and t3.events == ("long_pause",)
    assert t3.cache_read_input_tokens == 0 and t3.expired_entries > 0
    assert t3.cache_creation_input_tokens == t3.prompt_tokens
    assert paused.turns[3].cache_read_input_tokens == t3.prompt_tokens  # cached again afterwards
    assert run("anthropic-1h", SessionEvents(pause_at=3, pause_s=301)).turns[2].cache_read_input_tokens > 0
    # the engine has no TTL at all
    assert run("vllm", SessionEvents(pause_at=3, pause_s=86_400)).turns[2].cache_read_input_tokens > 0


def test_turn_reasons_and_gaps_the_usage_table_shows():
    steady = run("anthropic-5m")
    assert [steady.turn_reasons(t) for t in steady.turns] == [("first",), ("append",), ("append",), ("append",)]
    assert [steady.gap_before(t.turn) for t in steady.turns] == [None, 30, 30, 30]
    paused = run("anthropic-5m", SessionEvents(pause_at=3, pause_s=301))
    assert paused.turn_reasons(paused.turns[2]) == ("expired",) and paused.gap_before(3) == 301
    restarted = run("anthropic-5m", SessionEvents(restart_tools_at=3))
    assert restarted.turn_reasons(restarted.turns[2]) == ("diff",)
    small = run("anthropic-5m", min_cacheable_tokens=10_000)
    assert small.turn_reasons(small.turns[0]) == ("first", "below_min")
    assert small.turn_reasons(small.turns[1]) == ("below_min",)
    engine = run("vllm", min_cacheable_tokens=10_000)  # the engine has no minimum: not a reason there
    assert "below_min" not in engine.turn_reasons(engine.turns[1])


def test_restart_with_changed_tools_misses_from_the_start():
    res = run("anthropic-5m", SessionEvents(restart_tools_at=3))
    t3 = res.turns[2]
    assert t3.first_difference == "tools" and t3.cache_read_input_tokens == 0
    eng = run("vllm", SessionEvents(restart_tools_at=3)).turns[2]
    # only the chat header before the first tool definition survives
    assert eng.cache_read_input_tokens <= eng.common_prefix < res.turns[1].prompt_tokens // 4


def test_file_read_lands_at_the_end_and_is_cheap():
    base = run("anthropic-5m")
    res = run("anthropic-5m", SessionEvents(file_read_at=3))
    t2, t3 = res.turns[1], res.turns[2]
    assert t3.first_difference is None  # nothing earlier changed
    assert t3.cache_read_input_tokens == t2.prompt_tokens
    assert t3.prompt_tokens > base.turns[2].prompt_tokens
    assert any(s.label == "file read" for s in t3.segments)


def test_unstable_json_key_order_reuses_only_up_to_the_checkpoint_before_it():
    res = run("anthropic-5m", SessionEvents(unstable_json=True))
    system_end = next(s.end for s in res.turns[0].segments if s.kind == "system")
    t2, t3, t4 = res.turns[1:4]
    # answer 2 holds the tool call; request 3 re-serialises it after turn 2's checkpoint (still read),
    # request 4 re-serialises it in another order, so the prompt differs inside answer 2
    assert t3.cache_read_input_tokens == t2.prompt_tokens
    assert t4.first_difference == "answer 2"
    assert t4.cache_read_input_tokens == t2.prompt_tokens  # the nearest checkpoint before the difference
    assert system_end < t2.prompt_tokens
    stable = run("anthropic-5m")
    assert stable.turns[3].cache_read_input_tokens == stable.turns[2].prompt_tokens


def test_unstable_json_changes_key_order_only():
    session = session_from_dict(tiny())
    a = render_request(session, 3, SessionEvents(unstable_json=True))[0]
    b = render_request(session, 4, SessionEvents(unstable_json=True))[0]
    ans_a = next(s.text for s in a if s.label == "answer 2")
    ans_b = next(s.text for s in b if s.label == "answer 2")
    assert ans_a != ans_b and sorted(ans_a) == sorted(ans_b)


def test_engine_view_is_block_granular_and_caches_answers():
    res = run("vllm", block_size=16)
    for t in res.turns:
        assert t.cache_read_input_tokens % 16 == 0 and t.cache_creation_input_tokens % 16 == 0
        assert t.input_tokens < 16 + 1  # only the partly filled last block (or the capped last token)
        assert t.cache_read_input_tokens <= t.common_prefix
    # the previous answer was decoded into cached blocks, so the engine reads past the old prompt
    assert res.turns[1].cache_read_input_tokens > res.turns[0].prompt_tokens


def test_projection_is_quadratic_without_cache_and_linear_with_it():
    without, with_cache = projected_work(100, 10, 4)
    assert without == [100, 210, 330, 460]
    assert with_cache == [100, 110, 120, 130]
    w50, c50 = projected_work(1000, 200, 50)
    assert w50[-1] == 50 * 1000 + 200 * 50 * 49 // 2 and c50[-1] == 1000 + 49 * 200
    assert w50[-1] / c50[-1] > 20


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"system": "s", "turns": []}', "non-empty list"),
        ('{"system": "s", "turns": [{"answer": "a"}]}', "'user' message or 'tool_results'"),
        ('{"system": "s", "turns": [{"user": "u", "answer": "a", "gap_s": -5}]}', "gap_s"),
        ('{"system": "", "turns": [{"user": "u", "answer": "a"}]}', "'system'"),
    ],
)
def test_bad_session_files_give_one_line_errors(text, message):
    with pytest.raises(SessionError, match=message) as info:
        load_session_text(text)
    assert "\n" not in str(info.value)


def test_bad_options_are_rejected():
    session = session_from_dict(tiny())
    with pytest.raises(SessionError, match="turn number"):
        apply_events(session, SessionEvents(restart_tools_at=99))
    with pytest.raises(ValueError, match="unknown policy"):
        get_policy("gemini")
    with pytest.raises(SessionError, match="mark"):
        run(marks=("middle",))
    with pytest.raises(SessionError, match="pool is too small"):
        run("vllm", pool_blocks=4)


def test_policies_are_dated_sourced_and_labelled_as_policy():
    assert USAGE_FIELDS == ("cache_read_input_tokens", "cache_creation_input_tokens", "input_tokens")
    for p in POLICIES.values():
        assert p.values and all(v.source and v.as_of for v in p.values)
        assert p.sources_used and p.sources_used <= set(SOURCE_NAMES)  # every cited source is named
        assert p.is_policy == (p.key != "vllm")
    assert set(USAGE_LABELS) == set(USAGE_FIELDS)  # every usage field has words for the chart legend
    assert get_policy("anthropic-5m").ttl_s == 300 and get_policy("anthropic-1h").ttl_s == 3600
    assert get_policy("openai-newer").ttl_s == 1800 and get_policy("vllm").ttl_s is None


def test_examples_with_the_real_tokenizer():
    assert {"chat", "agent"} <= set(example_names())
    chat = run_session(load_example("chat"), "anthropic-5m")
    assert chat.turns[0].cache_creation_input_tokens == chat.turns[0].prompt_tokens > 1024
    assert chat.turns[1].cache_read_input_tokens == chat.turns[0].prompt_tokens
    agent = run_session(load_example("agent"), "vllm", SessionEvents(restart_tools_at=5))
    assert agent.turns[4].first_difference == "tools"
    assert agent.turns[4].cache_read_input_tokens < 64 < agent.turns[5].cache_read_input_tokens
    assert json.dumps(agent.to_dict(segments=True))
