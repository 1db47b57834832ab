"""A small trace replayer: sends a JSONL trace's requests to an OpenAI-compatible server at their
timestamps and sets the measured prefix-cache hit rate beside the workload analyzer's prediction for
the server's pool size.

Lines: Mooncake (``hash_ids``, ``input_length``, ``output_length``, ``timestamp`` in ms), OpenAI chat
(``messages``), ``prompt`` or ``token_ids`` (kvviz.analysis.workload.trace validates them). A Mooncake
hash id becomes ``tokens_per_hash`` deterministic token ids (the same id, the same tokens), so equal
prefixes stay equal; the prediction is computed on exactly the token ids sent (or, for chat lines, on
the chat template's ids, as the server renders them), at the server's block size, with the analyzer's
own functions (kvviz.analysis.workload: ``analyze``, pure LRU; ``replay_block_pool``, kvviz's vLLM block pool).

Measured = sum of ``usage.prompt_tokens_details.cached_tokens`` / sum of ``usage.prompt_tokens`` over
the requests that succeeded.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from kvviz.analysis.workload.load import load_trace
from kvviz.analysis.workload.parse import line_kind
from kvviz.analysis.workload.pool import replay_block_pool
from kvviz.analysis.workload.reuse_distance import analyze
from kvviz.analysis.workload.trace import MOONCAKE_BLOCK_SIZE, WorkloadError, iter_lines

TOKEN_LOW, TOKEN_HIGH = 100, 49_000  # synthetic ids inside SmolLM2's vocabulary, clear of its special tokens
MAX_WORKERS = 64
TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Send:
    """One request to send: its path, JSON body and arrival offset (seconds from the first)."""

    path: str
    body: dict[str, Any]
    at_s: float


@dataclass
class ReplayResult:
    """What the replay measured, beside the analyzer's prediction."""

    requests: int
    ok: int
    errors: dict[str, int]
    prompt_tokens: int
    cached_tokens: int
    duration_s: float
    peak_in_flight: int
    ttft_s: list[float] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def hash_tokens(hash_id: int, n: int) -> list[int]:
    rng = random.Random(f"kvviz-replay:{hash_id}")
    return [rng.randrange(TOKEN_LOW, TOKEN_HIGH) for _ in range(n)]


def plan(data: bytes | str, tokens_per_hash: int, max_tokens: int, model: str | None,
         speedup: float = 1.0, limit: int | None = None) -> tuple[list[Send], str]:
    """The requests to send and the prediction's trace (JSONL of what the server will see)."""
    sends: list[Send] = []
    lines: list[str] = []
    first_ts: float | None = None
    for number, obj in iter_lines(data):
        if limit is not None and len(sends) >= limit:
            break
        kind = line_kind(obj, number)
        ts = obj.get("timestamp")
        ts = float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None
        if ts is not None and first_ts is None:
            first_ts = ts
        at = 0.0 if ts is None or first_ts is None else max(0.0, (ts - first_ts) / 1000.0 / speedup)
        out = obj.get("output_length")
        answer = min(max_tokens, out) if isinstance(out, int) and not isinstance(out, bool) and out > 0 else max_tokens
        body: dict[str, Any] = {"max_tokens": answer, "temperature": 0.0}
        if model:
            body["model"] = model
        kept = {k: obj[k] for k in ("timestamp",) if k in obj}
        if kind == "hash_ids":
            ids = _mooncake_tokens(obj, number, tokens_per_hash)
            sends.append(Send("/v1/completions", {**body, "prompt": ids}, at))
            lines.append(json.dumps({"token_ids": ids, **kept}))
        elif kind == "token_ids":
            sends.append(Send("/v1/completions", {**body, "prompt": obj["token_ids"]}, at))
            lines.append(json.dumps({"token_ids": obj["token_ids"], **kept}))
        elif kind == "prompt":
            sends.append(Send("/v1/completions", {**body, "prompt": obj["prompt"]}, at))
            lines.append(json.dumps({"prompt": obj["prompt"], **kept}))
        else:
            sends.append(Send("/v1/chat/completions", {**body, "messages": obj["messages"]}, at))
            lines.append(json.dumps({"messages": obj["messages"], **kept}))
    return sends, "\n".join(lines)


