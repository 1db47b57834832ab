"""The API inside the app's process: off with KVVIZ_API=0, started once, on the shared engine loop."""

from __future__ import annotations

from server_http import post
from server_testloop import FakeLoop, FakeParams

from kvviz.server import embedded


def test_off_with_the_setting(monkeypatch):
    monkeypatch.setattr(embedded, "_STARTED", {})
    monkeypatch.setenv("KVVIZ_API", "0")
    assert embedded.start_api_once() is None and embedded.get_api_url() is None


def test_started_once_on_the_process_engine(monkeypatch, capsys):
    loop = FakeLoop()
    monkeypatch.setattr(embedded, "_STARTED", {})
    monkeypatch.setattr(embedded, "_engine_loop", lambda: loop)
    monkeypatch.setattr(embedded, "_presenter_key", lambda: "room-key")
    monkeypatch.setenv("KVVIZ_API", "1")
    monkeypatch.setenv("KVVIZ_API_HOST", "127.0.0.1")
    monkeypatch.setenv("KVVIZ_API_PORT", "0")
    monkeypatch.setattr(embedded, "_sampling_params", FakeParams)
    url = embedded.start_api_once()
    try:
        assert url and url.startswith("http://127.0.0.1:") and embedded.start_api_once() == url
        assert "OpenAI-compatible API on" in capsys.readouterr().err
        status, body = post(url, "/v1/completions", {"prompt": "from a laptop", "max_tokens": 1})
        assert status == 200 and loop.submitted[-1][3]["client"].startswith("api 127.0.0.1")
        post(url, "/v1/completions", {"prompt": "from a laptop", "max_tokens": 1, "user": "laptop-7"})
        last = embedded.recent_requests()[-1]
        assert (last.client, last.prompt_tokens, last.cached_tokens, last.output_tokens) == ("laptop-7", 14, 12, 1)
        assert post(url, "/reset_prefix_cache", headers={"X-Presenter-Key": "room-key"})[0] == 200
    finally:
        embedded._STARTED["thread"].stop()
        loop.close()


def test_a_bad_setting_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(embedded, "_STARTED", {})
    monkeypatch.setattr(embedded, "_presenter_key", lambda: "k")
    monkeypatch.setenv("KVVIZ_API", "1")
    monkeypatch.setenv("KVVIZ_API_PORT", "eighty")
    assert embedded.start_api_once() is None
    err = capsys.readouterr().err
    assert "KVVIZ_API_PORT" in err and len(err.strip().splitlines()) == 1
