"""The one client of the peer lane: the same code sends the same streaming ``/v1/completions`` request to
either engine (token-id prompt, greedy, ``ignore_eos``, usage on every chunk) and times it on arrival.

Invariant: a stream's ``pieces`` hold one entry per chunk with its text and the completion tokens counted
so far (``continuous_usage_stats``), so two engines' streams compare token by token; every read has a
timeout.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from dataclasses import dataclass, field

from kvviz.server.config import SERVED_MODEL

READ_TIMEOUT_S = 600.0


@dataclass
class Stream:
    """One answered request: the times of its chunks (seconds after sending), their texts and token counts,
    and its final usage."""

    sent: float = 0.0
    times: list[float] = field(default_factory=list)
    pieces: list[tuple[str, int]] = field(default_factory=list)
    completion_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    finished: float = 0.0

    @property
    def text(self) -> str:
        return "".join(p for p, _ in self.pieces)

    @property
    def ttft_s(self) -> float:
        return self.times[0]

    def decode_tok_s(self) -> float:
        """Tokens after the first per second between the first and the last token."""
        span = self.times[-1] - self.times[0]
        return (self.completion_tokens - 1) / span if span > 0 else float("nan")


def _split(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def complete(url: str, prompt: list[int], max_tokens: int) -> Stream:
    """Send one streaming completion and read it to the end."""
    body = {"model": SERVED_MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    conn = http.client.HTTPConnection(*_split(url), timeout=READ_TIMEOUT_S)
    out = Stream()
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"{url} answered {resp.status}: {resp.read()[:300]!r}")
    for raw in resp:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        usage = chunk.get("usage") or {}
        for choice in chunk.get("choices") or []:
            out.times.append(time.perf_counter() - start)
            out.pieces.append((choice.get("text") or "", int(usage.get("completion_tokens") or 0)))
        if usage:
            out.completion_tokens = int(usage.get("completion_tokens") or 0)
            out.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            out.cached_tokens = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    out.finished = time.perf_counter() - start
    conn.close()
    if not out.times:
        raise RuntimeError(f"{url} streamed no token")
    return out


def complete_many(url: str, prompts: list[list[int]], max_tokens: int) -> tuple[list[Stream], float]:
    """All ``prompts`` at once, one thread each; their streams and the wall time of the whole batch."""
    results: list[Stream | BaseException | None] = [None] * len(prompts)
    gate = threading.Barrier(len(prompts) + 1)

    def one(i: int) -> None:
        try:
            gate.wait(timeout=60)
            results[i] = complete(url, prompts[i], max_tokens)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(prompts))]
    for t in threads:
        t.start()
    gate.wait(timeout=60)
    start = time.perf_counter()
    for t in threads:
        t.join(timeout=READ_TIMEOUT_S)
    wall = time.perf_counter() - start
    for r in results:
        if not isinstance(r, Stream):
            raise RuntimeError(f"a concurrent stream failed: {r!r}")
    return results, wall  # type: ignore[return-value]


def get_text(url: str, path: str) -> str:
    conn = http.client.HTTPConnection(*_split(url), timeout=30)
    conn.request("GET", path)
    resp = conn.getresponse()
    text = resp.read().decode("utf-8")
    conn.close()
    if resp.status != 200:
        raise RuntimeError(f"{url}{path} answered {resp.status}")
    return text


_SAMPLE = re.compile(r"^(vllm:prefix_cache_(?:queries|hits)(?:_total)?)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$")


def prefix_counters(url: str) -> dict[str, float]:
    """vLLM's prefix-cache counters from /metrics, summed over their labels (``queries``, ``hits``)."""
    out = {"queries": 0.0, "hits": 0.0}
    for line in get_text(url, "/metrics").splitlines():
        m = _SAMPLE.match(line.strip())
        if m:
            key = "queries" if "queries" in m.group(1) else "hits"
            out[key] += float(m.group(2))
    return out
