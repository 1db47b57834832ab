"""bench.peer_external: the peer lane's speed figures against two engines started by hand (the recipe for a GPU
machine): arguments checked at the edge (one line, exit 2), both engines asked for /health first, figures and
ratios written. Loopback only."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest
from server_http import loopback_server

import bench.peer_speed as speed
from bench import peer_agree, peer_external


@pytest.mark.parametrize("argv,message", [
    (["vllm=http://127.0.0.1:1"], "missing kvviz=URL"),
    (["vllm=http://127.0.0.1:1", "sglang=http://127.0.0.1:2"], "expected vllm=URL and kvviz=URL"),
    (["vllm=ftp://127.0.0.1:1", "kvviz=http://127.0.0.1:2"], "not an http(s)://host:port base URL"),
    (["vllm=http://127.0.0.1:1/v1", "kvviz=http://127.0.0.1:2"], "not an http(s)://host:port base URL"),
    (["vllm=http://127.0.0.1:1", "vllm=http://127.0.0.1:2"], "vllm given twice"),
    (["vllm=http://127.0.0.1:1", "kvviz=http://127.0.0.1:2", "--rounds", "0"], "--rounds must be 1-50"),
])
def test_bad_arguments_end_with_one_line_and_exit_2(argv, message, capsys):
    assert peer_external.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("peer_external: ") and message in err and "\n" not in err


class _Health(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def health_url():
    with loopback_server(_Health) as url:
        yield url


def test_an_engine_that_does_not_answer_is_named(health_url, capsys):
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert peer_external.main([f"vllm={health_url}", f"kvviz={closed}"]) == 2
    assert f"kvviz at {closed} does not answer GET /health" in capsys.readouterr().err


def test_figures_and_ratios_are_written_for_both_engines(health_url, tmp_path, monkeypatch, capsys):
    seen = {}
    figures = {"vllm": {"decode_1_tok_s": 40.0, "ttft_1024_uncached_s": 1.0},
               "kvviz": {"decode_1_tok_s": 50.0, "ttft_1024_uncached_s": 0.8}}

    def fake_measure(peers, tok, rounds, label):
        seen.update(names=[p.name for p in peers], urls=[p.url for p in peers], rounds=rounds, label=label)
        return figures

    monkeypatch.setattr(peer_agree, "tokenizer", lambda: object())
    monkeypatch.setattr(speed, "warm_up", lambda peers, tok: None)
    monkeypatch.setattr(speed, "measure", fake_measure)
    out = tmp_path / "external.json"
    code = peer_external.main([f"kvviz={health_url}/", f"vllm={health_url}", "--rounds", "2", "--label", "h200",
                               "--out", str(out)])
    assert code == 0
    assert seen == {"names": ["vllm", "kvviz"], "urls": [health_url, health_url], "rounds": 2, "label": "h200"}
    doc = json.loads(out.read_text())
    assert doc["ratios_kvviz_over_vllm"] == {"decode_1_tok_s": 1.25, "ttft_1024_uncached_s": 0.8}
    assert doc["figures"] == figures and doc["urls"] == {"kvviz": health_url, "vllm": health_url}
    assert "decode_1_tok_s: vLLM 40.0, kvviz 50.0, kvviz/vLLM 1.25" in capsys.readouterr().out
