"""Tiny HTTP helpers for the server tests (standard library only; loopback addresses only)."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlparse


def request(url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
            raw: bytes | None = None, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def post(url: str, path: str, body: Any = None, **kw: Any) -> tuple[int, dict[str, Any]]:
    status, _, data = request(url, "POST", path, body, **kw)
    return status, json.loads(data) if data else {}


def sse_events(data: bytes) -> list[str]:
    """The ``data:`` payloads of a server-sent-event body, in order."""
    return [line[len("data: "):] for line in data.decode().split("\n") if line.startswith("data: ")]
