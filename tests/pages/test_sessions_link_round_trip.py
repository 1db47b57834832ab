"""AppTest: a Sessions link opens with the numbers its sender saw (state -> URL -> state): the events,
their turns, the pause, the checkpoints and the minimum length travel in the link."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "sessions.py")


def _numbers(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _opened(query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def test_a_link_with_events_opens_at_the_senders_numbers():
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    before = _numbers(at)
    at.toggle(key="ss_ev_long_pause").set_value(True).run()
    at.number_input(key="ss_turn_long_pause").set_value(3).run()
    at.number_input(key="ss_pause_min").set_value(30.0).run()
    at.toggle(key="ss_ev_unstable_json").set_value(True).run()
    assert not at.exception
    sent = _numbers(at)
    assert sent != before  # the events changed the numbers: the test can see a lost event
    query = {k: v for k, v in at.query_params.items()}

    opened = _opened(query)
    assert not opened.exception and not opened.warning
    assert _numbers(opened) == sent, query
    assert opened.toggle(key="ss_ev_long_pause").value is True
    assert opened.number_input(key="ss_pause_min").value == 30.0
    # ... and its own link is the same link.
    assert {k: v for k, v in opened.query_params.items()} == query


def test_a_link_with_a_policy_minimum_and_checkpoints_round_trips():
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.selectbox(key="ss_session").set_value("agent").run()
    at.selectbox(key="ss_policy").set_value("anthropic-5m").run()
    at.toggle(key="ss_ev_restart_tools").set_value(True).run()
    assert not at.exception
    sent = _numbers(at)
    query = {k: v for k, v in at.query_params.items()}
    opened = _opened(query)
    assert not opened.exception and not opened.warning
    assert _numbers(opened) == sent, query


def test_an_event_turn_past_the_sessions_end_is_clamped_not_an_error():
    at = _opened({"pause": "1", "pause_turn": "60"})
    assert not at.exception and not at.warning
    assert at.toggle(key="ss_ev_long_pause").value is True
    assert 2 <= at.number_input(key="ss_turn_long_pause").value <= 20
