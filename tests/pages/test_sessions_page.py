"""AppTest of the "Multi-turn sessions" page: defaults, event toggles, reset, another session/policy."""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from kvviz_app.shell.i18n import texts

T = texts("sessions")


ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "sessions.py")


def test_sessions_page_defaults_events_and_policies():
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Prompt tokens sent"].replace(",", "")) > int(metrics["Prompt tokens computed"].replace(",", ""))
    assert len(at.get("plotly_chart")) == 4
    assert not at.info  # no event yet
    why = at.table[0].value[T.USAGE_TABLE["why"]].tolist()
    assert why[0] == T.WHY_FIRST and set(why[1:]) == {T.WHY_APPEND}
    assert T.duration(45) == "45 s" and T.duration(600) == "10.0 min" and T.duration(5400) == "1.5 h"

    at.toggle(key="ss_ev_restart_tools").set_value(True).run()
    assert not at.exception
    assert "tool list changed" in at.info[0].value and "0 of" in at.info[0].value

    at.button(key="ss_reset").click().run()
    assert not at.exception and not at.info
    assert at.toggle(key="ss_ev_restart_tools").value is False

    at.selectbox(key="ss_session").set_value("agent").run()
    at.selectbox(key="ss_policy").set_value("vllm").run()
    at.toggle(key="ss_ev_long_pause").set_value(True).run()
    assert not at.exception
    line = at.info[0].value
    assert "10.0 min" in line and " 0 of" not in line  # the engine has no TTL

    at.selectbox(key="ss_policy").set_value("anthropic-5m").run()
    assert not at.exception and " 0 of" in at.info[0].value  # a 5-minute TTL has expired


def test_sessions_page_in_russian_words_numbers_and_policy_values():
    from kvviz_app.shell.i18n import use_lang

    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["lang"] = "ru"
    with use_lang("ru"):
        at.run()
        header = T.USAGE_TABLE["prompt"]
    assert not at.exception
    table = at.table[0].value
    assert all(re.fullmatch(r"\d{1,3}(\u202f\d{3})*", v) for v in table[header]), table[header].tolist()
    assert any("\u202f" in v for v in table[header])  # a prompt of over 1,000 tokens: thin-space thousands
    policy = " ".join(m.value for m in at.markdown)
    assert "по умолчанию выключено" in policy and "off by default" not in policy
    with use_lang("ru"):
        at.toggle(key="ss_ev_restart_tools").set_value(True).run()
    assert not at.exception
    with use_lang("ru"):
        why = " ".join(at.table[0].value[T.USAGE_TABLE["why"]])
    assert "первое отличие — «инструменты»" in why  # the segment label stays nominative, after a dash
    assert not re.search(r"\bв «?(пользователь|инструменты|система)", why)


def test_the_sessions_charts_are_titled_in_russian_after_an_english_session_drew_them():
    """The charts' titles are read when a figure is drawn (a default argument kept the language of the
    session that imported the figure module first)."""
    import json

    from kvviz_app.shell.i18n import use_lang

    english = AppTest.from_file(PAGE, default_timeout=120)
    english.run()
    assert not english.exception
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["lang"] = "ru"
    with use_lang("ru"):
        at.run()
        wanted = {T.PICTURE_TITLE, T.USAGE_TITLE}
    assert not at.exception
    titles = set()
    for chart in at.get("plotly_chart"):
        title = (json.loads(chart.proto.spec).get("layout", {}).get("title") or {}).get("text")
        if title:
            titles.add(title)
    assert wanted <= titles, (wanted, titles)
