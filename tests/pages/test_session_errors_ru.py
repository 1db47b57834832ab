"""The session reader speaks codes (kvviz.experiments.sessions.SessionError); the view words them: every code has
English and Russian words, the English words are the CLI's line, and the Russian sessions page shows a bad
uploaded transcript's error in Russian."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from coded_words_util import check_coded_words
from streamlit.testing.v1 import AppTest

from kvviz.experiments.sessions import SessionError
from kvviz.experiments.sessions.results import projected_work
from kvviz.experiments.sessions.run import run_session
from kvviz.experiments.sessions.schema import (
    ERROR_CODES,
    FIELDS,
    load_example,
    load_session_text,
    session_from_dict,
)
from kvviz.experiments.sessions.session_events import SessionEvents, apply_events
from kvviz_app.shell.i18n import texts, use_lang
from kvviz_app.shell.i18n.catalog import gettext

T = texts("sessions")

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "sessions.py")
CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)


def test_every_code_and_field_has_words_in_both_languages():
    assert set(T.SESSION_ERRORS) == set(ERROR_CODES)
    assert vars(T.module)["SESSION_FIELDS"] == FIELDS  # the view's English names are the CLI's
    for code, english in [*vars(T.module)["SESSION_ERRORS"].items(), *vars(T.module)["SESSION_FIELDS"].items()]:
        russian = gettext(english, "ru")
        assert russian != english and CYRILLIC.search(russian), code


def _turn(**kw):
    return {"user": "hi", "answer": "hello", **kw}


BAD = [
    ([1], "not_object", {}),
    ({"system": "s", "turns": []}, "turns_not_list", {}),
    ({"system": "s", "turns": [_turn()] * 500}, "too_many_turns", {"count": 500}),
    ({"system": "s", "turns": [5]}, "turn_not_object", {"turn": 1}),
    ({"system": "s", "turns": [_turn(tool_results=5)]}, "results_not_list", {"turn": 1}),
    ({"system": "s", "turns": [_turn(tool_results=[5])]}, "result_not_object", {"turn": 1, "item": 1}),
    ({"system": "s", "turns": [_turn(tool_results=[{"name": "t", "content": ""}])]}, "not_text",
     {"field": "result_content", "turn": 1, "item": 1}),
    ({"system": "s", "turns": [{"answer": "a"}]}, "turn_needs_input", {"turn": 1}),
    ({"system": "s", "turns": [_turn(tool_calls=5)]}, "calls_not_list", {"turn": 1}),
    ({"system": "s", "turns": [_turn(tool_calls=[{"name": 1}])]}, "bad_call", {"turn": 1, "item": 1}),
    ({"system": "s", "turns": [_turn(), _turn(answer=" ")]}, "not_text", {"field": "answer", "turn": 2}),
    ({"system": "s", "turns": [_turn(gap_s=-1)]}, "bad_seconds", {"field": "gap_s", "turn": 1}),
    ({"system": "x" * 300_000, "turns": [_turn()]}, "text_too_long", {"field": "system"}),
    ({"system": "s", "tools": [1], "turns": [_turn()]}, "bad_tools", {"field": "tools"}),
    ({"turns": [_turn()]}, "not_text", {"field": "system"}),
    ({"system": "s", "turns": [_turn()], "file_read": 1}, "bad_file_read", {}),
    ({"system": "s", "turns": [_turn()], "file_read": {"path": "p"}}, "not_text", {"field": "file_read_content"}),
]


@pytest.mark.parametrize(("obj", "code", "params"), BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)])
def test_session_errors_carry_codes_and_read_in_both_languages(obj, code, params):
    with pytest.raises(SessionError) as info:
        session_from_dict(obj)
    russian = check_coded_words(info.value, code, params, T, "session_error")
    if "turn" in params:
        assert re.search(rf"\bход[уа]? {params['turn']}\b", russian), russian


def test_run_and_option_errors_carry_codes():
    chat = load_example("chat")
    cases = [
        (lambda: load_session_text(b"x" * (3 << 20)), "too_big"),
        (lambda: load_example("nope"), "unknown_example"),
        (lambda: run_session(chat, "vllm", block_size=0, tokenizer=lambda t: [1] * len(t)), "bad_block_size"),
        (lambda: run_session(chat, "vllm", marks=("nope",), tokenizer=lambda t: [1] * len(t)), "bad_mark"),
        (lambda: run_session(chat, "vllm", min_cacheable_tokens=-1, tokenizer=lambda t: [1]), "bad_min_cacheable"),
        (lambda: run_session(chat, "vllm", ttl_s=-1, tokenizer=lambda t: [1]), "bad_ttl"),
        (lambda: run_session(chat, "vllm", tokenizer=lambda t: [1] * 10**6), "too_many_tokens"),
        (lambda: apply_events(chat, SessionEvents(pause_at=99)), "bad_turn"),
        (lambda: apply_events(chat, SessionEvents(pause_s=-1)), "bad_pause"),
        (lambda: projected_work(1, 1, 0), "bad_projection"),
    ]
    for call, code in cases:
        with pytest.raises(SessionError) as info:
            call()
        assert info.value.code == code, (code, info.value)
        assert T.session_error(info.value) == str(info.value)
        with use_lang("ru"):
            assert CYRILLIC.search(T.session_error(info.value)), code


def test_russian_sessions_page_words_a_bad_upload_in_russian():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.query_params["lang"] = "ru"
    bad = json.dumps({"system": "s", "turns": [{"user": "hi", "answer": "ok"}, {"answer": "a"}]}).encode()
    with use_lang("ru"):
        at.run()
        at.selectbox(key="ss_session").set_value("__upload__").run()
        at.file_uploader(key="ss_upload").upload("mine.json", bad, "application/json").run()
    assert not at.exception
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and "ходу 2 нужно сообщение 'user' или 'tool_results'" in errors[0], errors
    assert "needs a" not in errors[0]
