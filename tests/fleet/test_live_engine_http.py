"""The engine's HTTP side against a local server: vLLM's /tokenize answer and Prometheus /metrics
prefix-cache counters (summed over label sets), hit rate between scrapes, and one-line failures."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest
from server_http import loopback_server

from kvviz.fleet.engine_http import (
    EngineHTTPError,
    PrefixCacheCounters,
    hit_rate,
    parse_metrics,
    scrape_metrics,
    tokenize_remote,
)

METRICS = """# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 500.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 600.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 150.0
vllm:prefix_cache_hits_created{engine="0",model_name="m"} 1.7e9
"""


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, METRICS.encode() if self.path == "/metrics" else b"nothing here")

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/tokenize":
            self._send(200, json.dumps({"count": 3, "tokens": [len(body["prompt"]), 2, 3]}).encode())
        else:
            self._send(200, b'{"tokens": "no"}')


@pytest.fixture(scope="module")
def server():
    with loopback_server(_Handler) as url:
        yield url


def test_metrics_counters_and_hit_rate(server: str) -> None:
    c = scrape_metrics(f"{server}/metrics")
    assert c == PrefixCacheCounters(1500.0, 750.0)
    assert hit_rate(PrefixCacheCounters(1000, 500), c) == pytest.approx(250 / 500)
    assert hit_rate(c, c) is None


def test_tokenize_remote(server: str) -> None:
    assert tokenize_remote(f"{server}/tokenize", "hello") == [5, 2, 3]
    with pytest.raises(EngineHTTPError):
        tokenize_remote(f"{server}/bad", "hello")


@pytest.mark.parametrize("url", ["", "ftp://x/metrics", "http://", "not a url"])
def test_bad_urls(url: str) -> None:
    with pytest.raises(EngineHTTPError):
        scrape_metrics(url)


def test_unreachable_and_not_metrics(server: str) -> None:
    from live_testpub import free_port

    with pytest.raises(EngineHTTPError, match="cannot reach"):
        scrape_metrics(f"http://127.0.0.1:{free_port()}/metrics")
    with pytest.raises(EngineHTTPError):
        scrape_metrics(f"{server}/other")  # no counters in the page
    with pytest.raises(EngineHTTPError):
        parse_metrics("vllm:prefix_cache_queries_total 1\n")
