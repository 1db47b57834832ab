"""The HTTP path's cost: the same workload from 16 concurrent clients through the OpenAI-compatible API
(uvicorn on 127.0.0.1, streaming chat completions) and straight into the engine loop in-process.

One engine loop serves both; each round resets the prefix cache first, so both paths see the same
cache state. The HTTP clients run in their own process (as a benchmark client would: their JSON and
socket work is not the server's cost); the in-process clients are threads beside the engine. Rounds
alternate (HTTP, in-process, ...) and each key is the median over ``ROUNDS``.
Keys: ``server_http_rps`` / ``server_inproc_rps`` (finished requests per second of wall time),
``server_http_p95_ttft_ms`` / ``server_inproc_p95_ttft_ms`` (client-side time to the first token: for
HTTP the first content chunk, in-process the first output), ``server_http_throughput_ratio``
(HTTP rps / in-process rps), ``server_errors``.
"""

from __future__ import annotations

import http.client
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

CLIENTS = 16
REQUESTS_PER_CLIENT = 2
MAX_TOKENS = 8
ROUNDS = 3
SYSTEM = "You are a concise assistant for a workshop on prompt caching. Answer in one short sentence."
QUESTIONS = ["What is a KV block?", "Why does one edit break the cache?", "What is a cache salt?",
             "What is evicted first?"]

TARGETS = [
    ("server_http_throughput_ratio", "the HTTP path costs <= 15% of throughput (ratio >= 0.85)",
     lambda r: r["server_http_throughput_ratio"] >= 0.85),
    ("server_errors", "no errors on either path", lambda r: r["server_errors"] == 0),
]


def _messages(client: int, k: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{QUESTIONS[(client + k) % len(QUESTIONS)]} (client {client})"}]


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(0.95 * (len(ordered) - 1))))]


def _burst(one) -> tuple[float, list[float], int]:
    """Run ``one(client, k)`` (returns ttft seconds or raises) from CLIENTS threads; (wall, ttfts, errors)."""
    ttfts: list[float] = []
    errors = [0]
    lock = threading.Lock()
    gate = threading.Barrier(CLIENTS + 1)

    def client(i: int) -> None:
        gate.wait()
        for k in range(REQUESTS_PER_CLIENT):
            try:
                t = one(i, k)
                with lock:
                    ttfts.append(t)
            except Exception:  # noqa: BLE001 - counted
                with lock:
                    errors[0] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    gate.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - start, ttfts, errors[0]


def http_one(port: int, i: int, k: int) -> float:
    """One streaming chat request; seconds to its first content chunk."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"model": "embedded", "messages": _messages(i, k), "max_tokens": MAX_TOKENS,
                       "temperature": 0, "stream": True})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}")
    ttft = None
    for line in resp:
        if ttft is None and line.startswith(b"data: ") and b'"content": "' in line and b'"content": ""' not in line:
            ttft = time.perf_counter() - t0
        if line.startswith(b"data: [DONE]"):
            break
    conn.close()
    if ttft is None:
        raise RuntimeError("no content")
    return ttft


def http_burst(port: int) -> None:
    """The HTTP clients' process: one burst against 127.0.0.1:port, its (wall, ttfts, errors) as JSON."""
    wall, ttfts, errors = _burst(lambda i, k: http_one(port, i, k))
    print(json.dumps({"wall": wall, "ttfts": ttfts, "errors": errors}))


def _http_round(port: int) -> tuple[float, list[float], int]:
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", f"from bench.bench_server import http_burst; http_burst({port})"],
                         cwd=root, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"the HTTP client process failed: {out.stderr.strip()[-300:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return data["wall"], data["ttfts"], data["errors"]


def run(results: dict) -> None:
    from kvviz.engine import EngineConfig, EngineLoop, LLMEngine, SamplingParams
    from kvviz.model import load_model
    from kvviz.server.app import create_app
    from kvviz.server.chat_template import render_chat
    from kvviz.server.config import ServerConfig
    from kvviz.server.protocol import ChatMessage
    from kvviz.server.uvicorn_server import ServerThread

    loop = EngineLoop(LLMEngine(load_model(), EngineConfig()))
    server = ServerThread(create_app(lambda: loop, ServerConfig(port=0, max_waiting=1000))).start()
    tokenizer = loop.engine.tokenizer
    counter = [0]
    count_lock = threading.Lock()

    def inproc_one(i: int, k: int) -> float:
        ids = render_chat(tokenizer, [ChatMessage(**m) for m in _messages(i, k)])
        with count_lock:
            counter[0] += 1
            rid = f"bench-{counter[0]}"
        t0 = time.perf_counter()
        ttft = None
        for _out in loop.submit(rid, ids, SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0)):
            if ttft is None:
                ttft = time.perf_counter() - t0
        return ttft if ttft is not None else float("nan")

    rps = {"http": [], "inproc": []}
    p95 = {"http": [], "inproc": []}
    errors = 0
    try:
        _burst(inproc_one)  # warm-up: first forward passes, allocator
        _http_round(server.port)  # warm-up: the client process, uvicorn
        for _ in range(ROUNDS):
            for name in ("http", "inproc"):
                loop.call(lambda engine: engine.reset_prefix_cache())
                wall, ttfts, errs = _http_round(server.port) if name == "http" else _burst(inproc_one)
                errors += errs
                rps[name].append(len(ttfts) / wall)
                p95[name].append(_p95(ttfts) * 1000.0 if ttfts else float("nan"))
    finally:
        server.stop()
        loop.close()
    results["server_clients"] = CLIENTS
    results["server_http_rps"] = round(statistics.median(rps["http"]), 2)
    results["server_inproc_rps"] = round(statistics.median(rps["inproc"]), 2)
    results["server_http_p95_ttft_ms"] = round(statistics.median(p95["http"]), 1)
    results["server_inproc_p95_ttft_ms"] = round(statistics.median(p95["inproc"]), 1)
    results["server_http_throughput_ratio"] = round(results["server_http_rps"] / results["server_inproc_rps"], 3)
    results["server_rps_spread"] = {k: [round(v, 2) for v in vs] for k, vs in rps.items()}
    results["server_errors"] = errors
