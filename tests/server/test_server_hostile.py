"""Hostile input at the HTTP edge: a 4xx JSON error and one log line, never a 500 or a traceback in the
log (uvicorn's "Exception in ASGI application" included)."""

from __future__ import annotations

import json
import logging
import socket
from urllib.parse import urlparse

import pytest
from server_http import LogRecords, request

COMPLETIONS = "/v1/completions"


@pytest.fixture
def server_log():
    handler = LogRecords().attach()
    yield handler
    handler.detach()


@pytest.fixture(scope="module")
def url():
    from server_testloop import FakeLoop, FakeParams

    from kvviz.server.app import create_app
    from kvviz.server.config import ServerConfig
    from kvviz.server.uvicorn_server import ServerThread

    loop = FakeLoop()
    app = create_app(lambda: loop, ServerConfig(port=0), make_params=FakeParams)

    async def boom() -> None:  # a defect inside a handler: the last line of defence answers 500
        raise RuntimeError("a defect\nsecond line")

    app.add_api_route("/test-defect", boom, methods=["GET"])
    thread = ServerThread(app).start()
    yield thread.url
    thread.stop()
    loop.close()


@pytest.mark.parametrize("stream", [False, True])
def test_a_lone_surrogate_in_a_prompt_is_a_400(url, server_log, stream):
    raw = b'{"prompt": "x\\ud800", "max_tokens": 2, "stream": ' + (b"true" if stream else b"false") + b"}"
    code, _, data = request(url, "POST", COMPLETIONS, raw=raw)
    err = json.loads(data)["error"]
    assert code == 400 and err["param"] == "prompt" and "surrogate" in err["message"], err
    assert server_log.tracebacks() == []


def test_a_lone_surrogate_in_a_prompt_list_is_a_400(url, server_log):
    code, _, data = request(url, "POST", COMPLETIONS, raw=b'{"prompt": ["ok", "\\udfff y"], "max_tokens": 2}')
    assert code == 400 and json.loads(data)["error"]["param"] == "prompt"
    assert server_log.tracebacks() == []


@pytest.mark.parametrize("where", ["max_tokens", "seed", "nested"])
def test_an_integer_of_5000_digits_is_a_400(url, server_log, where):
    big = b"9" * 5000
    body = {"max_tokens": b'{"prompt": "x", "max_tokens": ' + big + b"}",
            "seed": b'{"prompt": "x", "seed": -' + big + b"}",
            "nested": b'{"prompt": "x", "logit_bias": {"1": ' + big + b"}}"}[where]
    code, _, data = request(url, "POST", COMPLETIONS, raw=body)
    err = json.loads(data)["error"]
    assert code == 400 and "digits" in err["message"], err
    assert server_log.tracebacks() == []


def test_a_client_that_hangs_up_mid_body_leaves_no_traceback(url, server_log):
    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n" + b'{"prompt": "' + b"a" * 100)
    code, _, _ = request(url, "POST", COMPLETIONS, {"prompt": "still fine", "max_tokens": 1})
    assert code == 200  # the server still serves, and the hang-up logged no traceback
    assert server_log.tracebacks() == []


def test_a_defect_is_one_log_line_and_a_json_500(url, server_log):
    code, _, data = request(url, "GET", "/test-defect")
    assert code == 500 and json.loads(data)["error"]["code"] == 500
    assert server_log.tracebacks() == []
    lines = [r.getMessage() for r in server_log.records if r.levelno >= logging.ERROR]
    assert len(lines) == 1 and "RuntimeError: a defect" in lines[0] and "\n" not in lines[0], lines
