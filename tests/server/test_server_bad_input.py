"""Bad input at the HTTP edge: a clear 4xx OpenAI error naming the field, never a 500 or a traceback."""

from __future__ import annotations

import json
import logging

import pytest
from server_http import post, request

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
MSG = [{"role": "user", "content": "hi"}]

CASES = [
    ("malformed json", COMPLETIONS, b'{"prompt": "x",', 400, None),
    ("binary body", COMPLETIONS, bytes(range(256)) * 4, 400, None),
    ("empty body", COMPLETIONS, b"", 400, None),
    ("json array", COMPLETIONS, b"[1, 2]", 400, None),
    ("deep nesting", COMPLETIONS, b"[" * 100_000, 400, None),
    ("prompt wrong type", COMPLETIONS, {"prompt": 5}, 400, "prompt"),
    ("max_tokens as text", COMPLETIONS, {"prompt": "x", "max_tokens": "5"}, 400, "max_tokens"),
    ("stream as text", COMPLETIONS, {"prompt": "x", "stream": "yes"}, 400, "stream"),
    ("huge max_tokens", COMPLETIONS, {"prompt": "x", "max_tokens": 10**12}, 400, "max_tokens"),
    ("max_tokens over context", COMPLETIONS, {"prompt": "x", "max_tokens": 1000}, 400, "max_tokens"),
    ("zero max_tokens", COMPLETIONS, {"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ("negative temperature", COMPLETIONS, {"prompt": "x", "temperature": -1}, 400, "temperature"),
    ("top_p zero", COMPLETIONS, {"prompt": "x", "top_p": 0}, 400, "top_p"),
    ("empty prompt", COMPLETIONS, {"prompt": ""}, 400, "prompt"),
    ("no prompt", COMPLETIONS, {"max_tokens": 3}, 400, "prompt"),
    ("an empty prompt in a list", COMPLETIONS, {"prompt": ["a", ""]}, 400, "prompt"),
    ("negative token id", COMPLETIONS, {"prompt": [1, -2]}, 400, "prompt"),
    ("token id over vocab", COMPLETIONS, {"prompt": [1, 50_000]}, 400, "prompt"),
    ("prompt over context", COMPLETIONS, {"prompt": "y" * 400}, 400, "prompt"),
    ("1 MB prompt", COMPLETIONS, {"prompt": "z" * 1_000_000}, 400, "prompt"),
    ("unknown field", COMPLETIONS, {"prompt": "x", "best_of_all": 3}, 400, "best_of_all"),
    ("n above one greedy", COMPLETIONS, {"prompt": "x", "n": 2, "temperature": 0}, 400, "n"),
    ("n zero", COMPLETIONS, {"prompt": "x", "n": 0}, 400, "n"),
    ("logprobs over 20", COMPLETIONS, {"prompt": "x", "logprobs": 21}, 400, "logprobs"),
    ("echo with logprobs", COMPLETIONS, {"prompt": "x", "logprobs": 1, "echo": True}, 400, "echo"),
    ("top_logprobs without logprobs", CHAT, {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2},
     400, "top_logprobs"),
    ("top_logprobs over 20", CHAT, {"messages": [{"role": "user", "content": "x"}], "logprobs": True,
                                    "top_logprobs": 21}, 400, "top_logprobs"),
    ("bad cache_salt", COMPLETIONS, {"prompt": "x", "cache_salt": "a/b"}, 400, "cache_salt"),
    ("empty cache_salt", COMPLETIONS, {"prompt": "x", "cache_salt": ""}, 400, "cache_salt"),
    ("priority too big", COMPLETIONS, {"prompt": "x", "priority": 2**40}, 400, "priority"),
    ("stream_options without stream", COMPLETIONS, {"prompt": "x", "stream_options": {"include_usage": True}},
     400, "stream_options"),
    ("five stops", COMPLETIONS, {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    ("empty messages", CHAT, {"messages": []}, 400, "messages"),
    ("blank messages", CHAT, {"messages": [{"role": "user", "content": "  "}]}, 400, "messages"),
    ("unknown role", CHAT, {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages.0.role"),
    ("message without content", CHAT, {"messages": [{"role": "user"}]}, 400, "messages.0.content"),
    ("template refuses a role", CHAT, {"messages": [{"role": "developer", "content": "x"}]}, 400, "messages"),
    ("chat max_tokens huge", CHAT, {"messages": MSG, "max_completion_tokens": 10**9}, 400, "max_tokens"),
    ("tools", CHAT, {"messages": MSG, "tools": [{"type": "function"}]}, 400, "tools"),
    ("1 MB message", CHAT, {"messages": [{"role": "user", "content": "q" * 1_000_000}]}, 400, "messages"),
]


@pytest.fixture(scope="module")
def one_server():
    from server_testloop import FakeLoop, FakeParams

    from kvviz.server.app import create_app
    from kvviz.server.config import ServerConfig
    from kvviz.server.uvicorn_server import ServerThread

    loop = FakeLoop()
    thread = ServerThread(create_app(lambda: loop, ServerConfig(port=0), make_params=FakeParams)).start()
    yield thread.url
    thread.stop()
    loop.close()


@pytest.mark.parametrize(("name", "path", "body", "status", "param"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_clear_4xx(one_server, caplog, name, path, body, status, param):
    caplog.set_level(logging.INFO)
    raw = body if isinstance(body, bytes) else None
    code, headers, data = request(one_server, "POST", path, None if raw is not None else body, raw=raw)
    err = json.loads(data)["error"]
    assert code == status, err
    assert err["code"] == status and err["type"] and err["message"]
    assert err["param"] == param
    assert len(err["message"]) < 600 and "Traceback" not in caplog.text


def test_body_over_the_limit_is_413(one_server):
    code, _, data = request(one_server, "POST", COMPLETIONS, raw=b'{"prompt": "' + b"a" * (3 << 20) + b'"}')
    assert code == 413 and json.loads(data)["error"]["code"] == 413


def test_unknown_path_and_method_are_json(one_server):
    code, _, data = request(one_server, "GET", "/v1/nothing?x=%00%ff&y=" + "z" * 2000)
    assert code == 404 and json.loads(data)["error"]["code"] == 404
    code, _, data = request(one_server, "GET", COMPLETIONS)
    assert code == 405 and json.loads(data)["error"]["code"] == 405


def test_the_server_still_serves_after_bad_input(one_server):
    assert post(one_server, COMPLETIONS, {"prompt": "fine", "max_tokens": 1})[0] == 200


def test_a_seed_beyond_int64_is_refused_at_the_edge(one_server):
    for seed in (2**63, -(2**63) - 1):
        code, _, data = request(one_server, "POST", COMPLETIONS, {"prompt": "x", "seed": seed})
        assert code == 400 and json.loads(data)["error"]["param"] == "seed"
    for seed in (-1, -(2**63), 2**63 - 1):  # vLLM's int64; -1 means no seed
        code, _, _ = request(one_server, "POST", COMPLETIONS, {"prompt": "x", "seed": seed, "max_tokens": 1})
        assert code == 200
