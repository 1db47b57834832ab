"""Bad input on the pages, driven through AppTest: empty and blank text, huge pastes, control characters,
binary / malformed / wrongly shaped uploads, absurd settings. Each gets a clear message (an error or a
warning; an empty box an info prompt) and never an exception.

Fast: only the edit page (marked ``model``) loads the model; the others use the tokenizer at most.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.scenarios.records import MAX_REQUEST_TOKENS
from kvviz.experiments.sessions import MAX_SESSION_BYTES
from kvviz_app.shell import ui
from kvviz_app.shell.i18n import texts

C = texts("calculator")
E = texts("edit")
G = texts("block_table")
P = texts("paging")
S = texts("sessions")

PAGES = Path(__file__).resolve().parents[2] / "pages"
CONTROL = "\x00\x07\u200b\u202e"  # NUL, bell, zero-width space, right-to-left override


def page(name: str) -> AppTest:
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=300).run()
    assert not at.exception, at.exception
    return at


def values(elements) -> list[str]:
    return [str(e.value) for e in elements]


def only_error(at: AppTest, fragment: str) -> None:
    """No exception, and exactly one error box, saying ``fragment``."""
    assert not at.exception, at.exception
    errors = values(at.error)
    assert len(errors) == 1 and fragment in errors[0], (fragment, errors)


# ----------------------------------------------------------------------------- sessions: uploads


@pytest.fixture(scope="module")
def sessions() -> AppTest:
    at = page("sessions")
    at.selectbox(key="ss_session").set_value("__upload__").run()
    assert S.UPLOAD_NONE in values(at.info)
    return at


@pytest.mark.parametrize("content, fragment", [
    (b"\xff\x00\x01garbage", "not UTF-8"),
    (b"", "not valid JSON"),
    (b"  \n\t ", "not valid JSON"),
    (b'{"system": "s", "turns": [', "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"system": "' + b"x" * (MAX_SESSION_BYTES + 10) + b'"}', "larger than"),
    (b'{"system": null, "turns": [{"user": null, "answer": null}]}', "'user' message"),
    (b'{"system": 5, "turns": "many"}', "'turns'"),
    (b'{"system": "s", "turns": [{"user": "u", "answer": "a", "gap_s": NaN}]}', "gap_s"),
    (b'{"system": "s", "turns": [{"user": "u", "answer": "a", "gap_s": ' + b"9" * 5000 + b"}]}", "too long"),
], ids=["binary", "empty", "blank", "malformed", "list", "deep", "huge", "nulls", "wrong-types", "nan", "huge-int"])
def test_sessions_bad_uploads(sessions, content, fragment):
    sessions.file_uploader(key="ss_upload").upload("bad.json", content, "application/json").run()
    only_error(sessions, fragment)
    assert values(sessions.error)[0].startswith(S.UPLOAD_ERROR.split("{")[0])
    assert not sessions.metric  # nothing computed from a bad session


def test_sessions_control_characters_are_just_text(sessions):
    data = {"system": f"Be brief{CONTROL}.", "turns": [{"user": f"hi{CONTROL}", "answer": "hello"},
                                                       {"user": f"\x00{CONTROL}?", "answer": f"ok{CONTROL}"}]}
    sessions.file_uploader(key="ss_upload").upload("ctrl.json", json.dumps(data).encode(), "application/json").run()
    assert not sessions.exception and not sessions.error
    assert int(next(m.value for m in sessions.metric if m.label == S.M_SENT).replace(",", "")) > 0


def test_sessions_control_only_message_is_blank(sessions):
    # The one blank rule (kvviz.util.blank.is_blank, tests/util/test_blank_rule.py): a message of nothing
    # but control and zero-width characters is as empty as spaces, so it gets the clear one-line error.
    data = {"system": "Be brief.", "turns": [{"user": "\x00", "answer": "ok"}]}
    sessions.file_uploader(key="ss_upload").upload("ctrl0.json", json.dumps(data).encode(), "application/json").run()
    only_error(sessions, "turn 1 'user' must be a non-empty string")
    assert not sessions.metric


# ----------------------------------------------------------------------------- calculator: config paste, model text


@pytest.fixture(scope="module")
def calculator() -> AppTest:
    at = page("calculator")
    at.radio(key="calc_mode").set_value("config").run()
    return at


@pytest.mark.parametrize("text, fragment", [
    ('{"model_type": "llama"' + CONTROL + "}", "binary"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"num_hidden_layers": NaN, "num_attention_heads": 4, "hidden_size": 64}', "whole number"),
    ('{"num_hidden_layers": 2.5, "num_attention_heads": 4, "hidden_size": 64}', "whole number"),
    ('{"num_hidden_layers": ' + "9" * 5000 + ', "num_attention_heads": 4, "hidden_size": 64}', "too long"),
    ('{"num_hidden_layers": null, "num_attention_heads": [], "hidden_size": {}}', "layer count"),
], ids=["control", "deep", "nan", "float", "huge-int", "nulls"])
def test_calculator_bad_pasted_configs(calculator, text, fragment):
    calculator.text_area(key="calc_config_text").input(text).run()
    only_error(calculator, fragment)
    assert not calculator.metric


def test_calculator_blank_paste_and_huge_upload(calculator):
    calculator.text_area(key="calc_config_text").input(" \n\t ").run()
    assert not calculator.exception and not calculator.error and C.CONFIG_EMPTY in values(calculator.info)
    calculator.file_uploader(key="calc_upload").upload("big.json", b'{"a": "' + b"x" * 3_000_000 + b'"}',
                                                       "application/json").run()
    only_error(calculator, "limit is 1 MiB")


def test_calculator_blank_model_text_is_refused_without_a_model():
    at = page("calculator")
    at.text_input(key="calc_model_text").input("   ")
    at.button(key="FormSubmitter:calc_model_form-" + C.MODEL_BUTTON).click().run()
    only_error(at, C.MODEL_EMPTY)


# ----------------------------------------------------------------------------- block table: add a request


def add_request(at: AppTest, text: str, salt: str = "") -> AppTest:
    at.text_area(key="bt_add_text").input(text)
    at.text_input(key="bt_add_salt").input(salt)
    at.button(key="FormSubmitter:bt_add_form-" + G.ADD_SUBMIT).click().run()
    assert not at.exception, at.exception
    return at


def test_block_table_blank_huge_and_control_requests():
    at = page("block_table")
    add_request(at, " \n\t ")
    assert G.ADD_EMPTY in values(at.warning) and not at.error
    add_request(at, "word " * (2 * MAX_REQUEST_TOKENS))  # a paste far over one step's token limit
    only_error(at, f"more than {MAX_REQUEST_TOKENS:,} tokens")
    assert values(at.error)[0].startswith(G.ADD_FAILED)
    assert not at.session_state[ui.USER_STEPS_KEY]  # nothing was added
    add_request(at, f"Hello{CONTROL}there", salt="\x00\x01")  # odd but valid: tokens like any other
    assert not at.error and len(at.session_state[ui.USER_STEPS_KEY]["shared_prompt"]) >= 1


# ----------------------------------------------------------------------------- paging and radix: absurd settings


def test_paging_settings_that_do_not_fit_the_model_length():
    at = page("paging")
    at.slider(key="pg_prefix").set_value(1024)
    at.slider(key="pg_prompt").set_value((2000, 2048))
    at.slider(key="pg_output").set_value((2000, 2048)).run()
    only_error(at, "exceeds max_model_len")
    assert values(at.error)[0].startswith(P.BAD_CONFIG.split("{")[0]) and not at.metric


@pytest.mark.parametrize("step", [10**9, -5])
def test_radix_absurd_step_in_the_session_is_clamped(step):
    at = AppTest.from_file(str(PAGES / "radix.py"), default_timeout=120)
    at.session_state["rx_step"] = step
    at.run()
    assert not at.exception and not at.error
    assert 0 <= at.slider(key="rx_step").value <= at.slider(key="rx_step").max


# ----------------------------------------------------------------------------- edit: the real model


@pytest.mark.model
def test_edit_page_empty_huge_and_control_text(monkeypatch):
    at = page("edit")
    at.radio(key="edit_mode").set_value("free").run()
    at.text_area(key="edit_free_a").set_value("")
    at.text_area(key="edit_free_b").set_value("").run()
    assert not at.exception and not at.error and E.EMPTY_A in values(at.info)
    monkeypatch.setenv("KVVIZ_MAX_TOKENS", "64")  # keeps the prefills short; the paste is still tokenized whole
    at.text_area(key="edit_free_a").set_value("word " * 60_000)
    at.text_area(key="edit_free_b").set_value("Word " * 60_000).run()
    assert not at.exception and not at.error
    warnings = values(at.warning)
    assert len(warnings) == 2 and all("only the first 64" in w for w in warnings)
    at.text_area(key="edit_free_a").set_value(CONTROL + " hello")
    at.text_area(key="edit_free_b").set_value(CONTROL + " help").run()
    assert not at.exception and not at.error
    assert any("U\\+0000" in i and "U\\+200B" in i for i in values(at.info))  # named, markdown-escaped
    at.radio(key="edit_mode").set_value("char").run()
    at.text_input(key="edit_char_repl").set_value("\x07").run()
    assert not at.exception and not at.error
