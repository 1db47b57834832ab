"""The scenario reader speaks codes (kvviz.analysis.scenarios.records.ScenarioError); the view words them: every code has
English and Russian words, the English words are the CLI's line, and the Russian block-table page shows a
refused request of its own in Russian."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from coded_words_util import check_coded_words
from streamlit.testing.v1 import AppTest

from kvviz.analysis.radix_compare import compare_radix_pool
from kvviz.analysis.scenarios.load import load_builtin, parse_scenario, parse_scenario_text
from kvviz.analysis.scenarios.play import play_scenario
from kvviz.analysis.scenarios.records import (
    ERROR_CODES,
    MAX_REQUEST_TOKENS,
    ScenarioError,
    user_request_steps,
)
from kvviz_app.shell.i18n import texts, use_lang
from kvviz_app.shell.i18n.catalog import gettext

T = texts("block_table")

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "block_table.py")
CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)


def test_every_code_has_words_in_both_languages():
    assert set(T.SCENARIO_ERRORS) == set(ERROR_CODES)
    for code, english in [*vars(T.module)["SCENARIO_ERRORS"].items(), ("step", vars(T.module)["STEP_PREFIX"])]:
        russian = gettext(english, "ru")
        assert russian != english and CYRILLIC.search(russian), code


def _step(**kw):
    return {"op": "add", "id": "a", "tokens": [1, 2], **kw}


FILES = [
    ([1], "not_object", {"kind": "array"}),
    ({"steps": [], "x": 1}, "unknown_keys", {"keys": "x"}),
    ({"num_blocks": 4}, "missing_steps", {}),
    ({"num_blocks": 4, "steps": {}}, "steps_not_list", {}),
    ({"num_blocks": 4, "steps": [{}] * 501}, "file_too_many_steps", {"count": 501}),
    ({"num_blocks": 999, "steps": []}, "too_many_blocks", {"value": 999}),
    ({"num_blocks": 4, "steps": [_step(), 5]}, "step_not_object", {"step": 2, "kind": "number"}),
    ({"num_blocks": 4, "steps": [_step(bad=1)]}, "step_unknown_keys", {"step": 1, "keys": "bad"}),
    ({"num_blocks": 4, "steps": [_step(text=5)]}, "not_string", {"step": 1, "key": "text"}),
    ({"num_blocks": 4, "title": 5, "steps": []}, "not_string", {"key": "title"}),
    ({"num_blocks": 4, "steps": [{"op": "add", "id": "a", "text": "hi"}]}, "text_without_tokens", {"step": 1}),
    ({"num_blocks": 4, "steps": [_step(pieces=[1, 2])]}, "pieces_not_strings", {"step": 1}),
    ({"num_blocks": 4, "steps": [_step(pieces=["a"])]}, "pieces_length", {"step": 1}),
    ({"num_blocks": 4, "steps": [_step(tokens=[1] * 5000)]}, "step_too_many_tokens", {"step": 1, "count": 5000}),
    ({"num_blocks": 4, "steps": [{"op": "free", "id": "a", "tokens": [1]}]}, "bad_trace", {}),
    ({"num_blocks": 4, "user_template": "no placeholder", "steps": []}, "bad_user_template", {}),
]


@pytest.mark.parametrize(("obj", "code", "params"), FILES, ids=[f"{f[1]}-{i}" for i, f in enumerate(FILES)])
def test_scenario_file_errors_carry_codes_and_read_in_both_languages(obj, code, params):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(obj)
    russian = check_coded_words(info.value, code, params, T, "scenario_error", literal_brace="{text}")
    if "step" in params:
        assert russian.startswith(f"шаг {params['step']}: "), russian


def test_other_scenario_errors_carry_codes():
    scenario = load_builtin("shared_prompt")
    cases = [
        (lambda: user_request_steps("x", []), "no_tokens"),
        (lambda: user_request_steps("x", [1] * (MAX_REQUEST_TOKENS + 1)), "too_many_tokens"),
        (lambda: scenario.with_steps([scenario.steps[0]] * 500), "too_many_steps"),
        (lambda: play_scenario(scenario).check_step(10_000), "bad_step_index"),
        (lambda: compare_radix_pool(scenario, sliding_window=1), "bad_window"),
        (lambda: compare_radix_pool(scenario, radix_page_size=0), "bad_page_size"),
        (lambda: load_builtin("nope"), "unknown_scenario"),
        (lambda: parse_scenario_text(json.dumps({"num_blocks": 4, "steps": [{"op": "add", "id": "a", "text": ""}]}),
                                     tokenizer=lambda t: ([], [])), "empty_text"),
    ]
    for call, code in cases:
        with pytest.raises(ScenarioError) as info:
            call()
        assert info.value.code == code
        assert T.scenario_error(info.value) == str(info.value)
        with use_lang("ru"):
            assert CYRILLIC.search(T.scenario_error(info.value)), code


def test_russian_block_table_page_words_a_refused_request_in_russian():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.query_params["lang"] = "ru"
    with use_lang("ru"):
        at.run()
        at.text_area(key="bt_add_text").input("word " * (2 * MAX_REQUEST_TOKENS))
        at.button(key="FormSubmitter:bt_add_form-" + T.ADD_SUBMIT).click().run()
        failed = T.ADD_FAILED
    assert not at.exception
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and errors[0].startswith(failed), errors
    assert "в запросе больше 4\u202f096 токенов" in errors[0] and "tokens" not in errors[0], errors


def test_every_trace_code_has_words():
    from kvviz.analysis.scenarios.block_trace import TRACE_ERROR_CODES

    assert set(T.TRACE_ERRORS) == set(TRACE_ERROR_CODES)
    for code, english in vars(T.module)["TRACE_ERRORS"].items():
        if code != "step_failed":  # "{op} '{id}': {reason}": the reason is an uncoded error's own line
            assert CYRILLIC.search(gettext(english, "ru")), code


TRACES = [  # a scenario file whose steps the trace reader or the replay refuses
    ({"num_blocks": 4, "block_size": 0, "steps": []}, "bad_block_size", {}),
    ({"num_blocks": 4, "hash": "md5", "steps": []}, "unknown_hash", {}),
    ({"num_blocks": 4, "seed": [1], "steps": []}, "bad_seed", {}),
    ({"num_blocks": 4, "sliding_window": 1, "steps": []}, "out_of_range", {}),
    ({"num_blocks": 4, "sliding_window": "x", "steps": []}, "not_int", {}),
    ({"num_blocks": 4, "steps": [{"op": "jump", "id": "a"}]}, "bad_op", {"step": 1}),
    ({"num_blocks": 4, "steps": [{"op": "add", "id": "", "tokens": [1]}]}, "bad_id", {"step": 1}),
    ({"num_blocks": 4, "steps": [_step(tokens=[1, -5])]}, "token_out_of_range", {"step": 1, "index": 1}),
    ({"num_blocks": 4, "steps": [_step(tokens=[1, "x"])]}, "token_not_int", {"step": 1, "index": 1}),
    ({"num_blocks": 4, "steps": [_step(salt=5)]}, "not_string", {"step": 1, "key": "salt"}),
    ({"num_blocks": 4, "steps": [{"op": "append", "id": "a", "tokens": [1]}]}, "unknown_request", {"step": 1}),
    ({"num_blocks": 4, "steps": [_step(), _step()]}, "request_running", {"step": 2}),
]


@pytest.mark.parametrize(("obj", "trace_code", "params"), TRACES, ids=[t[1] for t in TRACES])
def test_trace_errors_in_a_scenario_read_in_both_languages(obj, trace_code, params):
    with pytest.raises(ScenarioError) as info:
        play_scenario(parse_scenario(obj))
    russian = check_coded_words(info.value, "bad_trace", {"trace_code": trace_code, **params}, T, "scenario_error")
    assert russian.startswith(f"шаг {params['step']}: ") if "step" in params else not russian.startswith("шаг")
