"""The engine's HTTP side, both optional: its ``/tokenize`` endpoint (so prompts are tokenized by the
engine's own tokenizer) and its Prometheus ``/metrics`` (prefix-cache queries and hits counters).
Every call has a timeout and a size cap; failures are ``EngineHTTPError`` with one line."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

TIMEOUT_S = 3.0
MAX_BYTES = 8 * 1024 * 1024
# vLLM v1 counters (Prometheus appends _total); queries and hits are counted in tokens.
QUERIES = "vllm:prefix_cache_queries_total"
HITS = "vllm:prefix_cache_hits_total"
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")


class EngineHTTPError(ValueError):
    """The engine's HTTP endpoint could not be used (one-line reason)."""


def check_url(url: str) -> str:
    value = (url or "").strip()
    if not re.fullmatch(r"https?://[^\s/]+(/[^\s]*)?", value):
        raise EngineHTTPError(f"{value[:80]!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/metrics)")
    return value


def _fetch(req: urllib.request.Request | str) -> bytes:
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 - http(s) checked above
            body = resp.read(MAX_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise EngineHTTPError(f"cannot reach the engine: {getattr(exc, 'reason', exc)}") from None
    if len(body) > MAX_BYTES:
        raise EngineHTTPError(f"the engine's answer is over {MAX_BYTES // 2**20} MiB")
    return body


def tokenize_remote(url: str, text: str, model: str | None = None) -> list[int]:
    """Token ids of ``text`` from vLLM's ``POST /tokenize`` (``{"prompt": ...}`` -> ``{"tokens": [...]}``)."""
    body: dict[str, object] = {"prompt": text}
    if model:
        body["model"] = model
    req = urllib.request.Request(check_url(url), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        tokens = json.loads(_fetch(req))["tokens"]
    except (ValueError, KeyError, TypeError):
        raise EngineHTTPError("the /tokenize answer has no 'tokens' list") from None
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise EngineHTTPError("the /tokenize answer's 'tokens' is not a list of integers")
    return tokens


@dataclass(frozen=True, slots=True)
class PrefixCacheCounters:
    """Prefix-cache counters summed over every label set: tokens queried and tokens hit."""

    queries: float
    hits: float


def parse_metrics(text: str) -> PrefixCacheCounters:
    """The prefix-cache counters in a Prometheus text exposition; EngineHTTPError when absent."""
    totals = {QUERIES: 0.0, HITS: 0.0}
    found: set[str] = set()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) in totals:
            try:
                totals[m.group(1)] += float(m.group(3))
            except ValueError:
                continue
            found.add(m.group(1))
    if found != set(totals):
        raise EngineHTTPError(f"no {QUERIES} / {HITS} counters in the metrics (is it a vLLM /metrics URL?)")
    return PrefixCacheCounters(totals[QUERIES], totals[HITS])


def scrape_metrics(url: str) -> PrefixCacheCounters:
    """GET ``url`` and parse its prefix-cache counters."""
    return parse_metrics(_fetch(check_url(url)).decode("utf-8", "replace"))


def hit_rate(before: PrefixCacheCounters, after: PrefixCacheCounters) -> float | None:
    """Hits / queries between two scrapes (None when nothing was queried in between)."""
    queries = after.queries - before.queries
    return (after.hits - before.hits) / queries if queries > 0 else None
