"""Admission (503 + Retry-After, as vLLM's --max-num-queued-reqs), disconnect-aborts, /metrics through prometheus_client's parser, and
the KV-event publisher read by kvviz's own subscriber (over the engine-loop test double)."""

from __future__ import annotations

import http.client
import json
import threading
from urllib.parse import urlparse

from prometheus_client.parser import text_string_to_metric_families
from server_http import post, request


def _open_stream(url: str, body: dict) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("POST", "/v1/completions", json.dumps({**body, "stream": True}),
                 {"Content-Type": "application/json"})
    return conn, conn.getresponse()


def test_full_waiting_queue_is_503_with_retry_after_and_counted(served):
    s = served(max_waiting=2)
    s.loop.gate.clear()  # the engine holds every request before its first token
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(post(s.url, "/v1/completions",
                                                                   {"prompt": "wait", "max_tokens": 1})[0]))
               for _ in range(2)]
    for t in threads:
        t.start()
    while len(s.loop.submitted) < 2:  # both admitted before the third arrives
        threads[0].join(0.01)
    status, headers, data = request(s.url, "POST", "/v1/completions", {"prompt": "third", "max_tokens": 1})
    assert status == 503 and headers["retry-after"] == "1"
    err = json.loads(data)["error"]
    assert err["type"] == "Service Unavailable" and err["code"] == 503 and err["param"] is None
    scraped = {(x.name, tuple(sorted(x.labels.items()))): x.value
               for fam in text_string_to_metric_families(request(s.url, "GET", "/metrics")[2].decode())
               for x in fam.samples}
    model = s.config.model_name
    assert scraped[("vllm:admission_rejections_total", (("model_name", model), ("reason", "max_num_queued_reqs")))] == 1
    assert scraped[("vllm:admission_rejections_total", (("model_name", model),
                                                        ("reason", "max_num_queued_tokens")))] == 0
    s.loop.gate.set()
    for t in threads:
        t.join(10)
    assert results == [200, 200]
    assert post(s.url, "/v1/completions", {"prompt": "after", "max_tokens": 1})[0] == 200


def test_a_client_that_disconnects_mid_stream_aborts_its_request(served):
    s = served(step_s=0.01)
    conn, resp = _open_stream(s.url, {"prompt": "long answer", "max_tokens": 100})
    assert resp.status == 200
    assert resp.readline().startswith(b"data: ")  # the first chunk arrived: the request runs
    rid = s.loop.submitted[-1][0]
    conn.sock.close()  # the client dies
    conn.close()
    assert s.loop.aborted_event.wait(1.0), "no abort within a second of the disconnect"
    assert rid in s.loop.aborted and rid not in s.loop.running


def test_a_client_that_disconnects_while_waiting_aborts_its_request(served):
    s = served()
    s.loop.gate.clear()
    u = urlparse(s.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("POST", "/v1/completions", json.dumps({"prompt": "never answered", "max_tokens": 5}),
                 {"Content-Type": "application/json"})
    while not s.loop.submitted:
        s.loop.aborted_event.wait(0.01)
    conn.sock.close()
    assert s.loop.aborted_event.wait(1.0)
    assert s.loop.submitted[-1][0] in s.loop.aborted


def _metrics(url: str) -> dict[str, float]:
    status, headers, data = request(url, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(data.decode()):
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                continue
            key = sample.name + (f"[{sample.labels['finished_reason']}]" if "finished_reason" in sample.labels else "")
            out[key] = sample.value
    return out


def test_metrics_parse_and_counters_move(served):
    s = served()
    post(s.url, "/v1/completions", {"prompt": "metrics metrics", "max_tokens": 2})
    before = _metrics(s.url)
    for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:kv_cache_usage_perc",
                 "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:time_to_first_token_seconds_count",
                 "vllm:e2e_request_latency_seconds_count", "vllm:generation_tokens_total"):
        assert name in before, name
    post(s.url, "/v1/completions", {"prompt": "metrics metrics", "max_tokens": 2})
    after = _metrics(s.url)
    assert after["vllm:prefix_cache_queries_total"] == before["vllm:prefix_cache_queries_total"] + 16
    assert after["vllm:prefix_cache_hits_total"] == before["vllm:prefix_cache_hits_total"] + 12
    assert after["vllm:e2e_request_latency_seconds_count"] == before["vllm:e2e_request_latency_seconds_count"] + 1
    assert after["vllm:request_success_total[length]"] == before["vllm:request_success_total[length]"] + 1


def test_metrics_before_the_engine_exists(served):
    s = served(warm=False)
    data = request(s.url, "GET", "/metrics")[2].decode()
    names = {f.name for f in text_string_to_metric_families(data)}
    assert "vllm:time_to_first_token_seconds" in names and "vllm:prefix_cache_hits" not in names
