"""Browser: "Your traffic" reads a trace of a real trace's weight (a generated 50 MB JSONL, in Russian at
1024 px; Streamlit's default 2 MB limit refused it with an English hover and the page kept the example's
numbers), and says which file its numbers are for."""

from __future__ import annotations

import json
import re

import pytest
from browser_util import assert_no_errors, open_page, screenshot, wait_for_metrics

from kvviz_app.shell.i18n import texts

pytestmark = pytest.mark.browser

T_RU = texts("workload", "ru")
MB = 1 << 20


def _write_trace(path, size_bytes: int) -> int:
    """Mooncake lines of 512-token blocks (long agent-like prompts: a few shared system prompts, then each
    request's own 20-59 blocks); returns the number of requests."""
    next_id, t, lines, written = 8, 0, [], 0
    i = 0
    while written < size_bytes:
        own = 20 + i % 40
        ids = [i % 4, 4 + i % 4, *range(next_id, next_id + own)]
        next_id += own
        t += 37
        line = json.dumps({"timestamp": t, "input_length": 512 * len(ids) - 100, "output_length": 200,
                           "hash_ids": ids}, separators=(",", ":")) + "\n"
        lines.append(line)
        written += len(line)
        i += 1
    path.write_text("".join(lines))
    return len(lines)


def _digits(text: str | None) -> str:
    return re.sub(r"\D", "", text or "")


def test_a_50_mb_trace_is_read_and_named_in_russian_at_1024(app_server, browser, tmp_path):
    trace = tmp_path / "big_trace.jsonl"
    requests = _write_trace(trace, 50 * MB)
    assert trace.stat().st_size >= 50 * MB
    page = open_page(browser, app_server, "workload?lang=ru", wait_text=T_RU.STATS_HEADER, width=1024, height=768)
    try:
        page.get_by_text(T_RU.SOURCE_OPTIONS["upload"]).click()
        page.get_by_text(T_RU.UPLOAD_WAITING).wait_for()
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(trace))
        metrics = wait_for_metrics(page, lambda v: _digits(v.get(T_RU.M_REQUESTS)) == str(requests), timeout_s=240)
        assert _digits(metrics.get(T_RU.M_REQUESTS)) == str(requests), metrics
        main = page.locator('[data-testid="stMain"]').inner_text()
        limit = T_RU.UPLOAD_LIMIT.format(limit="1 024").replace("`", "")
        assert limit in main.replace("\u202f", " ")  # the limit, in words
        assert "big_trace.jsonl" in main.replace(page.locator('[data-testid="stFileUploader"]').inner_text(), "")
        assert not page.locator('[data-testid="stFileUploaderFileErrorMessage"]').count()
        assert_no_errors(page)
        screenshot(page, "workload_upload_50mb_ru_1024", full_page=False)
    finally:
        page.close()
