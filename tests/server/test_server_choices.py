"""A request with several choices (n, lists of prompts) over the engine-loop test double: each child is
its own engine request, named as vLLM names them, admitted together, and all are aborted when the client
leaves, mid-stream or while waiting."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlparse

from server_http import post

COMPLETIONS = "/v1/completions"


def _send(url: str, body: dict) -> http.client.HTTPConnection:
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("POST", COMPLETIONS, json.dumps(body), {"Content-Type": "application/json"})
    return conn


def _wait_for(cond, timeout: float = 2.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_children_are_named_and_seeded_as_vllm(served):
    s = served()
    status, body = post(s.url, COMPLETIONS, {"prompt": ["ab", "cd"], "n": 2, "seed": 10, "max_tokens": 2})
    assert status == 200 and [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    subs = s.loop.submitted[-4:]
    base = body["id"]
    assert sorted(rid for rid, *_ in subs) == sorted([f"0_{base}-0", f"1_{base}-0", f"0_{base}-1", f"1_{base}-1"])
    assert sorted(p.seed for _, _, p, _ in subs) == [10, 10, 11, 11]


def test_a_client_that_leaves_mid_stream_aborts_every_child(served):
    s = served(step_s=0.01)
    conn = _send(s.url, {"prompt": "long", "n": 3, "max_tokens": 240, "stream": True})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.readline().startswith(b"data: ")
    ids = [rid for rid, *_ in s.loop.submitted[-3:]]
    conn.sock.close()
    conn.close()
    assert _wait_for(lambda: set(ids) <= set(s.loop.aborted)), (ids, s.loop.aborted)
    assert not set(ids) & set(s.loop.running)


def test_a_client_that_leaves_while_waiting_aborts_every_child(served):
    s = served()
    s.loop.gate.clear()
    conn = _send(s.url, {"prompt": "never", "n": 2, "max_tokens": 5})
    assert _wait_for(lambda: len(s.loop.submitted) == 2)
    conn.sock.close()
    ids = [rid for rid, *_ in s.loop.submitted]
    assert _wait_for(lambda: set(ids) <= set(s.loop.aborted)), (ids, s.loop.aborted)


def test_more_children_than_the_queue_holds_is_a_400(served):
    s = served(max_waiting=4)
    status, body = post(s.url, COMPLETIONS, {"prompt": ["a", "b", "c"], "n": 2})
    assert status == 400 and body["error"]["param"] == "n"
    assert post(s.url, COMPLETIONS, {"prompt": ["a", "b"], "n": 2, "max_tokens": 1})[0] == 200