def _mooncake_tokens(obj: dict[str, Any], line: int, tokens_per_hash: int) -> list[int]:
    ids = obj.get("hash_ids")
    length = obj.get("input_length")
    if not isinstance(ids, list) or not ids or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
        raise WorkloadError(f"line {line}: 'hash_ids' must be a non-empty list of integers", "not_id_list", line=line)
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise WorkloadError(f"line {line}: a 'hash_ids' line needs a positive 'input_length'", "needs_input_length",
                            line=line)
    # the last hash id may cover a partial block: keep its share of input_length, at least one token
    last = length - (len(ids) - 1) * MOONCAKE_BLOCK_SIZE
    last_tokens = max(1, min(tokens_per_hash, round(last * tokens_per_hash / MOONCAKE_BLOCK_SIZE)))
    tokens: list[int] = []
    for i, h in enumerate(ids):
        block = hash_tokens(h, tokens_per_hash)
        tokens += block if i < len(ids) - 1 else block[:last_tokens]
    return tokens


def predict(trace_text: str, block_size: int, num_blocks: int, concurrency: int) -> dict[str, Any]:
    """The analyzer's hit rates for the sent requests at the server's pool (``num_blocks`` counts vLLM's
    null block, as ``num_gpu_blocks`` does): pure LRU and kvviz's block pool with ``concurrency`` running."""
    trace = load_trace(trace_text, block_size)
    capacity = max(1, num_blocks - 1)
    profile = analyze(trace)
    pool = replay_block_pool(trace, capacity, max(1, concurrency))
    return {"capacity_blocks": capacity, "block_size": block_size, "lru_hit_rate": profile.hit_rate(capacity),
            "pool_hit_rate": pool.hit_rate, "pool_concurrency": pool.concurrency,
            "infinite_cache_hit_rate": profile.hit_rate(profile.unique_blocks)}


# ------------------------------------------------------------------ talking to the server
def _conn(url: str) -> http.client.HTTPConnection:
    u = urlparse(url)
    if u.scheme != "http" or not u.hostname:
        raise ValueError(f"--url must be http://HOST:PORT, got {url[:80]!r}")
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=TIMEOUT_S)


def get(url: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    conn = _conn(url)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def pool_of(url: str, headers: dict[str, str]) -> tuple[int, int]:
    """(block_size, num_gpu_blocks) from the server's ``vllm:cache_config_info`` metric."""
    from prometheus_client.parser import text_string_to_metric_families

    status, data = get(url, "/metrics", headers)
    if status != 200:
        raise ValueError(f"{url}/metrics answered {status}")
    for family in text_string_to_metric_families(data.decode("utf-8", "replace")):
        if family.name == "vllm:cache_config_info":
            for sample in family.samples:
                if "block_size" in sample.labels and sample.labels.get("num_gpu_blocks", "").isdigit():
                    return int(sample.labels["block_size"]), int(sample.labels["num_gpu_blocks"])
    raise ValueError(f"{url}/metrics has no vllm:cache_config_info with block_size and num_gpu_blocks")


def _post(url: str, send: Send, headers: dict[str, str]) -> tuple[int, dict[str, Any], float]:
    conn = _conn(url)
    start = time.perf_counter()
    try:
        conn.request("POST", send.path, json.dumps(send.body), {"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        data = resp.read()
        elapsed = time.perf_counter() - start
        try:
            return resp.status, json.loads(data), elapsed
        except ValueError:
            return resp.status, {}, elapsed
    finally:
        conn.close()


def run(url: str, sends: list[Send], headers: dict[str, str]) -> ReplayResult:
    """Send every request at its offset (one thread each, at most ``MAX_WORKERS`` in flight)."""
    lock = threading.Lock()
    res = ReplayResult(len(sends), 0, {}, 0, 0, 0.0, 0)
    in_flight = [0]
    start = time.perf_counter()

    def one(send: Send) -> None:
        with lock:
            in_flight[0] += 1
            res.peak_in_flight = max(res.peak_in_flight, in_flight[0])
        try:
            status, body, elapsed = _post(url, send, headers)
        except OSError as exc:
            status, body, elapsed = -1, {"error": {"type": type(exc).__name__}}, 0.0
        with lock:
            in_flight[0] -= 1
            if status == 200 and isinstance(body.get("usage"), dict):
                usage = body["usage"]
                res.ok += 1
                res.prompt_tokens += int(usage.get("prompt_tokens", 0))
                res.cached_tokens += int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
                res.ttft_s.append(elapsed)
            else:
                key = str(status) if status > 0 else str((body.get("error") or {}).get("type"))
                res.errors[key] = res.errors.get(key, 0) + 1

    with ThreadPoolExecutor(MAX_WORKERS) as pool:
        for send in sends:
            wait = send.at_s - (time.perf_counter() - start)
            if wait > 0:
                threading.Event().wait(wait)  # the trace's own arrival time
            pool.submit(one, send)
    res.duration_s = time.perf_counter() - start
    return res
