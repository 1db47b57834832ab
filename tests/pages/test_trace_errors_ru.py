"""The workload trace reader speaks codes (kvviz.analysis.workload.trace.WorkloadError); the view words them:
every code has English and Russian words, the English words are the CLI's line, and the Russian "Your
traffic" page shows a bad upload's error in Russian, naming the line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from coded_words_util import check_coded_words
from streamlit.testing.v1 import AppTest

from kvviz.analysis.workload.load import load_trace
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.trace import ERROR_CODES, WorkloadError
from kvviz.util.plural import Plural
from kvviz_app.shell.i18n import texts, use_lang
from kvviz_app.shell.i18n.catalog import gettext

T = texts("workload")

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "workload.py")
CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)


class _Tokenizer:
    def __call__(self, text, **_):
        return {"input_ids": [ord(c) for c in text]}

    def apply_chat_template(self, messages, **_):
        raise ValueError("no template")


def test_every_code_has_words_in_both_languages():
    assert set(T.TRACE_ERRORS) == set(ERROR_CODES)
    for code, english in vars(T.module)["TRACE_ERRORS"].items():
        for form in (english.singular, english.plural) if isinstance(english, Plural) else (english,):
            russian = texts("workload", "ru").TRACE_ERRORS[code]
            russian = russian.form(2) if isinstance(english, Plural) else gettext(form, "ru")
            assert russian != form and CYRILLIC.search(russian), code


BAD = [
    (b"", "empty", {}),
    (b"\xff\x00", "not_utf8", {"byte": 0}),
    (b'{"hash_ids": [1], "input_length": 5}\n{oops', "invalid_json", {"line": 2}),
    (b"[1]", "not_object", {"line": 1, "kind": "array"}),
    (b'{"a": 1}', "no_kind", {"line": 1}),
    (b'{"hash_ids": [1], "token_ids": [1]}', "several_kinds", {"line": 1}),
    (b'{"token_ids": [1], "x": 1}', "unknown_key", {"line": 1, "key": "x"}),
    (b'{"hash_ids": [1], "input_length": -5}', "out_of_range", {"line": 1, "key": "input_length"}),
    (b'{"hash_ids": [1, 2], "input_length": "x"}', "not_integer", {"line": 1, "key": "input_length"}),
    (b'{"hash_ids": "x", "input_length": 5}', "not_id_list", {"line": 1, "kind": "string"}),
    (b'{"hash_ids": [1, -1], "input_length": 5}', "bad_id", {"line": 1, "index": 1}),
    (b'{"hash_ids": [1]}', "needs_input_length", {"line": 1}),
    (b'{"hash_ids": [1, 1], "input_length": 900}', "repeated_id", {"line": 1}),
    (b'{"hash_ids": [1, 2, 3], "input_length": 5}', "ids_exceed_length", {"line": 1, "most": 1}),
    (b'{"hash_ids": [1], "input_length": 1536}', "ids_short_of_length", {"line": 1, "need": 3}),
    (b'{"hash_ids": [1], "input_length": 5, "timestamp": -1}', "negative_timestamp", {"line": 1}),
    (b'{"hash_ids": [1], "input_length": 5, "timestamp": "x"}', "bad_timestamp", {"line": 1}),
    (b'{"hash_ids": [1], "input_length": 5, "timestamp": 9}\n{"hash_ids": [2], "input_length": 5, "timestamp": 1}',
     "out_of_order", {"line": 2, "ts": 1.0, "previous": 9.0}),
    (b'{"hash_ids": [1], "input_length": 5}\n{"token_ids": [1]}', "mixed_kinds", {"line": 2, "kind": "token_ids"}),
    (b'{"token_ids": []}', "no_tokens", {"line": 1}),
    (b'{"token_ids": [5000000000]}', "token_too_big", {"line": 1}),
    (b'{"prompt": "hi"}', "needs_tokenizer", {"line": 1, "kind": "prompt"}),
]


@pytest.mark.parametrize(("data", "code", "params"), BAD, ids=[b[1] for b in BAD])
def test_trace_errors_carry_codes_and_read_in_both_languages(data, code, params):
    with pytest.raises(WorkloadError) as info:
        parse_trace(data)
    russian = check_coded_words(info.value, code, params, T, "trace_error", literal_brace="{role")
    if "line" in params:
        assert russian.startswith(f"строка {params['line']}:"), russian


def test_block_size_errors_carry_codes():
    with pytest.raises(WorkloadError) as info:
        parse_trace(b'{"token_ids": [1, 2]}', block_size=0)
    assert info.value.code == "bad_block_size" and T.trace_error(info.value) == str(info.value)
    with pytest.raises(WorkloadError) as info:
        parse_trace(b'{"token_ids": [1, 2]}', block_size=1000)
    assert info.value.code == "hashed_block_size" and T.trace_error(info.value) == str(info.value)
    with use_lang("ru"):
        assert "размер блока должен быть в диапазоне 1..256" in T.trace_error(info.value)


@pytest.mark.parametrize(("line", "code"), [
    ('{"prompt": ""}', "prompt_not_text"),
    ('{"messages": []}', "messages_not_list"),
    ('{"messages": [1]}', "message_not_object"),
    ('{"messages": [{"role": "user", "content": [{"type": "text"}]}]}', "text_part_without_text"),
    ('{"messages": [{"role": "user", "content": 5}]}', "content_not_text"),
    ('{"messages": [{"role": "user", "content": "hi"}]}', "template_rejected"),
])
def test_prompt_and_messages_errors_carry_codes(line, code):
    with pytest.raises(WorkloadError) as info:
        load_trace(line.encode(), tokenizer=_Tokenizer)
    assert info.value.code == code and info.value.params["line"] == 1
    assert T.trace_error(info.value) == str(info.value)
    with use_lang("ru"):
        assert T.trace_error(info.value).startswith("строка 1: ")


def test_russian_traffic_page_words_a_bad_upload_in_russian():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.query_params["lang"] = "ru"
    with use_lang("ru"):
        at.run()
        at.radio(key="wl_source").set_value("upload").run()
        at.file_uploader(key="wl_upload").upload("t.jsonl", b'{"hash_ids": [1], "input_length": 5}\n{oops',
                                                 "application/json").run()
    assert not at.exception and not at.error
    warnings = [str(w.value) for w in at.warning]  # a bad line is counted and skipped, in Russian
    assert len(warnings) == 1 and "строка 2: некорректный JSON" in warnings[0], warnings
    assert "line 2" not in warnings[0] and "not valid" not in warnings[0] and "Skipped" not in warnings[0]
    with use_lang("ru"):
        at.file_uploader(key="wl_upload").upload("t.jsonl", b'{oops\n[1]', "application/json").run()
    errors = [str(e.value) for e in at.error]  # every line bad: one error, the first line's words in Russian
    assert len(errors) == 1 and "строка 1: некорректный JSON" in errors[0], errors
    assert "line 1" not in errors[0] and "not valid" not in errors[0]


def test_an_upload_over_the_pages_limit_is_refused_in_the_sessions_language():
    limit = 1024
    assert texts("workload", "ru").upload_refusal("t.jsonl", limit << 20, limit) is None  # the limit itself is read
    for lang in ("en", "ru"):
        line = texts("workload", lang).upload_refusal("big.jsonl", (limit << 20) + 1, limit)
        assert line and "big.jsonl" in line and "1" in line
        assert bool(CYRILLIC.search(line)) == (lang == "ru"), line
    ru = texts("workload", "ru").upload_refusal("big.jsonl", 3 << 30, limit)
    assert "3 ГиБ" in ru and "1\u202f024 МБ" in ru, ru
