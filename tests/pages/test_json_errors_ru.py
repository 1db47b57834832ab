"""Reading a user's JSON (kvviz.util.jsonio) speaks codes when the reader's error class does: every code
has English and Russian words, the English words are the CLI's line, each reader's view words them, and the
Russian sessions page shows an upload that is not JSON in Russian."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.scenarios.records import ScenarioError
from kvviz.analysis.workload.trace import WorkloadError
from kvviz.experiments.sessions import SessionError
from kvviz.util.jsonio import ERROR_CODES, parse_json, read_limited, read_stream_limited
from kvviz_app.shell.i18n import texts, use_lang
from kvviz_app.shell.i18n.catalog import gettext

TE = texts("block_table")
TJ = texts("jsonio")
TS = texts("sessions")
TW = texts("workload")

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "sessions.py")
CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)
VIEWS = [(SessionError, TS.session_error), (ScenarioError, TE.scenario_error), (WorkloadError, TW.trace_error)]


def test_every_code_has_words_in_both_languages():
    assert set(TJ.JSON_ERRORS) == set(ERROR_CODES)
    for code, english in vars(TJ.module)["JSON_ERRORS"].items():
        russian = gettext(english, "ru")
        assert russian != english and CYRILLIC.search(russian), code


class _Stream:
    def __init__(self, data: bytes) -> None:
        self.buffer = self
        self.data = data

    def read(self, n: int) -> bytes:
        return self.data[:n]


def _cases(tmp_path: Path, error: type[Exception]):
    big = tmp_path / "big.json"
    big.write_bytes(b"1" * 100)
    return [
        (lambda: parse_json(b"\xff", "up.json", error), "json_not_utf8"),
        (lambda: parse_json("{oops", "up.json", error), "json_invalid"),
        (lambda: parse_json("[" * 100_000 + "]" * 100_000, "up.json", error), "json_too_deep"),
        (lambda: parse_json('{"n": ' + "9" * 5000 + "}", "up.json", error), "json_long_number"),
        (lambda: read_limited(tmp_path, 10, "session file", error), "json_is_dir"),
        (lambda: read_limited(big, 10, "session file", error), "json_file_too_big"),
        (lambda: read_limited(tmp_path / "none.json", 10, "session file", error), "json_no_file"),
        (lambda: read_stream_limited(_Stream(b"1" * 20), 10, "session", error=error), "json_stream_too_big"),
    ]


@pytest.mark.parametrize(("error", "view"), VIEWS, ids=["session", "scenario", "trace"])
def test_json_errors_carry_codes_and_every_reader_words_them(tmp_path, error, view):
    for call, code in _cases(tmp_path, error):
        with pytest.raises(error) as info:
            call()
        assert info.value.code == code
        assert view(info.value) == str(info.value)  # the English words are the CLI's line
        with use_lang("ru"):
            russian = view(info.value)
        assert CYRILLIC.search(russian) and "{" not in russian, (code, russian)


def test_plain_error_classes_keep_their_one_line():
    with pytest.raises(ValueError, match="is not valid JSON: Expecting"):
        parse_json("{oops", "x.json")


def test_russian_sessions_page_words_an_upload_that_is_not_json():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.query_params["lang"] = "ru"
    with use_lang("ru"):
        at.run()
        at.selectbox(key="ss_session").set_value("__upload__").run()
        at.file_uploader(key="ss_upload").upload("mine.json", b'{"system": "s",\n oops}', "application/json").run()
    assert not at.exception
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and "mine.json — некорректный JSON" in errors[0] and "в строке 2" in errors[0], errors
    assert "is not valid" not in errors[0]
