"""AppTest of the "Your traffic" page: the bundled example, controls, TTL, and bad uploads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.reuse_distance import analyze
from kvviz_app.shell.i18n import texts

T = texts("workload")

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "workload.py")


def test_workload_page_example_numbers_match_the_core():
    profile = analyze(parse_trace(EXAMPLE_PATH.read_bytes()))
    at = AppTest.from_file(PAGE, default_timeout=180).run()
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[T.M_REQUESTS] == f"{profile.num_requests:,}"  # 1,500
    assert metrics[T.M_BLOCKS] == f"{profile.unique_blocks:,}"
    rate = profile.hit_tokens_infinite / profile.input_tokens
    assert metrics[T.M_INFINITE] == f"{rate:.1%}"
    assert metrics[T.M_NEED] == T.M_NEED_VALUE.format(c50=profile.capacity_for(0.5), c90=profile.capacity_for(0.9))
    # curve, timeline, pool, host tier (hit rate by source, loads), routing (hit rate, imbalance, over C),
    # histogram, prefixes
    assert len(at.get("plotly_chart")) == 10
    assert any("Touch order" in m.value for m in at.markdown)  # the definitions are on the page

    at.text_input(key="wl_marks").set_value("64, 512").run()
    at.number_input(key="wl_budget").set_value(2.0).run()
    at.selectbox(key="wl_ttl").set_value(60).run()
    assert not at.exception and not at.error
    at.radio(key="wl_unit").set_value("bytes").run()
    at.slider(key="wl_concurrency").set_value(8).run()
    assert not at.exception and not at.error
    assert any("block pool" in m.value for m in at.markdown)

    at.text_input(key="wl_marks").set_value("64, -3").run()
    assert not at.exception and "not a positive integer" in at.error[0].value


@pytest.fixture(scope="module")
def upload_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=180).run()
    at.radio(key="wl_source").set_value("upload").run()
    assert not at.exception and T.UPLOAD_WAITING in [str(i.value) for i in at.info]
    return at


@pytest.mark.parametrize(("content", "fragment"), [
    (b"", "the trace is empty"),
    (b"\xff\x00\x01garbage", "not UTF-8"),
    (b'{oops\n{"hash_ids": [1], "input_length": -5}', "all 2 lines are bad (the first: line 1: not valid JSON"),
    (b'{"hash_ids": [1], "input_length": -5}', "line 1: 'input_length' must be in 0.."),
    (b'{"hash_ids": [1, 2], "input_length": "x"}', "line 1: 'input_length' must be an integer"),
    (b'[' * 100_000 + b']' * 100_000, "line 1: not valid JSON"),
], ids=["empty", "binary", "malformed", "negative", "wrong-type", "deep"])
def test_workload_page_bad_uploads_name_the_line(upload_page, content, fragment):
    upload_page.file_uploader(key="wl_upload").upload("t.jsonl", content, "application/json").run()
    assert not upload_page.exception
    errors = [str(e.value) for e in upload_page.error]
    assert len(errors) == 1 and fragment in errors[0] and errors[0].startswith(T.BAD_TRACE.split("{")[0])
    assert not upload_page.metric


def test_workload_page_counts_bad_lines_and_analyses_the_rest(upload_page):
    content = b'{"hash_ids": [1], "input_length": 5}\n{oops\n{"hash_ids": [1], "input_length": 5}\n'
    upload_page.file_uploader(key="wl_upload").upload("t.jsonl", content, "application/json").run()
    assert not upload_page.exception and not upload_page.error
    warnings = [str(w.value) for w in upload_page.warning]
    assert len(warnings) == 1 and warnings[0].startswith(T.BAD_LINES.format(count=1, shown=1))
    assert "line 2: not valid JSON" in warnings[0]
    assert {m.label: m.value for m in upload_page.metric}[T.M_REQUESTS] == "2"


def test_workload_page_upload_of_token_ids():
    at = AppTest.from_file(PAGE, default_timeout=180).run()
    at.radio(key="wl_source").set_value("upload").run()
    lines = "\n".join(json.dumps({"token_ids": list(range(40)) + [i]}) for i in range(20)).encode()
    at.file_uploader(key="wl_upload").upload("t.jsonl", lines, "application/json").run()
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[T.M_REQUESTS] == "20" and metrics[T.M_BLOCKS] == "2"
    assert metrics[T.M_INFINITE] == f"{19 * 32 / (20 * 41):.1%}"
