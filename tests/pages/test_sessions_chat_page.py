"""AppTest of the sessions page's real chat: two turns through the engine; the second prompt starts with
every token of the first exchange, so all its full blocks but the last come from the cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz_app.shell.i18n import texts

T = texts("sessions")


pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]


def _send(at: AppTest, text: str) -> AppTest:
    at.text_input(key="ss_chat_input").input(text)
    [b for b in at.button if b.label == T.CHAT_SEND][0].click()
    at.run()
    assert not at.exception, at.exception
    return at


def test_two_turns_second_reads_the_first_from_cache():
    at = AppTest.from_file(str(ROOT / "pages" / "sessions.py"), default_timeout=600).run()
    assert not at.exception, at.exception
    _send(at, "What is a cache?")
    _send(at, "Give one example.")
    chat = at.session_state["ss_chat"]
    first, second = chat.turns
    assert first.answer and second.answer and first.cached_tokens == 0
    # the whole first exchange is reused but the last partial block (and the never-fed last answer token)
    exchange = first.prompt_tokens + first.output_tokens - 1
    assert second.cached_tokens == exchange // 16 * 16 > 0
    # each turn's engine compute (its share of the steps) fits in its arrival-to-finish time; the last one shown
    assert all(0 < t.compute_ms <= t.e2e_ms for t in chat.turns)
    shown = T.CHAT_COMPUTE.format(compute=second.compute_ms, e2e=second.e2e_ms)
    assert shown in [c.value for c in at.caption]
    tables = [df.value for df in at.dataframe if T.CHAT_TABLE["cached"] in df.value.columns]
    assert tables and list(tables[-1][T.CHAT_TABLE["cached"]]) == [0, second.cached_tokens]
    at.toggle(key="ss_chat_probs").set_value(True).run()
    assert not at.exception, at.exception
    probs = [df.value for df in at.dataframe if T.CHAT_PROBS_TABLE["prob"] in df.value.columns]
    assert [len(df) for df in probs] == [first.output_tokens, second.output_tokens]
    assert all(df[T.CHAT_PROBS_TABLE["prob"]].str.endswith("%").all() for df in probs)
