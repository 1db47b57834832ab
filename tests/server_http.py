"""Tiny HTTP helpers for the server tests (standard library only; loopback addresses only)."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse


@contextlib.contextmanager
def loopback_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 (a free port) by a daemon thread; yields its base URL, shuts it down after."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


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


class LogRecords(logging.Handler):
    """Every record of the server's and uvicorn's loggers while attached (``attach``/``detach``)."""

    NAMES = ("uvicorn", "uvicorn.error", "kvviz.server")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def attach(self) -> LogRecords:
        for name in self.NAMES:
            logging.getLogger(name).addHandler(self)
        return self

    def detach(self) -> None:
        for name in self.NAMES:
            logging.getLogger(name).removeHandler(self)

    def tracebacks(self) -> list[str]:
        return [r.getMessage() for r in self.records
                if r.exc_info or "Traceback" in r.getMessage() or "Exception in ASGI" in r.getMessage()]
